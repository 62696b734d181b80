"""The results store: one SQLite file per sweep run (WAL mode), its schema, and the claims that let
two sweeps share one store."""

from __future__ import annotations

import os
import socket
import sqlite3
import time
from pathlib import Path

from storeloop.errors import SpecError


SCHEMA_VERSION = 3
SCHEMA = """
create table if not exists points (
    sweep text, key text, params text, workload text, status text,
    cycles integer, energy_pJ real, area_um2 real, on_chip_area_um2 real, computes integer,
    lower_bound_cycles integer, gap real, optimal integer, cycles_optimal integer, seconds real,
    clock_hz real, mapping text, error text, finished real,
    stopped text, lower_bound_energy_pJ real, energy_gap real, stale integer default 0, notes text,
    scenario text, levels text, throughput_Bps real, bottleneck text, result text,
    primary key (sweep, key));
create table if not exists claims (sweep text, key text, pid integer, host text, t real, primary key (sweep, key));
"""
# columns added after the first stores were written (added to old stores when they are opened)
ADDED = {"stopped": "text", "lower_bound_energy_pJ": "real", "energy_gap": "real", "stale": "integer default 0",
         "notes": "text", "scenario": "text", "levels": "text", "throughput_Bps": "real", "bottleneck": "text",
         "result": "text"}
# ok: mapped; invalid: the point's arch or workload has no answer; error: something unexpected (its
# traceback in ``error``); timeout: the time limit ended the search before any mapping;
# interrupted: Ctrl-C. Only the first two are final; the others run again on resume.
STATUSES = ("ok", "invalid", "error", "timeout", "interrupted")
FINAL = ("ok", "invalid")


def open_store(path: str | Path) -> sqlite3.Connection:
    """The store, in WAL mode (readers never block the sweep) with a busy timeout."""
    path = Path(path)
    if path.exists() and not path.is_file():
        raise SpecError("the results store is not a file", file=str(path), allowed="a .sqlite file path")
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        db = sqlite3.connect(path, timeout=60)
        db.execute("pragma journal_mode=wal")
        db.executescript(SCHEMA)
    except sqlite3.DatabaseError as exc:
        raise SpecError(f"cannot use it as a results store ({exc})", file=str(path),
                        allowed="a .sqlite file written by storeloop sweep, or a new path") from None
    have = {row[1] for row in db.execute("pragma table_info(points)")}
    for col, kind in ADDED.items():
        if col not in have:
            db.execute(f"alter table points add column {col} {kind}")
    db.execute(f"pragma user_version = {SCHEMA_VERSION}")
    return db


def _claim(db: sqlite3.Connection, sweep: str, key: str) -> bool:
    """Take a point for this process unless another live sweep holds it (two sweeps of one spec on
    one store share the points instead of computing each twice). A claim of a process that is gone
    (same host: no such pid; another host: older than a day) is taken over."""
    host, pid = socket.gethostname(), os.getpid()
    db.execute("begin immediate")
    try:
        row = db.execute("select pid, host, t from claims where sweep = ? and key = ?", (sweep, key)).fetchone()
        if row is not None and (row[0], row[1]) != (pid, host) and _alive(*row):
            db.rollback()
            return False
        if row is None:     # a point finished by another sweep since this one started is done
            st = db.execute("select status, stale from points where sweep = ? and key = ?", (sweep, key)).fetchone()
            if st is not None and st[0] in FINAL and not st[1]:
                db.rollback()
                return False
        db.execute("insert or replace into claims values (?, ?, ?, ?, ?)", (sweep, key, pid, host, time.time()))
        db.commit()
        return True
    except BaseException:
        db.rollback()
        raise


def _alive(pid: int, host: str, t: float) -> bool:
    if host != socket.gethostname():
        return time.time() - t < 86400
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
