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


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_fast_equals_reference(case):
    arch = load_arch(case / "arch.yaml")
    workload = load_workload(case / "problem.yaml")
    energy = load_energy_table(arch, case / "ERT.yaml", case / "ART.yaml")
    fast = FastModel(arch, workload, energy)
    mappings = [load_mapping(case / "mapping.yaml", arch, workload)]
    rng = random.Random(case.name)
    mappings += [random_mapping(rng, arch, workload) for _ in range(200)]
    compared = 0
    for m in mappings:
        try:
            ref = evaluate(arch, workload, m, energy)
        except MappingError as exc:
            with pytest.raises(MappingError) as info:
                fast.evaluate(m)
            assert info.value.kind == exc.kind
            continue
        got = fast.evaluate(m)
        assert got.cycles == ref.cycles
        assert got.level_cycles == [lv.cycles for lv in ref.levels]
        assert math.isclose(got.energy_pJ, ref.energy_pJ, rel_tol=1e-12)
        compared += 1
    assert compared >= 10
