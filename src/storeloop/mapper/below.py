"""The branch and bound's energy bounds below a node (docs/bounds.md), as a part of
:class:`storeloop.mapper.tree.Tree`: what the levels below the level being chosen must still spend
(:meth:`BelowBounds._below_cost`, added to every child's bound) and what the innermost level's
capacity forces across its top (:meth:`BelowBounds.refine`, for the children the search enters).
They read the tree's per-level prices, capacities and map space; the tree calls them."""

from __future__ import annotations

import functools
import math

import numpy as np

from storeloop.mapper.space import divisors

SAFE = 1.0 - 1e-12         # lower bounds are shaved so float rounding can never prune an optimum


def rowprod(a: np.ndarray, cols=None) -> np.ndarray:
    """The product of each row of an integer array over ``cols`` (default: every column), column
    by column: numpy's reduction along a short inner axis is several times slower, and the
    mapper's rows have a handful of columns (dimensions, tensors)."""
    cols = range(a.shape[1]) if cols is None else cols
    out = np.ones(len(a), a.dtype)
    for c in cols:
        out = out * a[:, c]
    return out


@functools.lru_cache(maxsize=4096)
def all_splits(sizes: tuple[int, ...], cap: int, limit: int) -> np.ndarray | None:
    """Every way to split ``cap`` units over the dimensions, each factor dividing that dimension's
    ``sizes`` entry, as rows (S, D); None past ``limit`` splits. Cached for the process (a sweep's
    points share their bounds and fanouts); the array is read-only."""
    found: list[tuple] = []

    def grow(d: int, left: int, s: tuple) -> bool:
        if d == len(sizes):
            found.append(s)
            return len(found) <= limit
        for g in divisors(sizes[d]):
            if g > left:
                break
            if not grow(d + 1, left // g, s + (g,)):
                return False
        return True

    if not grow(0, cap, ()):
        return None
    out = np.array(found, np.int64).reshape(len(found), len(sizes))
    out.flags.writeable = False
    return out


@functools.lru_cache(maxsize=256)
def maximal_splits(sizes: tuple[int, ...], cap: int) -> np.ndarray | None:
    """:func:`all_splits` (at most 20,000) less each split another is a multiple of everywhere
    (a split's shares only grow with it)."""
    splits = all_splits(sizes, cap, 20_000)
    if splits is None:
        return None
    divides = ((splits[None, :, :] % splits[:, None, :]) == 0).all(axis=2)   # [i, j]: s_i | s_j
    out = splits[divides.sum(axis=1) == 1]
    out.flags.writeable = False
    return out


@functools.lru_cache(maxsize=65536)
def tile_shapes(sizes: tuple[int, ...], ranks: tuple[tuple[tuple[tuple[int, int], ...], ...], ...], S: int,
                limit: int) -> np.ndarray | None:
    """Every tile shape (rows (n, len(sizes))) whose factors divide ``sizes`` and whose tensors'
    tiles fit in S words together, grown one dimension at a time (a shape that does not fit never
    fits with larger factors); None past ``limit`` shapes. ``ranks``: per tensor, its ranks as
    (column, coefficient) terms; a rank's extent is ``sum(c * (f - 1)) + 1`` (a plain rank's: f;
    a sliding window's, the model's true tile). Cached for the process; the array is read-only."""
    f = np.ones((1, len(sizes)), np.int64)
    for d, size in enumerate(sizes):
        g = np.array(divisors(size), np.int64)
        if len(f) * len(g) > limit:
            return None
        f = np.repeat(f, len(g), axis=0)
        f[:, d] = np.tile(g, len(f) // len(g))
        used = sum(tile_words(f, t) for t in ranks)
        f = f[used <= S]
    f.flags.writeable = False
    return f


def tile_words(f: np.ndarray, ranks: tuple) -> np.ndarray:
    """(n,) a tensor's tile (the product of its ranks' :func:`extents`) over tile shapes f (n, D)."""
    out = np.ones(len(f), np.int64)
    for rank in ranks:
        if len(rank) == 1 and rank[0][1] == 1:
            out = out * f[:, rank[0][0]]
        else:
            x = 1
            for d, c in rank:
                x = x + c * (f[:, d] - 1)
            out = out * x
    return out


def extents(f: np.ndarray, ranks: tuple) -> np.ndarray:
    """(n, ranks) each rank's extent ``sum(c * (f_d - 1)) + 1`` of a tensor over tile shapes f (n, D)."""
    out = np.ones((len(f), max(len(ranks), 1)), np.int64)
    for h, rank in enumerate(ranks):
        for d, c in rank:
            out[:, h] += c * (f[:, d] - 1)
    return out


def least_prime(q: np.ndarray) -> np.ndarray:
    """Each entry's least prime factor (entries > 1; 1 stays 1)."""
    q = np.asarray(q)
    return _least_primes(1 << max(int(q.max(initial=1)), 2).bit_length())[q]


@functools.lru_cache(maxsize=32)
def _least_primes(n: int) -> np.ndarray:
    """The least prime factor of every integer below n (a sieve; 0 and 1 map to themselves)."""
    out = np.arange(n)
    for p in range(2, math.isqrt(n - 1) + 1):
        if out[p] == p:
            hit = out[p * p::p]
            hit[hit == np.arange(p * p, n, p)] = p
    out.flags.writeable = False
    return out


def least_cases(p: np.ndarray, most: int = 256) -> np.ndarray:
    """Indices (ascending) of rows of ``p`` (n, k) among which the least of any function of a row
    that does not fall as a column grows is found: a row is left out only where one kept is at
    most it in every column. Repeatedly, the row left of least weighted sum is kept (no row left
    is below it everywhere) and every row it is at most everywhere dropped, for at most ``most``
    rows kept; the rest are then kept as they are."""
    score = p @ (1.0 / np.maximum(np.where(np.isfinite(p), np.abs(p), 0.0).max(axis=0), 1e-300))
    cols = [np.ascontiguousarray(c) for c in p.T]
    idx, kept = np.arange(len(p)), []
    while len(idx) and len(kept) < most:
        i = int(np.argmin(score))
        kept.append(idx[i])
        left = cols[0] < cols[0][i]              # (below it in some column)
        for c in cols[1:]:
            left |= c < c[i]
        idx, score, cols = idx[left], score[left], [c[left] for c in cols]
    return np.sort(np.concatenate([np.array(kept, np.int64), idx]))


def fronts(mask: int, positions: bool) -> list[int]:
    """The sets of tensors (masks) that can lie at the outermost position of a level keeping
    ``mask``: ``mask`` itself, or with uneven ``positions`` each non-empty part of it (the
    others lie below, :func:`storeloop.mapper.tree._capacity_cases`)."""
    if not positions or not mask:
        return [mask]
    return [o for o in range(1, mask + 1) if o & mask == o]


class BelowBounds:
    """Mixed into :class:`~storeloop.mapper.tree.Tree`, whose attributes it reads."""

    MAX_SPLITS = 64      # the completion bound tries at most this many splits of the instances below a level
    TERMS_BYTES = 1 << 27   # _below_cost keeps each tensor's terms per split while they take at most this

    def _below_terms(self) -> list:
        """Per level L1: what the levels below L1 must still spend on each tensor t, for a node
        whose levels down to L1 are chosen (the per-compute part of :meth:`energy_bound`): None
        where the innermost level fans out (see there) or L1 is the last level; else ``(splits,
        per_t)``. ``per_t[t] = (own, options)``: ``own`` (pJ per word) where L1 is t's innermost
        keeper -- a compute reads t (an output: updates it) there, shared by at most the units
        below L1 that hold the same element; ``options``, per deeper level L that may be t's
        innermost keeper, ``(fill pJ per word, pJ per access at L, units under one L)``: t's next
        keeper, somewhere in L1+1..L, is filled with every word L1 (or the parent) reads for it
        (outputs: counted as 0), and L serves the computes, shared the same way; then the least
        (read, write) pJ per word of those deeper levels above the innermost (inf: none), for
        :meth:`refine`. ``splits``: the maximal splits of the units under one L1 instance over the dimensions (every split divides
        one of them, and a split's shares only grow with it), or None where there are more than
        :data:`MAX_SPLITS` (each tensor then takes its own best share)."""
        out = []
        for L1 in range(self.nlev):
            if self.space.fanouts[-1][0] != 1 or L1 == self.nlev - 1:
                out.append(None)
                continue
            per_t = []
            first = self._first_position(self.nlev - 1, L1)       # (R's positions below L1 are weighed together)
            for t in range(self.T):
                may = [L for L in range(L1 + 1, self.nlev) if self.may_keep[L, t]]
                acc = self.wpw if self.rw[t] else self.rpw
                opts = [(0.0 if self.rw[t] else float(min(self.wpw[l] for l in may if l <= L)), float(acc[L]),
                         self.cap_below[L]) for L in may]
                between = [L for L in may if L < first]
                per_t.append((float(acc[L1]), opts, (float(min(self.rpw[between], default=np.inf)),
                                                     float(min(self.wpw[between], default=np.inf)))))
            splits = maximal_splits(tuple(int(b) for b in self.bounds), int(self.cap_below[L1]))
            out.append((splits if splits is not None and len(splits) <= self.MAX_SPLITS else None, per_t))
        return out

    def _below_cost(self, L1: int, rows: dict, kept: np.ndarray, arrived: list, moved: list, util1,
                    keeper: list) -> np.ndarray:
        """The least energy (m, K) the levels below L1 must still spend (:meth:`_below_terms`):
        per split of the units below L1 (divided down to each row's remainder), the sum over the
        tensors of their cheapest innermost keeper; the least over the splits. ``keeper[t]``: t's
        keeper above L1 as (pJ per access, (m,) the most units it can share an access among beyond
        the split below L1), or None: where L1 does not keep t, that keeper may be its innermost."""
        splits, per_t = self.below[L1]
        rem, macs = rows["rem"].astype(np.int64), float(self.workload.macs)
        m, K = len(rem), kept.shape[0]
        best = np.full((K, m), np.inf)                 # (keep sets by rows: a row of it is contiguous)
        # a tensor's term takes two values per row, where a keep set keeps it at L1 and where not
        # (its words moved below are one of two columns): priced as (2, m), then spread over K
        side = [kept[:, t].astype(np.int64).tolist() for t in range(self.T)]
        two = [np.ascontiguousarray(moved[t][:, [int(np.argmin(kept[:, t])), int(np.argmax(kept[:, t]))]].T)
               for t in range(self.T)]
        shared_dims = [[d for d in range(self.D) if not self.rel[t][d]] for t in range(self.T)]
        rem_t = {d: np.ascontiguousarray(rem[:, d]) for d in set().union(*shared_dims)}
        gcds: dict = {}                    # (dimension, a split's factor) -> its gcd with each row's remainder
        # what does not depend on the split, once
        had = [arrived[t] * util1 for t in range(self.T)]
        fixed = [[(fill_pw * two[t], acc_pw * macs, units) for fill_pw, acc_pw, units in per_t[t][1]]
                 for t in range(self.T)]
        terms: list[dict] = [{} for _ in range(self.T)]
        keep_terms = (1 if splits is None else len(splits)) * self.T * 2 * m * 8 <= self.TERMS_BYTES
        for s in ([None] if splits is None else splits):
            total = np.zeros((K, m))
            for t, (own, _, _) in enumerate(per_t):
                # a tensor's term depends on the split only through its factors over the dimensions
                # that do not index it: splits that agree there share it (kept while memory allows)
                key = None if s is None else tuple(int(s[d]) for d in shared_dims[t])
                least = terms[t].get(key)
                if least is None:
                    least = np.empty((2, m))
                    share = np.ones(m, np.int64)
                    for d in shared_dims[t]:
                        g = (d, None if s is None else int(s[d]))
                        if g not in gcds:
                            gcds[g] = np.minimum(rem_t[d], self.cap_below[L1]) if s is None else np.gcd(s[d], rem_t[d])
                        share = share * gcds[g]
                    share = np.minimum(share.astype(np.float64), self.cap_below[L1])
                    if keeper[t] is None:
                        least[0] = np.inf
                    else:                          # read (updated) from above once per compute
                        pw, wider = keeper[t]
                        least[0] = pw * np.maximum(macs / (share * wider) - two[t][0], 0.0)
                    least[1] = own * np.maximum(macs / share - had[t], 0.0)
                    for fill, acc, units in fixed[t]:
                        np.minimum(least, fill + acc / np.minimum(share, units), out=least)
                    if keeper[t] is None:          # no keeper above and none below: nothing to add
                        least[~np.isfinite(least)] = 0.0
                    if keep_terms:
                        terms[t][key] = least
                for k, j in enumerate(side[t]):
                    total[k] += least[j]
            np.minimum(best, total, out=best)
        return best.T

    REFILL_WORK = 200_000    # the most (tile shape, split, e) cases the refill bound weighs for one remainder

    def _refill_cases(self, L1: int, rem: tuple, looped: bool, held: int = 0, taken: int = 0,
                      least: int = 1) -> tuple | None:
        """What the innermost level R's capacity forces below a node whose levels down to L1 are
        chosen, with ``rem`` left for L1..R (``looped``: a temporal loop above L1):
        :meth:`_capacity_bound`'s argument on the subproblem, one case per keep set of R, tile
        shape f at R (within ``rem``, fitting R), split s of the units under one L1 instance (with
        f, dividing ``rem``) and innermost temporal loop e above R (-1: none). A tensor R keeps is
        filled with ``W = macs / prod(f_d, d not in t)`` words where e indexes it (else its size),
        and R serves every compute; the level above R reads W / share of it (an output: the
        partial sums written up and read back), share = the units of s that hold the same element;
        a tensor R does not keep is read from above once per compute, shared the same way. Returns
        ``(at_r, words)``: per case, R's own energy (pJ) and (n, T) the words each tensor moves
        across R's top (before the sharing above L1 and the floors the caller knows). None where
        the cases exceed :data:`REFILL_WORK` (the bound is then left out). With uneven positions, L1
        may be one of R's: ``held`` words of R are then taken by the tensors ``taken`` (a mask) at
        the positions down to L1, which the positions below cannot keep again. Only the splits of
        at least ``least`` units are weighed (:meth:`refine`: fewer cannot run at the best's cycles);
        where there are none, the one case costs infinitely much."""
        key = (L1, rem, looped, held, taken, least)
        if key in self._refills:
            return self._refills[key]
        R, w = self.nlev - 1, self.workload
        S, macs, cap = self.arch.levels[R].size_words - held, float(w.macs), self.cap_below[L1]
        rem_a = np.array(rem, np.int64)
        dims = [d for d in range(self.D) if rem[d] > 1]
        es = [d for d in range(self.D) if self.bounds[d] > 1] + [-1]
        sp = all_splits(tuple(int(x) for x in rem), int(cap), self.REFILL_WORK)
        if sp is None:
            self._refills[key] = None
            self.stats["candidates"] += self.REFILL_WORK
            return None
        if least > 1:
            sp = sp[rowprod(sp) >= least]
            if not len(sp):
                self._refills[key] = out = (np.array([np.inf]), np.zeros((1, self.T)))
                return out
        sizes = self.sizes
        others = self.other_dims
        share = np.stack([sp[:, d].prod(axis=1) for d in others], axis=1).astype(np.float64)
        # uneven positions of R below L1: f and e are those of the outermost position that keeps a
        # tensor; a kept tensor below it takes a word at least and is refilled on every iteration
        # above its own position (Tree._capacity_cases); R's positions at or above L1 are chosen, and
        # their tensors are served from their keepers so far
        g, masks = self._positions(R, L1)
        masks = tuple(m for m in masks if not m & taken)
        at_r, words, work = [], [], 0
        for mask, outer in ((m, o) for m in masks for o in fronts(m, g < R)):
            kept = [t for t in range(self.T) if mask >> t & 1]
            front = [t for t in kept if outer >> t & 1]           # (the others: a word each, at least)
            if len(kept) > S:
                continue
            # (a windowed tensor at f's position: its true tile, every dimension of its ranks)
            tied = [d for d in dims if any(d in self.dims_of[t] for t in front)]
            col = {d: i for i, d in enumerate(tied)}
            shapes = tile_shapes(tuple(int(rem[d]) for d in tied),
                                 tuple(tuple(tuple((col[x], c) for x, c in r if x in col) for r in self.ranks_of[t])
                                       for t in front),
                                 int(S) - (len(kept) - len(front)), self.REFILL_WORK)
            if shapes is not None:                 # (1 outside the tied dimensions)
                full = np.ones((len(shapes), self.D), np.int64)
                full[:, tied] = shapes
                shapes = full
            work += self.REFILL_WORK + 1 if shapes is None else len(shapes) * len(sp) * len(es)
            if work > self.REFILL_WORK:
                self._refills[key] = None
                self.stats["candidates"] += self.REFILL_WORK
                return None
            which = np.repeat(np.arange(len(shapes)), len(sp))
            f = shapes[which]                                                       # (n, D)
            split = np.tile(np.arange(len(sp)), len(shapes))
            s = sp[split]
            untied = np.array([d not in tied for d in range(self.D)])
            f = np.where(untied[None, :], rem_a[None, :] // s, f)                     # as large as s lets them
            ok = ((rem_a[None, :] // f) % s == 0).all(axis=1)
            f, s, which, split = f[ok], s[ok], which[ok], split[ok]
            grows = None
            if len(f) > self.GROW_ROWS:
                grows = self._grows(shapes, which, f, s, front, int(S) - (len(kept) - len(front)), tied, rem_a,
                                    looped)
                stuck = grows.sum(axis=1)
                keep = stuck <= 1
                f, s, split, grows, stuck = f[keep], s[keep], split[keep], grows[keep], stuck[keep]
            sh = share[split]
            exact = (f * s == rem_a[None, :]).all(axis=1)
            # per tensor: R's energy and the words across R's top where no loop e refills it
            # (column 0: a tensor R does not keep, every compute's) and where one does (column 1)
            at = np.zeros((len(f), self.T, 2))
            moved = np.full((len(f), self.T, 2), macs)
            for t in kept:
                per = (self.wpw if self.rw[t] else self.rpw)[R] * macs
                refilled = np.maximum(macs / f[:, others[t]].prod(axis=1), sizes[t])
                for k, x in enumerate((np.full(len(f), sizes[t]), refilled)):
                    at[:, t, k] = self.wpw[R] * (np.maximum(x - sizes[t], 0.0) if self.rw[t] else x) + per
                    moved[:, t, k] = x
            moved /= sh[:, :, None]
            windowed = [t for t in front if t in self.windowed]
            in_r = np.array([mask >> t & 1 for t in range(self.T)], bool)
            in_outer = np.array([outer >> t & 1 for t in range(self.T)], bool)
            for e in es:
                if e < 0:
                    cond = exact & (not looped)
                else:
                    cond = (s[:, e] < rem[e]) if untied[e] else (f[:, e] * s[:, e] < rem[e])
                    cond = cond | (exact & looped)
                    if grows is not None:
                        cond &= (stuck == 0) | ((stuck == 1) & grows[:, e])
                if not cond.any():
                    continue
                k = (in_r & ((self.rel[:, e] if e >= 0 else False) | ~in_outer)).astype(np.int64)   # each tensor's column
                cols = np.arange(self.T)
                at_e, words_e = at[cond][:, cols, k], moved[cond][:, cols, k]
                for t in windowed:
                    x, words_e[:, t] = self._window_refills(t, f[cond], s[cond], e, rem_a, looped)
                    at_e[:, t] = self.wpw[R] * x + self.rpw[R] * macs
                at_r.append(at_e.sum(axis=1))
                words.append(words_e)
        out = (np.concatenate(at_r), np.concatenate(words)) if at_r else None
        self._refills[key] = out
        self.stats["candidates"] += work // 2      # a case costs about half a candidate (0.2 us against 0.35 us)
        return out

    def refills_since(self, known: set) -> dict:
        """The :meth:`_refill_cases` weighed since the keys ``known``, each cut to the cases among
        which :meth:`refine`'s least is found (:func:`least_cases`: its total grows with R's
        energy and with each tensor's words; a few dozen of a remainder's thousands, typically):
        what a forked share of the search hands back, so that the next walk starts with them."""
        out = {}
        for key in self._refills.keys() - known:
            got = self._refills[key]
            if got is not None:
                keep = least_cases(np.column_stack(got))
                got = (got[0][keep], got[1][keep])
            out[key] = got
        return out

    GROW_ROWS = 4096         # _refill_cases keeps only the shapes that cannot grow where it has more cases than this

    def _grows(self, shapes: np.ndarray, which: np.ndarray, f: np.ndarray, s: np.ndarray, front: list, free: int,
               tied: list, rem: np.ndarray, looped: bool) -> np.ndarray:
        """(n, D): where case n's tile f (``shapes[which]``, split s) could grow along d and still
        fit in ``free`` words with f x s dividing ``rem``: f_d times the least prime of what ``rem``
        leaves it. A case that can grow moves no fewer words of any tensor into R or across its
        top, and R spends no less, than the grown one with the same e (the words of a tensor
        refilled by e shrink as its other dimensions grow; a windowed tensor's too, but along a
        dimension with a coefficient above 1, whose extent grows faster than its factor: those are
        never grown here), so only the cases that cannot grow but along e need counting. With a
        window, a dimension is not grown where that would leave it no loop above R (the words of
        a windowed tensor count on which loops may lie outside e, :meth:`_window_refills`)."""
        tiles = {t: tile_words(shapes, self.ranks_of[t]) for t in front}
        room = rem[None, :] // (f * s)
        grows = np.zeros(f.shape, bool)
        for d in tied:
            can = room[:, d] > 1
            if self.strided[d] or not can.any():
                continue
            lp = least_prime(np.where(can, room[:, d], 1))
            if self.windowed and not (looped and rem[d] < self.bounds[d]):
                can &= lp < room[:, d]
            for p in np.unique(lp[can]).tolist():
                used = np.zeros(len(shapes), np.int64)
                for t in front:
                    if d not in self.dims_of[t]:
                        used += tiles[t]
                    elif t in self.windowed:
                        grown = shapes.copy()
                        grown[:, d] *= p
                        used += tile_words(grown, self.ranks_of[t])
                    else:
                        used += tiles[t] * p
                hit = can & (lp == p)
                grows[hit, d] = (used <= free)[which[hit]]
        return grows

    def _window_refills(self, t: int, f: np.ndarray, s: np.ndarray, e: int, rem: np.ndarray,
                        looped: bool) -> tuple:
        """A read-only windowed tensor t kept at R's outermost position, per case (tile shape f,
        split s, innermost temporal loop e above R; -1: none): the words that enter R over the run
        and those that cross R's top, at least (Timeloop's delta walk, ``model.nest._window_walk``).

        Into each unit: a step of a loop moves its tile by at least ``a = c * f_d`` along each
        rank where the loop's dimension d has coefficient c, and the walk brings the words the
        moved tile lacks (``slide``; or the whole tile). Where d is the only dimension of a rank,
        that is the whole tile, at every step and every wrap of the loop (a loop that steps moves
        the tile along that rank by a multiple of its extent). Of the iterations above R, 1 - 1/F
        are steps of e (F: e's factor, between the least prime and the whole of what is left of
        e above R); the others are wraps of e, where the next loop out, e2, steps (or wraps too:
        then nothing is counted, at least half the time it steps). e2 is any dimension with a
        factor that may lie above R (in ``rem`` beyond f x s, or above L1 where ``looped``), and
        the least over them is taken:

        * e moves t's tile along a rank of its own: the whole tile at every iteration;
        * e slides t's window: a step brings ``slide(e)``; a wrap the whole tile where e2 has a
          rank of its own in t, nothing where e2 shares a rank with e (it may move the tile back
          where it was), else half of ``slide(e)`` (e jumps back, e2 moves no rank of e's);
        * e does not index t: a wrap brings the whole tile where e2 has a rank of its own in t,
          half of ``slide(e2)`` where e2 slides t, else nothing.

        Across R's top, the words no unit held a step earlier: none can come over a link, so the
        parent sends each, once (multicast). The units' tiles are translates, d's units at least
        ``c * f_d`` apart along each rank of d, so along a rank their union spans at least
        ``X + sum((s_d - 1) * min(c * f_d, X))`` (each further unit, taken rank dimension by
        dimension, reaches past the others by that much; X: one unit's extent; a dimension in two
        ranks of t is left unsplit). Where the tile moves along a rank of one dimension, the whole
        union is new (no unit's tile reaches another's); a slide brings at least the last unit's
        overhang ``min(a, X)`` along each rank it moves, times the union's other ranks. Where the
        units are split, links between them can bring a unit what the parent did not send, so
        only those words are counted into R too. At least t's touched size enters R."""
        size = float(self.sizes[t])
        n = len(f)
        if e < 0:
            return np.full(n, size), np.full(n, size)
        iters = float(self.workload.macs) / rowprod(f).astype(np.float64)
        if e in self._window_dims(t, e)[1]:          # a rank of its own: the whole tile at every iteration
            lo = hi = np.ones(n)
            outer = {}
        else:
            # e's factor F above R, and which dimensions may be e2
            q = rem[e] // (f[:, e] * s[:, e])
            above = int(self.bounds[e]) // int(rem[e]) if looped else 1
            lo = np.maximum(least_prime(np.where(q > 1, q, max(above, 1))), 2).astype(np.float64)
            hi = np.maximum(np.where(q > 1, q, above), lo).astype(np.float64)
            room = rem[None, :] // (f * s) > 1
            outer = {d: room[:, d] | (looped and rem[d] < self.bounds[d]) for d in range(self.D)
                     if d != e and self.bounds[d] > 1}
            again = (q > 1) & (least_prime(np.maximum(q, 1)) < q)          # a second loop over e
            if looped and rem[e] < self.bounds[e]:
                again = again | (q > 1) | (least_prime(np.array([above]))[0] < above)
            outer[e] = again
        into, up = self._window_steps(t, f, s, e, lo, hi, outer)
        units = rowprod(s)
        up = iters * up / units
        # (where a fanout feeds R, a neighbour's link can bring what the parent did not send)
        return np.maximum(np.where(units == 1, iters * into, up), size), up

    def _window_steps(self, t: int, f: np.ndarray, s: np.ndarray, e: int, lo: np.ndarray, hi: np.ndarray,
                      outer: dict, moves=None) -> tuple:
        """:meth:`_window_refills`' words per iteration of the loops above a level holding t's tiles
        f (rows), the units split s: (into one unit, across the top of the units' union), where
        the innermost loop above is over e with a factor between ``lo`` and ``hi`` and ``outer[d]``
        says where a loop over d may be the next one out (e2; none: e is the only loop).
        ``moves``: :meth:`_window_moves` of the same t, f and s (computed here where not given)."""
        n = len(f)
        dims_t, own, H, _ = self._window_dims(t, e)
        whole, moved = moves or self._window_moves(t, f, s)
        if e in own:
            return whole
        # which kinds of loop may be e2: one moving t along a rank of its own (a wrap brings the
        # whole tile), one sharing a rank with e or not indexing t where e does not (nothing: it
        # may put the tile back), any other (half of e's slide where e slides t), one sliding t
        # where e does not index t (half of its own slide)
        zero, half, full = np.zeros(n, bool), np.zeros(n, bool), np.zeros(n, bool)
        slides = []
        for d, ok in outer.items():
            if d in own:
                full |= ok
            elif e in dims_t:
                if d in H:
                    zero |= ok
                else:
                    half |= ok
            elif d in dims_t:
                slides.append((d, ok))
            else:
                zero |= ok
        out = []
        if e in dims_t:
            for mine, all_of in zip(moved(e), whole):
                # (no e2 at all: e is the only loop above, and every iteration but the first steps it)
                wrap = np.where(zero, 0.0, np.where(half, 0.5 * mine, np.where(full, all_of, mine)))
                out.append(np.minimum((1 - 1 / lo) * mine + wrap / lo, (1 - 1 / hi) * mine + wrap / hi))
            return tuple(out)
        for k in range(2):
            wrap = np.where(full, whole[k], np.inf)
            for d, ok in slides:
                wrap = np.where(ok, np.minimum(wrap, 0.5 * moved(d)[k]), wrap)
            wrap = np.where(zero | ~np.isfinite(wrap), 0.0, wrap)
            out.append(wrap / hi)
        return tuple(out)

    def _window_moves(self, t: int, f: np.ndarray, s: np.ndarray) -> tuple:
        """Of t's tiles f (rows) and the units' union under split s, whatever the loops above:
        (the words of a whole tile and of the whole union, ``moved(d)``: the words a step of d
        brings a unit and the union, computed once per d)."""
        ranks = self.ranks_of[t]
        n = len(f)
        _, own, _, alone = self._window_dims(t, -1)       # (neither depends on e)
        X = extents(f, ranks)
        union = X.copy()
        for h, r in enumerate(ranks):
            for d, c in r:
                if d in alone:
                    union[:, h] += (s[:, d] - 1) * np.minimum(c * f[:, d], X[:, h])
        whole = (rowprod(X).astype(np.float64), rowprod(union).astype(np.float64))
        cache = {}

        def moved(d):
            """(into, across): the words a step of d brings a unit and the units' union."""
            if d in own:
                return whole
            if d not in cache:
                a = np.stack([sum((c * f[:, d] for x, c in r if x == d), np.zeros(n, np.int64)) for r in ranks],
                             axis=1)
                step = np.minimum(a, X)
                cache[d] = (whole[0] - rowprod(X - step), whole[1] - rowprod(union - step))
            return cache[d]

        return whole, moved

    def _window_dims(self, t: int, e: int) -> tuple[set, set, set, set]:
        """Tensor t's dimensions, those with a rank of their own, those sharing a rank with e, and
        those in one term of its ranks only (:meth:`_window_steps` spreads only those over a union)."""
        forms = self._window_forms
        if (t, e) not in forms:
            ranks = self.ranks_of[t]
            terms = [x for r in ranks for x, _ in r]
            forms[t, e] = (self.dims_of[t], {r[0][0] for r in ranks if len(r) == 1},
                           {x for r in ranks if any(y == e for y, _ in r) for x, _ in r},
                           {x for x in terms if terms.count(x) == 1})
        return forms[t, e]

    def _keepers(self, n, rows: dict) -> list:
        """Per tensor, its keeper above the level being chosen, as (pJ per access, (m,) the units
        under it beyond those below that level that can share one access: the spatial loops from
        it down, over the dimensions that do not index the tensor); None where it has none yet."""
        out = []
        row_s = rows["sx"] * rows["sy"]
        for t in range(self.T):
            pl = int(n.last[t])
            if pl < 0:
                out.append(None)
                continue
            spread = row_s * np.prod([n.choice[l][1] * n.choice[l][2] for l in range(pl, n.depth)]
                                     or [np.ones(self.D, np.int64)], axis=0)[None, :]
            wider = rowprod(spread, self.other_dims[t]).astype(np.float64)
            out.append(((self.wpw if self.rw[t] else self.rpw)[pl], wider))
        return out

    def refine(self, ch, i: int, cycles: int | None = None) -> float:
        """Child i's energy bound raised by what the innermost level R's capacity forces below it
        (:meth:`_refill_cases`), computed only for the children the search visits (their bound
        beat the best so far). With ``cycles`` (the lexicographic objective's best), the bound is
        of the mappings of at most those cycles only, the only ones that can beat it: a mapping
        runs its computes over at most the product of its spatial factors at once, so those take
        at least ``macs x cycles_per_op / cycles`` units, and the splits of the units below L1
        with fewer (given the spatial factors chosen above) are not weighed; the best's cycles only
        fall, so a bound raised for earlier ones still holds. Where it applies, each tensor's words
        across R's top are priced at the cheapest level that can still be its keeper above R: L1
        if L1 keeps it, else its keeper so far (whose accesses more units can share), or a level
        between L1 and R; at least its size and the words the node already moves for it, whose
        energy the node counted (and is subtracted here, with what :meth:`_below_cost` added).
        Asked again, it returns the bound it raised; ``ch.elb`` is left as it was."""
        info = ch.refill
        if info is None:
            return float(ch.elb[i])
        # each child is raised once, and kept apart: ch.elb stays sorted, which the walk relies on
        # to stop at the first child whose bound loses (a child raised ahead of it must not stop it)
        raised = info.get("raised")
        if raised is None:
            raised = info["raised"] = np.full(len(ch.row), np.nan)
        if not np.isnan(raised[i]):
            return float(raised[i])
        raised[i] = ch.elb[i]
        n, rows, L1, T = ch.node, ch.rows, ch.node.depth + 1, self.T
        j, c, mk = int(ch.row[i]), int(info["col"][i]), int(ch.mask[i])
        if "slid" in info:                 # a windowed tensor's slides (Tree._window_slid)
            raised[i] = max(raised[i], info["slid"][j, c])
            if "counted" not in info:
                return float(raised[i])
        held = taken = 0
        if self.split is not None and L1 < self.nlev - 1 and self.split.group[L1] == self.split.group[-1]:
            # L1 is one of R's positions: what it and the positions above it hold
            held = int(sum(int(rows["true"][j, t]) for t in range(T) if mk >> t & 1))
            taken = mk
            if self._inner(L1):
                held, taken = held + n.held, taken | n.gkept
                if not mk:                 # after an empty inner position none keeps a tensor (mapper/uneven.py)
                    taken = (1 << T) - 1
        least = 1
        if cycles is not None:             # the units a mapping of at most these cycles runs at once
            units = math.ceil(float(self.workload.macs) * self.arch.compute.cycles_per_op / cycles * SAFE)
            least = -(-units // int(rows["util"][j]))
        cases = self._refill_cases(L1, tuple(int(x) for x in rows["rem"][j]), bool(rows["P"][j] > 1), held, taken,
                                   least)
        if cases is None:
            return float(raised[i])
        at_r, words = cases
        total = at_r.copy()
        closed = None                      # an empty inner position of a level above R's: the rest of it keeps none
        if self.split is not None and self._inner(L1) and not mk and self.split.group[L1] != self.split.group[-1]:
            closed = range(self.split.members[self.split.group[L1]][-1] + 1, self._first_position(self.nlev - 1, L1))
        for t in range(T):
            kept = bool(mk >> t & 1)
            p_r, p_w = self.below[L1][1][t][2]            # a level between L1 and R that may keep t
            if closed is not None:
                between = [L for L in closed if self.may_keep[L, t]]
                p_r, p_w = float(min(self.rpw[between], default=np.inf)), float(min(self.wpw[between], default=np.inf))
            here = L1 if kept else int(n.last[t])          # or L1, or t's keeper so far
            if here >= 0:
                p_r, p_w = min(p_r, float(self.rpw[here])), min(p_w, float(self.wpw[here]))
            p_r, p_w = (0.0 if p_r == np.inf else p_r), (0.0 if p_w == np.inf else p_w)     # none: free
            keeper = info["keeper"][t]
            x = words[:, t] if kept or keeper is None else words[:, t] / keeper[1][j]
            x = np.maximum(np.maximum(x, self.sizes[t]), info["moved"][t][j, c])
            total += p_w * x + p_r * np.maximum(x - self.sizes[t] * self.inst_above, 0.0) if self.rw[t] else p_r * x
        gain = float(total.min()) - info["counted"][j, c] - info["below"][j, c]
        if gain > 0:                       # (the slides' raise and this one may count the same words)
            raised[i] = max(raised[i], ch.elb[i] + gain * SAFE)
        return float(raised[i])
