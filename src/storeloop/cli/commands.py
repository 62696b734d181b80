"""One function per ``storeloop`` subcommand: read the arguments, call the library, print."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import yaml

from storeloop import (ExpressionError, Stream, arch_constraints, bytes_of, crosscheck_timeloop, crossover, evaluate,
                       export_timeloop, integer, load_arch, load_constraints, load_energy_table, load_mapping,
                       load_ssd, load_workload, load_workload_or_query, map as map_, map_query, mapper_options,
                       mapping_level_line, mapping_to_native, price, price_components, result_to_json,
                       ssd_energy_per_request, ssd_performance, timeloop_mapper_options, usable_cores)
from storeloop.cli.render import map_report, render_table
from storeloop.errors import MappingError, SpecError
from storeloop.ir import Arch
from storeloop.ir.query import Query
from storeloop.workloads import pir, rotation


def evaluate_args(args: argparse.Namespace):
    """(arch, workload, mapping, energy, result) of the command's files, or None (reason printed)
    when the mapping cannot run."""
    arch = load_arch(args.arch)
    workload = load_workload(args.workload)
    arch_constraints(arch, workload)     # a v0.4 arch's node constraints are read (checked) here too
    mapping = load_mapping(args.mapping, arch, workload)
    energy = energy_for(args, arch)
    try:
        return arch, workload, mapping, energy, evaluate(arch, workload, mapping, energy)
    except MappingError as exc:
        line = mapping_level_line(args.mapping, exc.level) if exc.level else None
        where = next((lv.where for lv in arch.levels if lv.name == exc.level), None) if exc.level else None
        print(f"storeloop: {args.mapping}{f':{line}' if line else ''}: invalid mapping: {exc.reason}"
              + (f"\n  the level: {where[0]}:{where[1]} ({exc.level}'s capacity and fanout)" if where and where[0] else ""),
              file=sys.stderr)
        return None


def cmd_model(args: argparse.Namespace) -> int:
    run = evaluate_args(args)
    if run is None:
        return 2
    arch, result = run[0], run[4]
    if args.json:
        print(json.dumps(result_to_json(result, arch), indent=1))
    else:
        print(render_table(result, arch, args.mapping))
    return 0


def cmd_energy(args: argparse.Namespace) -> int:
    arch = load_arch(args.arch)
    _, comps = price_components(arch)
    total = sum(c.estimate.area_um2 * c.instances for c in comps)
    # what the thesis counts as the accelerator: everything but the off-chip memories and interfaces
    on_chip = sum(c.estimate.area_um2 * c.instances for c in comps if not c.off_chip)
    if args.json:
        print(json.dumps({"components": [
            {"name": c.name, "class": c.cls, "instances": c.instances, "area_um2": c.estimate.area_um2,
             "leak_W": c.estimate.leak_W, "actions": c.estimate.actions, "source": f"{c.plugin}: {c.estimate.source}"}
            for c in comps], "total_area_um2": total, "on_chip_area_um2": on_chip}, indent=1))
        return 0
    for c in comps:
        acts = ", ".join(f"{k} {v:.6g} pJ" for k, v in c.estimate.actions.items())
        print(f"{c.name:<8} {c.cls:<8} x{c.instances:<3} area {c.estimate.area_um2:>12,.1f} um2  leak "
              f"{c.estimate.leak_W:.3g} W  {acts}")
        print(f"         source: {c.plugin}: {c.estimate.source}")
    off = [c.name for c in comps if c.off_chip]
    print(f"total area {total / 1e6:.6g} mm^2; on chip (without {', '.join(off) or 'nothing'}) {on_chip / 1e6:.6g} mm^2")
    return 0


def energy_for(args: argparse.Namespace, arch: Arch):
    """ERT/ART files when given, else the energy plug-ins."""
    if args.ert is None and args.art is None:
        return price(arch)
    return load_energy_table(arch, args.ert, args.art)


def cmd_export(args: argparse.Namespace) -> int:
    arch = load_arch(args.arch)
    workload = load_workload(args.workload)
    mapping = load_mapping(args.mapping, arch, workload) if args.mapping else None
    files, notes = export_timeloop(arch, workload, mapping, energy_for(args, arch), Path(args.out), strict=args.strict)
    for f in files:
        print(f)
    for n in notes:
        print(f"storeloop: note: {n}", file=sys.stderr)
    return 0


def cmd_crosscheck(args: argparse.Namespace) -> int:
    run = evaluate_args(args)
    if run is None:
        return 2
    arch, workload, mapping, energy, result = run
    rows, notes = crosscheck_timeloop(arch, workload, mapping, energy, result,
                                      Path(args.stats) if args.stats else None, Path(args.keep) if args.keep else None)
    for n in notes:
        print(f"note: {n}")
    bad = [r for r in rows if not r.ok]
    shown = rows if args.all else bad
    if shown:
        print(f"{'':<34} {'storeloop':>20} {'Timeloop':>20}")
        for r in shown:
            print(f"{r.what:<34} {r.storeloop:>20,g} {r.timeloop:>20,g}{'' if r.ok else '   <-- differs'}")
    print(f"{len(rows) - len(bad)} of {len(rows)} numbers agree" + ("" if not bad else f"; {len(bad)} differ"))
    return 1 if bad else 0


def cmd_map(args: argparse.Namespace) -> int:
    if args.time_limit is not None and args.time_limit == 0:
        args.time_limit = None                     # 0: no limit
    given = {"objective": args.objective, "algorithm": args.algorithm, "threads": args.threads, "victory": args.victory}
    if args.mapper:                                # a Timeloop mapper config fills what the flags leave open

        for k, v in timeloop_mapper_options(args.mapper).items():
            given[k] = v if given[k] is None else given[k]
    if given["threads"] is None and args.budget is None:
        given["threads"] = usable_cores()          # timeloop-mapper's default too
    if given["victory"] is not None and given["victory"] < 1:
        raise SpecError(f"{given['victory']}", field="--victory", allowed="1 or more non-improving samples")
    opts = mapper_options(objective=given["objective"], algorithm=given["algorithm"], time_limit=args.time_limit,
                   budget=args.budget, energy_gap=args.energy_gap, threads=given["threads"],
                   search_layout=args.search_layout, uneven=args.uneven,
                   imperfect=args.imperfect)                 # every flag checked before any work
    arch = load_arch(args.arch)
    if args.out and Path(args.out).is_dir():
        raise SpecError("is a folder", file=args.out, field="--out", allowed="a file path for the mapping YAML")
    workload = load_workload_or_query(args.workload)
    if isinstance(workload, Query):
        return _map_query(args, arch, opts, workload)
    energy = energy_for(args, arch)
    constraints = load_constraints(args.constraints, arch, workload) if args.constraints else None
    seeds = [load_mapping(f, arch, workload) for f in args.seed_mapping or []]
    out = map_(arch, workload, energy, options=opts, constraints=constraints,
                       seed=args.seed, victory=given["victory"] or 500, progress=not args.json, seeds=seeds,
                       converge=not args.no_converge)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(f"# written by storeloop map {args.arch} {args.workload}\n"
                                  + yaml.safe_dump(mapping_to_native(out.mapping, arch, workload), sort_keys=False))
    s = out.search
    if args.json:
        print(json.dumps({**result_to_json(out.result, arch), "search": s}, indent=1))
        return 0
    print(map_report(out, arch, workload, args.out))
    if args.out:
        print(f"wrote {args.out}")
    return 0


def cmd_crossover(args: argparse.Namespace) -> int:
    """Where the bound of the best mapping moves along one arch parameter, by bisection."""
    def told(value: str, probe: tuple) -> None:
        if not args.json:
            print(f"  {args.path} = {value}: {probe[1]:,} cycles, bound by {probe[0]}", file=sys.stderr)

    out = crossover(args.arch, load_workload(args.workload), args.path, args.low, args.high,
                    tolerance=args.tolerance, ert=args.ert, art=args.art, on_probe=told)
    if args.json:
        print(json.dumps(out, indent=1))
    elif not out["moves"]:
        print(f"the bound does not move between {args.low} and {args.high}: {out['bound_low']} at both ends "
              f"({out['probes']} maps)")
    else:
        print(f"the bound moves from {out['bound_low']} to {out['bound_high']} between {args.path} = {out['low']} "
              f"and {out['high']} (within {100 * args.tolerance:g} %; {out['probes']} maps, each the mapper's best "
              "mapping)")
    return 0


def _map_query(args: argparse.Namespace, arch: Arch, opts, query) -> int:
    """``storeloop map ARCH QUERY.yaml``: every einsum of the query mapped at its best home."""
    for flag in ("constraints", "seed_mapping"):
        if getattr(args, flag):
            raise SpecError(f"--{flag.replace('_', '-')} applies to one einsum, not to a query",
                            field=f"--{flag.replace('_', '-')}", allowed="map the einsum's own workload file")
    energy = energy_for(args, arch)
    out = map_query(arch, query, energy, progress=sys.stderr.isatty() and not args.json, options=opts,
                    converge=not args.no_converge)
    if args.out:
        base = Path(args.out)
        base.parent.mkdir(parents=True, exist_ok=True)
        for e, p in zip(query.einsums, out.parts):
            path = base.with_name(f"{base.stem}-{e.workload.name}{base.suffix}")
            path.write_text(f"# written by storeloop map {args.arch} {args.workload} (einsum {e.workload.name})\n"
                            + yaml.safe_dump(mapping_to_native(p.mapping, arch, e.workload), sort_keys=False))
            print(f"wrote {path}")
    d = out.to_dict(arch)
    if args.json:
        print(json.dumps(d, indent=1))
        return 0
    clock = arch.clock_hz or 1.0
    print(f"{'einsum':<28} {'home':<11} {'MACs':>16} {'cycles':>16} {'share':>7} {'energy J':>10}  bound by, search")
    for e in d["einsums"]:
        home = e["home"] + ("" if e["output_home"] == e["home"] else f">{e['output_home']}") \
            + "".join(f" +{level}" for level in e["in_place"].values())
        print(f"{e['name']:<28} {home:<11} {e['macs']:>16,} {e['cycles']:>16,} {e['cycles'] / d['cycles']:>7.2%} "
              f"{e['energy_J']:>10.4g}  {e['bound_by']}, {e['stopped']}{' (proven)' if e['optimal'] else ''}")
    for m in d["moves"]:
        print(f"{'move ' + m['tensor']:<28} {m['source'] + '->' + m['target']:<11} {'':>16} {m['cycles']:>16,} "
              f"{m['cycles'] / d['cycles']:>7.2%} {m['energy_pJ'] / 1e12:>10.4g}  {m['words_read']:,} words read, "
              f"{m['words_written']:,} written")
    print(f"{'query':<28} {'':<11} {sum(e['macs'] for e in d['einsums']):>16,} {d['cycles']:>16,} {'':>7} "
          f"{d['energy_J']:>10.4g}  {d['claim']}")
    if any(e["output_home"] != e["home"] for e in d["einsums"]):
        print("home A>B: the einsum's tensors live at A, the output it writes at B (bypassing the levels between)")
    for e in d["einsums"]:
        if e["in_place"]:
            where = ", ".join(f"{t} at {lv}" for t, lv in e["in_place"].items())
            print(f"{e['name']} reads {where} where it was written (home A +C: read at C, bypassing the levels "
                  f"between)")
    print(f"time {d['cycles'] / clock:.6g} s at {clock / 1e9:g} GHz, einsums run one after another; "
          f"the first einsum takes {d['einsums'][0]['cycles'] / d['cycles']:.2%} of the cycles and "
          f"{d['einsums'][0]['energy_J'] / d['energy_J']:.2%} of the energy")
    return 0


def _scheme_params(args: argparse.Namespace, fn) -> dict:
    import inspect

    allowed = {n: p.default for n, p in inspect.signature(fn).parameters.items() if p.kind == p.KEYWORD_ONLY
               or (n not in ("db_bytes",) and p.default is not p.empty)}
    out = {}
    for item in args.param or []:
        key, sep, value = item.partition("=")
        if not sep or key not in allowed:
            raise SpecError(f"unknown parameter {item!r} for {args.scheme}", field="--param",
                            allowed=", ".join(f"{k}=<int> (default {v})" for k, v in allowed.items()) or "none")
        try:
            out[key] = integer(value)
        except ExpressionError as exc:
            raise SpecError(f"{key}: {exc}", field="--param", allowed="a positive integer") from None
        if out[key] < 1:
            raise SpecError(f"{key} = {out[key]} must be at least 1", field="--param", allowed="a positive integer")
    return out


def cmd_workload(args: argparse.Namespace) -> int:
    schemes = {**pir.SCHEMES, **rotation.SCHEMES}
    if args.scheme not in schemes:
        raise SpecError(f"unknown scheme {args.scheme!r}", file="command line", field="scheme",
                        allowed=", ".join(schemes))
    fn = schemes[args.scheme]
    if args.query and args.scheme not in pir.QUERIES:
        raise SpecError(f"a whole query is generated for the PIR schemes; {args.scheme} is one einsum (drop --query)",
                        field="--query", allowed=", ".join(pir.QUERIES))
    params = _scheme_params(args, pir.QUERIES[args.scheme] if args.query else fn)
    db_bytes = None
    if args.scheme in pir.SCHEMES:
        if args.db_size is None:
            raise SpecError(f"{args.scheme} needs --db-size", field="--db-size", allowed="a size such as 64GiB")
        try:
            db_bytes = bytes_of(args.db_size)
        except ExpressionError as exc:
            raise SpecError(str(exc), field="--db-size", allowed="a size such as 64GiB, 512 MiB or 10GB") from None
        if not float(db_bytes).is_integer():
            raise SpecError(f"{args.db_size!r} is not a whole number of bytes", field="--db-size")
        db_bytes = int(db_bytes)
        try:
            # --query: the whole query (its own parameters); else the scheme's passes
            query = pir.QUERIES[args.scheme](db_bytes, **params) if args.query else None
            workloads = fn(db_bytes, **params) if query is None else []
        except SpecError as exc:             # the scheme's db_size is this command's --db-size
            if exc.field != "db_size":
                raise
            raise SpecError(exc.message, field="--db-size", allowed=exc.allowed) from None
        if query is not None:
            text = (f"# One {args.scheme} query, every einsum of its answer (storeloop.workloads.pir.QUERIES)\n"
                    f"# storeloop workload {args.scheme} --db-size {args.db_size} --query"
                    + "".join(f" --param {p}" for p in args.param or [])
                    + "\n" + yaml.safe_dump(query, sort_keys=False, default_flow_style=None, width=120))
            if args.out:
                Path(args.out).write_text(text)
                print(f"wrote {args.out}")
            else:
                print(text, end="")
            return 0
    else:
        workloads = fn(**params)
    einsums = [{"name": w.name, "einsum": w.einsum, "bounds": w.bounds_dict(),
                "bits": {t.name: t.bits for t in w.tensors}, "macs": w.macs,
                "tensor_elements": pir.tensor_elements(w)} for w in workloads]
    if args.out:
        # every pass: the first at --out, pass i at <stem>-pass<i><suffix> beside it
        out = Path(args.out)
        source = " ".join(["storeloop workload", args.scheme] + ([f"--db-size {args.db_size}"] if db_bytes else [])
                          + [f"--param {p}" for p in args.param or []])
        doc_line = (fn.__doc__ or "").strip().splitlines()[0]
        for i, w in enumerate(workloads, 1):
            path = out if i == 1 else out.with_name(f"{out.stem}-pass{i}{out.suffix}")
            doc = {"workload": {"name": w.name, "einsum": w.einsum, "bounds": w.bounds_dict(), "bits": 64,
                                "source": source}}
            path.write_text(f"# {doc_line}\n# pass {i} of {len(workloads)} ({w.name}); formulas and references: "
                            f"{fn.__module__}.{fn.__name__}\n" + yaml.safe_dump(doc, sort_keys=False, default_flow_style=None))
            print(f"wrote {path}" + (f" (pass {i} of {len(workloads)})" if len(workloads) > 1 else ""))
    if args.json:
        print(json.dumps({"scheme": args.scheme, "db_size_bytes": db_bytes, "einsums": einsums}, indent=1))
    elif not args.out:
        for e in einsums:
            print(f"{e['name']}: {e['einsum']}")
            print("  bounds " + " ".join(f"{k}={v}" for k, v in e["bounds"].items()))
            print(f"  MACs {e['macs']:,}; elements " + ", ".join(f"{k} {v:,}" for k, v in e["tensor_elements"].items()))
    return 0


def cmd_ssd(args: argparse.Namespace) -> int:
    ssd = load_ssd(args.ssd)
    try:
        size = bytes_of(args.request_size)
    except ExpressionError as exc:
        raise SpecError(str(exc), field="--request-size", allowed="a size such as 4KiB or 128 KiB") from None
    if size < 1 or size != int(size):
        raise SpecError(f"{args.request_size!r} is not a whole number of bytes >= 1", field="--request-size")
    if args.queue_depth < 1 or args.queue_depth > 1 << 20:
        raise SpecError(f"{args.queue_depth}", field="--queue-depth", allowed="1 .. 1048576 requests in flight")
    if not 0.0 <= args.read_fraction <= 1.0:
        raise SpecError(f"{args.read_fraction}", field="--read-fraction", allowed="a fraction in 0 .. 1")
    stream = Stream(int(size), args.pattern, args.queue_depth, args.read_fraction)
    placement = args.placement or ssd.accelerator
    perf = ssd_performance(ssd, stream, placement)
    energy = ssd_energy_per_request(ssd, stream, placement)
    out = {**perf.as_dict(), "request_bytes": int(size), "pattern": args.pattern, "queue_depth": args.queue_depth,
           "read_fraction": args.read_fraction,
           "energy_J_per_byte": sum(energy.values()) / size, "energy_J_per_request": energy,
           "energy_source": ssd.energy.source}
    print(json.dumps(out, indent=None if args.json else 1))
    return 0
