"""A system, as the analysis reads it: devices reduced to resources, stages placed on them, flows,
scenarios and claims (built by :mod:`storeloop.formats.system`).

Every device reduces to *resources*: rate resources (bytes/s, cores, IO/s) that every unit of work
draws on, and static ones (bytes, LUTs, DSPs, pipeline stages) that placement uses up.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from storeloop.errors import SpecError

# resource dimensions: what one unit of the resource is
BYTES_PER_S, CORES, IOPS, BYTES, COUNT = "B/s", "cores", "IO/s", "B", "count"

#: per device kind: its rate resources and static resources, with their dimension
RESOURCES: dict[str, tuple[dict[str, str], dict[str, str]]] = {
    "cpu": ({"cores": CORES}, {}),
    "memory": ({"bandwidth": BYTES_PER_S}, {"capacity": BYTES}),
    "link": ({"in": BYTES_PER_S, "out": BYTES_PER_S, "bandwidth": BYTES_PER_S}, {}),
    "ssd": ({"read": BYTES_PER_S, "write": BYTES_PER_S, "read_iops": IOPS, "write_iops": IOPS}, {"capacity": BYTES}),
    "fpga": ({}, {"luts": COUNT, "ffs": COUNT, "clbs": COUNT, "dsps": COUNT, "brams": COUNT, "urams": COUNT}),
    "switch": ({"bandwidth": BYTES_PER_S}, {"stages": COUNT, "register_memory": BYTES}),
}


@dataclass(frozen=True)
class Where:
    """A spot in an input file, for errors found after loading."""

    file: str | None
    line: int | None
    field: str

    def error(self, message: str, allowed: str | None = None) -> SpecError:
        return SpecError(message, file=self.file, line=self.line, field=self.field, allowed=allowed)


@dataclass(frozen=True)
class Device:
    name: str
    kind: str
    count: int
    rates: dict[str, float]             # rate resource -> capacity of all units (B/s, cores, IO/s)
    statics: dict[str, float]           # static resource -> usable amount of all units
    fixed: dict[str, float]             # static resource -> amount already used (shell)
    clock_hz: float | None
    source: str | None
    assumed: str | None
    ssd: Any = None                     # an SSD model (storeloop.model.ssd.SSD): rates per request stream


@dataclass(frozen=True)
class Stage:
    name: str
    kind: str
    device: str | None
    input_bytes: float                  # bytes into the stage per unit of work
    instances: int | None               # placed; None: as many as needed
    per_instance: dict[str, float]      # static resource of `on` -> amount per instance
    demands: dict[tuple[str, str], float]   # (device, rate resource) -> amount per byte of stage input
    where: Where
    source: str | None
    assumed: str | None
    # einsum
    arch: Any = None
    workload: Any = None
    stream: tuple[str, ...] = ()
    setup_s: float = 0.0
    objective: str = "delay,energy"
    time_limit: float = 30.0
    budget: int | None = None          # candidates the mapper may try (the loader sets the file's, or its default)
    # stream
    rate_Bps: float | None = None
    energy_pJ_per_B: float | None = None
    # table
    entries: float | None = None
    entry_bytes: float | None = None
    store: tuple[str, str] | None = None
    # index
    fanout: int | None = None
    leaf_keys: int | None = None
    key_covers: float | None = None
    levels: int | None = None
    covers: float | None = None
    off_chip_levels: int = 0
    # register-store
    layout: str | None = None
    max_value: float | None = None
    block: float | None = None
    values: tuple[float, ...] | None = None
    value_size: float | None = None
    metadata_bits: int = 0
    path_levels: int | None = None
    cached_levels: int | None = None


@dataclass(frozen=True)
class Flow:
    name: str
    volume: float                       # bytes per unit of work
    via: tuple[tuple[str, str], ...]
    io_bytes: float | None
    source: str | None
    assumed: str | None
    pattern: str = "sequential"
    queue_depth: int | None = None


@dataclass(frozen=True)
class Claim:
    name: str
    published: float | None             # SI (B, B/s, s, Hz) or a plain number; None: not given (derived only)
    published_text: str
    unit: str | None                    # the unit it was published in
    unit_factor: float                  # SI per published unit
    source: str
    output: str | None
    at: tuple[tuple[str, Any], ...]     # the overrides it is derived under
    at_name: str | None
    relation: str
    tolerance: float
    assumes: str | None
    why: str | None
    missing: str | None
    note: str | None
    relative: tuple | None               # (system path or None, output, overrides, form)
    where: Where


@dataclass(frozen=True)
class System:
    name: str
    path: str
    description: str | None
    source: str | None
    unit_name: str
    unit_bytes: float
    target_Bps: float | None
    ratios: dict[str, float]
    devices: tuple[Device, ...]
    stages: tuple[Stage, ...]
    flows: tuple[Flow, ...]
    scenarios: dict[str, tuple[tuple[str, Any], ...]]
    claims: tuple[Claim, ...]
    overrides: tuple[tuple[str, Any], ...] = field(default=())

    def device(self, name: str) -> Device:
        return next(d for d in self.devices if d.name == name)


# --------------------------------------------------------------------------------- the loader
