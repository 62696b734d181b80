"""Running a sweep: each point's key (everything that decides its result), the point itself (mapped,
or a system analysed) and the pools that run them: local processes or a Dask cluster."""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import os
import signal
import socket
import sqlite3
import sys
import time
import traceback
import warnings
from pathlib import Path
from typing import Iterator

import yaml
from tqdm import tqdm

from storeloop.energy import Registry, price
from storeloop.errors import StoreloopError
from storeloop.formats.load import energy_table_from_docs
from storeloop.formats.mapping import mapping_from_native, mapping_to_native
from storeloop.formats.sweep import Sweep
from storeloop.formats.yamlio import LDict, loads
from storeloop.mapper import MapTimeout, map_workload
from storeloop.mapper.options import DEFAULT_BUDGET, SAFETY_TIME_LIMIT
from storeloop.sweeps.grid import Point, PointMaker, _point_doc, points, satisfies
from storeloop.sweeps.store import (DONE, FINAL, STATUSES, Lease, failed_checksums, open_store, relabel_weights,
                                    row_checksum)
from storeloop.system import evaluate_system, load_system


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def run_context(sweep: Sweep) -> dict:
    """What decides every point's result besides its arch and workload: the mapper settings, the
    energy source (ERT/ART contents, or the plug-ins with their versions) and storeloop's version."""
    from importlib.metadata import PackageNotFoundError, version

    def ver(name: str) -> str:
        try:
            return version(name)
        except PackageNotFoundError:
            return ""

    files = sweep.energy.model_dump(exclude_none=True)
    if files:
        energy = {k: _digest(Path(v).read_bytes()) for k, v in sorted(files.items())}
    else:
        energy = {"plugins": [(p.name, str(getattr(p, "version", ""))) for p in Registry.discover(use_cache=False).plugins],
                  "packages": {n: ver(n) for n in ("hwcomponents", "hwcomponents-cacti", "hwcomponents-library")}}
    return {"mapper": sweep.mapper.model_dump(exclude_unset=True), "energy": energy, "storeloop": ver("storeloop")}


def point_key(sweep: Sweep, params: dict, workload: Path, context: dict, files: dict | None = None,
              doc: LDict | None = None, system=None) -> str:
    """A hash of everything that decides the point's result: its parameters, the arch after
    substitution (``doc`` when the caller has it), the workload file's content and ``context``
    (:func:`run_context`); for a system sweep, the system loaded with the point's parameters
    (``system``: (System or None, error) when the caller has it). A changed input gives a new key,
    so the point runs again and the old row is kept, marked stale."""
    if sweep.system_file is not None:
        loaded, _ = system if system is not None else point_system(sweep, params)
        inputs = repr(loaded) if loaded is not None else \
            _digest(sweep.system_file.read_bytes()) + json.dumps(params, sort_keys=True, default=str)
        return _digest(json.dumps({"params": params, "system": inputs, **context}, sort_keys=True, default=str).encode())
    files = {} if files is None else files
    if workload not in files:
        files[workload] = _digest(Path(workload).read_bytes())
    arch = doc if doc is not None else _point_doc(sweep, params)
    payload = {"params": params, "arch": arch, "workload": files[workload], **context}
    return _digest(json.dumps(payload, sort_keys=True, default=str).encode())


def point_system(sweep: Sweep, params: dict) -> tuple:
    """A system point's system, loaded once with its parameters (for its key and for its run):
    (System, None), or (None, why it does not load; the point stores it)."""
    try:
        return load_system(sweep.system_file, list(_expand(params))), None
    except StoreloopError as exc:
        return None, str(exc)


def _expand(params: dict):
    for key, value in params.items():
        for p in key.split("+"):
            yield p, value


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


def run_point(point: Point, seeds: tuple[str, ...] = ()) -> dict:
    """Map one point (:class:`~storeloop.sweeps.grid.Point`: everything it needs, typed; no file is
    read here); never raises for a bad point (the error is the result). Runs in workers. ``seeds``:
    mapping YAML texts (of neighbouring points) to start the search from; one that does not fit this
    point is skipped. The row's status is one of :data:`STATUSES`; warnings (a plug-in that fell
    back to another, a component priced 0), with those raised building the point, are kept in its
    ``notes``."""
    row = {"params": json.dumps(point.params, sort_keys=True), "workload": point.label, "finished": time.time(),
           "scenario": point.scenario, "weight": point.weight}
    with warnings.catch_warnings(record=True) as caught:     # plug-in fallbacks, zero prices: kept in the row
        warnings.simplefilter("always")

        try:
            if point.error is not None:
                raise StoreloopError(point.error)
            if point.system is not None:
                _run_system_point(point.system, row)
            else:
                _run_point(point, seeds, row)
        except MapTimeout as exc:
            row.update(status="timeout", error=str(exc))
        except StoreloopError as exc:
            row.update(status="invalid", error=str(exc))
        except KeyboardInterrupt:
            row.update(status="interrupted", error="interrupted (Ctrl-C)")
        except Exception:                   # a bug, not the point's fault: keep the traceback
            row.update(status="error", error=traceback.format_exc())
    notes = list(dict.fromkeys([*point.notes, *(str(w.message) for w in caught)]))
    if notes:
        row["notes"] = "\n".join(notes)
    return row


def _run_point(point: Point, seeds, row: dict) -> None:
    arch, w = point.arch, point.workload
    energy = energy_table_from_docs(arch, point.energy) if point.energy is not None else price(arch)[0]
    starts = []
    for text in seeds:
        try:
            starts.append(mapping_from_native(loads(text, "a neighbouring point's mapping"), arch, w))
        except (StoreloopError, yaml.YAMLError):
            pass                     # a neighbour's mapping that does not fit this arch
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
               mapping=yaml.safe_dump(mapping_to_native(out.mapping, arch, w), sort_keys=False),
               levels=json.dumps(levels), priced_by=r.priced_by)


def level_breakdown(r) -> dict:
    """Per level (and the compute units): cycles, energy (pJ), area (µm², all instances) and whether
    it is off chip -- what the figures and reproduction.md break a design's totals into."""

    out = {lvl.name: {"cycles": lvl.cycles, "energy_pJ": lvl.energy_pJ, "area_um2": lvl.area_total_um2,
                      "instances": lvl.instances, "off_chip": lvl.off_chip} for lvl in r.levels}
    out[r.compute_name] = {"cycles": r.compute_cycles, "energy_pJ": r.compute_energy_pJ,
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


def run_sweep(sweep: Sweep, db_path: str | Path, *, workers: int = 1, dask: str | None = None,
              progress: bool = True) -> dict:
    """Run every point whose result is not in the store yet; returns counts. ``dask``: a scheduler
    address or 'local' (a LocalCluster with ``workers`` processes). Rows of earlier inputs (a key
    no point of the current grid has) are kept and marked stale. Ctrl-C stops the workers and
    raises KeyboardInterrupt; what finished before is stored."""
    db = open_store(db_path)
    lease = Lease(db_path)
    context, files, make = run_context(sweep), {}, PointMaker(sweep)
    # keys of points already final, whatever their stale mark (a key names its inputs exactly)
    done = {k for (k,) in db.execute(f"select key from points where sweep = ? and {DONE}", (sweep.name,))}
    done -= {k for _, k in failed_checksums(db, sweep.name)[0]}     # a row changed since written runs again
    finished = {}
    for p, w, m in db.execute("select params, workload, mapping from points where sweep = ? and status = 'ok' "
                              "order by stale, finished", (sweep.name,)):
        finished.setdefault((p, w), m)
    try:                  # a weight is no input of a result: a changed one relabels the rows, nothing runs again
        relabel_weights(db, sweep.name, sweep.weights)
        db.commit()
    except sqlite3.DatabaseError as exc:
        raise StoreloopError(f"{db_path}: cannot write to the store ({exc})") from None
    db.execute("create temp table current (key text primary key)")
    counts = dict({"points": sweep.size(), "done_before": 0, "excluded": 0, "run": 0, "taken": 0},
                  **dict.fromkeys(STATUSES, 0))
    complete = False
    bar = tqdm(desc=sweep.name, total=counts["points"], unit="point", disable=not progress, file=sys.stderr,
               dynamic_ncols=True)

    def todo() -> Iterator[tuple]:
        """The grid's points not yet in the store, generated as they are needed (the grid is never
        held whole: a 10^9-point grid starts at once and memory stays flat). Their keys go to a
        temporary table, so that once the grid has been walked, rows of other keys are marked stale."""
        nonlocal complete
        batch = []
        for params, w in points(sweep):
            doc = _point_doc(sweep, params)          # one substitution per point, for both uses
            if not satisfies(sweep, params, doc):
                counts["excluded"] += 1
                continue
            system = point_system(sweep, params) if sweep.system_file is not None else None
            key = point_key(sweep, params, w, context, files, doc, system)
            batch.append((key,))
            if len(batch) >= 1000:
                db.executemany("insert or ignore into current values (?)", batch)
                db.commit()                      # no open transaction may meet a point's claim
                batch.clear()
            if key in done:
                counts["done_before"] += 1
                continue
            yield key, make(params, w, doc, system)     # an invalid arch is run anyway: its error is stored
        db.executemany("insert or ignore into current values (?)", batch)
        db.commit()
        complete = True

    def store(key: str, row: dict) -> None:
        row = {"sweep": sweep.name, "key": key, **row}
        row["checksum"] = row_checksum(row)
        try:
            db.execute(f"insert or replace into points ({', '.join(row)}) values ({', '.join('?' * len(row))})",
                       list(row.values()))
            # the same point of earlier inputs is stale from now on
            db.execute("update points set stale = 1 where sweep = ? and params = ? and workload = ? and key != ?",
                       (sweep.name, row["params"], row["workload"], key))
            db.commit()                          # every point is kept the moment it finishes
        except sqlite3.DatabaseError as exc:     # a full disk, a store made read-only, a corrupted file
            db.rollback()
            raise failed(exc) from None
        counts["run"] += 1
        counts[row["status"]] += 1
        # the points left to run: the grid less what is stored or excluded (known as the grid streams)
        bar.total = max(counts["points"] - counts["done_before"] - counts["excluded"], counts["run"])
        bar.set_postfix_str(", ".join(f"{counts[k]} {k}" for k in STATUSES if counts[k] or k in FINAL), refresh=False)
        bar.update(1)

    def failed(exc: Exception) -> StoreloopError:
        return StoreloopError(f"{db_path}: cannot write to the store ({exc}); the {counts['run']} point(s) committed "
                              "before are kept, and running the sweep again resumes after them")

    def jobs():
        for key, point in todo():
            try:
                claimed = lease.claim(db, sweep.name, key)
            except sqlite3.DatabaseError as exc:
                raise failed(exc) from None
            if not claimed:
                counts["taken"] += 1         # another sweep on this store is running it
                continue
            yield key, (point, neighbour_seeds(sweep, point, finished))

    try:
        if dask:
            _run_dask(dask, workers, jobs(), store)
        elif workers > 1:
            _run_pool(workers, jobs(), store)
        else:
            for k, a in jobs():
                row = run_point(*a)           # Ctrl-C in a search: the point is kept 'interrupted'
                store(k, row)
                if row["status"] == "interrupted":
                    raise KeyboardInterrupt   # ... and the sweep stops (re-run on resume)
        if complete:                         # the whole grid was walked: other keys are stale
            try:
                db.execute("update points set stale = (key not in (select key from current)) where sweep = ?",
                           (sweep.name,))
                db.commit()
            except sqlite3.DatabaseError as exc:
                raise failed(exc) from None
    finally:
        bar.close()
        try:
            db.execute("delete from claims where pid = ? and host = ?", (os.getpid(), socket.gethostname()))
            db.commit()
        except sqlite3.DatabaseError:
            pass                                 # claims of a gone process are taken over by the next run
        db.close()
        lease.close()
    return counts


def run_batch(batch: list[tuple]) -> list[dict]:
    """Several points in one task (Dask's per-task cost is shared by the batch)."""
    return [run_point(*args) for args in batch]


DASK_BATCH = 8                      # points per Dask task


def _run_dask(address: str, workers: int, jobs, store) -> None:
    """Points on a Dask cluster ('local': a LocalCluster of ``workers`` processes) in batches of
    :data:`DASK_BATCH`, at most two batches per worker in flight; a scheduler that cannot be
    reached is an error within 5 s."""
    import logging

    # Dask's INFO lines stay off the terminal (hwcomponents gives the root logger a handler, so
    # they would print): in this process and, through the environment, in the cluster's processes
    # (a user's DASK_LOGGING__DISTRIBUTED wins)
    if "DASK_LOGGING__DISTRIBUTED" not in os.environ:
        os.environ["DASK_LOGGING__DISTRIBUTED"] = "warning"
        logging.getLogger("distributed").setLevel(logging.WARNING)
    from dask.distributed import Client, LocalCluster, as_completed

    cluster = None
    if address == "local":
        import multiprocessing

        import dask

        # workers forked from a server that has imported storeloop's sweep runner (and NumPy, the
        # mapper, the model) start at once; spawned ones import them first. No dashboard, no INFO
        # lines on the terminal. A worker runs the search in a thread beside its event loop, whose
        # periodic callbacks take the GIL from it: the statistical profiler (a stack sample every
        # 10 ms) is off, and the event-loop health check (every 20 ms), the system and memory
        # monitors run once a second, as do the scheduler's and nannies' (they share the cores).
        multiprocessing.set_forkserver_preload(["storeloop.sweeps.run", "storeloop.mapper"])
        with dask.config.set({"distributed.worker.multiprocessing-method": "forkserver",
                              "distributed.worker.profile.enabled": False,
                              "distributed.admin.tick.interval": "1s",
                              "distributed.admin.system-monitor.interval": "1s",
                              "distributed.worker.memory.monitor-interval": "1s"}):
            cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                   dashboard_address=None, silence_logs=logging.WARNING)
    try:
        client = Client(cluster if cluster is not None else address, timeout="5s")
    except (OSError, ValueError, TypeError) as exc:      # TimeoutError is an OSError
        raise StoreloopError(f"cannot reach the Dask scheduler at {address!r} within 5 s ({type(exc).__name__}: "
                             f"{exc})") from None
    try:
        size = max(1, len(client.scheduler_info().get("workers", {})) or workers)
        futures: dict = {}

        def submit(n: int) -> list:
            out = []
            for _ in range(n):
                batch = list(itertools.islice(jobs, DASK_BATCH))
                if not batch:
                    break
                fut = client.submit(run_batch, [args for _, args in batch], pure=False)
                futures[fut] = [key for key, _ in batch]
                out.append(fut)
            return out

        pending = as_completed(submit(2 * size))
        for fut in pending:
            for key, row in zip(futures.pop(fut), fut.result()):
                store(key, row)
            for new in submit(1):
                pending.add(new)
    except KeyboardInterrupt:
        # Ctrl-C: the points in flight are left unstored (claims of a gone process: re-run on
        # resume); a local cluster's worker processes, busy in a search, are killed at once (a
        # graceful close waits 4 s for each and prints Dask's warnings), and Dask says nothing more
        logging.getLogger("distributed").setLevel(logging.CRITICAL)
        for nanny in (cluster.workers.values() if cluster is not None else ()):
            proc = getattr(getattr(nanny, "process", None), "process", None)
            if proc is not None and proc.pid:
                with contextlib.suppress(OSError):
                    os.kill(proc.pid, signal.SIGKILL)
        raise
    finally:
        client.close(timeout=2)
        if cluster is not None:
            cluster.close(timeout=2)


def _run_pool(workers: int, jobs, store) -> None:
    """Local worker processes with at most 2 points in flight per worker (memory stays flat for any
    grid); on Ctrl-C (or any error) the workers are terminated, not left running."""
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

    pool = ProcessPoolExecutor(workers, initializer=_worker_init)
    running: dict = {}

    def drain(limit: int) -> None:          # store finished points until at most ``limit`` run
        while len(running) > limit:
            ready, _ = wait(running, return_when=FIRST_COMPLETED)
            for fut in ready:
                store(running.pop(fut), fut.result())

    try:
        for key, args in jobs:
            running[pool.submit(run_point, *args)] = key
            drain(2 * workers - 1)
        drain(0)
        pool.shutdown()
    except BaseException:
        for proc in list(getattr(pool, "_processes", {}).values()):
            proc.terminate()
        pool.shutdown(wait=False, cancel_futures=True)
        raise


def neighbour_seeds(sweep: Sweep, point: Point, finished: dict, count: int = 2) -> tuple[str, ...]:
    """The stored mappings of the ``count`` nearest points (one, then two steps along one
    parameter's list; same workload) that were finished before this run started. Points finished
    during the run are not used, so a point's answer does not depend on which worker finished
    first. ``finished``: (params JSON, workload label) -> mapping YAML."""
    params, out = point.params, []
    for step in (1, 2):
        for names, values in sweep.parameters:
            k = "+".join(names)
            try:
                i = values.index(params[k])
            except (KeyError, ValueError):
                continue
            for j in (i - step, i + step):
                if 0 <= j < len(values):
                    other = dict(params, **{k: values[j]})
                    m = finished.get((json.dumps(other, sort_keys=True), point.label))
                    if m and len(out) < count:
                        out.append(m)
    return tuple(out)
