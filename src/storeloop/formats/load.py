"""Load any supported spec file into typed objects, detecting storeloop vs Timeloop v0.3 format."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from storeloop.energy import double_buffered, price
from storeloop.errors import SpecError
from storeloop.formats import native, timeloop
from storeloop.formats.mapping import mapping_from_native, validate_mapping
from storeloop.formats.overrides import arch_with
from storeloop.formats.query import query_from_native
from storeloop.formats.yamlio import error_at, load, locate
from storeloop.ir import Arch, EnergyTable, Mapping, Workload


def load_arch(path: str | Path, overrides: dict[str, Any] | tuple = ()) -> Arch:
    """An arch file (storeloop's or Timeloop's); ``overrides`` ({parameter path: value}, as a sweep's
    parameters: ``levels.RF.capacity``, ``compute.instances``, ...) are set in a storeloop arch
    before it is read, each path checked at once."""
    doc = load(path)
    items = tuple(overrides.items()) if isinstance(overrides, dict) else tuple(overrides)
    if timeloop.is_timeloop_arch(doc):
        if items:
            raise SpecError("parameter paths set fields of a storeloop arch file (arch:), not of a Timeloop one",
                            file=str(path), line=1, allowed="an arch in storeloop's format")
        return timeloop.arch_from_timeloop(doc)
    if items and isinstance(doc, dict) and "arch" in doc:
        doc = arch_with(doc, items)
    return native.arch_from_native(doc)


def load_workload(path: str | Path) -> Workload:
    return _workload(load(path))


def _workload(doc) -> Workload:
    if timeloop.is_timeloop_problem(doc):
        return timeloop.workload_from_timeloop(doc)
    return native.workload_from_native(doc)


def load_query(path: str | Path):
    """A query file (``query:``, :mod:`storeloop.formats.query`)."""
    return query_from_native(load(path))


def load_workload_or_query(path: str | Path):
    """A workload file as a Workload, or a query file (``query:``) as a Query; the file read once."""
    doc = load(path)
    return query_from_native(doc) if "query" in doc else _workload(doc)


def load_mapping(path: str | Path, arch: Arch, workload: Workload) -> Mapping:
    doc = load(path)
    if timeloop.is_timeloop_mapping(doc):
        mapping = timeloop.mapping_from_timeloop(doc, arch, workload)
        names = [lvl.name for lvl in arch.levels]
        dummies = arch.timeloop.spatial_levels
        locs = {}
        for i, e in enumerate(doc["mapping"]):
            target = dummies.get(str(e["target"]), str(e["target"]))   # v0.4 fanouts: their level
            if e.get("type") == "spatial" or names.index(target) not in locs:
                locs[names.index(target)] = ("mapping", i)
        validate_mapping(doc, mapping, arch, workload, locs, ("mapping",))
        return mapping
    return mapping_from_native(doc, arch, workload)


def mapping_level_line(path: str | Path, level: str) -> int | None:
    """The line of a mapping file (storeloop's or Timeloop's) where ``level``'s entry starts."""
    doc = load(path)
    m = doc.get("mapping")
    entries = m.get("levels") if isinstance(m, dict) else m
    for i, e in enumerate(entries if isinstance(entries, list) else []):
        if isinstance(e, dict) and level in (e.get("level"), e.get("target")):
            return locate(doc, ("mapping", "levels", i) if isinstance(m, dict) else ("mapping", i))[1]
    return None


def load_energy_file(path: str | Path, kind: str, named_at: tuple | None = None):
    """An Accelergy ERT or ART file (``kind``), its tables checked (every number at its line).
    ``named_at`` (doc, loc): where another file names it, the place a file of another kind is refused."""
    doc = load(path)
    if not isinstance(doc, dict) or kind not in doc:
        what = next((k for k in ("arch", "workload", "mapping", "sweep", "system", "architecture", "problem", "ERT", "ART")
                     if isinstance(doc, dict) and k in doc), None)
        why = f"not an Accelergy {kind} file (no top-level '{kind}:')" + (f"; it holds '{what}:'" if what else "")
        allowed = f"an Accelergy {kind} ({kind}: {{version, tables}})"
        if named_at is not None:
            raise error_at(*named_at, f"{path}: {why}", allowed=allowed)
        raise SpecError(why, file=str(path), line=1, allowed=allowed)
    timeloop.check_table(doc, kind)
    return doc


def load_energy_docs(ert: str | Path | None, art: str | Path | None) -> tuple:
    """An Accelergy ERT/ART pair read and checked once: (ERT doc, ART doc or None, their names), for
    :func:`energy_table` to price any arch with."""
    if ert is None:
        raise SpecError("no energy source: pass --ert ERT.yaml (and --art ART.yaml)",
                        allowed="an Accelergy ERT/ART pair")
    return (load_energy_file(ert, "ERT"), load_energy_file(art, "ART") if art is not None else None, str(ert),
            str(art) if art else "no ART")


def energy_table(arch: Arch, docs: tuple | None) -> EnergyTable:
    """``arch``'s per-action energies and areas from an ERT/ART pair (:func:`load_energy_docs`), or
    from the energy plug-ins where there is none."""
    if docs is None:
        return price(arch)[0]
    ert_doc, art_doc, ert_name, art_name = docs
    return double_buffered(arch, timeloop.energy_table_from_timeloop(arch, ert_doc, art_doc, ert_name, art_name))


def load_energy_table(arch: Arch, ert: str | Path | None, art: str | Path | None) -> EnergyTable:
    """Per-action energies and areas from Timeloop/Accelergy ERT and ART files."""
    return energy_table(arch, load_energy_docs(ert, art))
