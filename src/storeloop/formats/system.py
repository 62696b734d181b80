"""The system format (``system:`` YAML): devices, stages placed on them, flows, scenarios, claims.

One typed schema: every device kind and stage kind is a pydantic model with constrained fields;
unknown keys are refused with a did-you-mean, duplicate keys by the YAML reader, a mapping where a
list goes (and the reverse) by the schema (:mod:`storeloop.formats.system_schema`). The loader turns
the validated specs into the frozen objects of :mod:`storeloop.ir.system`; the analysis
(:mod:`storeloop.system.analysis`) reads only those.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from storeloop.errors import SpecError
from storeloop.formats.load import load_arch, load_workload
from storeloop.formats.native import arch_from_native, workload_from_native
from storeloop.formats.overrides import set_arch_field, set_system_field
from storeloop.formats.quantities import (FREQ_UNITS, SIZE_UNITS, TIME_UNITS, ExpressionError, bytes_of, number,
                                          seconds_of, split_unit)
from storeloop.formats.system_devices import (COUNT_MAX, Context, count_of, rate_of, ratio_names, read_demand,
                                              read_device, read_resource, with_ssd)
from storeloop.formats.system_schema import (DEVICE_SPECS, STAGE_SPECS, EinsumStageSpec, IndexStageSpec,
                                             RegisterStoreStageSpec, StreamStageSpec, SystemSpec, TableStageSpec,
                                             _Stage)
from storeloop.formats.validate import shape as _shape, validate
from storeloop.formats.yamlio import LDict, copy_doc, error_at, load
from storeloop.ir.system import BYTES_PER_S, RESOURCES, Claim, Device, Flow, Stage, System
from storeloop.mapper.objective import NAMES as OBJECTIVES


def _stage(spec: _Stage, ctx: Context, loc: tuple, devices: dict[str, Device], ratios: dict[str, float],
           base: Path) -> Stage:
    if spec.device is not None and spec.device not in devices:
        raise ctx.err(loc + ("device",), f"no device named '{spec.device}'", ", ".join(devices))
    on = devices.get(spec.device) if spec.device else None
    per_instance = {}
    for res, v in spec.per_instance.items():
        if on is None or res not in on.statics:
            raise ctx.err(loc + ("per_instance", res), f"'{res}' is not a static resource of "
                          f"{'the device it is on' if on else 'any device: the stage has no device:'}",
                          ", ".join(on.statics) if on and on.statics else "set 'device' to an FPGA or switch with totals")
        per_instance[res] = ctx.q(count_of if res != "register_memory" else bytes_of, v, loc + ("per_instance", res),
                                  upto=COUNT_MAX)
    demands = {}
    for key, d in spec.demands.items():
        dev, res = read_resource(key, devices, ctx, loc + ("demands", key), static=False)
        dim = RESOURCES[devices[dev].kind][0][res]
        demands[(dev, res)] = read_demand(d, dim, devices[dev], ctx, loc + ("demands", key), ratios)
    common = dict(name=spec.name, kind=spec.kind, device=spec.device, input_bytes=ctx.expr(spec.input, ratios, loc + ("input",)),
                  instances=spec.instances, per_instance=per_instance, demands=demands, where=ctx.where(loc),
                  source=spec.source, assumed=spec.assumed)
    if isinstance(spec, EinsumStageSpec):
        return Stage(**common, **_einsum(spec, ctx, loc, base, devices))
    if isinstance(spec, StreamStageSpec):
        if spec.rate is None and spec.instances is not None:
            raise ctx.err(loc + ("instances",), "placed instances need a rate per instance", "rate: '10 GB/s'")
        return Stage(**common, rate_Bps=None if spec.rate is None else _stream_rate(spec, on, ctx, loc),
                     energy_pJ_per_B=None if spec.energy is None else
                     ctx.q(number, spec.energy, loc + ("energy",), "pJ per byte, a number >= 0", upto=1e9))
    if isinstance(spec, TableStageSpec):
        return Stage(**common, entries=ctx.expr(spec.entries, ratios, loc + ("entries",), upto=1e24),
                     entry_bytes=ctx.q(bytes_of, spec.entry_bytes, loc + ("entry_bytes",), positive=True, upto=1e15),
                     store=read_resource(spec.store, devices, ctx, loc + ("store",), static=True))
    if isinstance(spec, IndexStageSpec):
        if (spec.levels is None) == (spec.covers is None):
            raise ctx.err(loc, "give exactly one of 'levels' and 'covers'", "levels: 9 | covers: '100 GB'")
        if spec.levels is not None and spec.off_chip_levels > spec.levels:
            raise ctx.err(loc + ("off_chip_levels",), f"{spec.off_chip_levels} off-chip levels of a "
                          f"{spec.levels}-level tree", f"0 .. {spec.levels}")
        return Stage(**common, fanout=spec.fanout, leaf_keys=spec.leaf_keys, levels=spec.levels,
                     key_covers=ctx.q(bytes_of, spec.key_covers, loc + ("key_covers",), positive=True, upto=1e18),
                     covers=None if spec.covers is None else
                     ctx.q(bytes_of, spec.covers, loc + ("covers",), positive=True, upto=1e24),
                     off_chip_levels=spec.off_chip_levels)
    assert isinstance(spec, RegisterStoreStageSpec)
    if on is not None and on.kind != "switch":
        raise ctx.err(loc + ("device",), f"a register store sits on a switch, not on {on.kind} '{on.name}'",
                      ", ".join(d.name for d in devices.values() if d.kind == "switch") or "declare a switch")
    size = lambda v, at: ctx.q(bytes_of, v, at, positive=True, upto=1e12)  # noqa: E731
    max_value, block = size(spec.max_value, loc + ("max_value",)), size(spec.block, loc + ("block",))
    values = None
    if spec.values is not None:
        values = tuple(size(v, loc + ("values", i)) for i, v in enumerate(spec.values))
        for i, v in enumerate(values):
            if v > max_value:
                raise ctx.err(loc + ("values", i), f"value of {v:g} B is larger than max_value {max_value:g} B",
                              f"sizes up to {max_value:g} B")
    value_size = None if spec.value_size is None else size(spec.value_size, loc + ("value_size",))
    if value_size is not None and value_size > max_value:
        raise ctx.err(loc + ("value_size",), f"{value_size:g} B is larger than max_value {max_value:g} B",
                      f"up to {max_value:g} B")
    if (spec.path_levels is None) != (spec.cached_levels is None) or \
            (spec.path_levels is not None and spec.cached_levels > spec.path_levels):
        raise ctx.err(loc, "path_levels and cached_levels go together, cached_levels <= path_levels",
                      "path_levels: 4, cached_levels: 1")
    return Stage(**common, layout=spec.layout, max_value=max_value, block=block, values=values, value_size=value_size,
                 metadata_bits=spec.metadata_bits, path_levels=spec.path_levels, cached_levels=spec.cached_levels)


def _stream_rate(spec: StreamStageSpec, on: Device | None, ctx: Context, loc: tuple) -> float:
    try:
        amount, unit = split_unit(spec.rate)
    except ExpressionError as exc:
        raise ctx.err(loc + ("rate",), str(exc), "'190 MB/s' or '0.5 B/cycle'") from None
    if unit is not None and unit.endswith("/cycle"):
        if on is None or on.clock_hz is None:
            raise ctx.err(loc + ("rate",), "a rate per cycle needs the clock of the device the stage is on",
                          "device: a cpu or fpga with a clock, or a rate in B/s")
        per_cycle = ctx.q(lambda v: bytes_of(v.replace("/cycle", "")), spec.rate, loc + ("rate",), positive=True)
        return per_cycle * on.clock_hz
    return ctx.q(rate_of, spec.rate, loc + ("rate",), "'190 MB/s' or '0.5 B/cycle'", positive=True)


def _disk_from(spec: EinsumStageSpec, arch, devices: dict[str, Device], ctx: Context, loc: tuple):
    """The arch with its outermost level reading at the bandwidth of one ``disk_from`` device (its
    shared bandwidth in words per cycle): the SSD's bandwidth typed once, so --set and scenarios
    change both the device and the accelerator's Disk."""
    dev = devices.get(spec.disk_from)
    if dev is None or dev.kind != "ssd" or "read" not in dev.rates:
        raise ctx.err(loc + ("disk_from",), f"'{spec.disk_from}' is not an ssd device with a read bandwidth",
                      ", ".join(n for n, d in devices.items() if d.kind == "ssd" and "read" in d.rates) or "none")
    top = arch.levels[0]
    if top.ssd is not None:
        raise ctx.err(loc + ("disk_from",), f"{top.name} has an ssd: block, which gives its rates",
                      "disk_from with an arch whose outermost level has a bandwidth")
    typed = [k for k in spec.arch_set if str(k).startswith(f"levels.{top.name}.") and "bandwidth" in str(k)]
    if typed:
        raise ctx.err(loc + ("arch_set", typed[0]), f"'{typed[0]}' states a second time what disk_from "
                      f"'{spec.disk_from}' gives", f"the device's read_bandwidth alone (drop '{typed[0]}')")
    wpc = dev.rates["read"] / dev.count / (top.word_bits / 8) / arch.clock_hz
    level = dataclasses.replace(top, shared_bandwidth=wpc, read_bandwidth=None, write_bandwidth=None)
    return dataclasses.replace(arch, levels=(level,) + tuple(arch.levels[1:]))


def _einsum(spec: EinsumStageSpec, ctx: Context, loc: tuple, base: Path, devices: dict[str, Device]) -> dict:
    """The stage's arch (with arch_set, and its outermost level's bandwidth from ``disk_from``'s
    device) and workload (with bounds) as storeloop's typed objects."""
    import copy

    def path_of(field_name: str) -> Path:
        p = (base / getattr(spec, field_name)).resolve()
        if not p.is_file():
            raise ctx.err(loc + (field_name,), f"no such file: {p}", "a path relative to the system file")
        return p

    arch_path, work_path = path_of("arch"), path_of("workload")
    if spec.arch_set:
        doc = copy_doc(load(arch_path))
        if not isinstance(doc, dict) or "arch" not in doc:
            raise ctx.err(loc + ("arch_set",), f"{arch_path} is not a storeloop arch file, so arch_set cannot "
                          "address its fields", "arch_set only with storeloop-format arch files")
        def overridden(keys) -> LDict:
            out = copy_doc(doc)
            for key in keys:
                set_arch_field(out, str(key), spec.arch_set[key], ctx.root, loc + ("arch_set", key))
            return out

        try:
            arch = arch_from_native(overridden(spec.arch_set))
        except SpecError as exc:
            # a value the arch cannot take is an error at its arch_set line, not at the arch file's
            arch_from_native(doc)                       # (an error of the arch file itself stays there)
            for key in spec.arch_set:
                try:
                    arch_from_native(overridden([key]))
                except SpecError as alone:
                    raise ctx.err(loc + ("arch_set", key), f"{spec.arch_set[key]!r}: {alone.message} (in "
                                  f"{alone.field or 'the arch'})", alone.allowed) from None
            raise ctx.err(loc + ("arch_set",), f"these overrides together: {exc.message} (in {exc.field or 'the arch'})",
                          exc.allowed) from None
    else:
        arch = load_arch(arch_path)
    if arch.clock_hz is None:
        raise ctx.err(loc + ("arch",), f"{arch_path.name} has no clock: an einsum stage's rate needs one",
                      "an arch with 'clock: 275 MHz'")
    if spec.disk_from is not None:
        arch = _disk_from(spec, arch, devices, ctx, loc)
    if spec.bounds:
        doc = copy_doc(load(work_path))
        if not isinstance(doc, dict) or "workload" not in doc or not isinstance(doc["workload"].get("bounds"), dict):
            raise ctx.err(loc + ("bounds",), f"{work_path} is not a storeloop workload file with bounds",
                          "bounds only with storeloop-format workloads")
        have = doc["workload"]["bounds"]
        for key, value in spec.bounds.items():
            match = [k for k in have if str(k).upper() == str(key).upper()]
            if not match:
                raise ctx.err(loc + ("bounds", key), f"the workload has no index '{key}'", ", ".join(map(str, have)))
            have[match[0]] = value
        workload = workload_from_native(doc)
    else:
        workload = load_workload(work_path)
    names = [t.name for t in workload.tensors]
    stream = tuple(spec.stream) if spec.stream is not None else \
        tuple(t.name for t in workload.tensors if not t.read_write)
    for i, t in enumerate(stream):
        if t not in names:
            raise ctx.err(loc + ("stream", i), f"the workload has no tensor '{t}'", ", ".join(names))

    if spec.objective.replace(" ", "") not in OBJECTIVES:
        raise ctx.err(loc + ("objective",), f"unknown objective {spec.objective!r}", ", ".join(OBJECTIVES))
    return dict(arch=arch, workload=workload, stream=stream, objective=spec.objective, time_limit=spec.time_limit,
                budget=spec.budget,
                setup_s=ctx.q(seconds_of, spec.setup, loc + ("setup",), "a duration such as '2 us'", upto=1e6))


def _published(text: Any, ctx: Context, loc: tuple) -> tuple[float, str | None, float]:
    """'17.5 Gb/s' -> (2.1875e9 B/s, 'Gb/s', 1.25e8); '88%' -> (0.88, '%', 0.01); '1.9x' -> (1.9, 'x', 1)."""
    s = str(text).strip()
    factor, unit = 1.0, None
    m = re.fullmatch(r"(.*?)\s*(%|x)", s)
    if m:
        s, unit, factor = m.group(1), m.group(2), (0.01 if m.group(2) == "%" else 1.0)
        try:
            return number(s) * factor, unit, factor
        except ExpressionError as exc:
            raise ctx.err(loc, str(exc)) from None
    try:
        amount, unit = split_unit(s)
    except ExpressionError as exc:
        raise ctx.err(loc, str(exc), "a number with an optional unit: '17.5 Gb/s', '9.5 TiB', '1.9x', '88%'") from None
    if unit is None:
        factor = 1.0
    elif unit.endswith("/s") and unit[:-2] in SIZE_UNITS:
        factor = SIZE_UNITS[unit[:-2]]
    elif unit in SIZE_UNITS:
        factor = SIZE_UNITS[unit]
    elif unit in TIME_UNITS:
        factor = TIME_UNITS[unit]
    elif unit in FREQ_UNITS:
        factor = FREQ_UNITS[unit]
    elif "/" not in unit:
        factor = 1.0                        # a counted thing: 'cores', 'levels', 'accelerators'
    else:
        raise ctx.err(loc, f"unknown unit {unit!r}", "B, KB .. TB, KiB .. TiB, bits; '<size>/s' (GB/s, Gb/s); "
                      "s, ms, us; Hz .. GHz; %; x; or a word for a count ('cores')")
    return float(amount) * factor, unit, factor


def _overrides(raw: dict) -> tuple[tuple[str, Any], ...]:
    return tuple((str(k), v) for k, v in raw.items())


def system_from_doc(doc: Any, path: Path, overrides: tuple[tuple[str, Any], ...] = ()) -> System:
    """The typed System of a loaded ``system:`` document."""
    if not isinstance(doc, dict) or "system" not in doc:
        top = ", ".join(map(str, doc)) if isinstance(doc, dict) else _shape(doc)
        raise SpecError(f"expected a top-level 'system:' mapping, found: {top}", file=str(path), line=1,
                        allowed="'system:' (see systems/README.md)")
    extra = [k for k in doc if k != "system"]
    if extra:
        raise error_at(doc, (extra[0],), f"unknown top-level key '{extra[0]}'", allowed="'system'")
    ctx = Context(doc)
    spec: SystemSpec = validate(SystemSpec, doc["system"], doc, ("system",))
    ratios = ratio_names(spec, ctx)
    unit_bytes = ctx.q(bytes_of, spec.unit.bytes, ("system", "unit", "bytes"), positive=True, upto=1e15)
    devices: dict[str, Device] = {}
    for i, raw in enumerate(spec.devices):
        loc = ("system", "devices", i)
        model = _kind_model(raw, DEVICE_SPECS, ctx, loc, "device")
        d = validate(model, raw, doc, loc)
        if d.name in devices:
            raise ctx.err(loc + ("name",), f"device name '{d.name}' is used twice", "unique device names")
        devices[d.name] = read_device(d, ctx, loc, path.parent)
    stages: list[Stage] = []
    base = path.parent
    for i, raw in enumerate(spec.stages):
        loc = ("system", "stages", i)
        s = validate(_kind_model(raw, STAGE_SPECS, ctx, loc, "stage"), raw, doc, loc)
        if any(t.name == s.name for t in stages):
            raise ctx.err(loc + ("name",), f"stage name '{s.name}' is used twice", "unique stage names")
        stages.append(_stage(s, ctx, loc, devices, ratios, base))
    for i, raw in enumerate(spec.devices):         # an SSD typed once, on a stage's Disk
        name, of = raw.get("name"), raw.get("stage")
        if raw.get("kind") == "ssd" and of is not None:
            loc = ("system", "devices", i, "stage")
            st = next((t for t in stages if t.name == of), None)
            if st is None or st.kind != "einsum" or st.arch.levels[0].ssd is None:
                raise ctx.err(loc, f"'{of}' is not an einsum stage whose arch's Disk has an ssd: block",
                              ", ".join(t.name for t in stages if t.kind == "einsum" and t.arch.levels[0].ssd)
                              or "an einsum stage on an arch with an SSD Disk (arch/onionchopper-ssd.yaml)")
            devices[name] = with_ssd(devices[name], st.arch.levels[0].ssd)
    flows = []
    for i, f in enumerate(spec.flows):
        loc = ("system", "flows", i)
        if any(g.name == f.name for g in flows):
            raise ctx.err(loc + ("name",), f"flow name '{f.name}' is used twice", "unique flow names")
        via = tuple(read_resource(v, devices, ctx, loc + ("via", j), static=False) for j, v in enumerate(f.via))
        for j, (dev, res) in enumerate(via):
            if RESOURCES[devices[dev].kind][0][res] != BYTES_PER_S:
                raise ctx.err(loc + ("via", j), f"a flow moves bytes; '{dev}.{res}' is counted in "
                              f"{RESOURCES[devices[dev].kind][0][res]}", "bandwidth resources (B/s)")
        flows.append(Flow(f.name, ctx.expr(f.volume, ratios, loc + ("volume",)), via,
                          None if f.io_bytes is None else
                          ctx.q(bytes_of, f.io_bytes, loc + ("io_bytes",), positive=True, upto=1e12),
                          f.source, f.assumed, f.pattern, f.queue_depth))
    scenarios = {k: _overrides(v) for k, v in spec.scenarios.items()}
    for name, items in scenarios.items():          # every path a scenario sets must exist in this file
        trial = copy_doc(doc)
        for key, value in items:
            try:
                set_system_field(trial, key, value)
            except SpecError as exc:
                raise ctx.err(("system", "scenarios", name, key), exc.message, exc.allowed) from None
    claims = []
    for i, c in enumerate(spec.claims):
        loc = ("system", "claims", i)
        if c.published is None and (c.output is None or c.missing is not None or c.relation != "=" or not c.note):
            raise ctx.err(loc, f"claim '{c.name}' has no published value: storeloop derives it ('output') and a "
                          "'note' says where the paper shows it without its value", "published, or output + note")
        if (c.output is None) == (c.missing is None) and c.published is not None:
            raise ctx.err(loc, f"claim '{c.name}' needs exactly one of 'output' (what storeloop derives it as) and "
                          "'missing' (the unpublished inputs that keep it from being derived)", "output | missing")
        if isinstance(c.at, str) and c.at not in scenarios:
            raise ctx.err(loc + ("at",), f"no scenario named '{c.at}'", ", ".join(scenarios) or "define scenarios")
        at = scenarios[c.at] if isinstance(c.at, str) else _overrides(c.at or {})
        trial = copy_doc(doc)
        for key, value in at if not isinstance(c.at, str) else ():
            try:
                set_system_field(trial, key, value)
            except SpecError as exc:
                raise ctx.err(loc + ("at", key), exc.message, exc.allowed) from None
        value, unit, factor = _published(c.published, ctx, loc + ("published",)) if c.published is not None \
            else (None, None, 1.0)
        if value is not None and not (value > 0 and math.isfinite(value)):
            raise ctx.err(loc + ("published",), f"{c.published!r} is not a positive finite value",
                          "the published magnitude (a reduction is written as a positive share: '18%')")
        relative = None
        if c.relative_to is not None:
            rel = c.relative_to
            other = None
            if rel.system is not None:
                other = (path.parent / rel.system).resolve()
                if not other.is_file():
                    raise ctx.err(loc + ("relative_to", "system"), f"no such file: {other}",
                                  "a system file relative to this one")
            if isinstance(rel.at, str) and rel.system is None and rel.at not in scenarios:
                raise ctx.err(loc + ("relative_to", "at"), f"no scenario named '{rel.at}'",
                              ", ".join(scenarios) or "define scenarios")
            rel_at = rel.at if isinstance(rel.at, str) else _overrides(rel.at or {})
            relative = (None if other is None else str(other), rel.output,
                        scenarios[rel_at] if isinstance(rel_at, str) and other is None else rel_at, rel.form)
        claims.append(Claim(c.name, value, "not given" if c.published is None else str(c.published), unit, factor, c.source, c.output, at,
                            c.at if isinstance(c.at, str) else None, c.relation, c.tolerance, c.assumes, c.why,
                            c.missing, c.note, relative, ctx.where(loc)))
    target = None if spec.target is None else ctx.q(rate_of, spec.target, ("system", "target"), positive=True)
    return System(spec.name, str(path), spec.description, spec.source, spec.unit.name, unit_bytes, target, ratios,
                  tuple(devices.values()), tuple(stages), tuple(flows), scenarios, tuple(claims), overrides)


def _kind_model(raw: Any, models: dict[str, type[BaseModel]], ctx: Context, loc: tuple, what: str) -> type[BaseModel]:
    if not isinstance(raw, dict):
        raise ctx.err(loc, f"a {what} is a mapping, found {_shape(raw)}", f"{{name: ..., kind: {'|'.join(models)}, ...}}")
    kind = raw.get("kind")
    if not isinstance(kind, str) or kind not in models:
        near = difflib.get_close_matches(str(kind), list(models), n=1)
        hint = f"; did you mean '{near[0]}'?" if near else ""
        raise ctx.err(loc + (("kind",) if "kind" in raw else ()),
                      f"{'missing kind' if kind is None else f'unknown {what} kind {kind!r}'}{hint}", ", ".join(models))
    return models[kind]


# --------------------------------------------------------------------------------- overrides
def load_system(path: str | Path, overrides: dict[str, Any] | list[tuple[str, Any]] | tuple = ()) -> System:
    """Load a system file, with ``overrides`` ({path: value}, as ``--set``) applied before validation."""
    import copy

    path = Path(path)
    doc = load(path)
    items = tuple(overrides.items()) if isinstance(overrides, dict) else tuple(overrides)
    if items:
        doc = copy_doc(doc)
        for key, value in items:
            set_system_field(doc, key, value)
    try:
        return system_from_doc(doc, path, items)
    except SpecError as exc:
        if items:
            exc.message += f"\n  (with {', '.join(f'{k}={v}' for k, v in items)})"
            exc.args = (exc.render(),)
        raise


__all__ = ["load_system", "system_from_doc", "with_ssd", "rate_of"]
