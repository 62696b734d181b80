"""Where the bound of the best mapping moves along one arch parameter (``storeloop crossover``).

Between ``low`` and ``high`` (a quantity such as ``10 GB/s``, or a count), the best mapping of the
workload is found at both ends; while the levels that bound them differ, the interval is bisected
geometrically (in whole numbers for a count) until it is narrower than ``tolerance``. Each probe is
the arch file with the parameter set (``a+b``: both fields take the value, as in a sweep) and the
mapper's best mapping of it.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Callable

from storeloop.errors import SpecError
from storeloop.formats.load import energy_table, load_arch, load_energy_docs
from storeloop.formats.quantities import ExpressionError, split_unit
from storeloop.ir import Workload
from storeloop.mapper import map_workload


def _quantity(text: str, flag: str) -> tuple[float, str | None]:
    try:
        amount, unit = split_unit(text)
    except ExpressionError as exc:
        raise SpecError(str(exc), field=flag, allowed="a positive number or quantity such as '10 GB/s'") from None
    if not amount > 0:
        raise SpecError(f"{text!r} is not positive", field=flag, allowed="a positive value (the search is geometric)")
    return float(amount), unit


def crossover(arch_file: str | Path, workload: Workload, path: str, low: str, high: str, *, tolerance: float = 0.01,
              ert: str | Path | None = None, art: str | Path | None = None,
              on_probe: Callable[[str, tuple], None] | None = None) -> dict:
    """The interval of ``path`` (a parameter path of the storeloop arch file ``arch_file``) in which
    the binding level of the best mapping changes: ``{path, moves, low, high, bound_low, bound_high,
    cycles_low, cycles_high, probes}``. ``ert``/``art``: an Accelergy pair priced instead of the
    plug-ins. ``on_probe(value, (bound, cycles, energy_J))``: told of every mapping made."""
    lo, unit = _quantity(low, "LOW")
    hi, unit_hi = _quantity(high, "HIGH")
    if unit != unit_hi or not lo < hi:
        raise SpecError(f"{low!r} .. {high!r}", field="LOW HIGH",
                        allowed="LOW < HIGH in the same unit, e.g. '1 GB/s' '100 GB/s'")
    if not 0 < tolerance < 1:
        raise SpecError(f"{tolerance}", field="--tolerance", allowed="a relative width between 0 and 1, e.g. 0.01")
    docs = load_energy_docs(ert, art) if ert is not None or art is not None else None
    whole = unit is None and lo.is_integer() and hi.is_integer()      # a count: integers only
    fmt = (lambda v: f"{v:.6g} {unit}") if unit else (lambda v: f"{v:.6g}")
    probes: dict[float, tuple] = {}

    def probe(v: float) -> tuple:
        if v not in probes:
            value = f"{v:.6g} {unit}" if unit else int(v) if whole else float(f"{v:.6g}")
            arch = load_arch(arch_file, [(p, value) for p in path.split("+")])
            energy = energy_table(arch, docs)
            r = map_workload(arch, workload, energy).result
            probes[v] = (r.bound_by, r.cycles, r.energy_J)
            if on_probe is not None:
                on_probe(fmt(v), probes[v])
        return probes[v]

    a, b = probe(lo), probe(hi)
    while a[0] != b[0] and hi / lo - 1 > tolerance and not (whole and hi - lo <= 1):
        mid = math.sqrt(lo * hi)
        if whole:
            mid = float(min(max(round(mid), lo + 1), hi - 1))
        m = probe(mid)
        if m[0] == a[0]:
            lo, a = mid, m
        else:
            hi, b = mid, m
    return {"path": path, "moves": a[0] != b[0], "low": fmt(lo), "high": fmt(hi), "bound_low": a[0],
            "bound_high": b[0], "cycles_low": a[1], "cycles_high": b[1], "probes": len(probes)}
