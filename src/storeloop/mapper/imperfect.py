"""Imperfect factorization (``storeloop map --imperfect``): a dimension's loops need not divide its
bound. Its outermost loop runs ceil(N / T) times over tiles of T, the product of its loops below,
which need not divide N; the last tile is run full, its extra elements zeros (the padded problem,
as on hardware with fixed tile shapes: its computes and words are counted, an upper bound on
residual-aware models such as Timeloop's Ruby map space, which shorten the last tile).

A mapping of that kind is a perfect mapping of the problem padded to ``P = ceil(N / T) * T`` in
each dimension, so the space is the union over the padded bounds ``P`` of their perfect map
spaces. The padded bounds of N are those with a divisor T in (P - N, N] (:func:`padded_sizes`):
they lie in [N, 2N), and a P without one has only mappings whose outermost loop over the dimension
spends a whole iteration on padding; leaving that iteration out is a mapping of a smaller padded
bound that counts no more of anything (every count is a product of loop bounds), so nothing is lost.

The search (:func:`search`) walks the padded problems in ascending order of a bound that no
padding lowers (the computes over every unit, each tensor's words crossing its backing level once,
and their energy), starting with the problem itself; the walk ends at the first problem that bound
shows cannot beat the best, since every later one's is no lower; a problem whose own lower bounds
(the branch and bound's root bounds) cannot beat it is skipped; every other one is searched by the
branch and bound, which must beat the best so far (``beat``). The certificate is the least of what
each problem's search proved (``floor``)."""

from __future__ import annotations

import dataclasses
import heapq
import itertools
import math
import time
from typing import Iterator

from storeloop.ir import Workload
from storeloop.mapper.objective import Objective
from storeloop.mapper.space import divisors

BARREN = 10_000                   # padded problems weighed, none with a valid mapping, before the walk gives up
WEIGHED = 10_000                  # candidates a problem weighed counts against --budget (building its bounds takes
                                  # milliseconds, some 10,000 candidates' time): a budget ends any walk


def padded_sizes(n: int) -> Iterator[int]:
    """The bounds a dimension of bound ``n`` may be padded to, ascending from ``n``: each P in
    [n, 2n) with a tile T dividing it such that ceil(n / T) * T == P (T in (P - n, n])."""
    for p in range(n, 2 * n):
        if any(p - n < t <= n for t in divisors(p)):
            yield p


class _Sizes:
    """One dimension's padded sizes, generated as far as they are read."""

    def __init__(self, n: int):
        self.gen, self.seen = padded_sizes(n), []

    def get(self, i: int) -> int | None:
        while len(self.seen) <= i:
            nxt = next(self.gen, None)
            if nxt is None:
                return None
            self.seen.append(nxt)
        return self.seen[i]


def padded_problems(bounds: tuple[int, ...], key=math.prod) -> Iterator[tuple[int, ...]]:
    """Every vector of padded bounds, ``bounds`` itself first, in ascending order of ``key`` (ties:
    in index order) where ``key`` does not fall as any one bound grows (then every vector is
    reached from ``bounds`` through vectors of no greater key, so none is popped after a greater
    one). Default: their product."""
    dims = [_Sizes(n) for n in bounds]
    start = (0,) * len(bounds)
    heap, seen = [(key(bounds), start)], {start}
    while heap:
        _, idx = heapq.heappop(heap)
        yield tuple(d.get(i) for d, i in zip(dims, idx))
        for k in range(len(idx)):
            nxt = idx[:k] + (idx[k] + 1,) + idx[k + 1:]
            if nxt not in seen and dims[k].get(nxt[k]) is not None:
                seen.add(nxt)
                heapq.heappush(heap, (key(tuple(d.get(i) for d, i in zip(dims, nxt))), nxt))


def padding_text(padded: dict) -> str:
    """'M 97 -> 98, K 83 -> 84': a report's ``imperfect.padded`` ({dimension: [bound, padded]})."""
    return ", ".join(f"{d} {n} -> {p}" for d, (n, p) in padded.items())


def floor(report) -> tuple:
    """What a problem's search proved no mapping of it beats: its answer when proven optimal, its
    cycles and energy bound when its cycles are proven, else its lower bounds."""
    if report["optimal"]:
        return report["cycles"], report["energy_pJ"]
    if report["cycles_optimal"]:
        return report["cycles"], report["lower_bound_energy_pJ"]
    return report["lower_bound_cycles"], report["lower_bound_energy_pJ"]


def search(workload: Workload, opts, run, bounds_of, cheap, early: list[tuple[int, ...]] = ()) -> tuple:
    """The best mapping over every padded problem (module doc). ``run(workload, opts, beat)`` maps
    one problem and returns (its MapResult, or None when it proved that nothing beats ``beat``;
    what it proved no mapping of it beats, :func:`floor`; the candidates it generated; its stop);
    ``bounds_of(workload)`` gives a problem's (cycles, energy) lower bounds (None when the
    constraints allow it no mapping); ``cheap(bounds)``, (cycles, energy) no mapping of the problem
    padded to ``bounds`` beats, neither falling as any one bound grows (the walk's order and end);
    ``early``: padded bounds to search right after the problem itself (the seeds' problems).
    Returns (the best MapResult, its padded bounds, the floors of every problem, a summary: with
    ``unproven``, the stops of the searches that proved nothing, in order)."""
    obj = Objective(opts.objective)
    t0 = time.monotonic()
    deadline = None if opts.time_limit is None else t0 + opts.time_limit
    spent = generated = 0                 # (against the budget: the candidates, and the problems weighed)
    best, best_bounds, floors = None, workload.bounds, []
    summary = {"problems": 0, "searched": 0, "skipped": 0, "stopped": None, "unproven": {}}
    known: dict = {}

    def bound(b):
        if b not in known:
            known[b] = cheap(b)
        return known[b]

    def key(b):        # the objective's order of the cheap bounds: dominance then holds for every later one
        c, e = bound(b)
        return (c, e) if obj.name in ("delay", "delay,energy") else (obj.value(c, e),)

    def value():
        return best.result.cycles, best.result.energy_pJ

    # the problem itself, the problems of the seeds (out of order: they end no walk), then the walk
    walk = padded_problems(workload.bounds, key)
    order = itertools.chain([(next(walk), True)], ((b, False) for b in dict.fromkeys(early)),
                            ((b, True) for b in walk))
    done = set()
    for bounds, in_order in order:
        if bounds in done:
            continue
        done.add(bounds)
        padded = dataclasses.replace(workload, bounds=bounds)
        if best is not None and obj.dominated(*bound(bounds), value()):
            floors.append(bound(bounds))       # this problem's and, in the walk, every later one's
            if in_order:
                break
            continue
        over = "budget" if opts.budget is not None and spent >= opts.budget else \
            "time-limit" if deadline is not None and time.monotonic() >= deadline else None
        if over is None and best is None and summary["problems"] >= BARREN:
            over = "barren"
        if over is not None:
            floors.append(bound(bounds))
            summary["stopped"] = over
            break
        summary["problems"] += 1
        spent += WEIGHED
        lb = bounds_of(padded)
        if lb is None:                        # the constraints allow this padding no mapping
            summary["skipped"] += 1
            continue
        if best is not None and obj.dominated(lb[0], lb[1], value()):
            floors.append(lb)
            summary["skipped"] += 1
            continue
        left = {}
        if deadline is not None:
            left["time_limit"] = max(deadline - time.monotonic(), 1e-3)
        if opts.budget is not None:
            left["budget"] = max(opts.budget - spent, 1)
        found, proven, candidates, stopped = run(padded, opts.model_copy(update={"imperfect": False, **left}),
                                                 None if best is None else value())
        if stopped not in ("optimal", "energy-gap"):
            summary["unproven"].setdefault(stopped)
        summary["searched"] += 1
        spent += candidates
        generated += candidates
        floors.append(proven)
        if found is not None:
            best, best_bounds = found, bounds
    summary["candidates"], summary["unproven"] = generated, list(summary["unproven"])
    return best, best_bounds, floors, summary
