"""Full mapping evaluations per second on one core: OnionPIR 64 GiB on the ssd-einsum architecture.

Every evaluation computes per-level, per-tensor reads/fills/updates, capacity checks, per-level
bandwidth-throttled cycles and energy. Three engines are timed in the same run on the same random
factorizations of the thesis's loop structure: the reference model (readable Python), the scalar
fast model (what the mapper's local search prices with) and the NumPy batch model (the column-wise
use of the cost kernel, as the mapper's tree prices its leaves). The ratio is against Timeloop
v3.0.3's own model, ~600 evaluations/s (about 14 ms each) measured on a machine of this kind.
The batch model keeps its short-lived arrays in the heap (:func:`storeloop.model.heap.tune_malloc`,
which constructing it applies, as the mapper does); ``bench/heap.py`` measures what that is worth.
"""

from __future__ import annotations

import os
import random
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from storeloop.errors import MappingError  # noqa: E402
from storeloop.model.batch import BatchModel, structure_of  # noqa: E402
from storeloop.model.evaluate import evaluate  # noqa: E402
from storeloop.model.fast import FastModel  # noqa: E402
from storeloop.formats.load import load_arch, load_energy_table, load_mapping, load_workload  # noqa: E402

TIMELOOP_RATE = 600.0


def load():
    case = ROOT.parent / "shared" / "validation" / "thesis__ssd-einsum__pir-onion"
    if case.is_dir():
        arch = load_arch(case / "arch.yaml")
        workload = load_workload(case / "problem.yaml")
        return arch, workload, load_mapping(case / "mapping.yaml", arch, workload), \
            load_energy_table(arch, case / "ERT.yaml", case / "ART.yaml")
    arch = load_arch(ROOT / "arch/onionchopper.yaml")
    workload = load_workload(ROOT / "workloads/onionpir-64GiB.yaml")
    return arch, workload, load_mapping(ROOT / "mappings/onionchopper-thesis-best.yaml", arch, workload), \
        load_energy_table(arch, ROOT / "arch/onionchopper.ERT.yaml", ROOT / "arch/onionchopper.ART.yaml")


def random_rows(structure, workload, n, rng):
    """Random factorizations: each prime factor of a bound goes to one slot of its dimension."""
    rows = np.ones((n, len(structure.slots)), dtype=np.int64)
    cols = {d: [j for j, s in enumerate(structure.slots) if s.dim == d] for d in range(len(workload.dims))}
    for d, b in enumerate(workload.bounds):
        primes = []
        p, x = 2, b
        while x > 1:
            while x % p == 0:
                primes.append(p)
                x //= p
            p += 1
        for r in range(n):
            for p in primes:
                j = cols[d][0] if rng.random() < 0.8 else rng.choice(cols[d])
                rows[r, j] *= p
    return rows


def rate(fn, items, min_seconds=1.0):
    done, start = 0, time.perf_counter()
    while True:
        fn(items)
        done += len(items)
        elapsed = time.perf_counter() - start
        if elapsed >= min_seconds:
            return done / elapsed


def main() -> None:
    arch, workload, mapping, energy = load()
    structure, thesis_row = structure_of(mapping)
    rng = random.Random(1)
    rows = random_rows(structure, workload, 20_000, rng)
    rows[0] = thesis_row
    mappings = [structure.mapping(r) for r in rows[:2000]]
    fast = FastModel(arch, workload, energy)
    batch = BatchModel(arch, workload, energy)

    def run_reference(ms):
        for m in ms:
            try:
                evaluate(arch, workload, m, energy)
            except MappingError:
                pass

    def run_fast(ms):
        for m in ms:
            try:
                fast.evaluate(m)
            except MappingError:
                pass

    out = batch.evaluate(structure, rows)
    assert out.cycles[0] == 13_811_004_212, out.cycles[0]
    ref_rate = rate(run_reference, mappings[:300])
    fast_rate = rate(run_fast, mappings)
    batch_rate = rate(lambda r: batch.evaluate(structure, r), rows, 2.0)
    print(f"mappings: {len(rows)} random factorizations of the thesis loop structure, "
          f"{int(out.valid.sum())} fit every level")
    print(f"reference model : {ref_rate:10,.0f} evaluations/s")
    print(f"fast model      : {fast_rate:10,.0f} evaluations/s ({fast_rate / ref_rate:.1f}x reference)")
    print(f"batch model     : {batch_rate:10,.0f} evaluations/s ({batch_rate / ref_rate:.1f}x reference, "
          f"{batch_rate / fast_rate:.1f}x fast)")
    print(f"model_rate: {batch_rate:.0f} evaluations/s ({batch_rate / TIMELOOP_RATE:.0f}x Timeloop v3.0.3)")


if __name__ == "__main__":
    main()
