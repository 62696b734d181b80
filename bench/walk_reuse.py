"""Two savings of session 46 in a windowed search, each against its baseline in the same run
(docs/windows.md, session 46):

* ``slides``: the windows' slides raise the bound that cuts only in the rows the rest of the
  bound does not already rule out (``Tree._slid_bound``), against every fitting row weighed. One
  process, one walk, no early stop (``map --threads 1 --no-converge --time-limit 0``): the bench
  checks that both count the same candidates and end with the same answer.
* ``handback``: ``map``'s defaults (one process per core, the walk over first orders, then the
  full walk, 60 s), with each share handing the refill bound's cases it weighed back to the
  search (``BelowBounds.refills_since``), so the full walk starts with them, against none handed
  back. Both are proofs on these layers; the bench prints each one's stop and answer.

    .venv/bin/python bench/walk_reuse.py [slides] [handback]     (default: both, about 5 min)

``slides`` proves the 32-channel 16x16 5x5 layer (the 16-channel 14x14 one gains nothing:
20.1 s against 20.2 s), ``handback`` the 32-channel 14x14 layer. Measured (2 cores, session 46):
see bench/README.md.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from storeloop.formats.load import energy_table, load_arch  # noqa: E402
from storeloop.mapper import map_workload  # noqa: E402
from storeloop.mapper.tree import Tree  # noqa: E402
from window_floors import layer  # noqa: E402  (this folder's)


def run(arch, work, energy, **kw) -> tuple[float, dict]:
    t = time.perf_counter()
    out = map_workload(arch, work, energy, **kw)
    return time.perf_counter() - t, out.search | {"energy_pJ": out.result.energy_pJ}


def compare(what: str, baseline: str, arch, work, energy, patch: tuple, same_candidates: bool, **kw) -> bool:
    cls, name, replacement = patch
    saved = getattr(cls, name)
    setattr(cls, name, replacement)
    try:
        base_s, base = run(arch, work, energy, **kw)
    finally:
        setattr(cls, name, saved)
    new_s, new = run(arch, work, energy, **kw)
    keys = ("candidates", "energy_pJ", "stopped") if same_candidates else ("energy_pJ", "stopped")
    same = all(base[k] == new[k] for k in keys)
    print(f"layer {work.name} on arch16, {what}")
    for label, s, r in ((baseline, base_s, base), ("session 46", new_s, new)):
        print(f"  {label:34s}: {s:7.1f} s  {r['stopped']}, {r['candidates']:,} candidates, "
              f"{r['energy_pJ'] / 1e6:.4f} uJ")
    print(f"walk_reuse {what.split(',')[0]}: {base_s / new_s:.2f}x faster, {'the same' if same else 'NOT the same'} "
          f"{', '.join(keys)}")
    return same


def main(argv: list[str]) -> int:
    chosen = argv or ["slides", "handback"]
    arch = load_arch(ROOT / "tests/data/arch16.yaml")
    energy = energy_table(arch, None)
    ok = True
    if "slides" in chosen:
        slid = Tree._slid_bound
        ok &= compare("slides, one process, one walk, --no-converge", "every fitting row weighed", arch, layer(32, 16, 5),
                      energy, (Tree, "_slid_bound", lambda self, *a: slid(self, *a[:-2], None, a[-1])), True,
                      threads=1, converge=False, time_limit=None)
    if "handback" in chosen:
        ok &= compare("handback, map's defaults (2 processes, 60 s)", "no refill cases handed back", arch,
                      layer(32, 14, 3), energy, (Tree, "refills_since", lambda self, known: {}), False,
                      threads=2, time_limit=60.0)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
