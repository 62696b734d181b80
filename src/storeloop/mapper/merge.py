"""Merge dimensions that index the same tensors into one, and split mappings back.

Two dimensions that index exactly the same tensors are indistinguishable to the model: every
tile, repetition count, partition and capacity depends only on the product of their factors at
each level. And any per-level split of the product's prime exponents can be realized by the
original dimensions (per prime, the exponents of the dimensions form one pool). So the mapper
searches the merged problem -- for OnionPIR, 4 dimensions instead of 8 -- and
:func:`split_mapping` hands each level's merged factor back to the original dimensions, outermost
level first, prime by prime. Dimensions a user constrained are never merged.
"""

from __future__ import annotations

from dataclasses import replace

from storeloop.ir.constraints import Constraints, LevelConstraint

from storeloop.mapper.space import prime_factors
from storeloop.ir import LevelMapping, Loop, Mapping, Workload


def _primes(n: int) -> list[int]:
    return list(prime_factors(n))


def _constrained(c: LevelConstraint) -> set[int]:
    return set(c.temporal) | set(c.spatial_x) | set(c.spatial_y) | set(c.spatial) | set(c.axis) \
        | set(c.permutation or []) | set(c.free_axes[0] if c.free_axes else ())


def _layout_chains(workload: Workload, group: list[int]) -> list[list[int]]:
    """Split a relevance class into runs of dimensions that are neighbours, in one order, in every
    tensor's layout (rank order) and whose bounds are powers of one prime. For those, merging keeps
    the layout: :func:`split_mapping` gives the outer levels the slower dimension's primes first, so
    every level's tile is a contiguous suffix exactly when the merged tile is (paged levels)."""
    ranks = [[r[0][0] for r in t.ranks] for t in workload.tensors if set(group) <= t.dims()]
    order = sorted(group, key=lambda d: ranks[0].index(d))
    chains: list[list[int]] = []
    for d in order:
        if chains:
            prev = chains[-1][-1]
            neighbours = all(r.index(d) == r.index(prev) + 1 for r in ranks)
            same_prime = set(_primes(workload.bounds[d])) == set(_primes(workload.bounds[prev]))
            if neighbours and same_prime and len(set(_primes(workload.bounds[d]))) == 1:
                chains[-1].append(d)
                continue
        chains.append([d])
    return chains


def merge(workload: Workload, constraints: Constraints, *, layout: bool | str = False
          ) -> tuple[Workload, list[list[int]], Constraints]:
    """(merged workload, original dims of each merged dim, constraints on merged dims).

    ``layout=True`` (a paged level prices the tile layout) merges only neighbouring dimensions
    (:func:`_layout_chains`) and keeps each tensor's ranks in layout order; ``layout="none"``
    (every layout is searched) merges nothing."""
    pinned = set().union(*[_constrained(c) for c in constraints.levels.values()]) if constraints.levels else set()
    groups: dict[object, list[int]] = {}
    for d in range(len(workload.dims)):
        if workload.bounds[d] == 1:
            continue
        key = ("pin", d) if d in pinned else frozenset(t.name for t in workload.tensors if d in t.dims())
        groups.setdefault(key, []).append(d)
    members = list(groups.values())
    if layout == "none":
        members = [[d] for ds in members for d in ds]
    elif layout:
        members = [chain for ds in members for chain in _layout_chains(workload, ds)]
    new_of = {d: i for i, ds in enumerate(members) for d in ds}
    dims = tuple("".join(workload.dims[d] for d in ds) for ds in members)
    bounds = tuple(_prod(workload.bounds[d] for d in ds) for ds in members)
    def ranks(t):
        if layout:                           # the tensor's rank order, one rank per merged chain
            out = []
            for rank in t.ranks:
                i = new_of.get(rank[0][0])
                if i is not None and (not out or out[-1] != ((i, 1),)):
                    out.append(((i, 1),))
            return tuple(out)
        return tuple(((i, 1),) for i, ds in enumerate(members) if any(d in t.dims() for d in ds))

    tensors = tuple(replace(t, ranks=ranks(t)) for t in workload.tensors)
    merged = Workload(workload.name, dims, bounds, tensors, workload.einsum)

    def remap(m: dict) -> dict:
        return {new_of[d]: v for d, v in m.items() if d in new_of}

    def reperm(c: LevelConstraint) -> dict:
        if c.permutation is None:
            return {}
        kept = [d in new_of for d in c.permutation]
        anchor = None if c.anchor is None else (sum(kept[:c.anchor[0]]), sum(kept[len(kept) - c.anchor[1]:]))
        return dict(permutation=[new_of[d] for d in c.permutation if d in new_of], anchor=anchor)

    levels = {L: replace(c, temporal=remap(c.temporal), spatial_x=remap(c.spatial_x), spatial_y=remap(c.spatial_y),
                         spatial=remap(c.spatial), axis=remap(c.axis), **reperm(c),
                         free_axes=None if c.free_axes is None else
                         (frozenset(new_of[d] for d in c.free_axes[0] if d in new_of), *c.free_axes[1:]))
              for L, c in constraints.levels.items()}
    return merged, members, replace(constraints, levels=levels)


def _prod(it) -> int:
    out = 1
    for v in it:
        out *= v
    return out


def split_mapping(mapping: Mapping, members: list[list[int]], workload: Workload) -> Mapping:
    """The mapping of the original workload whose per-level merged factors equal ``mapping``'s."""
    pool = {i: {d: _primes(workload.bounds[d]) for d in ds} for i, ds in enumerate(members)}

    def take(i: int, factor: int) -> list[tuple[int, int]]:
        got: dict[int, int] = {}
        for p in _primes(factor):
            for d in members[i]:
                if p in pool[i][d]:
                    pool[i][d].remove(p)
                    got[d] = got.get(d, 1) * p
                    break
            else:
                raise ValueError(f"factor {factor} of merged dimension {i} does not divide what is left")
        return [(d, got[d]) for d in members[i] if d in got]

    levels = []
    for lm in mapping.levels:
        split = [take(lp.dim, lp.factor) for lp in lm.temporal]
        temporal = tuple(Loop(d, f) for loops in split for d, f in loops)
        spatial = tuple(Loop(d, f, True, lp.axis) for lp in lm.spatial for d, f in take(lp.dim, lp.factor))
        # an uneven position below n merged loops lies below the loops they split into
        above = tuple((t, sum(len(loops) for loops in split[:n])) for t, n in lm.above)
        levels.append(LevelMapping(temporal, spatial, lm.keep, above))
    return Mapping(tuple(levels), mapping.name)

