"""Running a sweep: each point's key (everything that decides its result), the point itself (mapped,
or a system analysed) and the pools that run them: local processes or a Dask cluster."""

from __future__ import annotations

import hashlib
import json
import os
import socket
import sqlite3
import sys
from pathlib import Path
from typing import Iterator

from tqdm import tqdm

from storeloop.energy import Registry
from storeloop.errors import StoreloopError
from storeloop.formats.sweep import Sweep
from storeloop.formats.yamlio import LDict
from storeloop.sweeps.executors import WAVE, run_dask, run_pool
from storeloop.sweeps.grid import Point, PointMaker, _point_doc, points, satisfies
from storeloop.sweeps.store import (DONE, FINAL, STATUSES, Lease, failed_checksums, open_store, relabel_weights,
                                    row_checksum)
from storeloop.sweeps.worker import SEED, run_point
from storeloop.system import load_system


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


def run_sweep(sweep: Sweep, db_path: str | Path, *, workers: int = 1, dask: str | None = None,
              progress: bool = True) -> dict:
    """Run every point whose result is not in the store yet; returns counts. ``dask``: a scheduler
    address or 'local' (a LocalCluster with ``workers`` processes). Rows of earlier inputs (a key
    no point of the current grid has) are kept and marked stale. Ctrl-C stops the workers and
    raises KeyboardInterrupt; what finished before is stored."""
    return run_sweeps([(sweep, db_path)], workers=workers, dask=dask, progress=progress)[0]


def run_sweeps(sweeps: list[tuple[Sweep, str | Path]], *, workers: int = 1, dask: str | None = None,
               progress: bool = True) -> list[dict]:
    """Run several sweeps (each into its store, as :func:`run_sweep`) in one pool of local
    processes: while one sweep waits at a wave mark for its points in flight, the pool takes the
    next sweep's points, so one sweep's tail overlaps the others' work (a study of many sweeps, as
    ``storeloop reproduce``, on 2 cores). Each sweep's points, seeds and answers are those it has
    run alone. With Dask, or one worker, the sweeps run one after the other. Returns each sweep's
    counts."""
    leases: dict = {}            # one lease per store: closing a second lock file of it would drop the first's lock
    runs = []
    try:
        for sweep, db_path in sweeps:
            key = str(Path(db_path).resolve())
            if key not in leases:
                leases[key] = Lease(db_path)
            runs.append(_SweepRun(sweep, db_path, leases[key], progress))
        if dask:
            for r in runs:
                r.run(lambda jobs, store: run_dask(dask, workers, jobs, store))
        elif workers > 1:
            run_pool(workers, [r.jobs() for r in runs], [r.store for r in runs])
            for r in runs:
                r.finish()
        else:
            for r in runs:
                r.run(None)
        return [r.counts for r in runs]
    finally:
        for r in runs:
            r.close()
        for lease in leases.values():
            lease.close()


class _SweepRun:
    """One sweep's run into its store: the points to run as a job stream (:meth:`jobs`), each
    finished point stored the moment it arrives (:meth:`store`), and the stale marks once the grid
    has been walked (:meth:`finish`)."""

    def __init__(self, sweep: Sweep, db_path: str | Path, lease: Lease, progress: bool):
        self.sweep, self.db_path, self.lease = sweep, db_path, lease
        self.db = db = open_store(db_path)
        self.context, self.files, self.make = run_context(sweep), {}, PointMaker(sweep)
        # keys of points already final, whatever their stale mark (a key names its inputs exactly)
        done = {k for (k,) in db.execute(f"select key from points where sweep = ? and {DONE}", (sweep.name,))}
        self.done = done - {k for _, k in failed_checksums(db, sweep.name)[0]}   # a row changed since written runs again
        # (params, workload) -> best mapping; the points stored before
        self.finished, self.earlier = {}, set()
        for p, w, status, m in db.execute("select params, workload, status, mapping from points where sweep = ? "
                                          "order by stale, finished", (sweep.name,)):
            self.earlier.add((p, w))
            if status == "ok" and m:
                self.finished.setdefault((_params_key(json.loads(p)), w), m)
        try:              # a weight is no input of a result: a changed one relabels the rows, nothing runs again
            relabel_weights(db, sweep.name, sweep.weights)
            db.commit()
        except sqlite3.DatabaseError as exc:
            raise StoreloopError(f"{db_path}: cannot write to the store ({exc})") from None
        db.execute("create temp table current (key text primary key)")
        self.counts = dict({"points": sweep.size(), "done_before": 0, "excluded": 0, "run": 0, "taken": 0},
                           **dict.fromkeys(STATUSES, 0))
        self.complete = False
        self.bar = tqdm(desc=sweep.name, total=self.counts["points"], unit="point", disable=not progress,
                        file=sys.stderr, dynamic_ncols=True)
        self.fresh: dict = {}             # this run's finished mappings, seeds from the next wave on

    def todo(self) -> Iterator[tuple]:
        """The grid's points not yet in the store, generated as they are needed (the grid is never
        held whole: a 10^9-point grid starts at once and memory stays flat), wave by wave
        (:func:`wave`), with a :data:`WAVE` mark between waves: the executor stores every point
        in flight before it takes the next, so a wave's points are seeded by the earlier waves'.
        Their keys go to a temporary table, so that once the grid has been walked, rows of other
        keys are marked stale."""
        sweep, db, counts = self.sweep, self.db, self.counts
        batch = []
        for params, w in (pw for k in range(SPACING // 2 * len(sweep.parameters) + 1) for pw in _wave_points(sweep, k)):
            if params is WAVE:
                yield WAVE, None
                self.finished.update(self.fresh)       # every point of the waves before is stored now
                continue
            doc = _point_doc(sweep, params)          # one substitution per point, for both uses
            if not satisfies(sweep, params, doc):
                counts["excluded"] += 1
                continue
            system = point_system(sweep, params) if sweep.system_file is not None else None
            key = point_key(sweep, params, w, self.context, self.files, doc, system)
            batch.append((key,))
            if len(batch) >= 1000:
                db.executemany("insert or ignore into current values (?)", batch)
                db.commit()                      # no open transaction may meet a point's claim
                batch.clear()
            if key in self.done:
                counts["done_before"] += 1
                continue
            yield key, self.make(params, w, doc, system)     # an invalid arch is run anyway: its error is stored
        db.executemany("insert or ignore into current values (?)", batch)
        db.commit()
        self.complete = True

    def store(self, key: str, row: dict) -> None:
        row = {"sweep": self.sweep.name, "key": key, **row}
        seed = row.pop(SEED, None)
        row["checksum"] = row_checksum(row)
        db, counts = self.db, self.counts
        try:
            db.execute(f"insert or replace into points ({', '.join(row)}) values ({', '.join('?' * len(row))})",
                       list(row.values()))
            # the same point of earlier inputs is stale from now on
            if (row["params"], row["workload"]) in self.earlier:
                db.execute("update points set stale = 1 where sweep = ? and params = ? and workload = ? and key != ?",
                           (self.sweep.name, row["params"], row["workload"], key))
            db.commit()                          # every point is kept the moment it finishes
        except sqlite3.DatabaseError as exc:     # a full disk, a store made read-only, a corrupted file
            db.rollback()
            raise self.failed(exc) from None
        counts["run"] += 1
        counts[row["status"]] += 1
        if row["status"] == "ok" and row.get("mapping"):        # (a system point has none)
            self.fresh[(_params_key(json.loads(row["params"])), row["workload"])] = seed or row["mapping"]
        # the points left to run: the grid less what is stored or excluded (known as the grid streams)
        self.bar.total = max(counts["points"] - counts["done_before"] - counts["excluded"], counts["run"])
        self.bar.set_postfix_str(", ".join(f"{counts[k]} {k}" for k in STATUSES if counts[k] or k in FINAL),
                                 refresh=False)
        self.bar.update(1)

    def failed(self, exc: Exception) -> StoreloopError:
        return StoreloopError(f"{self.db_path}: cannot write to the store ({exc}); the {self.counts['run']} point(s) "
                              "committed before are kept, and running the sweep again resumes after them")

    def jobs(self):
        for key, point in self.todo():
            if key is WAVE:
                yield WAVE, None
                continue
            try:
                claimed = self.lease.claim(self.db, self.sweep.name, key)
            except sqlite3.DatabaseError as exc:
                raise self.failed(exc) from None
            if not claimed:
                self.counts["taken"] += 1         # another sweep on this store is running it
                continue
            yield key, (point, neighbour_seeds(self.sweep, point, self.finished))

    def run(self, executor) -> None:
        """This sweep alone: on ``executor(jobs, store)``, or here, point after point (None)."""
        if executor is not None:
            executor(self.jobs(), self.store)
        else:
            for k, a in self.jobs():
                if k is WAVE:
                    continue
                row = run_point(*a, with_mapping=True)    # Ctrl-C in a search: the point is kept 'interrupted'
                self.store(k, row)
                if row["status"] == "interrupted":
                    raise KeyboardInterrupt   # ... and the sweep stops (re-run on resume)
        self.finish()

    def finish(self) -> None:
        if self.complete:                     # the whole grid was walked: other keys are stale
            try:
                self.db.execute("update points set stale = (key not in (select key from current)) where sweep = ?",
                                (self.sweep.name,))
                self.db.commit()
            except sqlite3.DatabaseError as exc:
                raise self.failed(exc) from None

    def close(self) -> None:
        self.bar.close()
        try:
            self.db.execute("delete from claims where pid = ? and host = ?", (os.getpid(), socket.gethostname()))
            self.db.commit()
        except sqlite3.DatabaseError:
            pass                                 # claims of a gone process are taken over by the next run
        self.db.close()


def wave(sweep: Sweep, params: dict) -> int:
    """A point's wave: the sum over its parameters of how many steps its value lies from the nearest
    position of its list that is a multiple of :data:`SPACING`. A point of wave k > 0 has a
    neighbour of wave k - 1 one step along each parameter it is off such a position, so a run that
    maps the waves in turn can seed every point but those of wave 0 (about one in SPACING^n of an
    n-parameter grid) with finished neighbours (:func:`neighbour_seeds`)."""
    return sum(_steps(values.index(params["+".join(names)])) for names, values in sweep.parameters)


#: a wave-0 value every this many positions of a parameter's list: the points of wave 0, which no
#: finished neighbour seeds, are about 1 in 4^n of an n-parameter grid, not 1 in 2^n (measured on
#: the thesis sweep's 4,896 points: 358 unseeded local searches of about 16 ms each became 58, and
#: its CPU time fell from 30.4 s to 24.6 s, the same cycles and stops, energies within the gap)
SPACING = 4


def _steps(i: int) -> int:
    return min(i % SPACING, SPACING - i % SPACING)


def _wave_points(sweep: Sweep, k: int) -> Iterator[tuple]:
    """The grid's points of wave ``k``, after a (:data:`WAVE`, None) mark when k > 0."""
    if k:
        yield WAVE, None
    for params, w in points(sweep):
        if wave(sweep, params) == k:
            yield params, w


def _params_key(params: dict) -> tuple:
    """A point's parameter values as a key (its stored params JSON, loaded, gives the same; a list
    value, a layout's rank order, as a tuple)."""
    return tuple(sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in params.items()))


def neighbour_seeds(sweep: Sweep, point: Point, finished: dict, count: int = 2) -> tuple:
    """The stored mappings of the ``count`` nearest points (one, then two steps along one
    parameter's list; same workload) that were finished before this point's wave started (in an
    earlier run, or in an earlier wave of this one): never a point of the same wave, so a point's
    answer does not depend on which worker finished first. ``finished``: (:func:`_params_key`,
    workload label) -> mapping (YAML text as stored, or the Mapping a worker returned)."""
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
                    m = finished.get((_params_key(other), point.label))
                    if m and len(out) < count:
                        out.append(m)
    return tuple(out)
