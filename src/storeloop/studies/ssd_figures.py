"""Figures of the thesis's SSD questions (docs/ssd.md, ``storeloop reproduce``): 3a the access
pattern and the tiling, 3b the SSD's speed and the best architecture, 3c the Disk's energy at
device level, 3d where the accelerator sits. Each takes the rows ``storeloop.studies.ssd.ssd_questions`` reads
from its runs and its store."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib import ticker  # noqa: E402

from storeloop.plots.common import STYLE, _fig  # noqa: E402


def _bars(ax, labels, values, ylabel: str, fmt: str = "{:.2f}"):
    bars = ax.bar(range(len(values)), values, color=plt.get_cmap("viridis")(0.35))
    ax.set_xticks(range(len(values)), labels, rotation=0, fontsize=7)
    ax.set_ylabel(ylabel)
    for b, v in zip(bars, values):
        ax.annotate(fmt.format(v), (b.get_x() + b.get_width() / 2, b.get_height()), ha="center", va="bottom",
                    fontsize=7)


def fig_3a(rows: list[dict]):
    """Time and energy per query: the thesis's mapping and the mapper's, on the flat Disk and the SSD."""
    fig, (a, b) = _fig(2, size=(9.6, 4.0))
    labels = [f"{r['disk']}\n{r['mapping']}" for r in rows]
    with plt.rc_context(STYLE):
        _bars(a, labels, [r["time_s"] for r in rows], "time per query (s)")
        _bars(b, labels, [r["energy_J"] for r in rows], "energy per query (J)", "{:.1f}")
        a.set_title("3a  Time: random vs sequential Disk access")
        b.set_title("3a  Energy (Disk and the rest)")
    return fig


def fig_3b(best, points, compute_s: dict):
    """Time per query against the SSD's streamed bandwidth: every design of the sweep (one line per
    SRAM size and MAC count) and the best one per SSD; the compute bound of each MAC count dashed."""
    fig, (ax,) = _fig(1, size=(7.2, 4.4))
    cmap = plt.get_cmap("viridis")
    groups = sorted(points.groupby(["sram", "macs"]), key=lambda g: (g[0][1], g[0][0]))
    with plt.rc_context(STYLE):
        for i, ((sram, macs), g) in enumerate(groups):
            g = g.sort_values("GBps")
            ax.plot(g["GBps"], g["time_s"], marker="o", ms=3, lw=1, color=cmap(i / max(len(groups) - 1, 1)),
                    label=f"SRAM {sram}, {macs} MACs")
        b = best.sort_values("GBps")
        ax.plot(b["GBps"], b["time_s"], "k*", ms=10, label="best design per SSD")
        for macs, s in sorted(compute_s.items()):
            ax.axhline(s, ls="--", lw=0.8, color="grey")
            ax.annotate(f"compute bound, {macs} MACs", (b["GBps"].min(), s), fontsize=7, va="bottom")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log", base=2)
        for axis in (ax.xaxis, ax.yaxis):
            axis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:g}"))
        for _, r in b.iterrows():
            ax.annotate(f"{r['channels']} ch", (r["GBps"], r["time_s"]), textcoords="offset points", xytext=(4, 4),
                        fontsize=7)
        ax.set_xlabel("SSD bandwidth streamed (GB/s, log scale)")
        ax.set_ylabel("time per 64 GiB query (s, log scale)")
        ax.set_title("3b  SSD speed and the best architecture (OnionPIR 64 GiB)")
        ax.legend(fontsize=7)
    return fig


def fig_3c(disk_J: dict):
    """The Disk's energy for one query: the SSD model's device energy against the thesis's figure."""
    fig, (ax,) = _fig(1, size=(5.6, 4.0))
    with plt.rc_context(STYLE):
        _bars(ax, list(disk_J), list(disk_J.values()), "Disk energy per query (J)", "{:.1f}")
        ax.set_title("3c  Disk energy: device level vs the thesis's system figure")
    return fig


def fig_3d(rows: list[dict]):
    """Time per query with the accelerator on the flash channels or behind the host link."""
    fig, (ax,) = _fig(1, size=(5.6, 4.0))
    with plt.rc_context(STYLE):
        _bars(ax, [r["placement"].replace(" the ", "\nthe ").replace(" PCIe", "\nPCIe") for r in rows],
              [r["time_s"] for r in rows], "time per query (s)")
        ax.set_title("3d  In-SSD vs host-side accelerator")
    return fig
