"""Runs a real ``timeloop-mapper`` (v3.0.3, the oracle of ../../../shared/tools/build-timeloop-oracle)
on CNN layers of the corpus architectures and keeps what it found, for
``tests/test_mapper.py::test_cnn_layers_no_worse_than_a_real_timeloop_mapper``.

    . ~/timeloop-oracle/env.sh && .venv/bin/python tests/timeloop-mapper/make.py [case ...]

Each case folder takes the architecture, ERT and ART of one corpus case and the problem of
another (tests/corpus, Timeloop v0.3 files exactly as the corpus ran them), adds ``mapper.yaml``
(below) and keeps Timeloop's ``timeloop-mapper.stats.txt`` and ``timeloop-mapper.map.yaml`` (its
best mapping) and ``run.json`` (the wall time and the command). Nothing here is edited by hand.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
CORPUS = HERE.parent / "corpus"

ARCHS = {"a1": "a1-dram-sram-mac-16b__cnn-small__r1", "a3": "a3-dram-glb-pe16-rf-32b__cnn-small__r1",
         "a4": "a4-dram-4sram-4rf-16b__cnn-small__b3-r1", "a5": "a5-dram-sram-mac16-64b__cnn-small-s2__r1",
         "a8": "a8-dram-glb-mac8x2-16b__cnn-small__b3-r2"}
PROBLEMS = {"cnn-small": "a1-dram-sram-mac-16b__cnn-small__r1", "cnn-5x5": "a1-dram-sram-mac-16b__cnn-5x5__b3-r1",
            "cnn-d2": "a1-dram-sram-mac-16b__cnn-d2__b3-r1", "cnn-s2-5x5": "a3-dram-glb-pe16-rf-32b__cnn-s2-5x5__b3-r1",
            "cnn-small-s2": "a3-dram-glb-pe16-rf-32b__cnn-small-s2__b3-r1",
            "cnn-1d-row": "a3-dram-glb-pe16-rf-32b__cnn-1d-row__b3-r2"}
CASES = [("a1", "cnn-small"), ("a1", "cnn-5x5"), ("a1", "cnn-d2"),
         ("a3", "cnn-small"), ("a3", "cnn-s2-5x5"), ("a3", "cnn-d2"), ("a3", "cnn-1d-row"), ("a3", "cnn-small-s2"),
         ("a4", "cnn-small"), ("a4", "cnn-5x5"), ("a5", "cnn-small-s2"), ("a5", "cnn-small"),
         ("a8", "cnn-small"), ("a8", "cnn-s2-5x5")]

# Timeloop's own search, as the corpus's mapper cases ran it, with a longer patience and two threads
MAPPER = """mapper:
  optimization-metrics: [delay, energy]
  num-threads: 2
  algorithm: random-pruned
  victory-condition: 1000
  timeout: 10000
  max-permutations-per-if-visit: 16
  log-suboptimal: false
  live-status: false
  diagnostics: false
"""


def make(arch: str, problem: str) -> Path:
    out = HERE / f"{arch}__{problem}"
    out.mkdir(exist_ok=True)
    for name in ("arch.yaml", "ERT.yaml", "ART.yaml"):
        shutil.copy(CORPUS / ARCHS[arch] / name, out / name)
    shutil.copy(CORPUS / PROBLEMS[problem] / "problem.yaml", out / "problem.yaml")
    (out / "mapper.yaml").write_text(MAPPER)
    args = ["arch.yaml", "problem.yaml", "mapper.yaml", "ERT.yaml", "ART.yaml"]
    with tempfile.TemporaryDirectory() as tmp:
        for a in args:
            shutil.copy(out / a, tmp)
        t0 = time.perf_counter()
        proc = subprocess.run(["timeloop-mapper", *args], cwd=tmp, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        if proc.returncode != 0:
            raise SystemExit(f"{out.name}: timeloop-mapper failed:\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
        for name in ("timeloop-mapper.stats.txt", "timeloop-mapper.map.yaml"):
            shutil.copy(Path(tmp) / name, out / name)
    (out / "run.json").write_text(json.dumps({"command": "timeloop-mapper " + " ".join(args), "wall_s": round(wall, 2),
                                              "timeloop": "v3.0.3 (6b41058)", "threads": 2}, indent=1) + "\n")
    return out


if __name__ == "__main__":
    if shutil.which("timeloop-mapper") is None:
        raise SystemExit("timeloop-mapper is not on PATH: . ~/timeloop-oracle/env.sh first")
    wanted = sys.argv[1:]
    for arch, problem in CASES:
        if not wanted or f"{arch}__{problem}" in wanted:
            print(make(arch, problem).name, flush=True)
