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
