"""What every mapping and workload must satisfy, whatever file it came from: factors that
multiply to the bounds, spatial factors within the fanouts, counts the model can hold."""

from __future__ import annotations

import dataclasses
import math

from storeloop.errors import MappingError
from storeloop.ir.arch import Arch
from storeloop.ir.mapping import Loop, Mapping
from storeloop.ir.workload import Workload


def _products(workload: Workload, mapping: Mapping) -> list[int]:
    products = [1] * len(workload.dims)
    for lm in mapping.levels:
        for lp in lm.temporal + lm.spatial:
            products[lp.dim] *= lp.factor
    return products


def padded(workload: Workload, mapping: Mapping) -> Workload:
    """The problem ``mapping`` runs: ``workload`` itself, or for an imperfect mapping
    (:attr:`Mapping.imperfect`) the workload whose bounds are the products of its factors, each at
    least the dimension's bound (the last tile of a dimension is run full, its extra elements
    zeros: every compute and word of the padded problem is counted, as on hardware with fixed tile
    shapes)."""
    if not mapping.imperfect:
        return workload
    products = _products(workload, mapping)
    for d, (p, b) in enumerate(zip(products, workload.bounds)):
        if p < b:
            raise MappingError(f"factors of {workload.dims[d]} multiply to {p}, less than its bound {b}",
                               kind="factors")
    if tuple(products) == workload.bounds:
        return workload
    return dataclasses.replace(workload, bounds=tuple(products))


def check_mapping(arch: Arch, workload: Workload, mapping: Mapping) -> None:
    """Structural checks: factor products equal the bounds (an imperfect mapping's: at least the
    bounds), spatial factors fit the fanout."""
    if len(mapping.levels) != len(arch.levels):
        raise MappingError(f"mapping has {len(mapping.levels)} levels, the architecture {len(arch.levels)}")
    workload = padded(workload, mapping)
    for d, (p, b) in enumerate(zip(_products(workload, mapping), workload.bounds)):
        if p != b:
            raise MappingError(f"factors of {workload.dims[d]} multiply to {p}, the bound is {b}",
                               kind="factors")
    for li, (lvl, lm) in enumerate(zip(arch.levels, mapping.levels)):
        for name, n in lm.above:            # uneven positions (LevelMapping.above)
            where = dict(level=lvl.name, kind="uneven")
            if not lm.keeps(name):
                raise MappingError(f"{name} has a position at {lvl.name}, which does not keep it", **where)
            if li == 0 or lvl.page_bytes or lvl.ssd is not None:
                raise MappingError(f"{name}'s tile at {lvl.name} cannot lie below its loops: "
                                   + ("nothing is above the outermost level" if li == 0 else
                                      "a paged or SSD-backed level's tiles are not modeled that way"), **where)
            if not 0 <= n <= len(lm.temporal):
                raise MappingError(f"{name} lies below {n} of the {len(lm.temporal)} temporal loops of {lvl.name}",
                                   **where)
    for li, lm in enumerate(mapping.levels):
        total, fx, fy = arch.fanout(li)
        child = arch.below(li).name
        x = math.prod(lp.factor for lp in lm.spatial if lp.axis == "X")
        y = math.prod(lp.factor for lp in lm.spatial if lp.axis == "Y")
        if x * y > total:
            raise MappingError(f"spatial factors {x * y} at {arch.levels[li].name} exceed the fanout "
                               f"{total} to {child}", level=arch.levels[li].name, kind="fanout")
        if x > fx:
            raise MappingError(f"spatial X expansion {x} at {arch.levels[li].name} exceeds the mesh X "
                               f"fanout {fx} to {child}", level=arch.levels[li].name, kind="fanout")
        if y > fy:
            raise MappingError(f"spatial Y expansion {y} at {arch.levels[li].name} exceeds the mesh Y "
                               f"fanout {fy} to {child}", level=arch.levels[li].name, kind="fanout")


def fit_fanouts(arch: Arch, mapping: Mapping) -> Mapping:
    """``mapping`` with each level's spatial factors past its fanout (X, Y or both together) moved,
    a prime at a time from the largest loop of the axis over, into the same dimension's temporal
    loop at that level (appended innermost if it has none): a seed mapped on a neighbouring design
    with more units, made to fit this one. Every level's tile and the factor products are
    unchanged, so only the fanouts differ (a mapping that fits is returned as it is)."""
    levels = list(mapping.levels)
    for li, lm in enumerate(levels):
        total, fx, fy = arch.fanout(li)
        spatial = {(lp.axis, lp.dim): lp.factor for lp in lm.spatial}
        temporal = {lp.dim: lp.factor for lp in lm.temporal}
        extra, moved = [], False                      # (dimensions given a temporal loop here)
        while True:
            x = math.prod(f for (a, _), f in spatial.items() if a == "X")
            y = math.prod(f for (a, _), f in spatial.items() if a == "Y")
            if x <= fx and y <= fy and x * y <= total:
                break
            axis = "X" if x > fx or (y <= fy and x >= y) else "Y"
            key = max((k for k in spatial if k[0] == axis), key=lambda k: spatial[k])
            p = min(q for q in range(2, spatial[key] + 1) if spatial[key] % q == 0)
            spatial[key] //= p
            d, moved = key[1], True
            if d not in temporal:
                extra.append(d)
            temporal[d] = temporal.get(d, 1) * p
        if not moved:
            continue
        levels[li] = dataclasses.replace(
            lm, temporal=tuple(dataclasses.replace(lp, factor=temporal[lp.dim]) for lp in lm.temporal)
            + tuple(Loop(d, temporal[d]) for d in extra),
            spatial=tuple(dataclasses.replace(lp, factor=spatial[lp.axis, lp.dim]) for lp in lm.spatial
                          if spatial[lp.axis, lp.dim] > 1))
    return dataclasses.replace(mapping, levels=tuple(levels))


#: the most operations (the product of a workload's bounds) the model counts: it counts in 64-bit integers
MAX_OPS = 2**62


def ops_problem(bounds) -> str | None:
    """Why a workload's bounds are too large for the model's 64-bit counts, or None."""
    if math.prod(bounds) >= MAX_OPS:
        return f"the bounds multiply to {math.prod(bounds):.3g} operations, more than the model counts (2**62)"
    return None
