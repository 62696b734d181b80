"""The shapes of a ``system:`` file: every device kind and stage kind as a pydantic model with
constrained fields (unknown keys refused with a did-you-mean, a mapping where a list goes and the
reverse named); :mod:`storeloop.formats.system` reads a validated document into :mod:`storeloop.ir.system`."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import Field, StrictFloat, StrictInt, StrictStr

from storeloop.formats.validate import Strict
from storeloop.mapper.options import DEFAULT_BUDGET

Scalar = StrictInt | StrictFloat | StrictStr       # a YAML boolean is not a quantity
NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]*")

class _Traced(Strict):
    description: str | None = Field(None, description="free text")
    source: str | None = Field(None, description="where the published values come from: 'file:line'")
    assumed: str | None = Field(None, description="what here is not published, and why the value chosen")


# ------------------------------------------------------------------------------------ devices
class _Device(_Traced):
    name: str = Field(pattern=NAME.pattern, description="unique among devices")
    kind: str
    count: int = Field(1, ge=1, le=1_000_000, description="identical units of this device")


class CpuSpec(_Device):
    kind: Literal["cpu"]
    cores: int = Field(ge=1, le=1_000_000, description="cores per unit")
    clock: Scalar | None = Field(None, description="'2.2 GHz' (needed for demands in cycles per byte)")


class MemorySpec(_Device):
    kind: Literal["memory"]
    bandwidth: Scalar = Field(description="reads + writes together, per unit: '170 GB/s'")
    capacity: Scalar | None = Field(None, description="per unit: '256 GiB'")


class PcieSpec(Strict):
    gen: int = Field(ge=1, le=6, description="PCIe generation 1..6")
    lanes: Literal[1, 2, 4, 8, 16, 32]


class LinkSpec(_Device):
    kind: Literal["link"]
    bandwidth: Scalar | None = Field(None, description="per direction and unit: '100 Gb/s' (or give 'pcie')")
    pcie: PcieSpec | None = Field(None, description="{gen: 3, lanes: 16}: the bandwidth from the PCIe generation")
    duplex: bool = Field(True, description="true: resources 'in' and 'out', each at the bandwidth; "
                         "false: one shared resource 'bandwidth'")


class SsdSpec(_Device):
    kind: Literal["ssd"]
    geometry: dict | StrictStr | None = Field(None, description="the SSD model instead of fixed rates: an ssd: "
                                              "block (docs/ssd.md), or a file holding one (an SSD file, or an "
                                              "arch whose Disk has one), relative to this file")
    stage: StrictStr | None = Field(None, description="the SSD model of this einsum stage's Disk (its arch, with "
                                    "arch_set): the accelerator's SSD typed once")
    read_bandwidth: Scalar | None = None
    write_bandwidth: Scalar | None = None
    read_iops: Scalar | None = Field(None, description="IO operations per second, e.g. '500 * K'")
    write_iops: Scalar | None = None
    capacity: Scalar | None = None


class FpgaSpec(_Device):
    kind: Literal["fpga"]
    clock: Scalar | None = Field(None, description="fabric clock: '250 MHz' (for stage rates in B/cycle)")
    luts: Scalar | None = None
    ffs: Scalar | None = None
    clbs: Scalar | None = None
    dsps: Scalar | None = None
    brams: Scalar | None = None
    urams: Scalar | None = None
    usable: float = Field(1.0, gt=0, le=1, description="fraction of each resource that placement may use")
    fixed: dict[str, Scalar] = Field(default_factory=dict, description="used by the shell / other logic, "
                                     "e.g. {luts: 27k, brams: 729}")


class SwitchSpec(_Device):
    kind: Literal["switch"]
    stages: int | None = Field(None, ge=1, le=1_000_000, description="match-action pipeline stages")
    register_memory: Scalar | None = Field(None, description="register (stateful) memory: '16 MiB'")
    bandwidth: Scalar | None = Field(None, description="switching capacity per direction: '6.4 Tb/s'")


DEVICE_SPECS = {"cpu": CpuSpec, "memory": MemorySpec, "link": LinkSpec, "ssd": SsdSpec, "fpga": FpgaSpec,
                "switch": SwitchSpec}


# ------------------------------------------------------------------------------------- stages
class DemandSpec(Strict):
    per_byte: Scalar | None = Field(None, description="resource units per byte of the stage's input "
                                    "(bytes per byte for bandwidths, IOs per byte for IOPS)")
    cycles_per_byte: Scalar | None = Field(None, description="CPU cycles per byte (cores; uses the CPU's clock)")
    used: Scalar | None = Field(None, description="an operating point: the resource used ('317 GB/s', 67 cores)...")
    at: Scalar | None = Field(None, description="...at this stage input rate ('75 GB/s')")
    scale: Scalar = Field(1, description="a factor over the ratios: the share of that demand this stage keeps")
    source: str | None = None


class _Stage(_Traced):
    name: str = Field(pattern=NAME.pattern, description="unique among stages")
    kind: str
    device: str | None = Field(None, description="the device it is placed on (its static resources pay per_instance)")
    input: Scalar = Field(1, description="bytes into this stage per unit of work; arithmetic over the ratios")
    instances: int | None = Field(None, ge=1, le=10**9, description="instances placed (omitted: as many as needed)")
    per_instance: dict[str, Scalar] = Field(default_factory=dict, description="static resources of its device per "
                                            "instance: {dsps: 81, brams: 9.9}")
    demands: dict[str, DemandSpec] = Field(default_factory=dict, description="rate demands on devices: "
                                           "{host-memory.bandwidth: {per_byte: 2}}")


class EinsumStageSpec(_Stage):
    kind: Literal["einsum"]
    arch: str = Field(description="arch YAML of one instance (relative to this file)")
    workload: str = Field(description="workload YAML of one invocation (relative to this file)")
    arch_set: dict[str, Scalar] = Field(default_factory=dict, description="arch fields to override, as in "
                                        "sweeps: {compute.instances: 1}")
    bounds: dict[str, Scalar] = Field(default_factory=dict, description="workload bounds to override: {B: 4096}")
    disk_from: str | None = Field(None, description="a device (an ssd with a read bandwidth) whose bandwidth the "
                                  "arch's outermost level takes: the fact typed once, in the device")
    stream: list[str] | None = Field(None, description="tensors whose bytes are the stage's input per "
                                     "invocation (default: every input tensor)")
    setup: Scalar = Field(0, description="fixed latency per invocation: '2 us'")
    objective: str = Field("delay,energy", description="the mapper's objective")
    time_limit: float = Field(30.0, gt=0, le=3600, description="the mapper's safety net, seconds")
    budget: StrictInt = Field(DEFAULT_BUDGET, ge=1, le=10**12, description="candidates the mapper's branch and "
                              "bound may generate (the same answer on a busy machine)")


class StreamStageSpec(_Stage):
    kind: Literal["stream"]
    rate: Scalar | None = Field(None, description="per instance, of the stage's input: '190 MB/s' or '0.5 B/cycle' "
                                "(with the clock of its device); none: the stage is limited only by its demands")
    energy: Scalar | None = Field(None, description="pJ per byte of input (optional)")


class TableStageSpec(_Stage):
    kind: Literal["table"]
    entries: Scalar = Field(description="number of entries: arithmetic over the ratios")
    entry_bytes: Scalar = Field(description="bytes per entry: '38 B'")
    store: str = Field(description="the static resource it occupies: 'table-ssd.capacity'")


class IndexStageSpec(_Stage):
    kind: Literal["index"]
    fanout: int = Field(ge=2, le=1_000_000, description="children per inner node")
    leaf_keys: int = Field(ge=1, le=1_000_000_000, description="keys per leaf node")
    key_covers: Scalar = Field(description="bytes one key indexes (a cache line: '4 KiB')")
    levels: int | None = Field(None, ge=1, le=64, description="tree levels (or give 'covers')")
    covers: Scalar | None = Field(None, description="bytes to index: the tree gets the fewest levels that do")
    off_chip_levels: int = Field(0, ge=0, le=64, description="levels kept off chip (from the leaves up)")


class RegisterStoreStageSpec(_Stage):
    kind: Literal["register-store"]
    layout: Literal["equal-length", "per-array"] = Field(description="equal-length: every record holds one slot "
                                                         "in every array (NetCache); per-array: arrays of "
                                                         "block x 2^i bytes, a record uses the blocks of its size")
    max_value: Scalar = Field(description="largest value the store holds: '400 B'")
    block: Scalar = Field(description="bytes per slot (equal-length) or of the smallest array (per-array)")
    values: list[Scalar] | None = Field(None, description="value sizes of the records held")
    value_size: Scalar | None = Field(None, description="one record's value size, for the per-record outputs")
    metadata_bits: int = Field(0, ge=0, le=1_000_000, description="lookup metadata per record (bitmaps, hash map)")
    path_levels: int | None = Field(None, ge=1, le=1000, description="round trips of a query without the cache")
    cached_levels: int | None = Field(None, ge=0, le=1000, description="of those, served by the cache")


STAGE_SPECS = {"einsum": EinsumStageSpec, "stream": StreamStageSpec, "table": TableStageSpec,
               "index": IndexStageSpec, "register-store": RegisterStoreStageSpec}


class FlowSpec(_Traced):
    name: str = Field(pattern=NAME.pattern)
    volume: Scalar = Field(description="bytes per unit of work: arithmetic over the ratios")
    via: list[str] = Field(min_length=1, description="the rate resources it passes: [nic.in, host-memory.bandwidth]")
    io_bytes: Scalar | None = Field(None, description="bytes per IO: SSD IOPS resources it passes are charged too; "
                                    "on an SSD with a geometry, its request size (default: whole stripes)")
    pattern: Literal["sequential", "random"] = Field("sequential", description="its requests' addresses, on an "
                                                       "SSD with a geometry")
    queue_depth: StrictInt | None = Field(None, ge=1, le=1 << 20, description="its requests in flight, on an SSD "
                                          "with a geometry (default: the SSD's queue_depth)")


class RatioSpec(Strict):
    value: Scalar
    source: str | None = None
    assumed: str | None = None


class UnitSpec(Strict):
    name: str = Field("byte", description="what one unit of work is: 'multiply', 'byte written'")
    bytes: Scalar = Field(1, description="bytes of system input per unit of work")


class RelativeSpec(Strict):
    output: str = Field(description="the output to divide by")
    at: str | dict[str, Scalar] | None = Field(None, description="a scenario name or overrides for it")
    system: str | None = Field(None, description="another system file (relative to this one); default: this one")
    form: Literal["ratio", "reduction"] = Field("ratio", description="ratio: value / base; reduction: 1 - value / base")


class ClaimSpec(Strict):
    name: str
    published: Scalar | None = Field(None, description="the paper's value with its unit: '17.5 Gb/s', '9.5 TiB', "
                                     "'1.9x', '88%'; omitted where the paper shows the quantity without its value "
                                     "(a figure's bars): storeloop's derivation is shown, compared with nothing")
    source: str = Field(description="'file:line' of the sentence or table that states it")
    output: str | None = Field(None, description="the result it is derived as: 'resources.nic.out.used'")
    at: str | dict[str, Scalar] | None = Field(None, description="a scenario name or {field: value} overrides")
    relation: Literal["=", "<=", ">="] = Field("=", description="'<=': the published value is a bound")
    tolerance: float = Field(0.02, gt=0, le=0.5, description="relative, for '='")
    assumes: str | None = Field(None, description="inputs the derivation takes that the paper does not publish")
    why: str | None = Field(None, description="why storeloop's value differs, where it does")
    missing: str | None = Field(None, description="the unpublished inputs that keep storeloop from deriving it")
    note: str | None = Field(None, description="how the published text is read (e.g. its MB are MiB)")
    relative_to: RelativeSpec | None = Field(None, description="derive the claim as a ratio to another output")


class SystemSpec(_Traced):
    name: str = Field(pattern=NAME.pattern)
    unit: UnitSpec = Field(default_factory=UnitSpec)
    target: Scalar | None = Field(None, description="the system input rate to reach: '75 GB/s', '100 Gb/s'")
    ratios: dict[str, Scalar | RatioSpec] = Field(default_factory=dict, description="named numbers for volumes")
    devices: list[dict[str, Any]] = Field(default_factory=list)
    stages: list[dict[str, Any]] = Field(default_factory=list)
    flows: list[FlowSpec] = Field(default_factory=list)
    scenarios: dict[str, dict[str, Scalar | None]] = Field(default_factory=dict, description="named --set overrides "
                                                           "(null removes a field)")
    claims: list[ClaimSpec] = Field(default_factory=list)
