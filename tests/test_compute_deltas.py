"""Timeloop's compute-level deltas, closed form (model/nest.py) against a literal simulation.

The simulation replays what Timeloop v3's nest analysis does for the operands of the compute
units, step by step: every temporal loop runs iteration 0 and iteration 1 (standing for the other
f - 1), the units under the innermost spatial loop of the innermost level share one delta state
(a point, the last translation, reset when the translation changes), and words equal across units
in one step are sent once (multicast). The model's closed form must give the same counts on random
mappings of the corpus architectures whose innermost level fans out to several units.
"""

import itertools
import random

import pytest

from conftest import validation_cases
from test_fast_model import random_mapping
from storeloop.model.nest import _flatten, analyze
from storeloop.ir.check import check_mapping
from storeloop.formats.load import load_arch, load_workload
from storeloop.ir import LevelMapping, Loop, Mapping


def merged(m: Mapping) -> Mapping:
    """One loop per (level, dimension, kind), in the order of each dimension's first loop."""
    def merge(loops, spatial):
        f = {}
        for lp in loops:
            f[lp.dim] = f.get(lp.dim, 1) * lp.factor
        return tuple(Loop(d, x, spatial, "X") if spatial else Loop(d, x) for d, x in f.items())
    return Mapping(tuple(LevelMapping(merge(lm.temporal, False), merge(lm.spatial, True), lm.keep) for lm in m.levels))

CASES = [c for c in validation_cases("valid")
         if c.name.startswith(("a2-", "a5-")) and "cnn" not in c.name and "simplepir__" not in c.name]


def simulated_visits(temporal):
    """Timeloop's simulated walk of temporal loops [(dim, factor, stride)], outermost first: each
    loop runs iteration 0, then iteration 1 standing for the other f - 1. Yields (weight,
    {dim: position}) per visit, in order."""
    for idx in itertools.product((0, 1), repeat=len(temporal)):
        weight, base = 1, {}
        for (d, f, s), i in zip(temporal, idx):
            if i:
                weight *= f - 1
                base[d] = base.get(d, 0) + s
        yield weight, base


def simulate(t, loops, L, nlev):
    """Words per instance of level L that the compute units take of tensor t (Timeloop's process)."""
    stride, running = [1] * len(loops), {}
    for i in range(len(loops) - 1, -1, -1):
        _, d, f, _ = loops[i]
        stride[i] = running.get(d, 1)
        running[d] = stride[i] * f
    temporal = [(d, f, s) for (li, d, f, sp), s in zip(loops, stride) if not sp]
    spatial = [(d, f, s) for (li, d, f, sp), s in zip(loops, stride) if sp and li >= L]
    grouped = bool(loops) and loops[-1][3] and loops[-1][0] == nlev - 1
    inner = spatial[-1][1] if grouped else 1
    units = []
    for idx in itertools.product(*[range(f) for _, f, _ in spatial]):
        off = {}
        for (d, _, s), i in zip(spatial, idx):
            off[d] = off.get(d, 0) + i * s
        units.append(off)
    state, total = {}, 0
    for weight, base in simulated_visits(temporal):
        sent = set()
        for k, off in enumerate(units):
            point = tuple(sum(c * (base.get(d, 0) + off.get(d, 0)) for d, c in rank) for rank in t.ranks)
            if not grouped:                       # innermost loop temporal: every compute reads
                sent.add(point)
                continue
            prev, prev_tr = state.get(k // inner, (None, None))
            tr = None if prev is None else tuple(a - b for a, b in zip(point, prev))
            if prev_tr is None or tr == prev_tr:  # same stride (or none yet): only what is new
                delta = point if point != prev else None
                prev_tr = tr if prev_tr is None else prev_tr
            else:                                 # the stride changed: the whole point again
                delta, prev_tr = point, None
            state[k // inner] = (point, prev_tr)
            if delta is not None:
                sent.add(delta)
        total += len(sent) * weight
    return total


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_closed_form_equals_timeloop_process(case):
    arch, workload = load_arch(case / "arch.yaml"), load_workload(case / "problem.yaml")
    nlev = len(arch.levels)
    rng = random.Random(case.name)
    checked = grouped = 0
    tries = 0
    while checked < 30 and tries < 3000:
        tries += 1
        m = merged(random_mapping(rng, arch, workload))
        try:
            check_mapping(arch, workload, m)
        except Exception:
            continue
        loops = _flatten(m)
        if sum(1 for lp in loops if not lp[3]) > 9:
            continue
        nest = analyze(arch, workload, m)
        grouped += bool(loops) and loops[-1][3] and loops[-1][0] == nlev - 1
        for t in workload.tensors:
            kept = [L for L in range(nlev) if m.levels[L].keeps(t.name)]
            L = kept[-1]                                       # the level the compute units read
            st = nest.levels[L].tensors[t.name]
            got = st.updates if t.read_write else st.reads
            assert got == simulate(t, loops, L, nlev), (t.name, m)
        checked += 1
    assert checked == 30 and grouped >= 5, "too few mappings end in a spatial loop to test the shared delta state"
