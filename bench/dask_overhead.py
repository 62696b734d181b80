"""Does Dask pay for itself? The same subset of the thesis's initial sweep, run into fresh stores by
2 local processes and by a Dask LocalCluster of 2 workers (and 1 worker each); printed: the seconds
of each and the ratios Dask / local (the target: within 10 % with 2 workers) and 2 workers / 1
worker (scaling; the target: at least 0.9 x 2 on sweeps of a minute or more).

``STORELOOP_BENCH_SRAM`` picks the SRAM sizes of the subset (default: 2, i.e. 816 points; the
issue's 1,632-point subset is 4). Ratios are measured in this run, on this machine.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

import yaml

os.environ.setdefault("OMP_NUM_THREADS", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from storeloop.sweeps import load_sweep, run_sweep  # noqa: E402


def subset(folder: Path, srams: int) -> Path:
    spec = yaml.safe_load((ROOT / "sweeps" / "thesis-initial.yaml").read_text())["sweep"]
    spec["arch"] = str((ROOT / "sweeps" / spec["arch"]).resolve())
    spec["workloads"] = [str((ROOT / "sweeps" / w).resolve()) for w in spec["workloads"]]
    spec["parameters"]["levels.SRAM.capacity"] = spec["parameters"]["levels.SRAM.capacity"][:srams]
    spec["name"] = "dask-bench"
    path = folder / "bench.sweep.yaml"
    path.write_text(yaml.safe_dump({"sweep": spec}, sort_keys=False))
    return path


def timed(spec: Path, db: Path, **how) -> tuple[float, int]:
    t = time.perf_counter()
    counts = run_sweep(load_sweep(spec), db, progress=False, **how)
    return time.perf_counter() - t, counts["run"]


def main() -> None:
    srams = int(os.environ.get("STORELOOP_BENCH_SRAM", "2"))
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        spec = subset(folder, srams)
        runs = {}
        for name, how in (("local x2", {"workers": 2}), ("dask x2", {"workers": 2, "dask": "local"}),
                          ("local x1", {"workers": 1}), ("dask x1", {"workers": 1, "dask": "local"})):
            seconds, points = timed(spec, folder / f"{name.replace(' ', '-')}.sqlite", **how)
            runs[name] = seconds
            print(f"{name:<9} {points} points in {seconds:6.1f} s ({1000 * seconds / max(points, 1):.1f} ms/point)")
        print(f"dask / local, 2 workers: {runs['dask x2'] / runs['local x2']:.2f} (target <= 1.10)")
        print(f"dask / local, 1 worker:  {runs['dask x1'] / runs['local x1']:.2f}")
        print(f"scaling 1 -> 2 workers: local {runs['local x1'] / runs['local x2']:.2f}x, "
              f"dask {runs['dask x1'] / runs['dask x2']:.2f}x (target >= 1.8x)")


if __name__ == "__main__":
    main()
