"""A windowed proof with the last level's send floors weighed from the expansion's rows, against
the same proof with each child built and weighed alone (docs/windows.md, session 45).

Both runs prove the same layer on the peers' arch (``tests/data/arch16.yaml``: DRAM -> 64 KiB GLB ->
16 x (64-word RF -> MAC)) in one process, with one walk over every order and no early stop
(``map --threads 1 --no-converge --time-limit 0``), so they walk the same tree with the same
cuts: the bench checks that they count the same candidates and end with the same answer, and
prints the ratio of their times (measured in the same run: these machines are noisy). The
baseline is :meth:`Tree.floor_cuts` turned off, which builds every child and weighs it with
:meth:`Tree.floor_cut`, as session 44 did.

    .venv/bin/python bench/window_floors.py [small|5x5]     (default: small, about 25 s; 5x5, 3 min)

Measured (2 cores, session 45): the 16-channel 14x14 3x3 layer 12.5 s -> 11.8 s (1.06x: its
children are few and cheap); the 32-channel 16x16 5x5 layer 106.2 s -> 73.9 s (1.44x), with the
same 65,957,703,265 candidates.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

import yaml  # noqa: E402

from storeloop.formats.load import energy_table, load_arch  # noqa: E402
from storeloop.formats.native import workload_from_native  # noqa: E402
from storeloop.formats.yamlio import loads  # noqa: E402
from storeloop.ir import Workload  # noqa: E402
from storeloop.mapper import map_workload  # noqa: E402
from storeloop.mapper.tree import Tree  # noqa: E402

LAYERS = {      # name: (channels C = K, pixels P = Q, window R = S)
    "small": (16, 14, 3),
    "5x5": (32, 16, 5),
}


def layer(c: int, p: int, r: int) -> Workload:
    doc = {"workload": {"name": f"conv{c}_{p}_{r}", "einsum": "O[n,k,p,q] = W[k,c,r,s] * I[n,c,p+r,q+s]",
                        "bounds": {"N": 1, "C": c, "K": c, "P": p, "Q": p, "R": r, "S": r}, "bits": 16}}
    return workload_from_native(loads(yaml.safe_dump(doc)))


def prove(arch, work, energy) -> tuple[float, dict]:
    t = time.perf_counter()
    out = map_workload(arch, work, energy, threads=1, converge=False, time_limit=None)
    return time.perf_counter() - t, out.search | {"energy_pJ": out.result.energy_pJ}


def main(argv: list[str]) -> int:
    name = argv[0] if argv else "small"
    arch = load_arch(ROOT / "tests/data/arch16.yaml")
    work = layer(*LAYERS[name])
    energy = energy_table(arch, None)
    rows_s, rows = prove(arch, work, energy)
    saved = Tree.floor_cuts
    Tree.floor_cuts = lambda self, *a, **k: {}          # every child built and weighed alone
    try:
        alone_s, alone = prove(arch, work, energy)
    finally:
        Tree.floor_cuts = saved
    same = (rows["candidates"], rows["energy_pJ"], rows["stopped"]) == \
        (alone["candidates"], alone["energy_pJ"], alone["stopped"])
    print(f"layer {work.name} on arch16, one process, one walk, --no-converge")
    print(f"  children built and weighed alone : {alone_s:7.1f} s  {alone['stopped']}, "
          f"{alone['candidates']:,} candidates, {alone['energy_pJ'] / 1e6:.4f} uJ")
    print(f"  floors from the expansion's rows : {rows_s:7.1f} s  {rows['stopped']}, "
          f"{rows['candidates']:,} candidates, {rows['energy_pJ'] / 1e6:.4f} uJ")
    print(f"window_floors: {alone_s / rows_s:.2f}x faster, {'the same' if same else 'NOT the same'} "
          f"candidates, stop and answer")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
