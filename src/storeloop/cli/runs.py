"""The subcommands that run many points and keep them: sweep, results, plot, reproduce, system."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from storeloop import (best_points, claims_table, evaluate_system, load_sweep, load_system, mapped, parse_set,
                       rank_designs, read_results, render_results, run_sweeps, sweep_names, system_summary,
                       verify_store)
from storeloop.cli.render import ranking_summary, system_sweep_summary
from storeloop.errors import SpecError
from storeloop.studies import reproduce


def cmd_sweep(args: argparse.Namespace) -> int:
    sweeps = [load_sweep(spec) for spec in args.spec]
    dbs = [Path(args.db) if args.db else Path("results") / f"{s.name}.sqlite" for s in sweeps]
    seen: dict = {}
    for spec, s, db in zip(args.spec, sweeps, dbs):
        first = seen.setdefault((s.name, db.resolve()), spec)
        if first != spec:
            raise SpecError(f"the sweep name {s.name!r} is also {first}'s, and both would run into {db}", file=spec,
                            field="sweep.name", allowed="a name no other sweep of this command stores in the same store")
    _check_workers(args.workers)
    # several specs: one pool of workers for all (a sweep at a wave's end leaves no worker idle)
    every = run_sweeps(list(zip(sweeps, dbs)), workers=args.workers, dask=args.dask, progress=sys.stderr.isatty())
    for sweep, db, counts in zip(sweeps, dbs, every):
        _sweep_summary(args, sweep, db, counts)
    return 0


def _sweep_summary(args: argparse.Namespace, sweep, db: Path, counts: dict) -> None:
    """What ``storeloop sweep`` prints for one sweep it ran: the counts, the best point per workload
    (and scenario), a ranking across workloads, points left without a mapping; and its figures."""
    print(f"{sweep.name}: {counts['points']} points in the grid, {counts['done_before']} already in {db}, "
          f"{counts['excluded']} excluded by constraints, {counts['run']} run now "
          f"({counts['ok']} mapped, {counts['invalid']} without a result, errors stored"
          + "".join(f", {counts[k]} {k}" for k in ("error", "timeout", "interrupted") if counts[k]) + ")"
          + (f"; {counts['taken']} left to another sweep running on this store" if counts["taken"] else ""))

    names = ["+".join(p) for p, _ in sweep.parameters if "+".join(p) not in sweep.scenarios]
    df = read_results(db, sweep.name)
    if sweep.system_file is not None:
        system_sweep_summary(mapped(df), ["+".join(p) for p, _ in sweep.parameters])
    elif len(mapped(df)):
        print("each point: the mapper's mapping for its arch, energy and area priced by "
              + (f"{sweep.energy.ert} + {sweep.energy.art or 'no ART'}" if sweep.energy.ert else
                 "the energy plug-ins (each row's priced_by column says which)"))
    for _, row in ([] if sweep.system_file is not None else best_points(df).iterrows()):
        params = "".join(f"{n} = {row[n]}, " for n in names)
        where = "".join(f", {n} = {row[n]}" for n in sweep.scenarios)
        print(f"best for {row['workload']}{where} (fewest cycles, then area x energy): {params}{int(row['cycles']):,} "
              f"cycles (gap {100 * row['gap']:.2f}%), {row['energy_pJ'] / 1e12:.4g} J, "
              f"{row['on_chip_area_um2'] / 1e6:.4g} mm2 on chip")
        mine = mapped(df)
        mine = mine[(mine["workload"] == row["workload"]) & (mine["scenario"].fillna("{}") == row["scenario"])]
        unproven = int((mine["cycles_optimal"] == 0).sum())
        if unproven:
            print(f"  note: this pick rests on {unproven} point(s) whose cycles are not proven optimal "
                  f"(search stopped by its budget or time limit); more search could change it")
    if sweep.system_file is None and len(sweep.workloads) > 1 and names:
        ranking_summary(df[df["stale"] != 1], names)
    left = int(((df["status"] == "timeout") & (df["stale"] != 1)).sum())
    if left:
        print(f"{left} point(s) ended before any mapping (budget or time limit); raise mapper.budget or "
              f"mapper.time_limit and run the sweep again")
    if args.plot:
        _headless()
        from storeloop import plot_sweep  # deferred: matplotlib

        for path in plot_sweep(db, args.plot, sweep.name):
            print(f"wrote {path}")


def cmd_reproduce(args: argparse.Namespace) -> int:
    _check_workers(args.workers)
    args.out = args.out or ("results/reproduction-quick" if args.quick else "results/reproduction")
    if Path(args.out).exists() and not Path(args.out).is_dir():
        raise SpecError("is a file", file=args.out, field="--out", allowed="a folder for the store, figures and reproduction.md")
    _headless()
    done = reproduce.run(args.out, quick=args.quick, workers=args.workers, progress=sys.stderr.isatty())
    print(f"wrote {len(done['figures'])} figure files to {Path(args.out) / 'figures'}, {done['report']} "
          f"(store {done['store']}; " + ", ".join(f"{k} {v:.0f} s" for k, v in done["seconds"].items()) + ")")
    return 0


MAX_WORKERS = 256


def _check_workers(n: int) -> None:
    """Local worker processes: at least 1 and at most MAX_WORKERS (each is a Python process with
    NumPy and the mapper: thousands of them would exhaust the machine before the first point)."""
    if not 1 <= n <= MAX_WORKERS:
        raise SpecError(f"{n} workers", field="--workers", allowed=f"1 .. {MAX_WORKERS} local processes")


def _verify_store(path: str, sweep: str | None) -> int:
    """``results --verify``: SQLite's own integrity check, then every row against its checksum."""
    v = verify_store(path, sweep)
    bad, pages = v["changed"], v["integrity"]
    print(f"{path}: {v['checked']:,} row(s) checked, {len(bad):,} changed since written"
          + (f", {v['unchecked']:,} written before checksums (not checked)" if v["unchecked"] else "")
          + f"; SQLite integrity: {'ok' if pages == ['ok'] else '; '.join(pages[:3])}")
    for s, k in bad[:50]:
        print(f"  changed: sweep {s!r} key {k}")
    if len(bad) > 50:
        print(f"  ... and {len(bad) - 50:,} more")
    if bad or pages != ["ok"]:
        raise SpecError(f"{len(bad)} row(s) fail their checksum" + ("" if pages == ["ok"] else "; SQLite finds the "
                        "file damaged"), file=path,
                        allowed="run the sweep again: it re-runs the points whose rows fail their checksum")
    return 0


RESULT_FORMATS = ("table", "csv", "json", "parquet")


def cmd_results(args: argparse.Namespace) -> int:
    short = "csv" if args.csv else "parquet" if args.parquet else "json" if args.json else None
    if short and args.format and args.format != short:
        raise SpecError(f"--format {args.format} and --{short} ask for two formats", field="--format",
                        allowed="one of them")
    fmt, out = args.format or short or "table", args.out or args.csv or args.parquet
    if out and Path(out).is_dir():
        raise SpecError("is a folder", file=out, allowed="a file path to write")
    if fmt == "parquet" and out is None and sys.stdout.isatty():
        raise SpecError("Parquet is binary: it goes to a file or a pipe, not the terminal", field="--format",
                        allowed="--out FILE, or a redirection (> rows.parquet)")
    if args.verify:
        return _verify_store(args.db, args.sweep)
    df = read_results(args.db, args.sweep)          # any file that is not a store is refused there
    if args.sweep and not len(df):
        raise SpecError(f"no rows of a sweep named {args.sweep!r}", file=args.db, field="--sweep",
                        allowed=", ".join(sweep_names(args.db)) or "(the store is empty)")
    what = "rows"
    if args.rank:
        df = rank_designs(df[df["stale"] != 1] if "stale" in df else df, by=args.by, order=args.order)
        if not len(df):
            raise SpecError("no mapped points to rank", file=args.db, allowed="a store with ok rows")
        what = "ranked designs"
    elif not args.all:
        df = df[df["stale"] != 1].drop(columns=["mapping"]) if "stale" in df else df.drop(columns=["mapping"])
    text = render_results(df, fmt)
    if out is None:
        if isinstance(text, bytes):
            sys.stdout.buffer.write(text)
        else:
            sys.stdout.write(text)
        return 0
    Path(out).write_bytes(text if isinstance(text, bytes) else text.encode())
    print(f"wrote {len(df)} {what} to {out} ({fmt})")
    return 0


def _headless() -> None:
    """The CLI draws into files: matplotlib's Agg backend (the plot functions never choose one,
    so notebooks keep their inline backend)."""
    import matplotlib

    matplotlib.use("Agg")


def cmd_plot(args: argparse.Namespace) -> int:
    _headless()
    from storeloop import plot_sweep  # deferred: matplotlib

    paths = plot_sweep(args.db, args.out, args.sweep)
    if not paths:
        raise SpecError("no mapped points to draw", file=args.db)
    for path in paths:
        print(f"wrote {path}")
    return 0


def cmd_system(args: argparse.Namespace) -> int:
    overrides = [parse_set(text) for text in args.set or []]
    if args.scenario:
        base = load_system(args.system)
        if args.scenario not in base.scenarios:
            raise SpecError(f"no scenario named {args.scenario!r} in {args.system}", field="--scenario",
                            allowed=", ".join(base.scenarios) or "the file defines none")
        overrides = list(base.scenarios[args.scenario]) + overrides
    result = evaluate_system(load_system(args.system, overrides))
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(claims_table(result) if args.claims else system_summary(result))
    return 0
