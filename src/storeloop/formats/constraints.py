"""Map-space constraints from YAML: storeloop's own format and Timeloop v0.3 ``mapspace_constraints``.

storeloop format (``mappings/*.constraints.yaml``)::

    constraints:
      min_spatial_utilization: 1.0        # of every fanout (0..1)
      levels:
        - level: DRAM
          temporal: {N: 512, J: "<=8", D: ">=2", K: "1..2"}   # fixed or bounded factors
          spatial: {J: 2}                  # X; spatial_y for Y
          permutation: [C, K, D, J, N]     # outer -> inner, may be partial
          keep: [A, C]                     # or bypass: [B]
          stationary: C                    # C is reused across the innermost loop (output-stationary)

Timeloop v0.3: a list under ``mapspace_constraints`` (or ``mapspace: {constraints: ...}``) of
``{target, type: temporal|spatial|bypass|datatype, factors: "N=512 J=8", permutation: "NJ"
(innermost first), keep: [...], bypass: [...]}``; as in Timeloop v3.0.3, a factor of 0 is the whole
dimension and a factor past the bound is the bound (each with a warning).
"""

from __future__ import annotations

from pathlib import Path

from storeloop.formats.timeloop.schema import ConstraintEntry
from storeloop.formats.validate import validate
from storeloop.formats.yamlio import error_at, load
from storeloop.ir import Arch, SourcedEntry, Workload
from storeloop.ir.constraints import Constraints, LevelConstraint
from storeloop.mapper.constraints import (BOUND_HELP, arch_constraints, dim_index, factor_range, level_index,
                                          tensor_names, timeloop_constraints)


def load_constraints(path: str | Path, arch: Arch, workload: Workload) -> Constraints:
    doc = load(path)
    if isinstance(doc, dict) and "constraints" in doc and ("mapspace_constraints" in doc or "mapspace" in doc):
        raise error_at(doc, ("constraints",), "a file with both storeloop's 'constraints' and Timeloop's "
                       "'mapspace_constraints': only one of them would apply", allowed="one of the two")
    if isinstance(doc, dict) and "constraints" in doc:
        return _native(doc, arch, workload, str(path))
    if isinstance(doc, dict) and ("mapspace_constraints" in doc or "mapspace" in doc):
        return _timeloop(doc, arch, workload, str(path))
    raise error_at(doc, (), "not a constraints file",
                   allowed="a top-level 'constraints:' (storeloop) or 'mapspace_constraints:' (Timeloop v0.3)")


def _native(doc, arch: Arch, workload: Workload, source: str) -> Constraints:
    root = doc["constraints"]
    out = arch_constraints(arch, workload) or Constraints()   # a v0.4 arch's own, refined by the file
    out.source = source
    if not isinstance(root, dict):
        raise error_at(doc, ("constraints",), "must be a mapping", allowed="levels, min_spatial_utilization")
    for key in root:
        if key not in ("levels", "min_spatial_utilization"):
            raise error_at(doc, ("constraints", key), f"unknown field {key!r}", allowed="levels, min_spatial_utilization")
    if "min_spatial_utilization" in root:
        v = root["min_spatial_utilization"]
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v <= 1:
            raise error_at(doc, ("constraints", "min_spatial_utilization"), f"{v!r} is not a fraction", allowed="0 .. 1")
        out.min_spatial_utilization = float(v)
    allowed = "level, temporal, spatial, spatial_y, permutation, keep, bypass, stationary"
    for i, entry in enumerate(root.get("levels") or []):
        loc = ("constraints", "levels", i)
        if not isinstance(entry, dict) or "level" not in entry:
            raise error_at(doc, loc, "each entry needs 'level'", allowed=allowed)
        L = level_index(entry["level"], arch, doc, loc + ("level",))
        c = out.levels.setdefault(L, LevelConstraint())
        for key, value in entry.items():
            kl = loc + (key,)
            if key == "level":
                continue
            if key in ("temporal", "spatial", "spatial_y"):
                if not isinstance(value, dict):
                    raise error_at(doc, kl, "must map dimensions to factors", allowed=BOUND_HELP)
                target = {"temporal": c.temporal, "spatial": c.spatial_x, "spatial_y": c.spatial_y}[key]
                for dname, bound in value.items():
                    target[dim_index(dname, workload, doc, kl + (dname,))] = factor_range(bound, doc, kl + (dname,))
            elif key == "permutation":
                names = value.split() if isinstance(value, str) else value
                c.permutation = [dim_index(d, workload, doc, kl) for d in names]
            elif key in ("keep", "bypass"):
                setattr(c, key, tensor_names(value, workload, doc, kl))
            elif key == "stationary":
                tensor_names([value], workload, doc, kl)
                c.stationary = value
            else:
                raise error_at(doc, kl, f"unknown field {key!r}", allowed=allowed)
        if c.keep and c.bypass and c.keep & c.bypass:
            raise error_at(doc, loc, f"{sorted(c.keep & c.bypass)} both kept and bypassed")
    return out


def _timeloop(doc, arch: Arch, workload: Workload, source: str) -> Constraints:
    key = ("mapspace_constraints",) if "mapspace_constraints" in doc else ("mapspace", "constraints")
    entries = doc
    for k in key:
        entries = entries.get(k) if isinstance(entries, dict) else None
    if not isinstance(entries, list):
        raise error_at(doc, key, "must be a list of constraints", allowed="{target, type, factors, permutation, keep, bypass}")
    given = [SourcedEntry(validate(ConstraintEntry, e, doc, key + (i,)), doc, key + (i,)) for i, e in enumerate(entries)]
    return timeloop_constraints(list(arch.timeloop.constraints) + given, arch, workload, source)


