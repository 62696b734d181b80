"""Timeloop v0.3 (and v0.4) input files read into storeloop's typed objects (arch, problem, mapping,
ERT, ART).

Timeloop users can bring their files unchanged; storeloop turns them into its typed objects, and
writes its own specs back as Timeloop v0.3 so a real Timeloop can cross-check any result.
"""

from __future__ import annotations

import difflib
import math
import re
import warnings
from typing import Any

from storeloop.errors import SpecError
from storeloop.ir import (ActionCosts, Arch, ComputeLevel, EnergyTable, LevelMapping, Loop,
                                  Mapping, SourcedEntry, StorageLevel, Tensor, TimeloopV04, Workload)
from storeloop.formats.attributes import MAX_ACTION_PJ, MAX_AREA_UM2, check_attributes, cluster_size
from storeloop.ir.check import ops_problem
from storeloop.formats.timeloop.schema import (ARTBody, Architecture, ConstraintEntry, ERTBody, MappingEntry, Node,
                                            Problem, V04Node)
from storeloop.formats.validate import validate
from storeloop.formats.yamlio import LDict, error_at, field_path, locate
from storeloop.formats.quantities import ExpressionError, integer, number, technology_nm

COMPUTE_CLASSES = ("intmac", "fpmac", "mac", "compute", "modmac", "multiplier", "adder")
_RANGE = re.compile(r"^(?P<base>[^\[]+)\[(?P<lo>\d+)\.\.(?P<hi>\d+)\]$")


def _split_name(name: str) -> tuple[str, int]:
    """'PE[0..3]' -> ('PE', 4); a name without a range is one instance. A bracket that is not a
    range lo..hi with hi >= lo is an ExpressionError."""
    m = _RANGE.match(name)
    if not m:
        if "[" in name or "]" in name:
            raise ExpressionError(f"{name!r} is not a name with a range such as 'PE[0..3]'")
        return name, 1
    n = int(m.group("hi")) - int(m.group("lo")) + 1
    if n < 1:
        raise ExpressionError(f"{name!r}: the range ends before it starts")
    return m.group("base"), n


def _attr(attrs: dict, *names: str, default: Any = None) -> Any:
    for n in names:
        if n in attrs:
            return attrs[n]
    return default


def is_timeloop_arch(doc: Any) -> bool:
    return isinstance(doc, dict) and isinstance(doc.get("architecture"), dict)


def is_timeloop_problem(doc: Any) -> bool:
    return isinstance(doc, dict) and isinstance(doc.get("problem"), dict) and "shape" in doc["problem"]


def is_timeloop_mapping(doc: Any) -> bool:
    m = doc.get("mapping") if isinstance(doc, dict) else None
    return isinstance(m, list) and all(isinstance(e, dict) and "target" in e for e in m)


# ----------------------------------------------------------------------------------- arch
def _v04_as_tree(doc: LDict) -> LDict:
    """A Timeloop v0.4 ``nodes`` list as the v0.3 ``subtree``/``local`` tree the importer walks.

    Nodes are read top to bottom: a ``!Container`` opens a new subtree (its ``spatial: {meshX,
    meshY}`` replicates everything below it, as ``name[0..n-1]``), a ``!Component`` is a local
    component of the current subtree (its own ``spatial`` sets meshX/instances like v0.3's
    ``name[0..n-1]``), ``!Parallel`` children are sibling levels in their order, and ``!Nothing``
    is skipped. v0.4 attribute names (``depth``, ``width``, ``datawidth``, bandwidths) are the
    ones the v0.3 importer reads. The result carries, beside the tree, each node's
    ``constraints`` (for :func:`storeloop.formats.constraints.arch_constraints`) and the
    ``inter_<container>_spatial`` fanouts with their axes (for mappings and constraints).
    """
    root = doc["architecture"]
    top = LDict(name="system")
    top.file = getattr(doc, "file", None)
    current, mesh_x = top, 1
    aliases: dict[str, str] = {}               # inter_<container>_spatial -> the level whose fanout it is
    axes: dict[str, str] = {}                  # ... -> "X" or "Y" when the container is a row or a column
    last_storage: str | None = None
    nodes = []                                 # !Parallel children are sibling levels, in their order
    constraints: list[SourcedEntry] = []       # per node constraint, with its implied target and type
    names: set[str] = set()
    for i, node in enumerate(root.get("nodes") or []):
        loc = ("architecture", "nodes", i)
        if getattr(node, "node_tag", None) == "!Parallel" and isinstance(node, dict):
            validate(V04Node, node, doc, loc)
            nodes += [(child, loc + ("nodes", j)) for j, child in enumerate(node.get("nodes") or [])]
        else:
            nodes.append((node, loc))
    for node, loc in nodes:
        tag = getattr(node, "node_tag", None)
        if tag == "!Nothing":                  # a placeholder: no component
            continue
        if not isinstance(node, dict) or tag not in ("!Container", "!Component"):
            raise error_at(doc, loc, f"unsupported Timeloop v0.4 node {tag or type(node).__name__}",
                           allowed="!Container, !Component and !Parallel nodes")
        validate(V04Node, node, doc, loc)
        spatial = node.get("spatial") or {}
        try:
            fan = integer(spatial.get("meshX", 1)) * integer(spatial.get("meshY", 1))
        except ExpressionError as exc:
            raise error_at(doc, loc + ("spatial",), str(exc)) from None
        attrs = dict(node.get("attributes") or {})
        check_attributes(doc, loc + ("attributes",), attrs)      # at the node's own line, before any use
        target = str(node.get("name"))
        if tag == "!Component":
            if target in names:
                raise error_at(doc, loc + ("name",), f"component name '{target}' is used twice",
                               allowed="unique names")
            names.add(target)
        if tag == "!Container":
            if fan > 1 and last_storage is not None:
                target = f"inter_{node.get('name')}_spatial"
                aliases[target] = last_storage
                if 1 in (integer(spatial.get("meshX", 1)), integer(spatial.get("meshY", 1))):
                    axes[target] = "X" if integer(spatial.get("meshY", 1)) == 1 else "Y"
            elif node.get("constraints"):
                raise error_at(doc, loc + ("constraints",), "constraints on a container without a fanout "
                               "below a storage level constrain no loop", allowed="constraints on a container "
                               "with spatial: {meshX, meshY} under a storage level, or on its components")
        elif str(node.get("class")).lower() in COMPUTE_CLASSES and node.get("constraints"):
            raise error_at(doc, loc + ("constraints",), "constraints on a compute unit constrain no loop",
                           allowed="constraints on storage components and containers")
        for kind in node.get("constraints") or {}:   # per-node constraints: map-space constraints
            at = loc + ("constraints", kind)
            entry = validate(ConstraintEntry, {"target": target, "type": kind, **node["constraints"][kind]}, doc, at)
            constraints.append(SourcedEntry(entry, doc, at))
        if tag == "!Container":
            sub = LDict(name=f"{node.get('name', 'container')}[0..{fan - 1}]" if fan > 1 else node.get("name", ""),
                        attributes=attrs)
            current.setdefault("subtree", []).append(sub)
            current = sub
            mesh_x *= integer(spatial.get("meshX", 1))
            continue
        own_x = integer(spatial.get("meshX", 1))
        if mesh_x * own_x > 1:
            attrs.setdefault("meshX", mesh_x * own_x)
        if "width" in attrs and "datawidth" in attrs and not {"block_size", "block-size"} & set(attrs):
            # a row of `width` bits is shared by a cluster of `cluster_size` instances (Timeloop)
            cluster = cluster_size(attrs)
            attrs["block_size"] = max(1, integer(attrs["width"]) // (integer(attrs["datawidth"]) * max(1, cluster)))
        comp = LDict(name=f"{node['name']}[0..{fan - 1}]" if fan > 1 else node.get("name"),
                     attributes=attrs, **{"class": node.get("class")})
        if comp["name"] is None or comp["class"] is None:
            raise error_at(doc, loc, "a component needs 'name' and 'class'")
        current.setdefault("local", []).append(comp)
        if str(node.get("class")).lower() not in COMPUTE_CLASSES:
            last_storage = str(node.get("name"))
    out = LDict(architecture=LDict(version="0.3", subtree=[top]))
    out.file = getattr(doc, "file", None)
    out.v04 = TimeloopV04(aliases, axes, tuple(constraints))
    return out


def arch_from_timeloop(doc: LDict) -> Arch:
    spec = validate(Architecture, doc["architecture"], doc, ("architecture",))
    if str(spec.version) == "0.4" and spec.nodes is not None:
        doc = _v04_as_tree(doc)
        spec = validate(Architecture, doc["architecture"], doc, ("architecture",))
    if str(spec.version or "0.3") != "0.3":
        raise error_at(doc, ("architecture", "version"), f"unsupported Timeloop arch version {spec.version}",
                       allowed="0.3 (Timeloop v0.3 'subtree/local' format) or 0.4 ('nodes' list)")
    storage: list[StorageLevel] = []
    computes: list[ComputeLevel] = []
    technology = None

    seen: set[str] = set()

    def walk(node: Node, mult: int, loc: tuple) -> None:
        """The typed tree (Component attributes stay free-form; check_attributes reads them)."""
        nonlocal technology
        try:
            _, n = _split_name(node.name)
        except ExpressionError as exc:
            raise error_at(doc, loc + ("name",), str(exc), allowed="NAME or NAME[lo..hi]") from None
        mult *= n
        attrs = node.attributes
        if attrs.get("technology") is not None:
            try:
                technology_nm(attrs["technology"])
            except ExpressionError as exc:
                raise error_at(doc, loc + ("attributes", "technology"), str(exc), allowed="e.g. 45nm") from None
        technology = technology or attrs.get("technology")
        for i, comp in enumerate(node.local):
            cloc = loc + ("local", i)
            try:
                base, k = _split_name(comp.name)
            except ExpressionError as exc:
                raise error_at(doc, cloc + ("name",), str(exc), allowed="NAME or NAME[lo..hi]") from None
            if base in seen:
                raise error_at(doc, cloc + ("name",), f"component name '{base}' is used twice", allowed="unique names")
            seen.add(base)
            inst = mult * k
            a = comp.attributes
            cls = comp.cls
            check_attributes(doc, cloc + ("attributes",), a)
            if "meshX" in a and inst % integer(a["meshX"]):         # Timeloop: instances a multiple of meshX
                raise error_at(doc, cloc + ("attributes", "meshX"), f"meshX {a['meshX']} does not divide the "
                               f"{inst} instances of {base}", allowed=f"a divisor of {inst}")
            try:
                if cls.lower() in COMPUTE_CLASSES:
                    computes.append(ComputeLevel(
                        name=base, cls=cls, instances=inst,
                        mesh_x=integer(a["meshX"]) if "meshX" in a else None,
                        word_bits=integer(_attr(a, "datawidth", "word-bits", "word_bits", default=64)),
                        attributes=dict(a), where=(*locate(doc, cloc), field_path(cloc))))
                    continue
                word_bits = integer(_attr(a, "word-bits", "word_bits", "datawidth", default=a.get("width", 64)))
                block = integer(_attr(a, "block-size", "block_size", default=1))
                depth = _attr(a, "depth", "entries")
                size = _attr(a, "size")
                if depth is not None and size is not None:
                    raise error_at(doc, cloc + ("attributes", "size"), "both 'size' and 'depth' give the capacity",
                                   allowed="one of them (size in words, or depth in blocks)")
                size_words = integer(size) if size is not None else (
                    integer(depth) * block if depth is not None else None)
                mb = _attr(a, "multiple_buffering", "multiple-buffering")
                if mb is not None:
                    # Timeloop (BufferLevel::ParseSpecs): tiles must fit floor(size / multiple_buffering),
                    # the copies that fill while one is used; Accelergy prices the whole depth
                    try:
                        m = float(number(mb))
                    except (ExpressionError, TypeError, ValueError):
                        m = math.nan
                    if not 1 <= m <= 64:
                        raise error_at(doc, cloc + ("attributes", "multiple_buffering"), f"multiple_buffering {mb}",
                                       allowed="a number of copies from 1 to 64 (2: double buffering)")
                    if size_words is not None:
                        size_words = math.floor(size_words / m)
                bw = {k2: (float(number(a[k2])) if k2 in a else None)
                      for k2 in ("read_bandwidth", "write_bandwidth", "shared_bandwidth")}
                storage.append(StorageLevel(
                    name=base, cls=cls, instances=inst,
                    mesh_x=integer(a["meshX"]) if "meshX" in a else None,
                    size_words=size_words, word_bits=word_bits, block_size=block,
                    read_bandwidth=bw["read_bandwidth"], write_bandwidth=bw["write_bandwidth"],
                    shared_bandwidth=bw["shared_bandwidth"], cluster_size=cluster_size(a), attributes=dict(a),
                    where=(*locate(doc, cloc), field_path(cloc))))
            except ExpressionError as exc:
                raise error_at(doc, cloc + ("attributes",), str(exc)) from None
        for i, sub in enumerate(node.subtree):
            walk(sub, mult, loc + ("subtree", i))

    for i, sub in enumerate(spec.subtree or []):
        walk(sub, 1, ("architecture", "subtree", i))
    if len(computes) != 1:
        raise error_at(doc, ("architecture",), f"expected exactly one compute component, found {len(computes)}",
                       allowed=f"one component of class {', '.join(COMPUTE_CLASSES)}")
    if not storage:
        raise error_at(doc, ("architecture",), "no storage levels")
    return Arch(name=str(getattr(doc, "file", None) or "timeloop-arch"), levels=tuple(storage),
                compute=computes[0], technology=str(technology) if technology else None,
                timeloop=getattr(doc, "v04", None) or TimeloopV04())


# -------------------------------------------------------------------------------- problem
def workload_from_timeloop(doc: LDict) -> Workload:
    spec = validate(Problem, doc["problem"], doc, ("problem",))
    if (spec.shape.data_spaces is None) == (spec.shape.data_spaces_v03 is None):
        raise error_at(doc, ("problem", "shape"), "give the data spaces once",
                       allowed="'data-spaces' (v0.3) or 'data_spaces' (v0.4)")
    key = "data_spaces" if spec.shape.data_spaces is not None else "data-spaces"      # v0.4 / v0.3
    for d, name in enumerate(spec.shape.dimensions):
        if name in spec.shape.dimensions[:d]:
            raise error_at(doc, ("problem", "shape", "dimensions"), f"dimension {name} is declared twice",
                           allowed="each dimension once")
    for i, ds in enumerate(spec.shape.data_spaces or spec.shape.data_spaces_v03):
        if ds.name in [other.name for other in (spec.shape.data_spaces or spec.shape.data_spaces_v03)[:i]]:
            raise error_at(doc, ("problem", "shape", key, i, "name"), f"data space {ds.name} is declared twice",
                           allowed="one data space per name")
        for r, rank in enumerate(ds.projection):
            if not rank:
                raise error_at(doc, ("problem", "shape", key, i, "projection", r), "a rank with no terms",
                               allowed="a rank is a list of terms, e.g. [ [P], [R] ] for P + R")
            for t, term in enumerate(rank):
                if not 1 <= len(term) <= 2:
                    raise error_at(doc, ("problem", "shape", key, i, "projection", r, t),
                                   f"a projection term is [dimension] or [dimension, coefficient], not {list(term)}")
    shape = spec.shape                            # from here on: the typed problem only
    dims = [str(d) for d in shape.dimensions]
    inst = spec.instance
    coeffs = {c.name: c.default for c in shape.coefficients}
    for name in coeffs:
        if name in inst:
            coeffs[name] = inst[name]
    # a bound of each dimension, or a coefficient's value; Timeloop ignores other keys (the tutorial
    # files carry H, W, Hpad, ... for their front end), so they are named in a note, not refused
    extra = [name for name in inst if name not in dims and name not in coeffs]
    if extra:
        warnings.warn(f"storeloop: {getattr(doc, 'file', None) or 'the problem'}: problem.instance "
                      f"{', '.join(extra)} (line {locate(doc, ('problem', 'instance', extra[0]))[1]}) "
                      "name no dimension or coefficient; ignored, as Timeloop does")
    bounds = []
    for d in dims:
        if d not in inst:
            near = difflib.get_close_matches(d, extra, n=1, cutoff=0.5) or [x for x in extra if x.upper() == d.upper()]
            raise error_at(doc, ("problem", "instance"), f"no bound for dimension {d}"
                           + (f" (is '{near[0]}' meant to be {d}?)" if near else ""),
                           allowed=f"a bound for each of {', '.join(dims)}")
        try:
            b = integer(inst[d])
        except ExpressionError as exc:
            raise error_at(doc, ("problem", "instance", d), str(exc), allowed="a positive whole number") from None
        if b < 1:
            raise error_at(doc, ("problem", "instance", d), f"bound {b} of {d} is not positive",
                           allowed="a positive whole number")
        bounds.append(b)
        if ops_problem(bounds):
            raise error_at(doc, ("problem", "instance", d), ops_problem(bounds),
                           allowed="bounds whose product stays below 2**62")
    tensors = []
    for i, ds in enumerate(shape.data_spaces if shape.data_spaces is not None else shape.data_spaces_v03):
        ranks = []
        for r, rank in enumerate(ds.projection):
            terms = []
            for term in rank:
                dim = str(term[0])
                if dim not in dims:
                    raise error_at(doc, ("problem", "shape", key, i, "projection", r),
                                   f"unknown dimension {dim}", allowed=", ".join(dims))
                if len(term) > 1 and str(term[1]) not in coeffs:
                    raise error_at(doc, ("problem", "shape", key, i, "projection", r),
                                   f"coefficient {term[1]} is not declared",
                                   allowed=", ".join(coeffs) or "declare it under shape.coefficients")
                try:
                    coef = integer(coeffs[str(term[1])]) if len(term) > 1 else 1
                except ExpressionError as exc:
                    raise error_at(doc, ("problem", "instance"), f"coefficient {term[1]}: {exc}") from None
                terms.append((dims.index(dim), coef))
            ranks.append(tuple(terms))
        tensors.append(Tensor(name=ds.name, ranks=tuple(ranks), read_write=bool(ds.read_write or ds.read_write_v04)))
    if tensors and not any(t.read_write for t in tensors):
        raise error_at(doc, ("problem", "shape", key), f"no data space is read-write: the problem writes nothing "
                       f"(data spaces {', '.join(t.name for t in tensors)})",
                       allowed="read-write: True on the output data space (e.g. Outputs)")
    return Workload(name=shape.name or "timeloop-problem", dims=tuple(dims),
                    bounds=tuple(bounds), tensors=tuple(tensors))


# -------------------------------------------------------------------------------- mapping
def _parse_factors(text: str, dims: list[str], doc: Any, loc: tuple) -> dict[str, int]:
    out = {}
    for tok in str(text).replace(",", " ").split():         # v0.4 also writes "R=3,P=16"
        m = re.match(r"^([A-Za-z_]\w*?)=?(\d+)$", tok)
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


# ------------------------------------------------------------------------------- ERT / ART
def _component_key(name: str) -> str:
    """An Accelergy table name's component: 'system.PE[0..1].SRAM' -> 'SRAM',
    'system_top_level.shared_glb[1..1]' -> 'shared_glb' (ranges hold dots of their own)."""
    return re.sub(r"\[\d+\.\.\d+\]", "", str(name)).split(".")[-1]


def _action_energy(actions: list, names: tuple[str, ...]) -> float | None:
    for want in names:
        best = None
        for a in actions:
            if a.get("name") != want:
                continue
            # Accelergy 0.3 argues an access by address_delta/data_delta; 0.4's arguments
            # (global_cycle_seconds, action_latency_cycles) describe timing, not the access
            args = {k: v for k, v in (a.get("arguments") or {}).items() if k in ("address_delta", "data_delta")}
            energy = float(number(a.get("energy", 0.0)))
            if not args:
                best = energy if best is None else best
            elif args.get("address_delta") == 1 and args.get("data_delta") == 1:
                return energy
        if best is not None:
            return best
    return None


def check_table(doc, kind: str) -> None:
    """An Accelergy ERT (energies per action, with 0/1 delta arguments) or ART (areas) under its
    top-level ``kind:`` key (:func:`storeloop.formats.load.load_energy_file` checks that first): every
    number finite and in range, located at its line."""
    validate(ERTBody if kind == "ERT" else ARTBody, doc[kind], doc, (kind,))
    tables = doc[kind]["tables"]


    def nonneg(value, loc, what, most=math.inf, unit=""):
        try:
            v = number(value)
            good = math.isfinite(v) and 0 <= v <= most
        except (ExpressionError, TypeError):
            good = False
        if not good:
            raise error_at(doc, loc, f"{what} {value!r} is not a number in 0 .. {most:g}{unit}",
                           allowed=f"a finite {what} >= 0" + (f", at most {most:g}{unit} (more is a slip of units)"
                                                             if most < math.inf else ""))

    for i, t in enumerate(tables):
        loc = (kind, "tables", i)
        if not isinstance(t, dict) or "name" not in t:
            raise error_at(doc, loc, "a table needs a 'name'", allowed="{name, actions} (ERT) or {name, area} (ART)")
        if kind == "ART":
            nonneg(t.get("area", 0.0), loc + ("area",), "area", MAX_AREA_UM2, " um^2")
            continue
        for j, a in enumerate(t.get("actions") or []):
            aloc = loc + ("actions", j)
            if not isinstance(a, dict) or "name" not in a:
                raise error_at(doc, aloc, "an action needs a 'name'", allowed="{name, arguments, energy}")
            nonneg(a.get("energy", 0.0), aloc + ("energy",), "energy", MAX_ACTION_PJ, " pJ")
            for arg, v in (a.get("arguments") or {}).items():
                if arg in ("address_delta", "data_delta"):
                    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                        raise error_at(doc, aloc + ("arguments", arg), f"argument {arg} = {v!r} is not a whole "
                                       "number >= 0", allowed="0 or 1 for address_delta and data_delta")
                else:                       # Accelergy 0.4: global_cycle_seconds, action_latency_cycles
                    nonneg(v, aloc + ("arguments", arg), f"argument {arg}")


def energy_table_from_timeloop(arch: Arch, ert: LDict | None, art: LDict | None,
                               ert_name: str = "ERT", art_name: str = "ART") -> EnergyTable:
    """Per-action energies from an Accelergy ERT and areas from an ART, for ``arch``'s levels.

    Storage levels use the ``read``/``write`` actions with ``address_delta=1, data_delta=1`` (or
    the argument-less ones); the compute unit uses ``mac_random`` (else ``compute``/``mac``). A
    ``vector-access-energy`` attribute on a level overrides both, as in Timeloop. ``ert`` and
    ``art`` as :func:`storeloop.formats.load.load_energy_file` returns them: their tables checked.
    """
    ert_tables = {_component_key(t["name"]): t.get("actions") or [] for t in (ert or {}).get("ERT", {}).get("tables", [])}
    art_tables = {_component_key(t["name"]): float(number(t.get("area", 0.0)))
                  for t in (art or {}).get("ART", {}).get("tables", [])}
    storage = {}
    for lvl in arch.levels:
        vae = _attr(lvl.attributes, "vector-access-energy", "vector_access_energy")
        if vae is not None:
            r = w = float(number(vae))
            src = f"user: vector-access-energy {r} pJ in the arch"
        else:
            acts = ert_tables.get(lvl.name)
            if acts is None:
                raise SpecError(f"no ERT entry for storage level {lvl.name}", file=ert_name,
                                allowed=", ".join(sorted(ert_tables)) or "(ERT has no tables)")
            r = _action_energy(acts, ("read",))
            w = _action_energy(acts, ("write", "update"))
            if r is None or w is None:
                raise SpecError(f"the ERT table of storage level {lvl.name} has no "
                                f"'{'read' if r is None else 'write'}' action", file=ert_name,
                                allowed="read and write (or update) actions, as Accelergy writes them")
            src = f"{ert_name}: {lvl.name} read/write"
        storage[lvl.name] = ActionCosts(read_pJ=r, write_pJ=w, area_um2=art_tables.get(lvl.name, 0.0),
                                        source=src + f"; area {art_name}")
    c = arch.compute
    acts = ert_tables.get(c.name)
    if acts is None:
        raise SpecError(f"no ERT entry for compute unit {c.name}", file=ert_name,
                        allowed=", ".join(sorted(ert_tables)) or "(ERT has no tables)")
    e = _action_energy(acts, ("mac_random", "compute", "mac", "multiply"))
    if e is None:
        raise SpecError(f"the ERT table of compute unit {c.name} has no mac_random, compute, mac or multiply action",
                        file=ert_name, allowed="one of those actions, as Accelergy writes them")
    compute = ActionCosts(read_pJ=e, write_pJ=0.0, area_um2=art_tables.get(c.name, 0.0),
                          source=f"{ert_name}: {c.name} mac_random; area {art_name}")
    return EnergyTable(storage=storage, compute=compute, source=f"{ert_name} + {art_name}")
