"""Accelergy's ERT and ART (energy per action, area per component) read into storeloop's energy table."""

from __future__ import annotations

import math
import re

from storeloop.errors import SpecError
from storeloop.formats.attributes import MAX_ACTION_PJ, MAX_AREA_UM2
from storeloop.formats.quantities import ExpressionError, number
from storeloop.formats.timeloop.read import attribute
from storeloop.formats.timeloop.schema import ARTBody, ERTBody
from storeloop.formats.validate import validate
from storeloop.formats.yamlio import LDict, error_at
from storeloop.ir import ActionCosts, Arch, EnergyTable


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
        vae = attribute(lvl.attributes, "vector-access-energy", "vector_access_energy")
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
