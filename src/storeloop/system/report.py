"""Text reports of a system analysis: the summary ``storeloop system`` prints and the claims table."""

from __future__ import annotations

import math

PREFIXES = [(1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")]


def si(value: float | None, unit: str = "") -> str:
    """12.5e9, 'B/s' -> '12.5 GB/s'; small numbers and counts stay plain."""
    if value is None:
        return "-"
    if value == 0 or not math.isfinite(value):
        return f"{value:g} {unit}".strip()
    for scale, prefix in PREFIXES:
        if abs(value) >= scale:
            return f"{value / scale:.4g} {prefix}{unit}".strip()
    if unit in ("s", "J") and abs(value) < 1:
        for scale, prefix in ((1e-3, "m"), (1e-6, "u"), (1e-9, "n"), (1e-12, "p")):
            if abs(value) >= scale:
                return f"{value / scale:.4g} {prefix}{unit}"
    return f"{value:.4g} {unit}".strip()


def _rate(value: float | None, unit: str) -> str:
    if unit == "B/s" and value is not None:
        return f"{si(value, 'B/s')} ({si(value * 8, 'b/s')})"
    return si(value, "" if unit == "count" else unit)


def _where(b: dict) -> str:
    return f"stage {b['stage']} (instances)" if "stage" in b else f"{b['device']}.{b['resource']}"


def summary(r: dict) -> str:
    unit = r["unit"]
    t = r["throughput"]
    lines = [f"system {r['system']} ({r['file']}); unit of work: {unit['name']} ({si(unit['bytes'], 'B')})"]
    if r.get("overrides"):
        lines.append("with " + ", ".join(f"{k}={v}" for k, v in r["overrides"].items()))
    if t is None:
        lines.append("throughput   not limited: no flow or placed stage draws on a rate resource")
    else:
        lines.append(f"throughput   {si(t['units_per_s'])} {unit['name']}/s = {_rate(t['bytes_per_s'], 'B/s')} of input")
        others = [_where(b) for b in r["bottlenecks"][1:]]
        inside = r["stages"].get(r["bottleneck"].get("stage"), {}).get("bound_by")
        lines.append(f"bottleneck   {_where(r['bottleneck'])}" + (f", inside it {inside}" if inside else "")
                     + (f" (tied: {', '.join(others)})" if others else ""))
    if r.get("target") and t is not None:
        tg = r["target"]
        lines.append(f"target       {_rate(tg['bytes_per_s'], 'B/s')}: {'met' if tg['met'] else 'NOT met'} "
                     f"({100 * tg['ratio']:.1f} % of it)")
    lines.append("")
    if any(r["resources"].values()):
        lines += _rates(r)
    for st in r.get("ssd_streams", []):
        lines.append(f"    {st['device']}.{st['resource']} for {st['flow']}: {si(st['request_bytes'], 'B')} {st['pattern']} "
                     f"requests, {si(st['iops'], 'IO/s')} = {_rate(st['bandwidth_Bps'], 'B/s')} per unit "
                     f"({st['placement']}), bound by its {st['bottleneck']} (SSD model, docs/ssd.md)")
    return _rest(r, lines)


def _rates(r: dict) -> list[str]:
    unit = r["unit"]
    lines = [f"{'rate resource':<26} {'capacity':>28} {'per ' + unit['name']:>14} {'limit (input)':>28} {'util':>7}"]
    for dev, rows in r["resources"].items():
        for res, row in rows.items():
            per = si(row["demand_per_unit"], {"B/s": "B", "cores": "core-s", "IO/s": "IO"}[row["unit"]])
            util = "-" if row["utilization"] is None else f"{100 * row['utilization']:.1f}%"
            lines.append(f"{dev + '.' + res:<26} {_rate(row['capacity'], row['unit']):>28} {per:>14} "
                         f"{_rate(row['limit_bytes_per_s'], 'B/s'):>28} {util:>7}")
    return lines


def _gap(lines: list[str]) -> None:
    if lines and lines[-1]:
        lines.append("")


def _rest(r: dict, lines: list[str]) -> str:
    unit = r["unit"]
    if any(r["static"].values()):
        _gap(lines)
        lines.append(f"{'static resource':<26} {'used':>12} {'available':>12} {'util':>7}  by")
        for dev, rows in r["static"].items():
            for res, row in rows.items():
                unit_s = "B" if res in ("capacity", "register_memory") else ""
                by = ", ".join(f"{k} {si(v, unit_s)}" for k, v in row["by"].items())
                util = "-" if row["utilization"] is None else f"{100 * row['utilization']:.1f}%"
                lines.append(f"{dev + '.' + res:<26} {si(row['used'], unit_s):>12} {si(row['available'], unit_s):>12} "
                             f"{util:>7}  {by}{'' if row['fits'] else '  DOES NOT FIT'}")
    _gap(lines)
    for name, s in r["stages"].items():
        head = f"stage {name} ({s['kind']}{', on ' + s['device'] if s['device'] else ''})"
        if s.get("rate_bytes_per_s"):
            placed = s["instances"] if s["instances"] is not None else "as needed"
            head += (f": {_rate(s['rate_bytes_per_s'], 'B/s')} per instance; instances {placed}, "
                     f"to saturate the next bottleneck {s['instances_to_saturate'] or '-'}")
            if s.get("instances_needed") is not None:
                head += f", for the target {s['instances_needed']}"
        lines.append(head)
        if s["kind"] == "einsum":
            bound = f"(bound by {s['bound_by']}) " if s.get("bound_by") else ""
            lines.append(f"    mapped on {s['arch']} by storeloop's mapper ({s['search_stopped']}): {s['cycles']:,} cycles "
                         f"{bound}+ {si(s['setup_s'], 's')} setup per invocation of {si(s['stream_bytes'], 'B')}; "
                         f"{si(s['energy_J_per_byte'], 'J')}/B; on chip {si(s['on_chip_bytes'], 'B')}")
            if s.get("priced_by"):
                lines.append(f"    priced by {s['priced_by']}")
        elif s["kind"] == "table":
            lines.append(f"    {s['entries']:.4g} entries x {si(s['entry_bytes'], 'B')} = {si(s['bytes'], 'B')} in {s['store']}")
        elif s["kind"] == "index":
            lines.append(f"    {s['levels']} levels ({s['on_chip_levels']} on chip): {s['keys']:,} keys, "
                         f"indexes {si(s['capacity_bytes'], 'B')}")
        elif s["kind"] == "register-store":
            parts = [f"{s['arrays']} arrays"]
            if "bytes" in s:
                parts.append(f"{s['records']} records in {si(s['bytes'], 'B')}")
            if "bytes_per_record" in s:
                parts.append(f"{si(s['bytes_per_record'], 'B')} per record")
            if "round_trips_per_query" in s:
                parts.append(f"{s['round_trips_per_query']} of {s['round_trips_without_cache']} round trips per query")
            lines.append("    " + "; ".join(parts))
    lines.append("")
    if r["energy_J_per_unit"] is not None:
        lines.append(f"energy       {si(r['energy_J_per_unit'], 'J')} per {unit['name']} (the stages with a priced "
                     f"energy); power {si(r['power_W'], 'W')} at the throughput")
    if r["latency_s"]:
        lines.append(f"latency      {si(r['latency_s'], 's')} per invocation through the einsum stages")
    if not r["feasible"]:
        lines.append("placement    DOES NOT FIT (see the static resources)")
    if r.get("claims"):
        counts: dict[str, int] = {}
        for c in r["claims"]:
            counts[c["status"]] = counts.get(c["status"], 0) + 1
        lines.append(f"claims       {len(r['claims'])}: " + ", ".join(f"{n} {k}" for k, n in counts.items())
                     + " (--claims for the table)" + (", scored on the file as written (--set does not change "
                                                     "them)" if r.get("overrides") else ""))
    return "\n".join(lines)


def _cells(c: dict, *, none: str, le: str, ge: str, percent: str) -> tuple[str, str, str]:
    """A claim's storeloop value, difference and published value (with its relation) as text."""
    mine = none if c["storeloop_in_unit"] is None else f"{c['storeloop_in_unit']:.5g}"
    diff = none if c["difference"] is None else f"{100 * c['difference']:+.1f}{percent}"
    pub = (le if c["relation"] == "<=" else ge if c["relation"] == ">=" else "") + c["published_text"]
    return mine, diff, pub


def claims_table(r: dict) -> str:
    """Published beside derived, with the difference and the reason where they differ."""
    lines = [f"claims of {r['system']} ({r['file']}): published vs derived by storeloop"
             + (" on the file as written (without --set)" if r.get("overrides") else ""), ""]
    lines.append(f"{'claim':<58} {'published':>13} {'storeloop':>13} {'diff':>8}  status       source")
    for c in r["claims"]:
        mine, diff, pub = _cells(c, none="-", le="<= ", ge=">= ", percent="%")
        lines.append(f"{c['name'][:58]:<58} {pub:>13} {mine:>13} {diff:>8}  {c['status']:<12} {c['source']}")
        if c["at"]:
            lines.append(f"{'':>4}at: {c['at']}")
        for key in ("note", "assumes", "why", "missing"):
            if c[key]:
                lines.append(f"{'':>4}{key}: {c[key]}")
    return "\n".join(lines)


def claims_markdown(r: dict) -> list[str]:
    """The claims as a Markdown table (published, storeloop, difference, status, source, why)."""
    lines = ["| claim | published | storeloop | difference | status | source | notes |", "|---|---|---|---|---|---|---|"]
    for c in r["claims"]:
        mine, diff, pub = _cells(c, none="—", le="≤ ", ge="≥ ", percent=" %")
        notes = " ".join(f"*{k}:* {c[k]}" for k in ("note", "assumes", "why", "missing") if c[k])
        if c["at"]:
            notes = f"*at:* {c['at']} " + notes
        lines.append(f"| {c['name']} | {pub} | {mine} | {diff} | {c['status']} | {c['source']} | "
                     f"{notes.replace('|', '/')} |")
    return lines
