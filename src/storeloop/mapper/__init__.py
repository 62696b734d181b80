"""The mapper: the best mapping of a workload on an architecture, with a lower-bound certificate.

``map_workload`` merges equivalent dimensions, builds the constrained map space, runs the chosen
search and re-evaluates the winner with the reference model (the result a user gets is the
model's, so ``storeloop model`` on the written mapping prints the identical numbers).
"""

from __future__ import annotations

from dataclasses import dataclass

from storeloop.errors import StoreloopError
from storeloop.mapper.merge import merge, split_mapping
from storeloop.mapper.objective import Objective
from storeloop.mapper.search import Found, branch_and_bound, random_search
from storeloop.mapper.space import Constraints, MapSpace
from storeloop.mapper.tree import Tree
from storeloop.model.evaluate import Result, evaluate
from storeloop.model.fast import FastModel
from storeloop.spec.types import Arch, EnergyTable, Mapping, Workload

ALGORITHMS = ("exhaustive", "random-pruned", "random")


@dataclass
class MapResult:
    mapping: Mapping
    result: Result
    search: dict


def map_workload(arch: Arch, workload: Workload, energy: EnergyTable, *, constraints: Constraints | None = None,
                 objective: str = "delay,energy", algorithm: str = "exhaustive", time_limit: float | None = None,
                 threads: int = 1, seed: int = 0, victory: int = 500, progress: bool = False) -> MapResult:
    constraints = constraints or Constraints()
    area = sum(energy.storage[lvl.name].area_um2 * lvl.instances for lvl in arch.levels) \
        + energy.compute.area_um2 * arch.compute.instances
    obj = Objective(objective, area)
    # a paged level's cost depends on the tile layout (rank order): merge only what keeps it
    paged = any(lvl.page_bytes for lvl in arch.levels)
    merged, members, mcons = merge(workload, constraints, layout=paged)
    space = MapSpace(arch, merged, mcons)
    tree = Tree(space, energy)                          # also gives the lower bound
    if algorithm == "exhaustive":
        found = branch_and_bound(tree, obj, time_limit=time_limit, threads=threads, progress=progress)
    elif algorithm in ("random", "random-pruned"):
        found = random_search(space, FastModel(arch, merged, energy), obj, victory=victory,
                              time_limit=time_limit, seed=seed, pruned=algorithm == "random-pruned")
    else:
        raise StoreloopError(f"unknown search algorithm {algorithm!r}; allowed: {', '.join(ALGORITHMS)}")
    if found.mapping is None:
        raise StoreloopError(_nothing_valid(found, tree))
    mapping = split_mapping(found.mapping, members, workload)
    mapping = Mapping(mapping.levels, name=f"storeloop map ({algorithm}, {obj.name})")
    result = evaluate(arch, workload, mapping, energy)
    return MapResult(mapping, result, _search_json(found, tree, obj, result, algorithm))


def _nothing_valid(found: Found, tree: Tree) -> str:
    s = found.stats
    why = f"stopped early ({found.stopped}); " if found.stopped else ""
    return (f"no valid mapping: {why}{s.get('candidates', 0):,} candidates, "
            f"{s.get('pruned_capacity', 0):,} exceed a level's capacity, "
            f"{s.get('pruned_bound', 0):,} cut by bounds, "
            f"{sum(len(o) for o in tree.space.spatial_options)} spatial splits allowed by the fanouts and constraints. "
            f"Relax the constraints (factors, keep/bypass, minimum utilization) or enlarge the buffers.")


def _search_json(found: Found, tree: Tree, obj: Objective, result: Result, algorithm: str) -> dict:
    lb = tree.global_lb
    gap = (result.cycles - lb) / lb if lb else 0.0
    s = found.stats
    cycles_optimal = result.cycles == lb or (found.complete and algorithm == "exhaustive"
                                              and obj.name in ("delay", "delay,energy"))
    return {
        "algorithm": algorithm,
        "objective": obj.name,
        "candidates": int(s.get("candidates", 0)),
        "valid": int(s.get("complete", 0)),
        "pruned": {"capacity": int(s.get("pruned_capacity", 0)), "bound": int(s.get("pruned_bound", 0))},
        "seconds": round(float(s.get("seconds", 0.0)), 3),
        "lower_bound_cycles": int(lb),
        "lower_bound_parts": {k: int(v) for k, v in tree.bound_parts.items()},
        "gap": gap,
        "cycles_optimal": bool(cycles_optimal),
        "optimal": bool(found.complete and algorithm == "exhaustive"),
        "stopped": found.stopped,
        "improvements": [{"seconds": t, "cycles": int(c), "energy_pJ": float(e)} for t, c, e in s.get("improvements", [])],
    }
