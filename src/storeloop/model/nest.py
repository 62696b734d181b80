"""Timeloop-compatible dense nest analysis.

For every storage level and tensor this computes what Timeloop v3's nest analysis computes:
tile sizes, per-instance reads, fills and updates, the partition each instance owns, and the
number of utilized instances. The semantics, checked against real Timeloop v3.0.3 runs in
``shared/validation`` (see ``tests/test_validation.py``):

* The loop nest is flattened outermost-first: each storage level contributes its temporal loops
  (outer to inner) followed by its spatial loops (its fanout to the level below). A level's *tile*
  of a tensor covers every loop of that level and of all levels below it. Each rank of a tensor is
  an affine sum of dimensions, so a tile's extent along a rank is ``sum(c * (F_d - 1)) + 1``
  (sliding windows included).
* Data enters a level (fills) when the temporal loops above it move its tile. Walking those loops
  innermost-first, a step that carries into loop ``k`` happens ``(f_k - 1) * prod(f_i, i > k)``
  times and always shifts the tile by the same vector. The new data per step is the difference
  of two axis-aligned boxes, taken as Timeloop's ``AxisAlignedHyperRectangle`` difference does:
  nothing when the tile does not move, a slab when it moves along exactly one rank by less than
  its extent, otherwise the whole tile.
* A parent serves each child fill once per distinct child tile: children separated by a spatial
  loop over a dimension the tensor does not use receive one multicast read.
* Outputs (read-write tensors): a level's updates are its child's write-backs (spatial reductions
  merged); its reads are updates minus the partition it owns, because the first write of an
  element needs no read (Timeloop's first-read elision). A child's output fills likewise skip the
  first residency of each element.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from storeloop.spec.check import check_mapping
from storeloop.spec.types import Arch, Mapping, Tensor, Workload


@dataclass(slots=True)
class TensorLevelStats:
    kept: bool
    tile: int = 0                    # utilized capacity (words) of one instance
    partition: int = 0               # distinct elements one instance handles over the run
    reads: int = 0                   # per instance
    fills: int = 0
    updates: int = 0


@dataclass(slots=True)
class LevelStats:
    name: str
    utilized_instances: int
    tensors: dict[str, TensorLevelStats]


@dataclass(slots=True)
class NestAnalysis:
    compute_cycles: int              # temporal iterations = computes per utilized compute unit
    computes: int
    utilized_compute_instances: int
    levels: list[LevelStats]         # aligned with arch.levels (outermost first)


def _flatten(mapping: Mapping) -> list[tuple[int, int, int, bool]]:
    """(level, dim, factor, spatial) for every loop with factor > 1, outermost first."""
    loops = []
    for li, lm in enumerate(mapping.levels):
        for lp in lm.temporal:
            if lp.factor > 1:
                loops.append((li, lp.dim, lp.factor, False))
        for lp in lm.spatial:
            if lp.factor > 1:
                loops.append((li, lp.dim, lp.factor, True))
    return loops


def _box_delta(shift: list[int], extents: list[int], tile: int) -> int:
    """Size of (box shifted by ``shift``) minus (box), as Timeloop's AAHR difference."""
    moved = [r for r, s in enumerate(shift) if s != 0]
    if not moved:
        return 0
    if len(moved) == 1:
        r = moved[0]
        s = abs(shift[r])
        if s < extents[r]:
            return s * (tile // extents[r])
    return tile


def analyze(arch: Arch, workload: Workload, mapping: Mapping) -> NestAnalysis:
    """Per-level, per-tensor access counts of ``mapping`` (no bandwidth, energy or capacity)."""
    check_mapping(arch, workload, mapping)
    nlev = len(arch.levels)
    ndims = len(workload.dims)
    loops = _flatten(mapping)

    # stride[i]: how far loop i moves its dimension per step (product of same-dim factors inside it)
    stride = [1] * len(loops)
    running = [1] * ndims
    for i in range(len(loops) - 1, -1, -1):
        _, d, f, _ = loops[i]
        stride[i] = running[d]
        running[d] *= f

    # inner[L][d]: product of dimension d's factors over levels >= L (the tile's span)
    # above_spatial[L][d]: product of dimension d's spatial factors over levels < L
    inner = [[1] * ndims for _ in range(nlev + 1)]
    above_spatial = [[1] * ndims for _ in range(nlev + 1)]
    for L in range(nlev - 1, -1, -1):
        inner[L] = inner[L + 1][:]
    for li, d, f, sp in loops:
        for L in range(li + 1):
            inner[L][d] *= f
        if sp:
            for L in range(li + 1, nlev + 1):
                above_spatial[L][d] *= f
    utilized = [math.prod(above_spatial[L]) for L in range(nlev + 1)]
    compute_cycles = math.prod(f for _, _, f, sp in loops if not sp)

    innermost_spatial = []      # (level, dim) of the spatial loops after the last temporal loop
    for li, d, _, sp in reversed(loops):
        if not sp:
            break
        innermost_spatial.append((li, d))
    levels = [LevelStats(lvl.name, utilized[L], {}) for L, lvl in enumerate(arch.levels)]
    for t in workload.tensors:
        kept = [L for L in range(nlev) if mapping.levels[L].keeps(t.name)]
        relevant = t.dims()
        for L in range(nlev):
            levels[L].tensors[t.name] = TensorLevelStats(kept=L in kept)
        arrivals: dict[int, int] = {}
        for L in kept:
            st = levels[L].tensors[t.name]
            extents = [sum(c * (inner[L][d] - 1) for d, c in rank) + 1 for rank in t.ranks]
            st.tile = math.prod(extents)
            st.partition = math.prod(
                sum(c * (workload.bounds[d] // above_spatial[L][d] - 1) for d, c in rank) + 1
                for rank in t.ranks)
            arrivals[L] = _arrivals(t, loops, stride, L, extents, st.tile)
        for k, L in enumerate(kept):
            st = levels[L].tensors[t.name]
            child = kept[k + 1] if k + 1 < len(kept) else nlev     # nlev: the compute units
            between = [(d, f) for li, d, f, sp in loops if sp and L <= li < child]
            scatter = math.prod(f for d, f in between if d in relevant)
            if child < nlev:
                child_arrivals = arrivals[child]
            elif t.read_write and any(d not in relevant for li, d in innermost_spatial if li >= L):
                # The nest ends in a spatial fanout that reduces this output: the reduction
                # network delivers one update per change of the reduced point, so innermost
                # temporal loops that do not index the output accumulate in place (Timeloop v3).
                child_arrivals = _arrivals(t, loops, stride, nlev, [1] * len(t.ranks), 1)
            else:
                child_arrivals = compute_cycles
            has_parent = k > 0
            if t.read_write:
                st.updates = child_arrivals * scatter
                st.reads = st.updates - st.partition
                st.fills = arrivals[L] - st.partition if has_parent else 0
            else:
                st.reads = child_arrivals * scatter
                st.fills = arrivals[L] if has_parent else 0
    return NestAnalysis(compute_cycles, workload.macs, utilized[nlev], levels)


def _arrivals(t: Tensor, loops, stride, L: int, extents: list[int], tile: int) -> int:
    """Words that enter one instance of level L over the run (first tile plus every delta)."""
    total = tile
    above = [(d, f, s) for (li, d, f, sp), s in zip(loops, stride) if li < L and not sp]
    outer = math.prod(f for _, f, _ in above)   # iterations of the loops outside loop k
    wrap: dict[int, int] = {}                   # how far the inner loops jump back on a carry
    for d, f, s in reversed(above):             # innermost first
        outer //= f
        move = dict(wrap)
        move[d] = move.get(d, 0) + s
        shift = [sum(c * move.get(dd, 0) for dd, c in rank) for rank in t.ranks]
        total += (f - 1) * outer * _box_delta(shift, extents, tile)
        wrap[d] = wrap.get(d, 0) - (f - 1) * s
    return total
