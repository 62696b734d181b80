"""What the command line prints: the model's table, the map report, sweep and ranking summaries."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from storeloop import format_loops, magnitude, padding_text, rank_designs, si
from storeloop.ir import Arch

if TYPE_CHECKING:
    from storeloop.model.evaluate import Result


def render_table(r: Result, arch: Arch, mapping: str | None = None) -> str:
    """The model's table per level, then the totals, each energy and area said with what priced it
    and (``mapping``) which mapping produced it."""
    lines = [f"{'level':<10} {'inst':>5} {'cycles':>18} {'thrott':>7} {'energy pJ':>20} {'area um2':>12}"]
    for lvl in r.levels:
        lines.append(f"{lvl.name:<10} {lvl.utilized_instances:>2}/{lvl.instances:<2} {lvl.cycles:>18,} "
                     f"{lvl.slowdown:>7.3f} {lvl.energy_pJ:>20,.0f} {lvl.area_total_um2:>12,.0f}")
        for name, t in lvl.tensors.items():
            if not t.kept:
                lines.append(f"    {name:<6} bypassed")
                continue
            lines.append(f"    {name:<6} tile {t.tile:>12,}  reads {t.reads_total:>16,}  fills {t.fills_total:>16,}"
                         f"  updates {t.updates_total:>16,}")
    lines.append(f"{r.compute_name:<10} {r.utilized_compute_instances:>2}/{r.compute_instances:<2} "
                 f"{r.compute_cycles:>18,} {'':>7} {r.compute_energy_pJ:>20,.0f} "
                 f"{r.compute_area_per_instance_um2 * r.compute_instances:>12,.0f}")
    lines.append("")
    lines.append(f"cycles       {r.cycles:,}  (bound by {r.bound_by})")
    lines.append(f"computes     {r.computes:,}" + (f" ({r.padding:,} of them on padding: the mapping is imperfect, "
                                                    f"its last tiles run full)" if r.padding else ""))
    lines.append(f"utilization  {r.utilization:.4f}")
    lines.append(f"energy       {r.energy_pJ / 1e12:.6g} J  ({r.energy_pJ / r.computes:.6g} pJ/compute)")
    lines.append(f"area         {r.on_chip_area_um2 / 1e6:.6g} mm^2 on chip ({r.area_um2 / 1e6:.6g} mm^2 with the "
                 f"off-chip levels: {', '.join(lv.name for lv in r.levels if lv.off_chip) or 'none'})")
    lines.append(f"priced by    {r.priced_by}")
    if mapping:
        lines.append(f"mapping      {mapping}")
    if r.buffering:
        need = [f"{n} (single-buffered: {b['single_cycles'] / b['overlapped_cycles'] - 1:+.1%} cycles)"
                for n, b in r.buffering.items() if b["needs_double"]]
        free = [n for n, b in r.buffering.items() if not b["needs_double"]]
        said = [f"{n} {b['declared']}" for n, b in r.buffering.items() if b["declared"]]
        lines.append("buffering    " + (f"needs double (overlapped fills): {', '.join(need)}" if need else
                                        "no level needs double buffering")
                     + (f"; single would cost no cycles: {', '.join(free)}" if free else "")
                     + (f"; declared: {', '.join(said)}" if said else ""))
    if arch.clock_hz:
        lines.append(f"time         {r.cycles / arch.clock_hz:.6g} s at {arch.clock_hz / 1e9:g} GHz")
    return "\n".join(lines)


def ranking_summary(df, names: list[str], top: int = 3) -> None:
    """A sweep over a workload set: the designs best across it (storeloop.sweeps.rank_designs)."""
    ranked = rank_designs(df)
    for scenario, g in ranked.groupby("scenario", sort=False):
        where = "" if scenario == "{}" else f" ({', '.join(f'{k} = {v}' for k, v in json.loads(scenario).items())})"
        n = int(g["workloads"].max())
        print(f"best across the {n} workloads{where} (weighted mean time, then on-chip area x energy; "
              f"storeloop results --rank for all {len(g)}):")
        for _, r in g.head(top).iterrows():
            design = ", ".join(f"{c} = {r[c]}" for c in names)
            if not r["complete"]:
                print(f"  {r['rank']}. {design}: results on {r['workloads']} of {n} workloads only")
                continue
            print(f"  {r['rank']}. {design}: {r['weighted_time_s']:.4g} s, {r['weighted_energy_J']:.4g} J per "
                  f"query (weighted mean), " + ("the best on every workload" if r["worst_ratio"] == 1 else
                                          f"worst {r['worst_ratio']:.3f}x the best, on {r['worst_workload']}")
                  + ("" if r["all_proven"] else "; cycles not all proven"))


def sort_key(value):
    """Sweep values in their natural order: quantities by size (storeloop.formats.quantities.magnitude), then the rest."""
    amount = magnitude(value)
    return float("inf") if amount is None else amount


def system_sweep_summary(ok, names: list[str]) -> None:
    """A system sweep: each point's throughput and what binds it."""
    for _, row in ok.sort_values(names, key=lambda c: c.map(sort_key)).iterrows():
        where = ", ".join(f"{n} = {row[n]}" for n in names)
        rate = row["throughput_Bps"]
        print(f"  {where}: " + ("not rate-limited" if rate != rate else
                                f"{si(rate, 'B/s')} ({si(rate * 8, 'b/s')}), bound by {row['bottleneck']}"))


def map_report(out, arch: Arch, workload, written: str | None = None) -> str:
    """What ``storeloop map`` prints: the model's table of the best mapping, the mapping level by level,
    the layout searched, and the search's report (why it stopped, its lower bounds and gaps)."""
    s = out.search
    lines = [render_table(out.result, arch, "the mapper's (below)" + (f", written to {written}" if written else "")),
             "", "mapping (outer -> inner):"]
    for lvl, lm in zip(arch.levels, out.mapping.levels):
        loops = format_loops(lm.temporal, workload) or "-"
        sp = " ".join(f"{workload.dims[lp.dim]}={lp.factor}{'' if lp.axis == 'X' else '(Y)'}" for lp in lm.spatial)
        keep = "all" if lm.keep is None else (", ".join(sorted(lm.keep)) or "none")
        below = ", ".join(f"{t}: {workload.dims[lm.temporal[n - 1].dim]}" for t, n in lm.above if n)
        lines.append(f"  {lvl.name:<8} {loops}{'  spatial ' + sp if sp else ''}  keep: {keep}"
                     + (f"  below: {{{below}}}" if below else ""))
    if "layout" in s:
        lines.append(f"layout on {arch.levels[0].name} (searched; put it in the arch's {arch.levels[0].name} level to keep it): "
              + "{" + ", ".join(f"{k}: [{', '.join(v)}]" for k, v in s["layout"].items()) + "}")
    status = "proven optimal" if s["optimal"] else "not proven optimal"
    local = s.get("local_search")
    lines.append(f"search: {s['algorithm']}" + (f" ({s['processes']} processes)" if s.get("processes", 1) > 1 else "")
          + f", objective {s['objective']}, "
          + (f"local search {local['evaluations']:,} evaluations, " if local else "")
          + ("its retry interrupted, " if local and local.get("retry", {}).get("interrupted") else
             f"its retry {local['retry']['evaluations']:,}"
             + (" (ended by the time limit)" if local["retry"].get("time_limit") else "") + ", "
             if local and local.get("retry") else "")
          + f"{s['candidates']:,} candidates, {s['seconds']:.2f} s, stopped: {s['stopped']} ({status})")
    lines.append(f"lower bound {s['lower_bound_cycles']:,} cycles (" + ", ".join(
        f"{k} {v:,}" for k, v in s["lower_bound_parts"].items()) + f"); gap {100 * s['gap']:.4f}%"
          + ("; cycles optimal" if s["cycles_optimal"] else "")
          + (" (the exact time is the bound; Timeloop's floating-point throttling adds 1 cycle)"
             if s.get("cycles_rounding") else ""))
    parts = ", ".join(f"{k} {v / 1e12:.6g} J" for k, v in s["lower_bound_energy_parts"].items())
    if s.get("lower_bound_energy_searched_pJ") is not None:
        lines.append(f"lower bound {s['lower_bound_energy_pJ'] / 1e12:.6g} J at these cycles, from the subtrees the "
                     f"search left open (the map space's: {parts}); energy gap {100 * s['energy_gap']:.4f}%")
    else:
        lines.append(f"lower bound {s['lower_bound_energy_pJ'] / 1e12:.6g} J ({parts}); "
                     f"energy gap {100 * s['energy_gap']:.4f}%")
    if "imperfect" in s:
        walk = s["imperfect"]
        pads = padding_text(walk["padded"])
        lines.append(f"imperfect factorizations: {walk['problems']} padded problems weighed, {walk['searched']} "
                     f"searched; " + (f"the best pads {pads} (the padding's computes and words are counted)" if pads
                                      else "the best pads nothing"))
    if "windows" in s["space"]:
        lines.append(f"sliding windows: {s['space']['windows']}; {s['exact_leaves']:,} leaves priced by the model, "
                     f"{s.get('floored_leaves', 0):,} ruled out by their windows' sends (and "
                     f"{s.get('floored_nodes', 0):,} last-level nodes with all their leaves) and "
                     f"{s.get('priced_out_leaves', 0):,} by their own order's surrogate price"
                     + (f"; {s['settled_subtrees']:,} top-level subtrees settled by the walk over first orders, "
                        "not walked again" if s.get("settled_subtrees") else ""))
    return "\n".join(lines)
