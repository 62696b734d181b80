"""Figures of the seed systems (systems/*.yaml), one function per figure; every number is the system
layer's (:func:`storeloop.system.evaluate_system` on the file with fields set), never the paper's,
which is drawn beside it where the paper gives one."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt

from storeloop.plots import _save
from storeloop.system import evaluate_system, load_system


def vary(path, settings: list[dict]) -> list[dict]:
    """The analysis of the system at ``path`` under each dict of field settings (as ``--set``)."""
    return [evaluate_system(load_system(path, s), claims=False) for s in settings]


def _zero(ax) -> None:
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)


def copa(path, out: Path) -> Path:
    """COPA: (a) the network rate one accelerator needs against the batch size, semi-honest and
    malicious (the paper's Fig. 1 and its 17.5 / 26.3 Gb/s); (b) accelerators until the network
    saturates, against the line rate."""
    batches = [2 ** k for k in range(4, 21, 2)]
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 3.8))
    for extra, label, paper in ((0, "semi-honest", 17.5), (0.5, "malicious (hashed values)", 26.3)):
        rs = vary(path, [{"stages.multiply.instances": 1, "stages.multiply.bounds.B": n, "ratios.hash_extra": extra}
                         for n in batches])
        line, = a.plot(batches, [r["resources"]["nic"]["out"]["used"] * 8 / 1e9 for r in rs], marker="o", label=label)
        a.axhline(paper, linestyle="--", color=line.get_color(), linewidth=0.8, label=f"paper: {paper} Gb/s")
        rates = [25, 100, 200, 400]
        rs = vary(path, [{"devices.nic.bandwidth": f"{g} Gb/s", "stages.multiply.bounds.B": 2 ** 20,
                          "ratios.hash_extra": extra} for g in rates])
        b.plot(rates, [r["stages"]["multiply"]["instances_to_saturate"] for r in rs], marker="o", label=label)
    setup = vary(path, [{}])[0]["stages"]["multiply"]["setup_s"]
    a.set_xscale("log", base=2)
    a.set(xlabel="multiplies per batch (log scale)", ylabel="network rate one accelerator needs (Gb/s)",
          title=f"one accelerator at 275 MHz, setup {setup * 1e6:g} us per batch (assumed)")
    b.scatter([100], [6], marker="*", s=120, color="tab:red", zorder=3, label="paper: 6 at 100 Gb/s")
    b.set(xlabel="line rate (Gb/s)", ylabel="accelerators until the network saturates",
          title="accelerators per SmartNIC (large batches)")
    for ax in (a, b):
        _zero(ax)
        ax.legend(fontsize=7)
    return _save(fig, out, "copa.png")


WORKLOADS = ["Write-only (3)", "Write-H", "Write-M", "Write-L", "Mixed (3)"]
# each file's scenario for a workload ("" = the file as it is); the baseline's Write-H/M/L demands
# are not published
BASELINE = {"Write-only (3)": "", "Mixed (3)": "mixed"}
FIDR = {"Write-only (3)": "write-only", "Write-H": "write-h", "Write-M": "", "Write-L": "write-l", "Mixed (3)": "mixed"}


def fidr(baseline, design, out: Path) -> Path:
    """FIDR: throughput of the baseline and of FIDR per workload (with the prototype's two table
    SSDs, and with enough of them not to bind), each bar labelled with the resource that binds."""
    series = [("baseline (CIDR-like)", baseline, BASELINE, {}),
              ("FIDR, 2 table SSDs", design, FIDR, {}),
              ("FIDR, 64 table SSDs", design, FIDR, {"devices.table-ssd.count": 64})]
    fig, ax = plt.subplots(figsize=(10, 4.2))
    width = 0.8 / len(series)
    for i, (label, path, names, extra) in enumerate(series):
        scenarios = load_system(path).scenarios
        xs, ys, why = [], [], []
        for j, workload in enumerate(WORKLOADS):
            if workload not in names:
                continue
            r = vary(path, [dict(scenarios.get(names[workload], ()), **extra)])[0]
            b = r["bottleneck"]
            xs.append(j + (i - 1) * width)
            ys.append(r["throughput"]["bytes_per_s"] / 1e9)
            why.append(f"stage {b['stage']}" if "stage" in b else f"{b['device']}.{b['resource']}")
        bars = ax.bar(xs, ys, width, label=label)
        for bar, w in zip(bars, why):
            ax.annotate(w, (bar.get_x() + bar.get_width() / 2, bar.get_height()), ha="center", va="bottom",
                        fontsize=6, rotation=90, xytext=(0, 2), textcoords="offset points")
    ax.axhline(75, linestyle="--", color="grey", linewidth=0.8, label="target 75 GB/s (004:181)")
    ax.set_xticks(range(len(WORKLOADS)), WORKLOADS)
    ax.set(ylabel="throughput (GB/s of client writes)", title="FIDR vs its baseline, one socket: what binds")
    ax.set_ylim(0, 130)
    ax.legend(fontsize=7, loc="upper left")
    ax.grid(axis="y", alpha=0.3)
    return _save(fig, out, "fidr.png")


def rotation(path, out: Path, rates=(10, 25, 40, 100)) -> Path:
    """The rotation pipeline: rotation cores and decompressors a line rate needs, and the FPGA
    resources they take (with the key-value store) against the XCVU9P's totals."""
    rs = vary(path, [{"target": f"{g} Gb/s", "devices.network.bandwidth": f"{g} Gb/s"} for g in rates])
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 3.8))
    for stage, label in (("rotation", "rotation cores"), ("decompress", "decompression modules")):
        a.plot(rates, [r["stages"][stage]["instances_needed"] for r in rs], marker="o", label=label)
    a.scatter([10, 10], [6, 16], marker="*", s=120, color="tab:red", zorder=3, label="paper at 10 Gb/s: 6 and 16")
    a.set(xlabel="line rate (Gb/s)", ylabel="instances needed", title="units for the line rate")
    for res in ("clbs", "brams", "dsps"):
        b.plot(rates, [100 * r["static"]["fpga"][res]["utilization"] for r in rs], marker="o", label=res[:-1].upper() + "s")
    b.axhline(100, linestyle="--", color="grey", linewidth=0.8, label="XCVU9P total")
    b.set(xlabel="line rate (Gb/s)", ylabel="of the XCVU9P (%)", title="FPGA resources (KVS + pipeline)")
    for ax in (a, b):
        _zero(ax)
        ax.legend(fontsize=7)
    return _save(fig, out, "rotation.png")


def p4_enckv(path, out: Path) -> Path:
    """P4-EncKV: switch register memory per cached record against the value size, NetCache's
    equal-length arrays vs P4-EncKV's power-of-two arrays."""
    sizes = list(range(8, 401, 8))
    fig, ax = plt.subplots(figsize=(6.4, 3.8))
    for stage in ("netcache", "p4-enckv"):
        rs = vary(path, [{f"stages.{stage}.value_size": f"{v} B"} for v in sizes])
        ax.plot(sizes, [r["stages"][stage]["bytes_per_record"] for r in rs], label=stage)
    ax.set(xlabel="value size (B)", ylabel="register memory per record (B)",
           title="memory per cached record (max value 400 B)")
    _zero(ax)
    ax.legend(fontsize=7)
    return _save(fig, out, "p4-enckv.png")


__all__ = ["vary", "copa", "fidr", "rotation", "p4_enckv"]
