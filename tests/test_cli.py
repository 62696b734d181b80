"""The `storeloop model` command: the repository's OnionChopper files, JSON output, exit codes."""

import json
import subprocess
import sys

from conftest import ROOT, VALIDATION

THESIS = VALIDATION / "thesis__ssd-einsum__pir-onion"


def storeloop(*args, cwd=ROOT):
    return subprocess.run([sys.executable, "-m", "storeloop.cli", *map(str, args)], cwd=cwd,
                          capture_output=True, text=True)


def test_thesis_mapping_on_corpus_files_gives_timeloop_cycles():
    p = storeloop("model", THESIS / "arch.yaml", THESIS / "problem.yaml", THESIS / "mapping.yaml",
                  "--ert", THESIS / "ERT.yaml", "--art", THESIS / "ART.yaml", "--json")
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["summary"]["cycles"] == 13_811_004_212
    assert [lvl["name"] for lvl in out["storage_levels"]] == ["RF", "SRAM", "DRAM", "Disk"]
    disk = out["storage_levels"][-1]["dataspaces"]["B"]
    assert disk["reads_total"] == 8_589_934_592 and disk["energy_total_pJ"] == 8_589_934_592 * 20000


def test_repository_twin_equals_corpus():
    """arch/, workloads/ and mappings/ (storeloop format) give the corpus's Timeloop result."""
    p = storeloop("model", "arch/onionchopper.yaml", "workloads/onionpir-64GiB.yaml",
                  "mappings/onionchopper-thesis-best.yaml", "--ert", "arch/onionchopper.ERT.yaml",
                  "--art", "arch/onionchopper.ART.yaml", "--json")
    assert p.returncode == 0, p.stderr
    ours = json.loads(p.stdout)
    expected = json.loads((THESIS / "expected.json").read_text())
    assert ours["summary"]["cycles"] == expected["summary"]["cycles"]
    assert abs(ours["summary"]["energy_pJ"] / expected["summary"]["energy_pJ"] - 1) < 1e-6
    for g, e in zip(ours["storage_levels"], expected["storage_levels"]):
        for t in ("A", "B", "C"):
            for f in ("reads_total", "fills_total", "updates_total"):
                assert g["dataspaces"][t][f] == e["dataspaces"][t][f], (g["name"], t, f)


def test_table_output():
    p = storeloop("model", "arch/onionchopper.yaml", "workloads/onionpir-64GiB.yaml",
                  "mappings/onionchopper-thesis-best.yaml", "--ert", "arch/onionchopper.ERT.yaml")
    assert p.returncode == 0, p.stderr
    assert "13,811,004,212" in p.stdout and "bound by Disk" in p.stdout


def test_invalid_mapping_exits_2_with_reason():
    case = VALIDATION / "invalid" / "invalid-capacity__ssd-einsum__pir-onion"
    p = storeloop("model", case / "arch.yaml", case / "problem.yaml", case / "mapping.yaml",
                  "--ert", case / "ERT.yaml", "--art", case / "ART.yaml")
    assert p.returncode == 2
    assert "SRAM" in p.stderr and "151552 exceeds buffer capacity 512" in p.stderr
    assert "Traceback" not in p.stderr


def test_bad_input_exits_2_without_traceback(tmp_path):
    bad = tmp_path / "arch.yaml"
    bad.write_text("arch:\n  name: x\n  levels: []\n")
    p = storeloop("model", bad, "workloads/onionpir-64GiB.yaml", "mappings/onionchopper-thesis-best.yaml",
                  "--ert", "arch/onionchopper.ERT.yaml")
    assert p.returncode == 2
    assert "arch.yaml:" in p.stderr and "Traceback" not in p.stderr
    assert len(p.stderr.splitlines()) < 20


def test_missing_file_exits_2():
    p = storeloop("model", "nope.yaml", "workloads/onionpir-64GiB.yaml", "mappings/onionchopper-thesis-best.yaml")
    assert p.returncode == 2 and "nope.yaml" in p.stderr and "Traceback" not in p.stderr


def test_export_round_trip(tmp_path):
    """storeloop specs exported as Timeloop v0.3 evaluate to the same result."""
    p = storeloop("export", "arch/onionchopper.yaml", "workloads/onionpir-64GiB.yaml",
                  "mappings/onionchopper-thesis-best.yaml", "--out", tmp_path)
    assert p.returncode == 0, p.stderr
    q = storeloop("model", tmp_path / "arch.yaml", tmp_path / "problem.yaml", tmp_path / "mapping.yaml",
                  "--ert", "arch/onionchopper.ERT.yaml", "--art", "arch/onionchopper.ART.yaml", "--json")
    assert q.returncode == 0, q.stderr
    assert json.loads(q.stdout)["summary"]["cycles"] == 13_811_004_212


def test_import_storeloop_is_light():
    code = "import sys, storeloop; print(any(m in sys.modules for m in ('pydantic', 'yaml', 'numpy')))"
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert p.stdout.strip() == "False"


def test_map_searches_a_convolution_and_says_how():
    """Timeloop's 1D convolution tutorial, mapped from its arch alone: the report names the
    windowed space and how many leaves the model priced, and proves its answer."""
    ex = ROOT / "tests" / "timeloop-exercises" / "tutorial-ex02-tiling"
    p = storeloop("map", ex / "arch.yaml", ex / "problem.yaml", "--ert", ex / "ERT.yaml", "--art", ex / "ART.yaml",
                  "--json")
    assert p.returncode == 0, p.stderr
    search = json.loads(p.stdout)["search"]
    assert search["optimal"] and "windows" in search["space"] and search["bound_violations"] == 0
    p = storeloop("map", ex / "arch.yaml", ex / "problem.yaml", "--ert", ex / "ERT.yaml", "--art", ex / "ART.yaml")
    assert p.returncode == 0 and "sliding windows: every loop order" in p.stdout, p.stderr


def test_map_says_when_its_energy_bound_comes_from_what_the_search_left_open():
    """OnionPIR on OnionChopper with the Disk as an SSD: the map space's energy bound leaves 13 %
    (it cannot tell that a cycle-optimal mapping streams B through the DRAM), the subtrees the
    search leaves open at the cycle bound close it. The report and the printed certificate say which
    bound the gap is to, and the JSON's gap is the printed one."""
    arch, work = ROOT / "arch" / "onionchopper-ssd.yaml", ROOT / "workloads" / "onionpir-64GiB.yaml"
    p = storeloop("map", arch, work, "--json")
    assert p.returncode == 0, p.stderr
    s = json.loads(p.stdout)["search"]
    space = sum(s["lower_bound_energy_parts"].values())
    assert s["cycles_optimal"] and s["lower_bound_energy_searched_pJ"] == s["lower_bound_energy_pJ"] > 1.1 * space
    p = storeloop("map", arch, work)
    assert p.returncode == 0, p.stderr
    assert "at these cycles, from the subtrees the search left open (the map space's: compute" in p.stdout
    assert f"energy gap {100 * s['energy_gap']:.4f}%" in p.stdout, p.stdout


def test_map_refuses_a_window_on_a_paged_level(tmp_path):
    conv = tmp_path / "conv.yaml"
    conv.write_text("workload:\n  name: conv\n  einsum: O[k,p] = W[k,r] * I[p+r]\n  bounds: {K: 4, P: 8, R: 3}\n")
    p = storeloop("map", ROOT / "tests" / "data" / "paged-disk.yaml", conv)
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert "sliding windows" in p.stderr and "Disk" in p.stderr, p.stderr


def test_map_imperfect_writes_a_mapping_that_model_prices_the_same(tmp_path):
    """``map --imperfect`` on a matmul of primes: it says what it pads, writes ``imperfect: true``,
    and ``model`` on the written mapping prints the same cycles, energy and padding."""
    arch, work = ROOT / "tests" / "data" / "arch16.yaml", ROOT / "tests" / "data" / "mm-primes.yaml"
    out = tmp_path / "m.yaml"
    p = storeloop("map", arch, work, "--imperfect", "--out", out, "--json")
    assert p.returncode == 0, p.stderr
    mapped = json.loads(p.stdout)
    s = mapped["search"]
    assert "imperfect" in s["space"] and s["imperfect"]["padded"] and s["optimal"]
    assert "imperfect: true" in out.read_text()
    p = storeloop("model", arch, work, out, "--json")
    assert p.returncode == 0, p.stderr
    priced = json.loads(p.stdout)["summary"]
    assert priced["cycles"] == mapped["summary"]["cycles"] and priced["energy_pJ"] == mapped["summary"]["energy_pJ"]
    assert priced["padding_computes"] == mapped["summary"]["padding_computes"] > 0
    p = storeloop("map", arch, work, "--imperfect")
    assert p.returncode == 0 and "imperfect factorizations:" in p.stdout and "the best pads M 97 -> " in p.stdout
