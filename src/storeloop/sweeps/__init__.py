"""Architecture sweeps: a grid of arch variants x workloads, each mapped, stored as it finishes.

A sweep spec (``sweeps/*.yaml``)::

    sweep:
      name: onionchopper-small
      arch: ../arch/onionchopper.yaml          # a storeloop arch file (paths relative to the spec)
      workloads: [../workloads/onionpir-64GiB.yaml, {file: ../workloads/sealpir-1GiB.yaml, weight: 4}]
      parameters:                               # the grid: arch fields -> values
        levels.SRAM.capacity: [1 KiB, 4 KiB]
        levels.SRAM.instances+levels.RF.instances+compute.instances: [2, 4]   # set together
      scenarios:                                # the situation, not the design: a best design each
        levels.Disk.read_bandwidth: [5 GB/s, 10 GB/s]
      constraints: ["SRAM.instances <= RF.instances"]    # <level>.<attr> <op> <level>.<attr> | number
      mapper: {time_limit: 5, objective: delay,energy}
      energy: {ert: ..., art: ...}              # optional; default: the energy plug-ins

``scenarios`` take the same form as ``parameters`` and join the grid, but they describe the
situation (a Disk's bandwidth, a network's line rate) rather than the design: the best design is
picked per workload and scenario (:func:`best_points`, the CLI summary, the figures). Every row
keeps its scenario values in ``scenario`` (JSON) and its per-level cycles, energy and area in
``levels`` (JSON).

Several workloads make a workload set: each design is mapped on each, and :func:`rank_designs`
(``storeloop results --rank``, the sweep's summary) ranks designs across the set by the weighted
mean time (or energy) per query, each workload weighed by its ``weight`` (default 1; stored in the
rows, and a changed weight relabels them without running anything again), and by the worst ratio
to each workload's best design.

Points are generated on the fly, filtered by the constraints on the loaded arch, and run by local
processes (at most two points in flight per worker) or a Dask cluster. Every finished point is
committed to a SQLite store at once (``results/<name>.sqlite``, WAL mode: readers never block it),
so an interrupted sweep loses nothing. A point's key hashes everything that decides its result
(parameters, the arch after substitution, the workload's contents, the mapper settings, the energy
tables or plug-ins and their versions, storeloop's version): a re-run skips a point only if that
exact result is stored, and rows of changed inputs stay queryable, marked ``stale``. A point whose
arch is invalid (e.g. instances that do not divide) is stored with its error instead of a result. Workers receive file paths, not objects: on a Dask
cluster every worker needs storeloop installed and the spec, arch and workload files at the same
paths (a shared checkout); only the scheduler's client writes the store.
"""

from __future__ import annotations

from storeloop.sweeps.results import best_points, mapped, own_cycles, rank_designs, read_results
from storeloop.sweeps.run import run_sweep, run_sweeps
from storeloop.sweeps.worker import level_breakdown, run_point
from storeloop.formats.sweep import Sweep, load_sweep
from storeloop.sweeps.grid import point_arch, points, satisfies
from storeloop.sweeps.store import open_store


__all__ = ["Sweep", "best_points", "mapped", "load_sweep", "points", "point_arch", "satisfies", "run_point", "run_sweep", "run_sweeps", "read_results",
           "rank_designs",
           "open_store", "level_breakdown", "own_cycles"]
