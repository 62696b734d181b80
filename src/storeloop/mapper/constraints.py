"""What map-space constraints mean, however they were written: Timeloop's constraint entries (a v0.4
arch's node constraints, a ``mapspace_constraints`` list) read as Timeloop v3.0.3 reads them, and
the factor ranges, dimensions, tensors and levels both formats name. The files themselves are read
by :mod:`storeloop.formats.constraints`."""

from __future__ import annotations

import warnings

from storeloop.formats.quantities import ExpressionError, integer, number
from storeloop.formats.timeloop.schema import MODELLED_CONSTRAINTS, UNMODELLED_FIELDS
from storeloop.formats.yamlio import error_at, locate
from storeloop.ir import Arch, SourcedEntry, Workload
from storeloop.ir.constraints import Constraints, LevelConstraint


BOUND_HELP = "an integer factor, '<=N', '>=N' or 'A..B'"


def factor_range(text, doc, loc, *, free_zero: bool = False) -> tuple[int, int]:
    """(min, max) factor from '8', '<=8', '>=2' or '1..4'; factors are >= 1 (``free_zero``: a
    Timeloop factor 0, the whole dimension, gives (0, 0) for the caller to resolve)."""
    s = str(text).replace(" ", "")
    try:
        if s.startswith("<="):
            lo, hi = 1, integer(s[2:])
        elif s.startswith(">="):
            lo, hi = integer(s[2:]), 1 << 62
        elif ".." in s:
            a, b = s.split("..", 1)
            lo, hi = integer(a), integer(b)
        else:
            lo = hi = integer(s)
    except ExpressionError as exc:
        raise error_at(doc, loc, str(exc), allowed=BOUND_HELP) from None
    if free_zero and (lo, hi) == (0, 0):
        return 0, 0
    if lo < 1 or hi < lo:
        raise error_at(doc, loc, f"factor {text!r} is not a factor >= 1", allowed=BOUND_HELP + " with factors >= 1"
                       + (" (0: the whole dimension)" if free_zero else ""))
    return lo, hi


def dim_index(name, workload: Workload, doc, loc) -> int:
    dims = {d.upper(): i for i, d in enumerate(workload.dims)}
    if str(name).upper() not in dims:
        raise error_at(doc, loc, f"unknown dimension {name!r}", allowed=", ".join(workload.dims))
    return dims[str(name).upper()]


def tensor_names(value, workload: Workload, doc, loc) -> frozenset[str]:
    names = [t.name for t in workload.tensors]
    if not isinstance(value, list):
        raise error_at(doc, loc, "must be a list of tensor names", allowed=", ".join(names))
    for i, t in enumerate(value):
        if t not in names:
            raise error_at(doc, loc + (i,), f"unknown tensor {t!r}", allowed=", ".join(names))
    return frozenset(value)


def fanout_names(arch: Arch) -> dict[str, str]:
    """Timeloop v0.4's ``inter_<container>_spatial`` levels -> the storage level whose fanout each is."""
    return dict(arch.timeloop.spatial_levels)


def level_index(name, arch: Arch, doc, loc) -> int:
    names = [lvl.name for lvl in arch.levels]
    short = fanout_names(arch).get(str(name), str(name).split(".")[-1].split("[")[0])
    if short not in names:
        raise error_at(doc, loc, f"unknown level {name!r}", allowed=", ".join(names + list(fanout_names(arch))))
    return names.index(short)


def arch_constraints(arch: Arch, workload: Workload) -> Constraints | None:
    """The map-space constraints a Timeloop v0.4 arch carries on its nodes (None: it has none)."""
    if not arch.timeloop.constraints:
        return None
    return timeloop_constraints(list(arch.timeloop.constraints), arch, workload, arch.name)


def timeloop_constraints(items: list[SourcedEntry], arch: Arch, workload: Workload, source: str) -> Constraints:
    """Typed Timeloop constraint entries (a v0.4 node's with the target and type it implies), read as Timeloop v3.0.3's ``Constraints::Parse`` reads
    them: a factor, permutation or split given twice for one level is an error ("a conflict
    between architecture and mapspace constraints"), a factor of 0 is the whole dimension, a
    permutation lists the innermost loops first and, after a ``_``, the outermost ones."""
    out = Constraints(source=source)
    fixed: dict[int, list] = {}                  # dim -> [(factor, doc, loc)] of the fixed factors
    first: dict[tuple, tuple] = {}               # what was given -> (doc, loc) of its entry

    def once(what: tuple, doc, loc, text: str) -> None:
        if what in first:
            f, line = locate(*first[what])
            raise error_at(doc, loc, f"re-specification of {text} at {what[0]} (first given at {f}:{line}): "
                           "Timeloop refuses a conflict between architecture and mapspace constraints",
                           allowed="each factor, permutation and split once per level and type")
        first[what] = (doc, loc)

    for item in items:
        entry, doc, loc = item.entry, item.doc, item.loc
        target = entry.target if entry.target is not None else entry.name
        if target is None:
            raise error_at(doc, loc, "a constraint needs a 'target' level", allowed="target: <level name>")
        if entry.type not in MODELLED_CONSTRAINTS:
            warnings.warn(f"storeloop: {locate(doc, loc)[0] or source}: a '{entry.type}' constraint (line "
                          f"{locate(doc, loc)[1]}) is Timeloop's but not part of storeloop's map space; it is ignored")
            continue
        unmodelled = sorted(set(UNMODELLED_FIELDS) & entry.model_fields_set)
        if unmodelled:
            warnings.warn(f"storeloop: {locate(doc, loc)[0] or source}: {', '.join(unmodelled)} (line "
                          f"{locate(doc, loc)[1]}) is Timeloop's but not part of storeloop's map space; ignored")
        L = level_index(target, arch, doc, loc + ("target",))
        kind, given = entry.type, entry.model_fields_set
        if kind in ("utilization", "parallelism"):
            # one minimum for the whole map space, whatever level names it (Constraints::Parse)
            once(("*", "parallelism"), doc, loc, "min parallelism/utilization")
            try:
                share = float(number(entry.min)) if entry.min is not None else None
            except ExpressionError as exc:
                raise error_at(doc, loc + ("min",), str(exc), allowed="a fraction 0 .. 1") from None
            if share is None or not 0.0 <= share <= 1.0:
                raise error_at(doc, loc + ("min",), f"a {kind} constraint needs 'min', a fraction of the compute "
                               f"units in use (got {entry.min!r})", allowed="a fraction 0 .. 1")
            out.min_parallelism = share
            continue
        if str(target) in fanout_names(arch) and kind != "spatial":
            continue                             # a v0.4 fanout level keeps nothing and has no temporal loops
        c = out.levels.setdefault(L, LevelConstraint())
        if kind in ("bypass", "bypassing", "datatype", "dataspace"):
            if "keep" in given:
                c.keep = (c.keep or frozenset()) | tensor_names(entry.keep, workload, doc, loc + ("keep",))
            if "bypass" in given:
                c.bypass = (c.bypass or frozenset()) | tensor_names(entry.bypass, workload, doc, loc + ("bypass",))
            if c.keep and c.bypass and c.keep & c.bypass:
                raise error_at(doc, loc, f"{', '.join(sorted(c.keep & c.bypass))} both kept and bypassed",
                               allowed="each tensor in keep or in bypass")
            continue
        # kind is temporal or spatial. A permutation lists the innermost loops first; after a '_'
        # separator, the outermost ones (Constraints::ParsePermutations)
        tokens = list(entry.permutation) if isinstance(entry.permutation, str) else list(entry.permutation or [])
        tokens = [t.strip() for t in tokens if t.strip()]
        cut = tokens.index("_") if "_" in tokens else len(tokens)
        prefix = [dim_index(t, workload, doc, loc + ("permutation",)) for t in tokens[:cut]]
        suffix = [dim_index(t, workload, doc, loc + ("permutation",)) for t in tokens[cut + 1:] if t != "_"]
        perm = prefix + suffix
        if len(set(perm)) < len(perm):
            raise error_at(doc, loc + ("permutation",), "a dimension is named twice in the permutation",
                           allowed="each dimension at most once")
        if perm:
            once((target, kind, "permutation"), doc, loc + ("permutation",), "the permutation")
        split = len(perm) if entry.split is None else entry.split     # a strict integer >= 0
        if kind == "spatial" and "split" in given:
            once((target, kind, "split"), doc, loc + ("split",), "the split")
        # a v0.4 container that is a row or a column is a fanout level of its own in Timeloop: all
        # its loops run along its axis, and its factors are those of that axis
        row = arch.timeloop.spatial_axes.get(str(target)) if kind == "spatial" else None
        if kind == "spatial" and "split" in given and row is None:
            # Timeloop's spatial permutation is the prefix, the dims no one named, then the suffix;
            # its first ``split`` positions run along X, the others along Y (without a split,
            # Timeloop tries every split)
            free = frozenset(range(len(workload.dims))) - set(perm)
            n_pre = len(prefix)
            for pos, d in list(enumerate(prefix)) + [(n_pre + len(free) + j, d) for j, d in enumerate(suffix)]:
                c.axis[d] = "X" if pos < split else "Y"
            kx = min(max(split - n_pre, 0), len(free))
            c.free_axes = (free, kx, len(free) - kx)
        factors = entry.factors.split() if isinstance(entry.factors, str) else list(entry.factors or [])
        for tok in factors:
            tok = str(tok).replace(" ", "")
            name, op, val = _split_factor(tok)
            d = dim_index(name, workload, doc, loc + ("factors",))
            f = factor_range(op + val if op != "=" else val, doc, loc + ("factors",), free_zero=True)
            once((target, kind, "factor", d), doc, loc + ("factors",), f"the {kind} factor of {workload.dims[d]}")
            bound = workload.bounds[d]
            # as Timeloop v3.0.3 (Constraints::ParseFactors): 0 is the whole dimension, and a factor
            # past the bound is the bound, each with a warning
            if f == (0, 0) or f[0] == f[1] > bound:
                what = "0 means the whole dimension" if f == (0, 0) else f"{f[0]} exceeds the bound"
                warnings.warn(f"storeloop: {source}: constraint {workload.dims[d]}={val} at {target}: {what}; "
                              f"using {workload.dims[d]}={bound}, as Timeloop does")
                f = (bound, bound)
            (c.temporal if kind == "temporal" else c.spatial_x if row == "X" else c.spatial_y if row == "Y"
             else c.spatial)[d] = f
            if f[0] == f[1]:
                fixed.setdefault(d, []).append((f[0], doc, loc + ("factors",)))
        if perm and kind == "temporal":
            # outer -> inner: the suffix (outermost), then the prefix; the loops no one named between
            c.permutation = list(reversed(suffix)) + list(reversed(prefix))
            c.anchor = (len(suffix), len(prefix))
    for d, group in fixed.items():                     # fixed factors must divide the bound together
        product = 1
        for f, fdoc, floc in group:
            product *= f
            if workload.bounds[d] % product:
                raise error_at(fdoc, floc, f"the factors of {workload.dims[d]} fixed so far multiply to {product}, "
                               f"which does not divide its bound {workload.bounds[d]}",
                               allowed=f"factors whose product divides {workload.bounds[d]}")
    return out


def _split_factor(tok: str) -> tuple[str, str, str]:
    """'N=512' / 'N<=8' / 'N>=2' / 'N512' -> (name, operator, value)."""
    for op in ("<=", ">=", "="):
        if op in tok:
            name, _, val = tok.partition(op)
            return name, op, val
    i = len(tok.rstrip("0123456789"))
    return tok[:i], "=", tok[i:]
