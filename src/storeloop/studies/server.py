"""The design studies of a whole PIR server (issue 29) that ``storeloop reproduce`` runs after the
thesis's chapter 6: one design for a workload set, batched queries, OnionPIR's dimension choice and
the levels that need double buffering.

Each study runs its sweeps or searches, draws its figure (:mod:`storeloop.studies.server_figures`) and returns
its section of ``reproduction.md``; every number in a section is read from the runs, never typed in.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import yaml

from storeloop import evaluate, load_arch, load_mapping, load_workload, map as map_
from storeloop.energy import price
from storeloop.formats.quantities import bytes_of
from storeloop.formats.query import query_from_native
from storeloop.formats.yamlio import load, loads
from storeloop.mapper.options import DEFAULT_BUDGET, SAFETY_TIME_LIMIT
from storeloop.mapper.query import map_query
from storeloop.sweeps import load_sweep, mapped, rank_designs, read_results, run_sweeps
from storeloop.workloads.pir import onionpir_first_dimension, onionpir_query

UNITS = "levels.SRAM.instances+levels.RF.instances+compute.instances"
THESIS = {"levels.SRAM.capacity": "4 KiB", "levels.RF.capacity": "32 words", UNITS: 2}
BATCHES, BATCH_UNITS = (1, 2, 4, 8, 16, 32), [1, 2, 4, 8, 16, 32, 64]
FIRST_DIMS = (64, 128, 256, 512, 1024, 2048)
# links a request may be sent to the server over, with where the seeds run systems at that rate
LINKS = ((10e9, "10 Gb/s", "seeds/000_494e5e9dce05a72f.txt:21 (smart storage at 10 Gbps line rate)"),
         (100e9, "100 Gb/s", "seeds/003_2983a4cb5cfc2dc7.txt:18 (COPA, 100 Gb/s line rate)"))
# ``quick``: subsets of the same studies (every figure in a few seconds)
QUICK = {"set": {"levels.SRAM.capacity": ["2 KiB", "4 KiB"], "levels.RF.capacity": ["16 words", "32 words"],
                 UNITS: [1, 2]}, "set_sizes": None, "batches": (1, 2, 4, 8), "units": [1, 2, 4, 8],
         "first_dims": FIRST_DIMS, "db_bytes": 4 * 2**30}


def run_spec(spec: dict, folder: Path, db: Path, workers: int, progress: bool, ran: dict | None = None):
    """A sweep given as a ``sweep:`` dict (paths absolute), written to ``folder/<name>.sweep.yaml``
    and run into ``db``: (that file, the sweep's rows). ``ran``: what :func:`run_specs` returned
    (a sweep it ran is not run again)."""
    if ran is not None and spec["name"] in ran:
        return ran[spec["name"]]
    return run_specs([spec], folder, db, workers, progress)[spec["name"]]


def run_specs(specs: list[dict], folder: Path, db: Path, workers: int, progress: bool) -> dict:
    """Several sweeps as :func:`run_spec`, in one pool (:func:`storeloop.sweeps.run.run_sweeps`: one
    sweep's waves overlap the others' points): name -> (file, rows)."""
    files = []
    for spec in specs:
        f = folder / f"{spec['name']}.sweep.yaml"
        f.write_text(yaml.safe_dump({"sweep": spec}, sort_keys=False))
        files.append(f)
    run_sweeps([(load_sweep(f), db) for f in files], workers=workers, progress=progress)
    return {spec["name"]: (f, read_results(db, spec["name"])) for spec, f in zip(specs, files)}


def repository_sweep(name: str, root: Path) -> dict:
    """``sweeps/<name>.yaml`` of the repository as a ``sweep:`` dict, its paths made absolute."""
    s = dict(load(root / f"sweeps/{name}.yaml")["sweep"])
    s["arch"] = str((root / "sweeps" / s["arch"]).resolve())
    s["workloads"] = [str((root / "sweeps" / w).resolve()) if isinstance(w, str) else
                      {**w, "file": str((root / "sweeps" / w["file"]).resolve())} for w in s["workloads"]]
    return s


def _design(row) -> str:
    return f"{int(row[UNITS])} x (SRAM {row['levels.SRAM.capacity']}, RF {row['levels.RF.capacity']}, ModMAC)"


def workload_set_spec(root: Path, quick: bool = False) -> dict:
    """Study 3's sweep (``sweeps/workload-set.yaml``; ``quick``: a subset) as a ``sweep:`` dict."""
    spec = repository_sweep("workload-set", root)
    if quick:
        spec["name"], spec["parameters"] = "quick-workload-set", QUICK["set"]
        if QUICK["set_sizes"]:
            spec["workloads"] = [w for w in spec["workloads"] if Path(w["file"] if isinstance(w, dict) else w).stem
                                 .split("-")[-1] in QUICK["set_sizes"]]
    return spec


def workload_set(out: Path, root: Path, db: Path, *, quick: bool = False, workers: int = 2,
                 progress: bool = False, ran: dict | None = None) -> tuple[list[str], list[Path]]:
    """Study 3: OnionChopper variants ranked across every scheme at three database sizes
    (``sweeps/workload-set.yaml``)."""
    from storeloop.studies import server_figures as F  # deferred: matplotlib
    from storeloop.plots.common import _scheme_and_bytes, save  # deferred: matplotlib
    spec = workload_set_spec(root, quick)
    _, df = run_spec(spec, out.parent, db, workers, progress, ran)
    ok = mapped(df)
    ranked = rank_designs(ok)
    ranked = ranked[ranked["complete"]].reset_index(drop=True)
    best = ranked.iloc[0]
    is_thesis = (ranked[list(THESIS)] == [str(v) if k != UNITS else v for k, v in THESIS.items()]).all(axis=1)
    thesis = ranked[is_thesis].iloc[0] if is_thesis.any() else None
    # the pick is proven if every design as fast has an on-chip area x (weighted) energy lower bound above it
    lb = ok.assign(lb=ok["lower_bound_energy_pJ"] * ok["weight"].fillna(1) / 1e12,
                   w=ok["weight"].fillna(1)).groupby("params")[["lb", "w"]].sum()
    ranked["lb_J"] = [lb.loc[p, "lb"] / lb.loc[p, "w"] for p in ranked["params"]]
    same = (ranked["weighted_time_s"] - best["weighted_time_s"]).abs() <= 1e-12 * best["weighted_time_s"]
    rivals = ranked.iloc[1:][same.iloc[1:]]
    ae = best["on_chip_area_mm2"] * best["weighted_energy_J"]
    beaten = int((rivals["on_chip_area_mm2"] * rivals["lb_J"] < ae).sum())
    proven = bool(ranked["all_proven"].all()) and not beaten
    # the thesis's ch. 6.5 observation on the design best across the set
    onion = ok[(ok["params"] == best["params"]) & ok["workload"].str.startswith("onionpir-")].copy()
    onion["bytes"] = [_scheme_and_bytes(w)[1] for w in onion["workload"]]
    onion["GBps"] = onion["bytes"] / onion["time_s"] / 1e9
    small, large = onion.loc[onion["bytes"].idxmin()], onion.loc[onion["bytes"].idxmax()]
    one = ranked[ranked[UNITS] == 1]
    fig = F.workload_set(ranked, ok, best, thesis)
    paths = save(fig, out / "study-workload-set")
    n = int(ranked["workloads"].max())
    lines = [f"# One design for a workload set (`{spec['name']}`, docs/designs-across-workloads.md)", "",
             f"{len(ranked)} OnionChopper variants (SRAM size x RF depth x units) on {n} workloads: every scheme at "
             f"{', '.join(sorted({w.split('-')[-1].removesuffix('.yaml') for w in ok['workload']}, key=bytes_of))}, "
             "equal weights. Ranked by the weighted mean time per query, then on-chip area x weighted energy (the "
             "thesis's rule across the set); the worst ratio is to each workload's best design.", "",
             "| rank | design | mean time per query | mean energy per query | worst ratio to the best | on chip |",
             "|---|---|---|---|---|---|"]
    shown = list(ranked.index[:3]) + ([int(thesis.name)] if thesis is not None and thesis.name >= 3 else []) + \
        ([int(one.index[0])] if len(one) else [])
    for i in dict.fromkeys(shown):
        r = ranked.loc[i]
        lines.append(f"| {r['rank']} | {_design(r)} | {r['weighted_time_s']:.4f} s | {r['weighted_energy_J']:.3f} J | "
                     + ("1 (the best on every workload)" if r["worst_ratio"] == 1 else
                        f"{r['worst_ratio']:.3f} ({r['worst_workload'].removesuffix('.yaml')})")
                     + f" | {r['on_chip_area_mm2']:.3f} mm² |")
    tied = ranked[same]
    binds = sorted(set(ok.loc[ok["params"].isin(tied["params"]), "bound_by"]))
    lines += ["", f"Best across the set: {_design(best)}; {len(tied)} design(s) reach its mean time (bound by "
              f"{' or '.join(binds)} on every workload), so on-chip area x energy decides. "
              + ("The pick is proven: every point's cycles are proven and every design as fast has an area x "
                 "energy lower bound above the pick's area x energy." if proven else
                 f"The pick is not proven ({beaten} design(s) as fast could still beat it on area x energy, or some "
                 "cycles are unproven); more search time could change it.")]
    if thesis is not None:
        lines.append(f"The thesis's pick, {_design(thesis)}, ranks {thesis['rank']}: "
                     f"{100 * (thesis['weighted_time_s'] / best['weighted_time_s'] - 1):+.2f} % time, "
                     f"{100 * (thesis['on_chip_area_mm2'] / best['on_chip_area_mm2'] - 1):+.2f} % on-chip area.")
    if len(one):
        o = ranked.loc[one.index[0]]
        lines.append(f"With one unit the best design is {100 * (o['weighted_time_s'] / best['weighted_time_s'] - 1):+.1f} "
                     f"% slower on average and {o['worst_ratio']:.3f}x the best on {o['worst_workload']}, at "
                     f"{100 * (o['on_chip_area_mm2'] / best['on_chip_area_mm2'] - 1):+.0f} % area.")
    lines += ["", f"Thesis ch. 6.5 on this design: OnionPIR at {small['workload'].split('-')[-1][:-5]} runs at "
              f"{small['GBps']:.2f} GB/s, {100 * small['GBps'] / large['GBps']:.0f} % of its "
              f"{large['workload'].split('-')[-1][:-5]} speed ({large['GBps']:.2f} GB/s); the thesis: "
              "\"still 89 % of the maximum speed\".", "", "![workload set](figures/study-workload-set.png)", ""]
    return lines, paths


def batching_spec(out: Path, root: Path, quick: bool = False) -> dict:
    """Study 4's sweep as a ``sweep:`` dict, its workloads (one per batch size) written to
    ``out.parent/batched-workloads``."""
    batches = QUICK["batches"] if quick else BATCHES
    folder = (out.parent / "batched-workloads").resolve()       # the sweep file reads absolute paths
    folder.mkdir(parents=True, exist_ok=True)
    files = []
    for b in batches:
        w = onionpir_first_dimension(2**30, batch=b)
        f = folder / f"onionpir-1GiB-batch{b}.yaml"
        # the header names the function as it was first written: its bytes are part of the stored points' keys
        f.write_text("# storeloop workload onionpir --db-size 1GiB --param batch=%d (storeloop.studies.batching)\n" % b
                     + yaml.safe_dump({"workload": {"name": w.name, "einsum": w.einsum, "bounds": w.bounds_dict(),
                                                    "bits": 64}}, sort_keys=False, default_flow_style=None))
        files.append(str(f))
    units = QUICK["units"] if quick else BATCH_UNITS
    return {"name": ("quick-" if quick else "") + "batching", "arch": str(root / "arch/onionchopper.yaml"),
            "workloads": files, "parameters": {UNITS: units, "levels.SRAM.capacity": ["4 KiB", "16 KiB"]}}


def batching(out: Path, root: Path, db: Path, *, quick: bool = False, workers: int = 2,
             progress: bool = False, ran: dict | None = None) -> tuple[list[str], list[Path]]:
    """Study 4 (thesis ch. 7): ``batch`` OnionPIR queries share one pass over a 1 GiB database; the best
    design per batch size (units x SRAM size) and where the Disk stops binding the thesis's design."""
    from storeloop.studies import server_figures as F  # deferred: matplotlib
    from storeloop.plots.common import save  # deferred: matplotlib
    batches = QUICK["batches"] if quick else BATCHES
    spec = batching_spec(out, root, quick)
    units = spec["parameters"][UNITS]
    d = mapped(run_spec(spec, out.parent, db, workers, progress, ran)[1]).copy()
    d["batch"] = [int(w.removesuffix(".yaml").split("batch")[-1]) for w in d["workload"]]
    d["units"] = d[UNITS].astype(int)
    d["time_per_query_s"], d["energy_per_query_J"] = d["time_s"] / d["batch"], d["energy_J"] / d["batch"]
    d["area_energy"] = d["on_chip_area_mm2"] * d["energy_J"]
    best = d.sort_values(["batch", "cycles", "area_energy"]).groupby("batch").head(1).set_index("batch")
    thesis = d[(d["units"] == 2) & (d["levels.SRAM.capacity"] == "4 KiB")].set_index("batch")
    # per batch, the fewest units that keep the pass Disk-bound (as fast as the Disk allows)
    disk = d[d["bound_by"] == "Disk"].groupby("batch")["units"].min()
    fig = F.batching(best, thesis)
    paths = save(fig, out / "study-batching")
    lines = [f"# Batched queries (`{spec['name']}`, docs/batching.md)", "",
             f"OnionPIR 1 GiB, `batch` queries sharing one pass over the database (M = batch: each query its own "
             f"A and C, the database B read once), on OnionChopper with {', '.join(map(str, units))} units x SRAM "
             "4 or 16 KiB (RF 32 words). Best design per batch: fewest cycles, then on-chip area x energy.", "",
             "| batch | thesis design: per query | bound by | best design | per query | energy per query | bound by |"
             " fewest units Disk-bound | search |", "|---|---|---|---|---|---|---|---|---|"]
    for b in batches:
        t, r = thesis.loc[b], best.loc[b]
        lines.append(f"| {b} | {1e3 * t['time_per_query_s']:.2f} ms, {t['energy_per_query_J']:.3f} J | {t['bound_by']} | "
                     f"{int(r['units'])} units, SRAM {r['levels.SRAM.capacity']} | {1e3 * r['time_per_query_s']:.2f} ms | "
                     f"{r['energy_per_query_J']:.3f} J | {r['bound_by']} | {disk.get(b, 'none of the grid')} | "
                     f"{'proven' if r['cycles_optimal'] == 1 else r['stopped']} |")
    first = next((b for b in batches if thesis.loc[b, "bound_by"] != "Disk"), None)
    lines += ["", ("The thesis's design (2 units) is Disk-bound at every batch size of the grid." if first is None else
                   f"The thesis's design stops being Disk-bound at batch {first} (bound by "
                   f"{thesis.loc[first, 'bound_by']}); its time per query then stays at "
                   f"{1e3 * thesis.loc[batches[-1], 'time_per_query_s']:.2f} ms however many queries share the pass.")
              + f" With enough units the time per query falls from {1e3 * best.loc[batches[0], 'time_per_query_s']:.2f}"
              f" ms (batch {batches[0]}) to {1e3 * best.loc[batches[-1], 'time_per_query_s']:.2f} ms "
              f"(batch {batches[-1]}), and the energy per query from {best.loc[batches[0], 'energy_per_query_J']:.3f} J "
              f"to {best.loc[batches[-1], 'energy_per_query_J']:.3f} J: the database's read is shared.", "",
              "![batching](figures/study-batching.png)", ""]
    return lines, paths


def dimension_choice(out: Path, root: Path, *, quick: bool = False) -> tuple[list[str], list[Path]]:
    """Study 2: OnionPIR's first dimension (and so its number of dimensions) for a 64 GiB database
    (4 GiB with ``quick``), each whole query mapped by :func:`storeloop.mapper.query.map_query`."""
    from storeloop.studies import server_figures as F  # deferred: matplotlib
    from storeloop.plots.common import save  # deferred: matplotlib
    db_bytes = QUICK["db_bytes"] if quick else 64 * 2**30
    size = f"{db_bytes / 2**30:g} GiB"
    arch = load_arch(root / "arch/onionchopper.yaml")
    energy = price(arch)[0]
    rows = []
    for j in QUICK["first_dims"] if quick else FIRST_DIMS:
        query = query_from_native(loads(yaml.safe_dump(onionpir_query(db_bytes, first_dim=j)), f"first_dim={j}"))
        r = map_query(arch, query, energy, budget=DEFAULT_BUDGET, time_limit=SAFETY_TIME_LIMIT)
        first = r.parts[0].result
        entries = sum(e.workload.tensor_elements(e.workload.tensor("A")) for e in query.einsums) * 8
        rows.append({"first_dim": j, "einsums": len(query.einsums), "cycles": r.cycles, "time_s": r.cycles / arch.clock_hz,
                     "energy_J": r.energy_pJ / 1e12, "first_s": first.cycles / arch.clock_hz,
                     "later_s": sum(p.result.cycles for p in r.parts[1:]) / arch.clock_hz,
                     "moves_s": sum(m.cycles for m in r.moves) / arch.clock_hz, "entries_bytes": entries,
                     "claim": r.claim})
        for rate, label, _ in LINKS:            # the query plus sending its entries, uncompressed, first
            rows[-1][f"with request at {label}"] = rows[-1]["time_s"] + 8 * entries / rate
    base = next(r for r in rows if r["first_dim"] == 256)
    best = min(rows, key=lambda r: (r["cycles"], r["energy_J"]))
    fig = F.dimension_choice(rows, size, [label for _, label, _ in LINKS])
    paths = save(fig, out / "study-dimension-choice")
    lines = [f"# OnionPIR's dimension choice (docs/query.md), {size}", "",
             "Each whole query (`storeloop workload onionpir --query --param first_dim=J`, later dimensions of 4) "
             "mapped on OnionChopper (`storeloop map`), energy from the plug-ins. The last columns add the time to "
             "send the query's entries as the accelerator reads them (uncompressed) over a link: "
             + "; ".join(f"{label}, as in {src}" for _, label, src in LINKS) + ".", "",
             "| first dimension | einsums | query cycles | vs 256 | energy | first dimension's share | query entries "
             "read (expanded) | " + " | ".join(f"query + request at {label}" for _, label, _ in LINKS) + " | search |",
             "|---|---|---|---|---|---|---|" + "---|" * len(LINKS) + "---|"]
    for r in rows:
        lines.append(f"| {r['first_dim']} | {r['einsums']} | {r['cycles']:,} | "
                     f"{'' if r is base else f'{100 * (r['cycles'] / base['cycles'] - 1):+.2f} %'} | "
                     f"{r['energy_J']:.2f} J | {100 * r['first_s'] / r['time_s']:.2f} % | "
                     f"{r['entries_bytes'] / 2**20:.1f} MiB | "
                     + " | ".join(f"{r[f'with request at {label}']:.4f} s" for _, label, _ in LINKS)
                     + f" | {r['claim']} |")
    lines += ["", f"The fastest query has a first dimension of {best['first_dim']}: "
              f"{100 * (best['cycles'] / base['cycles'] - 1):+.2f} % against OnionPIR's 256, at "
              f"{best['entries_bytes'] / base['entries_bytes']:.1f}x the query entries read."]
    for _, label, _ in LINKS:
        key = f"with request at {label}"
        fast, second = sorted(rows, key=lambda r: r[key])[:2]
        lines.append(f"Sending those entries first over {label}, the fastest is {fast['first_dim']}"
                     + (f" ({100 * (fast[key] / base[key] - 1):+.2f} % against 256)" if fast is not base else
                        f", OnionPIR's choice ({second['first_dim']} next, {100 * (second[key] / base[key] - 1):+.2f} %)")
                     + ".")
    lines += ["OnionPIR compresses its request (the seeds do not give the form), so these are the upper end of "
              "the request's cost; the server-only column is the lower end.", "",
              "![dimension choice](figures/study-dimension-choice.png)", ""]
    return lines, paths


def buffering(root: Path) -> list[str]:
    """Study 5: which levels the thesis's mapping and the mapper's need double-buffered on
    OnionChopper (OnionPIR 64 GiB), and what a second copy of each costs (area and leakage from the
    energy plug-ins); the thesis assumes every level double-buffered (ch. 7)."""
    arch = load_arch(root / "arch/onionchopper.yaml")
    wl = load_workload(root / "workloads/onionpir-64GiB.yaml")
    table, comps = price(arch)
    leak = {c.name: c.estimate.leak_W for c in comps}
    results = {"thesis's mapping": evaluate(arch, wl, load_mapping(root / "mappings/onionchopper-thesis-best.yaml",
                                                                    arch, wl), table),
               "storeloop map": map_(arch, wl, table, budget=DEFAULT_BUDGET, time_limit=SAFETY_TIME_LIMIT).result}
    on_chip = next(iter(results.values())).on_chip_area_um2
    lines = ["# Buffering (docs/buffering.md)", "",
             "OnionPIR 64 GiB on OnionChopper. Timeloop's model, and the thesis's figures, let every level fill while "
             "it is used at no cost; storeloop prices both ways: `buffering: double` charges a second copy, "
             "`buffering: single` serializes each fill with the use before it. Per level: the run's cycles were "
             "it single-buffered (the other levels as they are), and the second copy's cost.", "",
             "The last but two column is the mapper's own search with the level single-buffered (its leaves "
             "serialize fills as the model does; `stopped` says whether its cycles are proven).", "",
             "| level | " + " | ".join(f"{k}: single-buffered" for k in results)
             + " | `storeloop map` searching it single-buffered | second copy: area | leakage |",
             "|---|" + "---|" * len(results) + "---|---|---|"]
    best = results["storeloop map"].cycles
    for L, lvl in enumerate(arch.levels[1:], 1):
        area = table.storage[lvl.name].area_um2 * lvl.instances
        cells = []
        for r in results.values():
            b = r.buffering[lvl.name]
            cells.append(f"{b['single_cycles']:,} cycles ({b['single_cycles'] / r.cycles - 1:+.1%})"
                         + (", needs double" if b["needs_double"] else ""))
        single = dataclasses.replace(arch, levels=tuple(dataclasses.replace(x, buffering="single") if i == L else x
                                                        for i, x in enumerate(arch.levels)))
        found = map_(single, wl, table, budget=DEFAULT_BUDGET, time_limit=SAFETY_TIME_LIMIT)
        cells.append(f"{found.result.cycles:,} ({found.result.cycles / best - 1:+.1%}), {found.search['stopped']}")
        where = "off chip" if lvl.off_chip else f"{area / 1e6:.4f} mm² ({area / on_chip:+.2%} on chip)"
        lines.append(f"| {lvl.name} | " + " | ".join(cells) + f" | {where} | "
                     f"{leak.get(lvl.name, 0.0) * lvl.instances * 1e3:.3g} mW |")
    need = sorted({n for r in results.values() for n, b in r.buffering.items() if b["needs_double"]})
    spare = [lvl for lvl in arch.levels[1:] if lvl.name not in need and not lvl.off_chip]
    saved = sum(table.storage[lvl.name].area_um2 * lvl.instances for lvl in spare)
    lines += ["", f"Both mappings need double buffering only at {', '.join(need) or 'no level'}; "
              f"{', '.join(lvl.name for lvl in spare)} can be single-buffered at no cycle cost, which saves the "
              f"{saved / 1e6:.4f} mm² ({saved / on_chip:.2%} of the on-chip area) that double-buffering every level, "
              "as the thesis assumes, would add.", ""]
    return lines


def section(out: Path, root: Path, db: Path, *, quick: bool = False, workers: int = 2,
            progress: bool = False, ran: dict | None = None) -> tuple[list[str], list[Path]]:
    """Every study's section and figures (``ran``: the sweeps :func:`run_specs` ran already)."""
    lines, paths = [], []
    for part in (workload_set(out, root, db, quick=quick, workers=workers, progress=progress, ran=ran),
                 batching(out, root, db, quick=quick, workers=workers, progress=progress, ran=ran),
                 dimension_choice(out, root, quick=quick)):
        lines += part[0]
        paths += part[1]
    return lines + buffering(root), paths


__all__ = ["workload_set", "batching", "dimension_choice", "buffering", "section", "run_spec", "run_specs",
           "workload_set_spec", "batching_spec"]
