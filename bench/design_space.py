"""The mapper across a design space: the whole thesis-initial sweep, and 8 realistic single cases.

1. ``sweeps/thesis-initial.yaml`` (OnionPIR 64 GiB; 12 SRAM sizes x 8 RF sizes x 6 SRAM counts x
   11 lane counts, 4,896 points after the thesis's constraint) mapped into a fresh store with 2
   worker processes. Printed: points/s, the share of points whose cycles are proven optimal (at
   the lower bound or by a complete search), how each point's search stopped, the largest cycle
   and energy gaps, the total time, and the ratio to Timeloop v3.0.3's mapper at its measured
   84 s per point (random-pruned, 1 thread, victory 500: 4,896 points = 114 CPU-hours).
2. Eight realistic cases with ``storeloop map``'s defaults (PIR schemes on the OnionChopper arch,
   the rotation pipeline on its NIC arch): time to return, against Timeloop's mapper on such
   cases (65-200 s each, 84 s on OnionPIR 64 GiB).

``STORELOOP_BENCH_POINTS=N`` maps only every k-th point of the sweep (about N points) for a quick
look; the ratio is then per point.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from storeloop.energy import price  # noqa: E402
from storeloop.mapper import map_workload  # noqa: E402
from storeloop.formats.load import load_arch, load_workload  # noqa: E402
from storeloop.sweeps import best_points, load_sweep, read_results, run_sweep  # noqa: E402

TIMELOOP_S_PER_POINT = 84.0
CASES = [("arch/onionchopper.yaml", f"workloads/{w}.yaml") for w in
         ("onionpir-64GiB", "onionpir-1GiB", "sealpir-64GiB", "sealpir-1GiB", "simplepir-64GiB",
          "simplepir-1GiB", "fastpir-64GiB")] + [("arch/rotation-nic.yaml", "workloads/rotation.yaml")]


def sweep_part() -> None:
    sweep = load_sweep(ROOT / "sweeps" / "thesis-initial.yaml")
    want = int(os.environ.get("STORELOOP_BENCH_POINTS", "0"))
    with tempfile.TemporaryDirectory() as tmp:
        if want:          # a thinned copy of the grid: every k-th value of the widest parameters
            import yaml

            doc = yaml.safe_load((ROOT / "sweeps" / "thesis-initial.yaml").read_text())
            s = doc["sweep"]
            s["arch"] = str(ROOT / "arch" / "onionchopper.yaml")
            s["workloads"] = [str(ROOT / "workloads" / "onionpir-64GiB.yaml")]
            while sweep.size() > 2 * want:
                key = max(s["parameters"], key=lambda k: len(s["parameters"][k]))
                s["parameters"][key] = s["parameters"][key][::2]
                (Path(tmp) / "s.yaml").write_text(yaml.safe_dump(doc))
                sweep = load_sweep(Path(tmp) / "s.yaml")
        db = Path(tmp) / "bench.sqlite"
        t0 = time.perf_counter()
        counts = run_sweep(sweep, db, workers=2, progress=sys.stderr.isatty())
        wall = time.perf_counter() - t0
        df = read_results(db, sweep.name)
    ok = df[df["status"] == "ok"]
    n = counts["run"]
    proven = int(ok["cycles_optimal"].sum())
    stops = ok["stopped"].value_counts().to_dict()
    print(f"thesis-initial: {n} points ({counts['ok']} ok, {counts['invalid']} invalid, {counts['timeout']} timeout) "
          f"in {wall:.0f} s with 2 workers: {n / wall:.2f} points/s")
    print(f"  cycles proven optimal: {proven}/{len(ok)} ({100 * proven / max(len(ok), 1):.1f} %); "
          f"stopped: {stops}")
    print(f"  largest cycle gap {100 * ok['gap'].max():.4f} %, largest energy gap {100 * ok['energy_gap'].max():.4f} %, "
          f"mean search {ok['seconds'].mean():.3f} s, longest {ok['seconds'].max():.1f} s")
    unproven = ok[ok["cycles_optimal"] == 0]
    for _, row in unproven.head(20).iterrows():
        print(f"  unproven: {row['params']} gap {100 * row['gap']:.3f} %")
    for _, row in best_points(df).iterrows():
        print(f"  optimal architecture (thesis ch. 5.1: fewest cycles, then least on-chip area x energy): "
              f"{row['params']}: {int(row['cycles']):,} cycles, {row['energy_pJ'] / 1e12:.4f} J, "
              f"{row['on_chip_area_um2'] / 1e6:.4g} mm2 on chip")
    timeloop = n * TIMELOOP_S_PER_POINT
    print(f"design_space: {wall:.0f} s for {n} points (Timeloop at {TIMELOOP_S_PER_POINT:.0f} s/point: "
          f"{timeloop / 3600:.1f} CPU-hours, {timeloop / 2 / wall:.0f}x on 2 cores)")


def cases_part() -> None:
    for arch_file, wl_file in CASES:
        arch = load_arch(ROOT / arch_file)
        energy = price(arch)[0]
        w = load_workload(ROOT / wl_file)
        t0 = time.perf_counter()
        out = map_workload(arch, w, energy, time_limit=60.0)
        wall = time.perf_counter() - t0
        s = out.search
        print(f"  {Path(wl_file).stem:<16} on {Path(arch_file).stem:<13} {wall:6.2f} s  {out.result.cycles:>16,} cycles "
              f"(gap {100 * s['gap']:.3f} %)  {out.result.energy_pJ / 1e12:10.4f} J (energy gap "
              f"{100 * s['energy_gap']:.3f} %)  stopped: {s['stopped']}")


def main() -> None:
    if os.environ.get("STORELOOP_BENCH_PART", "all") in ("all", "cases"):
        print("8 realistic cases, storeloop map defaults (Timeloop's mapper: 65-200 s each):")
        cases_part()
    if os.environ.get("STORELOOP_BENCH_PART", "all") in ("all", "sweep"):
        sweep_part()


if __name__ == "__main__":
    main()
