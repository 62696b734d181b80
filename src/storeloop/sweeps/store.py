"""The results store: one SQLite file per sweep run (WAL mode), its schema, and the claims that let
two sweeps share one store."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import socket
import sqlite3
import time
from pathlib import Path

from storeloop.errors import SpecError


SCHEMA_VERSION = 4
SCHEMA = """
create table if not exists points (
    sweep text, key text, params text, workload text, status text,
    cycles integer, energy_pJ real, area_um2 real, on_chip_area_um2 real, computes integer,
    lower_bound_cycles integer, gap real, optimal integer, cycles_optimal integer, seconds real,
    clock_hz real, mapping text, error text, finished real,
    stopped text, lower_bound_energy_pJ real, energy_gap real, stale integer default 0, notes text,
    scenario text, levels text, throughput_Bps real, bottleneck text, result text, weight real,
    checksum text, priced_by text, primary key (sweep, key));
create table if not exists claims (sweep text, key text, pid integer, host text, t real, primary key (sweep, key));
"""
# columns added after the first stores were written (added to old stores when they are opened)
ADDED = {"stopped": "text", "lower_bound_energy_pJ": "real", "energy_gap": "real", "stale": "integer default 0",
         "notes": "text", "scenario": "text", "levels": "text", "throughput_Bps": "real", "bottleneck": "text",
         "result": "text", "weight": "real", "checksum": "text",
         "priced_by": "text"}
# ok: mapped; invalid: the point's arch or workload has no answer; error: something unexpected (its
# traceback in ``error``); timeout: the budget or time limit ended the search before any mapping;
# interrupted: Ctrl-C. Only the first two are final; the others run again on resume.
STATUSES = ("ok", "invalid", "error", "timeout", "interrupted")
FINAL = ("ok", "invalid")
# a final point is done unless the time limit ended its search (a safety net: its answer depends on
# the machine's load), which then runs again on resume
DONE = f"status in {FINAL} and coalesce(stopped, '') != 'time-limit'"


# columns of numbers (integer or real): the readers check each cell
NUMERIC = ("cycles", "energy_pJ", "area_um2", "on_chip_area_um2", "computes", "lower_bound_cycles", "gap", "optimal",
           "cycles_optimal", "seconds", "clock_hz", "finished", "lower_bound_energy_pJ", "energy_gap", "stale",
           "throughput_Bps", "weight")


def _columns() -> list[str]:
    mem = sqlite3.connect(":memory:")
    mem.executescript(SCHEMA)
    return [row[1] for row in mem.execute("pragma table_info(points)")]


# columns every store has had since the first version: a 'points' table without them is not ours
REQUIRED = tuple(c for c in _columns() if c not in ADDED)
# what a migrated store's older rows hold in an added column that may not be empty
FILLED = {"scenario": "{}", "weight": 1.0}
STORE_HELP = "a .sqlite file written by storeloop sweep"


# what a row's checksum covers: every column but the checksum and the stale mark (which a sweep
# recomputes over whole sweeps as its grid changes: a derived label, not a result)
CHECKED = tuple(c for c in _columns() if c not in ("stale", "checksum"))


def _canonical(v):
    """One text for a cell however SQLite hands it back: whole numbers as integers (a 5.0 in an
    integer column reads back 5), other floats by their exact repr, bools as 0/1."""
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, (int, float)):
        return int(v) if float(v).is_integer() and abs(v) < 2**63 else repr(float(v))
    return v


def row_checksum(row: dict) -> str:
    """A row's checksum (sha256 of its CHECKED cells, 16 hex digits): written with the row, checked
    on every read, so a cell changed since (a flipped bit, an edit by hand) is never served."""
    text = json.dumps([_canonical(row.get(c)) for c in CHECKED], separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def failed_checksums(db: sqlite3.Connection, sweep: str | None = None) -> tuple[list[tuple[str, str]], int, int]:
    """(sweep, key) of the rows whose cells no longer give their checksum, the rows checked, and the
    rows without one (written before checksums)."""
    have = {row[1] for row in db.execute("pragma table_info(points)")}
    cols = [c for c in CHECKED if c in have]         # a store of an older schema, read as it is
    q = f"select {', '.join(cols)}, {'checksum' if 'checksum' in have else 'null'} from points" + \
        (" where sweep = ?" if sweep else "")
    bad, checked, unchecked = [], 0, 0
    for values in db.execute(q, (sweep,) if sweep else ()):
        row = dict(zip(cols, values))
        if values[-1] is None:
            unchecked += 1
            continue
        checked += 1
        if not _holds(row, values[-1]):
            bad.append((row["sweep"], row["key"]))
    return bad, checked, unchecked


def _holds(cells: dict, checksum: str | None) -> bool:
    """A row's cells still give the checksum written with them (False for a row without one)."""
    return checksum is not None and row_checksum(cells) == checksum


def relabel_weights(db: sqlite3.Connection, sweep: str, weights: dict[str, float]) -> None:
    """``sweep``'s rows given each workload's weight (no input of a result: nothing runs again). A
    row whose checksum held gets a fresh one; a row that failed it keeps failing it."""
    for name, w in weights.items():
        for values in db.execute(f"select {', '.join(CHECKED)}, checksum from points where sweep = ? and workload = ? "
                                 "and weight is not ?", (sweep, name, w)).fetchall():
            old = dict(zip(CHECKED, values))
            checksum = row_checksum({**old, "weight": w}) if _holds(old, values[-1]) else values[-1]
            db.execute("update points set weight = ?, checksum = ? where sweep = ? and key = ?",
                       (w, checksum, sweep, old["key"]))


def _check_schema(db: sqlite3.Connection, path: Path) -> None:
    """Refuse a database that is not a storeloop store: tables but no 'points' table (a view of
    that name), a table without storeloop's columns, or a newer schema than this storeloop knows.
    An empty database is a new store."""
    kind = db.execute("select type from sqlite_master where name = 'points'").fetchone()
    others = [n for (n,) in db.execute("select name from sqlite_master where type in ('table', 'view') "
                                       "and name not like 'sqlite_%'") if n not in ("points", "claims")]
    if kind is None and others:
        raise SpecError(f"a database of other tables ({', '.join(sorted(others)[:5])}) and no 'points' table: not a "
                        "storeloop store; it is left unchanged", file=str(path), allowed=f"{STORE_HELP}, or a new path")
    if kind is not None and kind[0] != "table":
        raise SpecError(f"'points' is a {kind[0]} here, not storeloop's table", file=str(path), allowed=STORE_HELP)
    if kind is not None:
        have = {row[1] for row in db.execute("pragma table_info(points)")}
        missing = [c for c in REQUIRED if c not in have]
        if missing:
            raise SpecError(f"a 'points' table without {', '.join(missing)}: not a storeloop store",
                            file=str(path), allowed=STORE_HELP)
    version = db.execute("pragma user_version").fetchone()[0]
    if version > SCHEMA_VERSION:
        raise SpecError(f"a store of schema {version}, newer than this storeloop's {SCHEMA_VERSION}",
                        file=str(path), allowed="a newer storeloop, or another store")


def open_store(path: str | Path) -> sqlite3.Connection:
    """The store a sweep writes, in WAL mode (readers never block the sweep) with a busy timeout;
    an existing file must be a storeloop store (older schemas gain their new columns)."""
    path = Path(path)
    if path.exists() and not path.is_file():
        raise SpecError("the results store is not a file", file=str(path), allowed="a .sqlite file path")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(path, timeout=60)
        _check_schema(db, path)
        _wal(db)
        db.executescript(SCHEMA)
        have = {row[1] for row in db.execute("pragma table_info(points)")}
        for col, kind in ADDED.items():
            if col not in have:
                db.execute(f"alter table points add column {col} {kind}")
                if col in FILLED:            # older rows read as the new ones do
                    db.execute(f"update points set {col} = ? where {col} is null", (FILLED[col],))
        db.execute(f"pragma user_version = {SCHEMA_VERSION}")
        db.commit()
    except (sqlite3.DatabaseError, OSError) as exc:
        raise SpecError(f"cannot use it as a results store ({exc})", file=str(path),
                        allowed=f"{STORE_HELP}, or a new path in a writable folder") from None
    return db


def _wal(db: sqlite3.Connection, timeout: float = 60.0) -> None:
    """Switch the store to WAL mode. SQLite answers 'database is locked' at once, without waiting
    for its busy timeout, while another connection switches the same new file (two sweeps started
    together on a new store), so the switch is retried for as long as the busy timeout. Commits
    do not wait for the disk (synchronous=NORMAL, SQLite's advice for WAL): a committed point
    survives the sweep being killed; a power cut may lose the last ones (never the store's
    consistency), and the next run maps them again."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            db.execute("pragma journal_mode=wal")
            db.execute("pragma synchronous=normal")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.01)


def read_store(path: str | Path) -> sqlite3.Connection:
    """A store opened read-only for the readers (results, plot): it must exist and be a storeloop
    store; what SQLite says of a corrupt or foreign file becomes a one-screen error."""
    path = Path(path)
    if not path.is_file():
        raise SpecError("no such results store", file=str(path), allowed=STORE_HELP)
    try:
        db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=30)
        _check_schema(db, path)
        if db.execute("select type from sqlite_master where name = 'points'").fetchone() is None:
            raise SpecError("no 'points' table: not a storeloop store", file=str(path), allowed=STORE_HELP)
    except sqlite3.DatabaseError as exc:
        raise SpecError(f"cannot read it as a results store ({exc})", file=str(path), allowed=STORE_HELP) from None
    return db


def verify_store(path: str | Path, sweep: str | None = None) -> dict:
    """SQLite's own integrity check of a store, then every row (of ``sweep``, or all) against its
    checksum: ``{checked, changed: [(sweep, key)], unchecked (rows written before checksums),
    integrity: SQLite's lines ('ok')}``."""
    db = read_store(path)
    try:
        pages = [r for (r,) in db.execute("pragma integrity_check")]
        bad, checked, unchecked = failed_checksums(db, sweep)
    except sqlite3.DatabaseError as exc:
        raise SpecError(f"cannot read it as a results store ({exc})", file=str(path), allowed=STORE_HELP) from None
    finally:
        db.close()
    return {"checked": checked, "changed": bad, "unchecked": unchecked, "integrity": pages}


class Lease:
    """This sweep's hold on its claims: a lock on byte ``pid`` of the store's ``-lease`` file, which
    the kernel drops the moment the process ends, killed or not. A claim of this host whose byte is
    free is taken over at once (a pid probe would see a killed sweep alive until it is reaped, and a
    new process that reuses its pid); a claim of another host, once it is a day old."""

    def __init__(self, db_path: str | Path):
        self.pid, self.host, self.fd = os.getpid(), socket.gethostname(), None
        try:
            self.fd = os.open(f"{db_path}-lease", os.O_RDWR | os.O_CREAT, 0o644)
            fcntl.lockf(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, self.pid)
        except OSError:                 # a file system without locks: the pid probe
            self.close()

    def alive(self, pid: int, host: str, t: float) -> bool:
        if host != self.host:
            return time.time() - t < 86400
        if pid == self.pid:
            return True
        if self.fd is None:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return False
            except PermissionError:
                pass
            return True
        try:                            # (this process's own fd: closing another would drop its lock)
            fcntl.lockf(self.fd, fcntl.LOCK_SH | fcntl.LOCK_NB, 1, pid)
        except OSError:
            return True
        fcntl.lockf(self.fd, fcntl.LOCK_UN, 1, pid)
        return False

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def claim(self, db: sqlite3.Connection, sweep: str, key: str) -> bool:
        """Take a point for this process unless another live sweep holds it (two sweeps of one spec
        on one store share the points instead of computing each twice)."""
        db.execute("begin immediate")
        try:
            row = db.execute("select pid, host, t from claims where sweep = ? and key = ?", (sweep, key)).fetchone()
            if row is not None and (row[0], row[1]) != (self.pid, self.host) and self.alive(*row):
                db.rollback()
                return False
            if row is None:     # a point finished by another sweep since this one started is done
                st = db.execute(f"select stale, checksum, {', '.join(CHECKED)} from points where sweep = ? and key = ? "
                                f"and {DONE}", (sweep, key)).fetchone()
                # (a row changed since it was written: run again)
                if st is not None and not st[0] and (st[1] is None or _holds(dict(zip(CHECKED, st[2:])), st[1])):
                    db.rollback()
                    return False
            db.execute("insert or replace into claims values (?, ?, ?, ?, ?)",
                       (sweep, key, self.pid, self.host, time.time()))
            db.commit()
            return True
        except BaseException:
            db.rollback()
            raise
