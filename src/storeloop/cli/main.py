"""The ``storeloop`` command line: its parser and entry point. Bad input prints one clear error and
exits 2."""

from __future__ import annotations

import argparse
import sys

from storeloop.cli.commands import (cmd_crosscheck, cmd_crossover, cmd_energy, cmd_export, cmd_map, cmd_model,
                                    cmd_ssd, cmd_workload)
from storeloop.cli.runs import RESULT_FORMATS, cmd_plot, cmd_reproduce, cmd_results, cmd_sweep, cmd_system
from storeloop.errors import StoreloopError


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("storeloop")
    except PackageNotFoundError:
        return "unknown (not installed)"


def inputs(parser: argparse.ArgumentParser, mapping: str | None) -> argparse.ArgumentParser:
    """The arch and workload arguments, the mapping ("required", "optional" or None) and --ert/--art."""
    parser.add_argument("arch", help="architecture YAML (storeloop or Timeloop v0.3)")
    parser.add_argument("workload", help="workload YAML (storeloop einsum or Timeloop v0.3 problem)")
    if mapping:
        parser.add_argument("mapping", nargs=None if mapping == "required" else "?",
                            help="mapping YAML (storeloop or Timeloop v0.3)")
    parser.add_argument("--ert", help="Accelergy ERT.yaml with per-action energies (default: the energy plug-ins)")
    parser.add_argument("--art", help="Accelergy ART.yaml with per-instance areas (default: the energy plug-ins)")
    return parser


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="storeloop", description="Design-space exploration for near-storage accelerators.")
    p.add_argument("--version", action="version", version=f"storeloop {_version()}")
    sub = p.add_subparsers(dest="command", required=True)
    m = inputs(sub.add_parser("model", help="evaluate one mapping: cycles, accesses, energy, area"), "required")
    m.add_argument("--json", action="store_true", help="print one JSON object shaped like the validation corpus")
    m.set_defaults(func=cmd_model)
    en = sub.add_parser("energy", help="per-action energy, area and leakage of each component, with sources")
    en.add_argument("arch")
    en.add_argument("--json", action="store_true")
    en.set_defaults(func=cmd_energy)
    e = inputs(sub.add_parser("export", help="write storeloop specs as Timeloop v0.3 files (with an ERT/ART)"), "optional")
    e.add_argument("--out", required=True, help="output folder")
    e.add_argument("--strict", action="store_true", help="refuse what Timeloop cannot express instead of noting it")
    e.set_defaults(func=cmd_export)
    x = inputs(sub.add_parser("crosscheck", help="diff storeloop against timeloop-model on the same (exported) inputs"),
               "required")
    x.add_argument("--stats", help="a timeloop-model.stats.txt to compare with (default: run timeloop-model)")
    x.add_argument("--keep", help="write the exported files here instead of a temporary folder")
    x.add_argument("--all", action="store_true", help="print every number, not only those that differ")
    x.set_defaults(func=cmd_crosscheck)
    mp = inputs(sub.add_parser("map", help="find the best mapping, with a lower-bound certificate"), None)
    mp.add_argument("--constraints", help="constraints YAML (storeloop or Timeloop v0.3 mapspace_constraints)")
    mp.add_argument("--mapper", metavar="FILE",
                    help="a Timeloop mapper config (mapper: {algorithm, optimization-metrics, num-threads, "
                         "victory-condition}); options given here win")
    mp.add_argument("--objective", default=None,
                    help="delay,energy (lexicographic, default), delay, energy, edp, area-energy")
    mp.add_argument("--algorithm", default=None,
                    help="exhaustive (branch and bound, default), random-pruned, random")
    mp.add_argument("--time-limit", type=float, default=60.0,
                    help="seconds (default 60; 0: none), a safety net: the search normally stops on a rule "
                         "(optimal, energy-gap, converged); the best mapping so far is returned")
    mp.add_argument("--budget", type=int, default=None, metavar="N",
                    help="stop the branch and bound after N candidates (stopped: budget): unlike the time limit, "
                         "the same answer on a busy machine")
    mp.add_argument("--energy-gap", type=float, default=None,
                    help="stop once the cycles are at their lower bound and the energy is within this relative gap "
                         "of its lower bound (default 0.001 = 0.1 %% for delay,energy; 0, the exact minimum, for the "
                         "energy objectives; 0: prove optimality)")
    mp.add_argument("--no-converge", action="store_true",
                    help="do not stop when the search stops improving (search until optimal or the time limit)")
    mp.add_argument("--search-layout", action="store_true",
                    help="search the rank order each tensor is stored in on an SSD-backed first level (its layout: "
                         "the arch's is ignored) jointly with the mapping")
    mp.add_argument("--uneven", action="store_true",
                    help="also search uneven mappings: each tensor a level keeps at its own temporal loop position "
                         "there (AccelForge's; the mapping file's 'below:'); the certificate names the levels")
    mp.add_argument("--imperfect", action="store_true",
                    help="also search imperfect factorizations: a dimension's loops need not divide its bound, the "
                         "last tile is run full and padded with zeros (the mapping file's 'imperfect: true')")
    mp.add_argument("--seed-mapping", action="append", metavar="FILE",
                    help="a mapping to start from (re-priced on this arch; may be given several times)")
    mp.add_argument("--threads", type=int, default=None,
                    help="processes for the exhaustive search (default: the cores this process may use, as "
                         "timeloop-mapper's num-threads; 1 with --budget, whose answer then does not depend on "
                         "the machine)")
    mp.add_argument("--seed", type=int, default=0, help="seed of the random searches")
    mp.add_argument("--victory", type=int, default=None,
                    help="random searches stop after this many non-improving samples (default 500)")
    mp.add_argument("--json", action="store_true", help="the model's JSON plus a 'search' object")
    mp.add_argument("--out", help="write the best mapping here (storeloop mapping YAML)")
    mp.set_defaults(func=cmd_map)
    w = sub.add_parser("workload", help="generate a workload from a scheme and a database size")
    w.add_argument("scheme", help="onionpir, sealpir, simplepir, fastpir or rotation")
    w.add_argument("--db-size", help="database size for PIR schemes, e.g. 64GiB or 512MiB (GiB = 2^30 B, GB = 10^9 B)")
    w.add_argument("--param", action="append", metavar="K=V", help="scheme parameter, e.g. ell=5 or rows=30720")
    w.add_argument("--json", action="store_true")
    w.add_argument("--query", action="store_true",
                   help="the whole query (every einsum of the answer: OnionPIR's and SealPIR's dimensions, SimplePIR's and FastPIR's one pass) as one query file for storeloop map")
    w.add_argument("--out", help="write a storeloop workload YAML here")
    w.set_defaults(func=cmd_workload)
    s = sub.add_parser("sweep", help="map every point of an architecture grid; results kept in SQLite")
    s.add_argument("spec", nargs="+", help="sweep YAML (sweeps/); several run in one pool of workers")
    s.add_argument("--workers", type=int, default=1, help="local processes (or Dask workers with --dask local)")
    s.add_argument("--dask", help="a Dask scheduler address, or 'local' for a LocalCluster")
    s.add_argument("--db", help="results store (default results/<sweep name>.sqlite)")
    s.add_argument("--plot", metavar="DIR", help="then draw the figures into DIR")
    s.set_defaults(func=cmd_sweep)
    pl = sub.add_parser("plot", help="draw a sweep's figures (time/energy vs area, per parameter)")
    pl.add_argument("db", help="results store written by storeloop sweep")
    pl.add_argument("--sweep", help="one sweep of the store")
    pl.add_argument("--out", default="results/figures", help="folder for the PNG files")
    pl.set_defaults(func=cmd_plot)
    cx = sub.add_parser("crossover", help="where the bound (Disk, DRAM, compute, ...) of the best mapping moves "
                                          "along one arch parameter, by bisection")
    inputs(cx, None)
    cx.add_argument("path", help="the parameter, as in a sweep: levels.Disk.shared_bandwidth, compute.instances, "
                                 "levels.RF.instances+compute.instances (both take the value)")
    cx.add_argument("low", metavar="LOW", help="one end, e.g. '1 GB/s'")
    cx.add_argument("high", metavar="HIGH", help="the other end, in the same unit, e.g. '100 GB/s'")
    cx.add_argument("--tolerance", type=float, default=0.01, help="relative width of the answer (default 0.01)")
    cx.add_argument("--json", action="store_true")
    cx.set_defaults(func=cmd_crossover)
    rp = sub.add_parser("reproduce", help="the thesis's chapter 6: its sweeps, 13 figures and reproduction.md")
    rp.add_argument("--quick", action="store_true", help="subsets of the grids: every figure in a few minutes")
    rp.add_argument("--out", help="folder for the store, figures and reproduction.md (default results/reproduction, "
                    "with --quick results/reproduction-quick, so a quick run never replaces the full one)")
    rp.add_argument("--workers", type=int, default=2, help="local processes for the sweeps")
    rp.set_defaults(func=cmd_reproduce)
    sy = sub.add_parser("system", help="a whole system: throughput, the binding resource, instances a rate needs, "
                        "the paper's claims beside storeloop's")
    sy.add_argument("system", help="system YAML (systems/)")
    sy.add_argument("--set", action="append", metavar="PATH=VALUE",
                    help="override a field, e.g. devices.nic.bandwidth=200Gb/s, stages.rotation.instances=12, "
                         "ratios.dedup=0.5, target=40Gb/s (may be given several times)")
    sy.add_argument("--scenario", help="apply one of the file's named scenarios first")
    sy.add_argument("--claims", action="store_true", help="print the claims table (published, storeloop, difference, why)")
    sy.add_argument("--json", action="store_true", help="everything as one JSON object (SI units)")
    sy.set_defaults(func=cmd_system)
    sd = sub.add_parser("ssd", help="an SSD under a request stream: bandwidth, IOPS, mean latency, the binding "
                        "resource and energy (one JSON object)")
    sd.add_argument("ssd", help="SSD YAML (a top-level ssd: block, the same block a Disk level takes)")
    sd.add_argument("--pattern", choices=("sequential", "random"), default="sequential")
    sd.add_argument("--request-size", default="128KiB", help="bytes per request, e.g. 4KiB (default 128KiB)")
    sd.add_argument("--queue-depth", type=int, default=32, help="requests in flight (default 32)")
    sd.add_argument("--read-fraction", type=float, default=1.0, help="share of reads, 0 .. 1 (default 1)")
    sd.add_argument("--placement", choices=("internal", "host"), default=None,
                    help="who issues the requests: an accelerator on the flash channels (internal) or a host "
                    "behind the PCIe link (default: the file's accelerator:, internal)")
    sd.add_argument("--json", action="store_true", help="one line instead of an indented object")
    sd.set_defaults(func=cmd_ssd)
    rs = sub.add_parser("results", help="export a sweep store (one row per point, parameters as columns)")
    rs.add_argument("db", help="results .sqlite written by storeloop sweep")
    rs.add_argument("--sweep", help="only this sweep's rows")
    rs.add_argument("--format", choices=RESULT_FORMATS, default=None,
                    help="table (default), csv, json or parquet; to --out FILE, else to standard output")
    rs.add_argument("--out", metavar="FILE", help="write here instead of standard output")
    fmt = rs.add_mutually_exclusive_group()
    fmt.add_argument("--csv", metavar="FILE", help="short for --format csv --out FILE")
    fmt.add_argument("--parquet", metavar="FILE", help="short for --format parquet --out FILE")
    fmt.add_argument("--json", action="store_true", help="short for --format json")
    rs.add_argument("--all", action="store_true", help="include stale rows (inputs changed since) and the mappings")
    rs.add_argument("--rank", action="store_true", help="one row per design, ranked across the sweep's workloads "
                    "(weighted mean and worst ratio to each workload's best design)")
    rs.add_argument("--by", choices=("time_s", "energy_J"), default="time_s", help="with --rank: the objective")
    rs.add_argument("--order", choices=("weighted", "worst"), default="weighted",
                    help="with --rank: by the weighted mean (default) or the worst ratio to the best")
    rs.add_argument("--verify", action="store_true", help="check every row's checksum and SQLite's integrity; "
                    "list the rows changed since they were written (exit 2 if any)")
    rs.set_defaults(func=cmd_results)
    return p


def _warning_line(message, category, filename, lineno, line=None) -> str:
    """Warnings from storeloop and its plug-ins as one plain line (no source file and line)."""
    text = str(message)
    return (text if text.startswith("storeloop") else f"storeloop: warning: {text}") + "\n"


def main(argv: list[str] | None = None) -> int:
    import warnings

    warnings.formatwarning = _warning_line
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except StoreloopError as exc:
        print(f"storeloop: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:               # the reader left (| head): stop quietly
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except OSError as exc:                # a path the command cannot read or write (--out, --db, ...)
        where = exc.filename if exc.filename is not None else "a file"
        print(f"storeloop: {where}: {exc.strerror or exc}\n  allowed: a path whose folder exists and that "
              "is writable (an output file that is not a folder, an output folder that is not a file)",
              file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("storeloop: interrupted", file=sys.stderr)
        return 130
