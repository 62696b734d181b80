"""Every notebook in notebooks/ runs top to bottom (they only call storeloop's functions), and the
numbers its text states are ones its code or outputs hold (or a paper's, cited on the same line)."""

import json
import re

import pytest

from conftest import ROOT

NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))

# a number in prose: 12,833,318,209 or 64.99 or 256 (not part of a word, a file name or a version)
NUMBER = re.compile(r"(?<![\w.\-/])(\d{1,3}(?:,\d{3})+|\d+(?:\.\d+)?)(?![\w/])")
# a line that cites a source: the number on it is the paper's, said where it comes from
CITED = re.compile(r"thesis|paper|seed|published|\b\d{3}:\d+|Table \d", re.I)


def _prose_numbers(text: str) -> list[str]:
    """The numbers a markdown cell states, less code spans, link targets, chapter/figure/section
    references and heading numbers, and the lines that cite a paper."""
    out = []
    for line in text.splitlines():
        if CITED.search(line):
            continue
        line = re.sub(r"`[^`]*`", " ", line)
        line = re.sub(r"\]\([^)]*\)", "]", line)
        line = re.sub(r"\b(ch|chapter|Fig|Figure|section|§|issue)\.?\s*\d+(\.\d+)*([–-]\d+(\.\d+)*)?", " ", line, flags=re.I)
        line = re.sub(r"^#+\s*\d+\s*[·.]", " ", line)
        out += [m.group(1) for m in NUMBER.finditer(line)]
    return out


def _held(nb) -> list[float]:
    """Every number in the notebook's code and text outputs."""
    vals = []
    for c in nb["cells"]:
        if c["cell_type"] != "code":
            continue
        texts = ["".join(c["source"])]
        for o in c.get("outputs", []):
            texts.append("".join(o.get("text", "")))
            texts += ["".join(v) for k, v in o.get("data", {}).items() if k.startswith("text/")]
        for t in texts:
            vals += [float(m.group(0).replace(",", "")) for m in re.finditer(r"\d[\d,]*(?:\.\d+)?(?:[eE][-+]?\d+)?", t)
                     if m.group(0).replace(",", "").replace(".", "", 1).replace("e", "", 1).replace("E", "", 1)
                     .replace("-", "").replace("+", "").isdigit()]
    return vals


def _agrees(stated: str, held: list[float]) -> bool:
    """A stated number some held one gives at the stated precision (as a share: x100; in J, mm²,
    ms: the usual unit steps)."""
    x = float(stated.replace(",", ""))
    places = len(stated.split(".")[1]) if "." in stated else 0
    for v in held:
        for c in (v, v * 100, v / 1e12, v / 1e6, v / 1e3, v * 1e3, v * 1e6):
            if round(c, places) == x or (places == 0 and x >= 100 and abs(c - x) <= 0.5):
                return True
    return False


def unchecked_numbers(nb) -> list[str]:
    held = _held(nb)
    return [s for c in nb["cells"] if c["cell_type"] == "markdown"
            for s in _prose_numbers("".join(c["source"])) if not _agrees(s, held)]


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
    # what the text says is what this run computed
    assert not unchecked_numbers(json.loads(nbformat.writes(nb))), \
        f"{path.name}: numbers in the text that no code or output of this run holds"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_a_notebooks_text_states_what_its_saved_outputs_show(path):
    """The notebook as committed: every number its text states is held by its saved outputs or
    code (a paper's number is on a line that cites it)."""
    assert not unchecked_numbers(json.loads(path.read_text()))


def test_the_prose_check_catches_a_number_no_output_holds():
    nb = {"cells": [{"cell_type": "code", "source": ["x = 2\n"], "outputs": [{"text": "67.11 ms per query\n"}]},
                    {"cell_type": "markdown", "source": ["The design takes 67.11 ms; from 3 queries on it binds.\n"]}]}
    assert unchecked_numbers(nb) == ["3"]
    nb["cells"][1]["source"] = ["The thesis says 169.09 J (ch. 6.4); ours: 67.1 ms.\n"]
    assert unchecked_numbers(nb) == []
