"""Figures of a sweep's results, one function per figure (matplotlib; the backend is the caller's:
the CLI picks Agg, a notebook keeps its inline one).

Each function takes the DataFrame of :func:`storeloop.sweeps.read_results` or a store's path (only
its ``ok`` rows are drawn) and ``out``, a folder (the figure gets its usual name there) or a file
path ending in .png, .pdf or .svg, and writes one figure. :func:`plot_sweep` writes them all for
one store.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt

from storeloop.plots.common import (_amount, _fig, _ok,  # noqa: F401  (the studies import them from here)
                                    _scheme_and_bytes, sized)
from storeloop.sweeps import mapped, read_results


def _frame(df):
    """A store's rows: the DataFrame given, or read from the store at a path."""
    if isinstance(df, (str, Path)):
        return read_results(df)
    return df


def _params(df) -> list[str]:
    """The swept parameters (the keys of the stored ``params``) that take more than one value."""
    import json

    names = dict.fromkeys(k for p in df["params"] for k in json.loads(p))
    return [c for c in names if c in df.columns and df[c].nunique() > 1]


def pareto_front(df, x: str, y: str):
    """Rows no other row beats in both x and y (smaller is better)."""
    d = df.sort_values([x, y])
    best, keep = float("inf"), []
    for i, v in zip(d.index, d[y]):
        if v < best:
            keep.append(i)
            best = v
    return d.loc[keep]


def _vs_area(df, col: str, label: str, title: str):
    """A scatter of ``col`` against on-chip area (log scale), each workload a series with its Pareto
    front; the y axis starts at zero."""
    d = _ok(df)
    fig, (ax,) = _fig(size=(6.4, 4.2))
    for w, g in d.groupby("workload"):
        proven = g["cycles_optimal"] == 1
        dots = ax.scatter(g.loc[proven, "on_chip_area_mm2"], g.loc[proven, col], s=18, label=w)
        if (~proven).any():           # cycles not proven optimal: hollow
            ax.scatter(g.loc[~proven, "on_chip_area_mm2"], g.loc[~proven, col], s=18, facecolors="none",
                       edgecolors=dots.get_facecolor(), label=f"{w} (cycles not proven)")
        f = pareto_front(g, "on_chip_area_mm2", col)
        ax.plot(f["on_chip_area_mm2"], f[col], linewidth=1)
    ax.set_xscale("log")
    _plain_log_ticks(ax.xaxis)
    ax.set_ylim(0, max(d[col].max() * 1.1, 1e-30) if len(d) else 1)
    ax.set(xlabel="on-chip area (mm², log scale)", ylabel=f"{label}, axis from 0", title=title)
    return d, fig, ax


def time_vs_area(df, out: str | Path, title: str) -> Path:
    """Run time against on-chip area, the Pareto front joined and the best lower bound dashed
    (thesis Fig. 6-1 style)."""
    df = _frame(df)
    d, fig, ax = _vs_area(df, "time_s", "time (s)", title)
    if len(d):
        bound = (d["lower_bound_cycles"] / d["clock_hz"]).min()
        ax.axhline(bound, linestyle="--", color="grey", linewidth=0.8, label="lower bound (best point)")
    ax.legend(fontsize=7)
    return _save(fig, out, "time_vs_area.png")


def energy_vs_area(df, out: str | Path, title: str, *, fast_only: bool = False) -> Path:
    """Energy against on-chip area, the Pareto front joined; ``fast_only`` keeps the points within
    1 % of their workload's fewest cycles (thesis Fig. 6-4: "Refined Sweep (Fast Only)")."""
    df = _frame(df)
    if fast_only:
        ok = df[df["status"] == "ok"]
        fastest = ok.groupby("workload")["cycles"].transform("min")
        df = ok[ok["cycles"] <= 1.01 * fastest]
    _, fig, ax = _vs_area(df, "energy_J", "energy (J)", title + (" (fast only)" if fast_only else ""))
    ax.legend(fontsize=7)
    return _save(fig, out, ("energy_vs_area_fast.png" if fast_only else "energy_vs_area.png"))


def by_parameter(df, param: str, out: str | Path, title: str) -> Path:
    """Time, energy and area against one swept parameter (a number: log2 axis when it spans
    decades). At each value the best design by the thesis's rule (fewest cycles, then area x
    energy) over the other parameters is drawn, the same design in all three panels."""
    df = _frame(df)

    d = _ok(df)
    d["_x"] = d[param].map(_amount)
    d["_score"] = d["on_chip_area_mm2"] * d["energy_J"]
    fig, axes = _fig(3, size=(11, 3.4))
    for w, g in d.groupby("workload"):
        pick = g.sort_values(["cycles", "_score"]).groupby("_x").head(1).sort_values("_x")
        for ax, col in zip(axes, ("time_s", "energy_J", "on_chip_area_mm2")):
            ax.plot(pick["_x"], pick[col], marker="o", label=w)
    ticks = d.drop_duplicates("_x").sort_values("_x")           # each swept value, as the spec writes it
    for ax, label in zip(axes, ("time (s)", "energy (J)", "on-chip area (mm²)")):
        if len(d) and d["_x"].min() > 0 and d["_x"].max() / d["_x"].min() >= 16:
            ax.set_xscale("log", base=2)
        _value_ticks(ax, ticks["_x"], ticks[param])
        ax.set_ylim(bottom=0)
        ax.set(xlabel=param, ylabel=f"{label}, axis from 0")
    axes[0].legend(fontsize=7)
    fig.suptitle(f"{title}: the best design at each {param}")
    return _save(fig, out, f"by_{param.replace('+', '_').replace('.', '_')}.png")


def by_database_size(df, out: str | Path, title: str) -> Path | None:
    """Speed (database bytes per second), energy per GB and power against database size, a line
    per scheme (thesis Figures 6-7, 6-9, 6-10 for OnionPIR and 6-11 .. 6-13 across schemes).
    Workloads are recognised by their file names, ``<scheme>-<size>.yaml``."""
    df = _frame(df)

    d = sized(df)
    if d["db_bytes"].nunique() < 2:
        return None
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.6))
    for ax, (col, label) in zip(axes, [("GB_per_s", "speed (GB of database / s)"), ("J_per_GB", "energy (J / GB)"),
                                       ("power_W", "power (W)")]):
        for scheme, g in d.groupby("scheme"):
            ax.plot(g["db_GiB"], g[col], marker="o", label=scheme)
        ax.set_xscale("log", base=2)
        ax.set(xlabel="database size (GiB)", ylabel=label)
    axes[0].legend(fontsize=7)
    fig.suptitle(title)
    return _save(fig, out, "by_database_size.png")


def throughput_by_parameter(df, param: str, out: str | Path, title: str) -> Path:
    """A system sweep: throughput against one swept field, each point coloured by the resource that
    binds it (with the other fields at each of their values, one line per combination)."""
    df = _frame(df)
    import json

    d = mapped(df).copy()
    d = d[d["throughput_Bps"].notna()]
    d["_x"] = d[param].map(_amount)
    d["_y"] = d["throughput_Bps"] * 8 / 1e9
    others = [c for c in _params(df) if c != param]
    fig, (ax,) = _fig(size=(7.2, 4.4))
    markers = dict(zip(sorted(d["bottleneck"].fillna("none").unique()), "os^DvP*Xh"))
    for i, (key, g) in enumerate(d.groupby(others) if others else [((), d)]):
        g = g.sort_values("_x")
        label = ", ".join(f"{o} = {v}" for o, v in zip(others, key if isinstance(key, tuple) else (key,)))
        ax.plot(g["_x"], g["_y"], color=f"C{i % 10}", linewidth=1, label=label or None)
        for b, h in g.groupby(g["bottleneck"].fillna("none")):
            ax.scatter(h["_x"], h["_y"], color=f"C{i % 10}", marker=markers[b], s=28, zorder=3)
    for b, m in markers.items():
        ax.scatter([], [], color="black", marker=m, label=f"bound by {b}")
    if len(d) and d["_x"].min() > 0 and d["_x"].max() / d["_x"].min() >= 16:
        ax.set_xscale("log", base=2)
    ax.set_ylim(bottom=0)
    unit = json.loads(d["result"].iloc[0])["unit"]["name"] if len(d) else "input"
    ax.set(xlabel=param, ylabel=f"throughput, Gb/s of input ({unit}), axis from 0", title=title)
    ax.legend(fontsize=7)
    return _save(fig, out, f"throughput_by_{param.replace('+', '_').replace('.', '_')}.png")


def _value_ticks(ax, xs, labels, most: int = 8) -> None:
    """Ticks at the swept values, labelled as the spec writes them ('2 KiB', '16 words'): at most
    ``most`` of them (every k-th), slanted when they are long, no minor ticks."""
    xs, labels = list(xs), [str(v) for v in labels]
    step = max(1, -(-len(xs) // most))
    ax.set_xticks(xs[::step], labels[::step], rotation=30 if max(map(len, labels), default=0) > 5 else 0,
                  ha="right" if max(map(len, labels), default=0) > 5 else "center", fontsize=8)
    ax.minorticks_off()


def _plain_log_ticks(axis) -> None:
    """A log axis labelled in plain numbers (5, 10, 20, not 5x10^0): the decades and, where an axis
    spans less than two decades, the 2s and 5s between them."""
    from matplotlib import ticker

    axis.set_major_locator(ticker.LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    axis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:g}"))
    axis.set_minor_formatter(ticker.NullFormatter())


FIGURE_SUFFIXES = (".png", ".pdf", ".svg")


def _save(fig, out, name: str) -> Path:
    """Save to ``out``: a file path with a figure suffix, or a folder (``name`` in it)."""
    out = Path(out)
    path = out if out.suffix.lower() in FIGURE_SUFFIXES else out / name
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def plot_sweep(db_path, out_dir, sweep: str | None = None) -> list[Path]:
    """Every figure of one store (or one sweep in it) into ``out_dir``."""
    df = read_results(db_path, sweep)
    out = Path(out_dir)
    name = sweep or ", ".join(sorted(df["sweep"].unique())) if len(df) else "empty"
    if not len(df[df["status"] == "ok"]):
        return []
    params = _params(df)
    if "throughput_Bps" in df and df.loc[df["status"] == "ok", "throughput_Bps"].notna().any():
        return [throughput_by_parameter(df, p, out, name) for p in params]     # a system sweep
    paths = []
    if params:                          # designs to compare (a grid over workloads alone has none)
        paths = [time_vs_area(df, out, name), energy_vs_area(df, out, name),
                 energy_vs_area(df, out, name, fast_only=True)]
    paths += [by_parameter(df, p, out, name) for p in params]
    sized = by_database_size(df, out, name)
    return paths + ([sized] if sized else [])


__all__ = ["pareto_front", "time_vs_area", "energy_vs_area", "by_parameter", "by_database_size",
           "throughput_by_parameter", "plot_sweep"]
