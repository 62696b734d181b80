"""The map space of one (arch, workload, constraints): what may be chosen at each level.

A mapping is built level by level from the outermost: at each storage level, which tensors it
keeps, the spatial factors of its fanout (X and Y), the temporal factors and the order of its
temporal loops. Two exact reductions keep the space small without losing any distinct cost:

* **Loop orders by relevance class.** Dimensions that index the same set of tensors form a class;
  swapping two loops of one class changes no tile, no reuse and no access count. Within a level
  only the order of classes can matter, and of those orders only the ones that give some tensor a
  different set of loops below its innermost relevant loop (its reuse) are distinct. Per level and
  per pattern of classes that have a factor > 1, :class:`MapSpace` keeps one order per distinct
  reuse signature.
* **Dominance.** Without a user permutation, a class that indexes every tensor goes outermost and
  a class that indexes none goes innermost: any other place can only add iterations above some
  tensor's innermost relevant loop, never remove them. More generally, of the distinct reuse
  signatures of one pattern only those no other one covers (at least the same loops below every
  tensor's innermost relevant loop) are searched.
"""

from __future__ import annotations

import collections
import functools
import itertools
import math

from storeloop.errors import StoreloopError
from storeloop.ir import Arch, LevelMapping, Loop, Workload
from storeloop.ir.constraints import Constraints


def _is_prime(n: int) -> bool:
    """Deterministic Miller-Rabin for n < 3.3e24 (bases: the first 13 primes)."""
    if n < 2:
        return False
    bases = (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41)
    for p in bases:
        if n % p == 0:
            return n == p
    d, r = n - 1, 0
    while d % 2 == 0:
        d, r = d // 2, r + 1
    for a in bases:
        x = pow(a, d, n)
        if x in (1, n - 1):
            continue
        for _ in range(r - 1):
            x = x * x % n
            if x == n - 1:
                break
        else:
            return False
    return True


def _rho(n: int) -> int:
    """A non-trivial factor of the odd composite n (Pollard's rho, Floyd cycle finding)."""
    for c in range(1, 100):
        x = y = 2
        g = 1
        while g == 1:
            x = (x * x + c) % n
            y = (y * y + c) % n
            y = (y * y + c) % n
            g = math.gcd(abs(x - y), n)
        if g != n:
            return g
    raise StoreloopError(f"cannot factor the bound {n}")


@functools.lru_cache(maxsize=4096)
def prime_factors(n: int) -> tuple[int, ...]:
    """The prime factors of n, with repetition, ascending: trial division by small primes, then
    Miller-Rabin and Pollard's rho (a bound near 10**18 factors in milliseconds)."""
    if n < 1:
        raise StoreloopError(f"cannot factor {n}: bounds are whole numbers >= 1")
    out = []
    for p in (2, 3, 5):
        while n % p == 0:
            out.append(p)
            n //= p
    p = 7
    while p * p <= n and p < 10_000:
        while n % p == 0:
            out.append(p)
            n //= p
        p += 2
    stack = [n] if n > 1 else []
    while stack:
        m = stack.pop()
        if _is_prime(m):
            out.append(m)
        else:
            f = _rho(m)
            stack += [f, m // f]
    return tuple(sorted(out))


def divisors(n: int) -> list[int]:
    """Every divisor of n, ascending."""
    divs = [1]
    for p, k in collections.Counter(prime_factors(n)).items():
        divs = [d * p**e for d in divs for e in range(k + 1)]
    return sorted(divs)


_SHARED: dict[tuple, object] = {}


def _shared(key: tuple, make):
    """``make()``, computed once per process for ``key`` (everything it depends on)."""
    if key not in _SHARED:
        if len(_SHARED) > 4096:
            _SHARED.clear()
        _SHARED[key] = make()
    return _SHARED[key]


class MapSpace:
    """The constrained map space of ``workload`` (plain indices) on ``arch``.

    ``exact``: the sliding-window problem ``workload`` is the plain surrogate of
    (:mod:`storeloop.mapper.window`). Its windowed tensors' counts depend on the whole loop order,
    so then each dimension is a class of its own, and ``expansions[L][order]`` lists every order of
    level L that the tree's ``order`` stands for: those with its reuse signature (the same surrogate
    price) and those the dominance rule puts after it (no lower surrogate price). A stationary
    tensor is the one ``exact`` indexes."""

    def __init__(self, arch: Arch, workload: Workload, constraints: Constraints | None = None,
                 exact: Workload | None = None):
        if workload.windowed:
            raise AssertionError("MapSpace takes plain indices (a windowed workload's surrogate)")
        self.arch, self.workload, self.ordered, self.exact = arch, workload, exact is not None, exact
        self.indexes = [t.dims() for t in (exact or workload).tensors]       # dims each tensor's ranks use
        self.constraints = constraints or Constraints()
        self.nlev = len(arch.levels)
        self.ndims = len(workload.dims)
        self.names = [t.name for t in workload.tensors]
        self.relevant = [[d in t.dims() for d in range(self.ndims)] for t in workload.tensors]
        # relevance classes over dims with a bound > 1; a dim a user permutation names is a class of
        # its own (the permutation may put other dims of its class between them)
        permuted = {d for c in self.constraints.levels.values() for d in (c.permutation or [])}
        sigs: dict[object, tuple[frozenset[int], list[int]]] = {}
        for d in range(self.ndims):
            if workload.bounds[d] > 1:
                ts = frozenset(ti for ti in range(len(self.names)) if self.relevant[ti][d])
                sigs.setdefault(("dim", d) if d in permuted or self.ordered else ts, (ts, []))[1].append(d)
        self.classes = list(sigs.values())                # [(tensor set, dims)]
        self.fanouts = [arch.fanout(i) for i in range(self.nlev)]
        # compute units a mapping must use: Timeloop's min parallelism (the product of the fanouts'
        # utilizations) is the share of the compute units in use
        self.min_units = self.constraints.min_parallelism * arch.compute.instances / arch.levels[0].instances
        # both depend on the problem's shape and the level's constraint (and fanout) only: a sweep's
        # points share them (_SHARED, read only)
        shape = (tuple(workload.bounds), tuple(self.names), repr(self.classes), repr(self.indexes),
                 self.constraints.min_spatial_utilization)
        self.spatial_options = [_shared(("spatial", shape, self.fanouts[L], repr(self.constraints.at(L))),
                                        lambda: self._spatial_options(L)) for L in range(self.nlev)]
        # ordered (a windowed problem): the tree searches one order per surrogate price, and its
        # leaves take every order that rep stands for (same price on the surrogate, or dominated)
        self.expansions: list[dict[tuple, list[tuple]]] = [{} for _ in range(self.nlev)]
        # ... and of those, the orders whose own surrogate price may be higher than the rep's (a
        # different reuse signature: dominated, or not sorted as the rep): Tree._exact_leaves prices
        # them on the surrogate before the model
        self.pricier: list[set[tuple]] = [set() for _ in range(self.nlev)]
        self.orders = [self._orders(L) if self.ordered else
                       _shared(("orders", shape, repr(self.constraints.at(L))), lambda: self._orders(L))
                       for L in range(self.nlev)]
        self.keep_masks = [self._keep_masks(L) for L in range(self.nlev)]
        for name in self.constraints.at(0).bypass or ():
            # a tensor homed below the outermost level: bypassed above its home and kept there
            home = next((L for L in range(self.nlev) if name in (self.constraints.at(L).keep or ())), None)
            if home is None or any(name not in (self.constraints.at(L).bypass or ()) for L in range(home)):
                raise StoreloopError(f"tensor {name} bypasses the outermost level {arch.levels[0].name}: it needs a "
                                     "home, a level below that keeps it with every level above bypassing it")

    # ------------------------------------------------------------------ spatial
    def _spatial_options(self, L: int) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
        """(X factors, Y factors) per dim, within the fanout below level L."""
        total, fx, fy = self.fanouts[L]
        c = self.constraints.at(L)
        dims = [d for d in range(self.ndims) if self.workload.bounds[d] > 1]

        def axis(limit: int, fixed: dict[int, tuple[int, int]]) -> list[tuple[int, ...]]:
            per_dim = []
            for d in range(self.ndims):
                lo, hi = fixed.get(d, (1, limit))
                opts = [f for f in divisors(self.workload.bounds[d]) if f <= limit and lo <= f <= hi] if d in dims else [1]
                per_dim.append(opts or [None])
            out = []
            for combo in itertools.product(*per_dim):
                if None not in combo and math.prod(combo) <= limit:
                    out.append(tuple(combo))
            return out

        only = {a: {d: (1, 1) for d, other in c.axis.items() if other != a} for a in "XY"}
        xs = axis(fx, {**only["X"], **c.spatial_x})
        ys = axis(fy, {**only["Y"], **c.spatial_y}) if fy > 1 or c.spatial_y else [tuple([1] * self.ndims)]
        # as in Timeloop's mappings, a dim has one spatial loop per level, along X or along Y
        opts = [(x, y) for x in xs for y in ys if math.prod(x) * math.prod(y) <= total
                and all(x[d] == 1 or y[d] == 1 for d in dims)
                and all(lo <= x[d] * y[d] <= hi for d, (lo, hi) in c.spatial.items())]
        if c.free_axes is not None:
            free, kx, ky = c.free_axes
            opts = [(x, y) for x, y in opts
                    if sum(x[d] > 1 for d in free) <= kx and sum(y[d] > 1 for d in free) <= ky]
        need = self.constraints.min_spatial_utilization
        if need > 0 and total > 1:
            opts = [o for o in opts if math.prod(o[0]) * math.prod(o[1]) >= need * total]
        return opts

    # ------------------------------------------------------------------ loop orders
    def _orders(self, L: int) -> dict[int, list[tuple[int, ...]]]:
        """Presence pattern (bit per class with factor > 1) -> distinct orders of the present
        classes, outer -> inner (classes with factor 1 have no loop and are left out)."""
        ntens = len(self.names)
        c = self.constraints.at(L)
        k = len(self.classes)
        cls_of = {d: ci for ci, (_, ds) in enumerate(self.classes) for d in ds}
        seq = [cls_of[d] for d in c.permutation if d in cls_of] if c.permutation is not None else None
        kind = [0 if len(ts) == ntens else 2 if not ts else 1 for ts, _ in self.classes]
        out: dict[int, list[tuple[int, ...]]] = {}
        for pattern in range(1 << k):
            present = [ci for ci in range(k) if pattern >> ci & 1]
            seen: dict[tuple, tuple[int, ...]] = {}
            named = [ci for ci in dict.fromkeys(seq or []) if pattern >> ci & 1]
            # a permutation that names every present class allows one order only
            perms = [tuple(named)] if seq is not None and len(named) == len(present) \
                else itertools.permutations(present)
            for perm in perms:
                if seq is not None and not c.allows_order([self.classes[ci][1][0] for ci in perm]):
                    continue                          # a named dim is a class of its own
                if c.stationary is not None:
                    ti = self.names.index(c.stationary)
                    if perm and self.indexes[ti] & set(self.classes[perm[-1]][1]):
                        continue                      # innermost loop must not index the stationary tensor
                canon = perm
                if seq is None and (c.stationary is None or not self.ordered):
                    # dominance: all-relevant classes outermost, classes relevant to nothing innermost
                    # (not for expansions under a stationary rule, which the sorted order may break)
                    canon = tuple(sorted(perm, key=lambda ci: kind[ci]))
                    if canon != perm and not self.ordered:
                        continue
                rep = seen.setdefault(self._signature(canon), canon)
                if self.ordered:                      # the orders the tree's rep stands for
                    self.expansions[L].setdefault(rep, []).append(perm)
            out[pattern] = self._undominated(L, seen)
        if self.ordered:
            self.pricier[L] = {perm for rep, perms in self.expansions[L].items() for perm in perms
                               if self._signature(perm) != self._signature(rep)}
        return out

    def _signature(self, perm: tuple[int, ...]) -> tuple:
        """Per tensor, the classes of ``perm`` (outer -> inner) below its innermost relevant one
        (None: none is relevant): the reuse an order gives, which sets its surrogate price."""
        sig = []
        for ti in range(len(self.names)):
            rel = [i for i, ci in enumerate(perm) if ti in self.classes[ci][0]]
            sig.append(frozenset(perm[rel[-1] + 1:]) if rel else None)
        return tuple(sig)

    def _undominated(self, L: int, seen: dict[tuple, tuple[int, ...]]) -> list[tuple[int, ...]]:
        """The orders no other order of the same classes dominates: one whose every tensor has at
        least the same loops below its innermost relevant one has every tensor's repetitions at
        most as many (a product of fewer of the same factors), so every count the tree bounds and
        the model prices is at most as large. A windowed problem's leaves still price the
        dominated orders: they become expansions of a dominating one (its surrogate price bounds
        theirs)."""
        sigs = list(seen)

        def covers(a, b) -> bool:
            return a != b and all(x is None and y is None or x is not None and y is not None and x >= y
                                  for x, y in zip(a, b))

        keep = [a for a in sigs if not any(covers(b, a) for b in sigs)]
        if self.ordered:
            for a in sigs:
                if a not in keep:
                    into = next(b for b in keep if covers(b, a))
                    self.expansions[L][seen[into]].extend(self.expansions[L].pop(seen[a]))
        return [seen[a] for a in keep]

    # ------------------------------------------------------------------ keep / bypass
    def _keep_masks(self, L: int) -> list[int]:
        n = len(self.names)
        if L == 0:
            # the outermost level backs every tensor, but those its constraints bypass (a tensor
            # homed further down: a query's intermediate kept in DRAM under an SSD, say)
            gone = self.constraints.at(0).bypass or frozenset()
            return [sum(1 << i for i in range(n) if self.names[i] not in gone)]
        c = self.constraints.at(L)
        masks = []
        for m in range(1 << n):
            kept = {self.names[i] for i in range(n) if m >> i & 1}
            if c.keep is not None and not c.keep <= kept:
                continue
            if c.bypass is not None and kept & c.bypass:
                continue
            masks.append(m)
        return masks

    def level_mapping(self, dims, tf, x, y, mask: int, spatial_order=None) -> LevelMapping:
        """One level's loops (temporal in the order of ``dims``, spatial on each axis in the order
        of ``spatial_order`` (default: dimension order), factor-1 loops left out) and keep set."""
        kept = frozenset(n for i, n in enumerate(self.names) if mask >> i & 1)
        order = list(spatial_order or ()) + [d for d in range(self.ndims) if d not in (spatial_order or ())]
        return LevelMapping(tuple(Loop(d, int(tf[d])) for d in dims if tf[d] > 1),
                            tuple(Loop(d, int(x[d]), True, "X") for d in order if x[d] > 1)
                            + tuple(Loop(d, int(y[d]), True, "Y") for d in order if y[d] > 1),
                            None if len(kept) == len(self.names) else kept)

    def temporal_range(self, L: int, d: int) -> tuple[int, int]:
        return self.constraints.at(L).temporal.get(d, (1, self.workload.bounds[d]))
