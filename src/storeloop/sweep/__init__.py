"""Architecture sweeps: a grid of arch variants x workloads, each mapped, stored as it finishes.

A sweep spec (``sweeps/*.yaml``)::

    sweep:
      name: onionchopper-small
      arch: ../arch/onionchopper.yaml          # a storeloop arch file (paths relative to the spec)
      workloads: [../workloads/onionpir-64GiB.yaml]
      parameters:                               # the grid: arch fields -> values
        levels.SRAM.capacity: [1 KiB, 4 KiB]
        levels.SRAM.instances+levels.RF.instances+compute.instances: [2, 4]   # set together
      constraints: ["SRAM.instances <= RF.instances"]    # <level>.<attr> <op> <level>.<attr> | number
      mapper: {time_limit: 5, objective: delay,energy}
      energy: {ert: ..., art: ...}              # optional; default: the energy plug-ins

Points are generated on the fly (the grid is never materialized), filtered by the constraints on
the loaded arch, and run by local processes or a Dask cluster. Every finished point is committed
to a SQLite store at once (``results/<name>.sqlite``), so an interrupted sweep loses nothing and a
re-run skips what is done. A point whose arch is invalid (e.g. instances that do not divide) is
stored with its error instead of a result. Workers receive file paths, not objects: on a Dask
cluster every worker needs storeloop installed and the spec, arch and workload files at the same
paths (a shared checkout); only the scheduler's client writes the store.
"""

from __future__ import annotations

import copy
import itertools
import json
import math
import operator
import re
import sqlite3
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from storeloop.errors import SpecError, StoreloopError
from storeloop.units import ExpressionError
from storeloop.spec.yamlio import LDict, error_at, load

ATTRS = ("instances", "capacity_words", "capacity_bytes", "word_bits", "block_size")
_CONSTRAINT = re.compile(r"^\s*([\w.]+)\s*(<=|>=|==|!=|<|>)\s*([\w.]+)\s*$")
_OPS = {"<=": operator.le, ">=": operator.ge, "==": operator.eq, "!=": operator.ne, "<": operator.lt, ">": operator.gt}


@dataclass
class Sweep:
    name: str
    file: Path
    arch_file: Path
    arch_doc: LDict
    workloads: list[Path]
    parameters: list[tuple[list[str], list[Any]]]        # (paths set together, values)
    constraints: list[str]
    mapper: dict = field(default_factory=dict)
    energy: dict = field(default_factory=dict)

    def size(self) -> int:
        return math.prod(len(v) for _, v in self.parameters) * len(self.workloads)


def load_sweep(path: str | Path) -> Sweep:
    path = Path(path)
    doc = load(path)
    root = doc.get("sweep") if isinstance(doc, dict) else None
    if not isinstance(root, dict):
        raise error_at(doc, (), "a sweep file has a top-level 'sweep:' mapping", allowed="sweep: {name, arch, workloads, parameters, ...}")
    known = {"name", "arch", "workloads", "parameters", "constraints", "mapper", "energy"}
    for key in root:
        if key not in known:
            raise error_at(doc, ("sweep", key), f"unknown field '{key}'", allowed=", ".join(sorted(known)))
    for key in ("name", "arch", "workloads"):
        if key not in root:
            raise error_at(doc, ("sweep",), f"missing required field '{key}'")

    def rel(p: Any, loc: tuple) -> Path:
        f = (path.parent / str(p)).resolve()
        if not f.is_file():
            raise error_at(doc, loc, f"no such file: {f}")
        return f

    arch_file = rel(root["arch"], ("sweep", "arch"))
    arch_doc = load(arch_file)
    if not isinstance(arch_doc, dict) or "arch" not in arch_doc:
        raise error_at(doc, ("sweep", "arch"), "sweeps vary storeloop arch files", allowed="a file with 'arch:'")
    wl = root["workloads"] if isinstance(root["workloads"], list) else [root["workloads"]]
    workloads = [rel(w, ("sweep", "workloads", i)) for i, w in enumerate(wl)]
    params = []
    for key, values in (root.get("parameters") or {}).items():
        paths = str(key).split("+")
        for p in paths:
            _target(arch_doc, p, doc, ("sweep", "parameters", key))       # checked now, not per point
        if not isinstance(values, list) or not values:
            raise error_at(doc, ("sweep", "parameters", key), "a parameter takes a non-empty list of values")
        params.append((paths, list(values)))
    constraints = [str(c) for c in root.get("constraints") or []]
    level_names = {lvl.get("name") for lvl in arch_doc["arch"].get("levels") or []} | {arch_doc["arch"].get("compute", {}).get("name")}
    for i, c in enumerate(constraints):
        m = _CONSTRAINT.match(c)
        if not m:
            raise error_at(doc, ("sweep", "constraints", i), f"cannot read constraint {c!r}",
                           allowed="'<level>.<attr> <op> <level>.<attr> or number', op one of <= >= == != < >")
        for side in (m.group(1), m.group(3)):
            if not _is_number(side):
                lvl, _, attr = side.partition(".")
                if lvl not in level_names or attr not in ATTRS:
                    raise error_at(doc, ("sweep", "constraints", i), f"unknown operand {side!r}",
                                   allowed=f"<level>.<attr> with level in {sorted(n for n in level_names if n)} "
                                           f"and attr in {', '.join(ATTRS)}")
    mapper = dict(root.get("mapper") or {})
    bad = set(mapper) - {"time_limit", "objective", "algorithm", "energy_gap"}
    if bad:
        raise error_at(doc, ("sweep", "mapper", sorted(bad)[0]), "unknown mapper option",
                       allowed="time_limit, objective, algorithm, energy_gap")
    gap = mapper.get("energy_gap", 0)
    if isinstance(gap, bool) or not isinstance(gap, (int, float)) or not 0 <= gap < math.inf:
        raise error_at(doc, ("sweep", "mapper", "energy_gap"), f"{gap!r} is not a relative gap",
                       allowed="a number >= 0, e.g. 0.001 (0.1 %); 0 proves optimality")
    energy = {k: str(rel(v, ("sweep", "energy", k))) for k, v in (root.get("energy") or {}).items()}
    return Sweep(str(root["name"]), path, arch_file, arch_doc, workloads, params, constraints, mapper, energy)


def _is_number(s: str) -> bool:
    return re.fullmatch(r"-?\d+(\.\d+)?", s) is not None


def _target(arch_doc: LDict, path: str, doc=None, loc=()) -> tuple[dict, str]:
    """The mapping and key a parameter path sets: levels.<name>.<field>, compute.<field>, <field>."""
    parts = path.split(".")
    a = arch_doc["arch"]
    if parts[0] == "levels" and len(parts) == 3:
        for lvl in a.get("levels") or []:
            if lvl.get("name") == parts[1]:
                return lvl, parts[2]
        raise error_at(doc, loc, f"no level named {parts[1]!r} in the arch",
                       allowed=", ".join(str(lvl.get("name")) for lvl in a.get("levels") or []))
    if parts[0] == "compute" and len(parts) == 2:
        return a["compute"], parts[1]
    if len(parts) == 1:
        return a, parts[0]
    raise error_at(doc, loc, f"cannot read parameter path {path!r}",
                   allowed="levels.<level>.<field>, compute.<field> or <arch field>; join several with '+'")


def points(sweep: Sweep) -> Iterator[tuple[dict, Path]]:
    """Every (parameter values, workload) of the grid, generated lazily."""
    names = ["+".join(p) for p, _ in sweep.parameters]
    for combo in itertools.product(*[v for _, v in sweep.parameters]):
        for w in sweep.workloads:
            yield dict(zip(names, combo)), w


def _point_doc(sweep: Sweep, params: dict) -> LDict:
    doc = copy.deepcopy(sweep.arch_doc)
    for key, value in params.items():
        for p in key.split("+"):
            target, fld = _target(doc, p)
            target[fld] = value
    return doc


def point_arch(sweep: Sweep, params: dict):
    """The loaded Arch of one point (errors name the spec's arch file and the point)."""
    from storeloop.spec.native import arch_from_native

    return arch_from_native(_point_doc(sweep, params))


def satisfies(sweep: Sweep, params: dict) -> bool:
    """The constraints, read from the point's arch fields (before the arch is validated, so
    they can exclude points that would not even be valid architectures)."""
    from storeloop.spec.native import capacity_words
    from storeloop.units import bits_of

    a = _point_doc(sweep, params)["arch"]
    nodes = {str(lvl.get("name")): lvl for lvl in a.get("levels") or []}
    nodes[str(a["compute"].get("name"))] = a["compute"]

    def value(side: str) -> float:
        if _is_number(side):
            return float(side)
        name, _, attr = side.partition(".")
        node = nodes[name]
        bits = bits_of(node.get("word_bits", 64))
        cap = node.get("capacity")
        words = capacity_words(cap, bits)
        words = math.inf if words is None else words
        return {"instances": int(node.get("instances", 1)), "capacity_words": words,
                "capacity_bytes": words * bits / 8, "word_bits": bits,
                "block_size": int(node.get("block_size", 1))}[attr]

    for c in sweep.constraints:
        lhs, op, rhs = _CONSTRAINT.match(c).groups()
        try:
            ok = _OPS[op](value(lhs), value(rhs))
        except (ExpressionError, ValueError, TypeError):
            return True             # an unreadable value: the point runs and stores the arch's error
        if not ok:
            return False
    return True


# ---------------------------------------------------------------------------- the store
SCHEMA = """
create table if not exists points (
    sweep text, key text, params text, workload text, status text,
    cycles integer, energy_pJ real, area_um2 real, on_chip_area_um2 real, computes integer,
    lower_bound_cycles integer, gap real, optimal integer, cycles_optimal integer, seconds real,
    clock_hz real, mapping text, error text, finished real,
    stopped text, lower_bound_energy_pJ real, energy_gap real,
    primary key (sweep, key))
"""
# columns added after the first stores were written (added to old stores when they are opened)
ADDED = {"stopped": "text", "lower_bound_energy_pJ": "real", "energy_gap": "real"}
# a point with one of these statuses is final; any other ("timeout") is run again on resume
FINAL = ("ok", "invalid")


def open_store(path: str | Path) -> sqlite3.Connection:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(path)
    db.execute(SCHEMA)
    have = {row[1] for row in db.execute("pragma table_info(points)")}
    for col, kind in ADDED.items():
        if col not in have:
            db.execute(f"alter table points add column {col} {kind}")
    return db


def point_key(params: dict, workload: Path) -> str:
    return json.dumps({"params": params, "workload": workload.name}, sort_keys=True)


def run_point(sweep_file: str, params: dict, workload: str, seeds: tuple[str, ...] = ()) -> dict:
    """Map one point; never raises for a bad point (the error is the result). Runs in workers.
    ``seeds``: mapping YAML texts (of neighbouring points) to start the search from; one that
    does not fit this point is skipped. Status: ok, invalid (the point has no answer), or
    timeout (the time limit ended the search before any mapping; run again on resume)."""
    import yaml

    from storeloop.energy import price
    from storeloop.mapper import MapTimeout, map_workload
    from storeloop.spec.load import load_energy_table, load_workload
    from storeloop.spec.native import mapping_from_native, mapping_to_native
    from storeloop.spec.yamlio import loads

    sweep = load_sweep(sweep_file)
    row = {"params": json.dumps(params, sort_keys=True), "workload": Path(workload).name, "finished": time.time()}
    try:
        arch = point_arch(sweep, params)
        w = load_workload(workload)
        if sweep.energy:
            energy = load_energy_table(arch, sweep.energy.get("ert"), sweep.energy.get("art"))
        else:
            energy = price(arch)[0]
        starts = []
        for text in seeds:
            try:
                starts.append(mapping_from_native(loads(text, "a neighbouring point's mapping"), arch, w))
            except (StoreloopError, yaml.YAMLError):
                pass                     # a neighbour's mapping that does not fit this arch
        out = map_workload(arch, w, energy, time_limit=float(sweep.mapper.get("time_limit", 10)),
                           objective=str(sweep.mapper.get("objective", "delay,energy")),
                           algorithm=str(sweep.mapper.get("algorithm", "exhaustive")),
                           energy_gap=sweep.mapper.get("energy_gap"), seeds=starts)
        r, s = out.result, out.search
        row.update(status="ok", cycles=r.cycles, energy_pJ=r.energy_pJ, area_um2=r.area_um2,
                   on_chip_area_um2=r.on_chip_area_um2, computes=r.computes,
                   lower_bound_cycles=s["lower_bound_cycles"], gap=s["gap"],
                   optimal=int(s["optimal"]), cycles_optimal=int(s["cycles_optimal"]),
                   seconds=s["seconds"], clock_hz=arch.clock_hz, stopped=s["stopped"],
                   lower_bound_energy_pJ=s["lower_bound_energy_pJ"], energy_gap=s["energy_gap"],
                   mapping=yaml.safe_dump(mapping_to_native(out.mapping, arch, w), sort_keys=False))
    except MapTimeout as exc:
        row.update(status="timeout", error=str(exc))
    except StoreloopError as exc:
        row.update(status="invalid", error=str(exc))
    return row


def run_sweep(sweep: Sweep, db_path: str | Path, *, workers: int = 1, dask: str | None = None,
              progress: bool = True) -> dict:
    """Run every point not yet in the store; returns counts. ``dask``: a scheduler address or
    'local' (a LocalCluster with ``workers`` processes)."""
    db = open_store(db_path)
    done = {k for (k,) in db.execute(f"select key from points where sweep = ? and status in {FINAL}", (sweep.name,))}
    finished = [(json.loads(p), w, m) for p, w, m in db.execute(
        "select params, workload, mapping from points where sweep = ? and status = 'ok'", (sweep.name,))]
    todo, skipped_constraint = [], 0
    for params, w in points(sweep):
        key = point_key(params, w)
        if key in done:
            continue
        if not satisfies(sweep, params):
            skipped_constraint += 1
            continue
        todo.append((key, params, w))       # an invalid arch is run anyway: its error is stored
    counts = {"points": sweep.size(), "done_before": len(done), "excluded": skipped_constraint,
              "run": 0, "ok": 0, "invalid": 0, "timeout": 0}

    def store(key: str, row: dict) -> None:
        cols = ["sweep", "key"] + list(row)
        db.execute(f"insert or replace into points ({', '.join(cols)}) values ({', '.join('?' * len(cols))})",
                   [sweep.name, key] + list(row.values()))
        db.commit()                          # every point is kept the moment it finishes
        counts["run"] += 1
        counts[row["status"]] += 1
        if progress:
            sys.stderr.write(f"\r{sweep.name}: {counts['run']}/{len(todo)} points "
                             f"({counts['ok']} ok, {counts['invalid']} invalid, {counts['timeout']} timeout)")
            sys.stderr.flush()

    args = [(str(sweep.file), params, str(w), neighbour_seeds(sweep, params, w, finished)) for _, params, w in todo]
    keys = [k for k, _, _ in todo]
    try:
        if dask:
            from dask.distributed import Client, LocalCluster, as_completed

            cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True) if dask == "local" else None
            with Client(cluster if cluster is not None else dask) as client:
                futures = {client.submit(run_point, *a, pure=False): k for k, a in zip(keys, args)}
                for fut in as_completed(futures):
                    store(futures[fut], fut.result())
            if cluster is not None:
                cluster.close()
        elif workers > 1:
            from concurrent.futures import ProcessPoolExecutor, as_completed as done_first

            with ProcessPoolExecutor(workers) as pool:
                futures = {pool.submit(run_point, *a): k for k, a in zip(keys, args)}
                for fut in done_first(futures):
                    store(futures[fut], fut.result())
        else:
            for k, a in zip(keys, args):
                store(k, run_point(*a))
    finally:
        if progress and todo:
            sys.stderr.write("\n")
        db.close()
    return counts


def neighbour_seeds(sweep: Sweep, params: dict, workload: Path, finished: list, count: int = 2) -> tuple[str, ...]:
    """The stored mappings of the ``count`` nearest points (fewest steps along the parameter
    lists, same workload) that were finished before this run started. Points finished during the
    run are not used, so a point's answer does not depend on which worker finished first."""
    index = {"+".join(p): {json.dumps(v): i for i, v in enumerate(vals)} for p, vals in sweep.parameters}
    here = {k: index[k].get(json.dumps(v)) for k, v in params.items() if k in index}

    def distance(other: dict) -> float:
        steps = 0
        for k, i in here.items():
            j = index[k].get(json.dumps(other.get(k)))
            if i is None or j is None:
                return math.inf
            steps += abs(i - j)
        return steps

    near = sorted((distance(p), i) for i, (p, w, m) in enumerate(finished) if w == workload.name and m)
    return tuple(finished[i][2] for d, i in near[:count] if d < math.inf)


def read_results(db_path: str | Path, sweep: str | None = None):
    """The store as a pandas DataFrame, one column per parameter."""
    import pandas as pd

    db = sqlite3.connect(db_path)
    try:
        q = "select * from points" + (" where sweep = ?" if sweep else "")
        df = pd.read_sql_query(q, db, params=(sweep,) if sweep else None)
    finally:
        db.close()
    params = df["params"].map(json.loads).apply(pd.Series) if len(df) else pd.DataFrame()
    return pd.concat([df, params], axis=1)


def best_points(df):
    """Per workload, the thesis's pick (ch. 5.1): fewest cycles, then the least area x energy."""
    ok = df[df["status"] == "ok"].copy()
    ok["area_energy"] = ok["on_chip_area_um2"] * ok["energy_pJ"]
    return ok.sort_values(["workload", "cycles", "area_energy"]).groupby("workload").head(1)


__all__ = ["Sweep", "best_points", "load_sweep", "points", "point_arch", "satisfies", "run_point", "run_sweep", "read_results",
           "open_store"]
