"""Architecture sweeps: a grid of arch variants x workloads, each mapped, stored as it finishes.

A sweep spec (``sweeps/*.yaml``)::

    sweep:
      name: onionchopper-small
      arch: ../arch/onionchopper.yaml          # a storeloop arch file (paths relative to the spec)
      workloads: [../workloads/onionpir-64GiB.yaml]
      parameters:                               # the grid: arch fields -> values
        levels.SRAM.capacity: [1 KiB, 4 KiB]
        levels.SRAM.instances+levels.RF.instances+compute.instances: [2, 4]   # set together
      scenarios:                                # the situation, not the design: a best design each
        levels.Disk.read_bandwidth: [5 GB/s, 10 GB/s]
      constraints: ["SRAM.instances <= RF.instances"]    # <level>.<attr> <op> <level>.<attr> | number
      mapper: {time_limit: 5, objective: delay,energy}
      energy: {ert: ..., art: ...}              # optional; default: the energy plug-ins

``scenarios`` take the same form as ``parameters`` and join the grid, but they describe the
situation (a Disk's bandwidth, a network's line rate) rather than the design: the best design is
picked per workload and scenario (:func:`best_points`, the CLI summary, the figures). Every row
keeps its scenario values in ``scenario`` (JSON) and its per-level cycles, energy and area in
``levels`` (JSON).

Points are generated on the fly, filtered by the constraints on the loaded arch, and run by local
processes (at most two points in flight per worker) or a Dask cluster. Every finished point is
committed to a SQLite store at once (``results/<name>.sqlite``, WAL mode: readers never block it),
so an interrupted sweep loses nothing. A point's key hashes everything that decides its result
(parameters, the arch after substitution, the workload's contents, the mapper settings, the energy
tables or plug-ins and their versions, storeloop's version): a re-run skips a point only if that
exact result is stored, and rows of changed inputs stay queryable, marked ``stale``. A point whose
arch is invalid (e.g. instances that do not divide) is stored with its error instead of a result. Workers receive file paths, not objects: on a Dask
cluster every worker needs storeloop installed and the spec, arch and workload files at the same
paths (a shared checkout); only the scheduler's client writes the store.
"""

from __future__ import annotations

import copy
import hashlib
import itertools
import json
import math
import operator
import os
import re
import sqlite3
import sys
import signal
import socket
import time
import traceback
import types
import warnings
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
    parameters: list[tuple[list[str], list[Any]]]        # (paths set together, values); scenarios too
    constraints: list[str]
    mapper: dict = field(default_factory=dict)
    energy: dict = field(default_factory=dict)
    scenarios: list[str] = field(default_factory=list)    # parameter keys that are the situation
    system_file: Path | None = None                       # a sweep over a system's fields (no arch)

    def size(self) -> int:
        return math.prod(len(v) for _, v in self.parameters) * len(self.workloads)


def load_sweep(path: str | Path) -> Sweep:
    path = Path(path)
    doc = load(path)
    root = doc.get("sweep") if isinstance(doc, dict) else None
    if not isinstance(root, dict):
        raise error_at(doc, (), "a sweep file has a top-level 'sweep:' mapping", allowed="sweep: {name, arch, workloads, parameters, ...}")
    known = {"name", "arch", "workloads", "parameters", "scenarios", "constraints", "mapper", "energy", "system"}
    for key in root:
        if key not in known:
            raise error_at(doc, ("sweep", key), f"unknown field '{key}'", allowed=", ".join(sorted(known)))
    if "system" in root:
        return _load_system_sweep(path, doc, root)
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
    def check(paths: list[str], values: list, loc: tuple) -> None:
        for p in paths:
            _target(arch_doc, p, doc, loc)       # checked now, not per point

    params, scenarios = _grid(doc, root, check, "arch fields", "levels.<name>.<attr>")
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
    from storeloop.mapper import ALGORITHMS
    from storeloop.mapper.objective import NAMES

    checks = {"objective": (lambda v: str(v).replace(" ", "") in NAMES, ", ".join(NAMES)),
              "algorithm": (lambda v: v in ALGORITHMS, ", ".join(ALGORITHMS)),
              "time_limit": (lambda v: not isinstance(v, bool) and isinstance(v, (int, float)) and v > 0,
                             "seconds > 0")}
    for key, (ok, allowed) in checks.items():
        if key in mapper and not ok(mapper[key]):
            raise error_at(doc, ("sweep", "mapper", key), f"{mapper[key]!r} is not a valid {key}", allowed=allowed)
    gap = mapper.get("energy_gap", 0)
    if isinstance(gap, bool) or not isinstance(gap, (int, float)) or not 0 <= gap < math.inf:
        raise error_at(doc, ("sweep", "mapper", "energy_gap"), f"{gap!r} is not a relative gap",
                       allowed="a number >= 0, e.g. 0.001 (0.1 %); 0 proves optimality")
    energy = {k: str(rel(v, ("sweep", "energy", k))) for k, v in (root.get("energy") or {}).items()}
    return Sweep(_sweep_name(doc, root), path, arch_file, arch_doc, workloads, params, constraints, mapper, energy,
                 scenarios)


def _sweep_name(doc: LDict, root: dict) -> str:
    name = str(root["name"])
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", name):
        raise error_at(doc, ("sweep", "name"), f"sweep name {name!r} is not a plain file name (it names the store "
                       f"results/<name>.sqlite)", allowed="letters, digits, '.', '_' and '-', no '/' or '..'")
    return name


def _load_system_sweep(path: Path, doc: LDict, root: dict) -> Sweep:
    """A sweep whose base is a system file: every point is the system with its parameters set
    (any field --set reaches), analysed by :func:`storeloop.system.evaluate_system`."""
    from storeloop.system import load_system

    for key in ("arch", "workloads", "constraints", "energy", "mapper"):
        if key in root:
            raise error_at(doc, ("sweep", key), f"'{key}' belongs to arch sweeps; a system sweep varies the "
                           "system's own fields", allowed="name, system, parameters, scenarios")
    if "name" not in root:
        raise error_at(doc, ("sweep",), "missing required field 'name'")
    system_file = (path.parent / str(root["system"])).resolve()
    if not system_file.is_file():
        raise error_at(doc, ("sweep", "system"), f"no such file: {system_file}", allowed="a system YAML (systems/)")
    load_system(system_file)

    def check(paths: list[str], values: list, loc: tuple) -> None:
        for value in values:                      # every value of every path, checked now
            try:
                load_system(system_file, [(p, value) for p in paths])
            except SpecError as exc:
                raise error_at(doc, loc, exc.message.split("\n")[0]
                               + f" (from {exc.file or 'the system'}{':' + str(exc.line) if exc.line else ''})",
                               allowed=exc.allowed) from None

    params, scenarios = _grid(doc, root, check, "system fields", "devices.<name>.<field>")
    return Sweep(_sweep_name(doc, root), path, None, None, [system_file], params, [], {}, {}, scenarios,
                 system_file)


def _grid(doc: LDict, root: dict, check, what: str, example: str) -> tuple[list, list[str]]:
    """The parameters and scenarios of a sweep: (paths set together, values) each, every path
    checked by ``check(paths, values, loc)``; a field set by two of them is refused (the rows would
    be mislabelled)."""
    params, scenarios = [], []
    for section in ("parameters", "scenarios"):
        grid = root.get(section) or {}
        if not isinstance(grid, dict):
            raise error_at(doc, ("sweep", section), f"'{section}' maps {what} to lists of values",
                           allowed=f"{example}: [values] (paths joined by '+' are set together)")
        for key, values in grid.items():
            loc = ("sweep", section, key)
            paths = str(key).split("+")
            if not isinstance(values, list) or not values:
                raise error_at(doc, loc, f"a {section[:-1]} takes a non-empty list of values")
            if len(set(paths)) < len(paths) or any(p in done for done, _ in params for p in paths):
                raise error_at(doc, loc, f"'{key}' sets a field another parameter or scenario sets",
                               allowed="each field in one parameter or scenario")
            check(paths, values, loc)
            params.append((paths, list(values)))
            if section == "scenarios":
                scenarios.append(str(key))
    return params, scenarios


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


def _point_doc(sweep: Sweep, params: dict) -> LDict | None:
    if sweep.system_file is not None:
        return None
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


def satisfies(sweep: Sweep, params: dict, doc: LDict | None = None) -> bool:
    """The constraints, read from the point's arch fields (before the arch is validated, so
    they can exclude points that would not even be valid architectures). ``doc``: the point's
    arch document when the caller has it already."""
    from storeloop.spec.native import capacity_words
    from storeloop.units import bits_of

    if not sweep.constraints:
        return True
    a = (doc if doc is not None else _point_doc(sweep, params))["arch"]
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

    if sweep.energy:
        energy = {k: _digest(Path(v).read_bytes()) for k, v in sorted(sweep.energy.items())}
    else:
        from storeloop.energy import Registry

        energy = {"plugins": [(p.name, str(getattr(p, "version", ""))) for p in Registry.discover(use_cache=False).plugins],
                  "packages": {n: ver(n) for n in ("hwcomponents", "hwcomponents-cacti", "hwcomponents-library")}}
    return {"mapper": sweep.mapper, "energy": energy, "storeloop": ver("storeloop")}


def point_key(sweep: Sweep, params: dict, workload: Path, context: dict, files: dict | None = None,
              doc: LDict | None = None) -> str:
    """A hash of everything that decides the point's result: its parameters, the arch after
    substitution (``doc`` when the caller has it), the workload file's content and ``context``
    (:func:`run_context`). A changed input gives a new key, so the point runs again and the old
    row is kept, marked stale."""
    if sweep.system_file is not None:
        return _digest(json.dumps({"params": params, "system": _system_inputs(sweep, params), **context},
                                  sort_keys=True, default=str).encode())
    files = {} if files is None else files
    if workload not in files:
        files[workload] = _digest(Path(workload).read_bytes())
    arch = doc if doc is not None else _point_doc(sweep, params)
    payload = {"params": params, "arch": arch, "workload": files[workload], **context}
    return _digest(json.dumps(payload, sort_keys=True, default=str).encode())


def _system_inputs(sweep: Sweep, params: dict) -> str:
    """Everything a system point's result depends on: the loaded system (its devices, stages with
    their arch and workload objects, flows) with the point's parameters, or the file and the
    parameters when they do not load (the point then stores its error)."""
    from storeloop.system import load_system

    try:
        return repr(load_system(sweep.system_file, list(_expand(params))))
    except StoreloopError:
        return _digest(sweep.system_file.read_bytes()) + json.dumps(params, sort_keys=True, default=str)


def _expand(params: dict):
    for key, value in params.items():
        for p in key.split("+"):
            yield p, value


def _run_system_point(sweep: Sweep, params: dict, row: dict) -> None:
    from storeloop.system import evaluate_system, load_system

    try:
        r = evaluate_system(load_system(sweep.system_file, list(_expand(params))), claims=False)
        b = r["bottleneck"]
        row.update(status="ok", throughput_Bps=None if r["throughput"] is None else r["throughput"]["bytes_per_s"],
                   bottleneck=None if b is None else (f"stage {b['stage']}" if "stage" in b
                                                       else f"{b['device']}.{b['resource']}"),
                   energy_pJ=None if r["energy_J_per_unit"] is None else r["energy_J_per_unit"] * 1e12,
                   result=json.dumps(r, default=str))
    except StoreloopError as exc:
        row.update(status="invalid", error=str(exc))
    except KeyboardInterrupt:
        row.update(status="interrupted", error="interrupted (Ctrl-C)")
    except Exception:                       # a bug, not the point's fault: keep the traceback
        row.update(status="error", error=traceback.format_exc())


def run_point(sweep_file: str, params: dict, workload: str, seeds: tuple[str, ...] = ()) -> dict:
    """Map one point; never raises for a bad point (the error is the result). Runs in workers.
    ``seeds``: mapping YAML texts (of neighbouring points) to start the search from; one that
    does not fit this point is skipped. The row's status is one of :data:`STATUSES`; warnings
    (a plug-in that fell back to another, a component priced 0) are kept in its ``notes``."""
    sweep = load_sweep(sweep_file)
    row = {"params": json.dumps(params, sort_keys=True), "workload": Path(workload).name, "finished": time.time(),
           "scenario": json.dumps({k: params[k] for k in sweep.scenarios if k in params}, sort_keys=True)}
    with warnings.catch_warnings(record=True) as caught:     # plug-in fallbacks, zero prices: kept in the row
        warnings.simplefilter("always")
        if sweep.system_file is not None:
            _run_system_point(sweep, params, row)
        else:
            _run_point(sweep, params, workload, seeds, row)
    notes = list(dict.fromkeys(str(w.message) for w in caught))
    if notes:
        row["notes"] = "\n".join(notes)
    return row


def _run_point(sweep: Sweep, params: dict, workload: str, seeds, row: dict) -> None:
    import yaml

    from storeloop.energy import price
    from storeloop.mapper import MapTimeout, map_workload
    from storeloop.spec.load import load_energy_table, load_workload
    from storeloop.spec.native import mapping_from_native, mapping_to_native
    from storeloop.spec.yamlio import loads

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
        row.update(status="interrupted" if s["stopped"] == "interrupted" else "ok", cycles=r.cycles, energy_pJ=r.energy_pJ, area_um2=r.area_um2,
                   on_chip_area_um2=r.on_chip_area_um2, computes=r.computes,
                   lower_bound_cycles=s["lower_bound_cycles"], gap=s["gap"],
                   optimal=int(s["optimal"]), cycles_optimal=int(s["cycles_optimal"]),
                   seconds=s["seconds"], clock_hz=arch.clock_hz, stopped=s["stopped"],
                   lower_bound_energy_pJ=s["lower_bound_energy_pJ"], energy_gap=s["energy_gap"],
                   mapping=yaml.safe_dump(mapping_to_native(out.mapping, arch, w), sort_keys=False),
                   levels=json.dumps(level_breakdown(r)))
    except MapTimeout as exc:
        row.update(status="timeout", error=str(exc))
    except StoreloopError as exc:
        row.update(status="invalid", error=str(exc))
    except KeyboardInterrupt:
        row.update(status="interrupted", error="interrupted (Ctrl-C)")
    except Exception:                       # a bug, not the point's fault: keep the traceback
        row.update(status="error", error=traceback.format_exc())
    return row


def level_breakdown(r) -> dict:
    """Per level (and the compute units): cycles, energy (pJ), area (µm², all instances) and whether
    it is off chip -- what the figures and reproduction.md break a design's totals into."""
    from storeloop.spec.types import OFF_CHIP

    out = {lvl.name: {"cycles": lvl.cycles, "energy_pJ": lvl.energy_pJ, "area_um2": lvl.area_total_um2,
                      "instances": lvl.instances, "off_chip": lvl.cls.lower() in OFF_CHIP} for lvl in r.levels}
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
    context, files = run_context(sweep), {}
    # keys of points already final, whatever their stale mark (a key names its inputs exactly)
    done = {k for (k,) in db.execute(f"select key from points where sweep = ? and status in {FINAL}", (sweep.name,))}
    finished = {}
    for p, w, m in db.execute("select params, workload, mapping from points where sweep = ? and status = 'ok' "
                              "order by stale, finished", (sweep.name,)):
        finished.setdefault((p, w), m)
    db.execute("create temp table current (key text primary key)")
    started = time.monotonic()
    counts = dict({"points": sweep.size(), "done_before": 0, "excluded": 0, "run": 0, "taken": 0},
                  **dict.fromkeys(STATUSES, 0))
    complete = False

    def todo() -> Iterator[tuple[str, dict, Path]]:
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
            key = point_key(sweep, params, w, context, files, doc)
            batch.append((key,))
            if len(batch) >= 1000:
                db.executemany("insert or ignore into current values (?)", batch)
                batch.clear()
            if key in done:
                counts["done_before"] += 1
                continue
            yield key, params, w                 # an invalid arch is run anyway: its error is stored
        db.executemany("insert or ignore into current values (?)", batch)
        complete = True

    def store(key: str, row: dict) -> None:
        cols = ["sweep", "key"] + list(row)
        db.execute(f"insert or replace into points ({', '.join(cols)}) values ({', '.join('?' * len(cols))})",
                   [sweep.name, key] + list(row.values()))
        # the same point of earlier inputs is stale from now on
        db.execute("update points set stale = 1 where sweep = ? and params = ? and workload = ? and key != ?",
                   (sweep.name, row["params"], row["workload"], key))
        db.commit()                          # every point is kept the moment it finishes
        counts["run"] += 1
        counts[row["status"]] += 1
        if progress:
            n = counts["run"]
            total = counts["points"] - counts["done_before"] - counts["excluded"]
            rate = n / max(time.monotonic() - started, 1e-9)
            eta = (total - n) / rate if rate else 0.0
            sys.stderr.write(f"\r{sweep.name}: {n}/~{total} points ("
                             + ", ".join(f"{counts[k]} {k}" for k in STATUSES if counts[k] or k in FINAL)
                             + f") {rate:.1f} points/s, {eta:.0f} s left   ")
            sys.stderr.flush()

    def jobs():
        for key, params, w in todo():
            if not _claim(db, sweep.name, key):
                counts["taken"] += 1         # another sweep on this store is running it
                continue
            yield key, (str(sweep.file), params, str(w), neighbour_seeds(sweep, params, w, finished))

    try:
        if dask:
            _run_dask(dask, workers, jobs(), store)
        elif workers > 1:
            _run_pool(workers, jobs(), store)
        else:
            for k, a in jobs():
                store(k, run_point(*a))
        if complete:                         # the whole grid was walked: other keys are stale
            db.execute("update points set stale = (key not in (select key from current)) where sweep = ?",
                       (sweep.name,))
            db.commit()
    finally:
        if progress and counts["run"]:
            sys.stderr.write("\n")
        db.execute("delete from claims where pid = ? and host = ?", (os.getpid(), socket.gethostname()))
        db.commit()
        db.close()
    return counts


def _run_dask(address: str, workers: int, jobs, store) -> None:
    """Points on a Dask cluster ('local': a LocalCluster of ``workers`` processes), at most two per
    worker in flight; a scheduler that cannot be reached is an error within 5 s."""
    from dask.distributed import Client, LocalCluster, as_completed

    cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True) if address == "local" else None
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
            for key, args in itertools.islice(jobs, n):
                fut = client.submit(run_point, *args, pure=False)
                futures[fut] = key
                out.append(fut)
            return out

        pending = as_completed(submit(2 * size))
        for fut in pending:
            store(futures.pop(fut), fut.result())
            for new in submit(1):
                pending.add(new)
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


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


def neighbour_seeds(sweep: Sweep, params: dict, workload: Path, finished: dict, count: int = 2) -> tuple[str, ...]:
    """The stored mappings of the ``count`` nearest points (one, then two steps along one
    parameter's list; same workload) that were finished before this run started. Points finished
    during the run are not used, so a point's answer does not depend on which worker finished
    first. ``finished``: (params JSON, workload name) -> mapping YAML."""
    out = []
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
                    m = finished.get((json.dumps(other, sort_keys=True), workload.name))
                    if m and len(out) < count:
                        out.append(m)
    return tuple(out)


def read_results(db_path: str | Path, sweep: str | None = None):
    """The store as a pandas DataFrame, one column per parameter (values as written in the spec; a
    parameter with units also gets ``<param>.value``, a number, and ``<param>.unit``). Rows whose
    inputs have changed since (``stale`` = 1) are included; :func:`mapped`, :func:`best_points`
    and the figures leave them out."""
    import pandas as pd

    db = sqlite3.connect(db_path)
    try:
        q = "select * from points" + (" where sweep = ?" if sweep else "")
        df = pd.read_sql_query(q, db, params=(sweep,) if sweep else None)
    finally:
        db.close()
    params = df["params"].map(json.loads).apply(pd.Series) if len(df) else pd.DataFrame()
    df = pd.concat([df, params], axis=1)
    for col in params.columns:                # "10 GB/s" -> 10.0 in <col>.value, "GB/s" in <col>.unit
        split = [_quantity(v) for v in params[col]]
        if any(u is not None for _, u in split) and all(v is not None for v, _ in split):
            df[f"{col}.value"] = [v for v, _ in split]
            df[f"{col}.unit"] = [u for _, u in split]
    return df


def _quantity(value) -> tuple[float | None, str | None]:
    from storeloop.units import split_unit

    try:
        amount, unit = split_unit(value)
        return float(amount), unit
    except (ExpressionError, TypeError, ValueError):
        return None, None


def mapped(df):
    """The rows with a result for the current inputs (status ok, not stale)."""
    keep = df["status"] == "ok"
    if "stale" in df:
        keep &= df["stale"] != 1
    return df[keep]


def best_points(df):
    """Per workload and scenario, the thesis's pick (ch. 5.1): fewest cycles, then the least
    area x energy."""
    ok = mapped(df).copy()
    ok["area_energy"] = ok["on_chip_area_um2"] * ok["energy_pJ"]
    group = ["workload"]
    if "scenario" in ok:                       # rows of stores written before scenarios: "{}"
        ok["scenario"] = ok["scenario"].fillna("{}")
        group.append("scenario")
    return ok.sort_values(group + ["cycles", "area_energy"]).groupby(group).head(1)


__all__ = ["Sweep", "best_points", "mapped", "load_sweep", "points", "point_arch", "satisfies", "run_point", "run_sweep", "read_results",
           "open_store"]


class _CallableModule(types.ModuleType):
    """``storeloop.sweep`` is this package and, called, the API's sweep (a name users look for)."""

    def __call__(self, spec, db=None, *, workers: int = 1, progress: bool = False):
        """Run a sweep (a YAML path or a ``sweep:`` dict) and return its current results as a
        DataFrame; see :func:`storeloop._sweep`."""
        from storeloop import _sweep

        return _sweep(spec, db, workers=workers, progress=progress)


sys.modules[__name__].__class__ = _CallableModule
