"""One function per figure of the OnionChopper thesis's chapter 6 (Figures 6-1 .. 6-13), plus a
roofline of one design. Each takes results read from a store (:func:`storeloop.sweeps.read_results`;
only current ``ok`` rows are drawn) and returns a matplotlib Figure; :func:`save` writes PNG and PDF.

Rules every figure follows: log axes where values span decades (areas, database sizes, RF depths),
linear axes start at zero (or the quantity is drawn relative to a stated baseline), no offset
ticks, one colour per value of a design parameter, every point one design, bound lines and the
thesis's published values overlaid where it gives them, titles that say what is drawn.
"""

from __future__ import annotations

import json

import matplotlib.pyplot as plt
from matplotlib.ticker import FuncFormatter

from storeloop.plots import pareto_front
from storeloop.plots.common import (RF, SRAM, UNITS, _fig, frame, save,  # noqa: F401  (save, sized: the notebooks')
                                    sized)
from storeloop.sweeps import level_breakdown, own_cycles

# Published numbers (thesis ch. 6). They are drawn beside storeloop's; never used to compute them.
THESIS = {
    "cycles_one_unit": 1.7e10,          # Fig. 6-1: the cluster of one-compute-unit designs
    "cycles_ssd_bound": 12_862_500_500,  # ch. 6.1: 64.3125 GB at 10 GB/s, 2 GHz
    "cycles": 12_833_318_209,            # ch. 6.4, the optimal design on 64 GB
    "energy_J": 169.09, "power_W": 26.35, "on_chip_area_mm2": 6.87,
    "ssd_energy_share": 0.6499, "compute_energy_share": 0.3343, "compute_area_share": 0.9954,
    "optimal": "2 x SRAM 4 KB + 2 x RF 32 words",
    "speed_at_512MB": 0.89,             # ch. 6.5: of the peak speed
    "cpu_minutes_64GB": 29.0, "speedup": 271.9,
}
def _bytes(v: float) -> str:
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if v >= size:
            return f"{v / size:g} {unit}"
    return f"{v:g} B"


def _label(param: str, v: float) -> str:
    return _bytes(v) if param == SRAM else f"{v:g}"


def _by_colour(ax, d, x: str, y: str, param: str):
    """A scatter of y against x, one colour per value of ``param`` (sorted by magnitude); the
    caller draws the legend (titled by the parameter) once its lines are added."""
    values = sorted(d[param + "#"].unique())
    cmap = plt.get_cmap("viridis")
    for i, v in enumerate(values):
        g = d[d[param + "#"] == v]
        ax.scatter(g[x], g[y], s=16, color=cmap(i / max(len(values) - 1, 1)), label=_label(param, v),
                   alpha=0.85, edgecolors="none")


def _log_area(ax):
    ax.set_xscale("log")
    ax.set_xlabel("on-chip area (mm², log scale)")


# ---------------------------------------------------------------- 6.1, 6.2: architecture sweeps
def fig_6_1(initial):
    """Figure 6-1: cycles of every design of the initial sweep against its on-chip area, coloured
    by the number of compute units, with the two bounds that explain the thesis's two clusters."""
    d = frame(initial)
    fig, (ax,) = _fig()
    _by_colour(ax, d, "on_chip_area_mm2", "cycles", UNITS)
    _log_area(ax)
    ax.set_yscale("log")
    ax.set_ylabel("cycles (log scale)")
    one = d["computes"].max()
    ax.axhline(one, color="black", lw=0.8, ls=":", label="1 compute unit: one MAC per cycle (storeloop)")
    ax.axhline(d["lower_bound_cycles"].min(), color="black", lw=0.8, ls="--", label="Disk bandwidth bound (storeloop)")
    ax.axhline(THESIS["cycles_one_unit"], color="tab:red", lw=0.8, ls=":", label="thesis: 1-unit cluster (1.7e10)")
    ax.axhline(THESIS["cycles_ssd_bound"], color="tab:red", lw=0.8, ls="--", label="thesis: SSD bound (1.286e10)")
    ax.legend(ncols=2, loc="center right", fontsize=6, title="compute units; bounds", title_fontsize=7)
    ax.set_title(f"Fig. 6-1  Initial sweep: cycles of {len(d):,} designs (OnionPIR 64 GiB)")
    return fig


def fig_6_2(refined):
    """Figure 6-2: cycles of the refined sweep (2 SRAMs, 2 RF/MAC pairs) against area, coloured by
    RF depth, zero-based, with the Disk bound."""
    d = frame(refined)
    fig, (ax,) = _fig()
    _by_colour(ax, d, "on_chip_area_mm2", "cycles", RF)
    _log_area(ax)
    ax.axhline(d["lower_bound_cycles"].min(), color="black", lw=0.8, ls="--", label="Disk bandwidth bound")
    ax.axhline(THESIS["cycles"], color="tab:red", lw=0.8, ls=":", label="thesis's optimum (12,833,318,209)")
    ax.set_ylim(0, d["cycles"].max() * 1.15)
    ax.set_ylabel("cycles (axis from 0)")
    ax.legend(ncols=2, loc="lower right", fontsize=6, title="RF depth (words); bounds", title_fontsize=7)
    ax.set_title(f"Fig. 6-2  Refined sweep: cycles of {len(d)} designs (OnionPIR 64 GiB)")
    return fig


def _energy_vs_area(d, title: str):
    fig, (ax,) = _fig()
    _by_colour(ax, d, "on_chip_area_mm2", "energy_J", RF)
    f = pareto_front(d, "on_chip_area_mm2", "energy_J")
    ax.plot(f["on_chip_area_mm2"], f["energy_J"], color="grey", lw=1, label="Pareto front")
    ax.scatter([THESIS["on_chip_area_mm2"]], [THESIS["energy_J"]], marker="*", s=120, color="tab:red",
               label="thesis's optimum (Timeloop + Accelergy)")
    _log_area(ax)
    ax.set_ylim(0, max(d["energy_J"].max(), THESIS["energy_J"]) * 1.1)
    ax.set_ylabel("energy per query pass (J, axis from 0)")
    ax.legend(ncols=2, loc="lower right", fontsize=6, title="RF depth (words)", title_fontsize=7)
    ax.set_title(title)
    return fig


def fig_6_3(refined):
    """Figure 6-3: energy against area for every design of the refined sweep."""
    d = frame(refined)
    return _energy_vs_area(d, f"Fig. 6-3  Refined sweep: energy vs area, {len(d)} designs")


def fast_only(d, within: float = 0.01):
    """The designs within ``within`` of their workload's fewest cycles (thesis: "fast only")."""
    return d[d["cycles"] <= (1 + within) * d.groupby("workload")["cycles"].transform("min")]


def fig_6_4(refined):
    """Figure 6-4: energy against area for the refined sweep's fast designs (cycles within 1 % of
    the fewest)."""
    d = fast_only(frame(refined))
    return _energy_vs_area(d, f"Fig. 6-4  Refined sweep (fast only: within 1 % of the fewest cycles), {len(d)} designs")


def fig_6_5(refined, sram_sizes: int = 4):
    """Figure 6-5: energy against RF depth for the smallest SRAM sizes (fast designs), drawn above
    the panel's least energy lower bound so differences of a fraction of a joule are visible. Each
    point's bar reaches down to its energy lower bound: the best mapping of that design lies in the
    bar, so designs whose bars overlap are not told apart by the search."""
    d = fast_only(frame(refined))
    fig, (ax,) = _fig()
    cmap = plt.get_cmap("viridis")
    sizes = sorted(d[SRAM + "#"].unique())[:sram_sizes]
    shown = d[d[SRAM + "#"].isin(sizes)]
    has_lb = "lower_bound_energy_pJ" in shown and shown["lower_bound_energy_pJ"].notna().all()
    lb_J = shown["lower_bound_energy_pJ"] / 1e12 if has_lb else shown["energy_J"]
    base = float(lb_J.min())
    for i, s in enumerate(sizes):
        g = shown[shown[SRAM + "#"] == s].sort_values(RF + "#")
        y = (g["energy_J"] - base) * 1e3
        below = (g["energy_J"] - g["lower_bound_energy_pJ"] / 1e12) * 1e3 if has_lb else None
        ax.errorbar(g[RF + "#"], y,
                    yerr=None if below is None else [below, 0 * below], marker="o", ms=4, capsize=2,
                    color=cmap(i / max(len(sizes) - 1, 1)), label=f"SRAM {_label(SRAM, s)}")
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.set_ylim(bottom=0)
    ax.set(xlabel="RF depth (words, log2 scale)",
           ylabel=f"energy above {base:.3f} J (mJ)")
    ax.legend(title="2 x SRAM of" + ("\n(bars: down to the energy lower bound)" if has_lb else ""), title_fontsize=7)
    ax.set_title("Fig. 6-5  Register-file depth vs energy, smallest SRAMs (fast designs)")
    return fig


def fig_6_6(row, arch):
    """Figure 6-6: the optimal design as its storage hierarchy, each level with its instances, size
    and share of energy and on-chip area (from the row's stored per-level breakdown)."""
    levels = json.loads(row["levels"])
    energy = sum(v["energy_pJ"] for v in levels.values())
    chip = sum(v["area_um2"] for v in levels.values() if not v["off_chip"])
    boxes = []
    for lvl in arch.levels:
        size = "unbounded" if lvl.size_words is None else \
            (_bytes(lvl.size_words * lvl.word_bits / 8) if lvl.size_words * lvl.word_bits >= 8192
             else f"{lvl.size_words} words")
        boxes.append((lvl.name, lvl.instances, size, levels[lvl.name]))
    boxes.append((arch.compute.name, arch.compute.instances, "compute", levels[arch.compute.name]))
    fig, (ax,) = _fig(size=(6.4, 5.2))
    ax.axis("off")
    n = len(boxes)
    ys = [1 - (i + 0.5) / n for i in range(n)]
    for i, (name, inst, size, v) in enumerate(boxes):
        share_a = "off chip" if v["off_chip"] else f"{100 * v['area_um2'] / chip:.2f} % of on-chip area"
        ax.text(0.5, ys[i], f"{inst} x {name}  ({size})\n{100 * v['energy_pJ'] / energy:.2f} % of energy, {share_a}",
                ha="center", va="center", fontsize=8, transform=ax.transAxes,
                bbox=dict(boxstyle="round", fc="white" if v["off_chip"] else "#dbe9f6", ec="grey"))
        if i:
            ax.annotate("", xy=(0.5, ys[i] + 0.055), xytext=(0.5, ys[i - 1] - 0.055), xycoords="axes fraction",
                        arrowprops=dict(arrowstyle="->", color="grey"))
    ax.set_title(f"Fig. 6-6  Optimal design\n{row['cycles']:,} cycles, {row['energy_pJ'] / 1e12:.2f} J, "
                 f"{row['on_chip_area_um2'] / 1e6:.2f} mm² on chip")
    return fig


def roofline(row, title: str = ""):
    """Each level's own bound (its cycles under its bandwidth, and the compute units' cycles) against
    the design's achieved cycles: the level whose bar reaches the line is the bottleneck. ``row``: a
    stored sweep row, or a :class:`~storeloop.model.evaluate.Result`."""
    if hasattr(row, "compute_cycles"):                  # a Result

        row = {"levels": json.dumps(level_breakdown(row)), "cycles": row.cycles}
    levels = json.loads(row["levels"])
    fig, (ax,) = _fig()
    # what each level's own ports need (own_cycles); a level without a bandwidth limit needs none
    # and has no bar
    need = {n: own_cycles(v) for n, v in levels.items()}
    names = [n if need[n] else f"{n} (no bandwidth limit)" for n in levels]
    cyc = [need[n] or float("nan") for n in levels]
    ax.barh(names[::-1], cyc[::-1], color=["tab:orange" if c + 1 >= row["cycles"] else "tab:blue" for c in cyc[::-1]])
    ax.axvline(row["cycles"], color="black", ls="--", lw=0.8, label=f"achieved: {row['cycles']:,} cycles")
    ax.set_xscale("log")
    ax.set_xlabel("cycles each level needs on its own (log scale)")
    ax.legend(loc="lower right")
    ax.set_title(title or "Roofline: each level's bound vs the achieved cycles")
    return fig


# ---------------------------------------------------------------- 6.7 .. 6.13: database sizes
def _vs_size(d, col: str, ylabel: str, title: str, schemes=None):
    fig, (ax,) = _fig()
    for scheme, g in d.groupby("scheme"):
        if schemes is None or scheme in schemes:
            ax.plot(g["db_GiB"], g[col], marker="o", label=scheme)
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.set_ylim(0, d[col].max() * 1.2 if len(d) else 1)
    ax.set(xlabel="database size (GiB, log2 scale)", ylabel=ylabel + " (axis from 0)")
    ax.set_title(title)
    return fig, ax


def fig_6_7(sizes, ssd_GBps: float):
    """Figure 6-7: OnionPIR speed (GB of database per second) against database size, with the SSD's
    bandwidth and the thesis's 89 % of peak at 512 MB."""
    d = sized(sizes)
    d = d[d["scheme"] == "onionpir"]
    fig, ax = _vs_size(d, "GB_per_s", "speed (GB of database / s)",
                       "Fig. 6-7  Accelerator speed vs database size, OnionPIR", ["onionpir"])
    ax.axhline(ssd_GBps, color="black", ls="--", lw=0.8, label=f"SSD bandwidth ({ssd_GBps:g} GB/s)")
    if len(d):
        ax.scatter([0.5], [THESIS["speed_at_512MB"] * d["GB_per_s"].max()], marker="*", s=100, color="tab:red",
                   label="thesis: 89 % of peak at 512 MB (drawn against storeloop's peak)")
    ax.set_ylim(0, ssd_GBps * 1.25)
    ax.legend(loc="lower right")
    return fig


def fig_6_8(sizes, cpu_macs_per_s: float):
    """Figure 6-8: OnionPIR time on this machine's CPU (measured NumPy kernel, scaled by MACs) and on
    the accelerator against database size, log-log, with the thesis's 64 GB times."""
    d = sized(sizes)
    d = d[d["scheme"] == "onionpir"].copy()
    d["cpu_s"] = d["computes"] / cpu_macs_per_s
    fig, (ax,) = _fig()
    ax.plot(d["db_GiB"], d["cpu_s"], marker="s", label=f"CPU, measured here ({cpu_macs_per_s / 1e6:.0f} M MAC/s)")
    ax.plot(d["db_GiB"], d["time_s"], marker="o", label="accelerator (storeloop)")
    ax.scatter([64], [THESIS["cpu_minutes_64GB"] * 60], marker="*", s=100, color="tab:red", label="thesis: CPU, 29 min")
    ax.scatter([64], [THESIS["cycles"] / 2e9], marker="*", s=100, color="tab:purple", label="thesis: accelerator")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.set(xlabel="database size (GiB, log2 scale)", ylabel="time per query pass (s, log scale)")
    ax.legend(loc="upper left")
    big = d.iloc[-1] if len(d) else None
    ratio = f"{big['cpu_s'] / big['time_s']:.1f}x at {big['db_GiB']:g} GiB" if big is not None else ""
    ax.set_title(f"Fig. 6-8  OnionPIR on a CPU vs the accelerator\n(accelerator {ratio} faster; thesis 271.9x)")
    return fig


def fig_6_9(sizes):
    """Figure 6-9: OnionPIR energy per GB of database against database size."""
    return _vs_size(sized(sizes), "J_per_GB", "energy (J / GB of database)",
                    "Fig. 6-9  Accelerator energy per GB vs database size, OnionPIR", ["onionpir"])[0]


def fig_6_10(sizes):
    """Figure 6-10: OnionPIR power against database size, with the thesis's 26.35 W at 64 GB."""
    fig, ax = _vs_size(sized(sizes), "power_W", "power (W)",
                       "Fig. 6-10  Accelerator power vs database size, OnionPIR", ["onionpir"])
    ax.scatter([64], [THESIS["power_W"]], marker="*", s=100, color="tab:red", label="thesis: 26.35 W at 64 GB")
    ax.set_ylim(0, max(ax.get_ylim()[1], THESIS["power_W"] * 1.2))
    ax.legend(loc="lower right")
    return fig


def _all_schemes(sizes, col, ylabel, title):
    fig, ax = _vs_size(sized(sizes), col, ylabel, title)
    ax.legend(title="scheme", loc="lower right")
    return fig


def fig_6_11(sizes):
    """Figure 6-11: speed against database size for every PIR scheme."""
    return _all_schemes(sizes, "GB_per_s", "speed (GB of database / s)", "Fig. 6-11  Speed vs database size, all schemes")


def fig_6_12(sizes):
    """Figure 6-12: energy per GB against database size for every PIR scheme."""
    return _all_schemes(sizes, "J_per_GB", "energy (J / GB)", "Fig. 6-12  Energy per GB vs database size, all schemes")


def fig_6_13(sizes):
    """Figure 6-13: power against database size for every PIR scheme."""
    return _all_schemes(sizes, "power_W", "power (W)", "Fig. 6-13  Power vs database size, all schemes")
