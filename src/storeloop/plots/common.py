"""What every figure shares: the style, a figure with its axes, values read as numbers, current rows
with the thesis's design parameters as numbers, rows per database size, and writing PNG and PDF."""

from __future__ import annotations

from pathlib import Path

import re

import matplotlib.pyplot as plt

from storeloop.formats.quantities import ExpressionError, bytes_of, split_unit
from storeloop.sweeps import mapped

STYLE = {"axes.formatter.useoffset": False, "axes.spines.top": False, "axes.spines.right": False,
         "axes.grid": True, "grid.alpha": 0.3, "legend.fontsize": 7, "axes.titlesize": 10}
SRAM, RF, SRAM_N, UNITS = "levels.SRAM.capacity", "levels.RF.capacity", "levels.SRAM.instances", \
    "levels.RF.instances+compute.instances"




def _ok(df):
    out = mapped(df).copy()
    out["time_s"] = out["cycles"] / out["clock_hz"]
    out["energy_J"] = out["energy_pJ"] / 1e12
    out["on_chip_area_mm2"] = out["on_chip_area_um2"] / 1e6
    return out


_SIZED = re.compile(r"^(?P<scheme>.+)-(?P<size>\d+(?:KiB|MiB|GiB|TiB))(?:\.ya?ml)?$")


def _scheme_and_bytes(workload: str):
    m = _SIZED.match(workload)
    if not m:
        return None, None
    return m.group("scheme"), bytes_of(m.group("size"))


def _fig(ncols: int = 1, size=(6.4, 4.2)):
    with plt.rc_context(STYLE):
        fig, axes = plt.subplots(1, ncols, figsize=size, squeeze=False)
    return fig, list(axes[0])


def _amount(value) -> float:
    """'4 KiB' -> 4096 (bytes), '32 words' -> 32, '2' -> 2, '10 GB/s' -> 10 (the number before
    any other unit)."""
    text = str(value).strip()
    if text.endswith("words"):
        return float(text[:-5])
    try:
        return float(text)
    except ValueError:
        pass
    try:
        return float(bytes_of(text))
    except (ExpressionError, ValueError):
        return float(split_unit(text)[0])


def frame(df):
    """Current ``ok`` rows with time_s, energy_J, on_chip_area_mm2, power_W and each parameter
    as a number in ``<param>#`` (bytes for sizes, words for word counts)."""
    d = _ok(df)
    d["power_W"] = d["energy_J"] / d["time_s"]
    for col in (SRAM, RF, SRAM_N, UNITS):
        if col in d:
            d[col + "#"] = d[col].map(_amount)
    return d


def sized(df):
    """Rows of ``<scheme>-<size>`` workloads (scheme and size from the file name) with scheme,
    db_bytes, db_GiB, GB_per_s (database bytes per second), J_per_GB and power_W."""
    d = frame(df)
    parsed = d["workload"].map(_scheme_and_bytes)
    d["scheme"] = parsed.map(lambda x: x[0])
    d["db_bytes"] = parsed.map(lambda x: x[1])
    d = d[d["scheme"].notna()].copy()
    d["db_GiB"] = d["db_bytes"] / 2**30
    d["GB_per_s"] = d["db_bytes"] / d["time_s"] / 1e9
    d["J_per_GB"] = d["energy_J"] / (d["db_bytes"] / 1e9)
    return d.sort_values(["scheme", "db_bytes"])


def save(fig, path: str | Path) -> list[Path]:
    """Write ``fig`` as ``<path>.png`` and ``<path>.pdf`` and close it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    out = []
    for ext in (".png", ".pdf"):
        fig.savefig(path.with_suffix(ext), dpi=130)
        out.append(path.with_suffix(ext))
    plt.close(fig)
    return out
