"""The map space as a search tree, with exact costs at the leaves and lower bounds inside.

A node is a partial mapping that has chosen the loops of every level above ``depth`` and which
tensors level ``depth`` keeps. Expanding it chooses level ``depth``'s spatial factors, temporal
factors and loop order, and the keep set of the next level; every child of a node is generated
and bounded at once with NumPy.

Why top-down works: the words that enter a level depend only on the loops *above* it (its tile is
the product of everything that is left, its repetitions are the loops above down to the innermost
one that indexes the tensor). So when a child enters level ``depth + 1`` its fills and the reads of
each tensor's parent level are final; what is still open are reads of the innermost kept levels,
and those are bounded below by the words that would enter ``depth + 1`` (any deeper child must
receive at least that much). Per-level traffic over bandwidth and the compute product give a cycle
lower bound; the final counts so far plus the open bounds give an energy lower bound. Leaves are
priced with :mod:`storeloop.model.costs`, the model's own cost kernel.
"""

from __future__ import annotations

import functools
import itertools
import math
from fractions import Fraction
from dataclasses import dataclass, field

import numpy as np

from storeloop.mapper.below import SAFE, BelowBounds, fronts, rowprod
from storeloop.mapper.space import MapSpace, divisors
from storeloop.mapper.uneven import Split
from storeloop.mapper.window import touched
from storeloop.model import costs, disk, nest
from storeloop.errors import MappingError
from storeloop.model.evaluate import evaluate
from storeloop.ir import EnergyTable, Mapping, Workload, plain

RD, FL, UP = 0, 1, 2
# a leaf priced by the reference model (a sliding window's exact leaves) counts as this many
# candidates against a budget: its cost is about a thousand bounded candidates'
EXACT_COST = 1000
# the levels' walks Tree._pair_terms keeps (cleared when it holds this many)
WALK_CACHE = 1 << 16
CARTESIAN_CACHE = 2_000_000      # rows of temporal factor combinations a tree keeps for reuse
CHUNK_ROWS = 250_000             # (factors, order) rows of one level bounded at once
MAX_CHILDREN = 2_000_000         # children an expansion keeps (the best bounds); the rest are cut
LEVEL_MAPS = 100_000             # level mappings Tree.mapping keeps for reuse
PLAUSIBLE_ORDERS = 2             # orders per combination of a level's factors from which they are bounded first without them


_SHAPES: dict = {}             # id of a level's spatial options (shared by map spaces) -> (them, their shapes)


def _unit_shapes(opts: list) -> list[tuple]:
    """The distinct products X x Y of a level's spatial options, the most units first; computed
    once per options list (map spaces share them, mapper/space.py), which the cache holds."""
    got = _SHAPES.get(id(opts))
    if got is None or got[0] is not opts:
        if len(_SHAPES) > 4096:
            _SHAPES.clear()
        shapes = sorted({tuple(a * b for a, b in zip(x, y)) for x, y in opts}, key=math.prod, reverse=True)
        got = _SHAPES[id(opts)] = (opts, shapes)
    return got[1]


def _take(rows: dict, info: dict | None, used: np.ndarray) -> tuple[dict, dict | None]:
    """The rows ``used`` of an expansion's row arrays and of its refill information."""
    if info is not None:
        info = {k: [x[used] for x in v] if k == "moved" else
                [None if x is None else (x[0], x[1][used]) for x in v] if k == "keeper" else v[used]
                for k, v in info.items()}
    return {k: v if k == "perms" else v[used] for k, v in rows.items()}, info


def _join(a: tuple, b: tuple) -> tuple:
    """Two pieces' survivors (rows, r, c, clb, elb, refill) as one, b's rows after a's."""
    rows = {k: v if k == "perms" else np.concatenate([v, b[0][k]]) for k, v in a[0].items()}
    off = len(a[0]["P"])
    info = None
    if a[5] is not None:
        x, y = a[5], b[5]
        info = {k: [np.concatenate([p, q]) for p, q in zip(v, y[k])] if k == "moved" else
                [None if p is None else (p[0], np.concatenate([p[1], q[1]])) for p, q in zip(v, y[k])]
                if k == "keeper" else np.concatenate([v, y[k]]) for k, v in x.items()}
    return (rows, np.concatenate([a[1], b[1] + off]), np.concatenate([a[2], b[2]]), np.concatenate([a[3], b[3]]),
            np.concatenate([a[4], b[4]]), info)


def pareto(secs: np.ndarray, pj: np.ndarray) -> np.ndarray:
    """Indices of the finite (seconds, energy) points no other beats in both (one of equal points)."""
    out: list[int] = []
    for i in np.lexsort((pj, secs)):               # by seconds, then energy
        if np.isfinite(secs[i]) and (not out or pj[i] < pj[out[-1]]):
            out.append(int(i))
    return np.array(out, np.int64)


def cartesian(lists: list[list[int]]) -> np.ndarray:
    out = np.ones((1, 0), dtype=np.int64)
    for opts in lists:
        a = np.asarray(opts, dtype=np.int64)
        out = np.concatenate([np.repeat(out, len(a), axis=0), np.tile(a, len(out))[:, None]], axis=1)
    return out


def _level_walks(orders: tuple, step: tuple, inward: tuple, extents: tuple, box: int) -> tuple[int, ...]:
    """One level's share of a pair of keepers' sends (:meth:`Tree._least_send_floor`), per order of
    its temporal loops (``orders``: each a tuple of their dimensions, outer first): its loops
    (dimension, factor, step along each rank) walked innermost first from ``inward`` (the steps of
    the loops below it), as :func:`storeloop.model.nest.send_walk`. Cached by :meth:`Tree._pair_terms`
    (sibling nodes share most levels' loops)."""
    by = {d: (f, st) for d, f, st in step}
    return tuple(nest.send_walk([by[d] for d in reversed(ds)], inward, extents, box) for ds in orders)


def _blocks_over(words: np.ndarray, had, block: int) -> np.ndarray:
    """:func:`_blocks_beyond` of arrays."""
    return np.where(words > had, -(-words // block) + (-had // block), 0)


def _send_walks(perms: np.ndarray, tf: np.ndarray, step: np.ndarray, inward: np.ndarray, ext: np.ndarray,
                box: np.ndarray) -> np.ndarray:
    """:func:`storeloop.model.nest.send_walk` of many (loops, start) at once: row k walks the loops
    of dimensions ``perms[k]`` (innermost first) of factors ``tf[k]`` and steps ``step[k]`` (per
    dimension, per rank) from ``inward[k]``, over a box of extents ``ext[k]`` (words ``box[k]``)."""
    k = np.arange(len(perms))
    words = np.zeros(len(perms), np.int64)
    inward = inward.copy()
    for pos in range(perms.shape[1]):
        d = perms[:, pos]
        f, st = tf[k, d], step[k, d]
        shift = st - inward
        inward += st
        new = box - np.prod(np.maximum(ext - np.abs(shift), 0), axis=1)
        words = words * f + (f - 1) * new
    return words


def _blocks_beyond(words: int, had: int, block: int) -> int:
    """The blocks of ``block`` words that reading ``words`` at a level takes beyond the ``had`` a
    node already counted there (:meth:`Tree._send_floor`)."""
    return -(-words // block) + (-had // block) if words > had else 0


@functools.lru_cache(maxsize=1024)
def _capacity_cases(bounds: tuple[int, ...], rel: tuple[tuple[bool, ...], ...], keep_masks: tuple[int, ...], S: int,
                    ratio: int, sizes: tuple[float, ...], macs: float, positions: bool = False) -> tuple:
    """The cases of :meth:`Tree._capacity_bound` that depend only on the problem's shape (its
    tensors' ``sizes`` and ``macs`` included), the innermost level's keep sets and capacity ``S``
    and its instances per top instance ``ratio``: per case (kept set, tile factors f at R, e; -1:
    no loop above R) that is open (its e has a loop left above R) and unlike the ones before it,
    the tensors kept (n, T) and the words of each tensor that enter R (n, T); and the splits'
    Pareto-largest shares per tensor (k, T). Cached for the process: a sweep's points share most of them.

    ``positions`` (uneven positions, ``mapper/uneven.py``): R's kept tensors may lie at several
    positions among its loops. f and e are then those of the outermost position that keeps a
    tensor, whose tensors are weighed as above; each kept tensor below it (the ``inner`` ones of
    a case) holds a tile of at least one word and, since the loop just above its position indexes
    it (the split's rule), is refilled on every iteration above that position: at least
    ``macs / prod(f_d, d not in t)`` words, its loops below being a part of f's."""
    T, D = len(rel), len(bounds)
    dims = [d for d in range(D) if bounds[d] > 1]
    blocks = []                                    # per (kept set, outer set): (mask, outer, its shapes)
    for mask in keep_masks:
        kept = [t for t in range(T) if mask >> t & 1]
        if len(kept) > S:
            continue
        for outer in fronts(mask, positions):
            front = [t for t in kept if outer >> t & 1]
            inner = len(kept) - len(front)             # a word each, at least
            # dimensions no tensor at f's position has take their whole bound at R (it only lowers
            # refills); the others are enumerated over the tile shapes that fit in S
            fr = [d for d in dims if not any(rel[t][d] for t in front)]
            tied = [d for d in dims if d not in fr]
            shapes: list[list[int]] = []

            def grow(i: int, f: list[int], tiles: list[int]) -> None:
                """Each shape from ``f`` on growing dimensions tied[i:], ``tiles`` its front tensors' tiles."""
                shapes.append(f[:])
                for j in range(i, len(tied)):
                    d = tied[j]
                    for g in divisors(bounds[d])[1:]:
                        grown = [x * g if rel[t][d] else x for x, t in zip(tiles, front)]
                        if sum(grown) + inner > S:
                            break
                        f[d] = g
                        grow(j + 1, f, grown)
                        f[d] = 1

            grow(0, [bounds[d] if d in fr else 1 for d in range(D)], [1] * len(front))
            blocks.append((mask, outer, shapes))

    def shares_of(i: int, left: int, s: dict[int, int]):
        """Per split of at most ``left`` instances over dims[i:], each tensor's share."""
        if i == len(dims):
            yield tuple(math.prod(g for d, g in s.items() if not rel[t][d]) for t in range(T))
            return
        for g in divisors(bounds[dims[i]]):
            if g > left:
                break
            yield from shares_of(i + 1, left // g, {**s, dims[i]: g})

    # only the splits with Pareto-largest shares can give the least total
    shares = set(shares_of(0, ratio, {}))
    shares = [a for a in shares if not any(b != a and all(x >= y for x, y in zip(b, a)) for b in shares)]
    # per case: the tensors kept, whether its dimension e is one R's tile leaves open, and the words
    # of each tensor that enter R (its refills over the loops above, at least its size)
    b = np.array(bounds, np.int64)
    relm = np.array(rel, bool)
    # every case: each shape with each e (the dimensions, then -1), shape by shape
    loops = np.array(dims + [-1], np.int64)
    sizes_of = [len(f) * len(loops) for _, _, f in blocks]
    masks = np.repeat(np.array([m for m, _, _ in blocks], np.int64), sizes_of)
    outers = np.repeat(np.array([o for _, o, _ in blocks], np.int64), sizes_of)
    fe = np.repeat(np.array([f for _, _, fs in blocks for f in fs], np.int64).reshape(-1, D), len(loops), axis=0)
    es = np.tile(loops, len(fe) // len(loops))
    kept = ((masks[:, None] >> np.arange(T)[None, :]) & 1).astype(bool)                  # (n, T)
    inside = kept & ~((outers[:, None] >> np.arange(T)[None, :]) & 1).astype(bool)
    has_e = es >= 0
    e_rel = np.where(has_e[:, None], relm.T[np.maximum(es, 0)], False) | inside           # (n, T)
    left = fe < b[None, :]                                                                 # (n, D)
    ok = np.where(has_e, left[np.arange(len(es)), np.maximum(es, 0)], ~left.any(axis=1))
    inner = fe.prod(axis=1).astype(np.float64)
    tiles = np.stack([np.where(relm[t][None, :], fe, 1).prod(axis=1) for t in range(T)], axis=1)
    sizes = np.array(sizes, np.float64)
    words = np.maximum(np.where(e_rel, macs * tiles / inner[:, None], sizes[None, :]), sizes[None, :])
    # only the open cases count, and of those with the same kept set and words the first (same price)
    kept, words = kept[ok], words[ok]
    _, first = np.unique(np.concatenate([kept, words], axis=1), axis=0, return_index=True)
    first.sort()
    out = (kept[first], words[first], np.array(shares, np.float64).reshape(len(shares), T))
    for a in out:
        a.flags.writeable = False
    return out


@dataclass
class Node:
    """One partial mapping (scalars and small arrays; ``depth`` = level whose loops come next)."""

    depth: int
    rem: np.ndarray        # (D,) what is left of each bound
    P: int                 # product of the temporal factors chosen so far
    rep: np.ndarray        # (T,) product of the loops down to each tensor's innermost relevant one
    above: np.ndarray      # (D,) spatial product of the levels above `depth`
    last: np.ndarray       # (T,) innermost level that keeps each tensor so far
    scat: np.ndarray       # (T,) relevant spatial product since `last`
    partl: np.ndarray      # (T,) partition size of each tensor at `last` (outputs)
    cnt: np.ndarray        # (levels, T, 3) reads, fills, updates per instance (final ones)
    util: np.ndarray       # (levels,) utilized instances of each level entered so far
    e_acc: float           # energy of the final counts (lower-bound arithmetic)
    choice: tuple          # per decided level: (temporal (D,), X (D,), Y (D,), order, keep mask, spatial order)
    keep: int              # keep mask of level `depth`
    spans: np.ndarray      # (levels, D) tile span of each decided level and of `depth` (for pages)
    ssd_s: float = 0.0     # an SSD-backed top level: seconds of its final streams so far
    ssd_pJ: float = 0.0    # and their energy
    # with a free layout (Tree(free_layout=True)): per tensor whose runs had several layouts none of
    # which beats the others in both, their (extra seconds, extra pJ) over ssd_s and ssd_pJ (the least)
    pending: tuple = ()
    # a last-level node priced ahead with its siblings (Tree.prefetch): (candidates, complete, its
    # best leaf or ()), taken by Tree.expand as if it priced the node then; a sliding window's
    # node keeps its leaves' surrogate prices instead of a best leaf, (cycles, energy, choice), for
    # Tree.expand to price the exact leaves that could win when the search visits it
    leaf: tuple | None = None
    surrogate: tuple | None = None
    # a sliding window's last-level node: its leaves' send floors in pieces and their least, as
    # Tree.floor_cut computed them for this walk (Tree._exact_leaves takes them)
    floors: tuple | None = None
    # uneven positions (Tree.split): the words the positions of `depth`'s physical level hold so far
    # (down to `depth`), and the tensors they keep
    held: int = 0
    gkept: int = 0


@dataclass
class Ruled:
    """A last-level child that :meth:`Tree.floor_cuts` ruled out before it was built: all that the
    walk's visit takes from a node priced ahead (``Node.leaf``: the candidates it counts)."""

    depth: int
    leaf: tuple
    surrogate: None = None
    pending: tuple = ()


@dataclass
class Children:
    """Survivors of one expansion, best lower bound first."""

    node: Node
    rows: dict             # per-row arrays (combo x order)
    row: np.ndarray        # row of each child
    mask: np.ndarray       # keep mask of each child (of level depth + 1)
    clb: np.ndarray
    elb: np.ndarray
    refill: dict | None = None   # what Tree.refine needs to raise a child's bound when it is visited
    settled: np.ndarray | None = None   # the root's: the children a first walk settled (Tree.settled)
    sends: dict = field(default_factory=dict)   # a window's send pieces its last-level children share (Tree.floor_cut)


class Tree(BelowBounds):
    """``exact``: the sliding-window problem ``space.workload`` is the plain surrogate of
    (:mod:`storeloop.mapper.window`): every bound holds for it, and the leaves that could beat the
    best so far are priced by the reference model (:meth:`_exact_leaves`)."""

    def __init__(self, space: MapSpace, energy: EnergyTable, free_layout: bool = False,
                 exact: Workload | None = None, split: Split | None = None):
        self.space, self.energy, self.exact = space, energy, exact
        # uneven positions: space.arch is the split's virtual arch; mappings and the model's
        # prices are the physical arch's (mapper/uneven.py)
        self.split = split
        self.model_arch = split.arch if split is not None else space.arch
        self.priced = exact or space.workload          # the problem the model prices
        self.arch, self.workload = space.arch, space.workload
        w = self.workload
        self.T, self.D, self.nlev = len(w.tensors), len(w.dims), space.nlev
        self.bounds = np.array(w.bounds, dtype=np.int64)
        self.rel = np.array(space.relevant, dtype=bool)                  # (T, D)
        self.rel_dims = [np.nonzero(r)[0] for r in self.rel]              # each tensor's dimensions
        self.other_dims = [np.nonzero(~r)[0] for r in self.rel]           # and the others
        self.rw = np.array([t.read_write for t in w.tensors], dtype=bool)
        self.costs = [energy.storage[lvl.name] for lvl in self.arch.levels]
        # single-buffered levels: the leaves serialize their fills with use; every bound, made for
        # overlapped fills, stays a bound (serializing only adds time)
        self.single = {L for L, lvl in enumerate(self.arch.levels) if lvl.buffering == "single"}
        # paged levels (access granularity, model.nest.page_factors): words moved per child tile
        self.pages = {L: lvl.page_bytes for L, lvl in enumerate(self.arch.levels) if lvl.page_bytes}
        # an SSD-backed top level (model.disk): each tensor's seconds and energy per word follow
        # from its runs and child tile, known once its next keeper is chosen; until then the peak
        # streams' time and the least energy per word bound them
        self.ssd = self.arch.levels[0] if self.arch.levels[0].ssd is not None else None
        # free_layout: the SSD level stores each tensor in whichever rank order prices it best
        # (costs.layout_runs): bounds take the least over the layouts, leaves every layout not beaten
        self.free = free_layout and self.ssd is not None
        self.rank_dims = [[r[0][0] for r in t.ranks] for t in w.tensors]
        self.compute_pJ = w.macs * energy.compute.read_pJ
        self.class_of = np.full(self.D, -1)
        for ci, (_, ds) in enumerate(space.classes):
            self.class_of[ds] = ci
        self.class_rel = np.array([[ti in ts for ts, _ in space.classes] for ti in range(self.T)], dtype=bool)
        self._class_dims = np.array([[d in ds for d in range(self.D)] for _, ds in space.classes],
                                    dtype=bool).reshape(len(space.classes), self.D)
        tot = [f[0] for f in space.fanouts]
        self.cap_below = [math.prod(tot[L:]) for L in range(self.nlev)] + [1]
        # the most words one instance of any level below L can hold (inf: an unbounded level)
        sizes = [math.inf if lvl.size_words is None else lvl.size_words for lvl in self.arch.levels]
        self.cap_after = [max(sizes[L + 1:], default=0) for L in range(self.nlev)]
        # energy per word of each action, for lower bounds
        self.rpw = np.array([c.read_pJ / lvl.block_size for c, lvl in zip(self.costs, self.arch.levels)])
        self.wpw = np.array([c.write_pJ / lvl.block_size for c, lvl in zip(self.costs, self.arch.levels)])
        # may_keep[L, t]: some keep set the constraints allow at level L holds tensor t
        self.may_keep = np.array([[any(m >> t & 1 for m in space.keep_masks[L]) for t in range(self.T)]
                                  for L in range(self.nlev)], dtype=bool).reshape(self.nlev, self.T)
        # each tensor's backing level: the outermost that may keep it (0 unless the constraints
        # home it further down, bypassing the levels above)
        self.back = np.array([int(np.argmax(self.may_keep[:, t])) for t in range(self.T)], dtype=np.int64)
        # per level L and dimension, the largest and least factor levels L.. can take together (their
        # temporal ranges times their spatial options): a child whose remainder falls outside
        # cannot be completed below, whatever its bound (constraints that fix inner factors)
        self.reach_hi = np.ones((self.nlev + 1, self.D), np.float64)
        self.reach_lo = np.ones((self.nlev + 1, self.D), np.float64)
        for L in range(self.nlev - 1, -1, -1) if self.D else ():
            rng = np.array([space.temporal_range(L, d) for d in range(self.D)], np.float64)
            so = space.spatial_options[L]
            opts = (np.array([x for x, _ in so], np.float64) * np.array([y for _, y in so], np.float64)
                    if so else np.ones(self.D)).reshape(-1, self.D)
            self.reach_hi[L] = self.reach_hi[L + 1] * rng[:, 1] * opts.max(axis=0)
            self.reach_lo[L] = self.reach_lo[L + 1] * rng[:, 0] * opts.min(axis=0)
        # each tensor's elements, every one of which leaves its backing level and enters its
        # innermost keeper at least once (a windowed tensor's: those its computes read)
        self.sizes = np.array([touched(exact, t) if exact is not None else w.tensor_elements(w.tensors[t])
                               for t in range(self.T)], np.float64)
        self.global_lb, self.bound_parts = self.lower_bound()
        self.below = self._below_terms()
        self._refills: dict[tuple, tuple | None] = {}
        self._window_forms: dict[tuple, tuple] = {}    # (t, e) -> BelowBounds._window_dims
        self._level_maps: dict[tuple, object] = {}      # Tree.mapping's, per level and choice
        self._spatial: dict[int, tuple] = {}       # per level: its spatial options as arrays
        self._cartesian: dict[tuple, np.ndarray] = {}   # (level, what is left) -> its temporal factors
        self._cached = 0                                  # rows in _cartesian
        self._perms: list[tuple] = []                    # the orders rows name (rows["oid"] indexes it)
        self._perm_ids: dict[tuple, int] = {}
        self.inst_above = max((lvl.instances for lvl in self.arch.levels[:-1]), default=1)   # (outputs: partitions)
        # the levels whose traffic can bound cycles: those on a port with a bandwidth limit (a
        # child's words at the others are not counted: they could only add 0 to its cycle bound)
        self.timed = {v for l, ls in self._ports(self.nlev) for v in ls
                      if any(bw is not None for bw in (self.arch.levels[l].read_bandwidth,
                                                      self.arch.levels[l].write_bandwidth,
                                                      self.arch.levels[l].shared_bandwidth))}
        self.stats = {"candidates": 0, "complete": 0, "pruned_capacity": 0, "pruned_bound": 0}
        if exact is not None:      # leaves priced by the model, and any whose surrogate price exceeded it
            self.stats.update(exact=0, bound_violations=0)
        self.halt = lambda: False  # the search's stop rules (deadline, budget), checked between exact leaves
        # an exact leaf priced in the first temporal order it stands for only (a first, partial walk:
        # mapper._two_walks); its spatial orders all the same. Such a walk notes whether a leaf
        # since the flag was cleared has other orders that the walk over every order must still
        # look at (``open_orders``), and the top-level subtrees it walked with none
        # (``settled``, by :meth:`top_key`): that walk skips them
        self.first_orders = False
        self.open_orders = False
        self.settled: set = set()
        self._dims_of: dict = {}           # (level, order) -> its loops' dimensions (Tree._order_dims)
        self._looped: dict = {}            # Tree._looped_orders
        self._boxes: dict = {}             # Tree._send_box
        self._walks: dict = {}             # the levels' walks of Tree._pair_terms
        self._padded_of: dict = {}         # Tree._padded_orders, per key of Tree._looped_orders
        # the energy gap the search may leave (lexicographic objective): a subtree whose energy
        # bound is within it of the best's, at the best's cycles, is cut (:meth:`cut`); per best
        # cycles, the least energy bound so cut
        self.gap, self.gap_lb = 0.0, {}
        # the model's tiles of a windowed problem (rank extents sum(c * (F - 1)) + 1): a level's
        # capacity is checked on them, so no child is kept whose tiles the model would refuse
        # the read-only tensors with a windowed rank (their true tiles bound their arrivals)
        self.windowed = [] if exact is None else [
            t for t, tn in enumerate(exact.tensors) if not tn.read_write and any(not plain(r) for r in tn.ranks)]
        self._coefs = {t: nest._coefficients(exact.tensors[t]) for t in self.windowed}
        # per tensor, its ranks as (dimension, coefficient) terms: a windowed tensor's exact ones,
        # the others' plain dimensions (the surrogate's)
        self.ranks_of = [tuple(exact.tensors[t].ranks) if t in self.windowed else
                         tuple(((int(d), 1),) for d in self.rel_dims[t]) for t in range(self.T)]
        # the dimensions with a coefficient above 1 in a windowed tensor's rank (a stride, a dilation)
        self.strided = [any(c > 1 for t in self.windowed for r in self.ranks_of[t] for x, c in r if x == d)
                        for d in range(self.D)]
        self.dims_of = [{x for r in ranks for x, _ in r} for ranks in self.ranks_of]     # each tensor's dimensions
        # with sliding windows: the exact ranks' coefficients (D, ranks) and each tensor's ranks (columns)
        self.extents = None
        if exact is not None:
            ranks = [r for t in exact.tensors for r in t.ranks]
            coefs = np.zeros((self.D, len(ranks)), np.int64)
            for k, r in enumerate(ranks):
                for d, c in r:
                    coefs[d, k] += c
            first = np.cumsum([0] + [len(t.ranks) for t in exact.tensors])
            self.extents = (coefs, [range(a, b) for a, b in zip(first, first[1:])])
        self._spatial_of: dict = {}        # Tree._spatial_dims, per spatial factors

    # ------------------------------------------------------------------ root and global bound
    def root(self) -> Node:
        T, nlev = self.T, self.nlev
        size = np.array([np.prod(self.bounds[self.rel[t]]) for t in range(T)], dtype=np.int64)
        # last: each tensor's keeper so far, level 0 (or -1: none yet, a tensor homed further down)
        return Node(0, self.bounds.copy(), 1, np.ones(T, np.int64), np.ones(self.D, np.int64),
                    np.where(self.back == 0, 0, -1), np.ones(T, np.int64), np.where(self.rw, size, 1),
                    np.zeros((nlev, T, 3), np.int64), np.ones(nlev, np.int64), 0.0, (), self.space.keep_masks[0][0],
                    np.vstack([self.bounds[None, :], np.ones((nlev - 1, self.D), np.int64)]), 0.0, 0.0)

    # ------------------------------------------------------------------ pages
    def _runs(self, t: int, full, part) -> np.ndarray:
        """Contiguous run (words) of child tiles ``part`` (m, D) in a layout of extents ``full`` (D,)."""
        part = np.atleast_2d(part)
        run = np.ones(len(part), np.int64)
        going = np.ones(len(part), bool)
        for d in reversed(self.rank_dims[t]):
            run = np.where(going, run * part[:, d], run)
            going &= part[:, d] == full[d]
        return run

    def _page_factor(self, L: int, runs: np.ndarray, bound: bool = False) -> np.ndarray:
        """Per row, the factor for runs (exact), or its lower bound over any sub-tile (``bound``)."""
        pw = self.pages[L] * 8 / self.arch.levels[L].word_bits
        if bound:
            return np.where(runs < pw, pw / runs, 1.0)
        return np.ceil(runs * (1.0 / pw) - 1e-12) * pw / runs

    def _paged(self, L: int, count, run: int):
        """``count`` words of child tiles with runs of ``run`` words, in whole pages (exact)."""
        return costs.paged(count, costs.page_ratio(run, self.arch.levels[L].word_bits, self.pages[L]))

    def _ssd_runs(self, t: int, full, part) -> np.ndarray:
        """(m, C) runs the SSD level can serve t's child tiles ``part`` in: the declared layout's,
        or with a free layout every layout's (0: none in that row)."""
        if not self.free:
            return self._runs(t, full, part)[:, None]
        dims = self.rank_dims[t]
        return costs.layout_runs(np.atleast_2d(part)[:, dims], np.asarray(full)[dims])[0]

    def _ssd_costs(self, runs: np.ndarray, tiles: np.ndarray, reads, writes) -> tuple[np.ndarray, np.ndarray]:
        """Seconds and pJ (m, C) of ``reads`` and ``writes`` words (m,) in ``runs`` (m, C) of child
        tiles ``tiles`` (m,); infinite where a run is 0."""
        m, C = runs.shape
        flat, tl = np.maximum(runs, 1).ravel(), np.repeat(np.asarray(tiles, np.int64), C)
        secs, pj = np.zeros((m, C)), np.zeros((m, C))
        for words, read in ((reads, True), (writes, False)):
            words = np.asarray(words, np.float64)[:, None]
            if words.any():
                s, e = self._ssd_rates(flat, tl, read)
                secs, pj = secs + words * s.reshape(m, C), pj + words * e.reshape(m, C)
        none = runs == 0
        if not none.any():
            return secs, pj
        return np.where(none, np.inf, secs), np.where(none, np.inf, pj)

    def _ssd_rates(self, runs: np.ndarray, tiles: np.ndarray, read: bool) -> tuple[np.ndarray, np.ndarray]:
        """Seconds and picojoules per word of the SSD level's reads (writes) per row of runs and tiles."""
        return disk.word_rates_many(self.ssd, runs, tiles, read)

    JOINT_UNITS = 200_000        # combinations of the fanouts' spatial options weighed together, at most

    def most_units(self) -> int:
        """The most compute units a mapping of the space runs at once: the largest product of
        one spatial option per fanout whose factors, dimension by dimension, divide the bounds
        together (beyond JOINT_UNITS combinations: each fanout's largest option alone, a
        relaxation)."""
        per_level = []
        for opts in self.space.spatial_options:
            xy = _unit_shapes(opts)
            if len(xy) > 1 or any(f > 1 for o in xy for f in o):
                per_level.append(xy)
        if not per_level:
            return 1
        if math.prod(len(o) for o in per_level) > self.JOINT_UNITS:
            return math.prod(math.prod(o[0]) for o in per_level)
        bounds, best = [int(b) for b in self.workload.bounds], 0

        def walk(i: int, used: list[int], units: int) -> None:
            nonlocal best
            if i == len(per_level):
                best = max(best, units)
                return
            for o in per_level[i]:          # largest first: stop where even the rest at their largest cannot win
                if units * math.prod(o) * math.prod(math.prod(r[0]) for r in per_level[i + 1:]) <= best:
                    break
                nxt = [u * f for u, f in zip(used, o)]
                if all(b % n == 0 for b, n in zip(bounds, nxt)):
                    walk(i + 1, nxt, units * math.prod(o))
        walk(0, [1] * len(bounds), 1)
        return max(best, 1)

    def compulsory(self, sizes) -> dict[str, int]:
        """Per backing level, the cycles its ports take to pass each of its tensors' ``sizes``
        (elements) once (an SSD-backed first level's are the first keepers' instead)."""
        w, parts = self.workload, {}
        for b in sorted(set(self.back.tolist())):           # each backing level's tensors cross it once
            if b == 0 and self.ssd is not None:   # an SSD's streams: with the first keepers below (_first_keepers)
                continue
            reads = sum(int(sizes[i]) for i, t in enumerate(w.tensors) if not t.read_write and self.back[i] == b)
            writes = sum(int(sizes[i]) for i, t in enumerate(w.tensors) if t.read_write and self.back[i] == b)
            top = self.arch.levels[b]
            n = 1 if b == 0 else top.instances     # (spread at best over the level's instances)
            bw = [(reads, top.read_bandwidth), (writes, top.write_bandwidth), (reads + writes, top.shared_bandwidth)]
            parts[f"{top.name} compulsory traffic"] = max(
                [math.ceil(Fraction(v, n) / Fraction(bb)) for v, bb in bw if bb] or [0])
        return parts

    def lower_bound(self) -> tuple[int, dict]:
        """Cycles no mapping can beat: compulsory traffic of the backing level (every element a
        compute reads, :attr:`sizes`), and compute (exact): the computes over the most units any
        mapping of the space runs at once (:meth:`most_units`: bounds whose divisors do not fill
        the fanouts leave units idle)."""
        w, arch = self.workload, self.arch
        units = self.most_units()
        parts = {"compute": math.ceil(Fraction(w.macs * arch.compute.cycles_per_op,
                                               min(arch.compute.instances, self.cap_below[0], units)))}
        parts.update(self.compulsory(self.sizes))
        # a single-buffered level L's fills wait for use (costs.buffered_cycles): the time from L down
        # is at least its fill time plus the compute's, and the fill time at least its parent's
        # reads of what the parent backs (read-only tensors leave their backing level whole)
        parts.update(self._first_keepers(max(parts.values())))
        chain = Fraction(parts["compute"])
        for L in sorted(self.single, reverse=True):
            if L == 0:
                continue
            reads = sum(int(self.sizes[i]) for i, t in enumerate(w.tensors)
                        if not t.read_write and self.back[i] == L - 1)
            parent = arch.levels[L - 1]
            n = 1 if L == 1 else parent.instances
            chain += max([Fraction(reads, n) / Fraction(bw) for bw in (parent.read_bandwidth, parent.shared_bandwidth)
                          if bw] or [0])
        if chain > parts["compute"]:
            parts["single-buffered fills, then compute"] = math.ceil(chain)
        return max(parts.values()), parts

    KEEPER_CASES = 4096          # _first_keepers enumerates up to this many choices of first keepers

    def _first_keepers(self, floor: int) -> dict:
        """Cycle bounds from where each tensor is first kept below its backing level: some level K
        (or none: the compute units take it word by word) is filled with every element at least
        once and reads each out at least once (an output: takes each element's first update), so
        K's bandwidth carries at least the sizes of the tensors it keeps first, spread at best over
        its instances. An SSD top level (model.disk) streams each tensor as child tiles of its
        first keeper, so no faster than a tile of K's capacity allows (two in flight: Little's
        law, :func:`storeloop.model.disk.bounds_per_word`), and its streams' times add. The parts
        are those of the first keepers, among those the constraints allow, whose largest part is
        least; ``floor``: the bound from elsewhere (a case at or below it ends the search)."""
        arch, nlev, T = self.arch, self.nlev, self.T
        options = [[L for L in range(int(self.back[t]) + 1, nlev) if self.may_keep[L, t]] + [nlev] for t in range(T)]
        unbounded = math.prod(map(len, options)) > self.KEEPER_CASES
        if unbounded:                        # each tensor's stream at the SSD's peak, no keeper's part
            options = [[nlev]] * T
        best, least = {}, math.inf
        for case in itertools.product(*options):
            parts = {}
            if self.ssd is not None:      # the SSD's read and write streams share the device: times add
                top, secs = self.ssd, 0.0
                for t in range(T):
                    if self.back[t] != 0:
                        continue
                    K = case[t]
                    tile = math.inf if unbounded else 1 if K == nlev else self.arch.levels[K].size_words or math.inf
                    read = not self.rw[t]
                    if tile == math.inf:
                        spw = disk.least_seconds_per_word(top.ssd, top.word_bits)[0 if read else 1]
                    else:
                        spw = disk.bounds_per_word(top.ssd, top.word_bits, int(tile), int(tile), read, 0.0)[0]
                    secs += float(self.sizes[t]) * spw
                # (float time: shaved by far less than SAFE, which would cost the bound whole cycles)
                parts[f"{top.name} compulsory traffic"] = math.ceil(secs * arch.clock_hz * (1 - 1e-12))
            for K in sorted(set(case) - {nlev}):
                lvl = arch.levels[K]
                words = Fraction(sum(int(self.sizes[t]) for t in range(T) if case[t] == K), lvl.instances)
                fills = Fraction(sum(int(self.sizes[t]) for t in range(T) if case[t] == K and not self.rw[t]),
                                 lvl.instances)     # read out again: the read-only ones
                cyc = [words / Fraction(lvl.write_bandwidth) if lvl.write_bandwidth else 0,
                       fills / Fraction(lvl.read_bandwidth) if lvl.read_bandwidth else 0,
                       (words + fills) / Fraction(lvl.shared_bandwidth) if lvl.shared_bandwidth else 0]
                parts[f"{lvl.name} first fills and reads"] = math.ceil(max(cyc))
            top_part = max(parts.values(), default=0)
            if top_part < least:
                best, least = parts, top_part
                if least <= floor:
                    break
        return {k: v for k, v in best.items() if v > 0}

    def energy_bound(self) -> tuple[float, dict]:
        """Energy (pJ) no mapping can beat, with its parts: every compute pays its operation; every
        element of a tensor leaves (an output: enters) the outermost level at least once (a
        windowed tensor: every element its computes read, :func:`storeloop.mapper.window.touched`); and each
        compute's operand comes from the tensor's innermost keeper L, which is filled with every
        element at least once and read at least once per compute, shared by at most the
        ``cap_below[L]`` units under one instance (multicast, spatial reduction); an output's
        keeper also reads back each update but the first write of every element an instance owns
        (Timeloop's reads = updates - partition, a partition at most the output). Where the
        innermost level fans out, Timeloop's compute-level deltas can make those reads as rare as
        the operand changes, so the per-compute term is left out there. Per tensor, the cheapest
        keeper the constraints allow is taken."""
        w = self.workload
        macs = w.macs
        per_compute = self.space.fanouts[-1][0] == 1
        parts = {"compute": float(self.compute_pJ)}
        for t, tensor in enumerate(w.tensors):
            size = self.sizes[t]
            b = int(self.back[t])
            top = self.wpw[b] if self.rw[t] else self.rpw[b]
            best = math.inf
            for L in range(b, self.nlev):
                if not self.may_keep[L, t]:
                    continue
                share = macs / self.cap_below[L] if per_compute else 0.0
                # an output's keeper reads back all but the first write of each element it owns
                again = self.rpw[L] * max(share - self.arch.levels[L].instances * size, 0.0) if self.rw[t] else 0.0
                if L == b:
                    e = top * max(size, share) + again
                elif self.rw[t]:
                    e = top * size + self.wpw[L] * share + again
                else:
                    e = top * size + self.wpw[L] * size + self.rpw[L] * share
                best = min(best, e)
            parts[tensor.name] = float(best)
        joint = self._capacity_bound() if per_compute else None
        if joint is not None and sum(joint.values()) > sum(v for k, v in parts.items() if k != "compute"):
            parts.update(joint)                      # the tensors' parts under the capacity bound
        return sum(parts.values()) * SAFE, parts

    CAPACITY_WORDS = 256         # the joint bound enumerates tile shapes of innermost levels up to this size

    def _capacity_bound(self) -> dict | None:
        """Per tensor, the energy of its accesses, jointly bounded by the innermost level's capacity
        and by how the instances split the work.

        Let R be the innermost level (no fanout below it, capacity S words per instance), s_d the
        product of dimension d's spatial factors above R and f_d the product of its factors at R.
        A tensor t that R keeps holds a tile of prod(f_d, d in t)
        words, and the kept tiles fit in S. Above R, the innermost loop (over a dimension e)
        indexes every tensor that has e, so each of them is refilled on every iteration above R:
        MACs / prod(f_d, d not in t) words in all. Only the tensors without e can be reused across
        the loops above, and then need at least their size. A tensor R bypasses is read (an
        output: updated) from above once per compute. Words that enter R beyond a tensor's size
        come from a level above, at least at its cheapest read, each read shared at most by the
        instances that hold the same tile: prod(s_d, d not in t) (multicast; for an output,
        spatial reduction). An output's partial sums that leave R beyond its size are written
        above and, to be accumulated again, read back (Timeloop's reads = updates - partition)
        and written into R. Every tensor's size leaves (an output's: enters) the outermost level
        once. The bound is the least total over every split s of R's instances (only the shares
        it gives count: the limits it puts on f are relaxed), every kept set R allows, every
        dimension e, and every tile shape that fits; None where R is unbounded or
        larger than CAPACITY_WORDS (the per-tensor bounds then stand alone)."""
        R, w = self.nlev - 1, self.workload
        lvl = self.arch.levels[R]
        if R == 0 or lvl.size_words is None or lvl.size_words > self.CAPACITY_WORDS or self.D == 0:
            return None
        S, macs = lvl.size_words, float(w.macs)
        bounds = self.bounds
        sizes = self.sizes
        top = np.where(self.rw, self.wpw[self.back], self.rpw[self.back])
        # uneven positions: R's positions (virtual levels g..R) are one level, whose tensors may
        # lie at any of them; words beyond R come from a level above all of them
        g, masks = self._positions(R)
        above = np.where(self.rw, self.wpw[:g].min(), self.rpw[:g].min())      # cheapest level above R
        read_above = self.rpw[:g].min()
        per_word_r = np.where(self.rw, self.wpw[R], self.rpw[R])              # R's own access per compute
        ratio = lvl.instances // self.arch.levels[0].instances                # R instances per top instance
        share_c = self.arch.compute.instances / self.arch.levels[0].instances

        keptm, words, share = _capacity_cases(tuple(int(b) for b in bounds), tuple(map(tuple, self.rel.tolist())),
                                              masks, int(S), int(ratio), tuple(map(float, sizes)), macs, g < R)
        # every split (k) x case (n) x tensor at once
        again = np.maximum(words[None] / share[:, None, :] - sizes, 0.0)         # moved above R beyond the size
        kept_e = top * sizes + per_word_r * macs + again * above
        kept_e = kept_e + np.where(self.rw, again * read_above + self.wpw[R] * np.maximum(words - sizes, 0.0),
                                   self.wpw[R] * words)
        # a tensor R does not keep: every compute takes it from above
        by_e = top * sizes + np.maximum(macs / np.minimum(share, share_c) - sizes, 0.0) * above     # (k, T)
        energy = np.where(keptm[None], kept_e, by_e[:, None, :])
        total = energy.sum(axis=2)
        if not total.size:
            return None
        k, i = np.unravel_index(int(np.argmin(total)), total.shape)       # the first split, then case, of the least
        return {tensor.name: float(energy[k, i, t]) for t, tensor in enumerate(w.tensors)}

    def _first_position(self, R: int, after: int = -1) -> int:
        """The first virtual level of R's physical level below ``after`` (R itself unless it is
        split into uneven positions)."""
        return R if self.split is None else max(self.split.members[self.split.group[R]][0], after + 1)

    def _positions(self, R: int, after: int = -1) -> tuple[int, tuple[int, ...]]:
        """:meth:`_first_position` and the sets of tensors R's level may keep over its positions from there."""
        g = self._first_position(R, after)
        if g == R:
            return R, tuple(self.space.keep_masks[R])
        may = 0
        for L in range(g, R + 1):
            for m in self.space.keep_masks[L]:
                may |= m
        return g, tuple(m for m in range(may + 1) if m & may == m)

    def _inner(self, L: int) -> bool:
        """Level L is an inner position of a split level (uneven positions)."""
        return self.split is not None and not self.split.first(L)

    def _indexed_inside(self, rows: dict) -> np.ndarray:
        """Per row, the tensors (a bit each) its innermost temporal loop indexes (0: no loop). Only
        those may lie at the next position of a split level: a tensor below a loop that does not
        index it has the same tile and counts one position up (its tile does not change from one
        step of that loop to the next), so that position stands for it (one split per mapping)."""
        cp = self._patterns(rows["tf"])[0]
        bits = (self.class_rel * (1 << np.arange(self.T))[:, None]).sum(axis=0)     # per class
        out = np.zeros(len(cp), np.int64)
        for oid in np.unique(rows["oid"]):
            sel = np.nonzero(rows["oid"] == oid)[0]
            got = np.zeros(len(sel), bool)
            for ci in reversed(rows["perms"][oid]):
                has = (cp[sel, ci] > 1) & ~got
                out[sel[has]] = bits[ci]
                got |= has
        return out

    def _ports(self, upto: int) -> list[tuple[int, list[int]]]:
        """The levels above ``upto`` by the bandwidth they share: (a level, the levels whose counts
        its ports carry) -- each level alone, or a split level's positions together."""
        if self.split is None:
            return [(L, [L]) for L in range(upto)]
        return [(vs[0], [v for v in vs if v < upto]) for vs in self.split.members if vs[0] < upto]

    def _traffic_cycles(self, L: int, r, w):
        lvl = self.arch.levels[L]
        out = 0.0
        if lvl.read_bandwidth is not None:
            out = np.maximum(out, r / lvl.read_bandwidth)
        if lvl.write_bandwidth is not None:
            out = np.maximum(out, w / lvl.write_bandwidth)
        if lvl.shared_bandwidth is not None:
            out = np.maximum(out, (r + w) / lvl.shared_bandwidth)
        return out

    # ------------------------------------------------------------------ expansion
    def _fixed(self, n: Node) -> int:
        """Uneven positions: the dimensions (a bit each) whose temporal factor at level n.depth must
        be 1 -- those an outer position of its physical level loops over (one loop per dimension a
        level), or all where an inner position keeps nothing (its loops would belong to the one
        above: one canonical split per mapping)."""
        L, sp = n.depth, self.split
        if not self._inner(L):
            return 0
        if n.keep == 0:
            return (1 << self.D) - 1
        out = 0
        for v in sp.members[sp.group[L]]:
            if v == L:
                break
            for d in np.nonzero(n.choice[v][0] > 1)[0]:
                out |= 1 << int(d)
        return out

    def _combos(self, n: Node) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every (temporal factors, X, Y) of level n.depth: per spatial option (in the map space's
        order) that divides what is left, the temporal factors the level's ranges and the levels
        below can take (the last level takes all that is left)."""
        L = n.depth
        fixed = self._fixed(n)
        if L not in self._spatial:
            opts = self.space.spatial_options[L]
            x = np.array([o[0] for o in opts], np.int64).reshape(len(opts), self.D)
            y = np.array([o[1] for o in opts], np.int64).reshape(len(opts), self.D)
            rng = np.array([self.space.temporal_range(L, d) for d in range(self.D)], np.int64).reshape(self.D, 2)
            self._spatial[L] = (x, y, x * y, rng)
        x, y, s, rng = self._spatial[L]
        ok = (n.rem[None, :] % s == 0).all(axis=1)
        x, y, left = x[ok], y[ok], n.rem[None, :] // s[ok]
        if L == self.nlev - 1:
            ok = ((left >= rng[:, 0]) & (left <= rng[:, 1])).all(axis=1)
            if fixed:
                ok &= (left[:, [d for d in range(self.D) if fixed >> d & 1]] == 1).all(axis=1)
            return left[ok], x[ok], y[ok]
        tf, rows = [], []
        for i, key in enumerate(map(tuple, left.tolist())):
            if (L, key, fixed) not in self._cartesian:
                lists = []
                for d in range(self.D):
                    # what is left for the levels below must be within what they can take
                    r_lo, r_hi = self.reach_lo[L + 1, d], self.reach_hi[L + 1, d]
                    lists.append([f for f in divisors(key[d]) if rng[d, 0] <= f <= rng[d, 1]
                                  and r_lo <= key[d] // f <= r_hi and (f == 1 or not fixed >> d & 1)])
                if self._cached > CARTESIAN_CACHE:     # memory stays bounded on large problems
                    self._cartesian.clear()
                    self._cached = 0
                self._cartesian[L, key, fixed] = cartesian(lists)
                self._cached += len(self._cartesian[L, key, fixed])
            c = self._cartesian[L, key, fixed]
            if len(c):
                tf.append(c)
                rows.append(np.full(len(c), i))
        if not tf:
            z = np.zeros((0, self.D), np.int64)
            return z, z, z
        rows = np.concatenate(rows)
        return np.concatenate(tf), x[rows], y[rows]

    def _patterns(self, tf: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per (temporal factors) row: the product of each class's factors, and which classes have a
        loop (the pattern that selects the level's orders)."""
        k = len(self.space.classes)
        cp = self._products(tf, self._class_dims, [ds for _, ds in self.space.classes])
        return cp, (cp > 1).astype(np.int64) @ (1 << np.arange(k, dtype=np.int64))

    def _chunks(self, n: Node, combos: tuple) -> list[tuple]:
        """The (factors, X, Y) combinations of level n.depth cut into consecutive pieces of at
        most :data:`CHUNK_ROWS` rows once each takes every order of its pattern (one piece when
        they fit), so that one expansion's arrays stay bounded whatever the problem."""
        tf = combos[0]
        counts = self._orders_of(n, self._patterns(tf)[1])
        if counts.sum() <= CHUNK_ROWS:
            return [combos]
        cuts = np.searchsorted(np.cumsum(counts), np.arange(CHUNK_ROWS, counts.sum(), CHUNK_ROWS), side="right")
        bounds = [0, *sorted(set(cuts.tolist()) - {0, len(tf)}), len(tf)]
        return [tuple(a[lo:hi] for a in combos) for lo, hi in zip(bounds, bounds[1:])]

    def _orders_of(self, n: Node, pattern: np.ndarray) -> np.ndarray:
        """Per row, how many orders of level n.depth's loops its pattern (:meth:`_patterns`) has."""
        orders = self.space.orders[n.depth]
        per = np.zeros(max(max(orders, default=0), int(pattern.max(initial=0))) + 1, np.int64)
        per[list(orders)] = [len(o) for o in orders.values()]
        return per[pattern]

    def _rows(self, n: Node, tf: np.ndarray, sx: np.ndarray, sy: np.ndarray) -> dict | None:
        """Every (factors, order) of level n.depth for the combinations (tf, sx, sy), with the state
        each leaves for the next level."""
        if not len(tf):
            return None
        cp, pattern = self._patterns(tf)
        idx, oids, perms = [], [], self._perms  # rows x orders; each row's order as an index into perms
        blocks = []                            # (start, stop, order): consecutive rows of one order
        ids = self._perm_ids
        start = 0
        for p in np.unique(pattern):
            sel = np.nonzero(pattern == p)[0]
            for perm in self.space.orders[n.depth][int(p)]:
                if perm not in ids:
                    ids[perm] = len(perms)
                    perms.append(perm)
                idx.append(sel)
                oids.append(np.full(len(sel), ids[perm]))
                blocks.append((start, start + len(sel), perm, int(p)))
                start += len(sel)
        if not idx:
            return None
        idx = np.concatenate(idx)
        order_ids = np.concatenate(oids)
        tf, sx, sy, cp = (np.take(a, idx, axis=0) for a in (tf, sx, sy, cp))
        m = len(idx)
        P = np.full(m, n.P, np.int64)
        rep = np.broadcast_to(n.rep, (m, self.T)).copy()
        for a, b, perm, p in blocks:      # one pattern a block: the same classes have loops in every row
            run = P[a:b].copy()
            r = rep[a:b]                  # (a view: written in place)
            for ci in perm:
                if p >> ci & 1:           # this class has a loop: it is the innermost so far for its tensors
                    run = run * cp[a:b, ci]
                    r[:, self.class_rel[:, ci]] = run[:, None]
            P[a:b] = run
        return dict(self._row_state(n, tf, sx, sy, P, rep), oid=order_ids, perms=perms)

    def _row_state(self, n: Node, tf, sx, sy, P, rep) -> dict:
        """The arrays of rows of level n.depth with temporal factors ``tf``, spatial ``sx``, ``sy``,
        loop products ``P`` and per-tensor products down to each one's innermost relevant loop ``rep``."""
        s = sx * sy
        rem = n.rem[None, :] // (tf * s)
        above = n.above[None, :] * s
        left = self.bounds // above                           # (what one instance owns)
        scat, tile, part = (self._products(x, self.rel, self.rel_dims) for x in (s, rem, left))
        scat = n.scat[None, :] * scat
        return dict(tf=tf, sx=sx, sy=sy, P=P, rep=rep, rem=rem, above=above,
                    scat=scat, tile=tile, arr=tile * rep, part=part, util=rowprod(above))

    def _plausible(self, n: Node, combos: tuple, masks: np.ndarray, best: tuple, objective) -> tuple:
        """The (factors, X, Y) combinations of level n.depth that some order might let beat ``best``.
        Each combination is bounded once, as one row whose tensors each arrive as rarely as any
        order allows (per tensor: the product of the loops down to its innermost relevant one,
        least over every order, a relaxation of those the space keeps). Every cycle term of
        :meth:`_bounded` (the compute's, the traffic at each port, the SSD's streams) and every
        energy term but what the levels below must still spend (left out: it is not less than 0)
        grows with those arrivals, and the rest does not depend on the order, so no order of a
        combination whose row ``best`` dominates can beat it. The orders of the others are
        bounded in full. Pays where a level has several orders per combination and most
        combinations lose (the SSD sweep's fast designs: 105 M of 105 M candidates were children
        of the DRAM's loops, 120 of which survived)."""
        tf, sx, sy = combos
        cp, pattern = self._patterns(tf)
        counts = self._orders_of(n, pattern)
        if len(tf) == 0 or counts.sum() < PLAUSIBLE_ORDERS * len(tf):
            return combos                     # about one order a combination: little to gain
        some = counts > 0                     # (a pattern with no order has no rows)
        cp = cp[some]
        P = n.P * cp.prod(axis=1)
        # with a loop here that indexes t, at least every loop over its classes comes down to its
        # innermost relevant one (the least of any order: the others inside)
        own = self._products(cp, self.class_rel, [np.flatnonzero(r) for r in self.class_rel])
        rep = np.where(own > 1, n.P * own, n.rep[None, :])
        rows = self._row_state(n, tf[some], sx[some], sy[some], P, rep)
        rows["cid"] = np.nonzero(some)[0]
        rows = self._ssd_pruned(n, rows, masks, best, objective)
        if not len(rows["P"]):
            return tuple(a[:0] for a in combos)
        ok, clb, elb = self._bounded(n, rows, masks, best, objective, relaxed=True)
        lose = objective.dominated(clb, elb, best)      # (the gap's cuts, :meth:`cut`, are left to the full rows)
        self.stats["pruned_bound"] += int(np.count_nonzero(ok & lose))
        alive = rows["cid"][(ok & ~lose).any(axis=1)]
        return tuple(a[alive] for a in combos)

    @staticmethod
    def _products(a: np.ndarray, mask: np.ndarray, cols: list) -> np.ndarray:
        """(m, k): the product of each row of ``a`` (m, D) over each of k column sets (``mask``
        (k, D), ``cols`` the same sets as column lists): a few rows, a last-level node's, in one
        masked product; many column by column (:func:`rowprod`, faster on long arrays)."""
        if len(a) <= 64 or not cols:
            return np.where(mask[None, :, :], a[:, None, :], 1).prod(axis=2)
        return np.stack([rowprod(a, c) for c in cols], axis=1)

    def _true_tiles(self, rows: dict) -> np.ndarray:
        """Each tensor's tile (words) at the next level, as the model counts it: the surrogate's,
        or with sliding windows the product of the exact ranks' extents."""
        if self.extents is None:
            return rows["tile"]
        coefs, cols_of = self.extents
        ext = (rows["rem"] - 1) @ coefs + 1                              # (m, ranks): each rank's extent
        out = np.ones((len(ext), self.T), np.int64)
        for t, cols in enumerate(cols_of):
            for c in cols:
                out[:, t] *= ext[:, c]
        return out

    def _window_arrivals(self, n: Node, rows: dict, true_tiles: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(fills, parent reads) per row and tensor of the next level's tiles, where they are a
        tighter bound than the surrogate's ``arr``: for a read-only windowed tensor, every step of
        the loops above down to the innermost one over a plain rank of it (the surrogate's ``rep``)
        moves its tile along that rank by the rank's whole extent, and every step of a loop outside
        it wraps that loop back by at least as much, so the model's delta walk brings the whole
        *true* tile (``true_tiles``) each time: arrivals >= true tile x rep. Fills equal arrivals
        where no fanout feeds the next level (else links can lower them).

        The parent's reads are at least the same, per child with distinct data along the plain
        ranks (the caller's ``scat``), fanout or not: at each of those steps the children's tiles
        move along a plain rank past the whole of what they held together (the fanout's spatial
        loops lie inside the loops above), so every word of their union is new to all of them, no
        child's delta can be a word a neighbour received a step earlier (a link), and the parent
        sends each word of the union at least once (multicast: once), children apart along a plain
        rank holding disjoint tiles. Uneven positions keep the surrogate's count there."""
        arr = rows["arr"]
        if self.extents is None:
            return arr, arr
        fills, reads = arr.copy(), arr.copy()
        no_fanout = (rows["sx"] * rows["sy"]).prod(axis=1) == 1
        if self._inner(n.depth + 1):
            no_fanout[:] = False       # an inner position: the fanout into its physical level feeds it
        for t in self.windowed:
            pl = int(n.last[t])
            if pl < 0:
                continue
            true = np.maximum(true_tiles[:, t] * rows["rep"][:, t], arr[:, t])
            if self.split is None:     # every element the computes touch, once (the instances together)
                fills[:, t] = np.where(no_fanout, np.maximum(true, int(self.sizes[t]) // rows["util"]), arr[:, t])
                reads[:, t] = np.maximum(true, self._touched_reads(n, rows, t))
            else:
                fills[:, t] = np.where(no_fanout, true, arr[:, t])
                reads[:, t] = np.where(rows["util"] == n.util[pl], true, arr[:, t])
        return fills, reads

    def _touched_reads(self, n: Node, rows: dict, t: int) -> np.ndarray:
        """Per row, at least the reads a windowed tensor t's keeper so far serves per child with
        distinct data along the plain ranks (its reads over the caller's ``scat``): each element
        the computes touch (:func:`storeloop.mapper.window.touched`) passes every keeper of t on
        its way down, so the keeper's instances read each at least once. Rounded down (the model's
        reads per instance are whole, its children with distinct data may be more than ``scat``)."""
        return int(self.sizes[t]) // (int(n.util[n.last[t]]) * rows["scat"][:, t])

    def _window_slid(self, n: Node, rows: dict, fills: np.ndarray, reads: np.ndarray) -> tuple:
        """:meth:`_window_arrivals`' fills and reads, raised by :meth:`_window_slides` where it
        applies (even positions). A child whose energy bound with them loses is cut; the others
        keep the bounds without them, by which the walk orders them, and hand down the arrivals
        (ordered by the raised bounds, the walk took another path: on a5's small layer a budget of
        60 M candidates then ended at 70,560 cycles, where it reaches 42,336)."""
        if self.extents is None or self.split is not None:
            return fills, reads
        fills, reads = fills.copy(), reads.copy()
        for t in self.windowed:
            if n.last[t] >= 0:
                into, across = self._window_slides(n, rows, t)
                fills[:, t] = np.maximum(fills[:, t], into)
                reads[:, t] = np.maximum(reads[:, t], across)
        return fills, reads

    def _window_slides(self, n: Node, rows: dict, t: int) -> tuple[np.ndarray, np.ndarray]:
        """A windowed tensor's words entering one instance of the next level (its fills) and
        crossing its top per child with distinct data along the plain ranks (the parent's reads
        over the caller's ``scat``), at least, by the slides and wraps of the loops above it
        (:meth:`BelowBounds._window_steps`): whichever of the row's loops with a factor above 1 is
        innermost (a row stands for every order of them), with its factor F, and as e2 any other
        of them or any loop above; 0 where the row has none."""
        tf, rem, P = rows["tf"], rows["rem"], rows["P"].astype(np.float64)
        s = rows["sx"] * rows["sy"]
        higher = np.zeros(self.D, bool)
        for c in n.choice:
            higher |= c[0] > 1
        into = np.full(len(tf), np.inf)
        across = np.full(len(tf), np.inf)
        moves = self._window_moves(t, rem, s)
        for e in range(self.D):
            here = tf[:, e] > 1
            if not here.any():
                continue
            F = tf[:, e].astype(np.float64)
            outer = {d: (tf[:, d] > 1) | higher[d] for d in range(self.D) if d != e and self.bounds[d] > 1}
            outer[e] = np.full(len(tf), bool(higher[e]))
            a, b = self._window_steps(t, rem, s, e, F, F, outer, moves)
            into = np.where(here, np.minimum(into, a), into)
            across = np.where(here, np.minimum(across, b), across)
        units = rowprod(s)
        scat_row = rows["scat"][:, t] / n.scat[t]
        into = np.where(units == 1, into, across / units)
        return (np.where(np.isfinite(into), P * into, 0.0),
                np.where(np.isfinite(across), P * across / scat_row, 0.0))

    def expand(self, n: Node, best: tuple | None, objective) -> Children | tuple:
        """Children of an inner node (bounded, pruned, sorted), or the best leaf of a last-level node.
        A large level is expanded in pieces (:meth:`_chunks`) and keeps at most
        :data:`MAX_CHILDREN` children, the best bounds first (``stats['truncated']`` counts the
        others: a search that leaves some out proves nothing by completing)."""
        last = n.depth == self.nlev - 1
        if last and n.leaf is not None:             # priced ahead (prefetch): counted now
            cand, complete, out = n.leaf
            self.stats["candidates"] += cand
            self.stats["complete"] += complete
            if n.surrogate is not None:             # a sliding window's: its exact leaves priced now
                return self._exact_leaves(*n.surrogate, best, objective, n)
            return () if not out or best is not None and not objective.better(out[0], out[1], best) else out
        combos = self._combos(n)
        if last:
            rows = self._rows(n, *combos)
            return () if rows is None else self._leaves(n, rows, best, objective)
        masks = np.array(self.space.keep_masks[n.depth + 1], dtype=np.int64)
        kept = None                                     # (rows, r, c, clb, elb, refill) of the survivors so far
        for piece in self._chunks(n, combos):
            if best is not None and self.split is None:
                piece = self._plausible(n, piece, masks, best, objective)
            rows = self._rows(n, *piece)
            if rows is not None:
                rows = self._ssd_pruned(n, rows, masks, best, objective)
            if rows is None or not len(rows["P"]):
                continue
            got = self._bounded(n, rows, masks, best, objective)
            kept = got if kept is None else _join(kept, got)
            if len(kept[1]) > MAX_CHILDREN:           # cut to the best as soon as there are too many
                kept = self._best_children(kept, objective)
        if kept is None:
            return Children(n, {}, np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0), np.zeros(0))
        rows, r, c, clb, elb, info = self._best_children(kept, objective)
        ch = Children(n, rows, r, masks[c], clb, elb)
        if info is not None:
            ch.refill = dict(info, col=c)
        return ch

    def cut(self, clb, elb, best: tuple, objective, note: bool = True, valid=None):
        """Where subtrees with lower bounds (clb, elb) need no search: no mapping in them beats
        ``best``, or (with :attr:`gap`, the lexicographic objective) none at the best's cycles
        beats its energy by more than the gap. The least energy bound of those the gap alone cuts
        is noted in :attr:`gap_lb` (unless ``note`` is false; ``valid``: only where it is true): a
        mapping they hold can have no less."""
        if not (self.gap and objective.lexicographic):
            return objective.dominated(clb, elb, best)
        bc, be = best                    # (objective.dominated with the energy bounds widened by the gap)
        out = (clb > bc) | ((clb >= bc) & (np.multiply(elb, 1 + self.gap) >= be))
        if note:
            near = out & (clb <= bc) & (elb < be)           # cut by the gap alone
            if valid is not None:
                near &= valid
            if near.any():
                self.gap_lb[bc] = min(self.gap_lb.get(bc, math.inf), float(np.min(np.where(near, elb, np.inf))))
        return out

    def _best_children(self, kept: tuple, objective) -> tuple:
        """Survivors sorted by their bounds (ties: in the order generated), at most MAX_CHILDREN;
        after a cut, only the rows the kept children use."""
        rows, r, c, clb, elb, info = kept
        order = np.lexsort((elb, clb)) if objective.lexicographic else \
            np.argsort(objective.score(clb, elb), kind="stable")
        if len(order) <= MAX_CHILDREN:
            return rows, r[order], c[order], clb[order], elb[order], info
        self.stats["truncated"] = self.stats.get("truncated", 0) + len(order) - MAX_CHILDREN
        order = order[:MAX_CHILDREN]
        used, r = np.unique(r[order], return_inverse=True)
        rows, info = _take(rows, info, used)
        return rows, r.reshape(-1), c[order], clb[order], elb[order], info

    def _bounded(self, n: Node, rows: dict, masks: np.ndarray, best, objective, relaxed: bool = False) -> tuple:
        """Every (row, keep mask) child of ``rows``: capacity checked, bounded, those the best so far
        dominates dropped; the surviving rows' arrays only. ``relaxed`` (rows of :meth:`_plausible`):
        (which fit, their cycle bounds, their energy bounds without what the levels below must still
        spend) of every child, (m, K) each."""
        L1 = n.depth + 1
        lvl1 = self.arch.levels[L1]
        m, T = len(rows["P"]), self.T
        kept = ((masks[:, None] >> np.arange(T)[None, :]) & 1).astype(bool)          # (K, T)
        keptf = kept.T.astype(np.float64)              # (T, K): per-tensor columns summed into (m, K) by one product
        arr, part, scat = rows["arr"], rows["part"], rows["scat"]
        # what each tensor adds, kept at L1 or not: per level traffic (reads, writes) and energy
        fill = np.where(self.rw[None, :], arr - part, arr)                            # (m, T)
        true_tiles = self._true_tiles(rows)
        used = true_tiles.astype(np.float64) @ keptf                                    # (m, K), exact integers
        # a windowed tensor kept at L1: its fills and the parent's reads of it, from its true tile
        w_fill, w_read = self._window_arrivals(n, rows, true_tiles)
        # what the windows' slides add to the bound that cuts (not to the one that orders): weighed
        # below only for the rows the rest of the bound does not already rule out
        slides = self.extents is not None and self.split is None
        if self.extents is not None or self.split is not None:          # (the survivors' for child)
            rows.update(true=true_tiles, w_fill=w_fill, w_read=w_read)
        held = n.held if self._inner(L1) else 0         # (uneven positions: the outer ones' tiles)
        ok = np.ones((m, len(masks)), bool) if lvl1.size_words is None else used + held <= lvl1.size_words
        if self._inner(L1):                # uneven positions (mapper/uneven.py): what the outer ones allow
            ok &= ((masks & n.gkept) == 0)[None, :]              # one copy of a tensor a level
            if n.keep == 0 and self._inner(n.depth):
                ok &= (masks == 0)[None, :]                      # after an empty position, none
            ok &= ~((masks != 0)[None, :] & (rows["tf"] == 1).all(axis=1)[:, None])   # a position has loops above it
            ok &= (masks[None, :] & ~self._indexed_inside(rows)[:, None]) == 0
        self.stats["candidates"] += ok.size
        self.stats["pruned_capacity"] += int((~ok).sum())
        util1 = rows["util"].astype(np.float64)
        # per level, the words read and written so far (numbers until a tensor adds its (m, K) share)
        tr_r = {l: float(n.cnt[l, :, RD].sum()) for l in range(L1 + 1)}
        tr_w = {l: float(n.cnt[l, :, FL].sum() + n.cnt[l, :, UP].sum()) for l in range(L1 + 1)}
        e = np.full((m, len(masks)), n.e_acc + self.compute_pJ)
        ssd_s = np.full((m, len(masks)), n.ssd_s) if self.ssd is not None else None
        innermost, cc_lb = self._compute_floor(rows, L1)
        # what the levels below L1 must still spend (where the innermost level serves each compute)
        deep = self.below[L1] is not None and not relaxed
        arrived, moved = [], []                    # per tensor: words arriving at L1, moved below it
        refill = deep and not self.pages and self.ssd is None and self.arch.levels[-1].size_words is not None
        counted = np.zeros((m, len(masks))) if refill else None   # the node's energy of those words
        # per tensor, what L1 adds where it keeps it: fills, reads, their energy (and the refill's share)
        w1s, r1s, e1s, owns = (np.zeros((m, T)) for _ in range(4))
        # the windows' slides, per windowed tensor: (t, pJ per word its parent sends, the words so far)
        # and (t, pJ per word L1 fills)
        sends, fills = [], []
        # a parent level's reads (updates) of t and their energy are linear in them: their value
        # where L1 does not keep t (for every keep mask), plus the difference where it does (per
        # tensor, summed over the tensors by one product at the end)
        lin = {}                   # parent level -> [reads, writes, (m, T) differences]
        base_e, d_e = 0.0, np.zeros((m, T))
        base_c, d_c = 0.0, (np.zeros((m, T)) if refill else None)
        for t in range(T):
            pl = int(n.last[t])
            k = kept[None, :, t]
            via0, kept_v, free_v = self._vias(n, rows, L1, t, w_read, innermost, cc_lb)
            if pl < 0:
                pass                       # no keeper above yet: nothing is read from above
            elif pl == 0 and self.ssd is not None:
                self._ssd_traffic(n, rows, t, k, via0, np.where(k, kept_v[:, None], free_v[:, None]), innermost,
                                  ssd_s, e)
            elif pl in self.pages:         # whole pages: exact if L1 keeps t, else bounded over sub-tiles
                via = np.where(k, kept_v[:, None], free_v[:, None])
                runs = self._runs(t, n.spans[pl], rows["rem"])
                # a later keeper's run fits in its capacity; the compute units take single words
                longest = np.minimum(runs, self.cap_after[L1]) if self.cap_after[L1] < np.inf else runs
                other = np.full(m, self._page_factor(pl, np.ones(1, np.int64))[0]) if innermost \
                    else self._page_factor(pl, np.maximum(longest, 1), bound=True)
                fac = np.where(k, self._page_factor(pl, runs)[:, None], other[:, None])
                if self.rw[t]:
                    tr_r[pl] += (via - n.partl[t]) * fac
                    tr_w[pl] += via * fac
                    e += ((via - n.partl[t]) * self.rpw[pl] + via * self.wpw[pl]) * fac * float(n.util[pl])
                else:
                    tr_r[pl] += via * fac
                    e += via * fac * (self.rpw[pl] * float(n.util[pl]))
            else:
                u = float(n.util[pl])
                if pl in self.timed:
                    acc = lin.setdefault(pl, [0.0, 0.0, np.zeros((m, T))])
                    acc[2][:, t] = kept_v - free_v
                    if self.rw[t]:         # updates, and reads of all but the partition
                        acc[0], acc[1] = acc[0] + (free_v - n.partl[t]), acc[1] + free_v
                    else:
                        acc[0] = acc[0] + free_v
                if self.rw[t]:
                    per, fixed = (self.rpw[pl] + self.wpw[pl]) * u, n.partl[t] * self.rpw[pl] * u
                else:
                    per, fixed = self.rpw[pl] * u, 0.0
                at_free = free_v * per - fixed
                base_e = base_e + at_free
                d_e[:, t] = (kept_v - free_v) * per
                if slides and t in self.windowed:
                    sends.append((t, per, kept_v))
                if refill:                 # the node's energy of the words L1 does not keep
                    base_c, d_c[:, t] = base_c + at_free, -at_free
            # kept at L1: its fill (final) and its own later reads (updates) >= what arrives (bound)
            a = arr[:, t].astype(np.float64)
            if self.rw[t]:             # (the outermost keeper is never filled)
                w1, r1 = (fill[:, t] if pl >= 0 else 0.0) + a, a - part[:, t]
            else:
                w1, r1 = w_fill[:, t] * (pl >= 0), np.maximum(a, cc_lb) if innermost else a
            w1s[:, t], r1s[:, t] = w1, r1
            e1s[:, t] = (w1 * self.wpw[L1] + r1 * self.rpw[L1]) * util1
            if slides and t in self.windowed and not self.rw[t] and pl >= 0:
                fills.append((t, self.wpw[L1] * util1))
            if refill:
                own = a * self.wpw[L1] + (a - part[:, t]) * self.rpw[L1] if self.rw[t] else r1 * self.rpw[L1]
                owns[:, t] = own * util1
            if deep:
                arrived.append(a)
                moved.append(np.where(k, (a * util1)[:, None], (free_v * float(n.util[pl]))[:, None] if pl >= 0 else 0.0))
        for pl, (rd, wr, diff) in lin.items():          # (updates: the outputs' only)
            tr_r[pl] = tr_r[pl] + np.asarray(rd)[..., None] + diff @ keptf
            tr_w[pl] = tr_w[pl] + np.asarray(wr)[..., None] + diff @ (keptf * self.rw[:, None])
        if L1 in self.timed:
            tr_w[L1] += w1s @ keptf
            tr_r[L1] += r1s @ keptf
        e += np.asarray(base_e)[..., None] + d_e @ keptf + e1s @ keptf
        if refill:
            counted += np.asarray(base_c)[..., None] + d_c @ keptf + owns @ keptf
        below = keeper = None
        if deep:
            keeper = self._keepers(n, rows)
            below = self._below_cost(L1, rows, kept, arrived, moved, util1, keeper)
            e += below
        clb = np.broadcast_to(np.maximum(cc_lb, self.global_lb).astype(np.float64)[:, None], e.shape)
        for l, ls in self._ports(L1 + 1):
            if l == 0 and self.ssd is not None:
                clb = np.maximum(clb, ssd_s * self.arch.clock_hz * SAFE)
            elif l in self.timed:
                rd, wr = (tr[l] if len(ls) == 1 else sum(tr[v] for v in ls) for tr in (tr_r, tr_w))
                clb = np.maximum(clb, self._traffic_cycles(l, rd, wr) * SAFE)
        clb = np.ceil(clb)          # (cycles are whole: at least the bound rounded up)
        e = e * SAFE
        slid = self._slid_bound(n, rows, e, clb, ok, keptf, sends, fills, w_fill, w_read, best, objective) \
            if slides else e                                    # (cuts, does not order)
        if relaxed:
            return ok, clb, slid
        keepc = ok
        if best is not None:
            out = self.cut(clb, slid, best, objective, valid=ok)
            keepc = ok & ~out
            self.stats["pruned_bound"] += int(np.count_nonzero(ok & out))
        flat = np.flatnonzero(keepc)
        r, c = np.divmod(flat, keepc.shape[1])
        # the surviving rows only (the others' arrays are dropped with this piece)
        used, r2 = np.unique(r, return_inverse=True)
        # what R's capacity forces below, for Tree.refine when a child is visited
        info = {"counted": counted, "below": below, "moved": moved, "keeper": keeper} if refill else None
        if slides:                         # (Tree.refine raises a visited child to it)
            info = dict(info or {}, slid=slid)
        rows, info = _take(rows, info, used)
        return rows, r2.reshape(-1), c, clb.ravel()[flat], e.ravel()[flat], info

    def _slid_bound(self, n: Node, rows: dict, e, clb, ok, keptf, sends: list, fills: list, w_fill, w_read, best,
                    objective) -> np.ndarray:
        """:meth:`_bounded`'s energy bounds ``e`` (m, K) raised by what the windows' slides add
        (:meth:`_window_slid`) to the parent's sends (``sends``: per tensor, pJ per word and the
        words counted) and to L1's own fills (``fills``: pJ per word), in the rows where some child
        fits and ``best`` does not dominate it already (the slides only raise a bound, so the others
        are cut with or without them, and none is the gap's: :meth:`cut`)."""
        live = np.flatnonzero(ok.any(axis=1) if best is None else (ok & ~objective.dominated(clb, e, best)).any(axis=1))
        if not len(live) or not sends and not fills:
            return e
        sub = {k: rows[k][live] for k in ("tf", "rem", "P", "sx", "sy", "scat")}
        w_fill, w_read = w_fill[live], w_read[live]
        e_fill, e_read = self._window_slid(n, sub, w_fill, w_read)
        d = np.zeros((len(live), self.T))
        for t, per, kept_v in sends:
            d[:, t] = (e_read[:, t] * sub["scat"][:, t] - kept_v[live]) * per
        for t, per in fills:
            d[:, t] += (e_fill[:, t] - w_fill[:, t]) * per[live]
        slid = e.copy()
        slid[live] += (d @ keptf) * SAFE
        return slid

    def _compute_floor(self, rows: dict, L1: int) -> tuple[bool, np.ndarray]:
        """Whether L1 is the innermost level with no fanout below, and per row the cycles the
        computes take at least (the loops so far times what is left, over the units below L1)."""
        innermost = L1 == self.nlev - 1 and self.cap_below[L1] == 1
        return innermost, (rows["P"] * -(-rowprod(rows["rem"]) // self.cap_below[L1])
                           * self.arch.compute.cycles_per_op).astype(np.float64)

    def _vias(self, n: Node, rows: dict, L1: int, t: int, w_read: np.ndarray, innermost: bool,
              cc_lb: np.ndarray) -> tuple:
        """Per row, the words of t its keeper so far sends down (reads; an output's updates):
        ``via0`` the surrogate's count, ``kept`` where L1 keeps t (final), ``free`` where it does
        not (a lower bound): bypassing a last level without fanout, one access per compute; above
        it, the reuse the capacities below force -- if no level below can hold t's remaining
        tile (even split over every instance below), a t-relevant temporal loop must still come
        above t's next keeper, inside every loop chosen so far, so t arrives once per iteration
        of all of them (P), not only down to its innermost relevant loop (rep)."""
        scat = rows["scat"][:, t]
        via0 = (rows["arr"][:, t] * scat).astype(np.float64)
        kept = (w_read[:, t] * scat).astype(np.float64)
        if innermost:
            free = np.maximum(via0, cc_lb * scat)
        else:
            forced = rows["tile"][:, t] > max(self.cap_after[L1], 1) * self.cap_below[L1]
            free = via0 * np.where(forced, rows["P"] / rows["rep"][:, t], 1.0)
        if n.last[t] >= 0 and t in self.windowed and self.split is None:   # (Tree._touched_reads)
            free = np.maximum(free, self._touched_reads(n, rows, t) * scat)
        return via0, kept, free

    def _ssd_pruned(self, n: Node, rows: dict, masks: np.ndarray, best, objective) -> dict:
        """``rows`` less those that lose to ``best`` on the SSD top level's streams alone: the
        seconds of the tensors it still sends down (:meth:`_ssd_traffic`), least over the keep
        masks whose tiles fit L1, with the computes' cycles, bound the cycles of every child of a
        row; the energy spent so far with the computes' bounds its energy. Bounding a row's
        streams costs about half of what :meth:`_bounded` spends on it, and on an SSD-bound design
        most rows lose there (the SSD sweep's 32-channel 64 KiB design: 92 % of the rows under the
        DRAM's loops). The rows dropped count as candidates pruned by their bound."""
        if self.ssd is None or best is None or self.extents is not None or self.split is not None:
            return rows
        sent = [t for t in range(self.T) if n.last[t] == 0]
        if not sent or not len(rows["P"]):
            return rows
        L1 = n.depth + 1
        m, K = len(rows["P"]), len(masks)
        kept = ((masks[:, None] >> np.arange(self.T)[None, :]) & 1).astype(bool)
        innermost, cc_lb = self._compute_floor(rows, L1)
        ssd_s = np.full((m, K), n.ssd_s)
        for t in sent:
            k = kept[None, :, t]
            via0, kept_v, free_v = self._vias(n, rows, L1, t, rows["arr"], innermost, cc_lb)
            self._ssd_traffic(n, rows, t, k, via0, np.where(k, kept_v[:, None], free_v[:, None]), innermost, ssd_s, None)
        size = self.arch.levels[L1].size_words
        if size is not None:           # (the keep masks whose tiles do not fit L1 have no children)
            ssd_s = np.where(rows["tile"].astype(np.float64) @ kept.T.astype(np.float64) <= size, ssd_s, np.inf)
        least = ssd_s[:, 0].copy()
        for c in range(1, K):          # (column by column: a reduction along a short axis is slower)
            np.minimum(least, ssd_s[:, c], out=least)
        clb = np.ceil(np.maximum(np.maximum(cc_lb, self.global_lb), least * self.arch.clock_hz * SAFE))
        lose = objective.dominated(clb, np.full(m, (n.e_acc + self.compute_pJ) * SAFE), best)
        if not lose.any():
            return rows
        self.stats["candidates"] += int(lose.sum()) * K
        self.stats["pruned_bound"] += int(lose.sum()) * K
        return _take(rows, None, np.flatnonzero(~lose))[0]

    def _ssd_traffic(self, n, rows, t, k, via0, via, innermost, ssd_s, e) -> None:
        """The SSD top level's reads (updates) of t, added to ``ssd_s`` (seconds) and ``e`` (pJ):
        ``via0`` per row where L1 keeps t (exact: its run and tile are L1's; with a free layout the
        least seconds and the least energy over the layouts, each a bound), ``via`` (m, K) per
        keep mask, bounded by the peak streams and the least energy per word where a level further
        down will keep t. ``e`` None: the seconds only."""
        runs = self._ssd_runs(t, n.spans[0], rows["rem"])
        u = float(n.util[0])
        reads0 = via0 - n.partl[t] if self.rw[t] else via0
        secs, pj = self._ssd_costs(runs, rows["tile"][:, t], reads0, via0 if self.rw[t] else np.zeros_like(via0))
        # a later keeper's run is a sub-tile's, so no longer than the longest here nor its
        # capacity, and its tile fits its capacity; the compute units take single words
        largest = 1 if innermost else max(self.cap_after[n.depth + 1], 1)
        one = runs.shape[1] == 1               # (the declared layout: one column, its own least)
        longest = np.ones(len(runs), np.int64) if innermost else \
            np.maximum(np.minimum(runs[:, 0] if one else runs.max(axis=1), largest), 1)

        def bound(read: bool):
            least = self.rpw[0] if read else self.wpw[0]
            spw, epw = disk.bounds_per_word_many(self.ssd.ssd, self.ssd.word_bits, longest, largest, read, float(least))
            return spw[:, None], epw[:, None]

        reads = via - n.partl[t] if self.rw[t] else via
        (spw_r, epw_r), (spw_w, epw_w) = bound(True), bound(False) if self.rw[t] else (None, None)
        later_s = reads * spw_r if spw_w is None else reads * spw_r + via * spw_w
        ssd_s += np.where(k, (secs[:, 0] if one else secs.min(axis=1))[:, None], later_s) * u
        if e is None:
            return
        later_e = reads * epw_r if epw_w is None else reads * epw_r + via * epw_w
        e += np.where(k, (pj[:, 0] if one else pj.min(axis=1))[:, None], later_e) * u

    def child(self, ch: Children, i: int) -> Node:
        """Materialize the i-th surviving child as a node of the next level."""
        n, rows = ch.node, ch.rows
        j, mask = int(ch.row[i]), int(ch.mask[i])
        L1 = n.depth + 1
        cnt = n.cnt.copy()
        last, scat, partl = n.last.copy(), rows["scat"][j].copy(), n.partl.copy()
        util = n.util.copy()
        util[L1] = rows["util"][j]
        e_acc, ssd_s, ssd_pJ, pending = n.e_acc, n.ssd_s, n.ssd_pJ, n.pending
        # this row's tiles as the model counts them, and a windowed tensor's arrivals they bound
        # (Tree._bounded's, for every row at once, where they differ from the surrogate's)
        tiles, w_fill = None, rows["arr"][j:j + 1]
        w_read = w_fill
        if "true" in rows:
            tiles, w_fill, w_read = rows["true"][j:j + 1], rows["w_fill"][j:j + 1], rows["w_read"][j:j + 1]
        for t in range(self.T):
            if not mask >> t & 1:
                continue
            pl = int(last[t])
            a, p = int(w_fill[0, t]), int(rows["part"][j, t])
            cnt[L1, t, FL] = costs.keeper_accesses(self.rw[t], 0, a, p, pl >= 0)[1]
            fill_pJ = -(-cnt[L1, t, FL] // self.arch.levels[L1].block_size) * self.costs[L1].write_pJ * float(util[L1])
            if pl < 0:                     # its outermost keeper: nothing above serves it
                e_acc += fill_pJ
                last[t], scat[t], partl[t] = L1, 1, p
                continue
            cnt[pl, t, RD], _, cnt[pl, t, UP] = costs.keeper_accesses(self.rw[t], int(w_read[0, t]) * int(scat[t]), 0,
                                                                     int(partl[t]), False)
            if pl in self.pages:
                run = int(self._runs(t, n.spans[pl], rows["rem"][j])[0])
                for act in (RD, UP):
                    cnt[pl, t, act] = int(self._paged(pl, cnt[pl, t, act], run))
            bpl = self.arch.levels[pl].block_size
            if pl == 0 and self.ssd is not None:
                runs = self._ssd_runs(t, n.spans[0], rows["rem"][j])
                secs, pj = self._ssd_costs(runs, rows["tile"][j:j + 1, t], [cnt[0, t, RD]], [cnt[0, t, UP]])
                u = float(util[0])
                secs, pj = secs[0] * u, pj[0] * u
                front = pareto(secs, pj)
                least_s, least_e = float(secs[front].min()), float(pj[front].min())
                ssd_s += least_s
                ssd_pJ += least_e
                e_acc += least_e
                if len(front) > 1:         # the leaves price each of these layouts
                    pending = pending + (tuple(zip(secs[front] - least_s, pj[front] - least_e)),)
            else:
                e_acc += (-(-cnt[pl, t, RD] // bpl) * self.costs[pl].read_pJ
                          + -(-cnt[pl, t, UP] // bpl) * self.costs[pl].write_pJ) * float(util[pl])
            e_acc += fill_pJ
            last[t], scat[t], partl[t] = L1, 1, p
        choice = n.choice + ((rows["tf"][j], rows["sx"][j], rows["sy"][j], rows["perms"][rows["oid"][j]], n.keep,
                              None),)
        spans = n.spans.copy()
        spans[L1] = rows["rem"][j]
        held = gkept = 0
        if self.split is not None:         # what this position holds, with the outer ones of its level
            held = int(sum(int(tiles[0, t]) for t in range(self.T) if mask >> t & 1))
            if self._inner(L1):
                held, gkept = held + n.held, n.gkept
            gkept |= mask
        return Node(L1, rows["rem"][j], int(rows["P"][j]), rows["rep"][j], rows["above"][j], last, scat, partl,
                    cnt, util, e_acc, choice, mask, spans, ssd_s, ssd_pJ, pending, held=held, gkept=gkept)

    def _leaf_orders(self, rows: dict) -> tuple:
        """The leaves of last-level ``rows``: per leaf its row and order (an index into ``orders``),
        and its nest of the last level's spatial loops (that order, then the other dimensions).
        The order of the last level's spatial loops on each axis decides which units have a mesh
        neighbour with the same operand (costs.unshared_operands), so every order of the dimensions
        that are spatial in a row is priced (one order when at most one is); rows are grouped by
        those dimensions (factor-1 loops take no place in the order), the groups in a fixed order."""
        spatial = (rows["sx"] > 1) | (rows["sy"] > 1)
        keys, inverse = np.unique(spatial, axis=0, return_inverse=True)
        row, oid, orders = [], [], []            # per priced leaf: its row, its order
        for g, key in enumerate(keys):
            sel = np.nonzero(inverse.reshape(-1) == g)[0]
            dims = np.nonzero(key)[0].tolist()
            for order in itertools.permutations(dims) if len(dims) > 1 else [tuple(dims)]:
                orders.append(order)
                row.append(sel)
                oid.append(np.full(len(sel), len(orders) - 1))
        row, oid = np.concatenate(row), np.concatenate(oid)
        nests = np.array([list(o) + [d for d in range(self.D) if d not in o] for o in orders], np.int64)[oid]
        return row, oid, orders, nests

    @staticmethod
    def _node_rows(nodes: list[Node], owner: np.ndarray) -> dict:
        """Per leaf, the state of its node (``owner``: the node of each leaf) that pricing reads."""
        return {"cnt": np.stack([n.cnt for n in nodes])[owner], "last": np.stack([n.last for n in nodes])[owner],
                "partl": np.stack([n.partl for n in nodes])[owner], "util": np.stack([n.util for n in nodes])[owner],
                "ssd_s": np.array([n.ssd_s for n in nodes])[owner], "ssd_pJ": np.array([n.ssd_pJ for n in nodes])[owner]}

    def _leaf_choice(self, n: Node, rows: dict, j: int, order: tuple) -> tuple:
        return n.choice + ((rows["tf"][j], rows["sx"][j], rows["sy"][j], rows["perms"][rows["oid"][j]], n.keep, order),)

    def prefetch(self, nodes: list[Node], objective) -> None:
        """Price the leaves of many last-level nodes at once (one call of the cost kernel instead of
        one per node: a deep search's last level has a few leaves per node) and keep each node's
        best in ``Node.leaf``, with the candidates it counts, for :meth:`expand` to take when the
        search visits it: the same leaf, counts and order of ties as pricing the node alone. A
        sliding window's node keeps its leaves' surrogate prices in ``Node.surrogate`` (their
        exact prices depend on the best when it is visited); a free layout's pending leaves are
        priced when visited."""
        todo = []
        for n in nodes:
            if n.depth != self.nlev - 1 or n.pending or n.leaf is not None:
                continue
            rows = self._rows(n, *self._combos(n))
            if rows is None:
                n.leaf = (0, 0, ())
            else:
                todo.append((n, rows))
        if not todo:
            return
        rows = {k: v if k == "perms" else np.concatenate([r[k] for _, r in todo]) for k, v in todo[0][1].items()}
        owner = np.repeat(np.arange(len(todo)), [len(r["P"]) for _, r in todo])
        row, oid, orders, nests = self._leaf_orders(rows)
        sub = {k: v if k == "perms" else v[row] for k, v in rows.items()}
        lead = owner[row]
        cycles, energy = self._price_leaves(self._node_rows([n for n, _ in todo], lead), sub, nests)
        few = rows["util"] < self.space.min_units if self.space.min_units else np.zeros(len(owner), bool)
        # each node's leaves, in the order pricing it alone lists them (its groups keep their order)
        by_node = np.split(np.argsort(lead, kind="stable"), np.cumsum(np.bincount(lead, minlength=len(todo)))[:-1])
        rows_of = np.bincount(owner, minlength=len(todo))
        few_of = np.bincount(owner, weights=few, minlength=len(todo)).astype(np.int64)
        for j, (n, _) in enumerate(todo):
            mine = by_node[j]
            complete = int(rows_of[j] - few_of[j])
            if few_of[j] == rows_of[j]:
                n.leaf = (len(mine), complete, ())
                continue
            c, e = cycles[mine], energy[mine]
            if few_of[j]:
                c, e = np.where(few[row[mine]], np.inf, c), np.where(few[row[mine]], np.inf, e)
            if self.exact is not None:
                n.leaf = (len(mine), complete, ())
                n.surrogate = (c, e, functools.partial(self._prefetched_choice, n, rows, row[mine], oid[mine], orders))
                continue
            i = int(objective.argbest(c, e))
            n.leaf = (len(mine), complete,
                      (int(c[i]), float(e[i]), self._leaf_choice(n, rows, int(row[mine[i]]), orders[oid[mine[i]]])))

    def _prefetched_choice(self, n: Node, rows: dict, row: np.ndarray, oid: np.ndarray, orders: list, i: int) -> tuple:
        return self._leaf_choice(n, rows, int(row[i]), orders[oid[i]])

    def _leaves(self, n: Node, rows: dict, best, objective):
        """Exact cycles and energy of every complete mapping under a last-level node; the best one."""
        m = len(rows["P"])
        self.stats["candidates"] += m
        self.stats["complete"] += m
        # with a free layout, every combination of the tensors' unbeaten layouts (Node.pending)
        layouts = [(sum(x[0] for x in xs), sum(x[1] for x in xs)) for xs in itertools.product(*n.pending)]
        row, oid, orders, nests = self._leaf_orders(rows)
        sub = {k: v if k == "perms" else v[row] for k, v in rows.items()}
        nr = self._node_rows([n], np.zeros(len(row), np.int64))
        priced = [self._price_leaves(nr, sub, nests, *extra) for extra in layouts]
        cycles, energy = (np.concatenate([p[i] for p in priced]) for i in (0, 1))
        if len(layouts) > 1:        # leaves listed per order, then per layout (ties go to the first)
            M, starts = len(row), np.flatnonzero(np.r_[True, oid[1:] != oid[:-1]])
            at = np.concatenate([np.arange(e * M + a, e * M + b)
                                 for a, b in zip(starts, np.r_[starts[1:], M]) for e in range(len(layouts))])
            cycles, energy = cycles[at], energy[at]
            row, oid = (np.concatenate([x[a:b] for a, b in zip(starts, np.r_[starts[1:], M]) for _ in layouts])
                        for x in (row, oid))
        self.stats["candidates"] += len(row) - m
        if self.space.min_units:             # Timeloop's min parallelism: too few compute units in use
            few = rows["util"] < self.space.min_units
            self.stats["complete"] -= int(few.sum())
            if few.all():
                return ()
            cycles, energy = np.where(few[row], np.inf, cycles), np.where(few[row], np.inf, energy)

        def choice(i: int) -> tuple:
            return self._leaf_choice(n, rows, row[i], orders[oid[i]])

        if self.exact is not None:
            return self._exact_leaves(cycles, energy, choice, best, objective, n)
        i = int(objective.argbest(cycles, energy))
        if best is not None and not objective.better(cycles[i], energy[i], best):
            return ()
        return (int(cycles[i]), float(energy[i]), choice(i))

    def _exact_leaves(self, cycles: np.ndarray, energy: np.ndarray, choice, best, objective, n: Node):
        """The best leaf by the reference model, of those whose surrogate price (a lower bound of
        the model's) could beat ``best``: taken from the least bound up, each with every loop order
        its levels' orders stand for (``MapSpace.expansions``) and every order of the spatial loops
        of the levels above the last (a sliding window's link transfers depend on them), until the
        next bound cannot beat the best priced. Before the model prices a leaf's temporal orders,
        its windowed tensors' sends are bounded in them (:meth:`_send_floor`): orders the raised
        bound shows cannot win are skipped with every spatial order (``stats['floored']``; each
        still counts :data:`EXACT_COST` against a budget), and first the leaf as a whole where the
        least floor of the node's orders above the last level shows it. An order whose reuse
        differs from its rep's (``MapSpace.pricier``) may cost more on the surrogate too: it is
        priced there first, and skipped the same way where that price cannot win
        (``stats['priced_out']``). An order these leave is floored last with the model's own
        walks of its windowed tensors where a fanout or the compute units split the window
        (:meth:`_window_words`, :meth:`_unit_floor`; about the cost of the model's pricing, so
        once per order of the levels above the last for the node's leaves)."""
        live = np.nonzero(np.isfinite(cycles))[0]
        if best is not None:
            live = live[~objective.dominated(cycles[live], energy[live], best)]
        out, key = (), best
        floors, least = {}, None   # the send floor per order of the levels above the last (below)
        walks, unit_floors = {}, {}   # ... raised by the window walks; the units' operands (below)
        sends = []                 # (their pieces, computed once for the node: Tree._send_terms)
        priced = {}                # the surrogate's price of a leaf in an order (own, below)
        floored = self.windowed and self.split is None
        every, least_all = [], []  # a first walk's: the pieces over every order above the last, their least floor
        if n.floors is not None:   # (computed by floor_cut)
            least = n.floors[1]
            if n.floors[2] is not None:
                every.extend(n.floors[2])
                least_all.append(n.floors[3])

        def pieces() -> tuple:     # (the orders above the last level, the pairs' pieces, each order's index)
            if not sends:
                if n.floors is not None:
                    orders_above, pairs = n.floors[0]
                elif every:        # (a first walk's first orders: the first of every order's pieces)
                    orders_above = [os[:1] for os in every[0]]
                    pairs = [p[:4] + ({L: terms[:1] for L, terms in p[4].items()},) + p[5:] for p in every[1]]
                else:
                    orders_above, pairs = self._send_terms(n)
                sends.extend((orders_above, pairs, [{o: k for k, o in enumerate(os)} for os in orders_above]))
            return sends

        def floor(up: tuple) -> float:
            if up not in floors:
                _, pairs, at = pieces()
                floors[up] = self._order_send_floor(pairs, tuple(at[L][o] for L, o in enumerate(up)))
            return floors[up]

        def walked(base: tuple, up: tuple) -> float:
            """floor(up) raised by the fanouts' window walks (:meth:`_window_words`), which cost
            about what the model's pricing of the order does: only for the orders the cheaper
            tests leave."""
            if up not in walks:
                _, pairs, at = pieces()
                walks[up] = self._order_send_floor(pairs, tuple(at[L][o] for L, o in enumerate(up)),
                                                   self._window_words(base, up))
            return walks[up]

        def units(base: tuple) -> float:
            """:meth:`_unit_floor`, once for the leaves whose last level has a spatial loop and
            once for the others."""
            fanned = bool(self._spatial_dims(base[-1]))
            if fanned not in unit_floors:
                unit_floors[fanned] = self._unit_floor(n, base)
            return unit_floors[fanned]

        def own(base: tuple, loops: tuple) -> tuple:
            """The surrogate's price of this leaf in ``loops``: the same in every spatial order
            above the last level and, where the last level has no spatial loop (no
            compute-level deltas), in every order of its temporal loops; so once for the
            leaves of the node that differ in those only."""
            last = base[-1]
            fanned = bool(self._spatial_dims(last))
            at = (loops if fanned else loops[:-1], last[1].tobytes(), last[2].tobytes(), last[4], last[5])
            if at not in priced:
                some = tuple(c[:3] + (o,) + c[4:] for c, o in zip(base, loops))
                r = evaluate(self.model_arch, self.workload, self.mapping(some), self.energy)
                priced[at] = (r.cycles, r.energy_pJ)
            return priced[at]

        for i in live[objective.order(cycles[live], energy[live])]:
            if key is not None and objective.dominated(cycles[i], energy[i], key):
                break                               # sorted by bound: no later leaf can beat key
            base = choice(int(i))
            orders = [self.space.expansions[L][c[3]] for L, c in enumerate(base)]
            split = [self._spatial_dims(c) for c in base[:-1]]
            if self.first_orders and not self.open_orders and math.prod(len(o) for o in orders) > 1:
                # a leaf whose other orders the floor over every order cannot rule out: the walk
                # over every order must see it
                if key is not None and floored and not least_all:
                    every.extend(self._send_terms(n, first=False))
                    least_all.append(self._least_send_floor(n, tuple(every)))
                self.open_orders = not (key is not None and floored and objective.dominated(
                    cycles[i], (energy[i] + least_all[0] + units(base)) * SAFE, key))
            # (a floor does not depend on the spatial loops' order: once for all of them, counted
            # against a budget as their pricing would have been; nor on the last level's loops, the
            # only ones the node's leaves choose: once per order of the levels above, for them all)
            spared = math.prod(math.factorial(len(ds)) for ds in split)
            if key is not None and floored:
                if least is None:          # (the same orders above the last level for every leaf)
                    least = self._least_send_floor(n, pieces()[:2])
                if objective.dominated(cycles[i], (energy[i] + least + units(base)) * SAFE, key):
                    uppers = math.prod(1 if self.first_orders else len(o) for o in orders[:-1])
                    counted = spared * uppers * (1 if self.first_orders else len(orders[-1]))
                    self.stats["floored"] = self.stats.get("floored", 0) + counted   # (every order floored)
                    self.stats["candidates"] += EXACT_COST * counted
                    continue
            for loops in itertools.islice(itertools.product(*orders), 1 if self.first_orders else None):
                if key is not None and floored:
                    if objective.dominated(cycles[i], (energy[i] + floor(loops[:-1]) + units(base)) * SAFE, key):
                        self.stats["floored"] = self.stats.get("floored", 0) + spared
                        self.stats["candidates"] += EXACT_COST * spared
                        continue
                    c_own, e_own = cycles[i], 0.0
                    if any(o in self.space.pricier[L] for L, o in enumerate(loops[:-1])):
                        c_own, e_own = own(base, loops)
                        if objective.dominated(max(cycles[i], c_own),
                                               max(energy[i] + floor(loops[:-1]) + units(base), e_own) * SAFE,
                                               key):
                            self.stats["priced_out"] = self.stats.get("priced_out", 0) + spared
                            self.stats["candidates"] += EXACT_COST * spared
                            continue
                    if objective.dominated(max(cycles[i], c_own),
                                           max(energy[i] + walked(base, loops[:-1]) + units(base), e_own) * SAFE, key):
                        self.stats["floored"] = self.stats.get("floored", 0) + spared
                        self.stats["candidates"] += EXACT_COST * spared
                        continue
                for inner in itertools.product(*(itertools.permutations(ds) for ds in split)):
                    if self.halt():                 # the search stops at its next node
                        return out
                    ch = tuple(c[:3] + (o,) + c[4:5] + (so,)
                               for c, o, so in zip(base, loops, inner + (base[-1][5],)))
                    self.stats["candidates"] += EXACT_COST
                    try:
                        r = evaluate(self.model_arch, self.exact, self.mapping(ch), self.energy)
                    except MappingError:            # a window's tile is larger than the surrogate's
                        continue
                    self.stats["exact"] += 1
                    if r.cycles < cycles[i] or r.energy_pJ < energy[i] * SAFE:
                        self.stats["bound_violations"] += 1
                    if key is None or objective.better(r.cycles, r.energy_pJ, key):
                        key, out = (r.cycles, r.energy_pJ), (r.cycles, r.energy_pJ, ch)
        return out

    def floor_cut(self, ch: Children, i: int, n: Node, best: tuple | None, objective) -> bool:
        """Whether ``n``, the node of child ``i`` of ``ch``, loses to ``best`` once the least send
        floor of its leaves (:meth:`_least_send_floor`) is added to the child's bound: then a
        last-level node's rows and leaves are not built, and a node above the last level is not
        expanded (its floor: the pairs of keepers down to its level, which every mapping below it
        moves, over every order). Every leaf's price is at least the bound (which counts a
        windowed tensor's reads at each keeper as the node does, the counts its floors are in
        excess of), and the model charges each of its orders at least its price plus the floor,
        so at least the bound plus the least floor. A first walk also needs the floor
        over every order to rule the node out, unless the top-level subtree already has a leaf
        whose other orders may win (:attr:`open_orders`); where it does not, the leaves decide
        (:meth:`_exact_leaves`). The floors computed are kept for the leaves (``Node.floors``);
        their pieces are shared by the siblings in ``ch`` (``Children.sends``)."""
        if best is None or not self.windowed or self.split is not None or self.exact is None or n.pending:
            return False
        clb, elb = ch.clb[i], ch.elb[i]
        if n.depth < self.nlev - 1:
            return bool(objective.dominated(clb, elb + self._least_send_floor(n, self._send_terms(n, first=False))
                                            * SAFE, best))
        memo = (ch.sends, int(ch.row[i]))
        sends = self._send_terms(n, memo=memo)
        least = self._least_send_floor(n, sends)
        n.floors = (sends, least, None, None)
        if not objective.dominated(clb, elb + least * SAFE, best):
            return False
        if not self.first_orders or self.open_orders:
            return True
        every = self._send_terms(n, first=False, memo=memo)
        least_all = self._least_send_floor(n, every)
        n.floors = n.floors[:2] + (every, least_all)
        return bool(objective.dominated(clb, elb + least_all * SAFE, best))

    def floored_count(self, choice: tuple) -> int:
        """The candidates a last-level node (its ``choice``) that :meth:`floor_cut` ruled out
        counts: one of its leaves floored in every order above the last level that it stands for,
        and every spatial order there (:meth:`_exact_leaves` counts each leaf it floors so, times
        its last level's orders), so that the budget and the 'converged' rule see about the work
        they saw when its leaves were floored one by one (counting the node as one exact leaf,
        they saw the walk slow down and held conv3_x's 'converged' until 10-20 s instead of under
        10 s, time its retry then lacked)."""
        uppers = 1 if self.first_orders else \
            math.prod(len(self.space.expansions[L][c[3]]) for L, c in enumerate(choice))
        spared = math.prod(math.factorial(len(self._spatial_dims(c))) for c in choice)
        self.stats["floored_nodes"] = self.stats.get("floored_nodes", 0) + 1
        return EXACT_COST * uppers * spared

    def floor_cuts(self, ch: Children, idx: list[int], best: tuple, objective) -> dict:
        """:meth:`floor_cut` of the last-level children ``idx`` of ``ch``, all at once and without
        building their nodes: those it rules out, each as a :class:`Ruled` that counts as
        :meth:`floored_count` of its choice. Their least send floors (:meth:`row_floors`) are the
        ones :meth:`floor_cut` computes on each node; a child it leaves is built and weighed there
        (which keeps its floors for its leaves). Empty where the floors need a node
        (:meth:`row_floors`)."""
        if not idx or best is None or not self.windowed or self.split is not None or self.exact is None:
            return {}
        least = self.row_floors(ch, idx, self.first_orders)
        if least is None:
            return {}
        sel = np.asarray(idx, np.int64)
        cut = objective.dominated(ch.clb[sel], ch.elb[sel] + least * SAFE, best)
        if self.first_orders and not self.open_orders and cut.any():
            every = self.row_floors(ch, list(sel[cut]), False)
            cut[cut] = objective.dominated(ch.clb[sel[cut]], ch.elb[sel[cut]] + every * SAFE, best)
        rows, m, out = ch.rows, ch.node, {}
        for i in sel[cut].tolist():
            j = int(ch.row[i])
            choice = m.choice + ((rows["tf"][j], rows["sx"][j], rows["sy"][j], rows["perms"][rows["oid"][j]], m.keep,
                                  None),)
            out[i] = Ruled(m.depth + 1, (self.floored_count(choice), 0, ()))
        return out

    def row_floors(self, ch: Children, idx: list[int], first: bool) -> np.ndarray | None:
        """Per last-level child in ``idx`` of ``ch``, :meth:`_least_send_floor` of its node with
        :meth:`_send_terms`' pieces (``first``: in the first orders only), for all of them at once
        from ``ch``'s rows: the pairs of keepers above the children's level are the parent's
        (:meth:`_pair_terms` on it, shared as the nodes share them), and each child's pair into its
        own level is walked for all the rows at once (:meth:`_row_pair_words`). None where a node
        would weigh more than its rows say (pages, an SSD, pending layouts)."""
        m = ch.node
        lv = m.depth + 1
        if lv != self.nlev - 1 or m.pending or self.pages or self.ssd is not None:
            return None
        rows, sel = ch.rows, np.asarray(idx, np.int64)
        used, inv = np.unique(ch.row[sel], return_inverse=True)
        inv = inv.reshape(-1)
        orders = [self.space.expansions[L][c[3]][:1 if first else None] for L, c in enumerate(m.choice)]
        ups = list(itertools.product(*(range(len(o)) for o in orders)))
        ups = np.array(ups, np.int64).reshape(len(ups), lv - 1)
        masks = [c[4] for c in m.choice] + [m.keep]
        total = np.zeros((len(sel), len(ups)))
        w_read = rows["w_read"] if "true" in rows else rows["arr"]
        for t in self.windowed:
            keepers = [L for L in range(lv) if masks[L] >> t & 1]
            for pl, child in zip(keepers, keepers[1:]):     # (the parent's pairs: every child has them)
                got = self._pair_terms(m, t, pl, child, first, (ch.sends, None))
                if got is not None:
                    box, terms = got
                    words = box + sum(np.asarray(terms[L], np.int64)[ups[:, L]] for L in terms)
                    total += _blocks_over(words, int(m.cnt[pl, t, RD]), self.arch.levels[pl].block_size)[None, :] \
                        * (float(self.costs[pl].read_pJ) * float(m.util[pl]))
            kept = (ch.mask[sel] >> t & 1).astype(bool)
            if not keepers or not kept.any():
                continue
            pl = keepers[-1]
            ok, words = self._row_pair_words(m, rows, used, t, pl, first, ups)
            had = w_read[used, t].astype(np.int64) * rows["scat"][used, t].astype(np.int64)
            extra = _blocks_over(words, had[:, None], self.arch.levels[pl].block_size) \
                * (float(self.costs[pl].read_pJ) * float(m.util[pl]))
            total += np.where((kept & ok[inv])[:, None], extra[inv], 0.0)
        return total.min(axis=1)

    def _row_pair_words(self, m: Node, rows: dict, used: np.ndarray, t: int, pl: int, first: bool,
                        ups: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For the children of ``m`` in ``rows[used]`` that keep windowed tensor ``t`` (under its
        keeper ``pl``), whether their tiles form a box (:func:`storeloop.model.nest.send_box`) and
        their pair's words per order ``ups`` of the levels above ``m``'s, ``m``'s own level's
        term at its least over that level's orders: :meth:`_pair_terms` and
        :meth:`_least_send_floor` for every row at once. A level's loops are walked
        (:func:`storeloop.model.nest.send_walk`) for every (row, order) at once, each order as a
        permutation of every dimension, the loops of factor 1 among them (they move nothing)."""
        lv, D = m.depth + 1, self.D
        ranks = self.exact.tensors[t].ranks
        coef = np.zeros((D, len(ranks)), np.int64)
        for d, cs in self._coefs[t].items():
            coef[d] = cs
        span = rows["rem"][used].astype(np.int64)
        tf_r = rows["tf"][used].astype(np.int64)
        fan_r = (rows["sx"][used] * rows["sy"][used]).astype(np.int64)
        split = fan_r * np.prod([(c[1] * c[2]).astype(np.int64) for c in m.choice[pl:]] or [np.ones(D, np.int64)],
                                axis=0)[None, :]
        own = np.stack([sum(c * (span[:, d] - 1) for d, c in rank) + 1 for rank in ranks], axis=1)
        ok = np.ones(len(used), bool)
        for r, rank in enumerate(ranks):       # (send_box: no rank split along two dimensions, no gaps)
            ok &= sum((split[:, d] > 1).astype(np.int64) for d, _ in rank) <= 1
            for d, c in rank:
                ok &= ~((split[:, d] > 1) & (c * span[:, d] > own[:, r]))
        ext = np.stack([sum(c * (span[:, d] * split[:, d] - 1) for d, c in rank) + 1 for rank in ranks], axis=1)
        box = np.prod(ext, axis=1)
        R = len(used)
        tfs = [np.broadcast_to(c[0].astype(np.int64), (R, D)) for c in m.choice] + [tf_r]
        fans = [np.broadcast_to((c[1] * c[2]).astype(np.int64), (R, D)) for c in m.choice] + [fan_r]
        outer = math.prod(int(x) for c in m.choice for x in c[0])
        inner, inward = span, np.zeros((R, len(ranks)), np.int64)
        words = box[:, None].astype(np.int64) + np.zeros((1, len(ups)), np.int64)
        for L in range(lv - 1, -1, -1):             # innermost level first
            outer //= math.prod(int(x) for x in m.choice[L][0]) if L < lv - 1 else 1
            step = np.where((tfs[L] > 1)[:, :, None], (inner * fans[L])[:, :, None] * coef[None], 0)   # (R, D, ranks)
            if L == lv - 1:
                perms, owner = self._row_level_orders(L, rows, used, first)
            else:
                each = self._padded_orders(*self._looped_orders(L, m.choice[L][3], first, m.choice[L][0]))
                owner = np.repeat(np.arange(R), len(each))
                perms = np.tile(each, (R, 1))
            walked = _send_walks(perms, tfs[L][owner], step[owner], inward[owner], ext[owner], box[owner]) * outer
            if L == lv - 1:
                starts = np.flatnonzero(np.r_[True, owner[1:] != owner[:-1]])
                words = words + np.minimum.reduceat(walked, starts)[:, None]
            else:
                words = words + walked.reshape(R, -1)[:, ups[:, L]]
            inward = inward + step.sum(axis=1)
            inner = inner * tfs[L] * fans[L]
        return ok, words

    def _padded_orders(self, key: tuple, orders: tuple) -> np.ndarray:
        """A level's loop ``orders`` (:meth:`_looped_orders`, its small ``key``: cached by it), each
        (its looped dimensions, outer first) as a permutation of every dimension innermost first,
        the others (factor 1) after."""
        out = self._padded_of.get(key)
        if out is None:
            out = self._padded_of[key] = np.array(
                [tuple(reversed(ds)) + tuple(d for d in range(self.D) if d not in ds) for ds in orders], np.int64)
        return out

    def _row_level_orders(self, L: int, rows: dict, used: np.ndarray, first: bool) -> tuple[np.ndarray, np.ndarray]:
        """Every (row, loop order it stands for) of level L's rows ``used``: the orders as
        :meth:`_padded_orders` permutations, and the row of each (grouped, rows in turn)."""
        perms, owner = [], []
        for k, j in enumerate(used.tolist()):
            got = self._padded_orders(*self._looped_orders(L, rows["perms"][rows["oid"][j]], first, rows["tf"][j]))
            perms.append(got)
            owner.append(np.full(len(got), k, np.int64))
        return np.concatenate(perms), np.concatenate(owner)

    def top_key(self, ch: Children, i: int) -> tuple:
        """What identifies the root's child ``i`` in any walk (its row's factors, order and keep
        mask; the root's children differ in those alone)."""
        rows, j = ch.rows, int(ch.row[i])
        return (rows["tf"][j].tobytes(), rows["sx"][j].tobytes(), rows["sy"][j].tobytes(),
                rows["perms"][rows["oid"][j]], int(ch.mask[i]))

    def _send_terms(self, n: Node, first: bool | None = None, memo: tuple | None = None) -> tuple[list, list]:
        """The send floors of last-level node ``n``'s leaves (:meth:`_send_floor`) in pieces, one
        per level, without a mapping per order (of a node above the last level, those of the pairs
        of keepers down to its level; ``memo``: :meth:`_pair_terms`'): per level above ``n``'s, the
        loop orders its choice in ``n.choice`` stands for; per pair of keepers of a windowed tensor, (its box, the
        parent's pJ per word read, its block, the reads the node counted there, per level L
        above the child: L's term per order of L). A pair's sends
        (:func:`storeloop.model.nest.send_floors`) are its box plus, per level L above the child,
        that level's own walk times the temporal factors above L: a walk starts from the steps
        of the loops below L (a sum, whatever their order) and each loop's stride is the same
        in every order (one loop per dimension a level), so only L's own order moves L's term."""
        lv, base = n.depth, n.choice
        first = self.first_orders if first is None else first     # (the first orders only)
        orders = [self.space.expansions[L][c[3]][:1 if first else None] for L, c in enumerate(base)]
        masks = [c[4] for c in base] + [n.keep]
        pairs = []                          # (box, the parent's pJ per word read, its block, had, per level: terms per order)
        for t in self.windowed:
            keepers = [L for L in range(lv + 1) if masks[L] >> t & 1]
            for pl, child in zip(keepers, keepers[1:]):
                got = self._pair_terms(n, t, pl, child, first, memo)
                if got is not None:         # (no box: no floor, as send_floors)
                    pairs.append((got[0], float(self.costs[pl].read_pJ) * float(n.util[pl]),
                                  self.arch.levels[pl].block_size, int(n.cnt[pl, t, RD]), got[1], (t, pl, child)))
        return orders, pairs

    def _pair_terms(self, n: Node, t: int, pl: int, child: int, first: bool, memo: tuple | None = None) -> tuple | None:
        """:meth:`_send_terms`' box and per-level terms of the keepers ``pl`` over ``child`` of
        windowed tensor ``t``, or None where the children's tiles form no box. They depend only on
        the child keeper's tile and the levels above it: with ``memo`` (a dict shared by the
        siblings of ``n``, the row of ``n`` among them), kept there, per row where the child keeper
        is the last level, and once for all of them above it."""
        key = None
        if memo is not None:
            key = (t, pl, child, first, memo[1] if child == self.nlev - 1 else None)
            if key in memo[0]:
                return memo[0][key]
        base, D = n.choice, self.D
        span = n.rem
        for c in base[child:]:
            span = span * c[0] * c[1] * c[2]
        tensor = self.exact.tensors[t]
        coef, zero = self._coefs[t], (0,) * len(tensor.ranks)
        tf = [[int(x) for x in c[0]] for c in base[:child]]
        fan = [[int(x) * int(y) for x, y in zip(c[1], c[2])] for c in base[:child]]
        inner = [None] * (child + 1)        # inner[L][d]: a level-L tile's span along d
        inner[child] = [int(x) for x in span]
        for L in range(child - 1, -1, -1):
            inner[L] = [inner[L + 1][d] * tf[L][d] * fan[L][d] for d in range(D)]
        got = self._send_box(t, tuple(inner[child]), tuple(math.prod(fan[L][d] for L in range(pl, child))
                                                           for d in range(D)))
        out = None
        if got is not None:
            extents, box = got
            terms, inward, outer = {}, zero, math.prod(math.prod(f) for f in tf)
            for L in range(child - 1, -1, -1):          # innermost level first
                outer //= math.prod(tf[L])              # (the temporal factors above L)
                step = tuple((d, tf[L][d], tuple(c * (inner[L][d] // tf[L][d]) for c in coef[d]) if d in coef
                              else zero) for d in range(D) if tf[L][d] > 1)
                at, dims = self._looped_orders(L, base[L][3], first, base[L][0])
                walk = (at, step, inward, extents, box)      # (the orders by their small key)
                walks = self._walks.get(walk)
                if walks is None:
                    if len(self._walks) >= WALK_CACHE:
                        self._walks.clear()
                    walks = self._walks[walk] = _level_walks(dims, step, inward, extents, box)
                terms[L] = [w * outer for w in walks]
                for _, _, st in step:
                    inward = tuple(x + y for x, y in zip(inward, st))
            out = (box, terms)
        if key is not None:
            memo[0][key] = out
        return out

    def _looped_orders(self, L: int, choice_order: int, first: bool, tf: np.ndarray) -> tuple:
        """(A small key for them, and) per loop order that level L's order ``choice_order`` stands
        for (the first only with ``first``), its loops' dimensions outer first, those of factor 1
        left out. Cached: sibling nodes share most of them."""
        looped = tuple(int(x) > 1 for x in tf)
        key = (L, choice_order, first, looped)
        out = self._looped.get(key)
        if out is None:
            orders = self.space.expansions[L][choice_order][:1 if first else None]
            out = self._looped[key] = tuple(tuple(d for d in self._order_dims(L, o) if looped[d]) for o in orders)
        return key, out

    def _send_box(self, t: int, spans: tuple, split: tuple) -> tuple | None:
        """:func:`storeloop.model.nest.send_box` of windowed tensor ``t``, cached (``split``: the
        spatial product per dimension)."""
        key = (t, spans, split)
        if key not in self._boxes:
            self._boxes[key] = nest.send_box(self.exact.tensors[t], spans, dict(enumerate(split)))
        return self._boxes[key]

    @staticmethod
    def _order_send_floor(pairs: list, up: tuple, walked: dict | None = None) -> float:
        """:meth:`_send_floor` of a leaf whose levels above the last take the orders ``up`` (one
        index each into :meth:`_send_terms`' orders), from its ``pairs``; with ``walked``
        (:meth:`_window_words`), a pair's words are at least those."""
        total = 0.0
        for box, pj, block, had, terms, key in pairs:
            words = box + sum(terms[L][up[L]] for L in terms)
            if walked:
                words = max(words, walked.get(key, 0))
            total += _blocks_beyond(words, had, block) * pj
        return total

    def _spatial_dims(self, c: tuple) -> list[int]:
        """The dimensions with a spatial loop in a level's choice ``c`` (X or Y); cached by its
        spatial factors (the leaves of a walk ask about the same few choices again and again)."""
        key = (c[1].tobytes(), c[2].tobytes())
        got = self._spatial_of.get(key)
        if got is None:
            got = self._spatial_of[key] = np.flatnonzero((c[1] > 1) | (c[2] > 1)).tolist()
        return got

    def _window_words(self, base: tuple, up: tuple) -> dict:
        """Per pair (t, parent, child) of keepers of a windowed tensor whose child sits right under
        a fanout, the least over that fanout's spatial orders of the words the model's parent
        serves (:func:`storeloop.model.nest.fanout_sends`), for the leaf ``base`` of a last-level
        node in the orders ``up`` above the last level. They depend on nothing else its leaves
        choose: the last level's loops enter the walks only through their products."""
        out: dict = {}
        for F in range(self.nlev - 1):
            for perm in itertools.permutations(self._spatial_dims(base[F])):
                mapping = self.mapping(tuple(c[:3] + (o,) + c[4:5] + (perm if L == F else c[5],)
                                             for L, (c, o) in enumerate(zip(base, up + (base[-1][3],)))))
                for t in self.windowed:
                    for (pl, child), words in nest.fanout_sends(self.model_arch, self.exact, mapping,
                                                                self.exact.tensors[t]).items():
                        if child - 1 == F:
                            out[t, pl, child] = min(out.get((t, pl, child), words), words)
        return out

    def _unit_floor(self, n: Node, base: tuple) -> float:
        """Energy the model charges leaf ``base`` of node ``n`` beyond its price, in every order it
        stands for, for the operands the compute units read from each windowed tensor's innermost
        keeper (:func:`storeloop.model.nest.unit_sends`: one per compute to each distinct tile).
        The leaf prices one per compute to each distinct tile of the surrogate's tensor
        (:meth:`_price_leaves`), which drops the windowed ranks: a window split over units is
        multicast there. The same for every leaf of ``n`` whose last level has no spatial loop
        (the computes per unit are the node's then), and 0 for the others."""
        mapping = self.mapping(base)
        cycles = math.prod(int(x) for c in base for x in c[0])
        total = 0.0
        for t in self.windowed:
            got = nest.unit_sends(self.exact, mapping, self.exact.tensors[t])
            if got is not None:
                pl, words = got
                had = cycles * math.prod(int(c[1][d]) * int(c[2][d]) for c in base[pl:] for d in range(self.D)
                                         if self.rel[t][d])
                total += _blocks_beyond(words, had, self.arch.levels[pl].block_size) \
                    * float(self.costs[pl].read_pJ) * float(n.util[pl])
        return total

    def _least_send_floor(self, n: Node, sends: tuple | None = None) -> float:
        """At most the least :meth:`_send_floor` of last-level node ``n``'s leaves over every order
        of the levels above the last, from their pieces (:meth:`_send_terms`, or ``sends``). The
        orders of every level but the last two are enumerated; the one just above the last level
        is taken at its least per pair (the only pair it moves is the one into the last level,
        and a floor only grows with the words), which is exact on one windowed tensor. Of a node
        above the last level, the same over the pairs of keepers down to its own level, whose
        sends every mapping below it makes (:meth:`floor_cut`)."""
        lv = n.depth
        orders, pairs = sends or self._send_terms(n)
        least = math.inf
        for up in itertools.product(*(range(len(o)) for o in orders[:lv - 1])):
            total = 0.0
            for box, pj, block, had, terms, _ in pairs:
                words = box + sum(terms[L][up[L]] for L in terms if L < lv - 1)
                if lv - 1 in terms:         # the level just above the last: its least term
                    words += min(terms[lv - 1])
                total += _blocks_beyond(words, had, block) * pj
            least = min(least, total)
        return least

    def _order_dims(self, L: int, order: tuple) -> tuple[int, ...]:
        """The dimensions of level L's temporal loops in ``order`` (a tuple of classes), outer first."""
        out = self._dims_of.get((L, order))
        if out is None:
            pref = self.space.constraints.at(L).permutation or []
            out = self._dims_of[L, order] = tuple(
                d for ci in order for d in sorted(self.space.classes[ci][1],
                                                  key=lambda d: (pref.index(d) if d in pref else len(pref), d)))
        return out

    def _send_floor(self, n: Node, mapping: Mapping) -> float:
        """Energy (pJ) the model charges ``mapping``, a leaf of node ``n``, beyond the leaf's price:
        the reads of each windowed read-only tensor at each keeper, at least its sends in this
        order (:func:`storeloop.model.nest.send_floors`) where ``n`` counted fewer. The node's
        counts bound those of every order its leaves stand for, count by count (the orders they
        stand for repeat no loop more, ``MapSpace._undominated``), so the leaf's price plus this
        stays at most the model's. The search computes it in pieces (:meth:`_send_terms`,
        :meth:`_order_send_floor`); this whole-mapping form is what they are checked against."""
        extra = 0.0
        for t in self.windowed:
            for (pl, _), words in nest.send_floors(self.exact, mapping, self.exact.tensors[t]).items():
                blocks = _blocks_beyond(words, int(n.cnt[pl, t, RD]), self.arch.levels[pl].block_size)
                extra += blocks * self.costs[pl].read_pJ * float(n.util[pl])
        return extra

    def _price_leaves(self, nr: dict, rows: dict, nests: np.ndarray, extra_s: float = 0.0,
                      extra_pJ: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
        """Cycles and energy of the complete mappings in ``rows`` with the last level's spatial
        loops nested on each axis in each row's ``nests`` (a permutation of the dimensions, outer
        first), each row's node state in ``nr`` (:meth:`_node_rows`), the SSD level's streams
        taking ``extra_s`` seconds and ``extra_pJ`` more than its node's least."""
        m, T = len(rows["P"]), self.T
        cc = rows["P"]
        cnt = nr["cnt"].copy()
        at = np.arange(m)
        # Timeloop's compute-level deltas (model/costs.py): when the innermost loop is a spatial
        # loop of the last level, an operand reaches the units only when it changes (rep), except
        # at units without a mesh neighbour holding the same one (costs.unit_content). The last
        # level's nest is its Y loops then its X loops, each in the row's ``nests``.
        sx, sy = np.take_along_axis(rows["sx"], nests, axis=1), np.take_along_axis(rows["sy"], nests, axis=1)
        inner_sp = (sx > 1).any(axis=1) | (sy > 1).any(axis=1)
        units = np.concatenate([sx[:, ::-1], sy[:, ::-1]], axis=1)          # innermost first
        width = np.maximum(self.space.fanouts[-1][1], sx.prod(axis=1))
        for t in range(T):
            pl = nr["last"][:, t]
            rel = np.asarray(self.rel[t])[nests][:, ::-1]
            rel_units = np.concatenate([rel, rel], axis=1)
            shared = np.where(rel_units, units, 1).prod(axis=1)
            ca = costs.unit_content(inner_sp, rows["rep"][:, t], cc, rows["scat"][:, t], shared,
                                    costs.unshared_operands(units, rel_units, width))
            cnt[at, pl, t, RD], _, cnt[at, pl, t, UP] = costs.keeper_accesses(self.rw[t], ca, 0, nr["partl"][:, t],
                                                                             False)
            for pg in self.pages:      # the compute units take one element at a time: runs of 1
                on = pl == pg
                if on.any():
                    for act in (RD, UP):
                        cnt[on, pg, t, act] = self._paged(pg, cnt[on, pg, t, act], 1)
        cc = cc * self.arch.compute.cycles_per_op            # from here on: time
        energy = np.full(m, self.compute_pJ)
        level_cycles = []
        for L, lvl in enumerate(self.arch.levels):
            if L == 0 and self.ssd is not None:      # the compute units take single words: runs of 1
                (sr,), (er,) = self._ssd_rates([1], [1], True)
                (sw,), (ew,) = self._ssd_rates([1], [1], False)
                u = nr["util"][:, 0].astype(np.float64)
                direct = nr["last"] == 0
                rd = np.where(direct, cnt[:, 0, :, RD], 0).sum(axis=1)
                up = np.where(direct, cnt[:, 0, :, UP], 0).sum(axis=1)
                energy = energy + nr["ssd_pJ"] + extra_pJ + (rd * er + up * ew) * u
                level_cycles.append(np.maximum(cc, np.ceil((nr["ssd_s"] + extra_s + (rd * sr + up * sw) * u)
                                                           * self.arch.clock_hz)))
                continue
            c = self.costs[L]
            e, lc = costs.level_costs(lvl, c.read_pJ, c.write_pJ, cnt[:, L, :, RD].T, cnt[:, L, :, FL].T,
                                      cnt[:, L, :, UP].T, cc)
            energy = energy + e * nr["util"][:, L]
            if self._inner(L):             # a split level's ports carry every position's counts
                vs = self.split.members[self.split.group[L]]
                if L == vs[-1]:
                    both = cnt[:, list(vs)].sum(axis=1)
                    lc = costs.throttle(lvl, both[:, :, RD].T, both[:, :, FL].T, both[:, :, UP].T, cc)[0]
            level_cycles.append(lc)
        if not self.single:
            return np.max([cc] + level_cycles, axis=0), energy
        # single-buffered levels serialize their fills with use, as the model does (costs.buffered_cycles)
        reads, fills, ups = (cnt[:, :, :, a].sum(axis=2) for a in (RD, FL, UP))
        cycles = cc.astype(np.float64)
        for L in range(self.nlev - 1, -1, -1):
            if L not in self.single:
                cycles = np.maximum(cycles, level_cycles[L])
                continue
            lvl = self.arch.levels[L]
            fill = costs.port_cycles(lvl, 0, fills[:, L])
            if L:
                fill = np.maximum(fill, costs.port_cycles(self.arch.levels[L - 1], reads[:, L - 1], 0))
            cycles = np.ceil(fill + np.maximum(cycles, costs.port_cycles(lvl, reads[:, L], ups[:, L])))
        return cycles.astype(np.int64), energy

    # ------------------------------------------------------------------ output
    def mapping(self, choice: tuple, name: str | None = None) -> Mapping:
        """The storeloop Mapping of a complete choice (loops with factor 1 are left out). Each level's
        is kept for the next choice that has it (a windowed leaf's orders differ in a level or two)."""
        levels, cache = [], self._level_maps
        for L, (tf, sx, sy, order, keep, spatial_order) in enumerate(choice):
            key = (L, order, np.asarray(tf).tobytes(), np.asarray(sx).tobytes(), np.asarray(sy).tobytes(), keep,
                   spatial_order)
            lm = cache.get(key)
            if lm is None:
                if len(cache) > LEVEL_MAPS:                # memory stays bounded
                    cache.clear()
                lm = cache[key] = self.space.level_mapping(self._order_dims(L, order), tf, sx, sy, keep, spatial_order)
            levels.append(lm)
        out = Mapping(tuple(levels), name)
        return out if self.split is None else self.split.to_physical(out)
