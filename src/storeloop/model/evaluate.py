"""Cycles, energy and area of a mapping, on top of the nest analysis.

Bandwidth throttling and per-block energy are :mod:`storeloop.model.costs`'s (Timeloop v3.0.3's
``BufferLevel::ComputePerformance`` and vector-access energies), so results agree with it number for
number; total cycles are the slowest of the compute units and every level, and
area is per-instance area × instances, for every level and the compute units.

Beyond Timeloop (both off by default, so Timeloop inputs give Timeloop's numbers):

* ``cycles_per_op`` on the compute level: a unit issues one operation every that many cycles;
* ``page_size`` on a storage level (e.g. an SSD's 4 KiB page): a level's reads and updates are
  counted in whole pages of the runs each child tile occupies in its layout
  (:func:`storeloop.model.nest.page_factors`), so bandwidth and energy see sequential vs.
  scattered access.
"""

from __future__ import annotations

import math
from fractions import Fraction
from dataclasses import dataclass, field

from storeloop.errors import MappingError
from storeloop.model import costs, disk
from storeloop.model.nest import NestAnalysis, analyze, check_layout, tile_runs
from storeloop.ir import Arch, EnergyTable, Mapping, Workload
from storeloop.ir.check import padded


@dataclass(slots=True)
class TensorResult:
    kept: bool
    tile: int
    partition: int
    utilized_instances: int
    reads_per_instance: int
    fills_per_instance: int
    updates_per_instance: int
    energy_per_instance_pJ: float

    @property
    def reads_total(self) -> int:
        return self.reads_per_instance * self.utilized_instances

    @property
    def fills_total(self) -> int:
        return self.fills_per_instance * self.utilized_instances

    @property
    def updates_total(self) -> int:
        return self.updates_per_instance * self.utilized_instances

    @property
    def energy_total_pJ(self) -> float:
        return self.energy_per_instance_pJ * self.utilized_instances


@dataclass(slots=True)
class LevelResult:
    name: str
    cls: str
    instances: int
    utilized_instances: int
    cycles: int
    slowdown: float
    area_per_instance_um2: float
    energy_source: str
    tensors: dict[str, TensorResult]
    off_chip: bool = False           # the level's placement (StorageLevel.off_chip)
    streams: list = field(default_factory=list)   # an SSD-backed level's request streams (model.disk)
    # the cycles the level's own ports (an SSD: its streams) need for its counts, without the
    # compute floor ``cycles`` has (Timeloop's per-level cycles): what tells the levels apart when
    # the run is compute-bound (0: unlimited bandwidth)
    busy: int = 0

    @property
    def energy_pJ(self) -> float:
        return sum(t.energy_total_pJ for t in self.tensors.values())

    @property
    def area_total_um2(self) -> float:
        return self.area_per_instance_um2 * self.instances


@dataclass(slots=True)
class Result:
    cycles: int
    computes: int
    compute_cycles: int
    compute_name: str
    compute_instances: int
    utilized_compute_instances: int
    compute_energy_pJ: float
    compute_area_per_instance_um2: float
    compute_source: str
    levels: list[LevelResult] = field(default_factory=list)   # outermost first
    clock_hz: float | None = None                               # the arch's clock (for time_s)
    # per level below the first: its declared buffering, the run's cycles were it single-buffered
    # and whether the mapping needs it double-buffered (overlapped) to reach its cycles
    buffering: dict[str, dict] = field(default_factory=dict)
    padding: int = 0            # of the computes, those an imperfect mapping spends on its padding
    priced_by: str = ""             # what priced the energy and area: the plug-ins per component, or the ERT/ART

    @property
    def energy_pJ(self) -> float:
        """Total energy in picojoules."""
        return self.compute_energy_pJ + sum(lvl.energy_pJ for lvl in self.levels)

    @property
    def energy_J(self) -> float:
        """Total energy in joules."""
        return self.energy_pJ / 1e12

    @property
    def time_s(self) -> float | None:
        """Run time in seconds at the arch's clock (None when the arch has no clock)."""
        return self.cycles / self.clock_hz if self.clock_hz else None

    @property
    def bound_by(self) -> str:
        """What sets the cycles: the slowest level, or the compute units ('MAC (compute)')."""
        slowest = max(self.levels, key=lambda lv: lv.cycles)
        return slowest.name if slowest.cycles > self.compute_cycles else f"{self.compute_name} (compute)"

    @property
    def area_mm2(self) -> float:
        """Total area in mm² (with the off-chip levels)."""
        return self.area_um2 / 1e6

    @property
    def on_chip_area_mm2(self) -> float:
        """On-chip area in mm² (the thesis's measure)."""
        return self.on_chip_area_um2 / 1e6

    def to_dict(self) -> dict:
        """The headline numbers with their units in the keys, plus per-level cycles and energy."""
        out = {"cycles": self.cycles, "time_s": self.time_s, "energy_J": self.energy_J, "area_mm2": self.area_mm2,
               "on_chip_area_mm2": self.on_chip_area_mm2, "computes": self.computes,
               "utilization": self.utilization, "compute_energy_J": self.compute_energy_pJ / 1e12,
               "priced_by": self.priced_by}
        for lvl in self.levels:
            out[f"{lvl.name}.cycles"] = lvl.cycles
            out[f"{lvl.name}.energy_J"] = lvl.energy_pJ / 1e12
        return out

    def to_frame(self):
        """Per level and per tensor: reads, fills, updates (totals over instances) and energy in J
        (a pandas DataFrame)."""
        import pandas as pd

        rows = [{"level": lvl.name, "tensor": name, "kept": t.kept, "tile_words": t.tile, "reads": t.reads_total,
                 "fills": t.fills_total, "updates": t.updates_total, "energy_J": t.energy_total_pJ / 1e12}
                for lvl in self.levels for name, t in lvl.tensors.items()]
        return pd.DataFrame(rows)

    @property
    def area_um2(self) -> float:
        return self.compute_area_per_instance_um2 * self.compute_instances + \
            sum(lvl.area_total_um2 for lvl in self.levels)

    @property
    def on_chip_area_um2(self) -> float:
        """Area without the off-chip levels (DRAM, Disk, NIC): what the thesis counts."""
        return self.compute_area_per_instance_um2 * self.compute_instances + \
            sum(lvl.area_total_um2 for lvl in self.levels if not lvl.off_chip)

    @property
    def utilization(self) -> float:
        return self.computes / (self.cycles * self.compute_instances)


def check_capacity(arch: Arch, nest: NestAnalysis) -> None:
    for lvl, st in zip(arch.levels, nest.levels):
        if lvl.size_words is None:
            continue
        used = sum(t.tile for t in st.tensors.values() if t.kept)
        if used > lvl.size_words:
            worst = max((t for t in st.tensors.items() if t[1].kept), key=lambda kv: kv[1].tile)
            raise MappingError(
                f"couldn't map level {lvl.name}: mapped tile size {used} exceeds buffer capacity "
                f"{lvl.size_words} (largest tile: {worst[0]} with {worst[1].tile} words)",
                level=lvl.name, tensor=worst[0], kind="capacity")


def exact_cycles(r: Result, arch: Arch) -> Fraction:
    """``r``'s run time in exact rational arithmetic. Timeloop's throttling (and :func:`storeloop.model.costs.throttle`)
    is floating point, which can round a bandwidth-bound time that is an exact integer up by one
    cycle; this is the time that the rounding started from."""
    out = Fraction(r.compute_cycles)
    for lvl, lr in zip(arch.levels, r.levels):
        if lvl.ssd is not None:            # the SSD model's time is rounded up on purpose, not by floats
            out = max(out, Fraction(lr.cycles))
            continue
        rd = sum(t.reads_per_instance for t in lr.tensors.values())
        wr = sum(t.fills_per_instance + t.updates_per_instance for t in lr.tensors.values())
        for words, bw in ((rd, lvl.read_bandwidth), (wr, lvl.write_bandwidth), (rd + wr, lvl.shared_bandwidth)):
            if bw is not None:
                out = max(out, Fraction(words) / Fraction(bw))
    return out


def evaluate(arch: Arch, workload: Workload, mapping: Mapping, energy: EnergyTable) -> Result:
    """Evaluate one mapping. Raises MappingError when it cannot run (capacity, fanout, factors). An
    imperfect mapping (:attr:`Mapping.imperfect`) runs, and is priced as, the padded problem."""
    useful, workload = workload.macs, padded(workload, mapping)
    if any(lvl.layout for lvl in arch.levels):
        check_layout(arch, workload)
    nest = analyze(arch, workload, mapping)
    check_capacity(arch, nest)
    levels = []
    compute_cycles = nest.compute_cycles * arch.compute.cycles_per_op
    cycles = compute_cycles
    ssd_levels = [L for L, lvl in enumerate(arch.levels) if lvl.ssd is not None]
    runs = tile_runs(arch, workload, mapping, ssd_levels) if ssd_levels else {}
    level_cycles, fill, use = [], [], []
    for L, (lvl, st) in enumerate(zip(arch.levels, nest.levels)):
        ts = st.tensors.values()
        price = energy.storage[lvl.name]
        streams: list = []
        if L in ssd_levels:        # an SSD below the level: its cycles and energy from each tile's access pattern
            streams = disk.price(lvl, {n: (t.reads * st.utilized_instances,
                                           (t.fills + t.updates) * st.utilized_instances)
                                       for n, t in st.tensors.items() if t.kept},
                                 {n: runs[(L, n)] for n in st.tensors if (L, n) in runs})
            busy = disk.cycles(streams, arch.clock_hz)
            cyc = max(compute_cycles, busy)
            slowdown = compute_cycles / cyc
            source = f"SSD model: {lvl.ssd.energy.source}"
        else:
            cyc, slowdown = costs.throttle(lvl, [t.reads for t in ts], [t.fills for t in ts], [t.updates for t in ts],
                                           compute_cycles)
            busy = math.ceil(costs.port_cycles(lvl, sum(t.reads for t in ts), sum(t.fills + t.updates for t in ts)))
            source = price.source
        cycles = max(cycles, cyc)
        level_cycles.append(cyc)
        fill.append(max([costs.port_cycles(lvl, 0, sum(t.fills for t in ts))] +
                        ([costs.port_cycles(arch.levels[L - 1], sum(t.reads for t in nest.levels[L - 1].tensors.values()),
                                            0)] if L else [])))
        use.append(costs.port_cycles(lvl, sum(t.reads for t in ts), sum(t.updates for t in ts)))
        tensors = {}
        share = costs.cluster_share(lvl, st.utilized_instances)
        for name, t in st.tensors.items():
            if streams:
                e = sum(s.energy_pJ for s in streams if s.tensor == name) / st.utilized_instances
            else:
                e = costs.access_energy(t.reads, t.fills, t.updates, lvl.block_size, price.read_pJ,
                                        price.write_pJ) * share
            tensors[name] = TensorResult(t.kept, t.tile, t.partition,
                                         st.utilized_instances,
                                         t.reads, t.fills, t.updates, e if t.kept else 0.0)
        levels.append(LevelResult(lvl.name, lvl.cls, lvl.instances, st.utilized_instances, cyc, slowdown,
                                  price.area_um2, source, tensors, lvl.off_chip, streams, busy))
    single = {L for L, lvl in enumerate(arch.levels) if lvl.buffering == "single"}
    cycles = costs.buffered_cycles(level_cycles, fill, use, compute_cycles, single)
    buffering = {}
    for L, lvl in enumerate(arch.levels[1:], 1):
        overlapped = costs.buffered_cycles(level_cycles, fill, use, compute_cycles, single - {L})
        alone = costs.buffered_cycles(level_cycles, fill, use, compute_cycles, single | {L})
        buffering[lvl.name] = {"declared": lvl.buffering, "single_cycles": alone, "overlapped_cycles": overlapped,
                               "needs_double": alone > overlapped}
    c = arch.compute
    return Result(cycles=cycles, computes=nest.computes, compute_cycles=compute_cycles,
                  compute_name=c.name, compute_instances=c.instances,
                  utilized_compute_instances=nest.utilized_compute_instances,
                  compute_energy_pJ=nest.computes * energy.compute.read_pJ,
                  compute_area_per_instance_um2=energy.compute.area_um2,
                  compute_source=energy.compute.source, levels=levels, clock_hz=arch.clock_hz, priced_by=energy.source,
                  buffering=buffering, padding=nest.computes - useful)


def result_to_json(r: Result, arch: Arch) -> dict:
    """The result shaped like the validation corpus's ``expected.json`` (levels inner -> outer)."""
    storage = []
    for lvl, lr in zip(reversed(arch.levels), reversed(r.levels)):
        ds = {}
        for name, t in lr.tensors.items():
            ds[name] = {
                "kept": t.kept, "partition_size": t.partition if t.kept else 0,
                "utilized_capacity": t.tile if t.kept else 0,
                "utilized_instances": t.utilized_instances,
                "reads_per_instance": t.reads_per_instance, "fills_per_instance": t.fills_per_instance,
                "updates_per_instance": t.updates_per_instance,
                "reads_total": t.reads_total, "fills_total": t.fills_total, "updates_total": t.updates_total,
                "energy_per_instance_pJ": t.energy_per_instance_pJ, "energy_total_pJ": t.energy_total_pJ,
            }
        storage.append({
            "name": lr.name, "class": lr.cls, "instances": lr.instances,
            "size_words": lvl.size_words, "word_bits": lvl.word_bits, "block_size": lvl.block_size,
            "shared_bandwidth": lvl.shared_bandwidth, "read_bandwidth": lvl.read_bandwidth,
            "write_bandwidth": lvl.write_bandwidth,
            "cycles": lr.cycles, "bandwidth_throttling": lr.slowdown,
            "energy_pJ": lr.energy_pJ, "area_per_instance_um2": lr.area_per_instance_um2,
            "area_total_um2": lr.area_total_um2, "energy_source": lr.energy_source,
            "dataspaces": ds,
        })
    return {
        "summary": {"cycles": r.cycles, "computes": r.computes, "utilization": r.utilization,
                    "energy_pJ": r.energy_pJ, "area_total_um2": r.area_um2,
                    "area_on_chip_um2": r.on_chip_area_um2, "pJ_per_compute": r.energy_pJ / r.computes,
                    "priced_by": r.priced_by, **({"padding_computes": r.padding} if r.padding else {})},
        "compute": {"name": r.compute_name, "instances": r.compute_instances,
                    "utilized_instances": r.utilized_compute_instances, "computes": r.computes,
                    "cycles": r.compute_cycles, "energy_pJ": r.compute_energy_pJ,
                    "area_per_instance_um2": r.compute_area_per_instance_um2,
                    "area_total_um2": r.compute_area_per_instance_um2 * r.compute_instances,
                    "energy_source": r.compute_source},
        "storage_levels": storage,
    }
