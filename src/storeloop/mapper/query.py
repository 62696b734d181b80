"""A whole query (:mod:`storeloop.ir.query`, read by :mod:`storeloop.formats.query`): its einsums mapped one after another.

Each einsum runs with its tensors at one *home* level: the arch from that level down (the home
keeps them whole, as the first level backs every tensor of a single einsum), mapped and proven by
:func:`storeloop.mapper.map_workload`, so the first einsum at the first level is exactly today's
single-einsum result. A home is a level of one instance that holds the einsum's tensors whole
(an unbounded DRAM, or an SRAM where they fit) and the level of every input it reads that sits at
a fixed level. A tensor written at one home and read at another is *moved* between them: read in
whole at the writer's home and written at the reader's (for a decomposed reader, its words), as one
stream -- the slower side sets its cycles (an SSD-backed level: the SSD model's sequential stream).

The tensor an einsum writes has a home too: its einsum's home, or a level further down that holds
it whole (of one instance), where the einsum's mapping keeps it and every level above bypasses it
-- the first dimension's ciphertexts accumulated in DRAM while the database streams from the SSD.
Its reader then finds it there, or it is moved from there; a reader whose home is above that level
may also read it in place (its mapping keeps it there and bypasses it above). The home's capacity
given to an einsum's mapping is less the whole size of each tensor living there (the tensor's tile
there is counted again: a bound that is tight for an unbounded level).

The einsums run one after another: the query's cycles and energy are the sums of the einsums' and
the moves'. Every combination of homes (einsums', outputs', inputs read in place) is covered by a
branch and bound: bounded first by its einsums' lower bounds and its moves, mapped only where that
bound could beat the best so far. Since each einsum's mapping is its own best (lexicographic delay
then energy, or either alone), the sum of the best is the best sum, so the query is proven optimal
over its homes when every einsum mapped is. Not modelled here: tile-level fusion of two einsums (an
intermediate that never exists whole: it pays off only at a level too small for the whole tensor,
as DRAM is not on OnionChopper), overlap between einsums, and the decomposition's own work.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import sys
from dataclasses import dataclass

import numpy as np

from storeloop.errors import SpecError
from storeloop.mapper import MapResult, lower_bounds, map_workload
from storeloop.mapper.objective import Objective, arch_area_um2
from storeloop.ir.constraints import Constraints, LevelConstraint
from storeloop.model import disk
from storeloop.ir.query import Query
from storeloop.mapper.options import MapperOptions
from storeloop.ir import Arch, EnergyTable


@dataclass(frozen=True)
class Move:
    tensor: str
    source: str             # level it is read from
    target: str             # level it is written to
    words_read: int
    words_written: int
    cycles: int
    energy_pJ: float


@dataclass
class QueryResult:
    query: Query
    homes: list[str]                       # per einsum
    parts: list[MapResult]                 # per einsum
    moves: list[Move]
    combinations: int                      # combinations of homes, each mapped or ruled out by its bounds
    open_homes: list[list[str]] = dataclasses.field(default_factory=list)   # combinations a bound cannot rule out
    output_homes: list[str] = dataclasses.field(default_factory=list)      # per einsum: where its output lives
    in_place: list[dict[str, str]] = dataclasses.field(default_factory=list)   # per einsum: query tensor -> level
                                                                             # of the inputs it reads below its home
    mapped: int = 0                                                        # einsum mappings searched
    cycles_lb: float = 0                   # no combination of homes takes fewer cycles
    energy_lb_pJ: float = 0                # ... nor less energy at the best's cycles (or fewer)

    @property
    def cycles(self) -> int:
        return sum(p.result.cycles for p in self.parts) + sum(m.cycles for m in self.moves)

    @property
    def energy_pJ(self) -> float:
        return sum(p.result.energy_pJ for p in self.parts) + sum(m.energy_pJ for m in self.moves)

    @property
    def optimal(self) -> bool:
        return all(p.search["optimal"] for p in self.parts) and not self.open_homes

    @property
    def claim(self) -> str:
        """What the search proves of the whole query: from its einsums' stops and the lower bounds
        (``cycles_lb``, ``energy_lb_pJ``) of every combination of homes."""
        stops = {p.search["stopped"] for p in self.parts}
        homes = (f"over {self.combinations} combinations of homes ({self.mapped} einsum searches; the other "
                 f"combinations ruled out by lower bounds)")
        if self.optimal:
            return f"proven optimal {homes} (every einsum proven)"
        if self.cycles_lb >= self.cycles:
            gap = self.energy_pJ / self.energy_lb_pJ - 1 if self.energy_lb_pJ else math.inf
            return (f"cycles proven optimal {homes}; energy within {100 * gap:.3g} % of the least at these cycles "
                    f"(einsums stopped: {', '.join(sorted(stops))})")
        if self.open_homes:
            return (f"not proven: {len(self.open_homes)} other combination(s) of homes might be better (their "
                    f"searches stopped early), e.g. {', '.join(self.open_homes[0])}")
        return f"not proven (einsums stopped: {', '.join(sorted(stops))}); homes: {self.combinations} combinations"

    def to_dict(self, arch: Arch) -> dict:
        clock = arch.clock_hz
        return {"query": self.query.name, "cycles": self.cycles, "time_s": self.cycles / clock if clock else None,
                "energy_J": self.energy_pJ / 1e12, "optimal": self.optimal, "claim": self.claim,
                "home_combinations": self.combinations, "einsums_mapped": self.mapped,
                "lower_bound_cycles": self.cycles_lb, "lower_bound_energy_J": self.energy_lb_pJ / 1e12,
                "einsums": [{"name": e.workload.name, "home": h, "output_home": o, "in_place": r, "macs": e.workload.macs,
                             "cycles": p.result.cycles,
                             "energy_J": p.result.energy_pJ / 1e12, "optimal": bool(p.search["optimal"]),
                             "cycles_optimal": bool(p.search["cycles_optimal"]), "energy_gap": p.search["energy_gap"],
                             "stopped": p.search["stopped"], "bound_by": p.result.bound_by}
                            for e, h, o, r, p in zip(self.query.einsums, self.homes, self.output_homes or self.homes,
                                                     self.in_place or [{} for _ in self.parts], self.parts)],
                "moves": [dataclasses.asdict(m) for m in self.moves]}


def homes(arch: Arch, query: Query, i: int) -> list[int]:
    """Levels einsum ``i`` may live in: one instance, its tensors whole, every fixed input it reads."""
    e = query.einsums[i]
    need = sum(e.workload.tensor_elements(t) for t in e.workload.tensors)
    names = [lvl.name for lvl in arch.levels]
    fixed = set()
    for local, (g, _) in e.binds.items():
        at = query.inputs.get(g)
        if at is None or at == "any":
            continue
        if at != "top" and at not in names:
            file, line, fld = query.where[g]
            raise SpecError(f"input {g!r} sits at {at!r}, not a level of {arch.name}", file=file, line=line,
                            field=fld, allowed="top, any, " + ", ".join(names))
        fixed.add(0 if at == "top" else names.index(at))
    if e.home is not None:
        if e.home not in names:
            file, line, fld = e.where
            raise SpecError(f"home {e.home!r} is not a level of {arch.name}", file=file, line=line, field=fld,
                            allowed=", ".join(names))
        given = [names.index(e.home)]
    else:
        given = list(range(len(arch.levels)))
    out = [L for L in given if arch.levels[L].instances == 1 and fixed <= {L}
           and (arch.levels[L].size_words is None or arch.levels[L].size_words >= need)]
    if not out:
        file, line, fld = e.where
        raise SpecError(f"einsum {e.workload.name}: no level can hold its tensors ({need:,} words)"
                        + (f" where its inputs sit ({', '.join(names[L] for L in sorted(fixed))})" if fixed else ""),
                        file=file, line=line, field=fld,
                        allowed="a level of one instance that holds them whole (or an unbounded one)")
    return out


def _stream(arch: Arch, energy: EnergyTable, L: int, name: str, words: int, read: bool) -> tuple[float, float]:
    """(cycles, pJ) of ``words`` streamed whole out of (into) level ``L``."""
    lvl = arch.levels[L]
    if lvl.ssd is not None:
        s = disk.price(lvl, {name: (words, 0) if read else (0, words)}, {name: (words, words)})[0]
        return s.seconds * (arch.clock_hz or 1.0), s.energy_pJ
    c = energy.storage[lvl.name]
    pj = words / lvl.block_size * (c.read_pJ if read else c.write_pJ)
    bw = [b for b in ((lvl.read_bandwidth if read else lvl.write_bandwidth), lvl.shared_bandwidth) if b]
    return (words / min(bw) if bw else 0.0), pj


def moves(arch: Arch, energy: EnergyTable, query: Query, at: list[int], kept: list[int] | None = None,
          in_place: set[tuple[int, str]] = frozenset(), memo: dict | None = None) -> list[Move]:
    """Tensors written at one home and read at another, each moved once per reader: from the home
    of the tensor (``kept``, per einsum: where its output lives; default: its einsum's home), except
    where the reader reads it where it lives (``in_place``: (einsum, einsum tensor) pairs).
    ``memo``: a dict the caller keeps for one (arch, energy, query), so that each move is priced once."""
    kept = at if kept is None else kept
    memo = {} if memo is None else memo
    out = []
    for j, e in enumerate(query.einsums):
        for local, (g, k) in e.binds.items():
            i = query.writer(g)
            if i is None or i == j or kept[i] == at[j] or (j, local) in in_place:
                continue
            key = (g, k, i, kept[i], at[j])
            if key not in memo:
                w = query.einsums[i].workload
                words = next(w.tensor_elements(t) for t in w.tensors if t.read_write)
                rc, rp = _stream(arch, energy, kept[i], g, words, True)
                wc, wp = _stream(arch, energy, at[j], g, words * k, False)
                memo[key] = Move(g, arch.levels[kept[i]].name, arch.levels[at[j]].name, words, words * k,
                                 math.ceil(max(rc, wc)), rp + wp)
            out.append(memo[key])
    return out


def output_homes(arch: Arch, query: Query, i: int, L: int) -> list[int]:
    """Where the tensor einsum ``i`` writes may live when the einsum's home is level ``L``: there, or
    a level below of one instance that holds it whole."""
    w = query.einsums[i].workload
    words = next(w.tensor_elements(t) for t in w.tensors if t.read_write)
    return [L] + [H for H in range(L + 1, len(arch.levels)) if arch.levels[H].instances == 1
                  and (arch.levels[H].size_words is None or arch.levels[H].size_words > words)]


def _homed(arch: Arch, workload, L: int, placed: dict[str, int]) -> tuple[Arch, Constraints | None] | None:
    """The arch an einsum at home ``L`` is mapped on (from ``L`` down) and, for each of its tensors
    ``placed`` at a level H > L (its output's own home, an input read where its writer left it),
    the constraints that keep it at H and bypass it above; H's capacity is less the tensor's whole
    size (it lives there whole). None where the placed tensors do not fit."""
    levels = list(arch.levels[L:])
    placed = {t: H for t, H in placed.items() if H != L}
    if not placed:
        return dataclasses.replace(arch, levels=tuple(levels)), None
    cons: dict[int, LevelConstraint] = {}
    for name, H in sorted(placed.items(), key=lambda kv: kv[1]):
        h = H - L
        if levels[h].size_words is not None:
            left = levels[h].size_words - workload.tensor_elements(workload.tensor(name))
            if left < 1:
                return None
            levels[h] = dataclasses.replace(levels[h], size_words=left)
        for k in range(h):
            c = cons.get(k, LevelConstraint())
            cons[k] = dataclasses.replace(c, bypass=(c.bypass or frozenset()) | {name})
        c = cons.get(h, LevelConstraint())
        cons[h] = dataclasses.replace(c, keep=(c.keep or frozenset()) | {name})
    where = ", ".join(f"{t} at {arch.levels[H].name}" for t, H in sorted(placed.items()))
    return dataclasses.replace(arch, levels=tuple(levels)), Constraints(cons, source=f"tensors homed: {where}")


@dataclass(frozen=True)
class _Choice:
    """One einsum's part of a combination: its home, its output's home and the inputs it reads where
    their writers left them, below its home ((einsum tensor, level) pairs)."""
    home: int
    output: int
    in_place: tuple[tuple[str, int], ...] = ()


def _combinations(arch: Arch, query: Query) -> list[tuple[_Choice, ...]]:
    """Every combination of homes: per einsum (in the order they run) its home and its output's,
    and, for each input its writer left at a level below the reader's home, a read in place or a
    move to the home."""
    per = [[(L, H) for L in homes(arch, query, i) for H in output_homes(arch, query, i, L)]
           for i in range(len(query.einsums))]
    out: list[tuple[_Choice, ...]] = []

    def grow(j: int, done: tuple[_Choice, ...]) -> None:
        if j == len(query.einsums):
            out.append(done)
            return
        e = query.einsums[j]
        for L, H in per[j]:
            below = [(local, done[i].output) for local, (g, _) in sorted(e.binds.items())
                     if (i := query.writer(g)) is not None and i < j and done[i].output > L]
            for pick in itertools.product((False, True), repeat=len(below)):
                grow(j + 1, done + (_Choice(L, H, tuple(b for b, p in zip(below, pick) if p)),))

    grow(0, ())
    return out


def map_query(arch: Arch, query: Query, energy: EnergyTable, *, objective: str = "delay,energy",
              progress: bool = False, options: MapperOptions | None = None, **opts) -> QueryResult:
    """The best homes and mappings of ``query`` on ``arch`` (``opts``: :func:`map_workload`'s, or all of
    its search options typed in ``options``; ``progress``: a progress bar of the einsums mapped on stderr).

    A branch and bound over the combinations of homes: each is first bounded by its einsums' lower
    bounds (:func:`storeloop.mapper.lower_bounds`) and its moves, and only those whose bound could
    beat the best so far are mapped, least bound first."""
    if options is not None:
        objective, opts = options.objective, {**options.model_dump(exclude={"objective"}), **opts}
    from tqdm import tqdm

    obj = Objective(objective, arch_area_um2(arch, energy))
    combos = _combinations(arch, query)
    sliced: dict[tuple[int, _Choice], tuple[Arch, Constraints | None] | None] = {}
    bounds: dict[tuple[int, _Choice], tuple[float, float]] = {}
    mapped: dict[tuple[int, _Choice], MapResult] = {}

    def part(i: int, c: _Choice):
        key = (i, c)
        if key not in sliced:
            w = query.einsums[i].workload
            out = next(t.name for t in w.tensors if t.read_write)
            sliced[key] = _homed(arch, w, c.home, {out: c.output, **dict(c.in_place)})
        return sliced[key]

    def bound(i: int, c: _Choice) -> tuple[float, float]:
        """The einsum's (cycles, pJ): its proven values where mapped and proven, else lower bounds."""
        key = (i, c)
        if key in mapped:
            p = mapped[key]
            return (p.result.cycles if p.search["cycles_optimal"] else p.search["lower_bound_cycles"],
                    p.result.energy_pJ if p.search["optimal"] else p.search["lower_bound_energy_pJ"])
        if key not in bounds:
            a, cons = part(i, c)
            bounds[key] = lower_bounds(a, query.einsums[i].workload, energy, cons)
        return bounds[key]

    move_memo: dict = {}

    def flows(combo) -> list[Move]:
        return moves(arch, energy, query, [c.home for c in combo], [c.output for c in combo],
                     {(j, t) for j, c in enumerate(combo) for t, _ in c.in_place}, move_memo)

    def lower(combo, ms) -> tuple[float, float]:
        parts = [bound(i, c) for i, c in enumerate(combo)]
        return (sum(p[0] for p in parts) + sum(m.cycles for m in ms),
                sum(p[1] for p in parts) + sum(m.energy_pJ for m in ms))

    combos = [c for c in combos if all(part(i, x) is not None for i, x in enumerate(c))]
    ms = [flows(c) for c in combos]
    lbs = [lower(c, m) for c, m in zip(combos, ms)]
    order = obj.order(np.array([lb[0] for lb in lbs], np.float64), np.array([lb[1] for lb in lbs]))
    bar = tqdm(unit="einsum", disable=not progress, file=sys.stderr, dynamic_ncols=True)
    best, best_cost, priced = None, None, []
    for n in order:
        combo, mv = combos[n], ms[n]
        if best is not None and obj.dominated(*lbs[n], best_cost):
            break               # in bound order: this one and every later one cannot win (bounds only rise)
        if best is not None and obj.dominated(*lower(combo, mv), best_cost):
            continue                                  # its bound (a mapped part: its value) cannot win
        for i, c in enumerate(combo):
            if (i, c) in mapped:
                continue
            w = query.einsums[i].workload
            bar.set_description_str(f"{w.name} at {arch.levels[c.home].name}"
                                    + (f", output at {arch.levels[c.output].name}" if c.output != c.home else ""))
            a, cons = part(i, c)
            layout = bool(opts.get("search_layout")) and a.levels[0].ssd is not None
            mapped[(i, c)] = map_workload(a, w, energy, objective=objective, constraints=cons,
                                          **{**opts, "search_layout": layout})
            bar.update(1)
        r = QueryResult(query, [arch.levels[c.home].name for c in combo], [mapped[(i, c)] for i, c in enumerate(combo)],
                        mv, 0, output_homes=[arch.levels[c.output].name for c in combo],
                        in_place=[{e.binds[t][0]: arch.levels[L].name for t, L in c.in_place}
                                  for e, c in zip(query.einsums, combo)])
        priced.append((combo, r))
        if best is None or obj.better(r.cycles, r.energy_pJ, best_cost):
            best, best_cost = r, (r.cycles, r.energy_pJ)
    bar.close()
    best.combinations, best.mapped = len(combos), len(mapped)
    # a priced combination could still win if the lower bounds of its parts (a part's own value
    # where its search proved it) and its moves beat the best found; the others were ruled out
    # by such bounds before they were mapped (none has fewer cycles, nor, with as few, less energy)
    bounds_of = [lower(combo, r.moves) for combo, r in priced]
    # (the combinations ruled out have at least the best's cycles only where the objective puts cycles first)
    best.cycles_lb = min(c for c, _ in bounds_of) if obj.name in ("delay", "delay,energy") else 0
    best.energy_lb_pJ = min(e for c, e in bounds_of if c <= best.cycles)
    for (combo, r), lb in zip(priced, bounds_of):
        if r is not best and obj.better(*lb, best_cost):
            best.open_homes.append([h if o == h else f"{h} (output at {o})" for h, o in zip(r.homes, r.output_homes)])
    return best


__all__ = ["Move", "QueryResult", "map_query", "homes", "output_homes", "moves"]
