"""Input halos: model/nest.py's memoized walk against a literal replay of Timeloop v3.0.3's rule.

The replay visits every leaf of Timeloop's simulated walk (each temporal loop above the level as
iteration 0 and iteration 1, the latter weighted f - 1), builds each tile as an explicit set of
points, and applies OperationSpace::SaveAndSubtractIfSameStride: keep the previous tile and the
translation that led to it; subtract while the translation stays the same (or after a reset),
otherwise take the whole tile and reset. Random sliding-window tensors and loop nests.
"""

import itertools
import math
import random

import pytest

from test_compute_deltas import simulated_visits
from storeloop.model.nest import _arrivals, _extents
from storeloop.ir import Tensor


def replay(t, loops, stride, L, spans):
    above = [(d, f, s) for (li, d, f, sp), s in zip(loops, stride) if li < L and not sp and f > 1]

    def tile_at(pos):
        ranges = [range(sum(c * pos.get(d, 0) for d, c in rank),
                        sum(c * (pos.get(d, 0) + spans[d] - 1) for d, c in rank) + 1) for rank in t.ranks]
        return set(itertools.product(*ranges))

    def centroid(points):
        return tuple(sum(p[r] for p in points) / len(points) for r in range(len(t.ranks)))

    prev, kept, total = None, None, 0
    for weight, pos in simulated_visits(above):
        cur = tile_at(pos)
        translation = None if prev is None else tuple(round(b - a) for a, b in zip(centroid(prev), centroid(cur)))
        if kept is None or translation == kept:
            delta = len(cur - prev) if prev is not None else len(cur)
            kept = translation if kept is None else kept
        else:
            delta, kept = len(cur), None
        total += weight * delta
        prev = cur
    return total


@pytest.mark.parametrize("seed", range(300))
def test_memoized_walk_equals_the_literal_replay(seed):
    rng = random.Random(seed)
    ndims = 3                                   # P, R, C: ranks [P + R] (maybe strided) and [C]
    stride_p = rng.choice([1, 1, 2])
    window = (((0, stride_p), (1, 1)), ((2, 1),))           # [P*stride + R], [C]
    plain = (((0, stride_p),), ((2, 1),))                   # [P*stride], [C]: the closed form
    t = Tensor("Inputs", window if seed % 3 else plain)
    nlev = rng.randint(2, 3)
    loops = []                                  # (level, dim, factor, spatial), outermost first
    for li in range(nlev):
        for d in rng.sample(range(ndims), ndims):
            if rng.random() < 0.7:
                loops.append((li, d, rng.randint(2, 3), li > 0 and rng.random() < 0.2))
    stride, running = [1] * len(loops), [1] * ndims
    for i in range(len(loops) - 1, -1, -1):
        stride[i] = running[loops[i][1]]
        running[loops[i][1]] *= loops[i][2]
    L = nlev - 1                                # the innermost level: its tile spans its own loops
    spans = [math.prod(f for li, dd, f, _ in loops if li >= L and dd == d) for d in range(ndims)]
    extents = _extents(t, spans)
    assert _arrivals(t, loops, stride, L, extents, math.prod(extents)) == replay(t, loops, stride, L, spans)


def literal_fanout(t, loops, stride, L, width):
    """Timeloop v3.0.3's fanout walk with explicit point sets, child by child: each child's tile
    at every simulated step, its delta by SaveAndSubtractIfSameStride (as :func:`replay`), the
    parent sending each distinct delta once (multicast), and, where that lowers the words sent, a
    child whose delta a mesh neighbour received one step earlier taking it over a link."""
    from storeloop.model.costs import grid_neighbours
    nlev = max(li for li, *_ in loops) + 1
    spans = [math.prod(f for li, dd, f, _ in loops if li > L and dd == d) for d in range(3)]
    spatial = [(d, f, s) for (li, d, f, sp), s in zip(loops, stride) if sp and li == L]
    temporal = [(d, f, s) for (li, d, f, sp), s in zip(loops, stride) if li <= L and not sp]
    assert nlev > L
    origins = []                                 # per child (nest order, innermost fastest)
    for idx in itertools.product(*[range(f) for _, f, _ in spatial]):
        o = {}
        for (d, _, s), i in zip(spatial, idx):
            o[d] = o.get(d, 0) + i * s
        origins.append(o)
    near = grid_neighbours(len(origins), width)

    def tile_at(pos):
        return frozenset(itertools.product(*[range(sum(c * pos.get(d, 0) for d, c in rank),
                                                   sum(c * (pos.get(d, 0) + spans[d] - 1) for d, c in rank) + 1)
                                             for rank in t.ranks]))

    last, kept = [None] * len(origins), [None] * len(origins)
    before = [frozenset()] * len(origins)
    reads = links = 0
    for weight, base in simulated_visits(temporal):
        deltas = []
        for p, o in enumerate(origins):
            pos = {d: base.get(d, 0) + o.get(d, 0) for d in set(base) | set(o)}
            cur = tile_at(pos)
            low = tuple(sum(c * pos.get(d, 0) for d, c in rank) for rank in t.ranks)
            shift = None if last[p] is None else tuple(a - b for a, b in zip(low, last[p][0]))
            if last[p] is None:
                delta = cur
            elif kept[p] is None or shift == kept[p]:
                delta, kept[p] = cur - last[p][1], shift
            else:
                delta, kept[p] = cur, None
            last[p] = (low, cur)
            deltas.append(delta)
        without = sum(len(s) for s in set(deltas))
        linked = [bool(s) and any(before[q] == s for q in near[p]) for p, s in enumerate(deltas)]
        with_links = sum(len(s) for s in {s for s, ln in zip(deltas, linked) if not ln})
        if with_links < without:
            reads += weight * with_links
            links += weight * sum(len(s) for s, ln in zip(deltas, linked) if ln)
        else:
            reads += weight * without
        before = deltas
    return reads, links


@pytest.mark.parametrize("seed", range(300))
def test_the_fanout_walk_equals_the_literal_replay(seed):
    """model/nest.py's fanout walk (one child walked, the others its translates, each loop's
    sub-walk memoized by the state it enters with) against :func:`literal_fanout`: the words the
    parent sends and those moved over links, for random windowed tensors under a fanout on a
    mesh of random width."""
    from storeloop.model.nest import _fanout_reads, _spans
    rng = random.Random(seed)
    ndims, stride_p = 3, rng.choice([1, 1, 2])
    t = Tensor("Inputs", (((0, stride_p), (1, rng.choice([1, 1, 2]))), ((2, 1),)))   # [P*s + R*d], [C]
    loops = []
    for li in range(3):
        for d in rng.sample(range(ndims), ndims):
            if rng.random() < 0.6:
                loops.append((li, d, rng.randint(2, 3), False))
        if li == 1:                                 # the fanout: level 1 to level 2
            for d in rng.sample(range(ndims), rng.randint(1, 2)):
                loops.append((1, d, rng.randint(2, 4), True))
    stride, running = [1] * len(loops), [1] * ndims
    for i in range(len(loops) - 1, -1, -1):
        stride[i] = running[loops[i][1]]
        running[loops[i][1]] *= loops[i][2]
    units = math.prod(f for li, _, f, sp in loops if sp)
    width = rng.randint(1, units)
    got = _fanout_reads(t, loops, stride, _spans(loops, 3, ndims), 1, width)
    assert got == literal_fanout(t, loops, stride, 1, width)
