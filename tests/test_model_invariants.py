"""Invariants Timeloop's counts obey, on random convolutions and mappings (issue 22, part 3).

Problems: CNN layers with strides and dilations 1-3 and windows 1x1 to 5x5, on the corpus's
multi-level architectures: a 4x4 PE mesh under a GLB with RFs (a3), Disk -> DRAM -> 2 SRAMs -> 2
RFs each (a6), and 16 MACs as an 8x2 mesh directly under a GLB (a8). Mappings: random tilings over
every level, spatial loops split over X and Y, and bypass at one or two levels. The exact numbers
are the corpus's job; these checks hold for every mapping:

* a kept level is filled at least with its tile, and at most with its tile once per visit of the
  temporal loops above it (a reload every time);
* a parent never serves more than its children take: multicast and links only lower its reads;
* the outermost keeper of the outputs sees every output at least once;
* every MAC of the problem is computed once.

Over the 120 seeds: 116 have windows wider than 1, 81 bypass at some level, 56 split loops over X
and 26 over Y.
"""

from __future__ import annotations

import math
import random

import pytest

from conftest import validation_cases
from test_fast_model import prime_factors
from storeloop.errors import MappingError
from storeloop.model.nest import _flatten, analyze
from storeloop.formats.load import load_arch
from storeloop.ir import LevelMapping, Loop, Mapping, Tensor, Workload

ARCHS = {}
for case in validation_cases("valid"):
    for prefix in ("a3-", "a6-", "a8-"):
        if case.name.startswith(prefix) and prefix not in ARCHS:
            ARCHS[prefix] = case / "arch.yaml"


def cnn(rng) -> Workload:
    r, s = rng.randint(1, 5), rng.randint(1, 5)
    wstride, hstride, wdil, hdil = (rng.randint(1, 3) for _ in range(4))
    bounds = (rng.choice([1, 2, 4]), rng.choice([2, 4, 8]), r, s, rng.choice([1, 2]),
              rng.choice([2, 3, 4, 6]), rng.choice([2, 4, 5]))
    C, M, R, S, N, P, Q = range(7)
    tensors = (Tensor("Weights", (((C, 1),), ((M, 1),), ((R, 1),), ((S, 1),))),
               Tensor("Inputs", (((N, 1),), ((C, 1),), ((R, wdil), (P, wstride)), ((S, hdil), (Q, hstride)))),
               Tensor("Outputs", (((N, 1),), ((M, 1),), ((Q, 1),), ((P, 1),)), read_write=True))
    return Workload("cnn", ("C", "M", "R", "S", "N", "P", "Q"), bounds, tensors)


def random_mapping(rng, arch, workload) -> Mapping:
    nlev = len(arch.levels)
    temporal = [{} for _ in range(nlev)]
    spatial = [{} for _ in range(nlev)]
    room = [[arch.fanout(i)[1], arch.fanout(i)[2]] for i in range(nlev)]
    for d, bound in enumerate(workload.bounds):
        for p in prime_factors(bound):
            li = rng.randrange(nlev)
            axis = rng.randrange(2)
            if room[li][axis] % p == 0 and rng.random() < 0.4:
                room[li][axis] //= p
                key = (d, "XY"[axis])
                spatial[li][key] = spatial[li].get(key, 1) * p
            else:
                temporal[li][d] = temporal[li].get(d, 1) * p
    names = [t.name for t in workload.tensors]
    bypassed = rng.sample(range(1, nlev), min(nlev - 1, rng.randint(0, 2)))
    levels = []
    for li in range(nlev):
        order = list(temporal[li].items())
        rng.shuffle(order)
        keep = None
        if li in bypassed:
            keep = frozenset(n for n in names if rng.random() < 0.6)
        levels.append(LevelMapping(tuple(Loop(d, f) for d, f in order),
                                   tuple(Loop(d, f, True, a) for (d, a), f in spatial[li].items()), keep))
    return Mapping(tuple(levels))


@pytest.mark.parametrize("seed", range(120))
def test_counts_obey_timeloops_invariants(seed):
    rng = random.Random(seed)
    prefix = sorted(ARCHS)[seed % len(ARCHS)]
    arch = load_arch(ARCHS[prefix])
    workload = cnn(rng)
    mapping = random_mapping(rng, arch, workload)
    try:
        nest = analyze(arch, workload, mapping)
    except MappingError:                     # e.g. a bypass pattern the arch cannot hold
        pytest.skip("mapping refused")
    loops = _flatten(mapping)
    nlev = len(arch.levels)
    for t in workload.tensors:
        kept = [L for L in range(nlev) if mapping.levels[L].keeps(t.name)]
        for k, L in enumerate(kept):
            st = nest.levels[L].tensors[t.name]
            visits = math.prod(f for li, _, f, sp in loops if li < L and not sp)
            if k > 0 and not t.read_write:
                assert st.tile <= st.fills <= st.tile * visits, (t.name, L, st)
            if k + 1 < len(kept) and not t.read_write:
                child = nest.levels[kept[k + 1]]
                took = child.tensors[t.name].fills * child.utilized_instances
                assert st.reads * nest.levels[L].utilized_instances <= took, (t.name, L)
        if t.read_write:
            top = nest.levels[kept[0]].tensors[t.name]
            assert top.updates * nest.levels[kept[0]].utilized_instances >= workload.tensor_elements(t)
    assert nest.computes == workload.macs
