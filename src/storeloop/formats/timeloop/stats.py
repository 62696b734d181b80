"""What timeloop-model printed: cycles, energy and per-level, per-tensor counts from its stats text."""

from __future__ import annotations

import re
from pathlib import Path

from storeloop.errors import SpecError

_LEVEL = re.compile(r"^=== (?P<name>.+) ===$")
_FIELD = re.compile(r"^\s*(?P<key>[A-Za-z][^:]*?)\s*:\s*(?P<value>[-+]?\d[\d.]*(?:[eE][-+]?\d+)?)")
_TENSOR = re.compile(r"^    (?P<name>[A-Za-z_][A-Za-z0-9_]*):\s*$")
COUNTS = {"Scalar reads (per-instance)": "reads", "Scalar fills (per-instance)": "fills",
          "Scalar updates (per-instance)": "updates"}


def parse_stats(text: str, source: str = "timeloop-model.stats.txt") -> dict:
    """Cycles, energy (pJ) and per-level, per-tensor per-instance counts from Timeloop's stats text."""
    levels: dict[str, dict] = {}
    level = tensor = None
    summary: dict[str, float] = {}
    in_summary = False
    for line in text.splitlines():
        if line.startswith("Summary Stats"):
            in_summary = True
            continue
        if in_summary:
            m = re.match(r"^(Cycles|Energy): ([0-9.eE+-]+)", line)
            if m:
                summary[m.group(1)] = float(m.group(2))
            continue
        m = _LEVEL.match(line)
        if m:
            level, tensor = m.group("name"), None
            levels.setdefault(level, {"tensors": {}})
            continue
        if level is None:
            continue
        if line.startswith("Operational Intensity") or line.startswith("Networks"):
            level = None
            continue
        m = _TENSOR.match(line)
        if m:
            tensor = m.group("name")
            levels[level]["tensors"].setdefault(tensor, {})
            continue
        m = _FIELD.match(line)
        if not m:
            continue
        key, value = m.group("key"), float(m.group("value"))
        if tensor is None and key == "Cycles":
            levels[level]["cycles"] = int(value)
        elif tensor is not None and key in COUNTS:
            levels[level]["tensors"][tensor][COUNTS[key]] = int(value)
    if "Cycles" not in summary:
        raise SpecError("no 'Summary Stats / Cycles' line: not a timeloop-model stats file", file=source)
    return {"cycles": int(summary["Cycles"]), "energy_uJ": summary.get("Energy"), "levels": levels}


def read_stats(path: str | Path) -> dict:
    """:func:`parse_stats` of a ``timeloop-model.stats.txt`` file."""
    return parse_stats(Path(path).read_text(errors="replace"), str(path))
