"""The thesis's SSD questions (docs/ssd.md) as ``storeloop reproduce`` runs them: how fast the Disk
streams as the flash geometry changes, what binds, and where the accelerator sits."""

from __future__ import annotations

import json
from pathlib import Path

from storeloop import evaluate, load_arch, load_mapping, load_workload, map as map_, price
from storeloop.mapper.options import DEFAULT_BUDGET, SAFETY_TIME_LIMIT
from storeloop.studies import server as studies
from storeloop.sweeps import mapped, own_cycles


def _bound_by(levels_json: str) -> str:
    """The levels (and compute units) whose own time sets the run time (a sweep row's per-level
    JSON: :func:`storeloop.sweeps.own_cycles`)."""
    busy = {k: own_cycles(v) for k, v in json.loads(levels_json).items()}
    top = max(busy.values())
    return " = ".join(k for k, v in busy.items() if v == top)


def ssd_specs(quick: bool, root: Path) -> dict[str, dict]:
    """The SSD speed sweep (3b) and the placement sweep (3d) as ``sweep:`` dicts (paths absolute)."""
    out = {key: studies.repository_sweep(name, root) for key, name in (("speed", "ssd-speed"),
                                                                        ("placement", "ssd-placement"))}
    if quick:
        p = out["speed"]["parameters"]
        p["levels.Disk.ssd.channels"], p["levels.SRAM.capacity"] = [2, 8, 32], ["4 KiB", "256 KiB"]
        out["speed"]["name"] = "quick-ssd-speed"
    return out


def ssd_questions(out: Path, root: Path, db: Path, *, quick: bool = False, workers: int = 2,
                  progress: bool = False, ran: dict | None = None) -> tuple[list[str], list[Path]]:
    """The thesis's SSD questions (issue 28, 3a-3d) answered on OnionPIR 64 GiB: the markdown
    section (every number read from the runs and the store) and its four figures (``ran``: the
    sweeps :func:`storeloop.studies.server.run_specs` ran already)."""
    from storeloop.studies import ssd_figures as F  # deferred: matplotlib
    import dataclasses

    from storeloop.plots.common import save  # deferred: matplotlib

    wl = load_workload(root / "workloads/onionpir-64GiB.yaml")
    rows = []
    for disk, file in (("flat 10 GB/s", "onionchopper.yaml"), ("SSD model", "onionchopper-ssd.yaml")):
        arch = load_arch(root / "arch" / file)
        table = price(arch)
        thesis = load_mapping(root / "mappings/onionchopper-thesis-best.yaml", arch, wl)
        found = map_(arch, wl, table, budget=DEFAULT_BUDGET, time_limit=SAFETY_TIME_LIMIT)
        for name, r, stop in (("thesis's mapping", evaluate(arch, wl, thesis, table), "-"),
                              ("storeloop map", found.result, found.search["stopped"])):
            streams = {s.stream.pattern for s in r.levels[0].streams}
            rows.append({"disk": disk, "mapping": name, "cycles": r.cycles, "time_s": r.cycles / r.clock_hz,
                         "energy_J": r.energy_J, "disk_J": r.levels[0].energy_pJ * 1e-12, "stopped": stop,
                         "access": ", ".join(sorted(streams)) or "flat bandwidth"})
    specs = ssd_specs(quick, root)
    frames = {}
    for key, spec in specs.items():
        frames[key] = mapped(studies.run_spec(spec, out.parent, db, workers, progress, ran)[1])
    base = load_arch(specs["speed"]["arch"])
    ssd, sram = base.levels[0].ssd, next(lvl for lvl in base.levels if lvl.name == "SRAM")
    d = frames["speed"].copy()
    for col, value in (("levels.Disk.ssd.channels", ssd.channels), ("levels.SRAM.capacity",
                       f"{sram.size_words * sram.word_bits // 8192} KiB"),
                       ("levels.RF.instances+compute.instances", base.compute.instances)):
        if col not in d:                 # a parameter the sweep does not vary keeps the arch file's value
            d[col] = value
    d["channels"] = d["levels.Disk.ssd.channels"].astype(int)
    d["GBps"] = [dataclasses.replace(ssd, channels=c).peak_read_Bps() / 1e9 for c in d["channels"]]
    d["time_s"] = d["cycles"] / d["clock_hz"]
    d["sram"], d["macs"] = d["levels.SRAM.capacity"], d["levels.RF.instances+compute.instances"].astype(int)
    d["area_energy"] = d["on_chip_area_um2"] * d["energy_pJ"]
    best = d.sort_values(["channels", "cycles", "area_energy"]).groupby("channels").head(1)
    compute_s = {m: float(g["computes"].iloc[0]) / m / float(g["clock_hz"].iloc[0]) for m, g in d.groupby("macs")}
    p = frames["placement"].copy()
    placed = [{"placement": "on the flash channels" if a == "internal" else f"behind PCIe {g}.0 x4",
               "time_s": c / hz, "cycles": c, "bound": _bound_by(lv), "stopped": s}
              for a, g, c, hz, lv, s in zip(p["levels.Disk.ssd.accelerator"], p["levels.Disk.ssd.host.pcie_gen"],
                                           p["cycles"], p["clock_hz"], p["levels"], p["stopped"])]
    # on the flash channels the host link is off the path: its two PCIe generations are one design
    placed = sorted({r["placement"]: r for r in placed}.values(), key=lambda r: (r["time_s"], "PCIe" in r["placement"]))
    ssd_map = next(r for r in rows if r["disk"] == "SSD model" and r["mapping"] == "storeloop map")
    flat_map = next(r for r in rows if r["disk"] != "SSD model" and r["mapping"] == "storeloop map")
    disk_J = {"SSD model, device\n(NAND datasheet)": ssd_map["disk_J"],
              "thesis: 25 W system\nover the same bytes": flat_map["disk_J"]}
    figs = {"ssd-3a-access-pattern": F.fig_3a(rows), "ssd-3b-speed-vs-architecture": F.fig_3b(best, d, compute_s),
            "ssd-3c-disk-energy": F.fig_3c(disk_J), "ssd-3d-placement": F.fig_3d(placed)}
    paths = []
    for name, fig in figs.items():
        paths += save(fig, out / name)
    lines = ["# The Disk as an SSD (docs/ssd.md)", "",
             "OnionPIR 64 GiB on OnionChopper with the thesis's flat 10 GB/s Disk and with the Disk as an SSD "
             "(`arch/onionchopper-ssd.yaml`: the SSD model prices each tile's access pattern).", "",
             "## 3a: random vs sequential access and the tiling", "",
             "| Disk | mapping | Disk access | cycles | time | Disk energy | energy | search |", "|---|---|---|---|---|---|---|---|"]
    lines += [f"| {r['disk']} | {r['mapping']} | {r['access']} | {r['cycles']:,} | {r['time_s']:.2f} s | "
              f"{r['disk_J']:.2f} J | {r['energy_J']:.2f} J | {r['stopped']} |" for r in rows]
    lines += ["", "![3a](figures/ssd-3a-access-pattern.png)", "",
              f"## 3b: the SSD's speed and the best architecture ({len(d)} designs, `{specs['speed']['name']}`)", "",
              "Best design per SSD: fewest cycles, then the least on-chip area x energy (the thesis's rule).", "",
              "| channels | streamed | best SRAM | MACs | cycles | time | bound by | designs at these cycles | search |",
              "|---|---|---|---|---|---|---|---|---|"]
    for _, b in best.iterrows():
        ties = int(((d["channels"] == b["channels"]) & (d["cycles"] == b["cycles"])).sum())
        lines.append(f"| {b['channels']} | {b['GBps']:.2f} GB/s | {b['sram']} | {b['macs']} | {int(b['cycles']):,} | "
                     f"{b['time_s']:.2f} s | {_bound_by(b['levels'])} | {ties} | {b['stopped']} |")
    lines += ["", "![3b](figures/ssd-3b-speed-vs-architecture.png)", "",
              "## 3c: the Disk's energy at device level", "",
              f"The mapper's mapping on the SSD: {ssd_map['disk_J']:.2f} J for the Disk from the NAND datasheet's "
              f"currents, against {flat_map['disk_J']:.1f} J from the thesis's 25 W system figure for the same "
              f"bytes ({flat_map['disk_J'] / ssd_map['disk_J']:.0f}x).", "",
              "![3c](figures/ssd-3c-disk-energy.png)", "",
              "## 3d: in-SSD vs host-side placement", "",
              "| accelerator | cycles | time | bound by | search |", "|---|---|---|---|---|"]
    lines += [f"| {r['placement']} | {r['cycles']:,} | {r['time_s']:.2f} s | {r['bound']} | {r['stopped']} |"
              for r in placed]
    lines += ["", "![3d](figures/ssd-3d-placement.png)", ""]
    return lines, paths
