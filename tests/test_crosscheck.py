"""Exports that real Timeloop runs as they are, and storeloop crosscheck against its stats files."""

import json
import os
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT, validation_cases
from storeloop.crosscheck import compare, export
from storeloop.formats.timeloop import parse_stats
from storeloop.formats.timeloop.write import TIMELOOP_COMPUTE, TIMELOOP_STORAGE
from storeloop.energy import price
from storeloop.model.evaluate import evaluate
from storeloop.formats import timeloop
from storeloop.formats.load import load_arch, load_energy_table, load_mapping, load_workload

VALID = validation_cases("valid")


@pytest.mark.parametrize("case", VALID, ids=lambda c: c.name)
def test_crosscheck_agrees_with_every_stats_file(case):
    """Every count, the cycles and the printed energy parsed from Timeloop's own stats text."""
    arch = load_arch(case / "arch.yaml")
    workload = load_workload(case / "problem.yaml")
    mapping = load_mapping(case / "mapping.yaml", arch, workload)
    energy = load_energy_table(arch, case / "ERT.yaml", case / "ART.yaml")
    stats = parse_stats((case / "timeloop-model.stats.txt").read_text())
    expected = json.loads((case / "expected.json").read_text())
    assert stats["cycles"] == expected["summary"]["cycles"]
    rows = compare(evaluate(arch, workload, mapping, energy), stats)
    assert len(rows) > 3 * len(arch.levels)
    assert [r for r in rows if not r.ok] == []


def test_parse_stats_rejects_other_text():
    from storeloop.errors import SpecError

    with pytest.raises(SpecError):
        parse_stats("not a stats file\n", "x.txt")


def test_export_of_onionchopper_is_timeloop_ready_and_prices_like_storeloop(tmp_path):
    arch = load_arch(ROOT / "arch" / "onionchopper.yaml")
    workload = load_workload(ROOT / "workloads" / "onionpir-64GiB.yaml")
    mapping = load_mapping(ROOT / "mappings" / "onionchopper-thesis-best.yaml", arch, workload)
    energy = price(arch)[0]
    files, notes = export(arch, workload, mapping, energy, tmp_path)
    assert {f.name for f in files} == {"arch.yaml", "problem.yaml", "mapping.yaml", "ERT.yaml", "ART.yaml"}
    text = (tmp_path / "arch.yaml").read_text()
    assert "vector_access_energy" not in text                  # Timeloop reads only the hyphenated name
    comps = {}

    def walk(node):
        for c in node.get("local", []):
            comps[c["name"]] = c
        for sub in node.get("subtree", []):
            walk(sub)
    import yaml
    walk(yaml.safe_load(text)["architecture"]["subtree"][0])
    assert {c["class"] for c in comps.values()} <= TIMELOOP_STORAGE | TIMELOOP_COMPUTE
    assert comps["Disk"]["class"] == "DRAM" and comps["Disk"]["attributes"]["storeloop-class"] == "Disk"
    assert comps["MAC"]["class"] == "intmac"
    assert any("Disk: class Disk exported as DRAM" in n for n in notes)
    # every component has ERT/ART tables under Accelergy's full names
    ert = yaml.safe_load((tmp_path / "ERT.yaml").read_text())["ERT"]["tables"]
    names = {t["name"] for t in ert}
    assert names == set(timeloop.component_paths(arch).values())
    assert "system.L1[0..1].SRAM" in names
    # the exported files, read back, give storeloop's own numbers (Timeloop prices them the same way)
    a2 = load_arch(tmp_path / "arch.yaml")
    w2 = load_workload(tmp_path / "problem.yaml")
    m2 = load_mapping(tmp_path / "mapping.yaml", a2, w2)
    e2 = load_energy_table(a2, tmp_path / "ERT.yaml", tmp_path / "ART.yaml")
    mine, back = evaluate(arch, workload, mapping, energy), evaluate(a2, w2, m2, e2)
    assert back.cycles == mine.cycles == 13_811_004_212
    assert back.energy_pJ == pytest.approx(mine.energy_pJ, rel=1e-12)
    assert back.area_um2 == pytest.approx(mine.area_um2, rel=1e-12)


def test_export_notes_what_timeloop_cannot_express_and_strict_refuses(tmp_path):
    cmd = [sys.executable, "-m", "storeloop.cli", "export", str(ROOT / "arch" / "onionchopper-4KiB-pages.yaml"),
           str(ROOT / "workloads" / "onionpir-64GiB.yaml"), "--out", str(tmp_path / "x")]
    ok = subprocess.run(cmd, capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    assert "page_size 4096 B not expressible in Timeloop" in ok.stderr
    strict = subprocess.run(cmd + ["--strict"], capture_output=True, text=True)
    assert strict.returncode == 2 and "Traceback" not in strict.stderr
    assert "page_size" in strict.stderr and "--strict" in strict.stderr


def test_crosscheck_cli_with_a_stats_file_and_without_timeloop(tmp_path):
    case = next(c for c in VALID if c.name == "a2-dram-mac4-8b__rot3-t1024__b2-r1")
    base = [sys.executable, "-m", "storeloop.cli", "crosscheck", str(case / "arch.yaml"), str(case / "problem.yaml"),
            str(case / "mapping.yaml"), "--ert", str(case / "ERT.yaml"), "--art", str(case / "ART.yaml")]
    r = subprocess.run(base + ["--stats", str(case / "timeloop-model.stats.txt")], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "12 of 12 numbers agree" in r.stdout
    # a different mapping's stats: the differing numbers are listed, exit 1
    other = next(c for c in VALID if c.name == "a2-dram-mac4-8b__matmul-96x40x72__r1")
    bad = subprocess.run(base + ["--stats", str(other / "timeloop-model.stats.txt")], capture_output=True, text=True)
    assert bad.returncode == 1 and "<-- differs" in bad.stdout
    env = {"PATH": "/nonexistent"}
    none = subprocess.run(base, capture_output=True, text=True, env=env)
    assert none.returncode == 2 and "timeloop-model is not on PATH" in none.stderr and "Traceback" not in none.stderr


# --------------------------------------------------------------------- against a real timeloop-model
FUZZ_SEEDS = range(int(os.environ.get("STORELOOP_FUZZ_CASES", "60")))


@pytest.mark.skipif(shutil.which("timeloop-model") is None,
                    reason="needs timeloop-model on PATH (../shared/tools/build-timeloop-oracle, then . env.sh)")
@pytest.mark.parametrize("seed", FUZZ_SEEDS)
def test_random_mappings_agree_with_a_real_timeloop(seed, tmp_path):
    """Random strided/dilated convolutions and random mappings (tilings at every level, X/Y
    splits, bypass) on the corpus's a3/a6/a8 architectures, run through the Timeloop v3.0.3 that
    made the corpus: every count, the cycles, energy and area agree (crosscheck's rows). 60 cases
    by default; STORELOOP_FUZZ_CASES=N runs N (the window link rules of nest.py were found this
    way: 13 of the first 800 differed before them)."""
    import random

    from test_model_invariants import ARCHS, cnn

    rng = random.Random(seed)
    agree_with_timeloop(ARCHS[sorted(ARCHS)[seed % len(ARCHS)]], cnn(rng), rng, tmp_path)


ALL_ARCHS = {}
for _case in validation_cases("valid"):
    if _case.name[:1] == "a" and _case.name[1:2].isdigit():
        ALL_ARCHS.setdefault(_case.name.split("-")[0], _case / "arch.yaml")


def plain_einsum(rng):
    """A random 2-4 rank einsum with plain indices: Z[...] = A[...] * B[...] over 3-4 dims."""
    from storeloop.ir import Tensor, Workload

    n = rng.randint(3, 4)
    dims = tuple("MNKJ"[:n])
    bounds = tuple(rng.choice([1, 2, 3, 4, 6, 8]) for _ in dims)
    while True:
        a, b = (sorted(rng.sample(range(n), rng.randint(1, n))) for _ in range(2))
        z = sorted(set(range(n)) - (set(a) & set(b)) or {0})
        if set(a) | set(b) | set(z) == set(range(n)):
            break
    ranks = lambda ds: tuple(((d, 1),) for d in ds)
    return Workload("einsum", dims, bounds, (Tensor("A", ranks(a)), Tensor("B", ranks(b)),
                                             Tensor("Z", ranks(z), read_write=True)))


@pytest.mark.skipif(shutil.which("timeloop-model") is None,
                    reason="needs timeloop-model on PATH (../shared/tools/build-timeloop-oracle, then . env.sh)")
@pytest.mark.parametrize("seed", FUZZ_SEEDS)
def test_random_einsums_on_every_corpus_arch_agree_with_a_real_timeloop(seed, tmp_path):
    """As above, on every architecture of the corpus (a1-a8: 1D and 2D fanouts at one to three
    levels, 8- to 64-bit words) with plain einsums as well as convolutions."""
    import random

    from test_model_invariants import cnn

    rng = random.Random(10_000 + seed)
    arch_file = ALL_ARCHS[sorted(ALL_ARCHS)[seed % len(ALL_ARCHS)]]
    agree_with_timeloop(arch_file, plain_einsum(rng) if rng.random() < 0.5 else cnn(rng), rng, tmp_path)


def agree_with_timeloop(arch_file, work, rng, folder):
    """A random mapping of ``work`` that fits ``arch_file``, priced by storeloop and by
    timeloop-model: every number crosscheck compares agrees."""
    from test_model_invariants import random_mapping
    from storeloop.crosscheck import crosscheck
    from storeloop.errors import MappingError

    arch = load_arch(arch_file)
    energy = load_energy_table(arch, arch_file.parent / "ERT.yaml", arch_file.parent / "ART.yaml")
    for _ in range(200):                     # a mapping that fits; one loop per dim per spatial level
        mapping = random_mapping(rng, arch, work)
        if any(len({lp.dim for lp in lm.spatial}) < len(lm.spatial) for lm in mapping.levels):
            continue
        try:
            result = evaluate(arch, work, mapping, energy)
            break
        except MappingError:
            continue
    else:
        pytest.skip("no mapping fits")
    rows, _ = crosscheck(arch, work, mapping, energy, result, keep=folder)
    bad = [f"{r.what}: storeloop {r.storeloop:g}, Timeloop {r.timeloop:g}" for r in rows if not r.ok]
    assert not bad, f"{arch_file.parent.name}\n{work}\n{mapping}\n" + "\n".join(bad)


def test_eyeriss_tutorial_design_agrees_with_timeloop_v3_0_3():
    """Timeloop's Eyeriss-like example design (v0.4 files, loaded as they are) against the
    timeloop-model v3.0.3 run of storeloop's export of it (tests/data/eyeriss-timeloop-v3.0.3,
    made with ``storeloop crosscheck --keep``): every number agrees."""
    from storeloop.crosscheck import crosscheck

    d = ROOT / "tests" / "timeloop-exercises" / "design-eyeriss_like"
    arch, work = load_arch(d / "arch.yaml"), load_workload(d / "problem.yaml")
    mapping = load_mapping(d / "mapping.yaml", arch, work)
    energy = load_energy_table(arch, d / "ERT.yaml", d / "ART.yaml")
    result = evaluate(arch, work, mapping, energy)
    rows, _ = crosscheck(arch, work, mapping, energy, result,
                         stats_file=ROOT / "tests" / "data" / "eyeriss-timeloop-v3.0.3" / "timeloop-model.stats.txt")
    assert len(rows) >= 50 and [r.what for r in rows if not r.ok] == []
    glb = next(lvl for lvl in result.levels if lvl.name == "shared_glb")
    assert glb.tensors["Inputs"].reads_per_instance == 935_424
