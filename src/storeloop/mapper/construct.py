"""Incumbents before branching: constructive mappings improved by a deterministic local search.

The branch and bound proves optimality, but on wide architectures (hundreds of PEs, big spatial
fanouts) one expansion of a level can take seconds, and what it proves depends on how good its
first incumbent is. :class:`Searcher` therefore builds, in a fixed number of candidates looked at
(never a time budget, so a sweep's answers do not depend on the machine's load):

1. **Constructive mappings**, valid by construction on the architecture: per keep pattern (every
   tensor kept everywhere, or one tensor streamed -- bypassing every level below the outermost,
   so it crosses the outermost level once) the levels are filled bottom-up: each level's spatial
   fanout is spread over the ranks (ranks the streamed tensor does not index first, so it is
   multicast rather than re-read), then its temporal factors grow while every kept tile fits.
   The outermost level gets what is left. Loops are ordered so that ranks indexing every tensor
   come outermost and, below them, each tensor's non-indexing ranks come inside its indexing
   ones wherever the tensor is kept (so its tile is reused instead of re-fetched).
2. **Seeds**: the user's ``--seed-mapping`` and, in a sweep, the best mappings of finished
   neighbouring points -- re-validated and re-priced on this architecture.
3. **Local search** from the best of those: steepest descent over single moves (one prime
   factor of a rank to another level or to a spatial axis, one loop to another position in its
   level, one tensor kept or bypassed at one level), with seeded random kicks out of local
   optima (growing after each failure where the search has no budget, :meth:`Searcher.search`).
   Costs are the exact model's (:class:`~storeloop.model.fast.FastModel`); a candidate that
   overflows a buffer is ranked by its overflow first, so the descent walks toward validity.
   Where the closed form applies (plain indices; no paged, SSD or single-buffered level), a
   step's neighbours that share their parent's loop orders and keep sets -- every factor move --
   are priced in one call of :class:`~storeloop.model.batch.BatchModel`, which gives the same
   numbers (``tests/test_mapper.py::test_batched_neighbours_cost_the_same``). With sliding
   windows, a step's neighbours are priced on the plain surrogate first (a lower bound of the
   model's price) and by the model only while one could still win (:meth:`Searcher._least`).

Every mapping returned is in the constrained map space and priced exactly like a leaf of the
tree, so the branch and bound can start from it and its proofs stay valid.
"""

from __future__ import annotations

import itertools
import math
import random
import time

import numpy as np

from storeloop.errors import MappingError
from storeloop.mapper.below import SAFE
from storeloop.mapper.merge import _primes
from storeloop.mapper.objective import Objective
from storeloop.mapper.space import MapSpace
from storeloop.model.batch import BatchModel, LoopStructure, Slot
from storeloop.model.fast import FastModel
from storeloop.ir import Mapping, plain

INF = math.inf
KICK, KICK_MAX = 3, 12          # random moves in a kick of the iterated local search, first and longest


class State:
    """A complete mapping of the (merged) workload in slot form: per level, temporal factors,
    spatial X and Y factors (one per rank), the temporal loop order (every rank, outer -> inner)
    and the keep mask. Immutable (tuples), so a neighbour shares every level it does not change
    and the state is its own cache key."""

    __slots__ = ("tf", "sx", "sy", "order", "keep", "_key")

    def __init__(self, tf, sx, sy, order, keep):
        self.tf, self.sx, self.sy = (tuple(map(tuple, a)) for a in (tf, sx, sy))
        self.order, self.keep = tuple(map(tuple, order)), tuple(keep)
        self._key = (self.tf, self.sx, self.sy, self.order, self.keep)

    @classmethod
    def _of(cls, tf, sx, sy, order, keep) -> "State":
        """A state of fields that are tuples already (no conversion)."""
        s = cls.__new__(cls)
        s.tf, s.sx, s.sy, s.order, s.keep = tf, sx, sy, order, keep
        s._key = (tf, sx, sy, order, keep)
        return s

    def key(self) -> tuple:
        return self._key


def _set(rows: tuple, L: int, d: int, value: int) -> tuple:
    """``rows`` (per level, per rank) with entry (L, d) replaced."""
    row = rows[L]
    return rows[:L] + (row[:d] + (value,) + row[d + 1:],) + rows[L + 1:]


class Searcher:
    """Local search over one map space, priced by the exact model, budgeted in candidates looked at."""

    # neighbours of one loop structure priced together (fewer: one at a time, where the batch call's
    # fixed cost is more than theirs): the thesis-initial sweep's local searches took 22.0 s at 8,
    # 19.5 at 16, 17.6 at 32, 18.4 at 64 (the same answers; arch16's matmuls unchanged)
    BATCH_MIN = 32

    def __init__(self, space: MapSpace, model: FastModel, objective: Objective):
        self.space, self.model, self.obj = space, model, objective
        # the closed form vectorized over a step's neighbours, where the fast model uses it
        self.batch = BatchModel(model.arch, model.workload, model.energy) if model.batchable else None
        # a sliding window's model is the reference one; its plain surrogate (mapper/window.py) prices
        # every mapping at most as high (the tree's leaves rest on that too), in batch: a descent's
        # step prices exactly only the neighbours whose surrogate price could still win (:meth:`_least`)
        sur = FastModel(model.arch, space.workload, model.energy) if space.exact is not None else None
        self.surrogate = (sur, BatchModel(sur.arch, sur.workload, sur.energy) if sur.batchable else None) \
            if sur is not None and sur.simple else None
        self.floors: dict[tuple, tuple] = {}           # state -> its surrogate cost (a lower bound)
        self._structures: dict[tuple, LoopStructure] = {}
        w = space.workload
        self.nlev, self.D, self.T = space.nlev, space.ndims, len(w.tensors)
        self.bounds = list(w.bounds)
        self.rel = [[bool(r) for r in row] for row in space.relevant]
        self.rel_dims = [[d for d in range(self.D) if row[d]] for row in self.rel]
        # a windowed problem's tiles as the model counts them (each rank's extent sum(c * (F - 1)) + 1),
        # so the overflow a descent walks down is the model's (the surrogate's tiles are smaller)
        self.ranks = None if space.exact is None else [[tuple(r) for r in t.ranks] for t in space.exact.tensors]
        self.sizes = [lvl.size_words for lvl in space.arch.levels]
        self.spatial_ok = [set(opts) for opts in space.spatial_options]
        self.ranges = [[space.temporal_range(L, d) for d in range(self.D)] for L in range(self.nlev)]
        self.level_constraints = [space.constraints.at(L) for L in range(self.nlev)]
        self.evaluations = 0             # candidates priced
        self.calls = 0                   # candidates looked at (priced or cached): the budget
        self.deadline: float | None = None   # time.monotonic() at which the search stops, like the budget
        self.exchange = False            # search: a second round of kicks whose descents also trade factors
        self.trading = False             # (descend: in that round, a local optimum of single moves tries exchanges)
        self.cache: dict[tuple, tuple] = {}
        self._level_ok: dict[tuple, bool] = {}          # per level's choice: in the constrained space
        self._level_maps: dict[tuple, object] = {}      # and its LevelMapping

    # ------------------------------------------------------------------ validity and cost
    def _overflows(self, states: list[State]) -> list[int]:
        """:meth:`_overflow` of each state, many at once (a step's neighbours) in one numpy pass."""
        if len(states) < 8:
            return [self._overflow(s.tf, s.sx, s.sy, s.keep) for s in states]
        f = np.array([s.tf for s in states]) * np.array([s.sx for s in states]) * np.array([s.sy for s in states])
        inner = np.cumprod(f[:, ::-1], axis=1)[:, ::-1]                    # (N, L, D): each level's tile extents
        keep = np.array([s.keep for s in states])
        used = np.zeros(keep.shape, np.int64)
        for t, rel in enumerate(self.rel):
            if self.ranks is None:
                tile = np.where(rel, inner, 1).prod(axis=2)
            else:
                tile = np.ones(keep.shape, np.int64)
                for rank in self.ranks[t]:
                    tile = tile * (sum(c * (inner[:, :, d] - 1) for d, c in rank) + 1)
            used += tile * (keep >> t & 1)
        sized = [L for L in range(self.nlev) if self.sizes[L] is not None]
        cap = np.array([self.sizes[L] for L in sized], np.int64)
        return np.maximum(used[:, sized] - cap, 0).sum(axis=1).tolist()

    def _overflow(self, tf, sx, sy, keep) -> int:
        """Words by which the kept tiles exceed the buffers (0: fits everywhere)."""
        over = 0
        inner = [1] * self.D
        for L in range(self.nlev - 1, -1, -1):
            inner = [i * f * x * y for i, f, x, y in zip(inner, tf[L], sx[L], sy[L])]
            if self.sizes[L] is None:
                continue
            used = sum(self._tile(t, inner) for t in range(self.T) if keep[L] >> t & 1)
            over += max(0, used - self.sizes[L])
        return over

    def _tile(self, t: int, inner: list[int]) -> int:
        """Tensor t's tile (words) for the extents ``inner`` of each dimension."""
        if self.ranks is None:
            return math.prod([inner[d] for d in self.rel_dims[t]])
        return math.prod(sum(c * (inner[d] - 1) for d, c in rank) + 1 for rank in self.ranks[t])

    def admissible(self, s: State) -> bool:
        """In the constrained map space (factor ranges, spatial options, keep masks, orders)."""
        sp = self.space
        for L in range(self.nlev):
            key = (L, s.tf[L], s.sx[L], s.sy[L], s.order[L], s.keep[L])   # (a neighbour changes one or two levels)
            ok = self._level_ok.get(key)
            if ok is None:
                ok = self._level_ok[key] = self._admissible_level(*key)
            if not ok:
                return False
        return not sp.min_units or \
            math.prod(x * y for L in range(self.nlev) for x, y in zip(s.sx[L], s.sy[L])) >= sp.min_units

    def _admissible_level(self, L: int, tf, sx, sy, order, keep) -> bool:
        sp = self.space
        if (sx, sy) not in self.spatial_ok[L] or keep not in sp.keep_masks[L]:
            return False
        for d, (lo, hi) in enumerate(self.ranges[L]):
            if not lo <= tf[d] <= hi and self.bounds[d] > 1:
                return False
        c = self.level_constraints[L]
        if c.stationary is not None:          # the innermost loop must not index that tensor
            live = [d for d in order if tf[d] > 1]
            if live and live[-1] in sp.indexes[sp.names.index(c.stationary)]:
                return False
        return c.allows_order([d for d in order if tf[d] > 1])

    def mapping(self, s: State) -> Mapping:
        out = []
        for L in range(self.nlev):
            key = (L, s.order[L], s.tf[L], s.sx[L], s.sy[L], s.keep[L])
            lm = self._level_maps.get(key)
            if lm is None:
                lm = self._level_maps[key] = self.space.level_mapping(*key[1:])
            out.append(lm)
        return Mapping(tuple(out))

    def cost(self, s: State) -> tuple:
        """(overflow, objective...): lexicographic, smaller is better; inf when not admissible."""
        return self.costs([s])[0]

    def costs(self, states: list[State], lazy: bool = False) -> list[tuple]:
        """:meth:`cost` of each state (each counts as one candidate looked at); the uncached
        ones that share a loop structure are priced in one batch call. ``lazy``: those that fit
        are left unpriced (None), to be priced by :meth:`_price`."""
        self.calls += len(states)
        keys = [s.key() for s in states]
        new = []                                     # admissible states not seen before
        for s, k in zip(states, keys):
            if k in self.cache:
                continue
            self.evaluations += 1
            if self.admissible(s):
                self.cache[k] = None                   # its overflow, or priced below
                new.append(s)
            else:
                self.cache[k] = (INF,)
        fit = []                                     # admissible states that fit: to price
        for s, over in zip(new, self._overflows(new)):
            if over:
                self.cache[s.key()] = (float(over),)
            else:
                fit.append(s)
        if lazy:
            self.evaluations -= len(fit)               # counted when priced
            for s in fit:
                del self.cache[s.key()]
            return [self.cache.get(k) for k in keys]
        self._price(fit, self.model, self.batch, self.cache)
        return [self.cache[k] for k in keys]

    def _price(self, states: list[State], model: FastModel, batch: BatchModel | None, into: dict,
               shave: float = 1.0) -> None:
        """The costs of ``states`` (admissible, fitting) by ``model`` into ``into``: those that share
        a loop structure in one ``batch`` call where there are enough of them; energies times
        ``shave``."""
        todo: dict[tuple, list[State]] = {}          # structure -> states to price
        for s in states:
            todo.setdefault((s.order, s.keep), []).append(s)
        for group in todo.values():
            if batch is not None and len(group) >= self.BATCH_MIN:
                structure = self._structure(group[0])
                r = batch.evaluate(structure, np.array([self._factors(s) for s in group], np.int64))
                priced = [(int(c), float(e)) if ok else None for c, e, ok in zip(r.cycles, r.energy_pJ, r.valid)]
            else:
                priced = []
                for s in group:
                    try:
                        r = model.evaluate(self.mapping(s))
                    except MappingError:
                        priced.append(None)
                    else:
                        priced.append((r.cycles, r.energy_pJ))
            for s, p in zip(group, priced):
                if p is not None:
                    p = (p[0], p[1] * shave)
                into[s.key()] = (INF,) if p is None else (0.0, *p) if self.obj.lexicographic \
                    else (0.0, self.obj.value(*p), *p)

    def _least(self, states: list[State], current: tuple) -> tuple[State | None, tuple]:
        """The first of the cheapest of ``states`` if it is cheaper than ``current`` (else None),
        as pricing them all would find it (each counts as one candidate looked at). On a sliding
        window's problem, the fitting states not priced yet are taken from the least surrogate
        price up and priced until the next one's surrogate price cannot beat the best so far."""
        if self.surrogate is None:
            step, sc = None, current
            for t, c in zip(states, self.costs(states)):
                if c < sc:
                    step, sc = t, c
            return step, sc
        known = self.costs(states, lazy=True)
        open_ = [s for s, c in zip(states, known) if c is None and s.key() not in self.floors]
        self._price(open_, *self.surrogate, self.floors, SAFE)
        # (a surrogate that finds no price bounds nothing: such a state is priced first)
        ranked = sorted((c if c is not None else self.floors[s.key()] if self.floors[s.key()][0] == 0 else (0.0,), i)
                        for i, (s, c) in enumerate(zip(states, known)))
        best = (current, -1)                         # the current state wins ties: no step
        for key in ranked:
            if key > best:
                break
            i = key[1]
            c = known[i]
            if c is None:
                s = states[i]
                c = self.cache.get(s.key())
                if c is None:
                    self.evaluations += 1
                    self._price([s], self.model, None, self.cache)
                    c = self.cache[s.key()]
            if (c, i) < best:
                best = (c, i)
        return (None, current) if best[1] < 0 else (states[best[1]], best[0])

    def _structure(self, s: State) -> LoopStructure:
        """The batch model's loop structure of ``s``: per level its temporal loops in order, then
        its spatial loops as :meth:`mapping` nests them (Y, then X, each in dimension order),
        every dimension in every slot (factor 1 where unused)."""
        key = (tuple(s.order), tuple(s.keep))
        if key not in self._structures:
            slots = []
            for L in range(self.nlev):
                slots += [Slot(L, d) for d in s.order[L]]
                slots += [Slot(L, d, True, a) for a in "YX" for d in range(self.D)]
            names = self.space.names
            keep = tuple(None if m == (1 << self.T) - 1 else frozenset(n for i, n in enumerate(names) if m >> i & 1)
                         for m in s.keep)
            self._structures[key] = LoopStructure(tuple(slots), keep)
        return self._structures[key]

    def _factors(self, s: State) -> list[int]:
        out = []
        for L in range(self.nlev):
            out += [s.tf[L][d] for d in s.order[L]]
            out += s.sy[L] + s.sx[L]
        return out

    # ------------------------------------------------------------------ construction
    def construct(self, keep: list[int], stream: int | None, split: tuple | None = None,
                  inner: frozenset = frozenset()) -> State:
        """Bottom-up fill (see the module docstring). ``split``: (level, X, Y), a spatial split that
        level takes as it is; ``inner``: ranks the innermost level takes whole (and no other)."""
        D, n = self.D, self.nlev
        rem = self.bounds[:]
        if split is not None:
            rem = [r // (a * b) for r, a, b in zip(rem, split[1], split[2])]
        tf = [[1] * D for _ in range(n)]
        sx = [[1] * D for _ in range(n)]
        sy = [[1] * D for _ in range(n)]
        # ranks the streamed tensor does not index are spread first (multicast), then the rest,
        # larger bounds first
        pref = sorted(range(D), key=lambda d: (stream is not None and self.rel[stream][d], -self.bounds[d], d))
        for L in range(n - 1, -1, -1):
            total, fx, fy = self.space.fanouts[L]
            if split is not None and split[0] == L:      # (taken out of rem above)
                sx[L], sy[L] = list(split[1]), list(split[2])
            elif total > 1:
                for axis, limit in ((sx, fx), (sy, fy)):
                    for d in pref:
                        for p in sorted(_primes(rem[d])):
                            x, y = math.prod(sx[L]), math.prod(sy[L])
                            if (x if axis is sx else y) * p > limit or x * y * p > total:
                                break
                            axis[L][d] *= p          # tried: undone if it leaves the space or overflows
                            if (tuple(sx[L]), tuple(sy[L])) not in self.spatial_ok[L] and \
                                    not self._spatial_prefix_ok(L, sx[L], sy[L]) or self._overflow(tf, sx, sy, keep):
                                axis[L][d] //= p
                                break
                            rem[d] //= p
            if L == 0:
                for d in range(D):
                    tf[0][d] = rem[d]
                break
            if inner and L == n - 1:
                for d in inner:
                    tf[L][d], rem[d] = rem[d], 1
                continue
            for d in pref[::-1]:                 # temporal: ranks the stream indexes grow first
                hi = self.space.temporal_range(L, d)[1]
                for p in sorted(_primes(rem[d])):
                    if tf[L][d] * p > hi:
                        break
                    tf[L][d] *= p
                    if self._overflow(tf, sx, sy, keep):
                        tf[L][d] //= p
                        break
                    rem[d] //= p
        return State(tf, sx, sy, self._order_for_reuse(keep), keep)

    def _spatial_prefix_ok(self, L: int, x, y) -> bool:
        """A partial spatial choice is still on the way to an allowed option (min utilization)."""
        return any(all(a % b == 0 for a, b in zip(ox, x)) and all(a % b == 0 for a, b in zip(oy, y))
                   for ox, oy in self.spatial_ok[L])

    def _order_for_reuse(self, keep: list[int]) -> list[tuple[int, ...]]:
        """Per level, outer -> inner: ranks that index every tensor, then ranks ordered so that the
        tensors kept below are reused (a rank a kept tensor does not index goes inside)."""
        orders = []
        for L in range(self.nlev):
            below = 0
            for l2 in range(L + 1, self.nlev):
                below |= keep[l2]
            def score(d):
                idx = sum(self.rel[t][d] for t in range(self.T))
                reused = sum(1 for t in range(self.T) if below >> t & 1 and not self.rel[t][d])
                return (-idx, reused, d)
            orders.append(tuple(sorted(range(self.D), key=score)))
        return orders

    # ------------------------------------------------------------------ local search
    def moves(self, s: State):
        """Every single-move neighbour of ``s``."""
        n, D = self.nlev, self.D
        arrs = (s.tf, s.sx, s.sy)                 # kinds: temporal, spatial X, spatial Y
        slots = self._slots()
        for d in range(D):
            for (L, k) in slots:
                f = arrs[k][L][d]
                if f == 1:
                    continue
                for p in sorted(set(_primes(f))):
                    took = list(arrs)
                    took[k] = _set(arrs[k], L, d, f // p)
                    for (L2, k2) in slots:
                        if (L2, k2) == (L, k):
                            continue
                        a = list(took)
                        a[k2] = _set(a[k2], L2, d, a[k2][L2][d] * p)
                        yield State._of(a[0], a[1], a[2], s.order, s.keep)
        for L in range(n):
            live = [d for d in s.order[L] if s.tf[L][d] > 1]
            for i, d in enumerate(live):
                for j in range(len(live)):
                    if j == i:
                        continue
                    rest = [e for e in live if e != d]
                    rest.insert(j, d)
                    order = tuple(rest) + tuple(e for e in s.order[L] if e not in rest)
                    yield State._of(s.tf, s.sx, s.sy, s.order[:L] + (order,) + s.order[L + 1:], s.keep)
        for L in range(1, n):
            for ti in range(self.T):
                keep = s.keep[:L] + (s.keep[L] ^ (1 << ti),) + s.keep[L + 1:]
                yield State._of(s.tf, s.sx, s.sy, s.order, keep)

    def exchanges(self, s: State):
        """Every neighbour of ``s`` that trades a prime factor of one rank at one loop slot for a
        prime factor of another rank at another slot (tiles keep about their size: what single
        moves cannot do where a buffer is full)."""
        arrs = (s.tf, s.sx, s.sy)
        held = [(L, k, d, p) for L, k in self._slots() for d in range(self.D)
                for p in sorted(set(_primes(arrs[k][L][d])))]
        for (L, k, d1, p1), (L2, k2, d2, p2) in itertools.permutations(held, 2):
            if d1 == d2 or (L, k) == (L2, k2):
                continue
            a = list(arrs)
            a[k] = _set(a[k], L, d1, a[k][L][d1] // p1)
            a[k2] = _set(a[k2], L2, d1, a[k2][L2][d1] * p1)
            a[k2] = _set(a[k2], L2, d2, a[k2][L2][d2] // p2)
            a[k] = _set(a[k], L, d2, a[k][L][d2] * p2)
            yield State._of(a[0], a[1], a[2], s.order, s.keep)

    def _slots(self) -> list[tuple[int, int]]:
        """The loop slots a factor can take: (level, 0 temporal / 1 spatial X / 2 spatial Y)."""
        return [(L, k) for L in range(self.nlev) for k in range(3) if k == 0 or self.space.fanouts[L][0] > 1]

    def spent(self, budget: int) -> bool:
        return self.calls >= budget or (self.deadline is not None and time.monotonic() > self.deadline)

    def descend(self, s: State, budget: int) -> tuple[State, tuple]:
        """Steepest descent from ``s`` to a local optimum (or until the budget is spent): each step
        prices the neighbours in :meth:`moves` order up to the budget and takes the first of the
        cheapest, if it is cheaper."""
        best, bc = s, self.cost(s)
        while not self.spent(budget):
            near = list(itertools.islice(self.moves(best), None if budget == INF else budget - self.calls))
            step, sc = self._least(near, bc)
            if step is None and self.trading:
                near = list(itertools.islice(self.exchanges(best), None if budget == INF else budget - self.calls))
                step, sc = self._least(near, bc)
            if step is None:
                break
            best, bc = step, sc
        return best, bc

    def search(self, starts: list[State], budget: int | None, good=lambda cost: False, seed: int = 0,
               deadline: float | None = None, patience: int | None = None,
               spread: list[State] = ()) -> tuple[State | None, tuple]:
        """Iterated local search: steepest descent from the three best starts, then from seeded
        random kicks of the best, :data:`KICK` random moves each. It stops at a local optimum
        whose cost is ``good(cost)``, after ``budget`` candidates looked at (priced or cached;
        None: no budget), or at ``deadline`` (time.monotonic()).

        With ``patience`` (a search without a budget) each kick that does not lead to a better
        local optimum makes the next one a move longer, up to :data:`KICK_MAX` and around again
        (a variable neighbourhood search: descents from short kicks fall back into the best's
        basin), and it stops once the candidates looked at since its last improvement are at
        least ``patience`` and at least those it took to reach it (a search that keeps finding
        better optima keeps going; one that has not in as long as it has run stops). Measured on
        ResNet-50 conv3_x from the constructive starts: six seeds end at 754.7-803.6 uJ this way,
        where three seeds of fixed kicks end at 769.4-844.3 uJ with 30,000 candidates (two of them
        unchanged with 100,000 and 300,000); the default retry improved two of four small convs
        by 3.6 % and 6.8 % and left conv3_x 0.2 % worse (`docs/windows.md`). Under a
        fixed budget the growing kicks spent it worse (three SSD sweep points ended 0.4-1.2 %
        slower, none faster), so a budgeted search keeps its kicks short.

        With :attr:`exchange` (the retry after a branch and bound that ended without a proof), a
        second round of kicks follows from the best, with its own patience, whose descents try
        :meth:`exchanges` where single moves cannot improve: one factor of a rank traded for one
        of another rank between two loop slots, which keeps the tiles about their size where a
        buffer is full (on the 32-channel 14x14 3x3 layer, single moves did not leave a basin 5.6 %
        above the optimum; the trades reached it). It only adds to the first round: its answer is
        never worse. ``spread``: starts descended each, after the three best
        (:meth:`window_starts`, in the retry).
        Deterministic for given starts, budget, patience and seed unless the deadline cuts it
        short."""
        rng, self.deadline = random.Random(seed), deadline
        budget = math.inf if budget is None else budget
        ranked = sorted(((self.cost(s), i, s) for i, s in enumerate(starts)), key=lambda x: x[:2])
        best, bc = None, (INF,)
        top = [s for _, _, s in ranked[:3]]
        for k, s in enumerate(top + list(spread)):
            if k >= len(top) and self.spent(budget):     # (the spread: each, whatever its first cost)
                break
            s2, c2 = self.descend(s, budget)
            if c2 < bc:
                best, bc = s2, c2
            if good(bc):
                return best, bc
        best, bc = self._kicks(best, bc, budget, good, rng, patience, 0)
        if self.exchange and best is not None:
            # a second round whose descents also trade factors between slots, from the first's
            # best, its patience counted from its own start
            self.trading = True
            best, bc = self._kicks(best, bc, budget, good, rng, patience, self.calls)
            self.trading = False
        return best, bc

    def _kicks(self, best: State | None, bc: tuple, budget, good, rng, patience, base: int) -> tuple:
        """:meth:`search`'s kicks from ``best`` until its stop, the candidates looked at counted
        from ``base``."""
        length, found = KICK, self.calls
        while best is not None and not self.spent(budget) and not good(bc) and \
                (patience is None or self.calls - found < max(patience, found - base)):
            kick = best
            for _ in range(length):
                opts = list(self.moves(kick))
                kick = opts[rng.randrange(len(opts))] if opts else kick
            s2, c2 = self.descend(kick, budget)
            if c2 < bc:
                best, bc, length, found = s2, c2, KICK, self.calls
            elif patience is not None:
                length = KICK + (length + 1 - KICK) % (KICK_MAX + 1 - KICK)
        return best, bc

    def window_starts(self) -> list[State]:
        """A windowed problem's (a convolution's) starts for the retry: under each spatial split of
        one level that uses its whole fanout, the innermost level holds the whole window of the
        dimensions that slide and do not index the output (a convolution's R and S), the levels
        above filled as :meth:`construct` fills them, every tensor kept everywhere. The usual fill
        puts other ranks in the innermost level, and single moves seldom undo that where it is
        full."""
        exact = self.space.exact
        if exact is None:
            return []
        outputs = set().union(*(t.dims() for t in exact.tensors if t.read_write))
        slide = frozenset(d for t in exact.tensors for r in t.ranks if not plain(r) for d, _ in r) - outputs
        keep = self._allowed([(1 << self.T) - 1] * self.nlev)
        out = []
        for L in range(self.nlev):
            opts = [o for o in self.space.spatial_options[L] if math.prod(o[0]) * math.prod(o[1]) > 1]
            most = max((math.prod(x) * math.prod(y) for x, y in opts), default=0)
            out += [self.construct(keep, None, (L, x, y), slide) for x, y in opts
                    if math.prod(x) * math.prod(y) == most]
        return out

    def starts(self) -> list[State]:
        T, n = self.T, self.nlev
        full = (1 << T) - 1
        out = []
        patterns = [(None, [full] * n)]
        for st in sorted(range(T), key=lambda t: -math.prod(b for d, b in enumerate(self.bounds) if self.rel[t][d])):
            patterns.append((st, [full] + [full & ~(1 << st)] * (n - 1)))
        for stream, keep in patterns:
            out.append(self.construct(self._allowed(keep), stream))
        return out

    def _allowed(self, keep: list[int]) -> list[int]:
        """``keep`` with each level's mask that the space does not allow there replaced by the
        level's last allowed one."""
        return [k if k in self.space.keep_masks[L] else self.space.keep_masks[L][-1] for L, k in enumerate(keep)]


def state_of(mapping: Mapping, members: list[list[int]], space: MapSpace) -> State | None:
    """A seed mapping of the original workload as a state of the merged space (None if it does not
    fit this space's levels). Each merged rank takes the product of its members' factors per level
    and slot and sits where its innermost member loop sat; the state is re-priced, so a seed that
    merging changes is still only a start."""
    n, D = space.nlev, space.ndims
    if len(mapping.levels) != n:
        return None
    of = {d: i for i, ds in enumerate(members) for d in ds}
    names = space.names
    tf = [[1] * D for _ in range(n)]
    sx = [[1] * D for _ in range(n)]
    sy = [[1] * D for _ in range(n)]
    order, keep = [], []
    for L, lm in enumerate(mapping.levels):
        pos: dict[int, int] = {}
        for k, lp in enumerate(lm.temporal):
            if lp.dim in of:
                tf[L][of[lp.dim]] *= lp.factor
                pos[of[lp.dim]] = k
        for lp in lm.spatial:
            if lp.dim in of:
                (sx if lp.axis == "X" else sy)[L][of[lp.dim]] *= lp.factor
        order.append(tuple(sorted(range(D), key=lambda i: (pos.get(i, len(lm.temporal)), i))))
        keep.append(sum(1 << t for t, name in enumerate(names) if lm.keep is None or name in lm.keep))
    s = State(tf, sx, sy, order, keep)
    for d in range(D):
        if math.prod(a[L][d] for a in (tf, sx, sy) for L in range(n)) != space.workload.bounds[d]:
            return None
    return s
