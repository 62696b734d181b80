"""A Timeloop v0.3 mapping (``mapping:`` or a list of per-level entries) read into storeloop's mapping."""

from __future__ import annotations

import re
from typing import Any

from storeloop.formats.timeloop.schema import MappingEntry
from storeloop.formats.validate import validate
from storeloop.formats.yamlio import LDict, error_at
from storeloop.ir import Arch, LevelMapping, Loop, Mapping, Workload


def _parse_factors(text: str, dims: list[str], doc: Any, loc: tuple) -> dict[str, int]:
    out = {}
    for tok in str(text).replace(",", " ").split():         # v0.4 also writes "R=3,P=16"
        m = re.match(r"^([A-Za-z_]\w*?)=?(\d+)$", tok)
        if not m and tok.isdigit() and out:
            raise error_at(doc, loc, f"a residual factor ('{list(out)[-1]}={out[list(out)[-1]]},{tok}': the last "
                           "iteration's bound of an imperfect factorization, Timeloop's Ruby map space) is not read",
                           allowed="exact factors; storeloop's own mapping format runs imperfect mappings as padded "
                                   "problems ('imperfect: true', storeloop map --imperfect)")
        if not m:
            raise error_at(doc, loc, f"factor {tok!r} is not DIM=N", allowed="e.g. 'M=1 N=4 K=2' or 'M1 N4 K2'")
        d, v = m.groups()
        if d not in dims:
            raise error_at(doc, loc, f"unknown dimension {d!r}", allowed=", ".join(dims))
        f = int(v)
        if f < 1:
            raise error_at(doc, loc, f"factor {tok} must be >= 1 (Timeloop's 0 'residual' is not supported)")
        out[d] = f
    return out


def _ordered(perm: str, dims: list[str], doc: Any = None, loc: tuple = ()) -> list[str]:
    """Dims innermost-first: the permutation, then unlisted dims (as outer loops). Every entry
    must be a problem dimension, each once."""
    order = [c for c in str(perm) if c.strip()] if all(len(d) == 1 for d in dims) else str(perm).split()
    bad = [c for c in order if c not in dims]
    if bad or len(set(order)) != len(order):
        what = f"unknown dimension {bad[0]!r}" if bad else "a dimension listed twice"
        raise error_at(doc, loc, f"permutation {perm!r}: {what}", allowed=f"each of {', '.join(dims)} at most once")
    return order + [d for d in dims if d not in order]


def mapping_from_timeloop(doc: LDict, arch: Arch, workload: Workload) -> Mapping:
    dims = list(workload.dims)
    names = [lvl.name for lvl in arch.levels]
    temporal: dict[int, list[Loop]] = {}
    spatial: dict[int, list[Loop]] = {}
    keep: dict[int, frozenset[str]] = {}
    tensors = {t.name for t in workload.tensors}
    seen: dict[tuple[str, str], int] = {}
    # v0.4's dummy 'inter_<container>_spatial' levels: their spatial loops are the fanout of the
    # level above the container; they keep nothing and have no temporal loops of their own
    dummies = dict(arch.timeloop.spatial_levels)
    nested: dict[int, dict[str, list[Loop]]] = {}
    for i, e in enumerate(doc["mapping"]):
        loc = ("mapping", i)
        entry = validate(MappingEntry, e, doc, loc)      # from here on: the typed entry only
        dummy, target = None, str(entry.target)
        if target in dummies and target not in names:
            if entry.type == "spatial":
                dummy, target = target, dummies[target]
            elif entry.type == "temporal":
                if any(f > 1 for f in _parse_factors(entry.factors or "", dims, doc, loc + ("factors",)).values()):
                    raise error_at(doc, loc + ("factors",), f"{entry.target} is a fanout, not a storage level: "
                                   "its temporal factors must all be 1", allowed="factors of 1")
                continue
            else:
                if entry.keep:
                    raise error_at(doc, loc + ("keep",), f"{entry.target} is a fanout and keeps nothing",
                                   allowed="keep: [] (every data space bypassed)")
                continue
        kind_key = "bypass" if entry.type in ("datatype", "dataspace", "bypass") else entry.type
        if (str(entry.target), kind_key) in seen:
            raise error_at(doc, loc, f"a second {kind_key} entry for {entry.target} "
                           f"(the first is mapping[{seen[(str(entry.target), kind_key)]}])",
                           allowed="one temporal, one spatial and one bypass entry per level")
        seen[(str(entry.target), kind_key)] = i
        if target not in names:
            raise error_at(doc, loc + ("target",), f"unknown level {target!r}", allowed=", ".join(names))
        li = names.index(target)
        kind = entry.type                             # MappingEntry admits only the known types
        if kind in ("datatype", "dataspace", "bypass"):
            bypass = set(entry.bypass or [])
            unknown = (bypass | set(entry.keep or [])) - tensors
            if unknown:
                raise error_at(doc, loc, f"unknown tensor(s) {sorted(unknown)}", allowed=", ".join(sorted(tensors)))
            both = bypass & set(entry.keep or [])
            if both:
                raise error_at(doc, loc, f"{', '.join(sorted(both))} both kept and bypassed",
                               allowed="each data space in keep or in bypass")
            keep[li] = frozenset(tensors - bypass)
            continue
        factors = _parse_factors(entry.factors or "", dims, doc, loc + ("factors",))
        order = _ordered(entry.permutation or "", dims, doc, loc + ("permutation",))
        if kind == "temporal":
            # innermost-first permutation -> our outer->inner order
            temporal[li] = [Loop(dims.index(d), factors.get(d, 1)) for d in reversed(order)]
        else:
            # innermost-first; the first ``split`` dims run along X (always the inner loops)
            split = len(order) if entry.split is None else entry.split
            loops = [Loop(dims.index(d), factors.get(d, 1), True, "X" if j < split else "Y")
                     for j, d in reversed(list(enumerate(order)))]
            if dummy is None:
                if li in nested:
                    raise error_at(doc, loc, f"{target} has spatial loops of its own and of "
                                   f"{', '.join(nested[li])}", allowed="one of them")
                spatial[li] = loops
            else:
                if li in spatial and li not in nested:
                    raise error_at(doc, loc, f"{target} has spatial loops of its own and of {dummy}",
                                   allowed="one of them")
                nested.setdefault(li, {})[dummy] = loops
    for li, per in nested.items():               # nested fanouts of one level: the outer container's loops outside
        spatial[li] = [lp for name in dummies if name in per for lp in per[name]]
    levels = tuple(LevelMapping(tuple(temporal.get(li, ())), tuple(spatial.get(li, ())), keep.get(li))
                   for li in range(len(names)))
    return Mapping(levels=levels, name=str(getattr(doc, "file", None) or "timeloop-mapping"))
