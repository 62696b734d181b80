"""A whole query (:mod:`storeloop.spec.query`): its einsums mapped one after another.

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
Its reader then finds it there, or it is moved from there. The home's capacity given to the
einsum's mapping is less the tensor's whole size (the tensor's tile there is counted again: a
bound that is tight for an unbounded level).

The einsums run one after another: the query's cycles and energy are the sums of the einsums' and
the moves'. Every combination of homes (einsums' and their outputs') is priced and the best kept;
since each einsum's mapping is its own best (lexicographic delay then energy, or either alone),
the sum of the best is the best sum, so the query is proven optimal over its homes when every
einsum is. Not modelled here: tile-level fusion of two einsums (an intermediate that never
exists whole: it pays off only at a level too small for the whole tensor, as DRAM is not on
OnionChopper), overlap between einsums, and the decomposition's own work.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import sys
from dataclasses import dataclass

from storeloop.errors import SpecError
from storeloop.mapper import MapResult, map_workload
from storeloop.mapper.objective import Objective, arch_area_um2
from storeloop.mapper.space import Constraints, LevelConstraint
from storeloop.model import disk
from storeloop.spec.query import Query
from storeloop.spec.types import Arch, EnergyTable


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
    combinations: int                      # homes combinations priced
    open_homes: list[list[str]] = dataclasses.field(default_factory=list)   # combinations a bound cannot rule out
    output_homes: list[str] = dataclasses.field(default_factory=list)      # per einsum: where its output lives

    @property
    def cycles(self) -> int:
        return sum(p.result.cycles for p in self.parts) + sum(m.cycles for m in self.moves)

    @property
    def energy_pJ(self) -> float:
        return sum(p.result.energy_pJ for p in self.parts) + sum(m.energy_pJ for m in self.moves)

    @property
    def optimal(self) -> bool:
        return all(p.search["optimal"] for p in self.parts)

    @property
    def claim(self) -> str:
        """What the search proves of the whole query, from its einsums' stops."""
        stops = {p.search["stopped"] for p in self.parts}
        homes = f"over {self.combinations} combinations of homes"
        if self.open_homes:
            return (f"not proven: {len(self.open_homes)} other combination(s) of homes might be better (their "
                    f"searches stopped early), e.g. {', '.join(self.open_homes[0])}")
        if self.optimal:
            return f"proven optimal {homes} (every einsum proven)"
        if all(p.search["cycles_optimal"] for p in self.parts):
            # the parts proven optimal have their least energy; the others are within their gap
            gap = max(p.search["energy_gap"] for p in self.parts if not p.search["optimal"])
            return (f"cycles proven optimal {homes}; energy within {100 * gap:.3g} % of the least "
                    f"(einsums stopped: {', '.join(sorted(stops))})")
        return f"not proven (einsums stopped: {', '.join(sorted(stops))}); homes: {self.combinations} combinations"

    def to_dict(self, arch: Arch) -> dict:
        clock = arch.clock_hz
        return {"query": self.query.name, "cycles": self.cycles, "time_s": self.cycles / clock if clock else None,
                "energy_J": self.energy_pJ / 1e12, "optimal": self.optimal, "claim": self.claim,
                "home_combinations": self.combinations,
                "einsums": [{"name": e.workload.name, "home": h, "output_home": o, "macs": e.workload.macs,
                             "cycles": p.result.cycles,
                             "energy_J": p.result.energy_pJ / 1e12, "optimal": bool(p.search["optimal"]),
                             "cycles_optimal": bool(p.search["cycles_optimal"]), "energy_gap": p.search["energy_gap"],
                             "stopped": p.search["stopped"], "bound_by": p.result.bound_by}
                            for e, h, o, p in zip(self.query.einsums, self.homes, self.output_homes or self.homes,
                                                  self.parts)],
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


def moves(arch: Arch, energy: EnergyTable, query: Query, at: list[int], kept: list[int] | None = None) -> list[Move]:
    """Tensors written at one home and read at another, each moved once per reader: from the home
    of the tensor (``kept``, per einsum: where its output lives; default: its einsum's home)."""
    kept = at if kept is None else kept
    out = []
    for j, e in enumerate(query.einsums):
        for local, (g, k) in e.binds.items():
            i = query.writer(g)
            if i is None or i == j or kept[i] == at[j]:
                continue
            w = query.einsums[i].workload
            words = next(w.tensor_elements(t) for t in w.tensors if t.read_write)
            rc, rp = _stream(arch, energy, kept[i], g, words, True)
            wc, wp = _stream(arch, energy, at[j], g, words * k, False)
            out.append(Move(g, arch.levels[kept[i]].name, arch.levels[at[j]].name, words, words * k,
                            math.ceil(max(rc, wc)), rp + wp))
    return out


def output_homes(arch: Arch, query: Query, i: int, L: int) -> list[int]:
    """Where the tensor einsum ``i`` writes may live when the einsum's home is level ``L``: there, or
    a level below of one instance that holds it whole."""
    w = query.einsums[i].workload
    words = next(w.tensor_elements(t) for t in w.tensors if t.read_write)
    return [L] + [H for H in range(L + 1, len(arch.levels)) if arch.levels[H].instances == 1
                  and (arch.levels[H].size_words is None or arch.levels[H].size_words > words)]


def _homed(arch: Arch, workload, L: int, H: int) -> tuple[Arch, Constraints | None]:
    """The arch an einsum at home ``L`` is mapped on (from ``L`` down) and, with its output homed at
    ``H`` > ``L``, the constraints that keep it there and bypass it above; ``H``'s capacity is less
    the output's whole size (the output grows to it there)."""
    levels = list(arch.levels[L:])
    if H == L:
        return dataclasses.replace(arch, levels=tuple(levels)), None
    out = next(t for t in workload.tensors if t.read_write)
    h = H - L
    if levels[h].size_words is not None:
        levels[h] = dataclasses.replace(levels[h], size_words=levels[h].size_words - workload.tensor_elements(out))
    cons = {k: LevelConstraint(bypass=frozenset({out.name})) for k in range(h)}
    cons[h] = LevelConstraint(keep=frozenset({out.name}))
    return dataclasses.replace(arch, levels=tuple(levels)), Constraints(cons, source=f"output homed at {arch.levels[H].name}")


def map_query(arch: Arch, query: Query, energy: EnergyTable, *, objective: str = "delay,energy",
              progress: bool = False, **opts) -> QueryResult:
    """The best homes and mappings of ``query`` on ``arch`` (``opts``: :func:`map_workload`'s;
    ``progress``: a progress bar of the einsums mapped on stderr)."""
    from tqdm import tqdm

    # per einsum: (its home, its output's home)
    options = [[(L, H) for L in homes(arch, query, i) for H in output_homes(arch, query, i, L)]
               for i in range(len(query.einsums))]
    mapped: dict[tuple[int, int, int], MapResult] = {}
    bar = tqdm(total=sum(map(len, options)), unit="einsum", disable=not progress, file=sys.stderr, dynamic_ncols=True)
    for i, e in enumerate(query.einsums):
        for L, H in options[i]:
            bar.set_description_str(f"{e.workload.name} at {arch.levels[L].name}"
                                    + (f", output at {arch.levels[H].name}" if H != L else ""))
            sliced, cons = _homed(arch, e.workload, L, H)
            layout = bool(opts.get("search_layout")) and sliced.levels[0].ssd is not None
            mapped[(i, L, H)] = map_workload(sliced, e.workload, energy, objective=objective, constraints=cons,
                                             **{**opts, "search_layout": layout})
            bar.update(1)
    bar.close()
    obj = Objective(objective, arch_area_um2(arch, energy))
    best, best_cost, combos = None, None, []
    for choice in itertools.product(*options):
        at, kept = [L for L, _ in choice], [H for _, H in choice]
        r = QueryResult(query, [arch.levels[L].name for L in at], [mapped[(i, *c)] for i, c in enumerate(choice)],
                        moves(arch, energy, query, at, kept), 0, output_homes=[arch.levels[H].name for H in kept])
        combos.append(r)
        if best is None or obj.better(r.cycles, r.energy_pJ, best_cost):
            best, best_cost = r, (r.cycles, r.energy_pJ)
    best.combinations = len(combos)
    # another combination could still win if the lower bounds of its parts (a part's own value
    # where its search proved it) and its moves beat the best found
    for r in combos:
        if r is best:
            continue
        lb_c = sum(p.result.cycles if p.search["cycles_optimal"] else p.search["lower_bound_cycles"] for p in r.parts) \
            + sum(m.cycles for m in r.moves)
        lb_e = sum(p.result.energy_pJ if p.search["optimal"] else p.search["lower_bound_energy_pJ"] for p in r.parts) \
            + sum(m.energy_pJ for m in r.moves)
        if obj.better(lb_c, lb_e, best_cost):
            best.open_homes.append([h if o == h else f"{h} (output at {o})" for h, o in zip(r.homes, r.output_homes)])
    return best


__all__ = ["Move", "QueryResult", "map_query", "homes", "output_homes", "moves"]
