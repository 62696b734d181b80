"""The fast summary evaluator agrees exactly with the reference model."""

import math
import random

import pytest

from conftest import validation_cases
from storeloop.errors import MappingError
from storeloop.model.evaluate import evaluate
from storeloop.model.fast import FastModel
from storeloop.formats.load import load_arch, load_energy_table, load_mapping, load_workload
from storeloop.ir import LevelMapping, Loop, Mapping

CASES = [c for c in validation_cases("valid") if "cnn" not in c.name]


def prime_factors(n):
    out, p = [], 2
    while n > 1:
        while n % p == 0:
            out.append(p)
            n //= p
        p += 1
    return out


def random_mapping(rng, arch, workload):
    nlev = len(arch.levels)
    temporal = [[] for _ in range(nlev)]
    spatial = [[] for _ in range(nlev)]
    room = [arch.fanout(i)[1] for i in range(nlev)]     # X fanout left
    for d, bound in enumerate(workload.bounds):
        for p in prime_factors(bound):
            li = 0 if rng.random() < 0.75 else rng.randrange(nlev)   # keep inner tiles small
            if room[li] % p == 0 and rng.random() < 0.3:
                room[li] //= p
                spatial[li].append(Loop(d, p, True, "X"))
            else:
                temporal[li].append(Loop(d, p))
    levels = []
    names = [t.name for t in workload.tensors]
    for li in range(nlev):
        rng.shuffle(temporal[li])
        keep = None if li == 0 or rng.random() < 0.6 else frozenset(n for n in names if rng.random() < 0.7)
        levels.append(LevelMapping(tuple(temporal[li]), tuple(spatial[li]), keep))
    return Mapping(tuple(levels))


def compared(fast: FastModel, mappings) -> list:
    """The reference results of the valid ``mappings``, after checking the fast model's cycles,
    per-level cycles and energy against each (and that it refuses the others the same way)."""
    out = []
    for m in mappings:
        try:
            ref = evaluate(fast.arch, fast.workload, m, fast.energy)
        except MappingError as exc:
            with pytest.raises(MappingError) as info:
                fast.evaluate(m)
            assert info.value.kind == exc.kind
            continue
        got = fast.evaluate(m)
        assert got.cycles == ref.cycles
        assert got.level_cycles == [lv.cycles for lv in ref.levels]
        assert math.isclose(got.energy_pJ, ref.energy_pJ, rel_tol=1e-12)
        out.append(ref)
    return out


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_fast_equals_reference(case):
    arch = load_arch(case / "arch.yaml")
    workload = load_workload(case / "problem.yaml")
    energy = load_energy_table(arch, case / "ERT.yaml", case / "ART.yaml")
    mappings = [load_mapping(case / "mapping.yaml", arch, workload)]
    rng = random.Random(case.name)
    mappings += [random_mapping(rng, arch, workload) for _ in range(200)]
    assert len(compared(FastModel(arch, workload, energy), mappings)) >= 10


SSD_VARIANTS = [("", {}), ("layout: {B: [d, c, q, k, n, j], A: [d, c, k, p, j, m]}", {}),
                ("", {"levels.Disk.ssd.accelerator": "host", "levels.Disk.ssd.channels": 2}),
                ("", {"levels.Disk.ssd.channels": 32, "levels.Disk.ssd.page_size": "4 KiB"})]


@pytest.mark.parametrize("variant", range(len(SSD_VARIANTS)))
def test_fast_equals_reference_on_an_ssd_backed_disk(tmp_path, variant):
    """An SSD below the Disk (request streams from each tile's runs in the layout, queue depth,
    the host link): the fast model prices the same streams as the reference model, on random
    mappings of two database sizes, with the Disk's layout given or declared and the accelerator
    behind the host link."""
    from pathlib import Path

    from storeloop import price

    root = Path(__file__).parents[1]
    layout, fields = SSD_VARIANTS[variant]
    text = (root / "arch" / "onionchopper-ssd.yaml").read_text()
    if layout:
        text = text.replace("      block_size: 1\n      # the Disk", f"      block_size: 1\n      {layout}\n      # the Disk", 1)
    path = tmp_path / "ssd.yaml"
    path.write_text(text)
    arch = load_arch(path, fields)
    assert arch.levels[0].ssd is not None and bool(arch.levels[0].layout) == bool(layout)
    energy = price(arch)
    refs = []
    for size in ("1GiB", "64GiB"):
        workload = load_workload(root / "workloads" / f"onionpir-{size}.yaml")
        fast = FastModel(arch, workload, energy)
        assert fast.simple and fast.ssd and not fast.batchable
        rng = random.Random(f"{variant}-{size}")
        refs += compared(fast, [random_mapping(rng, arch, workload) for _ in range(150)])
    slow = sum(r.levels[0].cycles > r.compute_cycles for r in refs)      # the SSD's streams set the time
    assert len(refs) >= 150 and slow >= 30, (len(refs), slow)
