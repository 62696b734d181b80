"""Every notebook in notebooks/ runs top to bottom (they only call storeloop's functions)."""

import pytest

from conftest import ROOT

NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs(path):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    nb = nbformat.read(path, as_version=4)
    nbclient.NotebookClient(nb, timeout=600, kernel_name="python3",
                            resources={"metadata": {"path": str(path.parent)}}).execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.output_type == "error"]
    if any("plt." in c.source for c in nb.cells if c.cell_type == "code"):
        # inline figures are in the executed notebook (nothing switched the backend to Agg)
        assert any("image/png" in o.get("data", {}) for o in outputs), "a figure was drawn but not shown"
