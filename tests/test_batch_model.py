"""The vectorized batch evaluator agrees exactly with the reference model."""

import math
import random

import numpy as np
import pytest

from conftest import validation_cases
from storeloop.errors import MappingError
from storeloop.model.batch import BatchModel, LoopStructure, Slot, structure_of
from storeloop.model.evaluate import evaluate
from storeloop.formats.load import load_arch, load_energy_table, load_mapping, load_workload
from test_fast_model import prime_factors

CASES = [c for c in validation_cases("valid") if "cnn" not in c.name]


def random_structure(rng, arch, workload):
    slots = []
    names = [t.name for t in workload.tensors]
    keep = []
    for li in range(len(arch.levels)):
        dims = list(range(len(workload.dims)))
        rng.shuffle(dims)
        slots += [Slot(li, d) for d in dims]
        if arch.fanout(li)[0] > 1:
            slots += [Slot(li, d, True, rng.choice("XY")) for d in rng.sample(range(len(workload.dims)), 2)]
        keep.append(None if li == 0 or rng.random() < 0.6 else frozenset(n for n in names if rng.random() < 0.7))
    return LoopStructure(tuple(slots), tuple(keep))


def random_rows(rng, structure, workload, n):
    rows = np.ones((n, len(structure.slots)), dtype=np.int64)
    for r in range(n):
        for d, b in enumerate(workload.bounds):
            cols = [j for j, s in enumerate(structure.slots) if s.dim == d]
            for p in prime_factors(b):
                j = cols[0] if rng.random() < 0.7 else rng.choice(cols)   # favour the outermost level
                rows[r, j] *= p
    return rows


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_batch_equals_reference(case):
    arch = load_arch(case / "arch.yaml")
    workload = load_workload(case / "problem.yaml")
    energy = load_energy_table(arch, case / "ERT.yaml", case / "ART.yaml")
    model = BatchModel(arch, workload, energy)
    rng = random.Random(case.name)
    batches = [structure_of(load_mapping(case / "mapping.yaml", arch, workload))]
    batches = [(batches[0][0], np.array([batches[0][1]]))]
    for _ in range(6):
        s = random_structure(rng, arch, workload)
        batches.append((s, random_rows(rng, s, workload, 40)))
    compared = rejected = 0
    for structure, rows in batches:
        out = model.evaluate(structure, rows)
        for r, row in enumerate(rows):
            try:
                ref = evaluate(arch, workload, structure.mapping(row), energy)
            except MappingError:
                assert not out.valid[r]
                rejected += 1
                continue
            assert out.valid[r]
            assert out.cycles[r] == ref.cycles
            assert list(out.level_cycles[r]) == [lv.cycles for lv in ref.levels]
            assert math.isclose(out.energy_pJ[r], ref.energy_pJ, rel_tol=1e-12)
            compared += 1
    assert compared >= 5, (compared, rejected)
