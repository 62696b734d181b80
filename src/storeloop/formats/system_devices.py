"""Reading a system file's devices: the context errors are raised in (file, line, field), quantities
with their ranges, and each device kind reduced to its rate and static resources."""

from __future__ import annotations

import dataclasses
import math
import re
from pathlib import Path
from typing import Any

from storeloop.errors import SpecError
from storeloop.formats.load import load_arch
from storeloop.formats.quantities import ExpressionError, bytes_of, evaluate, hertz_of, number, rate_of as _any_rate
from storeloop.formats.ssd import load_ssd, ssd_from_doc
from storeloop.formats.system_schema import (CpuSpec, DemandSpec, FpgaSpec, LinkSpec, MemorySpec, RatioSpec, SsdSpec,
                                             SwitchSpec, SystemSpec, _Device)
from storeloop.formats.yamlio import error_at, field_path, load, locate
from storeloop.ir.system import CORES, RESOURCES, Device, Where
from storeloop.model.ssd import PCIE_LANE_BPS as PCIE_LANE


class Context:
    """The document being loaded, for errors at a path inside it."""

    def __init__(self, root: Any):
        self.root = root

    def err(self, loc: tuple, message: str, allowed: str | None = None) -> SpecError:
        return error_at(self.root, loc, message, allowed)

    def where(self, loc: tuple) -> Where:
        file, line = locate(self.root, loc)
        return Where(file, line, field_path(loc))

    def q(self, fn, value: Any, loc: tuple, allowed: str | None = None, *, positive: bool = False,
          upto: float | None = None) -> float:
        """A quantity through ``fn`` (bytes_of, rate_of, ...), finite and in range, or an error at ``loc``."""
        try:
            v = float(fn(value))
        except (ExpressionError, OverflowError, ValueError, TypeError) as exc:
            raise self.err(loc, str(exc), allowed) from None
        if not math.isfinite(v) or v < 0 or (positive and v <= 0) or (upto is not None and v > upto):
            bound = f" and at most {upto:g}" if upto is not None else ""
            raise self.err(loc, f"{value!r} is out of range", allowed or
                           f"a finite number {'> 0' if positive else '>= 0'}{bound}")
        return v

    def expr(self, value: Any, names: dict[str, float], loc: tuple, *, upto: float = 1e30) -> float:
        """Arithmetic over ``names`` (the ratios), finite, >= 0."""
        try:
            v = evaluate(value, names) if isinstance(value, str) else number(value)
        except (ExpressionError, OverflowError, ValueError, TypeError) as exc:
            known = ", ".join(sorted(names)) or "none defined"
            raise self.err(loc, str(exc), f"numbers, + - * / ** ( ) and the ratios ({known})") from None
        if not (math.isfinite(v) and 0 <= v <= upto):
            raise self.err(loc, f"{value!r} = {v:g} is out of range", f"a finite value in [0, {upto:g}]")
        return float(v)


COUNT_MAX = 1e15
RATE_RANGE = (1e-3, 1e18)              # bytes/s: a milli-byte per second .. an exabyte per second


def rate_of(value: Any) -> float:
    """A data rate in B/s within :data:`RATE_RANGE` (a physical device's, not 1e-300 or 1e40)."""
    rate = _any_rate(value)
    if not RATE_RANGE[0] <= rate <= RATE_RANGE[1]:
        raise ExpressionError(f"{value!r} = {rate:g} B/s is outside {RATE_RANGE[0]:g} .. {RATE_RANGE[1]:g} B/s")
    return rate


def count_of(value: Any) -> float:
    """A count such as 147k / '147 * K' / 2160 (fractions allowed: half BRAMs)."""
    if isinstance(value, str) and re.fullmatch(r"\s*[\d.]+\s*[kKM]\s*", value):
        v, suffix = value.strip()[:-1], value.strip()[-1]
        return float(v) * (1e6 if suffix == "M" else 1e3)
    return number(value)


def ratio_names(spec: SystemSpec, ctx: Context) -> dict[str, float]:
    names: dict[str, float] = {}
    for key, value in spec.ratios.items():
        loc = ("system", "ratios", key)
        if not str(key).isidentifier():
            raise ctx.err(loc, f"ratio name {key!r} is not an identifier", "letters, digits and '_'")
        raw = value.value if isinstance(value, RatioSpec) else value
        names[key] = ctx.expr(raw, names, loc + (("value",) if isinstance(value, RatioSpec) else ()))
    return names


def with_ssd(device: Device, ssd) -> Device:
    """``device`` whose rates come from the SSD model: its peak read and write streams (a flow's
    own request stream draws on them by :func:`storeloop.system.analysis.demands`)."""
    n = device.count
    return dataclasses.replace(device, ssd=ssd, rates={"read": ssd.peak_read_Bps() * n, "write": ssd.peak_write_Bps() * n})


def _ssd_geometry(value: dict | str, ctx: Context, loc: tuple, base: Path):
    """The SSD model of a device's ``geometry``: an ssd: block, or a file holding one (an SSD file,
    or an arch whose outermost level has one)."""
    if isinstance(value, dict):
        return ssd_from_doc(ctx.root, value, loc)
    path = base / value
    if not path.is_file():
        raise ctx.err(loc, f"no file {path}", "an SSD file (ssd: ...) or an arch file whose Disk has an ssd: block")
    top = load(path)
    if isinstance(top, dict) and "ssd" in top:
        return load_ssd(path)
    ssd = load_arch(path).levels[0].ssd
    if ssd is None:
        raise ctx.err(loc, f"{path}'s outermost level has no ssd: block", "an SSD file, or an arch whose Disk has one")
    return ssd


def read_device(spec: _Device, ctx: Context, loc: tuple, base: Path) -> Device:
    n = spec.count
    rates: dict[str, float] = {}
    statics: dict[str, float] = {}
    fixed: dict[str, float] = {}
    clock = None
    if isinstance(spec, CpuSpec):
        rates["cores"] = spec.cores * n
        if spec.clock is not None:
            clock = ctx.q(hertz_of, spec.clock, loc + ("clock",), positive=True, upto=1e12)
    elif isinstance(spec, MemorySpec):
        rates["bandwidth"] = ctx.q(rate_of, spec.bandwidth, loc + ("bandwidth",)) * n
        if spec.capacity is not None:
            statics["capacity"] = ctx.q(bytes_of, spec.capacity, loc + ("capacity",), positive=True) * n
    elif isinstance(spec, LinkSpec):
        if (spec.bandwidth is None) == (spec.pcie is None):
            raise ctx.err(loc, f"link '{spec.name}' needs exactly one of 'bandwidth' and 'pcie'",
                          "bandwidth: '100 Gb/s', or pcie: {gen: 3, lanes: 16}")
        bw = PCIE_LANE[spec.pcie.gen] * spec.pcie.lanes if spec.pcie else \
            ctx.q(rate_of, spec.bandwidth, loc + ("bandwidth",))
        if spec.duplex:
            rates.update({"in": bw * n, "out": bw * n})
        else:
            rates["bandwidth"] = bw * n
    elif isinstance(spec, SsdSpec) and (spec.geometry is not None or spec.stage is not None):
        fixed_rates = [f for f in ("read_bandwidth", "write_bandwidth", "read_iops", "write_iops")
                       if getattr(spec, f) is not None]
        if fixed_rates or (spec.geometry is not None and spec.stage is not None):
            extra = fixed_rates[0] if fixed_rates else "stage"
            raise ctx.err(loc + (extra,), f"ssd '{spec.name}' has a geometry, which gives its rates; '{extra}' "
                          "would state them a second time", "geometry or stage, or fixed rates, not both")
        if spec.capacity is not None:
            statics["capacity"] = ctx.q(bytes_of, spec.capacity, loc + ("capacity",), positive=True) * n
        device = Device(spec.name, spec.kind, n, rates, statics, fixed, clock, spec.source, spec.assumed)
        # a stage's SSD is known once the stages are read (system_from_doc)
        return with_ssd(device, _ssd_geometry(spec.geometry, ctx, loc + ("geometry",), base)) if spec.geometry \
            is not None else device
    elif isinstance(spec, SsdSpec):
        for fld, res, fn in (("read_bandwidth", "read", rate_of), ("write_bandwidth", "write", rate_of),
                             ("read_iops", "read_iops", number), ("write_iops", "write_iops", number)):
            v = getattr(spec, fld)
            if v is not None:
                rates[res] = ctx.q(fn, v, loc + (fld,), positive=True, upto=1e18) * n
        if not rates and spec.capacity is None:
            raise ctx.err(loc, f"ssd '{spec.name}' has no bandwidth, IOPS or capacity",
                          "read_bandwidth, write_bandwidth, read_iops, write_iops, capacity")
        if spec.capacity is not None:
            statics["capacity"] = ctx.q(bytes_of, spec.capacity, loc + ("capacity",), positive=True) * n
    elif isinstance(spec, FpgaSpec):
        if spec.clock is not None:
            clock = ctx.q(hertz_of, spec.clock, loc + ("clock",), positive=True, upto=1e12)
        for res in RESOURCES["fpga"][1]:
            v = getattr(spec, res)
            if v is not None:
                statics[res] = ctx.q(count_of, v, loc + (res,), upto=COUNT_MAX) * n * spec.usable
        for res, v in spec.fixed.items():
            if res not in statics:
                raise ctx.err(loc + ("fixed", res), f"'{res}' is not a resource of this FPGA",
                              ", ".join(statics) or "give the FPGA's totals first (luts, dsps, brams, ...)")
            fixed[res] = ctx.q(count_of, v, loc + ("fixed", res), upto=COUNT_MAX)
    elif isinstance(spec, SwitchSpec):
        if spec.stages is not None:
            statics["stages"] = spec.stages * n
        if spec.register_memory is not None:
            statics["register_memory"] = ctx.q(bytes_of, spec.register_memory, loc + ("register_memory",),
                                               positive=True) * n
        if spec.bandwidth is not None:
            rates["bandwidth"] = ctx.q(rate_of, spec.bandwidth, loc + ("bandwidth",)) * n
    return Device(spec.name, spec.kind, n, rates, statics, fixed, clock, spec.source, spec.assumed)


def read_resource(text: str, devices: dict[str, Device], ctx: Context, loc: tuple, *, static: bool) -> tuple[str, str]:
    """'device.resource' checked against the devices: a rate resource, or a static one."""
    dev, _, res = str(text).partition(".")
    if dev not in devices:
        raise ctx.err(loc, f"no device named '{dev}'", ", ".join(devices) or "declare devices first")
    have = devices[dev].statics if static else devices[dev].rates
    if res not in have:
        kind = "static resource" if static else "rate resource"
        return_allowed = ", ".join(f"{dev}.{r}" for r in have) or f"device '{dev}' has no {kind}s"
        raise ctx.err(loc, f"'{text}' is not a {kind} of {devices[dev].kind} '{dev}'", return_allowed)
    return dev, res


def read_demand(d: DemandSpec, dim: str, device: Device, ctx: Context, loc: tuple, ratios: dict[str, float]) -> float:
    """Resource units per byte of the stage's input. Rates are written '317 GB/s'; other
    amounts may be arithmetic over the ratios."""
    forms = [f for f in ("per_byte", "cycles_per_byte", "used") if getattr(d, f) is not None]
    if len(forms) != 1 or (d.used is None) != (d.at is None):
        raise ctx.err(loc, "give exactly one of: per_byte, cycles_per_byte, or used + at",
                      "{per_byte: 2} | {cycles_per_byte: 5} | {used: '317 GB/s', at: '75 GB/s'}")
    scale = ctx.expr(d.scale, ratios, loc + ("scale",), upto=1e6)

    def amount(value: Any, key: str) -> float:
        """A rate written with its unit ('317 GB/s'), or arithmetic over the ratios (B/s for a rate)."""
        if isinstance(value, str) and value.strip().endswith("/s"):
            return ctx.q(rate_of, value, loc + (key,), "a data rate such as '75 GB/s'", positive=True)
        return ctx.expr(value, ratios, loc + (key,), upto=1e18)

    if d.per_byte is not None:
        return amount(d.per_byte, "per_byte") * scale
    if d.cycles_per_byte is not None:
        if dim != CORES:
            raise ctx.err(loc + ("cycles_per_byte",), f"cycles per byte is a demand on CPU cores, not on {dim}",
                          "per_byte, or used + at")
        if device.clock_hz is None:
            raise ctx.err(loc + ("cycles_per_byte",), f"cpu '{device.name}' has no clock", "give the cpu a clock")
        return amount(d.cycles_per_byte, "cycles_per_byte") / device.clock_hz * scale
    at = amount(d.at, "at")
    if at <= 0:
        raise ctx.err(loc + ("at",), "the operating point's rate must be positive", "a data rate such as '75 GB/s'")
    return amount(d.used, "used") / at * scale
