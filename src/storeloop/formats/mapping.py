"""storeloop's mapping format (``mapping:``): per level, its temporal loops (outer -> inner), spatial
loops and the tensors it keeps; read, checked against its arch and workload, and written back."""

from __future__ import annotations

from pydantic import Field

from storeloop.errors import MappingError
from storeloop.formats.quantities import ExpressionError, integer
from storeloop.formats.validate import Strict, top_level
from storeloop.formats.yamlio import LDict, error_at
from storeloop.ir import Arch, LevelMapping, Loop, Mapping, Workload
from storeloop.ir.check import check_mapping, fit_fanouts


class LevelMappingSpec(Strict):
    level: str
    temporal: str | list[str] = Field("", description="loops outer->inner: 'C=2 K=2 D=128'")
    spatial: str | list[str] = Field("", description="spatial loops along X: 'J=2'")
    spatial_y: str | list[str] = Field("", description="spatial loops along Y")
    keep: list[str] | None = None
    bypass: list[str] | None = None
    below: dict[str, str] | None = Field(
        None, description="uneven positions: {tensor: DIM}, the tensor's tile here lies below this level's "
                          "temporal loop over DIM and the loops outside it (they refill it)")


class MappingSpec(Strict):
    name: str | None = None
    description: str | None = None
    imperfect: bool = Field(False, strict=True, description="true: a dimension's factors may multiply to more "
                            "than its bound; the problem padded to them is run (its last tiles full, the extra "
                            "elements zeros)")
    levels: list[LevelMappingSpec]


def _loops(text: str | list[str], workload: Workload, doc, loc, *, spatial: bool, axis: str = "X") -> tuple[Loop, ...]:
    toks = text.split() if isinstance(text, str) else [str(t) for t in text]
    loops = []
    dims = {d.upper(): i for i, d in enumerate(workload.dims)}
    seen = set()
    for tok in toks:
        if "=" not in tok:
            raise error_at(doc, loc, f"loop {tok!r} is not DIM=FACTOR", allowed="e.g. 'C=2 K=2 D=128'")
        d, v = tok.split("=", 1)
        if d.upper() not in dims:
            raise error_at(doc, loc, f"unknown dimension {d!r}", allowed=", ".join(workload.dims))
        if d.upper() in seen:
            raise error_at(doc, loc, f"dimension {d} has two loops here ({text!r})",
                           allowed="one loop per dimension in each temporal or spatial list (give their product)")
        seen.add(d.upper())
        try:
            f = integer(v)
        except ExpressionError as exc:
            raise error_at(doc, loc, str(exc)) from None
        if f < 1:
            raise error_at(doc, loc, f"factor {tok} must be >= 1")
        loops.append(Loop(dims[d.upper()], f, spatial, axis))
    return tuple(loops)


def mapping_from_native(doc: LDict, arch: Arch, workload: Workload, *, fit: bool = False) -> Mapping:
    """The mapping ``doc`` gives, checked against ``arch`` and ``workload``. ``fit``: spatial factors
    past a level's fanout are moved into its temporal loops first (:func:`storeloop.ir.check.fit_fanouts`:
    a seed from a neighbouring design)."""
    spec: MappingSpec = top_level(MappingSpec, doc, "mapping")
    names = [lvl.name for lvl in arch.levels]
    tensors = [t.name for t in workload.tensors]
    per_level: dict[int, LevelMapping] = {}
    locs: dict[int, tuple] = {}
    for i, lm in enumerate(spec.levels):
        loc = ("mapping", "levels", i)
        if lm.level not in names:
            raise error_at(doc, loc + ("level",), f"unknown level '{lm.level}'", allowed=", ".join(names))
        li = names.index(lm.level)
        if li in per_level:
            raise error_at(doc, loc + ("level",), f"level '{lm.level}' is mapped twice", allowed="each level once")
        keep = None
        if lm.keep is not None and lm.bypass is not None:
            raise error_at(doc, loc, "give either 'keep' or 'bypass', not both")
        for field in ("keep", "bypass"):
            for t in getattr(lm, field) or []:
                if t not in tensors:
                    raise error_at(doc, loc + (field,), f"unknown tensor '{t}'", allowed=", ".join(tensors))
        if lm.keep is not None:
            keep = frozenset(lm.keep)
        elif lm.bypass is not None:
            keep = frozenset(set(tensors) - set(lm.bypass))
        temporal = _loops(lm.temporal, workload, doc, loc + ("temporal",), spatial=False)
        dims = [workload.dims[lp.dim].upper() for lp in temporal]
        above = []
        for t, d in (lm.below or {}).items():
            if t not in tensors:
                raise error_at(doc, loc + ("below",), f"unknown tensor '{t}'", allowed=", ".join(tensors))
            if d.upper() not in dims:
                raise error_at(doc, loc + ("below", t), f"{lm.level} has no temporal loop over {d!r}",
                               allowed="one of this level's temporal loops: " + (", ".join(dims) or "none"))
            above.append((t, dims.index(d.upper()) + 1))
        per_level[li] = LevelMapping(
            temporal=temporal,
            spatial=_loops(lm.spatial, workload, doc, loc + ("spatial",), spatial=True, axis="X")
            + _loops(lm.spatial_y, workload, doc, loc + ("spatial_y",), spatial=True, axis="Y"),
            keep=keep, above=tuple(sorted(above, key=lambda a: tensors.index(a[0]))))
        locs[li] = loc
    mapping = Mapping(levels=tuple(per_level.get(li, LevelMapping()) for li in range(len(names))), name=spec.name,
                      imperfect=spec.imperfect)
    if fit:
        mapping = fit_fanouts(arch, mapping)
    validate_mapping(doc, mapping, arch, workload, locs, ("mapping", "levels"))
    return mapping


def validate_mapping(doc: LDict, mapping: Mapping, arch: Arch, workload: Workload,
                     locs: dict[int, tuple], root: tuple) -> None:
    """Factor products and fanouts, reported at the offending entry of the mapping file."""
    try:
        check_mapping(arch, workload, mapping)
    except MappingError as exc:
        if exc.level is not None and exc.kind == "uneven":
            li = arch.level_index(exc.level)
            raise error_at(doc, locs[li] + ("below",) if li in locs else root, exc.reason,
                           allowed="tensors this level keeps, below one of its temporal loops; not on the outermost, "
                                   "a paged or an SSD-backed level") from None
        if exc.level is not None:
            li = arch.level_index(exc.level)
            loc = locs[li] + ("spatial",) if li in locs else root
            raise error_at(doc, loc, exc.reason, allowed=_fanout_text(arch, li)) from None
        bounds = ", ".join(f"{d}={b}" for d, b in zip(workload.dims, workload.bounds))
        raise error_at(doc, root, exc.reason, allowed=f"the factors of each dimension over all levels multiply to at "
                       f"least its bound ({bounds})" if mapping.imperfect else "the factors of each dimension over "
                       f"all levels multiply to its bound: {bounds} (or, with 'imperfect: true', to at least it)") from None


def _fanout_text(arch: Arch, li: int) -> str:
    total, fx, fy = arch.fanout(li)
    return f"at most {total} spatial instances below {arch.levels[li].name} ({fx} along X, {fy} along Y)"



def format_loops(loops, workload: Workload) -> str:
    """'D=32 N=512': loops as written in a storeloop mapping file."""
    return " ".join(f"{workload.dims[lp.dim]}={lp.factor}" for lp in loops)


def mapping_to_native(mapping: Mapping, arch: Arch, workload: Workload) -> dict:
    """A storeloop mapping document (loops outer -> inner) that loads back to ``mapping``."""
    def loops(ls) -> str:
        return format_loops(ls, workload)

    levels = []
    for lvl, lm in zip(arch.levels, mapping.levels):
        entry: dict = {"level": lvl.name, "temporal": loops(lm.temporal)}
        xs = [lp for lp in lm.spatial if lp.axis == "X"]
        ys = [lp for lp in lm.spatial if lp.axis == "Y"]
        if xs:
            entry["spatial"] = loops(xs)
        if ys:
            entry["spatial_y"] = loops(ys)
        if lm.keep is not None:
            entry["keep"] = [t.name for t in workload.tensors if t.name in lm.keep]
        if any(n for _, n in lm.above):
            entry["below"] = {t: workload.dims[lm.temporal[n - 1].dim] for t, n in lm.above if n}
        levels.append(entry)
    doc = {"imperfect": True, "levels": levels} if mapping.imperfect else {"levels": levels}
    if mapping.name:
        doc = {"name": mapping.name, **doc}
    return {"mapping": doc}
