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
* Data enters a level (fills) when the temporal loops above it move its tile. As Timeloop v3.0.3
  does, each loop above is walked as iteration 0 and iteration 1 (standing for the other ``f - 1``)
  and each step's new words are the exact difference of two axis-aligned boxes -- but only while
  the tile keeps the translation it had: a step whose translation differs from the kept one (a
  move after a standstill, a wrap-around) reloads the whole tile (``_arrivals``).
* A parent serves each child fill once per distinct child tile: children separated by a spatial
  loop over a dimension the tensor does not use receive one multicast read.
* Sliding windows split across a mesh: a child instance whose new data a mesh neighbour received
  one step earlier gets it over a link (Timeloop's inter-PE link transfers); the parent serves
  fewer words and the children read what they forward (see ``_fanout_reads``).
* Partitions (the share of a tensor one instance owns) follow Timeloop's chain: the parent's
  partition times the tile over the tile of all siblings (``_partitions``).
* What a keeper's counts become -- which operands reach the compute units only when they change
  (Timeloop's compute-level deltas, found with ``_point_changes`` here), the reads, fills and
  updates of outputs (first-read elision), page rounding -- is :mod:`storeloop.model.costs`'s,
  the one cost kernel every evaluator and the mapper call.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from storeloop.model import costs
from storeloop.ir.check import check_mapping, padded
from storeloop.errors import SpecError
from storeloop.ir import Arch, Mapping, Tensor, Workload, rank_label


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


def _grid_width(arch: Arch, mapping: Mapping, L: int) -> int:
    """Columns of the grid Timeloop lays level L's child instances out on (row-major, in nest
    order): the larger of the physical mesh and the X loops (``ComputeNetworkLinkTransfers``)."""
    return max(arch.fanout(L)[1], math.prod(lp.factor for lp in mapping.levels[L].spatial if lp.axis == "X"))


def _unit_nest(arch: Arch, mapping: Mapping) -> tuple[list, int]:
    """The innermost level's spatial loops, innermost first, and the width of the unit grid."""
    nlev = len(arch.levels)
    return list(reversed(mapping.levels[nlev - 1].spatial_nest())), _grid_width(arch, mapping, nlev - 1)


def _flatten(mapping: Mapping, tensor: str | None = None) -> list[tuple[int, int, int, bool]]:
    """(level, dim, factor, spatial) for every loop with factor > 1, outermost first. For
    ``tensor``, a level's outermost temporal loops that lie above its tile there (an uneven
    position, :meth:`LevelMapping.outside`) count as loops of the level above: they refill it."""
    loops = []
    for li, lm in enumerate(mapping.levels):
        out = lm.outside(tensor) if tensor is not None else 0
        for k, lp in enumerate(lm.temporal):
            if lp.factor > 1:
                loops.append((li - 1 if k < out else li, lp.dim, lp.factor, False))
        for lp in lm.spatial_nest():
            if lp.factor > 1:
                loops.append((li, lp.dim, lp.factor, True))
    return loops


def _new_words(shift: tuple[int, ...], extents: list[int], tile: int) -> int:
    """Words of a box shifted by ``shift`` that the unshifted box lacks (exact box difference)."""
    kept = tile
    for s, e in zip(shift, extents):
        kept = kept * max(0, e - abs(s)) // e
    return tile - kept


def analyze(arch: Arch, workload: Workload, mapping: Mapping) -> NestAnalysis:
    """Per-level, per-tensor access counts of ``mapping`` (no bandwidth, energy or capacity); an
    imperfect mapping's, of the padded problem it runs (:func:`storeloop.ir.check.padded`)."""
    check_mapping(arch, workload, mapping)
    workload = padded(workload, mapping)
    nlev = len(arch.levels)
    ndims = len(workload.dims)
    loops = _flatten(mapping)

    stride = _strides(loops, ndims)

    inner = _spans(loops, nlev, ndims)
    # above_spatial[L][d]: product of dimension d's spatial factors over levels < L
    above_spatial = [[1] * ndims for _ in range(nlev + 1)]
    for li, d, f, sp in loops:
        if sp:
            for L in range(li + 1, nlev + 1):
                above_spatial[L][d] *= f
    utilized = [math.prod(above_spatial[L]) for L in range(nlev + 1)]
    compute_cycles = math.prod(f for _, _, f, sp in loops if not sp)

    # the innermost loop, if spatial at the innermost level (compute-level deltas, see above)
    units_under_spatial = bool(loops) and loops[-1][3] and loops[-1][0] == nlev - 1
    unit_nest, width = _unit_nest(arch, mapping)
    levels = [LevelStats(lvl.name, utilized[L], {}) for L, lvl in enumerate(arch.levels)]
    even_loops, even_inner, uneven = loops, inner, mapping.uneven
    for t in workload.tensors:
        kept = [L for L in range(nlev) if mapping.levels[L].keeps(t.name)]
        relevant = t.dims()
        for L in range(nlev):
            levels[L].tensors[t.name] = TensorLevelStats(kept=L in kept)
        # this tensor's view of the nest: with uneven positions, the loops above its tile at a level
        # belong to the level above (the same order and strides)
        loops = _flatten(mapping, t.name) if uneven else even_loops
        inner = _spans(loops, nlev, ndims) if uneven else even_inner
        partition = _partitions(t, loops, inner, nlev)
        arrivals: dict[int, int] = {}
        for L in kept:
            st = levels[L].tensors[t.name]
            extents = _extents(t, inner[L])
            st.tile = math.prod(extents)
            st.partition = partition[L]
            arrivals[L] = _arrivals(t, loops, stride, L, extents, st.tile)
        # a sliding window under a spatial fanout: what the fanout's level sends, walked exactly
        window = t.window
        fanned = {C: _fanout_reads(t, loops, stride, inner, C - 1, _grid_width(arch, mapping, C - 1))
                  for C in kept if C > 0 and window and any(sp and li == C - 1 for li, _, _, sp in loops)}
        for k, L in enumerate(kept):
            st = levels[L].tensors[t.name]
            child = kept[k + 1] if k + 1 < len(kept) else nlev     # nlev: the compute units
            between = [(li, d, f) for li, d, f, sp in loops if sp and L <= li < child]
            scatter = math.prod(f for _, d, f in between if d in relevant)
            if window and child not in fanned and between and not (child == nlev and units_under_spatial):
                # instances whose tiles coincide take one multicast (a window across them)
                scatter = _distinct_tiles(t, loops, stride, L, child)
            if child < nlev:
                content = arrivals[child] * scatter
            elif units_under_spatial and window:
                # a sliding window at units under a fanout: the exact link walk, per instance of
                # the innermost level, times the instances with distinct data above it
                content = _unit_link_reads(t, loops, stride, unit_nest, width) * math.prod(
                    f for li, d, f in between if d in relevant and li < nlev - 1)
            else:
                # the compute units: operands only when they change, except at units without a
                # neighbour holding the same one (costs.unit_content)
                factors, indexes = [lp.factor for lp in unit_nest], [lp.dim in relevant for lp in unit_nest]
                shared = math.prod(f for f, i in zip(factors, indexes) if i)
                under = units_under_spatial
                content = costs.unit_content(under, _point_changes(t, loops, stride) if under else 0, compute_cycles,
                                             scatter, shared, costs.unshared_operands(factors, indexes, width) if under else 0)
            if child in fanned:
                # per instance of level child-1, times its instances with distinct data below L
                content = fanned[child][0] * math.prod(f for li, d, f in between if d in relevant and li < child - 1)
            peer, fills = 0, arrivals[L]
            if L in fanned and fanned[L][1]:
                # Timeloop's peer accesses and fills (tiling.cpp ComputePeerAccesses, in doubles):
                # each instance reads what it forwards and fills what it receives, the link words
                # over the level's instances; the share of parent fills drops by the same words.
                peer = Fraction(fanned[L][1], utilized[L])
                fanout = math.prod(f for li, _, f, sp in loops if sp and li == L - 1)
                fills += peer - Fraction(fanned[L][1], fanout)
            reads, fills, st.updates = costs.keeper_accesses(t.read_write, content, fills, st.partition, k > 0)
            st.reads, st.fills = _round(reads + peer), _round(fills)
    for (L, name), ratio in page_factors(arch, workload, mapping, even_inner).items():
        st = levels[L].tensors[name]            # a paged level moves whole pages (see page_factors)
        st.reads, st.updates = costs.paged(st.reads, ratio), costs.paged(st.updates, ratio)
    return NestAnalysis(compute_cycles, workload.macs, utilized[nlev], levels)


def _round(x) -> int:
    """std::round of a non-negative count: halves away from zero (Python's round goes to even)."""
    return x if isinstance(x, int) else math.floor(x + Fraction(1, 2))


def _strides(loops, ndims: int) -> list[int]:
    """stride[i]: how far loop i moves its dimension per step (product of same-dim factors inside it)."""
    stride, running = [1] * len(loops), [1] * ndims
    for i in range(len(loops) - 1, -1, -1):
        _, d, f, _ = loops[i]
        stride[i] = running[d]
        running[d] *= f
    return stride


def _coefficients(t: Tensor) -> dict[int, list[int]]:
    """Each dimension of ``t`` -> its coefficient in each rank of ``t``."""
    coef: dict[int, list[int]] = {}
    for r, rank in enumerate(t.ranks):
        for d, c in rank:
            coef.setdefault(d, [0] * len(t.ranks))[r] += c
    return coef


def _spans(loops, nlev: int, ndims: int) -> list[list[int]]:
    """inner[L][d]: product of dimension d's factors over levels >= L (a level-L tile's span)."""
    inner = [[1] * ndims for _ in range(nlev + 1)]
    for li, d, f, _ in loops:
        for L in range(li + 1):
            inner[L][d] *= f
    return inner


def _extents(t: Tensor, spans) -> list[int]:
    """Extent of each rank of ``t`` over a tile spanning ``spans[d]`` along each dimension."""
    out = []
    for rank in t.ranks:
        if len(rank) == 1:                   # (the common case, without a generator)
            d, c = rank[0]
            out.append(c * (spans[d] - 1) + 1)
        else:
            out.append(sum(c * (spans[d] - 1) for d, c in rank) + 1)
    return out


def _partitions(t: Tensor, loops, inner, nlev: int) -> list[int]:
    """Per level, the share of ``t`` one instance owns, computed as Timeloop v3 does.

    Outermost: the whole tile. Further in: the parent's partition times this level's tile over
    the tile of all instances under one parent (the parent's spatial loops around this level's
    tile), rounding down at each level. Without sliding windows this is the tensor over the
    instances that hold distinct data; with windows split across instances it counts the halo
    as Timeloop does (e.g. |Inputs| / 6 for C=2 x R=3 instances of a 3-wide window).
    """
    tiles = [math.prod(_extents(t, inner[L])) for L in range(nlev)]
    part = [tiles[0]]
    for L in range(1, nlev):
        spans = inner[L][:]
        for li, d, f, sp in loops:
            if sp and li == L - 1:
                spans[d] *= f
        part.append(part[-1] * tiles[L] // math.prod(_extents(t, spans)))
    return part


def _fanout_reads(t: Tensor, loops, stride, inner, L: int, width: int) -> tuple[int, int]:
    """What level ``L`` sends through its spatial fanout, links included, as Timeloop v3 counts it.

    Timeloop compares, at every simulated step of the temporal loops above ``L``'s spatial fanout,
    the new data (delta) each child instance needs with the delta each of its mesh neighbours
    (:func:`costs.grid_neighbours` over ``width`` columns) received one step
    earlier. Children whose delta a neighbour already holds get it over a link; if that lowers
    the words level ``L`` must send (multicast counted once), the links are used for that step.
    Steps follow Timeloop's extrapolation: every temporal loop runs iteration 0, then iteration 1
    standing for the remaining ``f - 1``. Only tensors with sliding windows can match: a window
    that shifts across instances, or a tile that stands still after moving (Timeloop then reloads
    the whole tile, which a neighbour with the same data received one step earlier).

    Returns (words level L sends its children, words moved over links), per instance of ``L``.
    The walk depends only on the tensor's ranks, the loops from L up and the child tiles' spans,
    so it is cached on them (a mapper's leaves that differ below L share it).
    """
    spatial = tuple((d, f, s) for (li, d, f, sp), s in zip(loops, stride) if sp and li == L)
    temporal = tuple((d, f, s) for (li, d, f, sp), s in zip(loops, stride) if li <= L and not sp)
    return _fanout_walk(t.ranks, spatial, temporal, tuple(inner[L + 1]), width)


@functools.lru_cache(maxsize=1 << 14)
def _fanout_walk(ranks, spatial: tuple, temporal: tuple, spans: tuple, width: int) -> tuple[int, int]:
    """:func:`_fanout_reads` of a tensor with ``ranks``: ``spatial`` and ``temporal`` (dimension,
    factor, stride) the fanout's loops and the temporal loops from its level up, ``spans`` the
    child tiles' spans."""
    npe = math.prod(f for _, f, _ in spatial)
    # a child's tile is the origin's translated by the child's offset in rank space (the ranks are
    # affine in the dimensions), so every child sees the same shifts, keeps the same translation,
    # and its delta is the origin's delta translated by its offset: one walk serves them all
    offsets = []
    for p in range(npe):
        off, rest = {}, p
        for d, f, s in reversed(spatial):
            off[d] = off.get(d, 0) + (rest % f) * s
            rest //= f
        offsets.append(tuple(sum(c * off.get(d, 0) for d, c in rank) for rank in ranks))
    distinct = len(set(offsets))
    # child p's delta equals neighbour q's of the step before iff this step's delta is the last
    # one translated by offsets[q] - offsets[p]
    near = [{tuple(a - b for a, b in zip(offsets[q], offsets[p])) for q in nbrs}
            for p, nbrs in enumerate(costs.grid_neighbours(npe, width))]
    by_shift: dict = {}                             # translation -> (linked children, distinct unlinked)

    def linked_by(v):
        if v not in by_shift:
            linked = [v in near[p] for p in range(npe)]
            by_shift[v] = (sum(linked), len({o for o, ln in zip(offsets, linked) if not ln}))
        return by_shift[v]

    widths = [sum(c * (spans[d] - 1) for d, c in rank) for rank in ranks]
    tile = tuple((0, w) for w in widths)          # the origin child's tile at a step's origin

    def delta(old, kept):
        """The words the origin child lacks at a step whose tile is ``tile`` (after ``old``), by
        Timeloop's SaveAndSubtractIfSameStride (as _arrivals): the tile minus the previous one
        while the translation stays the kept one (or after a reset), else the whole tile (and a
        reset). As a point set: None (empty), a box, or ("minus", tile, overlap) when the
        difference is not a box; and the translation kept after the step."""
        new = tile
        if old is None:
            return new, kept
        shift = tuple(n[0] - o[0] for n, o in zip(new, old))
        if kept is not None and shift != kept:
            return new, None
        overlap = tuple((max(n[0], o[0]), min(n[1], o[1])) for n, o in zip(new, old))
        if any(lo > hi for lo, hi in overlap):
            return new, shift
        if overlap == new:
            return None, shift
        moved = [r for r in range(len(new)) if overlap[r] != new[r]]
        if len(moved) == 1:                          # a slab: still a box
            r = moved[0]
            (nlo, nhi), (olo, ohi) = new[r], overlap[r]
            return new[:r] + (((ohi + 1, nhi) if olo == nlo else (nlo, olo - 1)),) + new[r + 1:], shift
        return ("minus", new, overlap), shift

    def size(b):
        if b[0] == "minus":
            return size(b[1]) - size(b[2])
        return math.prod(hi - lo + 1 for lo, hi in b)

    def boxes(b):
        return b[1:] if b[0] == "minus" else (b,)

    def moved(b, v):
        """``b`` (None, a box or a "minus" form) translated by ``v``."""
        if b is None:
            return None
        if b[0] == "minus":
            return ("minus", moved(b[1], v), moved(b[2], v))
        return tuple((lo + x, hi + x) for (lo, hi), x in zip(b, v))

    def translation(b, a):
        """v with b == a translated by v, or None."""
        if (b[0] == "minus") != (a[0] == "minus"):
            return None
        pairs = list(zip(boxes(b), boxes(a)))
        v = tuple(nb[0] - na[0] for nb, na in zip(*pairs[0]))
        ok = all(nb[0] - na[0] == x and nb[1] - na[1] == x for pb, pa in pairs for nb, na, x in zip(pb, pa, v))
        return v if ok else None

    # Timeloop's steps: every temporal loop at iteration 0, then iteration 1 standing for the other
    # f - 1 (innermost fastest). A walk of the loops from k inward depends only on the state it
    # enters with (the previous tile and delta, in its own frame, and the kept translation), so
    # each distinct one is walked once.
    steps = [(tuple(sum(c * s for dd, c in rank if dd == d) for rank in ranks), f - 1) for d, f, s in temporal]
    memo: dict = {}

    def walk(k, last, kept, prev):
        """(reads, link words, and the state after) of the steps of loops k.. from this state."""
        key = (k, last, kept, prev)
        if key in memo:
            return memo[key]
        if k == len(steps):
            cur, kept = delta(last, kept)
            reads = transfers = 0
            if cur is not None:
                # the parent sends each distinct delta once, to every child that needs exactly it
                # (ComputeAccurateMulticastedAccesses); links are used in a step only when they lower that
                v = translation(cur, prev) if prev is not None else None
                linked, unlinked = linked_by(v) if v is not None else (0, distinct)
                words = size(cur)
                if unlinked < distinct:
                    reads, transfers = words * unlinked, words * linked
                else:
                    reads = words * distinct
            out = reads, transfers, tile, kept, cur
        else:
            v, weight = steps[k]
            r0, t0, last, kept, prev = walk(k + 1, last, kept, prev)
            back = tuple(-x for x in v)             # the second iteration's frame is moved by v
            r1, t1, last, kept, prev = walk(k + 1, moved(last, back), kept, moved(prev, back))
            out = r0 + r1 * weight, t0 + t1 * weight, moved(last, v), kept, moved(prev, v)
        memo[key] = out
        return out

    reads, transfers, *_ = walk(0, None, None, None)
    return reads, transfers


def _distinct_tiles(t: Tensor, loops, stride, L: int, child: int) -> int:
    """Instances of the spatial loops from level L down to ``child`` with distinct tiles of ``t``.

    Timeloop multicasts one delta to every instance of a fanout that needs exactly it
    (``ComputeAccurateMulticastedAccesses``), fanout by fanout. Without windows that is the
    product of the spatial factors that index ``t``; with a window across one fanout's instances
    (a spatial R beside a spatial P of the same rank) some of their tiles coincide. At one
    fanout the tiles have one shape, so they differ exactly where their corners do; tiles that
    only overlap (a window split across two fanouts) are distinct."""
    total = 1
    for F in range(L, child):
        corners = {(0,) * len(t.ranks)}
        for (li, d, f, sp), s in zip(loops, stride):
            if sp and li == F:
                step = [sum(c * s for dd, c in rank if dd == d) for rank in t.ranks]
                corners = {tuple(x + i * y for x, y in zip(corner, step)) for corner in corners for i in range(f)}
        total *= len(corners)
    return total


LINK_WALK_WORDS = 1 << 22      # points of the units' link walk held at once (memory stays bounded)


def _unit_link_reads(t: Tensor, loops, stride, unit_nest, width: int) -> int:
    """Words of ``t`` the compute units under one instance of the innermost level take from it,
    when they sit directly under its spatial fanout, as Timeloop v3.0.3 counts them.

    At every simulated step of the temporal loops (iteration 0, then iteration 1 standing for the
    other ``f - 1``), each unit needs the raw point of ``t`` its operation touches
    (``FillSpatialDeltas`` at loop level 0). A unit whose point a grid neighbour (:func:`costs.grid_neighbours`, ``width``
    columns) needed one step earlier can take it over a link (``ComputeNetworkLinkTransfers``); the parent sends each distinct
    point once (multicast), and the links are used in a step only when they lower that number
    (``ComputeSpatialWorkingSet``). A sliding window makes a neighbour's last point the next one.
    """
    coef = _coefficients(t)
    temporal = [(d, f, s) for (_, d, f, sp), s in zip(loops, stride) if not sp]
    spatial = [(lp.dim, lp.factor) for lp in unit_nest if lp.factor > 1]      # innermost first
    sstride, running = [], {}
    for d, f in spatial:                      # a spatial loop's step: the same-dim loops inside it
        sstride.append(running.get(d, 1))
        running[d] = running.get(d, 1) * f
    zero = (0,) * len(t.ranks)

    def move(d, amount):
        return tuple(c * amount for c in coef[d]) if d in coef else zero

    units = [zero]
    for (d, f), s in zip(spatial, sstride):   # unit index: the innermost spatial loop runs fastest
        units = [tuple(a + b for a, b in zip(u, move(d, i * s))) for i in range(f) for u in units]
    nbrs = costs.grid_neighbours(len(units), width)
    # the simulated steps in blocks (the first temporal loop is the most significant bit), each
    # unit's point as one integer: a mixed-radix code where it fits in 63 bits, else a dense id
    k, R = len(temporal), len(t.ranks)
    moves = np.array([move(d, s) for d, _, s in temporal], np.int64).reshape(k, R)
    at_units = np.array(units, np.int64).reshape(len(units), R)
    lo = np.minimum(moves, 0).sum(axis=0) + at_units.min(axis=0)
    span = [int(x) for x in np.maximum(moves, 0).sum(axis=0) + at_units.max(axis=0) - lo + 1]
    linear = math.prod(span) < 2 ** 62
    radix = np.array([math.prod(span[r + 1:]) for r in range(R)], np.int64) if linear else None
    steps = 1 << k
    block = max(1, min(steps, LINK_WALK_WORDS // max(1, len(units) * R)))
    factor = np.array([f - 1 for _, f, _ in temporal], np.int64)
    neighbour = [np.array([n[j] if j < len(n) else -1 for n in nbrs]) for j in range(max(map(len, nbrs), default=0))]
    reads, last = 0, None                                   # last: the previous step's points
    for first in range(0, steps, block):
        bits = (np.arange(first, min(first + block, steps))[:, None] >> np.arange(k - 1, -1, -1)[None, :]) & 1
        pts = (bits @ moves)[:, None, :] + at_units[None, :, :]                                   # (B, U, R)
        if last is not None:
            pts = np.concatenate([last[None], pts])
        code = ((pts - lo) @ radix) if linear else \
            np.unique(pts.reshape(-1, R), axis=0, return_inverse=True)[1].reshape(pts.shape[:2])
        # a unit is served over a link when a grid neighbour's point one step earlier is its point
        served = np.zeros(code.shape, bool)
        for nb in neighbour:
            has = nb >= 0
            served[1:, has] |= code[:-1, nb[has]] == code[1:, has]
        # the distinct points of the units no neighbour can serve (never more than without links)
        kept = np.sort(np.where(served, -1, code), axis=1)
        distinct = ((kept[:, 1:] != kept[:, :-1]) & (kept[:, 1:] >= 0)).sum(axis=1) + (kept[:, 0] >= 0)
        if last is not None:
            distinct = distinct[1:]
        reads += int((distinct * np.where(bits == 1, factor[None, :], 1).prod(axis=1)).sum())
        last = pts[-1]
    return reads


def _point_changes(t: Tensor, loops, stride) -> int:
    """How often the operand of ``t`` at one compute unit changes over the temporal loops.

    Timeloop v3 simulates each temporal loop as iteration 0 and iteration 1 (standing for the other
    ``f - 1``), so a carry into loop ``j`` moves the point by ``+stride_j`` along its dimension and
    by ``-stride_i`` along every temporal loop ``i`` inside it. The carry happens
    ``(f_j - 1) * prod(f_i, i outside j)`` times; it counts when the move changes the tensor's
    point (a sliding window can cancel it). Without windows this is the product of the temporal
    factors down to the innermost loop that indexes ``t``.
    """
    temporal = [(d, f, s) for (_, d, f, sp), s in zip(loops, stride) if not sp]
    total, outer = 1, 1
    for j, (d, f, s) in enumerate(temporal):
        move = {d: s}
        for dd, _, ss in temporal[j + 1:]:
            move[dd] = move.get(dd, 0) - ss
        if any(sum(c * move.get(dd, 0) for dd, c in rank) for rank in t.ranks):
            total += (f - 1) * outer
        outer *= f
    return total


def _arrivals(t: Tensor, loops, stride, L: int, extents: list[int], tile: int) -> int:
    """Words that enter one instance of level L over the run (first tile plus every delta).

    Timeloop v3.0.3 simulates each temporal loop above L as iteration 0 and iteration 1, the
    latter standing for the other ``f - 1`` (so the walk is memoized on (loop, kept translation)
    and costs O(loops x translations)), and keeps, per instance of L, the previous tile and
    the translation that led to it. A visit whose translation equals the kept one (or follows a
    reset) brings only the words the previous tile lacks; a visit whose translation differs
    discards the previous tile (all its words are new) and resets the kept translation. So a
    sliding window is reused only while the tile keeps moving the same way: a step that follows
    a standstill (an inner loop that does not index ``t``) or a wrap-around reloads the tile.
    Without sliding windows a move never overlaps the previous tile and a standstill never follows
    a kept non-zero translation, so the walk reduces to the tile times the iterations of the loops
    above L down to the innermost that indexes ``t``.
    """
    if all(len(rank) == 1 for rank in t.ranks):
        relevant, reloads, iterations = t.dims(), 1, 1
        for li, d, f, sp in loops:
            if li < L and not sp:
                iterations *= f
                if d in relevant:
                    reloads = iterations
        return tile * reloads
    zero = (0,) * len(t.ranks)
    coef = _coefficients(t)
    above = tuple((f, tuple(c * s for c in coef[d]) if d in coef else zero)
                  for (li, d, f, sp), s in zip(loops, stride) if li < L and not sp and f > 1)
    return _window_walk(above, tuple(extents), tile)


@functools.lru_cache(maxsize=1 << 16)
def _window_walk(above: tuple, extents: tuple, tile: int) -> int:
    """:func:`_arrivals` of a windowed tensor: ``above`` (factor, step in rank space) the temporal
    loops above the level, outermost first, ``extents`` and ``tile`` its tile there. Cached: a
    mapper's leaves that differ below the level share it."""
    zero = (0,) * len(extents)
    shifts, inner = [zero] * len(above), zero  # loop i's step, the loops inside it returning to 0
    for i in range(len(above) - 1, -1, -1):
        step = above[i][1]
        shifts[i] = tuple(x - y for x, y in zip(step, inner))
        inner = tuple(x + y for x, y in zip(inner, step))
    memo: dict = {}

    def walk(i: int, kept):
        """New words of loops i.. (iteration 0 already entered) and the translation kept after."""
        if i == len(above):
            return 0, kept
        if (i, kept) not in memo:
            first, state = walk(i + 1, kept)
            shift = shifts[i]
            if state is None or shift == state:               # same translation: only new words
                step, state = _new_words(shift, extents, tile), shift
            else:                                             # it changed: reload, reset
                step, state = tile, None
            rest, state = walk(i + 1, state)
            memo[i, kept] = first + (above[i][0] - 1) * (step + rest), state
        return memo[i, kept]

    return tile + walk(0, None)[0]


def send_floors(workload: Workload, mapping: Mapping, t: Tensor) -> dict[tuple[int, int], int]:
    """For a read-only tensor ``t`` of ``workload`` (sliding windows welcome) and each pair of
    consecutive keepers (parent, child) in ``mapping``: words the parent sends per instance, at
    least (the model's reads of ``t`` there), where the children under one parent instance hold
    translates of one tile that together fill a box (a rank split along one of its dimensions
    only, each child's step along it no wider than a tile: every plain rank, a window of stride 1).

    All children see the same steps: each temporal loop above them moves the box by its step less
    the inner loops' last steps (:func:`_window_walk`'s shifts). At each step the words of the
    moved box that the box held a step earlier lack are new to every child, so no neighbour can
    pass them over a link (a link carries a delta a neighbour received a step earlier, which lies
    in that box), and the parent sends each of them at least once (multicast: once). The first
    box, plus those words at every step, in the walk's iteration-0 / iteration-1 order."""
    ndims, nlev = len(workload.dims), len(mapping.levels)
    loops = _flatten(mapping)
    stride, inner = _strides(loops, ndims), _spans(loops, nlev, ndims)
    kept = [L for L in range(nlev) if mapping.levels[L].keeps(t.name)]
    out = {}
    for pl, child in zip(kept, kept[1:]):
        above = tuple((li, d, f, sp, s) for (li, d, f, sp), s in zip(loops, stride) if li < child)
        words = _pair_sends(t, pl, above, tuple(inner[child]))
        if words is not None:
            out[pl, child] = words
    return out


def fanout_sends(arch: Arch, workload: Workload, mapping: Mapping, t: Tensor) -> dict[tuple[int, int], int]:
    """For a windowed read-only tensor ``t`` of an even ``mapping`` and each pair of consecutive
    keepers (parent, child) whose child sits right under a spatial fanout: the words the parent
    serves per instance, exactly as :func:`analyze` counts them (the fanout's link walk,
    :func:`_fanout_reads`, times the parent's instances with distinct data above the fanout).
    :func:`send_floors` lets a neighbour pass every halo; the model passes one only where a
    neighbour received exactly that delta a step earlier (a window split over units whose
    temporal step differs from their spacing gets none). These depend on the order of the
    fanout's spatial loops (which units are neighbours): a bound over every order is the least."""
    loops = _flatten(mapping)
    ndims, nlev = len(workload.dims), len(mapping.levels)
    stride, inner = _strides(loops, ndims), _spans(loops, nlev, ndims)
    kept = [L for L in range(nlev) if mapping.levels[L].keeps(t.name)]
    relevant = t.dims()
    out = {}
    for pl, child in zip(kept, kept[1:]):
        if any(sp and li == child - 1 for li, _, _, sp in loops):
            words = _fanout_reads(t, loops, stride, inner, child - 1, _grid_width(arch, mapping, child - 1))[0]
            out[pl, child] = words * math.prod(f for li, d, f, sp in loops
                                               if sp and pl <= li < child - 1 and d in relevant)
    return out


def unit_sends(workload: Workload, mapping: Mapping, t: Tensor) -> tuple[int, int] | None:
    """(``t``'s innermost keeper in an even ``mapping``, the operands it serves the compute units
    per instance) as :func:`analyze` counts them where the innermost level has no spatial loop:
    one per compute to each unit with a distinct tile (:func:`_distinct_tiles`: a window split
    over units gives each its own). None where the innermost level has a spatial loop (the units'
    link walk) or no level keeps ``t``."""
    loops = _flatten(mapping)
    nlev = len(mapping.levels)
    kept = [L for L in range(nlev) if mapping.levels[L].keeps(t.name)]
    if not kept or any(sp and li == nlev - 1 for li, _, _, sp in loops):
        return None
    cycles = math.prod(f for _, _, f, sp in loops if not sp)
    return kept[-1], cycles * _distinct_tiles(t, loops, _strides(loops, len(workload.dims)), kept[-1], nlev)


@functools.lru_cache(maxsize=1 << 14)
def _pair_sends(t: Tensor, pl: int, above: tuple, child_spans: tuple) -> int | None:
    """:func:`send_floors` of one pair of keepers: ``above``, the loops above the child (level,
    dimension, factor, spatial, stride), and the child's tile spans; None where the children's
    tiles form no box. Cached: a windowed search bounds many leaves that share the loops above a
    keeper (those of one node differ in the last level's only); 16,384 entries of about 1 KB."""
    coef = _coefficients(t)
    zero = (0,) * len(t.ranks)
    split = {}
    for li, d, f, sp, _ in above:
        if sp and pl <= li:
            split[d] = split.get(d, 1) * f
    got = send_box(t, child_spans, split)
    if got is None:
        return None
    extents, box = got
    loops = [(f, tuple(c * s for c in coef[d]) if d in coef else zero)
             for li, d, f, sp, s in reversed(above) if not sp]
    return box + send_walk(loops, zero, extents, box)


def send_walk(loops, inward: tuple, extents, box: int) -> int:
    """The words beyond the first box that temporal ``loops`` (factor, step in rank space;
    innermost first) bring a pair of keepers (:func:`send_floors`), starting ``inward`` (the steps
    of loops inside them): each loop moves the box by its step less the inner loops' steps, and
    words(i) = words(i + 1) f + (f - 1) x the words the moved box lacks."""
    words = 0
    for f, step in loops:
        shift = tuple(x - y for x, y in zip(step, inward))
        inward = tuple(x + y for x, y in zip(inward, step))
        words = words * f + (f - 1) * _new_words(shift, extents, box)
    return words


def send_box(t: Tensor, child_spans, split: dict[int, int]) -> tuple[tuple[int, ...], int] | None:
    """The box of ``t`` that the children under one parent instance hold together (each child's
    tile spanning ``child_spans``, ``split``: the spatial product between parent and children per
    dimension): its extents and words, or None where their tiles leave gaps or cross (a rank
    split along two dimensions, or a child's step along one wider than its tile)."""
    split = {d: f for d, f in split.items() if f > 1 and any(d == x for rank in t.ranks for x, _ in rank)}
    own = _extents(t, child_spans)
    if any(len([d for d, _ in rank if d in split]) > 1 or
           any(c * child_spans[d] > own[r] for d, c in rank if d in split) for r, rank in enumerate(t.ranks)):
        return None
    spans = [s * split.get(d, 1) for d, s in enumerate(child_spans)]
    extents = tuple(_extents(t, spans))
    return extents, math.prod(extents)


def storage_order(arch: Arch, workload: Workload, L: int, t: Tensor) -> list[int]:
    """The ranks of ``t`` in level ``L``'s storage, outermost first: its ``layout``, else declared."""
    names = arch.levels[L].layout.get(t.name)
    if names is None:
        return list(range(len(t.ranks)))
    labels = [rank_label(r, workload.dims) for r in t.ranks]
    if sorted(names) != sorted(labels):
        file, line, path = arch.levels[L].layout_where or (None, None, "")
        raise SpecError(f"layout of {t.name} on level {arch.levels[L].name}: [{', '.join(names)}] is not an order of "
                        f"its ranks", file=file, line=line, field=f"{path}.{t.name}".lstrip("."),
                        allowed=f"[{', '.join(labels)}] in any order")
    return [labels.index(n) for n in names]


def check_layout(arch: Arch, workload: Workload) -> None:
    """Every layout names a tensor of ``workload`` and orders all its ranks (errors at the arch's line)."""
    names = [t.name for t in workload.tensors]
    for L, lvl in enumerate(arch.levels):
        for name in lvl.layout:
            if name not in names:
                file, line, path = lvl.layout_where or (None, None, "")
                raise SpecError(f"layout of {name} on level {lvl.name}: workload {workload.name} has no tensor {name}",
                                file=file, line=line, field=path, allowed=", ".join(names))
            storage_order(arch, workload, L, workload.tensor(name))


def tile_runs(arch: Arch, workload: Workload, mapping: Mapping, levels,
              inner: list[list[int]] | None = None) -> dict[tuple[int, str], tuple[int, int]]:
    """(contiguous run, child tile) in words of every tensor kept at each of ``levels``.

    A level serves each child tile as contiguous runs of its own tile, laid out row-major in the
    tensor's rank order there (:func:`storage_order`, last rank fastest): a run is the child tile's extent along the last
    rank, times the ranks before it as long as the child spans the level's whole extent there
    (:func:`storeloop.model.costs.run_words`). The compute units take one element at a time."""
    out = {}
    for (L, name), (part, full) in tile_extents(arch, workload, mapping, levels, inner).items():
        order = storage_order(arch, workload, L, workload.tensor(name))
        out[(L, name)] = (costs.run_words([part[i] for i in order], [full[i] for i in order]), math.prod(part))
    return out


def tile_extents(arch: Arch, workload: Workload, mapping: Mapping, levels,
                 inner: list[list[int]] | None = None) -> dict[tuple[int, str], tuple[list[int], list[int]]]:
    """(child tile, own tile) extents per declared rank of every tensor kept at each of ``levels``;
    the child is the tensor's next keeper below (the compute units: one element)."""
    nlev = len(arch.levels)
    inner = inner or _spans(_flatten(mapping), nlev, len(workload.dims))
    out = {}
    for L in levels:
        for t in workload.tensors:
            if not mapping.levels[L].keeps(t.name):
                continue
            child = next((C for C in range(L + 1, nlev) if mapping.levels[C].keeps(t.name)), nlev)
            out[(L, t.name)] = (_extents(t, inner[child]) if child < nlev else [1] * len(t.ranks), _extents(t, inner[L]))
    return out


def page_factors(arch: Arch, workload: Workload, mapping: Mapping,
                 inner: list[list[int]] | None = None) -> dict[tuple[int, str], Fraction]:
    """Access-granularity inflation per (level, tensor) for levels with a page size.

    A level with ``page_bytes`` (an SSD's page or request size) serves each child tile as
    contiguous runs (:func:`tile_runs`), every run rounded up to whole pages (runs are taken as
    page-aligned), so the words the level moves per child tile are ``runs x ceil(run / page) x
    page``; the factor is that over the tile's words (1 when runs are whole pages, e.g.
    sequential streaming; up to page/word for word-by-word access). :func:`analyze` multiplies
    the level's reads and updates by it, so bandwidth and energy pay for whole pages.
    Delta slabs of sliding windows are priced with the full tile's shape.
    """
    pages = {L: lvl.page_bytes for L, lvl in enumerate(arch.levels) if lvl.page_bytes}
    if not pages:
        return {}
    return {(L, name): costs.page_ratio(run, arch.levels[L].word_bits, pages[L])
            for (L, name), (run, _) in tile_runs(arch, workload, mapping, pages, inner).items()}
