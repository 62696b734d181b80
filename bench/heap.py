"""The branch and bound with and without :func:`storeloop.model.heap.tune_malloc`, in one run.

The same proof (a 200x300x400 matmul on the peers' arch, ``tests/data/arch16.yaml``, the
defaults: it ends ``optimal``) is searched in fresh processes, alternately with glibc's default
allocation (``tune_malloc`` marked as done before the search, so it never runs) and with the tuning the mapper
applies. Each prints wall, user and system seconds and the candidates (the same in both: the
tuning changes where memory comes from, not the search). The ratio is default / tuned wall time;
the system time is where the difference lives (page faults of freshly mapped arrays).
Usage: python bench/heap.py [rounds (default 2)]
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = r"""
import json, os, sys, time
sys.path.insert(0, sys.argv[2])
from storeloop.formats.load import energy_table, load_arch
from storeloop.mapper import map_workload
from storeloop.model import heap
from storeloop.workloads.pir import einsum_workload
if sys.argv[1] == "default":
    heap._malloc_tuned = True
arch = load_arch(sys.argv[3])
work = einsum_workload("mm", "Z[m,n] = A[m,k] * B[k,n]", {"M": 200, "N": 400, "K": 300}, bits=16)
energy = energy_table(arch, None)
t0, c0 = time.monotonic(), os.times()
out = map_workload(arch, work, energy)
c1 = os.times()
print(json.dumps({"wall": time.monotonic() - t0, "user": c1.user - c0.user, "sys": c1.system - c0.system,
                  "candidates": out.search["candidates"], "stopped": out.search["stopped"],
                  "energy_pJ": out.result.energy_pJ}))
"""


def run(mode: str) -> dict:
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore")
    p = subprocess.run([sys.executable, "-c", CHILD, mode, str(ROOT / "src"), str(ROOT / "tests/data/arch16.yaml")],
                       capture_output=True, text=True, env=env, check=True)
    return json.loads(p.stdout.strip().splitlines()[-1])


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    got: dict[str, list[dict]] = {"default": [], "tuned": []}
    for _ in range(rounds):
        for mode in ("default", "tuned"):
            r = run(mode)
            got[mode].append(r)
            print(f"{mode:8s} {r['wall']:6.2f} s wall, {r['user']:6.2f} s user, {r['sys']:5.2f} s system, "
                  f"{r['candidates']:,} candidates, {r['stopped']}, {r['energy_pJ'] / 1e6:.3f} uJ", flush=True)
    same = {(r["candidates"], r["energy_pJ"]) for rs in got.values() for r in rs}
    wall = {m: statistics.median(r["wall"] for r in rs) for m, rs in got.items()}
    print(f"heap: default / tuned wall time {wall['default'] / wall['tuned']:.2f}x (medians of {rounds}); "
          f"the same search in both: {len(same) == 1}")


if __name__ == "__main__":
    main()
