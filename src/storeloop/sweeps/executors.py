"""Where a sweep's points run: local worker processes, or a Dask cluster (local or at an address), at
most two tasks (a point or a batch of points) in flight per worker, stopped at once by Ctrl-C. A
:data:`WAVE` mark in a job stream makes both store every point of that stream in flight before they
take its next job (the local pool meanwhile runs the points of other streams it was given)."""

from __future__ import annotations

import contextlib
import os
import signal

from storeloop.errors import StoreloopError
from storeloop.sweeps.worker import _worker_init, run_batch

WAVE = object()                     # a job stream's mark (key): every point in flight is stored before the next job is taken

#: the seconds of work a task aims at: a stream's points go in batches of about this much work (by
#: its points so far), so a sweep of many quick points does not pay the per-task round trip
#: (pickling, pipes and threads; Dask's scheduler) for each, and a slow point goes alone
TASK_SECONDS = 0.1
MAX_BATCH = 32                      # points per task, at most


def batch_size(per_point: float | None) -> int:
    """Points for the next task of a stream whose points took ``per_point`` seconds each so far
    (None: none has finished yet, so one)."""
    if per_point is None:
        return 1
    return MAX_BATCH if per_point <= 0 else max(1, min(MAX_BATCH, int(TASK_SECONDS / per_point)))


def _mean(per_point: float | None, seconds: float, points: int) -> float:
    """The running estimate of a stream's seconds per point after a task of ``points`` took ``seconds``."""
    return seconds / points if per_point is None else (per_point + seconds / points) / 2


def _quiet() -> None:
    """Dask's logs in this process at CRITICAL only."""
    import logging

    logging.getLogger("distributed").setLevel(logging.CRITICAL)


def run_dask(address: str, workers: int, jobs, store) -> None:
    """Points on a Dask cluster ('local': a LocalCluster of ``workers`` processes) in batches
    (:func:`batch_size`), at most two batches per worker in flight; a scheduler that cannot be
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
        multiprocessing.set_forkserver_preload(["storeloop.sweeps.worker", "storeloop.mapper"])
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
        waiting = False                 # at a WAVE mark: nothing is submitted until all in flight are stored
        per_point = None                # seconds per point, as measured so far

        def submit(n: int) -> list:
            nonlocal waiting
            out = []
            for _ in range(0 if waiting else n):
                batch, limit = [], batch_size(per_point)
                for key, args in jobs:
                    if key is WAVE:
                        waiting = True
                        break
                    batch.append((key, args))
                    if len(batch) == limit:
                        break
                if batch:
                    fut = client.submit(run_batch, [args for _, args in batch], pure=False)
                    futures[fut] = [key for key, _ in batch]
                    out.append(fut)
                if waiting or len(batch) < limit:
                    break
            return out

        def more(n: int) -> list:
            nonlocal waiting
            out = submit(n)
            while waiting and not futures:      # a wave mark with nothing left in flight: go on
                waiting = False
                out += submit(2 * size)
            return out

        # with_results: each finished batch's rows are gathered in the client's event loop as it
        # finishes, not by a blocking round trip to its worker here (which waits on that worker's
        # event loop while its search holds the interpreter)
        pending = as_completed(more(2 * size), with_results=True)
        for fut, (rows, seconds) in pending:
            keys = futures.pop(fut)
            for key, row in zip(keys, rows):
                store(key, row)
            per_point = _mean(per_point, seconds, len(keys))
            for f in more(1):
                pending.add(f)
        if cluster is not None:
            # every result is stored: the local cluster closes quietly (a worker's heartbeat that
            # races the scheduler's shutdown logs a traceback at ERROR, seen on a busy machine)
            client.run(_quiet, on_error="ignore")
            client.run(_quiet, nanny=True, on_error="ignore")
            _quiet()                     # the scheduler and the client: this process
    except KeyboardInterrupt:
        # Ctrl-C: the points in flight are left unstored (claims of a gone process: re-run on
        # resume); a local cluster's worker processes, busy in a search, are killed at once (a
        # graceful close waits 4 s for each and prints Dask's warnings), and Dask says nothing more
        _quiet()
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


def run_pool(workers: int, streams: list, stores: list) -> None:
    """Local worker processes with at most 2 tasks in flight per worker (memory stays flat for any
    grid), taking the points of one or more job streams, each stored by its own ``stores[i]``: the
    first stream's next points, unless that stream waits at a :data:`WAVE` mark for its own points
    in flight, then the next stream's, and so on (so one sweep's waves do not leave a worker idle
    while another sweep has points to run). A task is one point, or a batch of a stream's quick
    points (:func:`batch_size`; never across a wave mark). On Ctrl-C (or any error) the workers
    are terminated, not left running."""
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

    pool = ProcessPoolExecutor(workers, initializer=_worker_init)
    running: dict = {}                       # future -> (stream, keys)
    flying = [0] * len(streams)              # each stream's points in flight
    blocked = [False] * len(streams)         # at a wave mark, until its points in flight are stored
    per_point = [None] * len(streams)        # each stream's seconds per point, as measured so far
    live = list(range(len(streams)))         # the streams not yet exhausted

    def take() -> bool:                      # submit the next task that may go (False: none may)
        for s in list(live):
            if blocked[s]:
                continue
            size, batch = batch_size(per_point[s]), []
            for key, args in streams[s]:
                if key is WAVE:
                    if flying[s] or batch:
                        blocked[s] = True
                        break
                    continue
                batch.append((key, args))
                if len(batch) == size:
                    break
            else:
                live.remove(s)
            if batch:
                running[pool.submit(run_batch, [args for _, args in batch])] = (s, [k for k, _ in batch])
                flying[s] += len(batch)
                return True
        return False

    try:
        while True:
            while len(running) < 2 * workers and take():
                pass
            if not running:
                break
            ready, _ = wait(running, return_when=FIRST_COMPLETED)
            for fut in ready:
                s, keys = running.pop(fut)
                rows, seconds = fut.result()
                for key, row in zip(keys, rows):
                    stores[s](key, row)
                flying[s] -= len(keys)
                blocked[s] = blocked[s] and flying[s] > 0
                per_point[s] = _mean(per_point[s], seconds, len(keys))
        pool.shutdown()
    except BaseException:
        for proc in list(getattr(pool, "_processes", {}).values()):
            proc.terminate()
        pool.shutdown(wait=False, cancel_futures=True)
        raise
