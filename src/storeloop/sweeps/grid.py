"""The points of a sweep, generated lazily: each point's parameter values, its arch, whether it
meets the sweep's constraints, and the typed :class:`Point` a worker runs without reading a file."""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
import traceback
import warnings
from pathlib import Path
from typing import Iterator

from storeloop.errors import StoreloopError
from storeloop.formats.load import load_energy_docs, load_workload
from storeloop.formats.native import arch_from_native, capacity_words
from storeloop.formats.overrides import arch_with
from storeloop.formats.quantities import ExpressionError, bits_of
from storeloop.formats.sweep import _CONSTRAINT, _OPS, Sweep, _is_number
from storeloop.formats.yamlio import LDict
from storeloop.ir import Arch, Workload
from storeloop.ir.system import System
from storeloop.mapper.options import MapperOptions


@dataclasses.dataclass(frozen=True)
class Point:
    """One point of a sweep, typed and complete: built once where the grid is walked and shipped to a
    worker as it is, so that a worker reads no file. ``error``: why its arch (or the sweep's energy
    files) does not load, stored as the point's result; ``notes``: the warnings raised building it."""

    params: dict
    label: str                              # the workload's name in the rows
    scenario: str                           # the parameters that are the situation, as JSON
    weight: float                           # the workload's weight in the set
    mapper: MapperOptions
    workload: Workload | None = None
    arch: Arch | None = None
    energy: tuple | None = None             # the sweep's ERT/ART pair (formats.load.load_energy_docs); None: plug-ins
    system: tuple | None = None             # a system point: (System or None, why it does not load)
    error: str | None = None
    error_status: str = "invalid"           # "error": building it hit a bug (the error is its traceback)
    notes: tuple[str, ...] = ()


class PointMaker:
    """Builds the :class:`Point` of each (parameters, workload) of one sweep; each workload file and
    the energy files are read once."""

    def __init__(self, sweep: Sweep):
        self.sweep, self._workloads, self._energy = sweep, {}, None

    def _energy_docs(self):
        if self._energy is None:
            e = self.sweep.energy
            try:
                self._energy = (load_energy_docs(e.ert, e.art) if e.ert or e.art else None, None)
            except StoreloopError as exc:
                self._energy = (None, str(exc))
        return self._energy

    def _workload(self, path: Path) -> Workload:
        if path not in self._workloads:
            self._workloads[path] = load_workload(path)
        return self._workloads[path]

    def __call__(self, params: dict, workload: Path, doc: LDict | None = None,
                 system: tuple[System | None, str | None] | None = None) -> Point:
        s = self.sweep
        label = s.label(workload)
        common = dict(params=params, label=label, weight=s.weights.get(label, 1.0), mapper=s.mapper,
                      scenario=json.dumps({k: params[k] for k in s.scenarios if k in params}, sort_keys=True))
        if s.system_file is not None:
            return Point(**common, system=system)
        with warnings.catch_warnings(record=True) as caught:     # kept in the row's notes, as a worker's
            warnings.simplefilter("always")
            try:
                arch = arch_from_native(doc if doc is not None else _point_doc(s, params))
                energy, why = self._energy_docs()
                out = Point(**common, workload=self._workload(workload), arch=arch, energy=energy, error=why)
            except StoreloopError as exc:
                out = Point(**common, error=str(exc))
            except Exception:                   # a bug, not the point's fault: kept with its traceback
                out = Point(**common, error=traceback.format_exc(), error_status="error")
        notes = tuple(dict.fromkeys(str(w.message) for w in caught))
        return dataclasses.replace(out, notes=notes) if notes else out


def points(sweep: Sweep) -> Iterator[tuple[dict, Path]]:
    """Every (parameter values, workload) of the grid, generated lazily."""
    names = ["+".join(p) for p, _ in sweep.parameters]
    for combo in itertools.product(*[v for _, v in sweep.parameters]):
        for w in sweep.workloads:
            yield dict(zip(names, combo)), w


def _point_doc(sweep: Sweep, params: dict) -> LDict | None:
    if sweep.system_file is not None:
        return None
    return arch_with(sweep.arch_doc, [(p, value) for key, value in params.items() for p in key.split("+")])


def point_arch(sweep: Sweep, params: dict):
    """The loaded Arch of one point (errors name the spec's arch file and the point)."""
    return arch_from_native(_point_doc(sweep, params))


def satisfies(sweep: Sweep, params: dict, doc: LDict | None = None) -> bool:
    """The constraints, read from the point's arch fields (before the arch is validated, so
    they can exclude points that would not even be valid architectures). ``doc``: the point's
    arch document when the caller has it already."""
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
