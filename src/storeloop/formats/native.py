"""storeloop's own YAML formats (``arch:``, ``workload:``, ``mapping:``), validated with pydantic.

Every field is documented with its unit; numbers may be arithmetic (``4 * KiB``, ``2**28``) and
quantities carry units (``4 KiB``, ``64 bits``, ``10 GB/s``, ``2 GHz``). Validation errors are
turned into :class:`~storeloop.errors.SpecError` with the file, line and field path.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator

from storeloop.formats.attributes import check_attributes, cluster_size
from storeloop.formats.einsum import EinsumError, parse_einsum
from storeloop.formats.quantities import (ExpressionError, _words_per_cycle, bits_of, bytes_of, hertz_of, integer,
                                          technology_nm, words_per_cycle)
from storeloop.formats.ssd import ssd_from_doc
from storeloop.formats.validate import Scalar, Strict, check_value, checked, top_level
from storeloop.formats.yamlio import LDict, error_at, field_path, locate
from storeloop.ir import Arch, ComputeLevel, Placement, StorageLevel, Tensor, Workload
from storeloop.ir.check import ops_problem


def capacity_words(value: Scalar | None, word_bits: int) -> int | None:
    """Words per instance from '4 KiB', '64 bits', '32 words' or 'unbounded' (None)."""
    if value is None or (isinstance(value, str) and value.strip() == "unbounded"):
        return None
    if isinstance(value, str) and value.strip().endswith("words"):
        words = integer(value.strip()[: -len("words")])
    else:
        bits = bytes_of(value) * 8
        if bits % word_bits:
            raise ExpressionError(f"capacity {value!r} is not a whole number of {word_bits}-bit words")
        words = int(bits // word_bits)
    if words < 1:
        raise ExpressionError(f"capacity {value!r}: a level holds at least one word")
    return words


class StorageSpec(Strict):
    name: str = Field(description="level name, unique in the arch")
    cls: str = Field(alias="class", description="component class: Disk, DRAM, SRAM, regfile, …")
    instances: int = Field(1, ge=1, description="number of instances of this level in the whole arch")
    mesh_x: int | None = Field(None, ge=1, description="instances along X (default: all of them)")
    capacity: Scalar | None = Field(None, description="per instance: '4 KiB', '512 words', or 'unbounded' (default)")
    word_bits: Scalar = Field(64, description="bits per word: 64 or '64 bits'")
    block_size: int = Field(1, ge=1, description="words per access (vector width)")
    read_bandwidth: Scalar | None = Field(None, description="words/cycle, or 'N GB/s' with the arch clock")
    write_bandwidth: Scalar | None = Field(None, description="words/cycle, or 'N GB/s'")
    shared_bandwidth: Scalar | None = Field(None, description="reads + writes together: words/cycle or 'N GB/s'")
    buffering: Literal["double", "single"] | None = Field(
        None, description="double: a second copy that fills while the first is used (its area is charged); single: "
        "fills wait for the use to end (the cycle count serializes them); unset: fills overlap use at no cost "
        "(Timeloop's model)")
    page_size: Scalar | None = Field(None, description="access granularity, e.g. '4 KiB' (SSD page): a transfer "
                                     "whose contiguous run is shorter pays for whole pages")
    attributes: dict[str, Any] = Field(default_factory=dict, description="free attributes for energy/area models")
    ssd: dict[str, Any] | None = Field(None, description="an SSD behind this level (the ssd: block of "
                                       "'storeloop ssd'): cycles and energy from its flash model and each tile's "
                                       "access pattern, instead of a flat bandwidth")
    layout: dict[str, list[str]] = Field(default_factory=dict, description="each tensor's rank order in storage, "
                                         "outermost first, e.g. {B: [d, j, n, k, q, c]} (default: the order the "
                                         "workload declares); the runs each tile reads follow it. First level only")
    placement: Placement | None = Field(None, description="on_chip or off_chip: whether the level counts in the "
                                        "accelerator's on-chip area (default: off_chip for DRAM, Disk, SSD, "
                                        "NVMe, NIC and network classes)")

    @field_validator("word_bits")
    @classmethod
    def _bits(cls, v):
        return checked(bits_of, v)

    @field_validator("capacity")
    @classmethod
    def _cap(cls, v):
        return checked(lambda x: capacity_words(x, 1), v)

    @field_validator("read_bandwidth", "write_bandwidth", "shared_bandwidth")
    @classmethod
    def _bw(cls, v):
        if v is None:
            return v
        return checked(lambda x: _words_per_cycle(x, word_bits=64, clock_hz=1.0), v)   # syntax; range with the clock


class ComputeSpec(Strict):
    name: str
    cls: str = Field(alias="class", description="compute class: intmac, fpmac, modmac, …")
    instances: int = Field(1, ge=1)
    mesh_x: int | None = Field(None, ge=1)
    word_bits: Scalar = 64
    cycles_per_op: int = Field(1, ge=1, le=2**20, description="initiation interval: cycles between two operations "
                               "of one unit (1 = fully pipelined, Timeloop's assumption)")
    attributes: dict[str, Any] = Field(default_factory=dict)

    @field_validator("word_bits")
    @classmethod
    def _bits(cls, v):
        return checked(bits_of, v)


class ArchSpec(Strict):
    name: str
    clock: Scalar | None = Field(None, description="clock frequency: '2 GHz' (needed for bandwidths in B/s)")
    technology: str | None = Field(None, description="technology node, e.g. '45nm'")
    attributes: dict[str, Any] = Field(default_factory=dict)
    levels: list[StorageSpec] = Field(min_length=1, description="storage levels, outermost (e.g. Disk) first")
    compute: ComputeSpec

    @field_validator("clock")
    @classmethod
    def _clock(cls, v):
        if v is not None and not 1 <= check_value(hertz_of, v) <= 1e12:
            raise ValueError(f"clock {v!r} is outside 1 Hz .. 1 THz")
        return v

    @field_validator("technology")
    @classmethod
    def _tech(cls, v):
        return v if v is None else checked(technology_nm, v)


class WorkloadSpec(Strict):
    name: str
    einsum: str = Field(description="e.g. 'C[m,n] = A[m,k] * B[k,n]'")
    bounds: dict[str, Scalar] = Field(description="bound of every einsum index, e.g. {M: 64, N: 64, K: 64}")
    bits: Scalar | dict[str, Scalar] = Field(64, description="bits per element, or per tensor {A: 64, …}")
    description: str | None = None
    source: str | None = None


# ----------------------------------------------------------------------------------- arch
def _where(doc: LDict, loc: tuple) -> tuple:
    """(file, line, field path) of a component, for the errors of pricing it later."""
    file, line = locate(doc, loc)
    return file, line, field_path(loc)


def arch_from_native(doc: LDict) -> Arch:
    spec: ArchSpec = top_level(ArchSpec, doc, "arch")
    clock = hertz_of(spec.clock) if spec.clock is not None else None
    levels = []
    names = set()
    for i, s in enumerate(spec.levels):
        loc = ("arch", "levels", i)
        if s.name in names or s.name == spec.compute.name:
            raise error_at(doc, loc + ("name",), f"level name '{s.name}' is used twice", allowed="unique names")
        names.add(s.name)
        wb = bits_of(s.word_bits)
        check_attributes(doc, loc + ("attributes",), s.attributes, s.cls)

        def bw(field: str):
            v = getattr(s, field)
            if v is None:
                return None
            try:
                return words_per_cycle(v, word_bits=wb, clock_hz=clock)
            except ExpressionError as exc:
                raise error_at(doc, loc + (field,), str(exc)) from None

        try:
            size = capacity_words(s.capacity, wb)
        except ExpressionError as exc:
            raise error_at(doc, loc + ("capacity",), str(exc)) from None
        if size is not None and s.block_size > size:
            raise error_at(doc, loc + ("block_size",), f"a block of {s.block_size} words is larger than the level "
                           f"({size} words)", allowed=f"a block size of at most {size} words")
        page = None
        if s.page_size is not None:
            try:
                page = bytes_of(s.page_size)
            except ExpressionError as exc:
                raise error_at(doc, loc + ("page_size",), str(exc), allowed="a size such as '4 KiB'") from None
            if page < wb / 8 or page != int(page) or page > 2**30:
                raise error_at(doc, loc + ("page_size",), f"page size {page:g} B is smaller than a word, not whole, "
                               f"or larger than 1 GiB", allowed=f"a whole number of bytes in {wb // 8} .. 2**30")
            page = int(page)
        ssd = shared = None
        if s.ssd is not None:
            if i > 0:
                raise error_at(doc, loc + ("ssd",), f"an ssd: block on level {s.name!r}: the SSD is the storage the "
                               f"hierarchy starts from", allowed=f"ssd: on the first level ({spec.levels[0].name}) only")
            ssd, shared = _ssd_level(doc, loc, s, wb, clock)
        if s.layout and i > 0:
            raise error_at(doc, loc + ("layout",), f"a layout on level {s.name!r}: a layout is how the storage the "
                           f"hierarchy starts from holds its tensors", allowed=f"layout: on the first level "
                           f"({spec.levels[0].name}) only")
        if s.layout and ssd is None and page is None:
            raise error_at(doc, loc + ("layout",), f"a layout on level {s.name!r}, which moves whole words: it "
                           f"changes nothing there", allowed="layout: on a level with an ssd: block or a page_size")
        if s.mesh_x is not None and s.instances % s.mesh_x:
            raise error_at(doc, loc + ("mesh_x",), f"mesh_x {s.mesh_x} does not divide the {s.instances} instances",
                           allowed=f"a divisor of {s.instances}")
        if i > 0 and s.instances % spec.levels[i - 1].instances:
            raise error_at(doc, loc + ("instances",),
                           f"{s.instances} instances cannot be spread over the {spec.levels[i - 1].instances} of the level above",
                           allowed=f"a multiple of {spec.levels[i - 1].instances}")
        levels.append(StorageLevel(name=s.name, cls=s.cls, instances=s.instances, mesh_x=s.mesh_x, size_words=size,
                                   word_bits=wb, block_size=s.block_size, read_bandwidth=bw("read_bandwidth"),
                                   write_bandwidth=bw("write_bandwidth"), shared_bandwidth=shared if ssd else bw("shared_bandwidth"),
                                   page_bytes=page, ssd=ssd, cluster_size=cluster_size(s.attributes),
                                   buffering=s.buffering,
                                   attributes=dict(s.attributes), where=_where(doc, loc),
                                   placement=s.placement,
                                   layout={t: tuple(str(r).replace(" ", "").lower() for r in ranks)
                                           for t, ranks in s.layout.items()},
                                   layout_where=_where(doc, loc + ("layout",)) if s.layout else None))
    c = spec.compute
    check_attributes(doc, ("arch", "compute", "attributes"), c.attributes, c.cls)
    if c.mesh_x is not None and c.instances % c.mesh_x:
        raise error_at(doc, ("arch", "compute", "mesh_x"), f"mesh_x {c.mesh_x} does not divide the {c.instances} "
                       f"compute units", allowed=f"a divisor of {c.instances}")
    if c.instances % levels[-1].instances:
        raise error_at(doc, ("arch", "compute", "instances"),
                       f"{c.instances} compute units cannot be spread over {levels[-1].instances} {levels[-1].name}s",
                       allowed=f"a multiple of {levels[-1].instances}")
    compute = ComputeLevel(name=c.name, cls=c.cls, instances=c.instances, mesh_x=c.mesh_x,
                           word_bits=bits_of(c.word_bits), cycles_per_op=c.cycles_per_op,
                           attributes=dict(c.attributes), where=_where(doc, ("arch", "compute")))
    return Arch(name=spec.name, levels=tuple(levels), compute=compute, clock_hz=clock,
                technology=spec.technology, attributes=dict(spec.attributes))


def _ssd_level(doc: LDict, loc: tuple, s: StorageSpec, word_bits: int, clock: float | None):
    """The SSD of a level's ``ssd:`` block and its peak read bandwidth in words/cycle."""
    for f in ("read_bandwidth", "write_bandwidth", "shared_bandwidth", "page_size"):
        if getattr(s, f) is not None:
            raise error_at(doc, loc + (f,), f"a level with an ssd: block takes its bandwidth and access granularity "
                           f"from the SSD model", allowed=f"either ssd: or {f}, not both")
    if clock is None:
        raise error_at(doc, ("arch", "clock"), "a level with an ssd: block needs the arch's clock",
                       allowed="clock: '2 GHz'")
    ssd = ssd_from_doc(doc, s.ssd, loc + ("ssd",))
    return ssd, ssd.peak_read_Bps() / (word_bits / 8) / clock


# ------------------------------------------------------------------------------- workload
def workload_from_native(doc: LDict) -> Workload:
    return workload_at(doc, ("workload",), top_level(WorkloadSpec, doc, "workload"))


def workload_at(doc: LDict, at: tuple, spec: WorkloadSpec) -> Workload:
    """The workload ``spec`` validated at ``at`` in ``doc`` (its errors at their lines there)."""
    try:
        dims, tensors = parse_einsum(spec.einsum)
    except EinsumError as exc:
        raise error_at(doc, at + ("einsum",), str(exc),
                       allowed="OUT[i,j] = IN1[i,k] * IN2[k,j]; indices may be sums like 2*p+r") from None
    bounds_in = {}
    for k, v in spec.bounds.items():
        if str(k).upper() in bounds_in:
            raise error_at(doc, at + ("bounds", k), f"'{k}' and '{bounds_in[str(k).upper()][0]}' name the "
                           f"same index (index names are not case-sensitive)", allowed="each index once")
        bounds_in[str(k).upper()] = (k, v)
    bounds = []
    for d in dims:
        if d not in bounds_in:
            raise error_at(doc, at + ("bounds",), f"no bound for index {d}", allowed=f"bounds for {', '.join(dims)}")
        key, v = bounds_in[d]
        try:
            b = integer(v)
        except ExpressionError as exc:
            raise error_at(doc, at + ("bounds", key), str(exc)) from None
        if b < 1:
            raise error_at(doc, at + ("bounds", key), f"bound {b} must be >= 1")
        bounds.append(b)
        if ops_problem(bounds):
            raise error_at(doc, at + ("bounds", key), ops_problem(bounds),
                           allowed="bounds whose product stays below 2**62")
    unknown = set(bounds_in) - set(dims)
    if unknown:
        key = bounds_in[sorted(unknown)[0]][0]
        raise error_at(doc, at + ("bounds", key), f"'{key}' is not an index of the einsum", allowed=", ".join(dims))
    names = [t[0] for t in tensors]
    if isinstance(spec.bits, dict):
        bad = set(spec.bits) - set(names)
        if bad:
            raise error_at(doc, at + ("bits", sorted(bad)[0]), "not a tensor of the einsum", allowed=", ".join(names))

    def width(value, loc):
        try:
            return bits_of(value)
        except ExpressionError as exc:
            raise error_at(doc, loc, str(exc), allowed="a positive whole number of bits, e.g. 64 or '8 B'") from None

    if isinstance(spec.bits, dict):
        bits = {n: width(spec.bits.get(n, 64), at + ("bits", n)) for n in names}
    else:
        bits = {n: width(spec.bits, at + ("bits",)) for n in names}
    ts = tuple(Tensor(name=n, ranks=tuple(tuple((dims.index(v.upper()), c) for v, c in rank) for rank in ranks),
                      read_write=rw, bits=bits[n]) for n, ranks, rw in tensors)
    return Workload(name=spec.name, dims=tuple(dims), bounds=tuple(bounds), tensors=ts, einsum=spec.einsum)
