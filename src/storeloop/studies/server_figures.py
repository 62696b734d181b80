"""Figures of the whole-server design studies (:mod:`storeloop.studies.server`, ``storeloop reproduce``):
one design for a workload set, batched queries, OnionPIR's dimension choice. Each takes the frames
or rows its study reads from its runs."""

from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib import ticker

from storeloop.plots import _scheme_and_bytes
from storeloop.plots.common import STYLE, _fig

UNITS = "levels.SRAM.instances+levels.RF.instances+compute.instances"


def _plain(axis) -> None:
    axis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:g}"))


def workload_set(ranked, rows, best, thesis):
    """Left: every design's weighted mean time per query against its on-chip area, coloured by its
    units; the pick across the set and the thesis's design marked. Right: per workload, the ratio of
    each unit count's best design to the workload's best design."""
    fig, (a, b) = _fig(2, size=(11, 4.4))
    cmap = plt.get_cmap("viridis")
    units = sorted(ranked[UNITS].astype(int).unique())
    colour = {u: cmap(i / max(len(units) - 1, 1)) for i, u in enumerate(units)}
    with plt.rc_context(STYLE):
        for u in units:
            g = ranked[ranked[UNITS].astype(int) == u]
            a.scatter(g["on_chip_area_mm2"], g["weighted_time_s"], s=18, color=colour[u], label=f"{u} unit(s)")
        a.scatter([best["on_chip_area_mm2"]], [best["weighted_time_s"]], marker="*", s=160, color="k", zorder=3,
                  label="best across the set")
        if thesis is not None:
            a.scatter([thesis["on_chip_area_mm2"]], [thesis["weighted_time_s"]], marker="s", s=60, facecolors="none",
                      edgecolors="r", zorder=3, label="thesis's pick")
        a.set_ylim(bottom=0)
        a.set(xlabel="on-chip area (mm²)", ylabel="mean time per query over the set (s, axis from 0)",
              title="Designs across the workload set")
        a.legend(fontsize=7, loc="lower right")
        order = sorted(rows["workload"].unique(), key=_scheme_and_bytes)
        best_t = rows.groupby("workload")["time_s"].min()
        for u in units:
            top = ranked[ranked[UNITS].astype(int) == u].iloc[0]
            mine = rows[rows["params"] == top["params"]].set_index("workload")["time_s"]
            b.plot(range(len(order)), [mine[w] / best_t[w] for w in order], marker="o", ms=4, color=colour[u],
                   label=f"best with {u} unit(s)")
        b.set_xticks(range(len(order)), [w.removesuffix(".yaml") for w in order], rotation=60, ha="right", fontsize=7)
        b.set_ylim(bottom=0.95)
        b.set(ylabel="time / the workload's best design", title="Per workload")
        b.legend(fontsize=7)
    return fig


def batching(best, thesis):
    """Time and energy per query against the batch size: the thesis's design and the best design per
    batch (annotated with its units and what binds it)."""
    fig, (a, b) = _fig(2, size=(10, 4.2))
    with plt.rc_context(STYLE):
        for frame, label, style in ((thesis.sort_index(), "thesis's design (2 units)", "s--"),
                                    (best.sort_index(), "best design per batch", "o-")):
            a.plot(frame.index, 1e3 * frame["time_per_query_s"], style, ms=4, label=label)
            b.plot(frame.index, frame["energy_per_query_J"], style, ms=4, label=label)
        for batch, r in best.iterrows():
            a.annotate(f"{int(r['units'])} units\n{r['bound_by']}", (batch, 1e3 * r["time_per_query_s"]),
                       textcoords="offset points", xytext=(0, 6), ha="center", fontsize=6)
        for ax in (a, b):
            ax.set_xscale("log", base=2)
            _plain(ax.xaxis)
            ax.set_ylim(bottom=0)
            ax.set_xlabel("queries sharing one pass (batch)")
            ax.legend(fontsize=7)
        a.set(ylabel="time per query (ms, axis from 0)", title="OnionPIR 1 GiB: time per query")
        b.set(ylabel="energy per query (J, axis from 0)", title="Energy per query")
    return fig


def dimension_choice(rows: list[dict], size: str, links: list[str] = ()):
    """Query time split into the first dimension, the later ones and the moves between homes,
    against the first dimension's size, with the time to send the request first over each of
    ``links`` (lines); the query entries read on a second axis."""
    fig, (ax,) = _fig(1, size=(7.2, 4.4))
    x = range(len(rows))
    with plt.rc_context(STYLE):
        bottom = [0.0] * len(rows)
        for key, label in (("first_s", "first dimension"), ("later_s", "later dimensions"),
                           ("moves_s", "moves between homes")):
            values = [r[key] for r in rows]
            ax.bar(x, values, bottom=bottom, label=label)
            bottom = [b + v for b, v in zip(bottom, values)]
        top = max(bottom)
        for link, marker in zip(links, ("o-", "s-", "^-")):
            values = [r[f"with request at {link}"] for r in rows]
            ax.plot(x, values, marker, color="0.3", markersize=4, label=f"query + request at {link} (uncompressed)")
            top = max(top, *values)
        ax.set_ylim(0.97 * min(bottom), 1.02 * top)
        ax.set_xticks(x, [str(r["first_dim"]) for r in rows])
        ax.set(xlabel="first dimension (OnionPIR: 256)", ylabel="query time (s; axis not from 0)",
               title=f"OnionPIR {size}: the whole query by first dimension")
        twin = ax.twinx()
        twin.plot(x, [r["entries_bytes"] / 2**20 for r in rows], "k.--", label="query entries read")
        twin.set_ylabel("query entries read, expanded (MiB, dashed)")
        twin.set_ylim(bottom=0)
        ax.legend(fontsize=7, loc="upper center")
    return fig
