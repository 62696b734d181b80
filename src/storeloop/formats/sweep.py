"""Sweep files (``sweep:``): an arch and workloads, or a system, and the grid of fields to vary; the
constraints between levels. Read once; :mod:`storeloop.sweeps.grid` generates the points lazily."""

from __future__ import annotations

import math
import operator
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import Field, field_validator, model_validator

from storeloop.errors import SpecError
from storeloop.mapper.options import DEFAULT_BUDGET, SAFETY_TIME_LIMIT, MapperOptions
from storeloop.formats.attributes import unread_attribute
from storeloop.formats.load import load_energy_file, load_workload
from storeloop.formats.native import ArchSpec
from storeloop.formats.overrides import arch_field, arch_with
from storeloop.formats.system import load_system
from storeloop.formats.validate import Strict, shape, validate
from storeloop.formats.yamlio import LDict, error_at, load


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
    mapper: MapperOptions = field(default_factory=MapperOptions)    # unset: DEFAULT_BUDGET, SAFETY_TIME_LIMIT
    energy: EnergyFiles = field(default_factory=lambda: EnergyFiles())  # paths resolved; none: the plug-ins
    scenarios: list[str] = field(default_factory=list)    # parameter keys that are the situation
    system_file: Path | None = None                       # a sweep over a system's fields (no arch)
    weights: dict[str, float] = field(default_factory=dict)  # workload label -> its weight in the set

    def label(self, workload: str | Path) -> str:
        """The name a workload's rows carry: its file name, or its path from the sweep file's folder
        when another workload file of the sweep has the same name."""
        p = Path(workload)
        if sum(w.name == p.name for w in self.workloads) < 2:
            return p.name
        try:
            return str(p.resolve().relative_to(self.file.parent.resolve()))
        except ValueError:
            return str(p.resolve())

    def size(self) -> int:
        return math.prod(len(v) for _, v in self.parameters) * len(self.workloads)


Value = int | float | str | list[str]       # a parameter value (a list of strings: a layout's rank order)


class EnergyFiles(Strict):
    ert: str | None = Field(None, description="an Accelergy ERT (relative to the sweep file)")
    art: str | None = Field(None, description="an Accelergy ART")


class WeightedWorkload(Strict):
    """A workload of a workload set with its weight (how often it is run: the ranking of designs
    across the set weighs each workload's time and energy by it)."""

    file: str = Field(description="a workload file (relative to the sweep file)")
    weight: float = Field(1.0, gt=0, allow_inf_nan=False, description="a positive number (default 1)")

    @model_validator(mode="before")
    @classmethod
    def _plain(cls, v: Any) -> Any:
        if isinstance(v, str):
            return {"file": v}
        if not isinstance(v, dict):
            raise ValueError(f"a workload is a file name or {{file: <name>, weight: <number>}}, not {shape(v)}")
        return v


class SweepSpec(Strict):
    """A sweep file's ``sweep:`` mapping: an arch and workloads, or a system, and the grid."""

    name: str = Field(description="names the store results/<name>.sqlite: letters, digits, '.', '_', '-'")
    arch: str | None = Field(None, description="a storeloop arch file (relative to the sweep file)")
    workloads: list[WeightedWorkload] | None = Field(
        None, description="workload files, at least one; an entry {file, weight} weighs it in the ranking across them")

    @field_validator("workloads", mode="before")
    @classmethod
    def _listed(cls, v: Any) -> Any:
        return v if isinstance(v, list) or v is None else [v]
    system: str | None = Field(None, description="a system file instead of arch + workloads")
    parameters: dict[str, list[Value]] = Field(default_factory=dict, description="field paths -> values")
    scenarios: dict[str, list[Value]] = Field(default_factory=dict, description="the situation, not the design")
    constraints: list[str] = Field(default_factory=list, description="'<level>.<attr> <op> <level>.<attr>'")
    mapper: MapperOptions = Field(default_factory=MapperOptions, description=f"the mapper's options (per point, "
                                  f"budget defaults to {DEFAULT_BUDGET:,} candidates and time_limit, a safety net, to "
                                  f"{SAFETY_TIME_LIMIT} s)")
    energy: EnergyFiles = Field(default_factory=EnergyFiles)

    @field_validator("name")
    @classmethod
    def _plain(cls, v: str) -> str:
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", v):
            raise ValueError(f"sweep name {v!r} is not a plain file name (it names the store results/<name>.sqlite; "
                             "letters, digits, '.', '_' and '-', no '/' or '..')")
        return v


def load_sweep(path: str | Path) -> Sweep:
    """A sweep file as a :class:`Sweep`; every parameter value is checked against the field it sets
    before any point runs (a misspelled field, a value of the wrong unit or out of range is an
    error at the sweep file's line), and every workload file is loaded."""
    path = Path(path)
    doc = load(path)
    root = doc.get("sweep") if isinstance(doc, dict) else None
    if not isinstance(root, dict):
        raise error_at(doc, (), "a sweep file has a top-level 'sweep:' mapping",
                       allowed="sweep: {name, arch, workloads, parameters, ...} or sweep: {name, system, parameters}")
    extra = [k for k in doc if k != "sweep"]
    if extra:
        raise error_at(doc, (extra[0],), f"unknown top-level key '{extra[0]}'", allowed="'sweep'")
    spec: SweepSpec = validate(SweepSpec, root, doc, ("sweep",))
    if spec.system is not None:
        bad = [k for k in ("arch", "workloads", "constraints", "mapper", "energy") if k in root]
        if bad:
            raise error_at(doc, ("sweep", bad[0]), f"'{bad[0]}' belongs to arch sweeps; a system sweep varies the "
                           "system's own fields", allowed="name, system, parameters, scenarios")
        return _load_system_sweep(path, doc, root, spec)
    for key in ("arch", "workloads"):
        if getattr(spec, key) is None:
            raise error_at(doc, ("sweep",), f"missing required field '{key}'", allowed="arch and workloads, or system")

    def rel(p: Any, loc: tuple) -> Path:
        f = (path.parent / str(p)).resolve()
        if not f.is_file():
            raise error_at(doc, loc, f"no such file: {f}")
        return f

    arch_file = rel(spec.arch, ("sweep", "arch"))
    arch_doc = load(arch_file)
    if not isinstance(arch_doc, dict) or "arch" not in arch_doc:
        raise error_at(doc, ("sweep", "arch"), "sweeps vary storeloop arch files", allowed="a file with 'arch:'")
    listed, wl = isinstance(root.get("workloads"), list), spec.workloads
    if not wl:
        raise error_at(doc, ("sweep", "workloads"), "no workload to map", allowed="at least one workload file")
    workloads = []
    for i, w in enumerate(wl):
        loc = ("sweep", "workloads") + ((i,) if listed else ())
        f = rel(w.file, loc + (("file",) if isinstance(root["workloads"][i] if listed else None, dict) else ()))
        if f in workloads:
            raise error_at(doc, loc, f"{w.file!r} is listed twice", allowed="each workload file once")
        workloads.append(f)
    for w in workloads:
        load_workload(w)                      # an arch file where a workload goes is refused now

    def check(paths: list[str], values: list, loc: tuple) -> None:
        """Each value in the field it sets, through the arch schema (cross-level rules, such as
        instances that must divide, are the point's: it is stored with its error)."""
        for p in paths:
            owner, fld = arch_field(arch_doc, p, doc, loc)
            parts = p.split(".")
            if len(parts) >= 3 and parts[-2] == "attributes":        # an attribute some plug-in must read
                level, _ = arch_field(arch_doc, ".".join(parts[:-1]), doc, loc)
                unread = unread_attribute(str(level.get("class")), fld)
                if unread:
                    raise error_at(doc, loc, f"'{p}': {unread[0]}", allowed=unread[1])
            if p.rsplit(".", 1)[-1] == "name":
                raise error_at(doc, loc, f"'{p}' is a name, not a design field", allowed="a field of the level")
        for value in values:
            trial = arch_with(arch_doc, [(p, value) for p in paths])
            try:
                validate(ArchSpec, trial["arch"], trial, ("arch",))
            except SpecError as exc:
                raise error_at(doc, loc, f"{value!r}: {exc.message} (in {exc.field or 'the arch'})",
                               allowed=exc.allowed) from None

    params, scenarios = _grid(doc, root, check, "arch fields", "levels.<name>.<attr>")
    constraints = list(spec.constraints)
    level_names = {lvl.get("name") for lvl in arch_doc["arch"].get("levels") or []} | \
        {arch_doc["arch"].get("compute", {}).get("name")}
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
    energy = EnergyFiles(**{k: str(rel(v, ("sweep", "energy", k)))
                            for k, v in spec.energy.model_dump(exclude_none=True).items()})
    for kind in ("ert", "art"):                  # an arch (or anything but an ERT/ART) is refused now
        if getattr(energy, kind) is not None:
            load_energy_file(getattr(energy, kind), kind.upper(), (doc, ("sweep", "energy", kind)))
    sweep = Sweep(spec.name, path, arch_file, arch_doc, workloads, params, constraints, spec.mapper, energy, scenarios)
    sweep.weights = {sweep.label(f): w.weight for f, w in zip(workloads, wl)}
    return sweep


def _load_system_sweep(path: Path, doc: LDict, root: dict, spec: SweepSpec) -> Sweep:
    """A sweep whose base is a system file: every point is the system with its parameters set
    (any field --set reaches), analysed by :func:`storeloop.system.evaluate_system`."""
    system_file = (path.parent / str(spec.system)).resolve()
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
    return Sweep(spec.name, path, None, None, [system_file], params, [], MapperOptions(), EnergyFiles(), scenarios,
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
