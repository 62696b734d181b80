"""``storeloop crosscheck``: the same inputs through storeloop and a real Timeloop, diffed.

The inputs are exported as Timeloop v0.3 files with an ERT/ART of storeloop's own energies
(:mod:`storeloop.formats.timeloop`), ``timeloop-model`` runs them when it is on PATH (or a stats file
it wrote earlier is given), and every per-level, per-tensor count, the cycles and the energy are
compared with storeloop's model.
"""

from __future__ import annotations

import dataclasses
import math
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import yaml

from storeloop.errors import SpecError
from storeloop.model.evaluate import Result
from storeloop.formats import timeloop
from storeloop.ir.check import padded
from storeloop.ir import Arch, EnergyTable, Mapping, Workload

from storeloop.formats.timeloop.stats import read_stats


@dataclass
class Row:
    what: str
    storeloop: float
    timeloop: float

    @property
    def ok(self) -> bool:
        return math.isclose(self.storeloop, self.timeloop, rel_tol=1e-12, abs_tol=0)


def compare(result: Result, stats: dict) -> list[Row]:
    """Per-level, per-tensor rows of storeloop's counts next to Timeloop's (printed energy in uJ)."""
    rows = [Row("cycles", result.cycles, stats["cycles"])]
    if stats.get("energy_uJ") is not None:
        rows.append(Row("energy uJ (2 dp)", round(result.energy_pJ / 1e6, 2), stats["energy_uJ"]))
    for lvl in result.levels:
        theirs = stats["levels"].get(lvl.name)
        if theirs is None:
            rows.append(Row(f"{lvl.name} (missing in Timeloop's stats)", 1, 0))
            continue
        if "cycles" in theirs:
            rows.append(Row(f"{lvl.name}.cycles", lvl.cycles, theirs["cycles"]))
        for name, t in lvl.tensors.items():
            got = theirs["tensors"].get(name, {})
            for field, mine in (("reads", t.reads_per_instance), ("fills", t.fills_per_instance),
                                ("updates", t.updates_per_instance)):
                rows.append(Row(f"{lvl.name}.{name}.{field}", mine if t.kept else 0, got.get(field, 0)))
    return rows


def export(arch: Arch, workload: Workload, mapping: Mapping | None, energy: EnergyTable, out: Path,
           strict: bool = False) -> tuple[list[Path], list[str]]:
    """Write arch/problem/mapping/ERT/ART for ``timeloop-model``; returns (files, notes).
    With ``strict``, anything Timeloop cannot express is an error instead of a note."""
    arch_doc, notes = timeloop.arch_to_timeloop(arch, energy)
    if mapping is not None and mapping.imperfect:     # the padded problem it runs, as a perfect mapping of it
        wide = padded(workload, mapping)
        if wide.bounds != workload.bounds:
            notes.append("the mapping is imperfect: problem.yaml is the problem padded to " + ", ".join(
                f"{d}={p}" for d, p, n in zip(wide.dims, wide.bounds, workload.bounds) if p != n)
                + ", which storeloop prices (Timeloop's Ruby residuals would shorten the last tiles instead)")
        workload, mapping = wide, dataclasses.replace(mapping, imperfect=False)
    if strict and notes:
        raise SpecError("Timeloop cannot run this architecture as it is:\n  " + "\n  ".join(notes),
                        field="--strict", allowed="storeloop fields Timeloop expresses (drop --strict to export with notes)")
    ert, art = timeloop.energy_to_timeloop(arch, energy)
    docs = {"arch.yaml": arch_doc, "problem.yaml": timeloop.workload_to_timeloop(workload), "ERT.yaml": ert, "ART.yaml": art}
    if mapping is not None:
        docs["mapping.yaml"] = timeloop.mapping_to_timeloop(mapping, arch, workload)
    out.mkdir(parents=True, exist_ok=True)
    files = []
    for name, doc in docs.items():
        (out / name).write_text(yaml.safe_dump(doc, sort_keys=False))
        files.append(out / name)
    return files, notes


def run_timeloop(folder: Path, timeout: float = 600) -> Path:
    """Run ``timeloop-model`` on an exported folder; its stats text."""
    exe = shutil.which("timeloop-model")
    if exe is None:
        raise SpecError("timeloop-model is not on PATH", field="--stats",
                        allowed="a timeloop-model.stats.txt from an earlier run (--stats FILE), or timeloop-model on PATH")
    args = [exe] + [str(folder / n) for n in ("arch.yaml", "problem.yaml", "mapping.yaml", "ERT.yaml", "ART.yaml")]
    proc = subprocess.run(args, cwd=folder, capture_output=True, text=True, timeout=timeout)
    stats = folder / "timeloop-model.stats.txt"
    if proc.returncode != 0 or not stats.exists():
        last = (proc.stdout + proc.stderr).strip().splitlines()[-5:]
        raise SpecError("timeloop-model failed:\n  " + "\n  ".join(last), file=str(folder / "arch.yaml"))
    return stats


def crosscheck(arch, workload, mapping, energy, result: Result, stats_file: Path | None = None,
               keep: Path | None = None) -> tuple[list[Row], list[str]]:
    """Rows of the comparison and the export notes (with ``stats_file``, nothing is run)."""
    with tempfile.TemporaryDirectory(prefix="storeloop-crosscheck-") as tmp:
        folder = keep or Path(tmp)
        _, notes = export(arch, workload, mapping, energy, folder)
        return compare(result, read_stats(stats_file or run_timeloop(folder))), notes
