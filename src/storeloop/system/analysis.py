"""The system analysis: demand per resource -> throughput, bottleneck, instances, energy, claims.

Every unit of work (a byte written, a multiply, a byte read from storage) draws on rate resources:

- a **flow** of ``volume`` bytes per unit charges every bandwidth resource it passes (a link, a
  memory, an SSD direction; a link holds nothing and charges every byte that passes), and the
  SSD IOPS resources ``volume / io_bytes`` IOs. An SSD with a ``geometry`` is the SSD model
  (docs/ssd.md): its read and write resources are its peak streams, and a flow's requests (size,
  pattern, queue depth) draw ``volume x peak / the bandwidth the model gives them``, so short
  random requests cost what their IOPS allow (:func:`ssd_stream`);
- a **stage** takes ``input`` bytes per unit: its instances process ``rate`` bytes/s each (an
  einsum stage's rate comes from storeloop's mapper and model on the stage's arch: bytes of the
  stream tensors per invocation over the invocation's time, cycles / clock + setup), and its
  ``demands`` charge further resources per byte of its input.

The bottleneck rule, written once (:func:`limits`): a resource of capacity C whose demand is d per
unit allows C / d units/s; the system's throughput is the least of these over every resource
(stage instances that are placed count as one), and the resources that give it bind. A stage
whose instances are not placed is not a limit: the analysis says how many the target rate needs
(``instances_needed``) and how many reach the next bottleneck (``instances_to_saturate``).
Static resources (bytes, LUTs, DSPs, BRAMs, switch stages) are used by placement: the stages'
per-instance costs times their instances (placed, else the number the target - or without one, the
next bottleneck - needs), the tables' entries times their size, the register stores' arrays.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

from storeloop.energy import price
from storeloop.errors import SpecError, StoreloopError
from storeloop.formats.system import load_system
from storeloop.ir.system import RESOURCES, Claim, Stage, System
from storeloop.mapper import map_workload
from storeloop.mapper.options import MapperOptions
from storeloop.model.ssd import Stream, performance


class SystemResult(dict):
    """The analysis of one system: a dict (as ``storeloop system --json`` prints it) whose keys are
    also attributes. Every number is a plain number in SI units (B, B/s, s, J, W) or a count.

    ``throughput`` (units_per_s, bytes_per_s, bits_per_s of the system's input), ``bottleneck``
    (the binding resource: device and resource, or a stage's placed instances) and ``bottlenecks``
    (all that tie), ``resources`` (per device and rate resource: capacity, demand_per_unit,
    limit_units_per_s, limit_bytes_per_s, used, utilization, and with a target at_target and
    ratio_at_target), ``static`` (per device and static resource: available, used, by, utilization,
    fits), ``stages`` (per stage: instances, rate_bytes_per_s, instances_needed,
    instances_to_saturate, and what its kind derives), ``energy_J_per_unit``, ``power_W``,
    ``latency_s``, ``feasible`` (every static resource fits) and ``claims``."""

    def __getattr__(self, name: str):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


_UNITS: dict[str, dict] = {}            # einsum stage -> its mapped unit, per process


def einsum_unit(stage: Stage) -> dict:
    """One instance of an einsum stage, mapped by storeloop's mapper and priced by the plug-ins:
    cycles and energy per invocation, bytes of its stream tensors per invocation, its on-chip bytes."""
    key = repr((stage.arch, stage.workload, stage.objective, stage.time_limit, stage.budget))
    if key not in _UNITS:
        arch, work = stage.arch, stage.workload
        out = map_workload(arch, work, price(arch)[0], options=MapperOptions(
            objective=stage.objective, time_limit=stage.time_limit, budget=stage.budget))
        r = out.result
        stream = sum(work.tensor_elements(work.tensor(t)) * work.tensor(t).bits / 8 for t in stage.stream)
        on_chip = sum(lvl.size_words * lvl.word_bits / 8 * lvl.instances for lvl in arch.levels
                      if lvl.size_words is not None and not lvl.off_chip)
        _UNITS[key] = {"arch": arch.name, "workload": work.name, "clock_hz": arch.clock_hz,
                       "cycles": r.cycles, "energy_J": r.energy_J, "stream_bytes": stream,
                       "on_chip_bytes": on_chip, "on_chip_area_mm2": r.on_chip_area_mm2,
                       "computes": r.computes, "search_stopped": out.search.get("stopped"), "bound_by": r.bound_by,
                       "priced_by": r.priced_by}
    return dict(_UNITS[key])


def _stage_unit(stage: Stage) -> dict:
    """What one instance of a stage does: its rate (bytes of input per second), energy, latency."""
    if stage.kind == "einsum":
        try:
            u = einsum_unit(stage)
        except SpecError as exc:            # its arch or workload: say which stage of which system
            exc.message = f"(stage '{stage.name}', {stage.where.file}:{stage.where.line}) {exc.message}"
            exc.args = (exc.render(),)
            raise
        except StoreloopError as exc:       # no valid mapping, a time limit
            raise stage.where.error(f"stage '{stage.name}' cannot be mapped: {exc}",
                                    "an arch and workload the mapper can map (try storeloop map on them)") from None
        seconds = u["cycles"] / u["clock_hz"] + stage.setup_s
        u.update(invocation_s=seconds, setup_s=stage.setup_s, rate_bytes_per_s=u["stream_bytes"] / seconds,
                 energy_J_per_byte=u["energy_J"] / u["stream_bytes"] if u["stream_bytes"] else 0.0)
        return u
    if stage.kind == "stream":
        return {"rate_bytes_per_s": stage.rate_Bps,
                "energy_J_per_byte": None if stage.energy_pJ_per_B is None else stage.energy_pJ_per_B * 1e-12}
    return {}


def _ceil(x: float) -> int:
    return math.ceil(x * (1 - 1e-12))


def ssd_stream(ssd, flow, res: str):
    """The SSD model's :class:`~storeloop.model.ssd.Performance` of ``flow``'s requests on an SSD
    resource ``res`` (read or write): its request size (default whole stripes), pattern and queue
    depth (default the SSD's), where the SSD's ``accelerator`` sits."""
    size = int(flow.io_bytes) if flow.io_bytes else ssd.peak_stream().request_bytes
    stream = Stream(size, flow.pattern, flow.queue_depth or ssd.queue_depth, 1.0 if res == "read" else 0.0)
    return performance(ssd, stream, ssd.accelerator)


def demands(system: System) -> dict[tuple[str, str], float]:
    """(device, rate resource) -> its amount per unit of work, from the flows and the stages."""
    out: dict[tuple[str, str], float] = defaultdict(float)
    kinds = {d.name: d for d in system.devices}
    for f in system.flows:
        for dev, res in f.via:
            ssd = kinds[dev].ssd
            if ssd is not None:             # the flow's requests get what the SSD model gives them
                out[(dev, res)] += f.volume * kinds[dev].rates[res] / kinds[dev].count / ssd_stream(ssd, f, res).bandwidth_Bps
                continue
            out[(dev, res)] += f.volume
            iops = f"{res}_iops"
            if f.io_bytes and kinds[dev].kind == "ssd" and iops in kinds[dev].rates:
                out[(dev, iops)] += f.volume / f.io_bytes
    for s in system.stages:
        for key, per_byte in s.demands.items():
            out[key] += s.input_bytes * per_byte
    return dict(out)


def limits(system: System, units: dict[str, dict], need: dict[tuple[str, str], float]) -> dict[tuple, float]:
    """The bottleneck rule: every resource's capacity over its demand, in units of work per second."""
    out: dict[tuple, float] = {}
    for (dev, res), d in need.items():
        if d > 0:
            out[("device", dev, res)] = system.device(dev).rates[res] / d
    for s in system.stages:
        rate = units[s.name].get("rate_bytes_per_s")
        if s.instances is not None and rate and s.input_bytes > 0:
            out[("stage", s.name)] = s.instances * rate / s.input_bytes
    return out


def _name(key: tuple, system: System) -> dict:
    if key[0] == "device":
        return {"device": key[1], "resource": key[2]}
    stage = next(s for s in system.stages if s.name == key[1])
    return {"stage": key[1], "device": stage.device, "resource": "instances"}


def _tree(stage: Stage) -> dict:
    """An index tree: inner nodes of ``fanout`` children, leaves of ``leaf_keys`` keys, each key
    indexing ``key_covers`` bytes. Capacity of L levels: leaf_keys x fanout^(L-1) keys."""
    levels = stage.levels
    if levels is None:                       # the fewest levels that cover the bytes to index
        levels = 1
        while stage.leaf_keys * stage.fanout ** (levels - 1) * stage.key_covers < stage.covers:
            levels += 1
    leaves = stage.fanout ** (levels - 1)
    keys = stage.leaf_keys * leaves
    inner = (leaves - 1) // (stage.fanout - 1)
    return {"levels": levels, "on_chip_levels": levels - stage.off_chip_levels,
            "off_chip_levels": stage.off_chip_levels, "keys": keys, "leaves": leaves, "inner_nodes": inner,
            "capacity_bytes": keys * stage.key_covers}


def register_bytes(layout: str, value: float, max_value: float, block: float) -> float:
    """Register memory one record of ``value`` bytes takes.

    equal-length (NetCache): every array has one slot of ``block`` bytes per record, and there
    are ceil(max_value / block) arrays, so every record takes them all. per-array (P4-EncKV):
    array i holds blocks of block x 2^i bytes and only as many as records use it (hash-indexed), so
    a record takes its size rounded up to ``block``."""
    if layout == "equal-length":
        return math.ceil(max_value / block) * block
    return math.ceil(value / block) * block


def arrays(layout: str, max_value: float, block: float) -> list[float]:
    """The register arrays' block sizes (one array per switch stage)."""
    if layout == "equal-length":
        return [block] * math.ceil(max_value / block)
    sizes, total = [], 0.0
    while total < max_value:
        sizes.append(block * 2 ** len(sizes))
        total += sizes[-1]
    return sizes


def _register_store(stage: Stage) -> dict:
    blocks = arrays(stage.layout, stage.max_value, stage.block)
    meta = stage.metadata_bits / 8
    out: dict[str, Any] = {"layout": stage.layout, "arrays": len(blocks), "array_block_bytes": blocks}
    if stage.value_size is not None:
        out["bytes_per_record"] = register_bytes(stage.layout, stage.value_size, stage.max_value, stage.block) + meta
    if stage.values is not None:
        out["records"] = len(stage.values)
        out["bytes"] = sum(register_bytes(stage.layout, v, stage.max_value, stage.block) for v in stage.values) \
            + meta * len(stage.values)
    if stage.path_levels is not None:
        out["round_trips_per_query"] = stage.path_levels - stage.cached_levels
        out["round_trips_without_cache"] = stage.path_levels
        out["round_trip_reduction"] = stage.cached_levels / stage.path_levels
    return out


def evaluate_system(system: System, *, claims: bool = True) -> SystemResult:
    """Throughput, bottleneck, utilization, instances, static fit, energy and latency of ``system``;
    with ``claims``, each published claim beside storeloop's derivation of it."""
    units = {s.name: _stage_unit(s) for s in system.stages}
    need = demands(system)
    lim = limits(system, units, need)
    # no rate resource limits a system that is only about static resources (a switch's memory)
    x = min(lim.values()) if lim else None
    tied = [k for k, v in lim.items() if v <= x * (1 + 1e-9)]
    t = system.target_Bps / system.unit_bytes if system.target_Bps else None
    ub = system.unit_bytes

    resources: dict[str, dict] = {}
    for d in system.devices:
        for res, cap in d.rates.items():
            dem = need.get((d.name, res), 0.0)
            row = {"capacity": cap, "unit": RESOURCES[d.kind][0][res], "demand_per_unit": dem,
                   "limit_units_per_s": cap / dem if dem else None,
                   "limit_bytes_per_s": cap / dem * ub if dem else None,
                   "used": None if x is None else dem * x, "utilization": None if x is None else dem * x / cap}
            if t is not None:
                row.update(at_target=dem * t, ratio_at_target=dem * t / cap)
            resources.setdefault(d.name, {})[res] = row

    stages: dict[str, dict] = {}
    static_use: dict[tuple[str, str], dict[str, float]] = defaultdict(dict)
    for s in system.stages:
        u = units[s.name]
        row: dict[str, Any] = {"kind": s.kind, "device": s.device, "input_bytes_per_unit": s.input_bytes,
                               "instances": s.instances, **u}
        rate = u.get("rate_bytes_per_s")
        count = s.instances
        if rate:
            others = min((v for k, v in lim.items() if k != ("stage", s.name)), default=math.inf)
            need_t = _ceil(s.input_bytes * t / rate) if t is not None else None
            sat = _ceil(s.input_bytes * others / rate) if math.isfinite(others) else None
            row.update(units_per_s_per_instance=rate / s.input_bytes if s.input_bytes else None,
                       instances_needed=need_t, instances_to_saturate=sat,
                       utilization=s.input_bytes * x / (s.instances * rate) if s.instances and x else None)
            if count is None:
                count = need_t if need_t is not None else sat
            row["instances_counted"] = count
        if s.kind == "table":
            row.update(entries=s.entries, entry_bytes=s.entry_bytes, bytes=s.entries * s.entry_bytes,
                       store=".".join(s.store))
            static_use[s.store][s.name] = s.entries * s.entry_bytes
        elif s.kind == "index":
            row.update(_tree(s))
        elif s.kind == "register-store":
            row.update(_register_store(s))
            if s.device is not None:
                sw = system.device(s.device)
                if "stages" in sw.statics:
                    static_use[(s.device, "stages")][s.name] = row["arrays"]
                if "register_memory" in sw.statics and "bytes" in row:
                    static_use[(s.device, "register_memory")][s.name] = row["bytes"]
        for res, amount in s.per_instance.items():
            if count is None:
                raise s.where.error(f"stage '{s.name}' has per-instance costs but no instance count: no placed "
                                    "instances, no target and no other bottleneck",
                                    "instances: N, or a system target")
            static_use[(s.device, res)][s.name] = amount * count
        stages[s.name] = row

    static: dict[str, dict] = {}
    for d in system.devices:
        for res, avail in d.statics.items():
            by = dict(static_use.get((d.name, res), {}))
            if d.fixed.get(res):
                by = {"fixed": d.fixed[res], **by}
            used = sum(by.values())
            static.setdefault(d.name, {})[res] = {"available": avail, "used": used, "by": by,
                                                  "utilization": used / avail if avail else None,
                                                  "fits": used <= avail * (1 + 1e-12)}
    streams = []                        # what the SSD model gives each flow's requests
    for f in system.flows:
        for dev, res in f.via:
            if (ssd := system.device(dev).ssd) is not None:
                perf = ssd_stream(ssd, f, res)
                streams.append({"flow": f.name, "device": dev, "resource": res, "pattern": f.pattern,
                                "request_bytes": perf.bandwidth_Bps / perf.iops, **perf.as_dict()})
    priced = [s for s in system.stages if units[s.name].get("energy_J_per_byte") is not None]
    energy = sum(s.input_bytes * units[s.name]["energy_J_per_byte"] for s in priced) if priced else None
    out = SystemResult(
        system=system.name, file=system.path, overrides={k: v for k, v in system.overrides},
        unit={"name": system.unit_name, "bytes": ub},
        throughput=None if x is None else {"units_per_s": x, "bytes_per_s": x * ub, "bits_per_s": x * ub * 8},
        bottleneck=_name(tied[0], system) if tied else None, bottlenecks=[_name(k, system) for k in tied],
        target=None if t is None else {"bytes_per_s": t * ub, "bits_per_s": t * ub * 8, "units_per_s": t,
                                       "met": x is None or x >= t * (1 - 1e-12),
                                       "ratio": None if x is None else x / t},
        resources=resources, ssd_streams=streams, static=static, stages=stages,
        energy_J_per_unit=energy, power_W=None if energy is None or x is None else energy * x,
        latency_s=sum(u.get("invocation_s", 0.0) for u in units.values()),
        feasible=all(r["fits"] for dev in static.values() for r in dev.values()))
    if claims:
        out["claims"] = check_claims(system, out)
    return out


def lookup(result: dict, path: str, where) -> float:
    """The number at a dotted ``path`` of a result (resources.nic.out.used)."""
    node: Any = result
    for i, part in enumerate(path.split(".")):
        if not isinstance(node, dict) or part not in node:
            have = ", ".join(map(str, node)) if isinstance(node, dict) else "nothing (a value)"
            raise where.error(f"the result has no '{'.'.join(path.split('.')[:i + 1])}'", f"{have}")
        node = node[part]
    if isinstance(node, bool) or not isinstance(node, (int, float)):
        raise where.error(f"'{path}' is not a number in the result ({type(node).__name__})", "a path to a number")
    return float(node)


def check_claims(system: System, base: SystemResult) -> list[dict]:
    """Each claim: the published value, storeloop's derivation (in the variant its ``at`` names),
    their difference and a status: reproduced (inputs published, within tolerance), assumed (within
    tolerance, with inputs the paper does not publish), differs (with why), unpublished (storeloop
    cannot derive it), derived (the paper shows it without its value: storeloop's alone)."""
    # the claims are the paper's, about its configuration: they are scored on the file as written,
    # whatever --set changes in the results around them
    variants: dict[tuple, SystemResult] = {} if system.overrides else {(system.path, ()): base}

    def variant(path: str, at) -> SystemResult:
        if isinstance(at, str):                      # a scenario of another system file
            scenarios = load_system(path).scenarios
            if at not in scenarios:
                raise c.where.error(f"{path} has no scenario named '{at}'", ", ".join(scenarios) or "none")
            at = scenarios[at]
        key = (path, tuple(at))
        if key not in variants:
            variants[key] = evaluate_system(load_system(path, tuple(at)), claims=False)
        return variants[key]

    rows = []
    for c in system.claims:
        row = {"name": c.name, "published": c.published, "published_text": c.published_text, "unit": c.unit,
               "relation": c.relation, "source": c.source, "at": c.at_name or dict(c.at) or None,
               "assumes": c.assumes, "why": c.why, "missing": c.missing, "note": c.note, "storeloop": None,
               "storeloop_in_unit": None, "difference": None, "status": "unpublished"}
        if c.output is not None:
            v = lookup(variant(system.path, c.at), c.output, c.where)
            if c.relative is not None:
                other, output, at, form = c.relative
                ref = lookup(variant(other or system.path, at), output, c.where)
                if ref == 0:
                    raise c.where.error(f"'{output}' is 0, so the claim cannot be a ratio to it", "a non-zero output")
                v = v / ref if form == "ratio" else 1 - v / ref
                row["relative_to"] = {"system": other, "output": output, "form": form}
            row.update(storeloop=v, storeloop_in_unit=v / c.unit_factor,
                       difference=(v - c.published) / c.published if c.published else None)
            row["status"] = _status(c, v) if c.published is not None else "derived"
        rows.append(row)
    return rows


def _status(c: Claim, v: float) -> str:
    if c.relation == "<=":
        ok = v <= c.published * (1 + 1e-9)
    elif c.relation == ">=":
        ok = v >= c.published * (1 - 1e-9)
    else:
        ok = abs(v - c.published) <= c.tolerance * abs(c.published)
    if not ok:
        return "differs"
    return "assumed" if c.assumes else "reproduced"
