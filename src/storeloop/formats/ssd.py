"""The ``ssd:`` block: an SSD's flash geometry, timing, host link and energy, typed.

The same block is a file of its own (``storeloop ssd SSD.yaml``), the ``ssd:`` of a Disk level in
an arch, and the ``ssd:`` of a system's ssd device; :func:`ssd_from_spec` turns it into the
frozen :class:`storeloop.model.ssd.SSD` every consumer prices with. Units are in the strings
(``16 KiB``, ``60 us``, ``1000 MT/s``, ``8 bits``, ``25 mA``); errors name the file, line and
field.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, StrictBool, StrictFloat, StrictInt, field_validator

from storeloop.formats.quantities import amps, bits_of, bytes_of, joules_per_byte, seconds_of, transfers, volts, watts
from storeloop.formats.validate import Scalar, Strict, checked, top_level, validate
from storeloop.formats.yamlio import error_at, field_path, load, locate
from storeloop.model.ssd import PCIE_LANE_BPS, SSD, SsdEnergy

# NAND operating currents (3 V devices, typical): Numonyx NAND01G-B2B / NAND02G-B2C datasheet,
# Table 23 "DC characteristics, 3 V devices": IDD1 sequential read 10 mA, IDD2 program 10 mA
# (https://pdf.ic37.com/NUMONYX/NAND01G-B2B_datasheet_13780062/NAND01G-B2B_43.html).
DATASHEET = ("NAND operating currents: Numonyx NAND01G-B2B datasheet, Table 23 (3 V devices, typical): "
             "10 mA read, 10 mA program at 3 V; interface and controller energies as given (default 0)")
# The thesis's Disk: ~25 W of NVMe power at 10 GB/s = 2.5 nJ/B (seeds/001, ch. 5.3.3 and l. 1042,
# its refs [12] [16]); a whole-system figure, kept as the named alternative.
THESIS = ("the thesis's system figure: 25 W at 10 GB/s = 2.5 nJ/B "
          "(seeds/001_996655810df1ea08.txt:1042, refs [12] [16])")


def _check(fn):
    """A pydantic validator: ``fn`` must read the value (None passes)."""
    return classmethod(lambda cls, v: v if v is None else checked(fn, v))


class HostSpec(Strict):
    pcie_gen: Literal[1, 2, 3, 4, 5, 6] = Field(4, description="PCIe generation (per-lane rate after line coding)")
    lanes: Literal[1, 2, 4, 8, 16] = Field(4, description="PCIe lanes")
    max_payload: Scalar = Field("128 B", description="payload bytes per transaction-layer packet")
    packet_overhead: Scalar = Field("28 B", description="header, framing and CRC bytes per packet (MQSim: 28 B)")
    _b = field_validator("max_payload", "packet_overhead")(_check(bytes_of))


class EnergySpec(Strict):
    preset: Literal["datasheet", "thesis"] = Field("datasheet", description="'datasheet': the NAND currents and "
                                                   "interface energies below; 'thesis': 2.5 nJ per byte for everything")
    vcc: Scalar = Field("3 V", description="NAND core supply")
    read_current: Scalar = Field("10 mA", description="array current while a page is sensed (tR)")
    program_current: Scalar = Field("10 mA", description="array current while a page is programmed (tPROG)")
    channel_energy: Scalar = Field("0 pJ/bit", description="energy per bit on a flash channel (I/O)")
    host_energy: Scalar = Field("0 pJ/bit", description="energy per bit over the host link")
    active_power: Scalar = Field("0 W", description="controller power while the device is busy")
    idle_power: Scalar = Field("0 W", description="device power while idle")
    source: str | None = Field(None, description="where these numbers come from")
    _v = field_validator("vcc")(_check(volts))
    _a = field_validator("read_current", "program_current")(_check(amps))
    _e = field_validator("channel_energy", "host_energy")(_check(joules_per_byte))
    _w = field_validator("active_power", "idle_power")(_check(watts))


class SsdSpec(Strict):
    channels: StrictInt = Field(ge=1, le=1024, description="flash channels")
    chips_per_channel: StrictInt = Field(ge=1, le=256, description="NAND chips (packages, CEs) on a channel")
    dies_per_chip: StrictInt = Field(1, ge=1, le=64, description="dies (LUNs) per chip")
    planes_per_die: StrictInt = Field(1, ge=1, le=16, description="planes per die (a multi-plane read senses one page each)")
    page_size: Scalar = Field(description="flash page, e.g. '16 KiB'")
    read_latency: Scalar = Field(description="tR: sensing a page, e.g. '60 us'")
    program_latency: Scalar = Field(description="tPROG: programming a page, e.g. '600 us'")
    channel_rate: Scalar = Field(description="transfers per second of a channel, e.g. '1000 MT/s'")
    channel_width: Scalar = Field("8 bits", description="bits per transfer, e.g. '8 bits'")
    host: HostSpec = Field(default_factory=HostSpec, description="the host link: {pcie_gen, lanes}")
    die_interleaving: StrictBool = Field(True, description="true: the dies of a chip take commands at once (multi-LUN "
                                   "SSDs); false: one command per chip at a time (MQSim)")
    channel_timing: Literal["exact", "mqsim"] = Field("exact", description="'mqsim': a transfer takes whole "
                                                      "nanoseconds, int(1000 / rate in MT/s), as MQSim rounds it")
    command_time: Scalar = Field("0.29 us", description="channel time of a read command: ONFI NV-DDR2 "
                                 "tCS + 6 tWC + tWB + tRR with typical timings (20 + 150 + 100 + 20 ns)")
    controller_overhead: Scalar = Field("0 us", description="controller time added to every request's latency")
    max_iops: StrictInt | StrictFloat | None = Field(None, gt=0, description="controller limit on requests/s")
    write_cache: Scalar = Field("256 MiB", description="DRAM that acknowledges writes; '0 B': writes wait for programs")
    program_window: StrictInt | None = Field(None, ge=1, le=1 << 16, description="pages the controller lets wait for "
                                             "or be in programs at once; default one per plane of the device "
                                             "(MQSim's back-pressure buffer)")
    energy: EnergySpec = Field(default_factory=EnergySpec)
    accelerator: Literal["internal", "host"] = Field("internal", description="where the accelerator that reads "
                                                     "this SSD sits: on its flash channels, or behind the host link")
    queue_depth: StrictInt = Field(256, ge=1, le=1 << 20, description="requests an accelerator keeps in flight at "
                                   "most (the model also limits them to two child tiles' worth)")

    _s = field_validator("page_size", "channel_width", "write_cache")(_check(bytes_of))
    _t = field_validator("read_latency", "program_latency", "command_time", "controller_overhead")(_check(seconds_of))
    _r = field_validator("channel_rate")(_check(transfers))


class SsdFile(Strict):
    ssd: SsdSpec


def ssd_from_spec(spec: SsdSpec, doc, loc: tuple) -> SSD:
    """The frozen SSD of a validated block at ``loc`` in ``doc`` (for errors that need two fields)."""
    page = bytes_of(spec.page_size)
    if page < 512 or page != int(page) or page > 1 << 24:
        raise error_at(doc, loc + ("page_size",), f"a page of {page:g} B", allowed="whole bytes in 512 B .. 16 MiB")
    width_bits = bits_of(spec.channel_width)
    if width_bits % 8:
        raise error_at(doc, loc + ("channel_width",), f"{width_bits} bits is not whole bytes", allowed="8, 16, 32 bits")
    rate = transfers(spec.channel_rate)
    if rate <= 0:
        raise error_at(doc, loc + ("channel_rate",), "a channel rate must be positive", allowed="e.g. '1000 MT/s'")
    for f in ("read_latency", "program_latency"):
        if seconds_of(getattr(spec, f)) <= 0:
            raise error_at(doc, loc + (f,), "a flash latency must be positive", allowed="e.g. '60 us'")
    if spec.channel_timing == "mqsim":
        ns = int(1000 / (rate / 1e6))               # MQSim: (sim_time_type)(1000 / rate) ns per transfer
        channel_Bps = float("inf") if ns == 0 else width_bits / 8 / (ns * 1e-9)
    else:
        channel_Bps = rate * width_bits / 8
    h = spec.host
    payload, overhead = bytes_of(h.max_payload), bytes_of(h.packet_overhead)
    if payload <= 0:
        raise error_at(doc, loc + ("host", "max_payload"), "a payload must be positive", allowed="e.g. '128 B'")
    host_Bps = PCIE_LANE_BPS[h.pcie_gen] * h.lanes * payload / (payload + overhead)
    e = spec.energy
    energy = SsdEnergy(vcc_V=volts(e.vcc), read_current_A=amps(e.read_current), program_current_A=amps(e.program_current),
                       channel_J_per_B=joules_per_byte(e.channel_energy), host_J_per_B=joules_per_byte(e.host_energy),
                       active_W=watts(e.active_power), idle_W=watts(e.idle_power),
                       system_J_per_B=2.5e-9 if e.preset == "thesis" else None,
                       source=e.source or (THESIS if e.preset == "thesis" else DATASHEET))
    file, line = locate(doc, loc)
    return SSD(channels=spec.channels, chips_per_channel=spec.chips_per_channel, dies_per_chip=spec.dies_per_chip,
               planes_per_die=spec.planes_per_die, page_bytes=int(page), read_s=seconds_of(spec.read_latency),
               program_s=seconds_of(spec.program_latency), channel_Bps=channel_Bps, host_Bps=host_Bps,
               die_interleaving=spec.die_interleaving, command_s=seconds_of(spec.command_time),
               controller_s=seconds_of(spec.controller_overhead), max_iops=spec.max_iops,
               write_cache_bytes=int(bytes_of(spec.write_cache)), energy=energy, program_window=spec.program_window,
               accelerator=spec.accelerator, queue_depth=spec.queue_depth, where=(file, line, field_path(loc)))


def ssd_from_doc(doc, value, loc: tuple) -> SSD:
    """Validate the ``ssd:`` block ``value`` found at ``loc`` of ``doc`` and build its SSD."""
    return ssd_from_spec(validate(SsdSpec, value, doc, loc), doc, loc)


def load_ssd(path) -> SSD:
    """An SSD file: a top-level ``ssd:`` block."""
    doc = load(path)
    return ssd_from_spec(top_level(SsdSpec, doc, "ssd"), doc, ("ssd",))


__all__ = ["SsdSpec", "ssd_from_spec", "ssd_from_doc", "load_ssd"]
