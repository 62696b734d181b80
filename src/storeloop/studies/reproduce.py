"""``storeloop reproduce``: the OnionChopper thesis's chapter 6, regenerated from sweeps.

Runs (or reuses, from its store) three sweeps -- the initial architecture space, the refined one
and the database sizes of every PIR scheme -- measures the CPU baseline, draws Figures 6-1 .. 6-13
and a roofline of the optimal design (PNG and PDF), answers the thesis's SSD questions with the
Disk as an SSD (3a-3d of docs/ssd.md: two more sweeps, four figures), runs the whole-server
studies (:mod:`storeloop.studies.server`: a workload set, batching, OnionPIR's dimension choice), and writes
``reproduction.md``: each number the thesis publishes beside storeloop's, with the difference and
its reason. Every storeloop number in
it is read from the store (or the CPU measurement's JSON), never typed in.

``quick`` runs subsets of the same grids (every figure, fewer points) in a few minutes on 2 cores.
"""

from __future__ import annotations

import json
import multiprocessing
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from storeloop import load_arch
from storeloop.errors import SpecError
from storeloop.studies import server as studies
from storeloop.studies.cpu import macs_per_second
from storeloop.studies.ssd import ssd_questions, ssd_specs
from storeloop.sweeps import best_points, load_sweep, mapped, point_arch
from storeloop.system import evaluate_system, load_system
from storeloop.system.report import claims_markdown, si
from storeloop.workloads.pir import onionpir_first_dimension


def repository(start: Path | None = None) -> Path | None:
    """The storeloop clone these studies read their sweeps, archs and workloads from: the nearest
    folder above ``start`` (default: this file's folder, then the current folder) that holds
    ``sweeps/thesis-initial.yaml``; None outside a clone (a pip install from an index)."""
    for base in ([start] if start else [Path(__file__), Path.cwd()]):
        for folder in [base.resolve(), *base.resolve().parents]:
            if (folder / "sweeps/thesis-initial.yaml").is_file():
                return folder
    return None


SCHEMES = ("onionpir", "sealpir", "simplepir", "fastpir")
SIZES = ("512MiB", "1GiB", "2GiB", "4GiB", "8GiB", "16GiB", "32GiB", "64GiB")


def _specs(quick: bool, root: Path) -> dict[str, dict]:
    """The three sweeps as ``sweep:`` dicts (paths absolute). Quick: subsets of the full grids."""
    initial, refined = studies.repository_sweep("thesis-initial", root), studies.repository_sweep("thesis-refined", root)
    sizes = SIZES
    if quick:
        p = initial["parameters"]
        p["levels.SRAM.capacity"] = ["32 KiB", "1 MiB", "64 MiB"]
        p["levels.RF.capacity"] = ["32 words", "512 words", "4096 words"]
        p["levels.SRAM.instances"] = [1, 2, 8, 32]
        p["levels.RF.instances+compute.instances"] = [1, 2, 8, 64, 1024]
        refined["parameters"]["levels.SRAM.capacity"] = ["2 KiB", "4 KiB", "8 KiB", "16 KiB", "64 KiB", "1 MiB", "64 MiB"]
        sizes = ("512MiB", "4GiB", "64GiB")
    tag = "quick-" if quick else ""
    initial["name"], refined["name"] = f"{tag}thesis-initial", f"{tag}thesis-refined"
    db = {"name": f"{tag}db-sizes", "arch": str(root / "arch/onionchopper.yaml"),
          "workloads": [str(root / f"workloads/{s}-{z}.yaml") for s in SCHEMES for z in sizes]}
    return {"initial": initial, "refined": refined, "sizes": db}


def _stops_table(sweeps: dict) -> list[str]:
    """How each sweep's searches ended: proven optimal, within the energy gap of the bound,
    converged (no improvement for twice the work), stopped by the budget of candidates or by the time
    limit (a safety net: its answers depend on the machine's load); the worst gap."""
    out = ["How the searches ended (`stopped`; the energy gap is to the energy lower bound):", "",
           "| sweep | points | optimal | energy-gap | converged | budget | time-limit | worst energy gap |",
           "|---|---|---|---|---|---|---|---|"]
    for name, df in sweeps.items():
        counts = df["stopped"].value_counts()
        out.append(f"| {name} | {len(df):,} | " + " | ".join(f"{int(counts.get(k, 0)):,}" for k in
                                                          ("optimal", "energy-gap", "converged", "budget", "time-limit"))
                   + f" | {100 * df['energy_gap'].max():.4f} % |")
    return out + [""]


def _pick_proof(ref, best, pick: str) -> str:
    """Whether more search could change the pick: a design beats it only if its proven cycles tie
    and its on-chip area x energy *lower bound* is below the pick's area x energy."""
    rivals = ref[(ref["cycles_optimal"] == 1) & (ref["cycles"] == best["cycles"])
                 & (ref["params"] != best["params"])]
    unproven = ref[(ref["cycles_optimal"] != 1) & (ref["lower_bound_cycles"] <= best["cycles"])]
    if not len(rivals) and not len(unproven):
        return "No other design reaches the pick's cycles."
    ae = best["on_chip_area_um2"] * best["energy_pJ"]
    bound = rivals["on_chip_area_um2"] * rivals["lower_bound_energy_pJ"]
    below = int((bound < ae).sum())
    if below or len(unproven):
        return (f"The pick is not proven: {below} other design(s) at its cycles could still beat it (their area x "
                f"energy lower bound is below the pick's area x energy), and {len(unproven)} design(s) have "
                "unproven cycles; more search time could change it.")
    nearest = rivals.loc[bound.idxmin()]
    label = ", ".join(f"{k.split('.')[-2]} {v}" for k, v in sorted(json.loads(nearest["params"]).items()))
    return (f"The pick is proven: every other design at its cycles has an on-chip area x energy lower bound above "
            f"the pick's area x energy (the nearest, {label}, by {100 * (bound.min() / ae - 1):.3f} %), so no "
            "search, however long, can change it.")


def cpu_baseline(out: Path, quick: bool) -> dict:
    """Measure (or reuse) the CPU's MAC rate on a small OnionPIR database; kept in ``cpu.json``."""
    import platform

    path = out / "cpu.json"
    if path.is_file():
        return json.loads(path.read_text())
    db = 64 * 2**20
    w = onionpir_first_dimension(db)
    rate = macs_per_second(w, repeats=2 if quick else 5)
    info = {"macs_per_s": rate, "db_bytes": db, "macs": w.macs, "machine": platform.processor() or platform.machine(),
            "python": platform.python_version(), "measured": time.strftime("%Y-%m-%d %H:%M")}
    path.write_text(json.dumps(info, indent=1))
    return info


def run(out: str | Path = "results/reproduction", *, quick: bool = False, workers: int = 2,
        progress: bool = False, root: Path | None = None) -> dict:
    """Run the sweeps into ``out/reproduction.sqlite``, then write the figures and reproduction.md.
    Returns the paths written and the seconds each step took."""

    root = root or repository() or Path.cwd()
    if not (root / "sweeps/thesis-initial.yaml").is_file():
        raise SpecError("reproduce needs storeloop's repository (sweeps/, arch/, workloads/)", file=str(root),
                        allowed="run it from a clone of the repository")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    db = out / "reproduction.sqlite"
    frames, timing, files = {}, {}, {}
    # every sweep in one pool, the ones whose waves hold the longest chains of searches first: while
    # one waits for its wave's last points, the others' points run
    t = time.monotonic()
    specs = _specs(quick, root)
    ran = studies.run_specs([*ssd_specs(quick, root).values(), studies.batching_spec(out / "figures", root, quick),
                             *specs.values(), studies.workload_set_spec(root, quick)], out, db, workers, progress)
    timing["sweeps"] = time.monotonic() - t
    for key, spec in specs.items():
        files[key], frames[key] = ran[spec["name"]]
    t = time.monotonic()
    cpu = cpu_baseline(out, quick)                # (measured alone: nothing else runs beside it)
    timing["cpu baseline"] = time.monotonic() - t
    # the chapter's figures are drawn in a second process while this one writes the other sections
    # (spawned: a fork of a process with threads may deadlock)
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        drawn = pool.submit(_timed, figures, frames, cpu, out / "figures", root, files["refined"])
        t = time.monotonic()
        sections, system_figures = systems(out / "figures", root)
        timing["seed systems"] = time.monotonic() - t
        t = time.monotonic()
        ssd_lines, ssd_figures = ssd_questions(out / "figures", root, db, quick=quick, workers=workers,
                                               progress=progress, ran=ran)
        timing["the Disk as an SSD"] = time.monotonic() - t
        t = time.monotonic()
        study_lines, study_figures = studies.section(out / "figures", root, db, quick=quick, workers=workers,
                                                     progress=progress, ran=ran)
        timing["whole-server studies"] = time.monotonic() - t
        written, timing["figures"] = drawn.result()
    md = out / "reproduction.md"
    md.write_text(report(frames, cpu, quick, timing, files["refined"]) + "\n"
                  + "\n".join(sections + ssd_lines + study_lines))
    return {"figures": written + system_figures + ssd_figures + study_figures, "report": md, "store": db,
            "seconds": timing}


def _timed(fn, *args):
    """``fn(*args)`` and the seconds it took."""
    t = time.monotonic()
    return fn(*args), time.monotonic() - t


# the seed systems: their file, the figure function and its extra arguments (system files)
SYSTEMS = [("COPA: MPC accelerators on a SmartNIC (seed 003)", "copa", ()),
           ("FIDR: inline data reduction, baseline (seed 004)", "fidr-baseline", ()),
           ("FIDR: inline data reduction with NIC/FPGA offload (seed 004)", "fidr", ("fidr-baseline",)),
           ("Rotation perturbation pipeline on an FPGA (seed 000)", "rotation", ()),
           ("P4-EncKV: a switch as an encrypted key-value cache (seed 002)", "p4-enckv", ()),
           ("OnionChopper as a system (seed 001)", "onionchopper", ())]


def systems(out: Path, root: Path) -> tuple[list[str], list[Path]]:
    """One section per seed system (its binding resource and its claims beside storeloop's) and
    its figure, drawn by :mod:`storeloop.studies.system_figures` from the system layer's numbers."""
    from storeloop.studies import system_figures as S  # deferred: matplotlib
    draw = {"copa": S.copa, "fidr": lambda p, o, base: S.fidr(base, p, o), "rotation": S.rotation,
            "p4-enckv": S.p4_enckv}
    lines = ["# Seed systems", "",
             "Each system file in `systems/` carries its paper's claims; storeloop derives each from the "
             "system (`storeloop system FILE --claims`). Status: *reproduced* (inputs published, within "
             "tolerance), *assumed* (within tolerance with inputs the paper does not publish, named), "
             "*differs* (with the reason), *unpublished* (the missing input named), *derived* (the paper "
             "shows it without its value: storeloop's number alone).", ""]
    paths: list[Path] = []
    for title, name, extra in SYSTEMS:
        path = root / "systems" / f"{name}.yaml"
        r = evaluate_system(load_system(path))
        lines += [f"## {title}", "", f"`systems/{name}.yaml`; docs: `docs/systems/{name.split('-baseline')[0]}.md`.", ""]
        if r["throughput"] is not None:
            b = r["bottleneck"]
            where = f"stage {b['stage']}" if "stage" in b else f"{b['device']}.{b['resource']}"
            lines += [f"Throughput {si(r['throughput']['bytes_per_s'], 'B/s')} of input, bound by {where}.", ""]
        lines += claims_markdown(r) + [""]
        if name in draw:
            fig = draw[name](path, out, *[root / "systems" / f"{e}.yaml" for e in extra])
            paths.append(fig)
            lines += [f"![{name}](figures/{fig.name})", ""]
    return lines, paths


def _optimal_rows(refined):
    """The thesis's design (2 x SRAM 4 KiB, 2 x RF 32 words) and storeloop's pick, from the refined sweep."""
    d = mapped(refined)
    thesis = d[(d["levels.SRAM.capacity"] == "4 KiB") & (d["levels.RF.capacity"] == "32 words")]
    return (thesis.iloc[0] if len(thesis) else None), best_points(refined).iloc[0]


def _arch_of(row, refined_spec_file: Path):
    return point_arch(load_sweep(refined_spec_file), json.loads(row["params"]))


def _ssd_GBps(root: Path) -> float:
    arch = load_arch(root / "arch/onionchopper.yaml")
    disk = arch.levels[0]
    bw = disk.shared_bandwidth or disk.read_bandwidth
    return bw * disk.word_bits / 8 * arch.clock_hz / 1e9


def figures(frames: dict, cpu: dict, out: Path, root: Path, refined_spec: Path) -> list[Path]:
    """Every figure (PNG + PDF) of the three sweeps' results into ``out``."""
    from storeloop.studies import thesis_figures as T  # deferred: matplotlib
    refined, sizes = frames["refined"], frames["sizes"]
    _, best = _optimal_rows(refined)
    figs = {
        "fig-6-01-initial-cycles": T.fig_6_1(frames["initial"]),
        "fig-6-02-refined-cycles": T.fig_6_2(refined),
        "fig-6-03-refined-energy-vs-area": T.fig_6_3(refined),
        "fig-6-04-refined-fast-energy-vs-area": T.fig_6_4(refined),
        "fig-6-05-rf-depth-vs-energy": T.fig_6_5(refined),
        "fig-6-06-optimal-architecture": T.fig_6_6(best, _arch_of(best, refined_spec)),
        "fig-6-07-onionpir-speed-vs-size": T.fig_6_7(sizes, _ssd_GBps(root)),
        "fig-6-08-cpu-vs-accelerator": T.fig_6_8(sizes, cpu["macs_per_s"]),
        "fig-6-09-onionpir-energy-vs-size": T.fig_6_9(sizes),
        "fig-6-10-onionpir-power-vs-size": T.fig_6_10(sizes),
        "fig-6-11-speed-vs-size": T.fig_6_11(sizes),
        "fig-6-12-energy-vs-size": T.fig_6_12(sizes),
        "fig-6-13-power-vs-size": T.fig_6_13(sizes),
        "roofline-optimal": T.roofline(best, "Roofline of the optimal design (OnionPIR 64 GiB)"),
    }
    paths = []
    for name, fig in figs.items():
        paths += T.save(fig, Path(out) / name)
    return paths


def _pct(a: float, b: float) -> str:
    return f"{100 * (a - b) / b:+.1f} %"


def report(frames: dict, cpu: dict, quick: bool, timing: dict, refined_spec: Path) -> str:
    """reproduction.md: the thesis's published numbers beside storeloop's, read from the store."""
    from storeloop.studies.thesis_figures import THESIS, frame, sized  # deferred: matplotlib

    refined, sizes = frames["refined"], frames["sizes"]
    design, best = _optimal_rows(refined)
    row = design if design is not None else best
    levels = json.loads(row["levels"])
    e_total = sum(v["energy_pJ"] for v in levels.values())
    chip = {k: v for k, v in levels.items() if not v["off_chip"]}
    compute = next(k for k, v in levels.items() if v.get("compute"))
    disk = next(iter(levels))
    t = row["cycles"] / row["clock_hz"]
    s = sized(sizes)
    onion = s[s["scheme"] == "onionpir"]
    speed_small = onion.iloc[0]["GB_per_s"] / onion["GB_per_s"].max() if len(onion) else float("nan")
    big = onion.iloc[-1] if len(onion) else None
    cpu_s = big["computes"] / cpu["macs_per_s"] if big is not None else float("nan")
    speedup = cpu_s / big["time_s"] if big is not None else float("nan")
    arch = {lvl.name: lvl for lvl in _arch_of(best, refined_spec).levels}
    pick = f"{arch['SRAM'].instances} x SRAM {best['levels.SRAM.capacity']} + " \
           f"{arch['RF'].instances} x RF {best['levels.RF.capacity']}"
    init, ref = frame(frames["initial"]), frame(refined)
    lines = [
        "# The OnionChopper thesis (ch. 6), reproduced by storeloop",
        "",
        f"Written by `storeloop reproduce{' --quick' if quick else ''}`. Every storeloop number below is read from "
        "`reproduction.sqlite` (or `cpu.json`); the thesis's are the published ones (ch. 6). "
        f"{'Quick run: subsets of the grids (same figures, fewer points).' if quick else 'Full grids.'}",
        "",
        f"Sweeps: initial {len(init):,} designs, refined {len(ref)}, database sizes {len(s)} "
        "(OnionPIR, SealPIR, SimplePIR, FastPIR). Seconds per step (the figures drawn beside the steps after them): "
        + ", ".join(f"{k} {v:.0f}" for k, v in timing.items()) + ".",
        "",
        "The thesis's design (2 x SRAM 4 KiB, 2 x RF 32 words, 2 ModMACs), OnionPIR 64 GiB, energies from "
        "storeloop's plug-ins (CACTI, Aladdin, ModMAC, Disk, DRAM):",
        "",
        "| quantity | thesis | storeloop | difference | why |",
        "|---|---|---|---|---|",
        f"| cycles | {THESIS['cycles']:,} | {int(row['cycles']):,} | {_pct(row['cycles'], THESIS['cycles'])} | "
        "storeloop's design sits at its Disk bound: A, B and C are 69,055,021,056 B at 10 GB/s (10^9 B/s); the "
        "thesis divides the same bytes (64.3125 GiB) by 10 GiB/s (ch. 6.1), a factor 2^30/10^9 = 1.074, and its "
        "Timeloop count is 0.2 % below even that bound |",
        f"| time at 2 GHz | 6.4 s | {t:.2f} s | {_pct(t, THESIS['cycles'] / 2e9)} | as cycles |",
        f"| energy | {THESIS['energy_J']} J | {row['energy_pJ'] / 1e12:.2f} J | "
        f"{_pct(row['energy_pJ'] / 1e12, THESIS['energy_J'])} | plug-in energies, not the thesis's Accelergy tables "
        "(docs/energy-vs-thesis.md): the Disk at 2.5 nJ/B alone costs more than the thesis's total |",
        f"| power | {THESIS['power_W']} W | {row['energy_pJ'] / 1e12 / t:.2f} W | "
        f"{_pct(row['energy_pJ'] / 1e12 / t, THESIS['power_W'])} | energy over time |",
        f"| on-chip area | {THESIS['on_chip_area_mm2']} mm² | {row['on_chip_area_um2'] / 1e6:.2f} mm² | "
        f"{_pct(row['on_chip_area_um2'] / 1e6, THESIS['on_chip_area_mm2'])} | ModMAC built from Aladdin parts at 45 nm "
        "instead of the thesis's yosys synthesis |",
        f"| SSD share of energy | {100 * THESIS['ssd_energy_share']:.2f} % | {100 * levels[disk]['energy_pJ'] / e_total:.2f} % "
        "| | as energy |",
        f"| compute share of energy | {100 * THESIS['compute_energy_share']:.2f} % | "
        f"{100 * levels[compute]['energy_pJ'] / e_total:.2f} % | | as energy |",
        f"| compute share of area | {100 * THESIS['compute_area_share']:.2f} % | "
        f"{100 * levels[compute]['area_um2'] / sum(v['area_um2'] for v in chip.values()):.2f} % | | as area |",
        f"| optimal design (refined sweep) | {THESIS['optimal']} | {pick} | | storeloop's pick rule is the thesis's "
        "(fewest cycles, then area x energy); with plug-in energies smaller SRAMs and RFs win |",
        f"| speed at 512 MiB, of peak (OnionPIR) | {100 * THESIS['speed_at_512MB']:.0f} % | {100 * speed_small:.0f} % | | "
        "every size runs at the Disk bound; the query (A, 64 MiB) is read at every size, so at 512 MiB the "
        "database is a smaller share of the Disk's bytes |",
        f"| CPU time, 64 GiB | {THESIS['cpu_minutes_64GB']:.0f} min | {cpu_s / 60:.1f} min | | measured here "
        f"({cpu['macs_per_s'] / 1e6:.0f} M MAC/s, NumPy, 31-bit moduli, {cpu['db_bytes'] // 2**20} MiB database, "
        "scaled by MACs); the thesis timed its OnionPIR code in a 2-vCPU VM |",
        f"| speedup over the CPU | {THESIS['speedup']}x | {speedup:.1f}x | | as CPU time |",
        "",
        f"storeloop's own pick: {pick}: {int(best['cycles']):,} cycles, {best['energy_pJ'] / 1e12:.2f} J, "
        f"{best['on_chip_area_um2'] / 1e6:.2f} mm² on chip. Points whose cycles are proven optimal: "
        f"{int(ref['cycles_optimal'].sum())} of {len(ref)} (refined), "
        f"{int(init['cycles_optimal'].sum()):,} of {len(init):,} (initial).",
        "",
        _pick_proof(ref, best, pick),
        "",
        *_stops_table({"initial": init, "refined": ref}),
        "Figures (PNG and PDF) are in `figures/`: " + ", ".join(f"Fig. 6-{i}" for i in range(1, 14))
        + ", and a roofline of the optimal design.",
        "",
    ]
    return "\n".join(lines)


# ---------------------------------------------------------------- the Disk as an SSD (docs/ssd.md)
