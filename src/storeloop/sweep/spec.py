"""Sweep files: the grid of points (arch fields or system fields x workloads), read once and
generated lazily; the constraints between levels."""

from __future__ import annotations

import copy
import itertools
import math
import operator
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from storeloop.errors import SpecError
from storeloop.spec.yamlio import LDict, error_at, load
from storeloop.units import ExpressionError


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
            arch_field(arch_doc, p, doc, loc)       # checked now, not per point

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


def arch_field(arch_doc: LDict, path: str, doc=None, loc=()) -> tuple[dict, str]:
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
            target, fld = arch_field(doc, p)
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
