"""The rotation-perturbation pipeline of privacy-offloading smart storage (seed 000, SYSTOR '21).

Columns of a table are perturbed in triplets: every row's 3-vector of doubles is multiplied by a
3x3 rotation matrix per dataset (paper ch. 3, 4.2)::

    Y[t,g,i] = R[g,i,j] * X[t,g,j]

t runs over rows, g over column triplets, i/j over the 3 coordinates. The pipeline's
column->row and row->column stages transpose pages of columnar data (512 B .. KB pages, ch. 4.2)
so the rotation sees rows; in storeloop they are the page buffer level of ``arch/rotation-nic.yaml``
that X enters and Y leaves by, page by page. The source and sink is the network (NIC) at line rate.

Paper figures: at the 156.25 MHz network clock, 10 Gbps needs 8 B/cycle; one rotation core outputs
a 3-vector of doubles every 18 cycles (1.33 B/cycle), so 6 cores reach line rate (ch. 4.2), and
25 / 40 Gbps need more cores (ch. 5.1, Fig. 10a). :func:`cores_for_line_rate` answers that with
storeloop's mapper.
"""

from __future__ import annotations

import dataclasses
import math

from storeloop.errors import SpecError
from storeloop.spec.types import Arch, Workload
from storeloop.workloads.pir import einsum_workload

ROTATION_EINSUM = "Y[t,g,i] = R[g,i,j] * X[t,g,j]"
NETWORK_CLOCK_HZ = 156.25e6          # the paper's network clock (ch. 4.2)


def rotation(rows: int = 30720, groups: int = 1) -> list[Workload]:
    """One batch of ``rows`` rows x ``groups`` column triplets, doubles (64 bit).

    The default 30,720 rows (= 2^11 x 3 x 5, 60 pages of 4 KiB per column) divide evenly over 6,
    15 and 24 cores, so line rate is not lost to an uneven split of rows over cores.
    """
    if rows < 1 or groups < 1:
        raise SpecError(f"rows={rows}, groups={groups}: both must be at least 1", field="rows",
                        allowed="positive integers")
    return [einsum_workload(f"rotation-{rows}x{groups}", ROTATION_EINSUM,
                            {"T": rows, "G": groups, "I": 3, "J": 3}, bits=64)]


def line_rate_words_per_cycle(gbps: float, word_bits: int = 64, clock_hz: float = NETWORK_CLOCK_HZ) -> float:
    """Words per cycle a line rate carries in each direction: 10 Gbps at 156.25 MHz = 8 B = 1 word."""
    return gbps * 1e9 / clock_hz / word_bits


def with_line_rate(arch: Arch, gbps: float, cores: int) -> Arch:
    """``arch`` with its top (NIC) level at ``gbps`` in each direction and ``cores`` rotation cores
    (levels with one instance per core follow the core count)."""
    nic = arch.levels[0]
    wpc = line_rate_words_per_cycle(gbps, nic.word_bits, arch.clock_hz or NETWORK_CLOCK_HZ)
    levels = [dataclasses.replace(nic, read_bandwidth=wpc, write_bandwidth=wpc, shared_bandwidth=None)]
    levels += [dataclasses.replace(lvl, instances=cores, mesh_x=None) if lvl.instances == arch.compute.instances
               else lvl for lvl in arch.levels[1:]]
    compute = dataclasses.replace(arch.compute, instances=cores, mesh_x=None)
    return dataclasses.replace(arch, name=f"{arch.name}-{gbps:g}Gbps-{cores}cores",
                               levels=tuple(levels), compute=compute)


def nic_cycles(workload: Workload, gbps: float, word_bits: int = 64, clock_hz: float = NETWORK_CLOCK_HZ) -> int:
    """Cycles the NIC needs at line rate: inputs in and outputs out, each direction at ``gbps``."""
    wpc = line_rate_words_per_cycle(gbps, word_bits, clock_hz)
    ins = sum(workload.tensor_elements(t) for t in workload.tensors if not t.read_write)
    outs = sum(workload.tensor_elements(t) for t in workload.tensors if t.read_write)
    return math.ceil(max(ins, outs) / wpc)


def cores_for_line_rate(arch: Arch, workload: Workload, energy_for, gbps: float, *, max_cores: int = 64,
                        time_limit: float = 10.0) -> tuple[int, dict]:
    """The fewest cores whose best mapping (storeloop's mapper) runs at the NIC's line-rate bound.

    ``energy_for(arch)`` prices an arch variant. Returns (cores, details): the NIC-bound cycles,
    the mapped cycles of every core count tried and the winning MapResult (``best``).
    """
    from storeloop.mapper import map_workload

    bound = nic_cycles(workload, gbps, arch.levels[0].word_bits, arch.clock_hz or NETWORK_CLOCK_HZ)
    # fewer cores than this cannot even compute in the NIC's time
    first = max(1, math.ceil(workload.macs * arch.compute.cycles_per_op / bound))
    tried = {}
    for cores in range(first, max_cores + 1):
        variant = with_line_rate(arch, gbps, cores)
        out = map_workload(variant, workload, energy_for(variant), time_limit=time_limit)
        tried[cores] = out.result.cycles
        if out.result.cycles <= bound:
            return cores, {"gbps": gbps, "nic_bound_cycles": bound, "mapped_cycles": tried, "best": out}
    raise SpecError(f"{max_cores} rotation cores do not reach {gbps} Gbps", field="cores",
                    allowed=f"more than {max_cores} cores")


def line_rate_study(arch: Arch, workload: Workload, rates=(10, 25, 40), *, time_limit: float = 5.0) -> list[dict]:
    """Per line rate: the cores it needs, cycles per batch against the NIC bound, energy per output
    3-vector and on-chip area (everything but the NIC), priced by the energy plug-ins."""
    from storeloop.energy import Registry, price

    reg = Registry.discover()
    rows = []
    for gbps in rates:
        cores, info = cores_for_line_rate(arch, workload, lambda a: price(a, reg)[0], gbps, time_limit=time_limit)
        r = info["best"].result
        rows.append({"gbps": gbps, "cores": cores, "cycles": r.cycles, "nic_bound_cycles": info["nic_bound_cycles"],
                     "pJ_per_vector": r.energy_pJ / (workload.macs // 9), "area_mm2": r.on_chip_area_um2 / 1e6})
    return rows


SCHEMES = {"rotation": rotation}
