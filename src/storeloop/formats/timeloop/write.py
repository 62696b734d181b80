"""storeloop's typed objects written as Timeloop v0.3 files (arch, problem, mapping, ERT, ART), so
that a real Timeloop can cross-check any result."""

from __future__ import annotations

import math
from typing import Any

from storeloop.errors import MappingError, SpecError
from storeloop.formats.quantities import number
from storeloop.ir import Arch, EnergyTable, Loop, Mapping, StorageLevel, Workload

# classes Timeloop v3 + Accelergy 0.3 know (storage, compute); others are exported as the nearest
TIMELOOP_STORAGE = frozenset({"DRAM", "SRAM", "regfile", "smartbuffer_SRAM", "smartbuffer_RF"})
TIMELOOP_COMPUTE = frozenset({"intmac", "fpmac"})
# storeloop attribute spellings Timeloop reads hyphenated
HYPHENATED = {"vector_access_energy": "vector-access-energy"}


def arch_to_timeloop(arch: Arch, energy: EnergyTable | None = None) -> tuple[dict, list[str]]:
    """A Timeloop v0.3 architecture equivalent to ``arch`` (one nested subtree per fanout), and
    what it could not express (one line each).

    Component classes Accelergy 0.3 does not know (``Disk``, ``NIC``, ``modmac``...) are written as
    the nearest class it knows (off-chip levels as ``DRAM``, other storage as ``SRAM``, compute as
    ``intmac``) with the original in ``storeloop-class``; their energy then comes from the ERT that
    :func:`energy_to_timeloop` writes. With ``energy`` given, a ``vector-access-energy`` override is
    written only where it equals the read energy storeloop uses, so Timeloop prices like storeloop.
    """
    notes: list[str] = []

    def attrs(raw: dict) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for k, v in raw.items():
            if isinstance(v, (int, float, str)):
                out[HYPHENATED.get(k, k)] = v
        return out

    def comp(lvl: StorageLevel) -> dict:
        a = attrs(lvl.attributes)
        a.update({"word-bits": lvl.word_bits, "block-size": lvl.block_size})
        if lvl.size_words is not None:
            a["depth"] = lvl.size_words // lvl.block_size
        if lvl.buffering == "double" and lvl.size_words is not None:
            # Timeloop's way: the depth of both copies, of which tiles may use one (multiple_buffering);
            # the exported ART carries storeloop's two-copy area
            a["depth"] *= 2
            a["multiple_buffering"] = 2
        elif lvl.buffering == "single":
            notes.append(f"{lvl.name}: buffering single not expressible in Timeloop (its fills always overlap "
                         "use): Timeloop's cycles are lower where the mapping needs the level double-buffered")
        for k in ("read_bandwidth", "write_bandwidth", "shared_bandwidth"):
            if getattr(lvl, k) is not None:
                a[k] = getattr(lvl, k)
        if lvl.mesh_x is not None:
            a["meshX"] = lvl.mesh_x
        if "vector-access-energy" in a and energy is not None:
            mine = energy.storage[lvl.name].read_pJ
            try:
                same = math.isclose(float(number(a["vector-access-energy"])), mine, rel_tol=1e-9)
            except (ValueError, TypeError, SpecError):
                same = False
            if not same:
                del a["vector-access-energy"]
                notes.append(f"{lvl.name}: vector_access_energy dropped; the ERT carries storeloop's "
                             f"{mine:g} pJ per read")
        cls = lvl.cls
        if cls not in TIMELOOP_STORAGE:
            cls = "DRAM" if lvl.off_chip else "SRAM"
            a["storeloop-class"] = lvl.cls
            notes.append(f"{lvl.name}: class {lvl.cls} exported as {cls} (energy and area from the ERT/ART)")
        if lvl.page_bytes:
            notes.append(f"{lvl.name}: page_size {lvl.page_bytes} B not expressible in Timeloop "
                         "(it moves words, not pages): Timeloop counts fewer accesses where runs are short")
        return {"name": lvl.name, "class": cls, "attributes": a}

    comps = [comp(lvl) for lvl in arch.levels]
    c = arch.compute
    ca: dict[str, Any] = {"datawidth": c.word_bits}
    if c.mesh_x is not None:
        ca["meshX"] = c.mesh_x
    cls = c.cls
    if cls not in TIMELOOP_COMPUTE:
        ca["storeloop-class"] = c.cls
        cls = "intmac"
        notes.append(f"{c.name}: class {c.cls} exported as intmac (energy and area from the ERT/ART)")
    if c.cycles_per_op != 1:
        notes.append(f"{c.name}: cycles_per_op {c.cycles_per_op} not expressible in Timeloop "
                     "(it issues one operation per cycle): Timeloop's compute cycles are lower")
    comps.append({"name": c.name, "class": cls, "attributes": ca})
    # each component in its subtree (one per fanout), as its Accelergy name says
    top: dict[str, Any] = {"name": "system", "attributes": {"technology": arch.technology or "45nm"}, "local": []}
    node, depth = top, 0
    for comp_doc, (_, subtrees) in zip(comps, _placements(arch)):
        if len(subtrees) > depth:
            sub = {"name": subtrees[-1], "local": []}
            node.setdefault("subtree", []).append(sub)
            node, depth = sub, len(subtrees)
        node["local"].append(comp_doc)
    return {"architecture": {"version": 0.3, "subtree": [top]}}, notes


def _placements(arch: Arch) -> list[tuple[str, tuple[str, ...]]]:
    """Every level and the compute unit, outermost first, with the subtrees (one per fanout,
    ``L1[0..1]``...) it sits in below ``system``."""
    out, subtrees, parent_inst = [], (), 1
    for name, inst in [(lvl.name, lvl.instances) for lvl in arch.levels] + [(arch.compute.name, arch.compute.instances)]:
        if inst != parent_inst:
            subtrees += (f"L{len(subtrees) + 1}[0..{inst // parent_inst - 1}]",)
            parent_inst = inst
        out.append((name, subtrees))
    return out


def component_paths(arch: Arch) -> dict[str, str]:
    """Accelergy's full name of every level and the compute unit (``system.L1[0..1].SRAM``)."""
    return {name: ".".join(("system",) + subtrees + (name,)) for name, subtrees in _placements(arch)}


def energy_to_timeloop(arch: Arch, energy: EnergyTable) -> tuple[dict, dict]:
    """An Accelergy 0.3 ERT and ART holding storeloop's per-action energies and areas, named as
    Accelergy names the components of :func:`arch_to_timeloop`'s architecture."""
    paths = component_paths(arch)
    deltas = [{"address_delta": a, "data_delta": d} for a in (0, 1) for d in (0, 1)]
    ert, art = [], []
    for lvl in arch.levels:
        c = energy.storage[lvl.name]
        acts = [{"name": act, "arguments": dict(arg), "energy": e}
                for act, e in (("read", c.read_pJ), ("write", c.write_pJ), ("update", c.write_pJ)) for arg in deltas]
        acts.append({"name": "idle", "arguments": {"address_delta": 0, "data_delta": 0}, "energy": 0.0})
        ert.append({"name": paths[lvl.name], "actions": acts})
        art.append({"name": paths[lvl.name], "area": c.area_um2})
    c = energy.compute
    ert.append({"name": paths[arch.compute.name],
                "actions": [{"name": a, "energy": c.read_pJ} for a in ("mac_random", "mac_reused", "mac_gated")]
                + [{"name": "idle", "energy": 0.0}]})
    art.append({"name": paths[arch.compute.name], "area": c.area_um2})
    return {"ERT": {"version": 0.3, "tables": ert}}, {"ART": {"version": 0.3, "tables": art}}


def workload_to_timeloop(w: Workload) -> dict:
    coeffs: dict[int, str] = {}
    data_spaces = []
    for t in w.tensors:
        proj = []
        for rank in t.ranks:
            terms = []
            for d, c in rank:
                if c == 1:
                    terms.append([w.dims[d]])
                else:
                    name = coeffs.setdefault(c, f"c{c}")
                    terms.append([w.dims[d], name])
            proj.append(terms)
        ds: dict[str, Any] = {"name": t.name, "projection": proj}
        if t.read_write:
            ds["read-write"] = True
        data_spaces.append(ds)
    shape: dict[str, Any] = {"name": w.name, "dimensions": list(w.dims), "data-spaces": data_spaces}
    inst: dict[str, Any] = dict(zip(w.dims, w.bounds))
    if coeffs:
        shape["coefficients"] = [{"name": n, "default": c} for c, n in coeffs.items()]
        inst.update({n: c for c, n in coeffs.items()})
    return {"problem": {"shape": shape, "instance": inst}}


def mapping_to_timeloop(m: Mapping, arch: Arch, w: Workload) -> dict:
    if m.imperfect:
        raise MappingError("this mapping runs a padded problem (imperfect: true); Timeloop's mapping format "
                           "factors each dimension's bound exactly (its Ruby residuals price a short last tile, "
                           "not padding): export it with the padded bounds as the workload", kind="factors")
    if m.uneven:
        lvl, name = next((a.name, t) for a, lm in zip(arch.levels, m.levels) for t, n in lm.above if n)
        raise MappingError(f"Timeloop's mapping format has no uneven positions ({name}'s tile at {lvl} lies below "
                           f"some of that level's loops); write it as an even mapping to export it",
                           level=lvl, kind="uneven")
    out = []
    for lvl, lm in zip(arch.levels, m.levels):
        def entry(kind: str, loops: tuple[Loop, ...]) -> dict:
            f = {d: 1 for d in w.dims}
            for lp in loops:
                f[w.dims[lp.dim]] *= lp.factor
            order = [w.dims[lp.dim] for lp in loops]
            if kind == "temporal":
                order = list(reversed(order))          # Timeloop lists innermost first
            else:                                      # X loops innermost, then Y
                order = [w.dims[lp.dim] for lp in reversed(loops) if lp.axis == "X"] + \
                        [w.dims[lp.dim] for lp in reversed(loops) if lp.axis == "Y"]
            order += [d for d in w.dims if d not in order]
            e: dict[str, Any] = {"target": lvl.name, "type": kind,
                                 "factors": " ".join(f"{d}={f[d]}" for d in w.dims),
                                 "permutation": "".join(order) if all(len(d) == 1 for d in w.dims) else " ".join(order)}
            if kind == "spatial":
                e["split"] = sum(1 for lp in loops if lp.axis == "X")
            return e
        if lm.spatial:
            out.append(entry("spatial", lm.spatial))
        out.append(entry("temporal", lm.temporal))
        if lm.keep is not None:
            names = [t.name for t in w.tensors]
            out.append({"target": lvl.name, "type": "datatype",
                        "keep": [n for n in names if n in lm.keep],
                        "bypass": [n for n in names if n not in lm.keep]})
    return {"mapping": out}
