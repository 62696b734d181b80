"""The cost kernel: Timeloop v3's accounting rules, written once.

Every consumer works out the loop-nest quantities in its own form -- the reference nest analysis
(:mod:`storeloop.model.nest`, readable, with sliding windows, links and partitions), the scalar
closed form (:mod:`storeloop.model.fast`), the column-wise NumPy forms (:mod:`storeloop.model.batch`
and the mapper's :mod:`storeloop.mapper.tree`) -- and turns them into accesses, cycles and energy
only through the functions below. They take Python numbers (ints, Fractions) and NumPy arrays
alike and do the same operations in the same order for both, so every consumer gets identical
numbers and a change of semantics lands everywhere at once.

The rules (checked against real Timeloop v3.0.3 runs, ``tests/corpus``):

* **Operands at the compute units** (:func:`unshared_operands`, :func:`unit_content`): when the
  innermost loop of the nest is a spatial loop of the innermost storage level (its fanout to the
  units), a unit whose mesh neighbour held the same operand one step earlier gets it over a link
  (Timeloop's ``ComputeNetworkLinkTransfers``). So a tensor leaves its keeper when its operand
  changes between consecutive temporal iterations, and at every other compute only for the units
  with no neighbour holding the same element. Units not directly under a fanout take one operand
  per compute.
* **Accesses of a keeper** (:func:`keeper_accesses`): a level serves its child the words the child
  receives, times the child instances with distinct data (multicast counted once). For an output
  those are updates (write-backs, spatial reductions merged), and its reads are updates minus the
  partition it owns (the first write of an element needs no read); a child's output fills skip
  the first residency of each element. The outermost keeper is never filled.
* **Energy** (:func:`access_energy`): per instance, ``ceil(reads/B) E_read + ceil(fills/B) E_write
  + ceil(updates/B) E_write`` with B the block size.
* **Bandwidth** (:func:`throttle`): the unconstrained demand is the sum over tensors of
  ``reads / compute_cycles`` (``(updates + fills) / compute_cycles`` for writes); a read, write or
  shared (read + write) bandwidth below its demand slows the level by ``bandwidth / demand`` and
  its cycles are ``ceil(compute_cycles / slowdown)``, in double precision as Timeloop does.
* **Pages** (:func:`page_ratio`, :func:`paged`; beyond Timeloop): a level with a page size moves
  every contiguous run of a child tile in whole pages.
"""

from __future__ import annotations

import functools
import math
from fractions import Fraction

import numpy as np

_TINY = 1e-300


def _select(cond, a, b):
    return np.where(cond, a, b) if isinstance(cond, np.ndarray) else (a if cond else b)


def unique_rows(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(a, axis=0, return_inverse=True)`` of an integer matrix, by a sort of its columns:
    NumPy's version compares rows as structured values, and a Ctrl-C that lands in that comparison
    comes out of it as a TypeError instead of a KeyboardInterrupt (the mapper stops on the latter)."""
    a = np.asarray(a)
    if not len(a):
        return a, np.zeros(0, np.int64)
    order = np.lexsort(a.T[::-1])                 # the first column most significant, as np.unique
    s = a[order]
    new = np.ones(len(a), bool)
    new[1:] = (s[1:] != s[:-1]).any(axis=1)
    inv = np.empty(len(a), np.int64)
    inv[order] = np.cumsum(new) - 1
    return s[new], inv


def unshared_operands(factors, indexes, width):
    """Distinct elements of a tensor held by compute units with no mesh neighbour holding the same
    one (0 when every unit has one). ``factors``: the innermost level's spatial loops, innermost
    first (Timeloop's nest: X loops inside Y loops; factor-1 entries are ignored); ``indexes``:
    whether each loop indexes the tensor; ``width``: the grid's width, the larger of the physical
    mesh and the X loops. Timeloop numbers the units in nest order and lays them out row-major; a
    unit's neighbours are :func:`grid_neighbours`. Timeloop reads those elements
    from the keeper at every compute, the others only when the operand changes (links). Arrays
    (..., loops) are taken row by row."""
    if isinstance(factors, np.ndarray):
        F = np.asarray(factors, dtype=np.int64)
        if F.shape[-1] == 0:                      # no unit loops: one unit, no neighbour
            return np.ones(F.shape[:-1], dtype=np.int64)
        idx = np.broadcast_to(np.asarray(indexes, dtype=np.int64), F.shape)
        W = np.broadcast_to(np.asarray(width, dtype=np.int64), F.shape[:-1])
        keys = np.concatenate([F.reshape(-1, F.shape[-1]), idx.reshape(-1, F.shape[-1]), W.reshape(-1, 1)], axis=1)
        uniq, inv = unique_rows(keys)
        n = F.shape[-1]
        vals = np.array([_unshared(tuple(u[:n]), tuple(u[n:2 * n]), int(u[-1])) for u in uniq], dtype=np.int64)
        return vals[inv.reshape(-1)].reshape(F.shape[:-1])
    return _unshared(tuple(int(f) for f in factors), tuple(bool(i) for i in indexes), int(width))


@functools.lru_cache(maxsize=256)
def grid_neighbours(units: int, width: int) -> tuple[tuple[int, ...], ...]:
    """Per instance of a fanout, its mesh neighbours as Timeloop's ``ComputeNetworkLinkTransfers``
    sees them: instances numbered in nest order (innermost loop fastest), laid out row-major over
    ``width`` columns; left, right, up and down, not toroidal."""
    width = max(1, width)
    return tuple(tuple(y * width + x for x, y in ((h - 1, v), (h + 1, v), (h, v - 1), (h, v + 1))
                       if 0 <= x < width and y >= 0 and y * width + x < units)
                 for h, v in ((u % width, u // width) for u in range(units)))


@functools.lru_cache(maxsize=4096)
def _unshared(factors: tuple, indexes: tuple, width: int) -> int:
    loops = [(f, i) for f, i in zip(factors, indexes) if f > 1]
    units = math.prod(f for f, _ in loops)
    keys = []
    for u in range(units):                    # the innermost loop runs fastest
        rest, key = u, []
        for f, i in loops:
            if i:
                key.append(rest % f)
            rest //= f
        keys.append(tuple(key))
    near = grid_neighbours(units, width)
    return len({keys[u] for u in range(units) if not any(keys[n] == keys[u] for n in near[u])})


def unit_content(under_fanout, changes, compute_cycles, scatter, shared, unshared):
    """Words of a tensor a keeper sends the compute units below it (Timeloop's compute-level
    deltas with links): per group of units under the innermost level, its ``shared`` distinct
    elements when the operand changes, and at every other compute the ``unshared`` ones whose
    units have no neighbour holding them; times the ``scatter // shared`` groups with distinct
    data. Units not directly under a fanout take one operand per compute (``changes`` and
    ``unshared`` do not matter then)."""
    groups = scatter // shared
    per_group = changes * shared + (compute_cycles - changes) * unshared
    return _select(under_fanout, per_group * groups, compute_cycles * scatter)


def keeper_accesses(read_write: bool, served, arrivals, partition, has_parent):
    """(reads, fills, updates) per instance of a level keeping a tensor.

    ``served``: words it sends its children (their arrivals times the child instances with
    distinct data); ``arrivals``: words entering it (first tile plus every delta); ``partition``:
    the share of the tensor it owns (outputs only); ``has_parent``: it is not the outermost keeper.
    """
    if read_write:
        fills = _select(has_parent, arrivals - partition, 0)
        return served - partition, fills, served
    return served, _select(has_parent, arrivals, 0), 0 * served


def access_energy(reads, fills, updates, block: int, read_pJ: float, write_pJ: float):
    """Energy (pJ) of one instance's accesses of one tensor, charged per block."""
    if block == 1:
        return reads * read_pJ + fills * write_pJ + updates * write_pJ
    return (-(-reads // block)) * read_pJ + (-(-fills // block)) * write_pJ + (-(-updates // block)) * write_pJ


def cluster_share(level, utilized_instances):
    """Timeloop's clusters (BufferLevel::ComputeBufferEnergy): instances in groups of
    ``cluster_size`` share one wide access, so a level's access energy is paid once per utilized
    cluster, ``min(utilized instances, instances / cluster_size)`` of them, and spread over its
    utilized instances. The factor per instance: utilized clusters / utilized instances (1 without
    clusters)."""
    size = level.cluster_size
    if size <= 1 or not utilized_instances:
        return 1.0
    return min(utilized_instances, level.instances // size) / utilized_instances


def throttle(level, reads, fills, updates, compute_cycles):
    """Timeloop's bandwidth throttling of one level: (cycles, slowdown).

    ``reads``/``fills``/``updates`` list each tensor's per-instance counts (numbers or arrays of
    rows); ``level`` has ``read_bandwidth``, ``write_bandwidth`` and ``shared_bandwidth`` in words
    per cycle (None: unlimited)."""
    vec = isinstance(compute_cycles, np.ndarray)
    cc = compute_cycles.astype(np.float64) if vec else compute_cycles
    if level.read_bandwidth is None and level.write_bandwidth is None and level.shared_bandwidth is None:
        return (cc.astype(np.int64) if vec else int(math.ceil(cc / 1.0))), (np.ones(np.shape(cc)) if vec else 1.0)
    rb = wb = 0.0
    for rd, fl, up in zip(reads, fills, updates):
        rb = rb + rd / cc
        wb = wb + (up + fl) / cc
    slow = np.ones(np.shape(cc)) if vec else 1.0
    for bw, demand in ((level.read_bandwidth, rb), (level.write_bandwidth, wb),
                       (level.shared_bandwidth, rb + wb)):
        if bw is None:
            continue
        if vec:
            slow = np.where(bw < demand, np.minimum(slow, bw / np.maximum(demand, _TINY)), slow)
        elif bw < demand:
            slow = min(slow, bw / demand)
    cycles = np.ceil(cc / slow).astype(np.int64) if vec else int(math.ceil(cc / slow))
    return cycles, slow


def port_cycles(level, reads, writes):
    """Cycles one instance's ports need for ``reads`` and ``writes`` words (numbers, or arrays of
    rows; 0 with unlimited bandwidth). Numbers are divided as numpy divides them (an int as a
    float64), without numpy's per-call cost: the reference model asks once per level."""
    numbers = not isinstance(reads, np.ndarray) and not isinstance(writes, np.ndarray)
    out = 0.0
    for bw, words in ((level.read_bandwidth, reads), (level.write_bandwidth, writes),
                      (level.shared_bandwidth, reads + writes)):
        if bw is not None:
            if numbers:
                out = max(out, (float(words) if isinstance(words, int) else words) / bw)
            else:
                out = np.maximum(out, np.divide(words, bw))
    return float(out) if numbers or not np.ndim(out) else out


def buffered_cycles(level_cycles: list[int], fill: list[float], use: list[float], compute_cycles: int,
                    single: set[int]) -> int:
    """The run's cycles when the levels in ``single`` are single-buffered: such a level's fills wait for
    the use of its contents to end, so the time from it down is its fill time plus the longer of its
    own reads and updates and everything below it (``fill``/``use``: each level's port cycles for
    them); every other level overlaps its fills with use and counts with its throttled cycles. With
    ``single`` empty: the slowest of the levels and the compute units, the model's usual cycles."""
    t = compute_cycles
    for L in range(len(level_cycles) - 1, -1, -1):
        t = math.ceil(fill[L] + max(t, use[L])) if L in single else max(t, level_cycles[L])
    return t


def level_costs(level, read_pJ: float, write_pJ: float, reads, fills, updates, compute_cycles):
    """Energy per instance (pJ) and cycles of one level from each tensor's per-instance counts."""
    e = 0.0
    for rd, fl, up in zip(reads, fills, updates):
        e = e + access_energy(rd, fl, up, level.block_size, read_pJ, write_pJ)
    return e, throttle(level, reads, fills, updates, compute_cycles)[0]


def page_ratio(run: int, word_bits: int, page_bytes: int) -> Fraction:
    """Words a paged level moves per word of a child tile read in contiguous runs of ``run`` words:
    every run is rounded up to whole (aligned) pages."""
    return Fraction(math.ceil(Fraction(run * word_bits, 8 * page_bytes)) * page_bytes * 8, word_bits * run)


def run_words(part, full) -> int:
    """Contiguous run (words) of a child tile with rank extents ``part`` in a row-major layout of
    extents ``full`` (last rank fastest): the last rank's extent, times the ranks before it as long
    as the child spans the whole extent there."""
    run = 1
    for e, E in zip(reversed(part), reversed(full)):
        run *= e
        if e != E:
            break
    return run


def layout_runs(part: np.ndarray, full) -> tuple[np.ndarray, list[tuple[int, int]]]:
    """Every contiguous run a child tile can have in some rank order (layout) of its tensor.

    ``part`` (m, R): child tile extents per row; ``full`` (R,): the level's. In a layout whose
    innermost ranks are a set S the child spans whole, with rank r just outside them, the run is
    ``prod(full[S]) * part[:, r]`` (:func:`run_words`); every layout's run is one of these. Returns
    runs (m, C) (0 where S is not spanned whole in that row) and, per column, (S as a bit mask, r)."""
    part = np.atleast_2d(np.asarray(part, np.int64))
    R = part.shape[1]
    if R == 0:                                   # a scalar: one word
        return np.ones((len(part), 1), np.int64), [(0, -1)]
    whole = part == np.asarray(full, np.int64)[None, :]
    cols, keys = [], []
    for S in range(1 << R):
        inner = [i for i in range(R) if S >> i & 1]
        spanned = whole[:, inner].all(axis=1)
        size = math.prod(int(full[i]) for i in inner)
        for r in range(R):
            if not S >> r & 1:
                cols.append(np.where(spanned, size * part[:, r], 0))
                keys.append((S, r))
    return np.stack(cols, axis=1), keys


def layout_of(S: int, r: int, R: int) -> list[int]:
    """A rank order (outermost first) with the ranks of bit mask ``S`` innermost and ``r`` just
    outside them: the layout that gives :func:`layout_runs`' column (S, r)."""
    rest = [i for i in range(R) if not S >> i & 1 and i != r]
    return rest + ([r] if r >= 0 else []) + [i for i in range(R) if S >> i & 1]


def paged(count, ratio: Fraction):
    """``count`` words moved in whole pages: ``ceil(count * ratio)`` exactly, for numbers or arrays."""
    num, den = ratio.numerator, ratio.denominator
    if not isinstance(count, np.ndarray):
        return -(-count * num // den)
    if count.size and int(count.max()) * num >= 2**62:          # would overflow int64
        return np.array([-(-int(x) * num // den) for x in count.ravel()], dtype=object) \
            .reshape(count.shape).astype(np.int64)
    return -(-(count * num) // den)
