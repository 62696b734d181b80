"""What a worker does with a sweep's point: map it (or analyse a system point) and return its row;
never raises for a bad point (the error is the result)."""

from __future__ import annotations

import json
import signal
import time
import traceback
import warnings

from storeloop.errors import StoreloopError
from storeloop.formats.load import energy_table
from storeloop.formats.mapping import mapping_from_native, mapping_to_native
from storeloop.formats.yamlio import dumps, loads
from storeloop.ir import Mapping
from storeloop.ir.check import check_mapping, fit_fanouts
from storeloop.mapper import MapTimeout, map_workload
from storeloop.mapper.imperfect import padding_text
from storeloop.mapper.options import DEFAULT_BUDGET, SAFETY_TIME_LIMIT
from storeloop.sweeps.grid import Point
from storeloop.system import evaluate_system


#: a mapped row's mapping as an object (not stored: the store takes it out), for the neighbours it
#: seeds to use without parsing its YAML text
SEED = "seed"


def _run_system_point(system: tuple, row: dict) -> None:
    loaded, error = system
    if error is not None:
        raise StoreloopError(error)
    r = evaluate_system(loaded, claims=False)
    b = r["bottleneck"]
    row.update(status="ok", throughput_Bps=None if r["throughput"] is None else r["throughput"]["bytes_per_s"],
               bottleneck=None if b is None else (f"stage {b['stage']}" if "stage" in b
                                                   else f"{b['device']}.{b['resource']}"),
               energy_pJ=None if r["energy_J_per_unit"] is None else r["energy_J_per_unit"] * 1e12,
               result=json.dumps(r, default=str))


def run_point(point: Point, seeds: tuple[str | Mapping, ...] = (), *, with_mapping: bool = False) -> dict:
    """Map one point (:class:`~storeloop.sweeps.grid.Point`: everything it needs, typed; no file is
    read here); never raises for a bad point (the error is the result). Runs in workers. ``seeds``:
    mappings of neighbouring points to start the search from, as stored (YAML text) or as objects
    (``with_mapping``); one that does not fit this point is skipped. The row's status is one of
    :data:`STATUSES`; warnings (a plug-in that fell back to another, a component priced 0), with
    those raised building the point, are kept in its ``notes``. ``with_mapping``: the row also
    holds the answer's Mapping under :data:`SEED` (not a stored column: the sweep's store takes it
    out and hands it to the neighbours it seeds)."""
    row = {"params": json.dumps(point.params, sort_keys=True), "workload": point.label, "finished": time.time(),
           "scenario": point.scenario, "weight": point.weight}
    said: list[str] = []                                     # what the mapped point says of itself
    with warnings.catch_warnings(record=True) as caught:     # plug-in fallbacks, zero prices: kept in the row
        warnings.simplefilter("always")

        try:
            if point.error is not None:
                row.update(status=point.error_status, error=point.error)
            elif point.system is not None:
                _run_system_point(point.system, row)
            else:
                said = _run_point(point, seeds, row)
        except MapTimeout as exc:
            row.update(status="timeout", error=str(exc))
        except StoreloopError as exc:
            row.update(status="invalid", error=str(exc))
        except KeyboardInterrupt:
            row.update(status="interrupted", error="interrupted (Ctrl-C)")
        except Exception:                   # a bug, not the point's fault: keep the traceback
            row.update(status="error", error=traceback.format_exc())
    if not with_mapping:
        row.pop(SEED, None)
    notes = list(dict.fromkeys([*point.notes, *(str(w.message) for w in caught), *said]))
    if notes:
        row["notes"] = "\n".join(notes)
    return row


def _run_point(point: Point, seeds, row: dict) -> list[str]:
    """Fill ``row`` with the point's mapping and prices; returns the notes it adds (an imperfect
    mapping's padding)."""
    arch, w = point.arch, point.workload
    energy = energy_table(arch, point.energy)
    starts = []
    for seed in seeds:
        try:
            if isinstance(seed, Mapping):        # as a worker returned it: the same as its text loads to
                seed = fit_fanouts(arch, seed)
                check_mapping(arch, w, seed)
            else:
                seed = mapping_from_native(loads(seed, "a neighbouring point's mapping"), arch, w, fit=True)
        except StoreloopError:
            continue                 # a neighbour's mapping that does not fit this arch (its levels)
        starts.append(seed)
    given = point.mapper
    opts = given.model_copy(update={"time_limit": given.time_limit or SAFETY_TIME_LIMIT,
                                    "budget": given.budget or DEFAULT_BUDGET})
    out = map_workload(arch, w, energy, options=opts, seeds=starts)
    r, s = out.result, out.search
    levels = level_breakdown(r)
    if "layout" in s:                    # the searched layout prices the stored mapping
        levels[arch.levels[0].name]["layout"] = s["layout"]
    row.update(status="interrupted" if s["stopped"] == "interrupted" else "ok", cycles=r.cycles, energy_pJ=r.energy_pJ, area_um2=r.area_um2,
               on_chip_area_um2=r.on_chip_area_um2, computes=r.computes,
               lower_bound_cycles=s["lower_bound_cycles"], gap=s["gap"],
               optimal=int(s["optimal"]), cycles_optimal=int(s["cycles_optimal"]),
               seconds=s["seconds"], clock_hz=arch.clock_hz, stopped=s["stopped"],
               lower_bound_energy_pJ=s["lower_bound_energy_pJ"], energy_gap=s["energy_gap"],
               mapping=dumps(mapping_to_native(out.mapping, arch, w)),
               levels=json.dumps(levels), priced_by=r.priced_by, **{SEED: out.mapping})
    if not r.padding:
        return []
    return [f"imperfect mapping: pads {padding_text(s['imperfect']['padded'])}; {r.padding:,} of its "
            f"{r.computes:,} computes are padding"]


def level_breakdown(r) -> dict:
    """Per level (and the compute units): cycles, the cycles its own ports need (``busy``: without
    the compute floor), energy (pJ), area (µm², all instances) and whether it is off chip -- what
    the figures and reproduction.md break a design's totals into."""

    out = {lvl.name: {"cycles": lvl.cycles, "busy": lvl.busy, "energy_pJ": lvl.energy_pJ,
                      "area_um2": lvl.area_total_um2, "instances": lvl.instances, "off_chip": lvl.off_chip}
           for lvl in r.levels}
    out[r.compute_name] = {"cycles": r.compute_cycles, "busy": r.compute_cycles, "energy_pJ": r.compute_energy_pJ,
                           "area_um2": r.compute_area_per_instance_um2 * r.compute_instances,
                           "instances": r.compute_instances, "off_chip": False, "compute": True}
    return out


def _worker_init() -> None:
    """Pool workers: Ctrl-C is the driver's to handle (it stops them), and a worker dies with the
    driver even when the driver is killed (Linux: parent-death signal)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)     # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def run_batch(batch: list[tuple]) -> tuple[list[dict], float]:
    """Several points in one task (the per-task cost of a pool or of Dask is shared by the batch;
    the objects its points share, their workload say, are sent once): their rows, and the seconds
    they took here (what the executors size the next batches by)."""
    t = time.monotonic()
    rows = [run_point(*args, with_mapping=True) for args in batch]
    return rows, time.monotonic() - t
