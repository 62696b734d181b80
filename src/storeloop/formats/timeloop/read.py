"""Timeloop v0.3 (and v0.4) architectures and problems read into storeloop's typed objects (the
mapping: :mod:`.mapping`; ERT and ART: :mod:`.energy`).

Timeloop users can bring their files unchanged; storeloop turns them into its typed objects, and
writes its own specs back as Timeloop v0.3 so a real Timeloop can cross-check any result.
"""

from __future__ import annotations

import difflib
import math
import re
import warnings
from typing import Any

from storeloop.formats.attributes import check_attributes, cluster_size
from storeloop.formats.quantities import ExpressionError, integer, number, technology_nm
from storeloop.formats.timeloop.schema import Architecture, ConstraintEntry, Node, Problem, V04Node
from storeloop.formats.validate import validate
from storeloop.formats.yamlio import LDict, error_at, field_path, locate
from storeloop.ir import Arch, ComputeLevel, SourcedEntry, StorageLevel, Tensor, TimeloopV04, Workload
from storeloop.ir.check import ops_problem

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


def attribute(attrs: dict, *names: str, default: Any = None) -> Any:
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
                        word_bits=integer(attribute(a, "datawidth", "word-bits", "word_bits", default=64)),
                        attributes=dict(a), where=(*locate(doc, cloc), field_path(cloc))))
                    continue
                word_bits = integer(attribute(a, "word-bits", "word_bits", "datawidth", default=a.get("width", 64)))
                block = integer(attribute(a, "block-size", "block_size", default=1))
                depth = attribute(a, "depth", "entries")
                size = attribute(a, "size")
                if depth is not None and size is not None:
                    raise error_at(doc, cloc + ("attributes", "size"), "both 'size' and 'depth' give the capacity",
                                   allowed="one of them (size in words, or depth in blocks)")
                size_words = integer(size) if size is not None else (
                    integer(depth) * block if depth is not None else None)
                mb = attribute(a, "multiple_buffering", "multiple-buffering")
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
