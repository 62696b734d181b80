"""storeloop's mapper against Timeloop v3.0.3's on OnionPIR 64 GiB (the corpus's ssd-einsum files).

Disk -> DRAM -> 2 x (SRAM 4 KB -> RF 32 -> MAC), imported from the Timeloop v0.3 arch/problem with
the corpus's Accelergy ERT/ART. One core (one process, OMP_NUM_THREADS=1). Timeloop's figures were
measured on a machine of this kind (issue 4): random-pruned, victory condition 500:
13,918,378,394 cycles, 177.50 J in 84 s (1 thread); 13,824,425,985 cycles, 177.88 J in 125 s (2).

The mapper returns when a stop rule fires (here: cycles at the bound and energy within 0.1 % of its
lower bound) or at the time limit; the line below reports when it found the mapping it returns.
Targets (issue 4): cycles at the bound 13,811,004,212; energy <= 173.95 J; <= 2 s.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from storeloop.mapper import map_workload  # noqa: E402
from storeloop.formats.load import load_arch, load_energy_table, load_workload  # noqa: E402

CASE = Path(os.environ.get("STORELOOP_VALIDATION", ROOT.parent / "shared" / "validation")) / "thesis__ssd-einsum__pir-onion"
TIMELOOP_S, TIMELOOP_CYCLES, TIMELOOP_J = 84.0, 13_918_378_394, 177.50
LIMIT = float(os.environ.get("STORELOOP_BENCH_LIMIT", "30"))


def main() -> None:
    arch = load_arch(CASE / "arch.yaml")
    workload = load_workload(CASE / "problem.yaml")
    energy = load_energy_table(arch, CASE / "ERT.yaml", CASE / "ART.yaml")
    t0 = time.perf_counter()
    out = map_workload(arch, workload, energy, time_limit=LIMIT, threads=1)
    wall = time.perf_counter() - t0
    s = out.search
    found_at = s["improvements"][-1]["seconds"] if s["improvements"] else wall
    joules = out.result.energy_pJ / 1e12
    print(f"search: {s['candidates']:,} candidates, {wall:.1f} s wall (limit {LIMIT:g} s), "
          f"optimal proven: {s['optimal']}, cycles optimal: {s['cycles_optimal']}")
    for imp in s["improvements"]:
        print(f"  new best at {imp['seconds']:7.2f} s: {imp['cycles']:,} cycles, {imp['energy_pJ'] / 1e12:.4f} J")
    print(f"timeloop v3.0.3 random-pruned (1 thread): {TIMELOOP_S:.0f} s, {TIMELOOP_CYCLES:,} cycles, {TIMELOOP_J} J")
    print(f"targets: {s['lower_bound_cycles']:,} cycles, <= 173.95 J, <= 2 s  ->  "
          f"cycles {'met' if out.result.cycles == s['lower_bound_cycles'] else 'MISSED'}, "
          f"energy {'met' if joules <= 173.95 else 'MISSED'}, time {'met' if found_at <= 2 else 'MISSED'}")
    print(f"mapper_vs_timeloop: {found_at:.2f} s, {out.result.cycles} cycles (gap {100 * s['gap']:.4f}%), "
          f"{joules:.2f} J, {TIMELOOP_S / found_at:.1f}x faster than Timeloop")


if __name__ == "__main__":
    main()
