"""The mapper: the best mapping of a workload on an architecture, with a lower-bound certificate.

``map_workload`` merges equivalent dimensions, builds the constrained map space, finds good
incumbents at once (constructive mappings, the user's seeds, a deterministic local search:
:mod:`storeloop.mapper.construct`), runs the chosen search from them until a stop rule fires
(:mod:`storeloop.mapper.search`) and re-evaluates the winner with the reference model (the result
a user gets is the model's, so ``storeloop model`` on the written mapping prints the identical
numbers). The report carries the cycle and energy lower bounds, the gaps and why it stopped.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import sys
import time
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from storeloop.errors import SpecError, StoreloopError
from storeloop.mapper.constraints import arch_constraints
from storeloop.mapper.construct import Searcher, state_of
from storeloop.mapper.merge import merge, split_mapping
from storeloop.mapper.objective import Objective, arch_area_um2
from storeloop.mapper.options import MapperOptions
from storeloop.mapper.options import options as check_options
from storeloop.mapper.search import Found, Goal, branch_and_bound, forked, random_search, tune_malloc
from storeloop.model.heap import single_blas_thread
from storeloop.ir.constraints import Constraints
from storeloop.mapper.space import MapSpace
from storeloop.mapper.tree import Tree, pareto
from storeloop.mapper import imperfect
from storeloop.mapper.uneven import split
from storeloop.mapper.window import surrogate, touched, without_unit_terms
from storeloop.model.costs import layout_of, layout_runs
from storeloop.model.disk import least_seconds_per_word, with_ssd_prices, word_rates
from storeloop.model.evaluate import Result, evaluate, exact_cycles
from storeloop.model.fast import FastModel
from storeloop.model.nest import check_layout, storage_order, tile_extents
from storeloop.ir import Arch, EnergyTable, Mapping, Workload, rank_label
from storeloop.ir.check import padded

DEFAULT_GAP = 1e-3           # energy gap at which a cycle-first search may stop (0.1 %)
LOCAL_BUDGET = 3000          # candidates the local search looks at before the branch and bound
RETRY_SHARE = 0.1            # of a time limit, kept for the retry after a branch and bound it ended
LOCAL_RETRY = 30000          # ... near the goal (_near_goal), and after a branch and bound that stopped without a proof
# ... the patience of that retry without a budget (the default map; the time limit still ends it):
# measured on 12 small convs and conv3_x (docs/windows.md, session 36), 300,000 took conv3_x from
# 772.663 to 721.450 uJ and two others 3.7 and 6.7 % lower; 100,000 changed none of the twelve
# (conv3_x: 735.247 uJ)
PATIENT_RETRY = 300_000


class SearchReport(dict):
    """How the search went: a dict (as ``--json`` prints it) whose keys are also attributes.

    ``algorithm``, ``objective``; ``candidates`` (partial and complete mappings bounded or priced),
    ``valid`` (complete mappings priced), ``pruned`` ({capacity, bound}); ``seconds`` (wall time);
    ``lower_bound_cycles`` with its ``lower_bound_parts`` and ``gap`` (cycles over the bound, minus
    1); ``lower_bound_energy_pJ`` with the map space's ``lower_bound_energy_parts`` and
    ``energy_gap``. A branch and bound that stops before covering its space leaves subtrees open
    whose bounds no mapping in them can beat (:meth:`storeloop.mapper.search._DFS.left_bound`):
    where they are higher, ``lower_bound_parts`` adds them ('subtrees left open') and, once the
    cycles are proven, ``lower_bound_energy_searched_pJ`` (else None) is the least energy a mapping
    at these cycles could have, and ``lower_bound_energy_pJ`` equals it;
    ``cycles_optimal`` and ``optimal`` (proven over the complete map space under the user's
    constraints); ``space`` (``complete``: the proof covers Timeloop's whole map space, with every
    order of the last level's spatial loops; ``user_constraints``); ``stopped`` (optimal,
    energy-gap, converged, budget, time-limit, interrupted);
    ``improvements`` (each new best: seconds, cycles, energy_pJ); and, when they apply,
    ``processes`` (the exhaustive search's), ``local_search`` and ``cycles_rounding``."""

    def __getattr__(self, name: str):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


@dataclass
class MapResult:
    """The best mapping found, its :class:`~storeloop.model.evaluate.Result` and the search report."""

    mapping: Mapping
    result: Result
    search: SearchReport


class MapTimeout(StoreloopError):
    """The time limit ended the search before any valid mapping was found (not: none exists)."""


def laid_out(arch: Arch, workload: Workload) -> Workload:
    """``workload`` with each tensor's ranks in the order the first level stores them (its
    ``layout``): the search prices runs in declared rank order. Inner levels keep the declared
    order, so a layout with another paged level below is refused."""
    if not arch.levels[0].layout:
        return workload
    check_layout(arch, workload)
    inner = next((lvl for lvl in arch.levels[1:] if lvl.page_bytes or lvl.ssd), None)
    if inner is not None:
        file, line, path = arch.levels[0].layout_where
        raise SpecError(f"the mapper prices one layout per tensor, but {inner.name} below {arch.levels[0].name} is "
                        f"paged too and stores the declared order", file=file, line=line, field=path,
                        allowed=f"a layout with no page_size below {arch.levels[0].name}, or no layout")
    tensors = tuple(dataclasses.replace(t, ranks=tuple(t.ranks[i] for i in storage_order(arch, workload, 0, t)))
                    for t in workload.tensors)
    return dataclasses.replace(workload, tensors=tensors)


@single_blas_thread
def map_workload(arch: Arch, workload: Workload, energy: EnergyTable, *, constraints: Constraints | None = None,
                 objective: str = "delay,energy", algorithm: str = "exhaustive", time_limit: float | None = None,
                 budget: int | None = None, threads: int = 1, seed: int = 0, victory: int = 500, progress: bool = False,
                 energy_gap: float | None = None, seeds: list[Mapping] = (), converge: bool = True,
                 search_layout: bool = False, uneven: bool = False, imperfect: bool = False,
                 options: MapperOptions | None = None, beat: tuple[int, float] | None = None) -> MapResult:
    """The best mapping of ``workload`` on ``arch`` priced with ``energy``.

    ``objective``: see :data:`storeloop.mapper.objective.NAMES`. ``time_limit`` (seconds, None:
    none) is a safety net, ``budget`` the candidates the branch and bound may generate (a stop that
    does not depend on the machine's load); the exhaustive search normally stops on a rule (``search['stopped']``):
    proven ``optimal``, ``energy-gap`` (cycles at their lower bound and the objective within
    ``energy_gap``, relative, of its lower bound; 0 demands a full proof; default 0.1 % for the
    cycle-first objectives and 0 for the others, which then return their exact minimum), or
    ``converged`` (off with ``converge=False``). ``seeds``: mappings of ``workload`` (for example
    the best mappings of neighbouring sweep points) re-priced here as starting points. Raises :class:`MapTimeout` when
    the time limit ends the search before any valid mapping, StoreloopError when none exists.
    ``search_layout``: the SSD-backed first level stores each tensor in the rank order (layout)
    that prices it best, searched with the mapping (the arch's own ``layout`` is ignored); the
    report's ``layout`` gives the orders chosen. ``uneven``: each tensor a level keeps is also
    searched at its own position among that level's temporal loops (:mod:`storeloop.mapper.uneven`).
    ``imperfect``: a dimension's loops need not divide its bound; the problem padded to them is
    searched too (:mod:`storeloop.mapper.imperfect`). ``options``: all of the search's options at once, typed
    (:class:`~storeloop.mapper.options.MapperOptions`, as ``storeloop map``, a sweep and a system
    stage give them); then the keywords it holds are not read. ``beat`` (cycles, energy): only a
    mapping strictly better counts; when the search proves there is none, the result's mapping is
    None and its report gives ``floor``, what no mapping beats (the imperfect search's problems)."""
    opts = options if options is not None else check_options(
        objective=objective, algorithm=algorithm, time_limit=time_limit, budget=budget, energy_gap=energy_gap,
        threads=threads, search_layout=search_layout, uneven=uneven, imperfect=imperfect)
    if opts.imperfect:
        return _map_imperfect(arch, workload, energy, constraints, opts, seeds=seeds, converge=converge,
                              progress=progress, seed=seed, victory=victory)
    objective, algorithm, time_limit, threads = opts.objective, opts.algorithm, opts.time_limit, opts.threads
    energy_gap = _energy_gap(opts)
    if opts.search_layout and (arch.levels[0].ssd is None or algorithm != "exhaustive"):
        raise SpecError("a layout is searched on an SSD-backed first level, by the exhaustive search",
                        field="--search-layout", allowed=f"an ssd: block on {arch.levels[0].name} and "
                        f"--algorithm exhaustive, or no --search-layout")
    tune_malloc()
    if opts.uneven and algorithm != "exhaustive":
        raise SpecError("uneven positions are searched by the exhaustive search", field="--uneven",
                        allowed="--algorithm exhaustive, or no --uneven")
    p = _prepare(arch, workload, energy, constraints, opts.search_layout, opts.uneven)
    written, arch, energy, constraints, members, space, tree = \
        p.written, p.arch, p.energy, p.constraints, p.members, p.space, p.tree
    window, free = p.window, opts.search_layout
    obj = Objective(objective, arch_area_um2(arch, energy))
    energy_lb, energy_parts = tree.energy_bound()
    goal = Goal(tree.global_lb, energy_lb, energy_gap, converge, patient=opts.budget is None)
    local, rounded = None, None
    if algorithm == "exhaustive":
        t0 = time.monotonic()
        incumbent, local, rounded = _incumbent(arch, members, energy, space, tree, obj, goal, seeds,
                                               deadline=None if time_limit is None else t0 + time_limit)
        if beat is not None and (incumbent is None or not obj.better(incumbent[0], incumbent[1], beat)):
            incumbent = (beat[0], beat[1], None)          # a virtual incumbent (search.py)
        if incumbent is not None and incumbent[2] is not None and _near_goal(incumbent, goal, obj) and FastModel(arch, tree.priced, energy).simple:
            # close to the goal but short of it: a longer local search from its answer first
            # (cheap on the closed-form model; measured on the thesis sweep, it finds what the
            # branch and bound took seconds to, and the proof then needs no search)
            again, more, r2 = _incumbent(arch, members, energy, space, tree, obj, goal,
                                         list(seeds) + [split_mapping(incumbent[2], members, workload)],
                                         budget=LOCAL_RETRY, deadline=None if time_limit is None else t0 + time_limit)
            local["longer"] = more
            local["seconds"] = round(local["seconds"] + more["seconds"], 3)
            if again is not None and obj.better(again[0], again[1], incumbent[:2]):
                incumbent, rounded = again, r2 if r2 is not None else rounded
        trace = [(local["seconds"], incumbent[0], incumbent[1])] if incumbent and incumbent[2] is not None else []
        # the branch and bound (both walks of a windowed search) ends by a deadline that keeps
        # RETRY_SHARE of the time left after the local search: a search the time limit ends still
        # gets its retry (a time-limited search does no worse than one that converged); a budget
        # bounds the branch and bound, and the retry has its own (LOCAL_RETRY)
        bnb_end = None if time_limit is None else \
            time.monotonic() + max(0.0, time_limit - (time.monotonic() - t0)) * (1 - RETRY_SHARE)

        def remaining() -> float | None:
            return None if bnb_end is None else max(0.0, bnb_end - time.monotonic())

        # a walk projected to end with a proof at its deadline may go on to the time limit's end,
        # the retry's share then unused (_DFS.finishing)
        grace = None if time_limit is None else t0 + time_limit
        found = (_two_walks if window else _one_walk)(tree, obj, remaining, opts.budget, threads=threads,
                                                      progress=progress, incumbent=incumbent, goal=goal, trace=trace,
                                                      grace=grace)
        if found.stopped in ("converged", "time-limit", "budget") and found.mapping is not None and \
                (time_limit is None or time.monotonic() - t0 < time_limit):
            found = _retry(found, arch, workload, members, energy, space, tree, obj, goal, seeds, local,
                           None if time_limit is None else t0 + time_limit, threads)
    elif algorithm in ("random", "random-pruned"):
        found = random_search(space, FastModel(arch, tree.priced, energy), obj, victory=victory,
                              time_limit=time_limit, seed=seed, pruned=algorithm == "random-pruned")
    else:                                   # MapperOptions admits no other algorithm
        raise AssertionError(algorithm)
    if found.mapping is None and beat is not None:
        # nothing beats it: all of the space when the search completed, else its bounds
        floor = beat if found.complete else (tree.global_lb, energy_lb)
        return MapResult(None, None, SearchReport(candidates=int(found.stats.get("candidates", 0)), floor=floor,
                                                  stopped=found.stopped))
    if found.mapping is None:
        if found.stopped == "time-limit":
            raise MapTimeout(f"timeout: the time limit ({time_limit:g} s) ended the search before it found "
                             f"a valid mapping (none is known not to exist); raise the time limit")
        if found.stopped == "budget":
            raise MapTimeout(f"the budget ({opts.budget:,} candidates) ended the search before it found a valid "
                             f"mapping (none is known not to exist); raise the budget")
        raise StoreloopError(_nothing_valid(found, tree))
    mapping = split_mapping(found.mapping, members, workload)
    mapping = Mapping(mapping.levels, name=f"storeloop map ({algorithm}, {obj.name})")
    if free:
        written, result = best_layout(arch, workload, mapping, energy, obj)
    else:
        result = evaluate(written, workload, mapping, energy)
    report = _search_json(found, tree, obj, result, algorithm, energy_lb, energy_parts)
    if algorithm == "exhaustive":
        report["processes"] = threads       # the branch and bound's (search.py: they split its top-level subtrees)
    if any(lvl.ssd is not None for lvl in arch.levels):
        report["ssd"] = {"streams": [{"level": lr.name, "tensor": s.tensor, "direction": s.direction, "words": s.words,
                                      "request_bytes": s.stream.request_bytes, "pattern": s.stream.pattern,
                                      "queue_depth": s.stream.queue_depth, "bandwidth_Bps": s.bandwidth_Bps,
                                      "bottleneck": s.bottleneck}
                                     for lr in result.levels for s in lr.streams]}
    # what the certificate covers: every mapping of Timeloop's map space (factorizations, loop
    # orders, spatial X/Y assignments and orders, keep/bypass), under the user's constraints if any
    report["space"] = {"complete": True, "user_constraints": constraints != Constraints()}
    if window:                              # bounded on the plain surrogate, leaves priced by the model
        report["space"]["windows"] = ("every loop order and every spatial order at every level; bounds from "
                                      "the surrogate without the windowed ranks (mapper/window.py), raised by "
                                      "the windowed tensors' true tiles, slides and wraps (docs/bounds.md)")
        report["exact_leaves"] = int(found.stats.get("exact", 0))
        report["floored_leaves"] = int(found.stats.get("floored", 0))   # bounded out by their windows' sends
        report["floored_nodes"] = int(found.stats.get("floored_nodes", 0))   # ... every leaf of a node at once
        report["priced_out_leaves"] = int(found.stats.get("priced_out", 0))   # ... by their own surrogate price
        # top-level subtrees the walk over every order skipped: its first walk had settled them
        report["settled_subtrees"] = int(found.stats.get("settled", 0))
        report["bound_violations"] = int(found.stats.get("bound_violations", 0))
    if tree.split is not None:              # and each tensor at its own loop position on the split levels
        report["space"]["uneven"] = (f"each tensor kept at {', '.join(tree.split.split_names) or '(no level)'} at any "
                                     f"position among that level's temporal loops (one loop per dimension a level)")
    if free:                                # and every rank order of each tensor on the SSD level
        report["space"]["layouts"] = f"every rank order of each tensor on {written.levels[0].name}"
        report["layout"] = {k: list(v) for k, v in written.levels[0].layout.items()}
    if rounded is not None and result.cycles == rounded:
        # the exact time equals the bound; Timeloop's floating-point throttling adds the cycle
        report["cycles_optimal"] = True
        report["cycles_rounding"] = 1
    report["local_search"] = local
    if local is not None:                   # the whole search: local search and branch and bound
        report["seconds"] = round(local["seconds"] + report["seconds"], 3)
    return MapResult(mapping, result, report)



def _energy_gap(opts: MapperOptions) -> float:
    """The energy gap a search may stop at: the given one, else 0.1 % for the cycle-first
    objectives and 0 (their exact minimum) for the others."""
    if opts.energy_gap is not None:
        return opts.energy_gap
    return DEFAULT_GAP if opts.objective in ("delay,energy", "delay") else 0.0


def _map_imperfect(arch: Arch, workload: Workload, energy: EnergyTable, constraints: Constraints | None,
                   opts: MapperOptions, **keywords) -> MapResult:
    """``map_workload`` over every padded problem (:mod:`storeloop.mapper.imperfect`): the best
    mapping, marked imperfect where it runs a padded problem, with the certificate of the walk."""
    if opts.algorithm != "exhaustive":
        raise SpecError("imperfect factorizations are searched by the exhaustive search", field="--imperfect",
                        allowed="--algorithm exhaustive, or no --imperfect")
    t0 = time.monotonic()
    progress = keywords.pop("progress")
    seeds = [(padded(workload, m).bounds, dataclasses.replace(m, imperfect=False)) for m in keywords.pop("seeds")]

    def tree_of(problem: Workload) -> Tree | None:        # (None: the constraints allow it no mapping)
        if infeasible(arch, problem, _constraints(arch, problem, constraints)):
            return None
        return _prepare(arch, problem, energy, constraints, opts.search_layout, opts.uneven).tree

    tree = tree_of(workload)        # (None: the walk's bound is the computes' alone)

    def bounds_of(problem: Workload):
        t = tree if problem.bounds == workload.bounds else tree_of(problem)
        return None if t is None else (t.global_lb, t.energy_bound()[0])

    def cheap(bounds: tuple[int, ...]) -> tuple[int, float]:
        """(cycles, energy) below every mapping of the problem padded to ``bounds``, neither
        falling as a bound grows: its computes over every unit, and its tensors' words (those its
        computes read) crossing their backing levels once, at their ports (an SSD's: its peak
        streams) and energies."""
        macs = math.prod(bounds)
        cycles = math.ceil(Fraction(macs) * Fraction(arch.compute.cycles_per_op) / arch.compute.instances)
        pj = macs * energy.compute.read_pJ
        if tree is not None:
            lean = without_unit_terms(dataclasses.replace(workload, bounds=bounds))
            sizes = [touched(lean, t) for t in range(len(workload.tensors))]
            cycles = max([cycles] + list(tree.compulsory(sizes).values()))
            top = arch.levels[0]
            if top.ssd is not None and arch.clock_hz:     # its tensors' words cross the SSD once, at best at its peak
                read, write = least_seconds_per_word(top.ssd, top.word_bits)
                secs = sum(sizes[t] * (write if tree.rw[t] else read) for t in range(len(sizes)) if tree.back[t] == 0)
                cycles = max(cycles, math.floor(secs * arch.clock_hz * (1 - 1e-9)))
            pj += sum(float((tree.wpw if tree.rw[t] else tree.rpw)[tree.back[t]]) * sizes[t] for t in range(len(sizes)))
        return cycles, pj * (1 - 1e-9)

    def run(problem: Workload, sub: MapperOptions, beat):
        first = problem.bounds == workload.bounds       # (the progress bar: the problem's own)
        mine = [m for b, m in seeds if b == problem.bounds]
        if progress and not first and sys.stderr.isatty():
            sys.stderr.write(f"\npadded problem " + " ".join(f"{d}={b}" for d, b in zip(problem.dims, problem.bounds))
                             + (f", to beat {beat[0]:,} cycles, {beat[1] / 1e12:.6g} J" if beat else "") + "\n")
        try:
            r = map_workload(arch, problem, energy, constraints=constraints, options=sub, beat=beat,
                             seeds=mine, progress=progress, **keywords)
        except (MapTimeout, SpecError):
            raise
        except StoreloopError:              # the search covered the problem and found no valid mapping
            return None, (math.inf, math.inf), 0, "optimal"
        if r.mapping is None:
            return None, r.search["floor"], r.search["candidates"], r.search["stopped"]
        return r, imperfect.floor({**r.search, "cycles": r.result.cycles, "energy_pJ": r.result.energy_pJ}), \
            r.search["candidates"], r.search["stopped"]

    best, bounds, floors, walk = imperfect.search(workload, opts, run, bounds_of, cheap,
                                                  early=[b for b, _ in seeds])
    if best is None:
        why = f"no valid mapping of {workload.name} or of the {walk['problems'] - 1} padded problems weighed after it"
        if walk["stopped"] in ("budget", "time-limit"):
            raise MapTimeout(f"the {walk['stopped']} ended the walk over the padded problems: {why}")
        raise StoreloopError(why + (f" ({walk['skipped']} allow none under the constraints)" if walk["skipped"] else "")
                             + ("; the walk stops after that many" if walk["stopped"] == "barren" else ""))
    obj = Objective(opts.objective)
    gap = _energy_gap(opts)
    value = (best.result.cycles, best.result.energy_pJ)
    clb = min([value[0]] + [f[0] for f in floors])
    elb = min([value[1]] + [f[1] for f in floors if not obj.lexicographic or f[0] <= value[0]])
    if obj.lexicographic or obj.name == "delay":
        why = obj.proven(value[0], value[1], clb, elb, gap)
    else:                                   # the least objective any problem's floor allows
        least = min([obj.value(*value)] + [obj.value(*f) for f in floors])
        why = "optimal" if obj.value(*value) <= least else \
            "energy-gap" if obj.value(*value) <= least * (1 + gap) else None
    report = SearchReport(best.search)
    report["candidates"] = walk.pop("candidates")
    # unproven: the walk's own stop, else the first stop of a problem's search that proved nothing
    # (each one proved within its own bounds: the walk's bounds did not meet the gap)
    report["stopped"] = why or walk["stopped"] or next(iter(walk["unproven"]), "converged")
    report["optimal"] = why == "optimal"
    report["cycles_optimal"] = clb >= value[0]
    report["lower_bound_cycles"] = int(clb)
    report["lower_bound_parts"] = {"the least over the padded problems": int(clb)}
    report["gap"] = (value[0] - clb) / clb if clb else 0.0
    report["lower_bound_energy_pJ"] = float(elb)
    at = obj.lexicographic and clb >= value[0]      # (then the energy bound is of the problems at these cycles)
    report["lower_bound_energy_parts"] = {"the least over the padded problems" + (" at these cycles" if at else ""):
                                          float(elb)}
    report["lower_bound_energy_searched_pJ"] = None
    report["energy_gap"] = (value[1] - elb) / elb if elb else 0.0
    report["seconds"] = round(time.monotonic() - t0, 3)
    report["space"] = {**best.search["space"], "imperfect": (
        "every padded problem: each dimension's loops multiply to ceil(N/T)*T for a tile T of its loops "
        "below the outermost, the last tile run full (mapper/imperfect.py)")}
    report["imperfect"] = {**walk, "padded": {d: [n, p] for d, n, p in zip(workload.dims, workload.bounds, bounds)
                                              if n != p}}
    if bounds == workload.bounds:
        return MapResult(best.mapping, best.result, report)
    return MapResult(dataclasses.replace(best.mapping, imperfect=True),
                     dataclasses.replace(best.result, padding=best.result.computes - workload.macs), report)


@dataclass
class _Prepared:
    written: Arch                 # the arch as given (its layout prices the result)
    arch: Arch                    # the arch the search sees (tensors in storage order, no layout)
    energy: EnergyTable           # with an SSD-backed level's least energy per word
    constraints: Constraints
    members: list                 # merged dimensions: the workload's dimensions each stands for
    space: MapSpace
    tree: Tree                    # also the lower bounds
    window: bool                  # searched on the plain surrogate (some rank is a window or a stride)


def _constraints(arch: Arch, workload: Workload, constraints: Constraints | None) -> Constraints:
    """The constraints given, else a Timeloop v0.4 arch's own per-node constraints, if any."""
    return constraints if constraints is not None else arch_constraints(arch, workload) or Constraints()


def _prepare(arch: Arch, workload: Workload, energy: EnergyTable, constraints: Constraints | None,
             free: bool, uneven: bool = False) -> _Prepared:
    """The map space and tree of ``workload`` on ``arch`` (refusing what the mapper cannot search)."""
    # a paged level's cost depends on the tile layout (rank order)
    paged = [lvl for lvl in arch.levels if lvl.page_bytes or lvl.ssd]
    if workload.windowed and paged:
        file, line, path = paged[0].where or (None, None, f"levels.{paged[0].name}")
        raise SpecError(f"the mapper searches sliding windows (workload {workload.name!r}) on archs without paged "
                        f"or SSD-backed levels; {paged[0].name} is one. Evaluate fixed mappings of it with "
                        f"'storeloop model'", file=file, line=line, field=path,
                        allowed="no page_size or ssd: block, or a workload with plain indices")
    energy = with_ssd_prices(arch, energy)       # an SSD-backed level: its least energy per word bounds its tensors
    constraints = _constraints(arch, workload, constraints)
    problem = infeasible(arch, workload, constraints)
    if problem:
        raise SpecError(f"no mapping can meet the constraints: {problem}", file=None if constraints.source == "none"
                        else constraints.source, allowed="constraints within the fanouts and bounds")
    # the search sees the tensors in storage order; the result is priced on the arch as written
    written, arch = arch, dataclasses.replace(arch, levels=tuple(dataclasses.replace(lvl, layout={})
                                                                  for lvl in arch.levels))
    # merge only what keeps a paged level's layout, and nothing where every layout is searched or a
    # fanout has two axes (a merged dimension has one spatial loop a level, so it could not put its
    # members along X and Y)
    lean = without_unit_terms(workload)          # a 1x1 convolution is searched as a plain einsum
    window, meshed = lean.windowed, any(arch.fanout(L)[2] > 1 for L in range(len(arch.levels)))
    if window:       # bounded on its plain surrogate; the leaves that could win priced by the model
        merged, members, mcons = surrogate(lean), [[d] for d in range(len(workload.dims))], constraints
    else:
        merged, members, mcons = merge(lean if free else without_unit_terms(laid_out(written, workload)),
                                       constraints, layout="none" if free or meshed else bool(paged))
    space = MapSpace(arch, merged, mcons, exact=lean if window else None)
    if uneven:       # the tree searches the split arch (mapper/uneven.py); the local search the even space
        sp = split(arch, energy, mcons, len(workload.tensors) + 1)
        tree = Tree(MapSpace(sp.virtual, merged, sp.constraints, exact=lean if window else None), sp.energy,
                    free_layout=free, exact=lean if window else None, split=sp)
    else:
        tree = Tree(space, energy, free_layout=free, exact=lean if window else None)
    return _Prepared(written, arch, energy, constraints, members, space, tree, window)


def lower_bounds(arch: Arch, workload: Workload, energy: EnergyTable,
                 constraints: Constraints | None = None) -> tuple[int, float]:
    """The cycles and energy (pJ) no mapping of ``workload`` on ``arch`` can beat: the bounds
    :func:`map_workload` certifies against, without a search."""
    tree = _prepare(arch, workload, energy, constraints, False).tree
    return tree.global_lb, tree.energy_bound()[0]


def best_layout(arch: Arch, workload: Workload, mapping: Mapping, energy: EnergyTable,
                obj: Objective) -> tuple[Arch, Result]:
    """``arch`` with the first (SSD-backed) level's layout that prices ``mapping`` best, and that
    price: per tensor, the runs any rank order gives its child tiles
    (:func:`storeloop.model.costs.layout_runs`) cut to those no other beats in both seconds and
    energy, and every combination of them priced by the model."""
    lvl = arch.levels[0]
    words = {(s.tensor, s.direction): s.words for s in evaluate(arch, workload, mapping, energy).levels[0].streams}
    fronts = []
    for (_, name), (part, full) in tile_extents(arch, workload, mapping, [0]).items():
        t = workload.tensor(name)
        runs, keys = layout_runs(np.array([part]), full)
        cols = [c for c in range(runs.shape[1]) if runs[0, c]]
        cost = {}
        for c in cols:                      # one layout per distinct run
            secs = pj = 0.0
            for direction in ("read", "write"):
                s, e = word_rates(lvl, int(runs[0, c]), math.prod(part), direction == "read")
                n = words.get((name, direction), 0)
                secs, pj = secs + n * s, pj + n * e
            cost.setdefault(int(runs[0, c]), (secs, pj, keys[c]))
        pts = list(cost.values())
        front = pareto(np.array([p[0] for p in pts]), np.array([p[1] for p in pts]))
        labels = [rank_label(r, workload.dims) for r in t.ranks]
        fronts.append([(name, tuple(labels[i] for i in layout_of(*pts[i][2], len(t.ranks)))) for i in front])
    best = None
    for combo in itertools.product(*fronts):
        laid = dataclasses.replace(arch, levels=(dataclasses.replace(lvl, layout=dict(combo)),) + arch.levels[1:])
        r = evaluate(laid, workload, mapping, energy)
        if best is None or obj.better(r.cycles, r.energy_pJ, (best[1].cycles, best[1].energy_pJ)):
            best = (laid, r)
    return best


FIRST_ORDERS = 0.8        # of a windowed search's time and budget, for the walk over first orders


def _one_walk(tree, obj, remaining, budget, **walk) -> Found:
    """The branch and bound over the whole space, with the time ``remaining()`` and ``budget``."""
    return branch_and_bound(tree, obj, time_limit=remaining(), budget=budget, **walk)


def _two_walks(tree, obj, remaining, budget, **walk) -> Found:
    """A windowed search: first a walk with each exact leaf priced in the first of the temporal
    orders it stands for only (``Tree.first_orders``), with :data:`FIRST_ORDERS` of the time and
    of the budget: good mappings early. It covers less than the map space, so its best is final
    only where the goal's bounds alone prove it (or Ctrl-C ended it); else the walk over the whole
    space (:func:`_one_walk`) starts from its best, with the time left and the whole budget (each
    walk is bounded by it, so a budget that let the full walk end with a proof still does).
    The full walk skips the top-level subtrees the first walked from a mapping in hand without
    a leaf whose other orders could still win (``Tree.settled``): no mapping there beats the best.
    Without a time limit or a budget, the full walk alone."""
    time_limit = remaining()
    if time_limit is None and budget is None:
        return _one_walk(tree, obj, remaining, budget, **walk)
    tree.first_orders, tree.settled = True, set()
    try:
        first = branch_and_bound(tree, obj, time_limit=None if time_limit is None else time_limit * FIRST_ORDERS,
                                 budget=None if budget is None else max(1, int(budget * FIRST_ORDERS)),
                                 **dict(walk, grace=None))      # (its end proves nothing: no grace)
    finally:
        tree.first_orders = False
    try:
        return _full_walk(tree, obj, remaining, budget, first, walk)
    finally:
        tree.settled = set()


def _full_walk(tree, obj, remaining, budget, first: Found, walk: dict) -> Found:
    """:func:`_two_walks`' second walk, after ``first``."""
    if first.mapping is not None:
        if first.stopped == walk["goal"].reached(obj, first.cycles, first.energy_pJ):
            return first
        walk.update(incumbent=(first.cycles, first.energy_pJ, first.mapping), trace=first.stats["improvements"])
    if first.stopped == "interrupted":
        return first
    known = len(walk.get("trace") or ())
    found = _one_walk(tree, obj, remaining, budget, **walk)
    # the search's time is both walks' (its improvements: from the first walk's start)
    spent = first.stats["seconds"]
    found.stats["seconds"] += spent
    found.stats["improvements"] = found.stats["improvements"][:known] + [
        (round(t + spent, 3), *rest) for t, *rest in found.stats["improvements"][known:]]
    return found


def _retry(found: Found, arch, workload, members, energy, space, tree, obj, goal, seeds, local,
           deadline: float | None, threads: int = 1) -> Found:
    """After a branch and bound that stopped without a proof ('converged', 'budget', or
    'time-limit' with the share of the time kept for this): a longer
    local search from the constructive starts, the seeds and the branch and bound's best (it
    stops as soon as the goal is proven). Its mapping replaces the branch and bound's when
    better, and the stop becomes the goal's when it reaches it. With ``threads`` processes, each
    runs that search with its own seed of the kicks (0, 1, ...), and the best wins (ties: the
    lowest seed's, so the answer does not depend on which ends first)."""
    best = split_mapping(found.mapping, members, workload)

    def one(seed: int) -> tuple:
        return _incumbent(arch, members, energy, space, tree, obj, goal, list(seeds) + [best],
                          budget=None if goal.patient else LOCAL_RETRY,
                          patience=PATIENT_RETRY if goal.patient else None, deadline=deadline, exchange=True,
                          seed=seed)

    try:
        if threads <= 1:
            again, more, _ = one(0)
        else:
            outs = forked(one, range(threads))
            again, more, rounded = outs[0]
            for a, m, r in outs[1:]:
                if a is not None and (again is None or obj.better(a[0], a[1], again[:2])):
                    again, more, rounded = a, m, r
            if rounded is not None:         # (what the winner's process set: at the bound but for rounding)
                goal.cycles_lb = rounded
            more = dict(more, evaluations=sum(m["evaluations"] for _, m, _ in outs), processes=threads,
                        seconds=max(m["seconds"] for _, m, _ in outs))
    except KeyboardInterrupt:               # Ctrl-C: the branch and bound's answer stands
        local["retry"] = {"interrupted": True}
        found.stopped, found.complete = "interrupted", False
        return found
    local["retry"] = more
    local["seconds"] = round(local["seconds"] + more["seconds"], 3)
    if again is None or not obj.better(again[0], again[1], (found.cycles, found.energy_pJ)):
        return found
    trace = found.stats["improvements"] + [(round(found.stats["seconds"] + more["seconds"], 3), again[0], again[1])]
    why = goal.reached(obj, again[0], again[1])
    found.cycles, found.energy_pJ, found.mapping = again[0], again[1], again[2]
    found.stats["improvements"] = trace
    if why:
        found.stopped, found.complete = why, why == "optimal"
    return found


NEAR_GOAL = 10           # a local search's answer within this many energy gaps of the bound is "near"


def _near_goal(incumbent, goal: Goal, obj: Objective) -> bool:
    """A cycle-first answer at the cycle bound whose energy misses the gap by less than
    :data:`NEAR_GOAL` times it."""
    return bool(incumbent) and obj.lexicographic and goal.energy_gap > 0 and incumbent[0] <= goal.cycles_lb \
        and goal.reached(obj, incumbent[0], incumbent[1]) is None \
        and incumbent[1] <= goal.energy_lb * (1 + NEAR_GOAL * goal.energy_gap)


def _incumbent(arch, members, energy, space, tree, obj, goal, seeds, budget: int | None = LOCAL_BUDGET,
               patience: int | None = None,
               deadline: float | None = None, exchange: bool = False, seed: int = 0):
    """The local search's best mapping as (cycles, energy, merged Mapping) or None, its report,
    and the cycle count that is at the bound up to floating-point rounding (or None)."""
    t0 = time.monotonic()
    searcher = Searcher(space, FastModel(arch, tree.priced, energy), obj)
    searcher.exchange = exchange
    seeded = [s for s in (state_of(m, members, space) for m in seeds) if s is not None]

    def good(c):
        return c[0] == 0 and goal.reached(obj, c[-2], c[-1]) is not None

    # a seed that already reaches the goal (a sweep's neighbour, often) is the answer as it is
    ready = sorted((c, i) for i, c in enumerate(searcher.costs(seeded)) if good(c))
    if ready:
        state, cost = seeded[ready[0][1]], ready[0][0]
    else:
        state, cost = searcher.search(searcher.starts() + seeded, budget, good, seed=seed, deadline=deadline,
                                      patience=patience,
                                      spread=searcher.window_starts() if exchange else [])
    incumbent = (int(cost[-2]), float(cost[-1]), searcher.mapping(state)) if cost[0] == 0 else None
    rounded = None
    if incumbent and incumbent[0] == tree.global_lb + 1 and \
            exact_cycles(evaluate(arch, tree.priced, incumbent[2], energy), arch) <= tree.global_lb:
        goal.cycles_lb = rounded = tree.global_lb + 1     # at the bound but for float rounding
    local = {"evaluations": searcher.evaluations, "seconds": round(time.monotonic() - t0, 3), "seeds": len(seeds),
             "cycles": incumbent[0] if incumbent else None, "energy_pJ": incumbent[1] if incumbent else None,
             "time_limit": deadline is not None and time.monotonic() >= deadline}    # it ended the search
    return incumbent, local, rounded


def _nothing_valid(found: Found, tree: Tree) -> str:
    s = found.stats
    why = f"stopped early ({found.stopped}); " if not found.complete else ""
    return (f"no valid mapping: {why}{s.get('candidates', 0):,} candidates, "
            f"{s.get('pruned_capacity', 0):,} exceed a level's capacity, "
            f"{s.get('pruned_bound', 0):,} cut by bounds, "
            f"{sum(len(o) for o in tree.space.spatial_options)} spatial splits allowed by the fanouts and constraints. "
            f"Relax the constraints (factors, keep/bypass, minimum utilization) or enlarge the buffers.")


def infeasible(arch: Arch, workload: Workload, constraints: Constraints) -> str | None:
    """Why no mapping can meet ``constraints``, found before any search (or None): spatial factors
    that exceed a level's fanout (or its X or Y extent), and factors of a dimension whose smallest
    allowed values multiply past its bound or whose fixed values do not divide it."""
    for L, c in sorted(constraints.levels.items()):
        total, fx, fy = arch.fanout(L)
        below = arch.below(L).name
        lo_x = math.prod(lo for lo, _ in c.spatial_x.values())
        lo_y = math.prod(lo for lo, _ in c.spatial_y.values())
        lo_xy = math.prod(lo for lo, _ in c.spatial.values())
        if lo_x > fx or lo_y > fy or lo_x * lo_y * lo_xy > total:
            return (f"spatial factors of at least {lo_x} (X) x {lo_y} (Y) x {lo_xy} (either axis) at "
                    f"{arch.levels[L].name}, whose fanout to {below} is {total} ({fx} x {fy})")
    for d, name in enumerate(workload.dims):
        least, fixed = 1, 1
        for c in constraints.levels.values():
            for ranges in (c.temporal, c.spatial_x, c.spatial_y, c.spatial):
                if d in ranges:
                    lo, hi = ranges[d]
                    least *= lo
                    fixed *= lo if lo == hi else 1
        if least > workload.bounds[d] or workload.bounds[d] % fixed:
            return (f"the factors of {name} must multiply to at least {least}" if least > workload.bounds[d] else
                    f"the fixed factors of {name} multiply to {fixed}") + f", and its bound is {workload.bounds[d]}"
    # a level that must keep tensors holds at least their smallest tiles: the least factors allowed
    # at it and below (a level's tile spans its own loops, temporal and spatial, and all below)
    for L, c in sorted(constraints.levels.items()):
        size = arch.levels[L].size_words
        if not c.keep or size is None:
            continue
        least = [1] * len(workload.dims)
        for L2 in range(L, len(arch.levels)):
            c2 = constraints.levels.get(L2)
            for ranges in (c2.temporal, c2.spatial_x, c2.spatial_y, c2.spatial) if c2 is not None else ():
                for d, (lo, _) in ranges.items():
                    least[d] *= lo
        tiles = {t.name: math.prod(least[d] for d in {d for rank in t.ranks for d, _ in rank})
                 for t in workload.tensors if t.name in c.keep}
        if sum(tiles.values()) > size:
            factors = ", ".join(f"{workload.dims[d]}>={f}" for d, f in enumerate(least) if f > 1)
            return (f"{arch.levels[L].name} must keep {', '.join(sorted(tiles))}, whose smallest tiles under the "
                    f"constraints ({factors} at and below it) take {sum(tiles.values())} words; it holds {size}")
    return None


def _search_json(found: Found, tree: Tree, obj: Objective, result: Result, algorithm: str,
                 energy_lb: float, energy_parts: dict) -> SearchReport:
    s = found.stats
    # a sliding window's surrogate priced above the model would void the proof (never seen: the
    # window oracle checks the inequality mapping by mapping); the report then claims nothing
    sound = not s.get("bound_violations")
    lb, parts = tree.global_lb, {k: int(v) for k, v in tree.bound_parts.items()}
    left = found.left if sound and found.left is not None else None
    if left is not None and left[0] > lb:     # what the search left open cannot be faster
        lb = parts["subtrees left open"] = min(int(left[0]), result.cycles)
    gap = (result.cycles - lb) / lb if lb else 0.0
    cycles_optimal = result.cycles <= lb or (found.complete and algorithm == "exhaustive" and sound
                                             and obj.name in ("delay", "delay,energy"))
    # the least energy a mapping at these cycles could have, from what was left (where it is tighter)
    searched = None
    if left is not None and cycles_optimal and min(left[1], result.energy_pJ) > energy_lb * (1 + 1e-6):
        searched = energy_lb = min(float(left[1]), result.energy_pJ)
    return SearchReport({
        "algorithm": algorithm,
        "objective": obj.name,
        "candidates": int(s.get("candidates", 0)),
        "valid": int(s.get("complete", 0)),
        "pruned": {"capacity": int(s.get("pruned_capacity", 0)), "bound": int(s.get("pruned_bound", 0))},
        "seconds": round(float(s.get("seconds", 0.0)), 3),
        "lower_bound_cycles": int(lb),
        "lower_bound_parts": parts,
        "gap": gap,
        "lower_bound_energy_pJ": float(energy_lb),
        "lower_bound_energy_parts": {k: float(v) for k, v in energy_parts.items()},
        "lower_bound_energy_searched_pJ": searched,
        "energy_gap": (result.energy_pJ - energy_lb) / energy_lb if energy_lb else 0.0,
        "cycles_optimal": bool(cycles_optimal),
        "optimal": bool(found.complete and algorithm == "exhaustive" and sound),
        "stopped": found.stopped,
        "improvements": [{"seconds": t, "cycles": int(c), "energy_pJ": float(e)} for t, c, e in s.get("improvements", [])],
    })
