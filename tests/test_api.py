"""The Python API notebooks use: lazy `import storeloop`, results with units, map, sweep from a dict."""

import subprocess
import sys

import pytest

from conftest import ROOT


def test_import_is_lazy_and_plots_leave_the_backend_alone():
    code = ("import sys, storeloop; assert 'storeloop.model.evaluate' not in sys.modules; "
            "import matplotlib; matplotlib.use('svg'); import storeloop.plots; "
            "assert matplotlib.get_backend() == 'svg', matplotlib.get_backend(); print(storeloop.__version__)")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr


def test_evaluate_and_map_with_units():
    import storeloop as sl

    arch = sl.load_arch(ROOT / "arch" / "onionchopper.yaml")
    work = sl.load_workload(ROOT / "workloads" / "onionpir-64GiB.yaml")
    energy = sl.load_energy_table(arch, ROOT / "arch" / "onionchopper.ERT.yaml", ROOT / "arch" / "onionchopper.ART.yaml")
    r = sl.evaluate(arch, work, sl.load_mapping(ROOT / "mappings" / "onionchopper-thesis-best.yaml", arch, work), energy)
    assert r.cycles == 13_811_004_212
    assert r.time_s == pytest.approx(13_811_004_212 / 2e9)
    assert r.energy_J == pytest.approx(r.energy_pJ / 1e12) and r.energy_J == pytest.approx(182.735, rel=1e-5)
    d = r.to_dict()
    assert d["cycles"] == r.cycles and d["Disk.cycles"] == 13_811_004_212 and d["area_mm2"] == pytest.approx(r.area_um2 / 1e6)
    frame = r.to_frame()
    assert set(frame["level"]) == {"Disk", "DRAM", "SRAM", "RF"} and frame["energy_J"].sum() == pytest.approx(
        (r.energy_pJ - r.compute_energy_pJ) / 1e12)
    best = sl.map(arch, work, energy)
    assert best.result.cycles == 13_811_004_212 and best.search["stopped"] in ("energy-gap", "optimal")
    # the report is typed: its keys are attributes too, and it is still the dict --json prints
    assert best.search.stopped == best.search["stopped"] and best.search.lower_bound_cycles == 13_811_004_212
    assert isinstance(best.search, dict) and "energy_gap" in best.search
    with pytest.raises(AttributeError):
        best.search.no_such_field


def test_sweep_from_a_dict_returns_a_frame_with_numeric_parameters(tmp_path, monkeypatch):
    import storeloop as sl

    monkeypatch.chdir(tmp_path)
    df = sl.sweep({"name": "mine", "arch": str(ROOT / "arch" / "onionchopper.yaml"),
                   "workloads": [str(ROOT / "workloads" / "onionpir-1GiB.yaml")],
                   "parameters": {"levels.RF.capacity": ["16 words", "32 words"]},
                   "energy": {"ert": str(ROOT / "arch" / "onionchopper.ERT.yaml"),
                              "art": str(ROOT / "arch" / "onionchopper.ART.yaml")}})
    assert (tmp_path / "results" / "mine.sweep.yaml").is_file() and (tmp_path / "results" / "mine.sqlite").is_file()
    assert sorted(df["levels.RF.capacity.value"]) == [16.0, 32.0] and set(df["levels.RF.capacity.unit"]) == {"words"}
    assert (df["status"] == "ok").all() and (df["cycles"] == df["lower_bound_cycles"]).all()
    # a re-run resumes from the store: same frame
    assert sl.sweep(tmp_path / "results" / "mine.sweep.yaml")["key"].tolist() == df["key"].tolist()


def test_a_levels_placement_decides_what_counts_as_on_chip(tmp_path):
    """Placement is a typed field of a level (default: by class); the on-chip area follows it."""
    import storeloop as sl
    from storeloop.errors import SpecError

    text = (ROOT / "arch" / "onionchopper.yaml").read_text()
    arch = sl.load_arch(ROOT / "arch" / "onionchopper.yaml")
    work = sl.load_workload(ROOT / "workloads" / "onionpir-64GiB.yaml")
    energy = sl.load_energy_table(arch, ROOT / "arch" / "onionchopper.ERT.yaml", ROOT / "arch" / "onionchopper.ART.yaml")
    mapping = sl.load_mapping(ROOT / "mappings" / "onionchopper-thesis-best.yaml", arch, work)
    assert [lvl.off_chip for lvl in arch.levels] == [True, True, False, False]      # Disk, DRAM by class
    base = sl.evaluate(arch, work, mapping, energy)
    (tmp_path / "a.yaml").write_text(text.replace("      class: SRAM\n", "      class: SRAM\n      placement: off_chip\n"))
    moved = sl.load_arch(tmp_path / "a.yaml")
    assert moved.levels[2].off_chip and not moved.levels[3].off_chip
    r = sl.evaluate(moved, work, mapping, energy)
    sram = next(lvl for lvl in r.levels if lvl.name == "SRAM")
    assert r.on_chip_area_um2 == pytest.approx(base.on_chip_area_um2 - sram.area_total_um2)
    assert r.area_um2 == pytest.approx(base.area_um2)
    (tmp_path / "b.yaml").write_text(text.replace("      class: SRAM\n", "      class: SRAM\n      placement: offchip\n"))
    with pytest.raises(SpecError) as e:
        sl.load_arch(tmp_path / "b.yaml")
    assert "placement" in str(e.value) and "off_chip" in str(e.value) and e.value.line is not None


def test_the_api_is_plain_functions_over_plain_modules():
    """No module-level tricks: ``storeloop.sweep`` is a function, the sweep package is
    ``storeloop.sweeps`` (grid, store, run, results), an ordinary module that does not import the
    package's ``__init__`` API back."""
    import importlib
    import inspect
    import sys
    import types

    import storeloop as sl
    import storeloop.sweeps  # noqa: F401

    assert inspect.isfunction(sl.sweep) and inspect.isfunction(sl.map) and inspect.isfunction(sl.evaluate)
    assert type(sys.modules["storeloop.sweeps"]) is types.ModuleType
    for name in ("grid", "store", "run", "results"):
        source = inspect.getsource(importlib.import_module(f"storeloop.sweeps.{name}"))
        assert "from storeloop import" not in source and "import storeloop\n" not in source


def test_an_arch_loaded_with_fields_set_as_a_sweep_sets_them():
    """``load_arch(path, {parameter path: value})``: the same fields a sweep varies, set before the
    arch is read; a path the arch does not have is an error at once, and a Timeloop arch takes none."""
    import storeloop as sl
    from storeloop.errors import SpecError

    path = ROOT / "arch" / "onionchopper.yaml"
    base = sl.load_arch(path)
    four = sl.load_arch(path, [("levels.SRAM.instances", 4), ("levels.RF.instances", 4), ("compute.instances", 4)])
    assert [lvl.instances for lvl in four.levels][-2:] == [4, 4] and four.compute.instances == 4
    assert base.levels[-1].instances != 4
    assert sl.load_arch(path, {"levels.RF.capacity": "64 words"}).levels[-1].size_words == 64
    with pytest.raises(SpecError, match="no level named 'Rf'"):
        sl.load_arch(path, {"levels.Rf.capacity": "64 words"})
    tl = ROOT / "tests" / "corpus"
    timeloop_arch = next(tl.glob("*/arch.yaml"))
    with pytest.raises(SpecError, match="storeloop arch file"):
        sl.load_arch(timeloop_arch, {"levels.RF.capacity": "64 words"})


def test_no_api_name_is_also_a_submodule():
    """Importing ``storeloop.<module>`` binds that name on the package, so an API function of the
    same name would turn into the module once anything imported it."""
    import importlib.util

    import storeloop as sl

    clash = [n for n in sl.__all__ if importlib.util.find_spec(f"storeloop.{n}") is not None]
    assert not clash
    for name in sl.__all__:
        assert getattr(sl, name) is not None, name
