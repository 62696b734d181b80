"""Architecture sweeps: grid expansion, constraints, executors, the SQLite store, figures."""

import shutil
import sqlite3
import os
import subprocess
import sys

import pytest

from conftest import ROOT
from storeloop.cli import main
from storeloop.errors import SpecError
from storeloop.sweeps import load_sweep, point_arch, points, read_results, run_sweep, satisfies

DATA = ROOT / "tests" / "data"


def test_grid_and_constraints_of_the_thesis_space():
    s = load_sweep(ROOT / "sweeps" / "thesis-initial.yaml")
    assert s.size() == 12 * 8 * 6 * 11
    kept = 0
    for params, _ in points(s):
        if satisfies(s, params):
            kept += 1
            a = point_arch(s, params)                        # every kept point is a valid arch
            assert a.levels[2].instances == params["levels.SRAM.instances"]
            assert a.compute.instances == a.levels[3].instances == params["levels.RF.instances+compute.instances"]
    # SRAMs <= RFs (thesis ch. 5.3.2): of 6 x 11 instance pairs, 51 remain (1..32 SRAMs vs 1..1024 RFs)
    assert kept == 12 * 8 * sum(1 for srams in (1, 2, 4, 8, 16, 32) for rfs in (2**i for i in range(11)) if srams <= rfs)


def test_run_store_resume_and_invalid_points(tmp_path):
    s = load_sweep(DATA / "tiny.sweep.yaml")
    db = tmp_path / "tiny.sqlite"
    counts = run_sweep(s, db, progress=False)
    # 8 grid points; SRAM 2 over MAC 1 is excluded by the constraint (2 of them)
    assert (counts["points"], counts["excluded"], counts["run"]) == (8, 2, 6)
    df = read_results(db, "tiny")
    assert len(df) == 6
    # one SRAM feeding two MACs is a valid arch; every row maps or carries its error
    assert set(df["status"]) <= {"ok", "invalid"} and (df["status"] == "ok").sum() >= 4
    ok = df[df["status"] == "ok"]
    assert (ok["cycles"] >= ok["lower_bound_cycles"]).all() and (ok["on_chip_area_um2"] > 0).all()
    assert all("mapping" in m for m in ok["mapping"])
    again = run_sweep(s, db, progress=False)              # resumes: nothing left to run
    assert (again["done_before"], again["run"]) == (6, 0)


def test_invalid_arch_point_is_stored_with_its_error(tmp_path):
    spec = tmp_path / "s.yaml"
    shutil.copy(DATA / "tiny.arch.yaml", tmp_path)
    shutil.copy(DATA / "matvec.yaml", tmp_path)
    spec.write_text((DATA / "tiny.sweep.yaml").read_text().replace("compute.instances: [1, 2]", "compute.instances: [3]")
                    .replace('constraints: ["SRAM.instances <= MAC.instances"]', "constraints: []"))
    counts = run_sweep(load_sweep(spec), tmp_path / "r.sqlite", progress=False)
    df = read_results(tmp_path / "r.sqlite")
    bad = df[df["status"] == "invalid"]
    assert counts["invalid"] == len(bad) == 2                # 3 MACs cannot spread over 2 SRAMs
    assert all("compute" in e and "instances" in e for e in bad["error"])


def test_dask_local_cluster_runs_points(tmp_path):
    pytest.importorskip("dask.distributed")
    spec = tmp_path / "s.yaml"
    for f in ("tiny.arch.yaml", "matvec.yaml"):
        shutil.copy(DATA / f, tmp_path)
    spec.write_text((DATA / "tiny.sweep.yaml").read_text().replace("levels.SRAM.instances: [1, 2]", "levels.SRAM.instances: [1]")
                    .replace("compute.instances: [1, 2]", "compute.instances: [1]"))
    counts = run_sweep(load_sweep(spec), tmp_path / "d.sqlite", workers=2, dask="local", progress=False)
    assert counts["ok"] == 2
    rows = sqlite3.connect(tmp_path / "d.sqlite").execute("select count(*) from points where status = 'ok'").fetchone()
    assert rows == (2,)
    # from the command line: Dask's own log lines (cluster start, workers, shutdown) stay quiet
    env = {k: v for k, v in os.environ.items() if k != "DASK_LOGGING__DISTRIBUTED"}
    p = subprocess.run([sys.executable, "-m", "storeloop.cli", "sweep", str(spec), "--db", str(tmp_path / "c.sqlite"),
                        "--dask", "local", "--workers", "2"], capture_output=True, text=True, cwd=ROOT, env=env)
    assert p.returncode == 0, p.stderr
    assert "2 run now (2 mapped" in p.stdout + p.stderr
    assert not [ln for ln in p.stderr.splitlines() if ln.startswith("INFO") or "distributed." in ln], p.stderr


def test_plots_and_cli(tmp_path):
    p = subprocess.run([sys.executable, "-m", "storeloop.cli", "sweep", str(DATA / "tiny.sweep.yaml"),
                        "--db", str(tmp_path / "t.sqlite"), "--plot", str(tmp_path / "fig")],
                       capture_output=True, text=True, cwd=ROOT)
    assert p.returncode == 0, p.stderr
    pngs = sorted(f.name for f in (tmp_path / "fig").glob("*.png"))
    assert {"time_vs_area.png", "energy_vs_area.png", "energy_vs_area_fast.png", "by_levels_SRAM_capacity.png"} <= set(pngs)
    assert all((tmp_path / "fig" / f).stat().st_size > 5000 for f in pngs)


@pytest.mark.parametrize("edit,field", [
    ("  mapper: {budget: 200000}", "sweep.colour"),
    ("    levels.SRAM.capacity: [512 B, 2 KiB]", "sweep.parameters.levels.LLC.capacity"),
    ('  constraints: ["SRAM.instances <= MAC.instances"]', "sweep.constraints[0]"),
])
def test_bad_specs_name_file_line_and_field(tmp_path, edit, field):
    for f in ("tiny.arch.yaml", "matvec.yaml"):
        shutil.copy(DATA / f, tmp_path)
    bad = {"sweep.colour": "  colour: blue\n  mapper: {budget: 200000}",
           "sweep.parameters.levels.LLC.capacity": "    levels.LLC.capacity: [512 B, 2 KiB]",
           "sweep.constraints[0]": '  constraints: ["SRAM.size <= 3"]'}[field]
    spec = tmp_path / "bad.yaml"
    spec.write_text((DATA / "tiny.sweep.yaml").read_text().replace(edit, bad))
    with pytest.raises(SpecError) as info:
        load_sweep(spec)
    msg = str(info.value)
    assert "bad.yaml:" in msg and field in msg and "allowed" in msg
    p = subprocess.run([sys.executable, "-m", "storeloop.cli", "sweep", str(spec)], capture_output=True, text=True, cwd=ROOT)
    assert p.returncode == 2 and "Traceback" not in p.stderr


def test_database_size_figure_reads_scheme_and_size_from_file_names(tmp_path):
    import pandas as pd

    from storeloop.plots import by_database_size

    rows = [{"status": "ok", "workload": f"{s}-{n}GiB.yaml", "cycles": 2e9 * n, "clock_hz": 2e9, "energy_pJ": 3e12 * n,
             "on_chip_area_um2": 5e6} for s in ("onionpir", "sealpir") for n in (1, 2, 4)]
    rows.append({"status": "ok", "workload": "rotation.yaml", "cycles": 1, "clock_hz": 1, "energy_pJ": 1,
                 "on_chip_area_um2": 1})
    path = by_database_size(pd.DataFrame(rows), tmp_path, "t")
    assert path.name == "by_database_size.png" and path.stat().st_size > 5000
    assert by_database_size(pd.DataFrame(rows[:1]), tmp_path, "t") is None        # one size: nothing to draw


def test_unreadable_parameter_value_is_refused_before_any_point(tmp_path, capsys):
    """A value no field accepts (a wrong unit, a misspelled field, a list) is an error at the sweep
    file's line before anything runs; values that are fine alone but clash across levels (instances
    that do not divide) stay the point's own stored error."""
    for f in ("tiny.arch.yaml", "matvec.yaml"):
        shutil.copy(DATA / f, tmp_path)
    base = (DATA / "tiny.sweep.yaml").read_text()
    for old, new, needle in (("[512 B, 2 KiB]", "[512 B, 4 parsecs]", "parsecs"),
                             ("levels.SRAM.capacity:", "levels.SRAM.capacty:", "did you mean 'capacity'"),
                             ("[512 B, 2 KiB]", "[512 B, [1, 2]]", "levels.SRAM.capacity"),
                             ("compute.instances: [1, 2]", "compute.instances: [1, 1e400]", "valid integer"),
                             ("compute.instances: [1, 2]", "compute.name: [a, b]", "a name, not a design field")):
        spec = tmp_path / "s.yaml"
        spec.write_text(base.replace(old, new))
        assert main(["sweep", str(spec), "--db", str(tmp_path / "r.sqlite")]) == 2
        err = capsys.readouterr().err
        assert "s.yaml:" in err and needle in err and "Traceback" not in err, err
    assert not (tmp_path / "r.sqlite").exists()
    spec.write_text(base.replace("compute.instances: [1, 2]", "compute.instances: [1, 3]").replace(
        '["SRAM.instances <= MAC.instances"]', "[]"))
    counts = run_sweep(load_sweep(spec), tmp_path / "r.sqlite", progress=False)
    df = read_results(tmp_path / "r.sqlite")
    bad = df[df["status"] == "invalid"]
    assert counts["ok"] >= 1 and len(bad) >= 1 and "cannot be spread" in bad["error"].iloc[0]


def test_a_sweep_can_vary_an_attribute_the_plugins_read(tmp_path):
    """levels.<level>.attributes.<key>: the SRAM's bank count changes its CACTI area; a DRAM type
    no plug-in prices is stored as an invalid point with the reason, the others are mapped."""
    spec = tmp_path / "s.yaml"
    spec.write_text(f"""sweep:
  name: dram-types
  arch: {ROOT / 'arch' / 'onionchopper.yaml'}
  workloads: [{ROOT / 'workloads' / 'onionpir-1GiB.yaml'}]
  parameters:
    levels.SRAM.attributes.n_banks: [1, 4]
    levels.DRAM.attributes.type: [LPDDR4, LPDDR99]
""")
    counts = run_sweep(load_sweep(spec), tmp_path / "r.sqlite", progress=False)
    df = read_results(tmp_path / "r.sqlite")
    assert (counts["ok"], counts["invalid"]) == (2, 2)
    ok = df[df["status"] == "ok"].set_index("levels.SRAM.attributes.n_banks")
    assert ok.loc[1, "on_chip_area_um2"] != ok.loc[4, "on_chip_area_um2"]
    bad = df[df["status"] == "invalid"]
    assert all("LPDDR99" in e and "attributes.type" in e for e in bad["error"])


def _weighted_set(tmp_path, weight="3"):
    for f in ("tiny.arch.yaml", "matvec.yaml"):
        shutil.copy(DATA / f, tmp_path)
    (tmp_path / "matmul.yaml").write_text("workload:\n  name: mm\n  einsum: Z[m,n] = A[m,k] * B[k,n]\n"
                                          "  bounds: {M: 64, N: 8, K: 256}\n")
    spec = tmp_path / "set.yaml"
    spec.write_text((DATA / "tiny.sweep.yaml").read_text().replace(
        "workloads: [matvec.yaml]", f"workloads: [matvec.yaml, {{file: matmul.yaml, weight: {weight}}}]"))
    return spec


def test_a_workload_set_ranks_designs_by_weighted_mean_and_worst_ratio(tmp_path):
    """Each design is mapped on each workload; the ranking's weighted mean and worst ratio are
    recomputed here from the per-workload rows, and a changed weight relabels the rows (nothing
    runs again)."""
    from storeloop.sweeps import rank_designs

    spec = _weighted_set(tmp_path)
    s = load_sweep(spec)
    assert s.weights == {"matvec.yaml": 1.0, "matmul.yaml": 3.0} and s.size() == 16
    db = tmp_path / "r.sqlite"
    run_sweep(s, db, progress=False)
    df = read_results(db)
    ok = df[df["status"] == "ok"]
    assert set(ok.groupby("workload")["weight"].first().items()) == {("matvec.yaml", 1.0), ("matmul.yaml", 3.0)}
    ranked = rank_designs(df)
    complete = ranked[ranked["complete"]]
    assert len(complete) >= 2 and list(complete["rank"]) == list(range(1, len(complete) + 1))
    best = ok.groupby("workload")["time_s"].min()
    for _, r in complete.iterrows():
        rows = ok[ok["params"] == r["params"]].set_index("workload")
        mean = (rows.loc["matvec.yaml", "time_s"] + 3 * rows.loc["matmul.yaml", "time_s"]) / 4
        assert r["weighted_time_s"] == pytest.approx(mean, rel=1e-12)
        assert r["worst_ratio"] == pytest.approx(max(rows["time_s"] / best), rel=1e-12)
    assert complete["weighted_time_s"].is_monotonic_increasing
    worst = rank_designs(df, order="worst")
    assert worst.loc[worst["complete"], "worst_ratio"].is_monotonic_increasing
    # the weight is no input of a result: 3 -> 1 relabels the rows and the ranking, nothing runs
    again = run_sweep(load_sweep(_weighted_set(tmp_path, "1")), db, progress=False)
    assert again["run"] == 0
    df = read_results(db)
    assert set(df.loc[df["status"] == "ok", "weight"]) == {1.0}
    p = subprocess.run([sys.executable, "-m", "storeloop.cli", "results", str(db), "--rank", "--format", "csv"],
                       capture_output=True, text=True, cwd=ROOT)
    assert p.returncode == 0 and p.stdout.startswith("rank,") and len(p.stdout.splitlines()) == len(ranked) + 1


def test_a_design_missing_a_workload_ranks_last():
    import pandas as pd

    from storeloop.sweeps import rank_designs

    def row(p, w, t):
        return {"sweep": "s", "params": f'{{"x": {p}}}', "x": p, "workload": w, "status": "ok", "stale": 0,
                "time_s": t, "energy_J": t, "on_chip_area_mm2": 1.0, "cycles_optimal": 1, "scenario": "{}"}

    df = pd.DataFrame([row(1, "a", 1.0), row(2, "a", 2.0), row(2, "b", 1.0), row(3, "a", 1.5), row(3, "b", 3.0)])
    r = rank_designs(df)
    assert list(r["x"]) == [2, 3, 1] and list(r["complete"]) == [True, True, False]
    assert r.loc[0, "worst_ratio"] == 2.0 and r.loc[0, "worst_workload"] == "a"
    assert r.loc[1, "worst_ratio"] == 3.0 and pd.isna(r.loc[2, "weighted_time_s"])


@pytest.mark.parametrize("entry,field,allowed", [
    ("{file: matmul.yaml, weight: 0}", "sweep.workloads[1].weight", "greater than 0"),
    ("{file: matmul.yaml, weigth: 2}", "sweep.workloads[1]", "weigth"),
    ("{file: nowhere.yaml}", "sweep.workloads[1].file", "no such file"),
    ("matvec.yaml", "sweep.workloads[1]", "listed twice"),
])
def test_bad_workload_set_entries_are_refused_at_their_line(tmp_path, entry, field, allowed):
    spec = _weighted_set(tmp_path)
    spec.write_text(spec.read_text().replace("{file: matmul.yaml, weight: 3}", entry))
    with pytest.raises(SpecError) as info:
        load_sweep(spec)
    msg = str(info.value)
    assert "set.yaml:" in msg and field in msg and allowed in msg, msg


def test_a_point_ended_by_the_time_limit_runs_again_on_resume(tmp_path, monkeypatch):
    """The time limit is a safety net whose answer depends on the machine's load: a point it ended
    is kept (with stopped: time-limit) and searched again by the next run; the others are not."""
    import storeloop.sweeps.worker as run

    s = load_sweep(DATA / "tiny.sweep.yaml")
    db = tmp_path / "tiny.sqlite"
    real = run.map_workload
    calls = []

    def first_ends_on_time(*a, **k):
        out = real(*a, **k)
        calls.append(1)
        if len(calls) == 1:
            out.search["stopped"] = "time-limit"
        return out

    monkeypatch.setattr(run, "map_workload", first_ends_on_time)
    first = run_sweep(s, db, progress=False)
    df = read_results(db, "tiny")
    assert (df["stopped"] == "time-limit").sum() == 1
    again = run_sweep(s, db, progress=False)
    assert (again["done_before"], again["run"]) == (first["run"] - 1, 1)
    assert (read_results(db, "tiny")["stopped"] == "time-limit").sum() == 0


def test_a_fresh_sweep_seeds_each_wave_with_the_waves_before(tmp_path, monkeypatch):
    """A run maps the grid wave by wave (a point's wave: the steps from each of its values to the
    nearest position of its list that is a multiple of SPACING, summed); every point but those of
    wave 0 starts from the stored mappings of its neighbours one wave down, never from a point of
    its own wave, so the answers do not depend on how many workers run or which finished first."""
    import json

    import storeloop.sweeps.run as run
    from storeloop import load_workload
    from storeloop.formats.mapping import mapping_from_native
    from storeloop.formats.yamlio import loads
    from storeloop.sweeps.run import wave

    for f in ("tiny.arch.yaml", "matvec.yaml"):
        shutil.copy(DATA / f, tmp_path)
    spec = tmp_path / "s.yaml"                  # three capacities: a neighbour two steps away is of the same wave
    spec.write_text((DATA / "tiny.sweep.yaml").read_text().replace("[512 B, 2 KiB]", "[512 B, 1 KiB, 2 KiB]"))
    s = load_sweep(spec)
    real, calls = run.run_point, []

    def recorded(point, seeds=(), **keywords):
        row = real(point, seeds, **keywords)
        calls.append((point.params, seeds, dict(row)))
        return row

    monkeypatch.setattr(run, "run_point", recorded)
    run_sweep(s, tmp_path / "one.sqlite", progress=False)
    waves = [wave(s, p) for p, _, _ in calls]
    # the waves in turn: the third capacity is two steps from a wave-0 value, each instance count one
    assert waves == sorted(waves) and set(waves) == {0, 1, 2, 3, 4}
    assert [p for p, _, _ in calls if wave(s, p) == 0] == [{"levels.SRAM.capacity": "512 B", "levels.SRAM.instances": 1,
                                                          "compute.instances": 1}]
    assert all(seeds for p, seeds, _ in calls if wave(s, p))     # every other point has a neighbour one wave down
    # a fresh run's seeds are the mappings its workers returned (what their stored text loads to)
    mapped = {json.dumps(p, sort_keys=True): (wave(s, p), row["seed"]) for p, _, row in calls}
    w = load_workload(s.workloads[0])
    assert all(mapping_from_native(loads(row["mapping"]), point_arch(s, p), w) == row["seed"] for p, _, row in calls)
    for p, seeds, _ in calls:
        if wave(s, p) == 0:
            assert seeds == ()
        for m in seeds:               # a seed is the mapping of a point one wave or more down
            assert any(w < wave(s, p) and m == mm for w, mm in mapped.values())
    assert sum(1 for _, seeds, _ in calls if seeds) >= 3
    # two workers: the same answers
    run_sweep(s, tmp_path / "two.sqlite", workers=2, progress=False)
    one, two = (read_results(tmp_path / f"{n}.sqlite", "tiny").set_index("params").sort_index()
                for n in ("one", "two"))
    assert one["mapping"].tolist() == two["mapping"].tolist()
    assert one["energy_pJ"].tolist() == two["energy_pJ"].tolist()


def test_sweeps_run_in_one_pool_give_each_the_answers_it_has_alone(tmp_path):
    """run_sweeps: two sweeps share one pool of two workers and one store (while one waits at a
    wave mark for its points in flight, the pool runs the other's); each sweep's rows -- mapping,
    energy, stop -- are those it gets run alone, every point is stored once, and the counts are
    each sweep's own."""
    from storeloop.sweeps import run_sweeps

    for f in ("tiny.arch.yaml", "matvec.yaml"):
        shutil.copy(DATA / f, tmp_path)
    text = (DATA / "tiny.sweep.yaml").read_text().replace("[512 B, 2 KiB]", "[512 B, 1 KiB, 2 KiB]")
    (tmp_path / "a.yaml").write_text(text)
    (tmp_path / "b.yaml").write_text(text.replace("name: tiny", "name: other").replace("[1, 2]\n  constraints",
                                                                                      "[1, 2, 4]\n  constraints"))
    a, b = load_sweep(tmp_path / "a.yaml"), load_sweep(tmp_path / "b.yaml")
    counts = run_sweeps([(a, tmp_path / "both.sqlite"), (b, tmp_path / "both.sqlite")], workers=2, progress=False)
    run_sweep(a, tmp_path / "a.sqlite", progress=False)
    run_sweep(b, tmp_path / "b.sqlite", progress=False)
    cols = ["mapping", "energy_pJ", "cycles", "stopped"]
    for s, alone, c in ((a, "a", counts[0]), (b, "b", counts[1])):
        together = read_results(tmp_path / "both.sqlite", s.name).set_index("params").sort_index()
        single = read_results(tmp_path / f"{alone}.sqlite", s.name).set_index("params").sort_index()
        assert len(together) == len(single) == c["run"] == c["points"] - c["excluded"]
        assert together[cols].equals(single[cols])
    assert counts[0]["points"] != counts[1]["points"]


def test_the_local_pool_batches_quick_points_and_never_across_a_wave_mark(monkeypatch):
    """run_pool sends a stream's quick points in batches (one task, one round trip) but no point
    of a wave leaves before every point of the waves before it is stored (its seeds come from
    them), whichever the batch sizes; every point is stored once, by its own stream's store."""
    from concurrent.futures import ProcessPoolExecutor

    from storeloop.mapper.options import MapperOptions
    from storeloop.sweeps.executors import WAVE, run_pool
    from storeloop.sweeps.grid import Point

    stored: list[list[str]] = [[], []]
    waves = [[1, 300, 2, 150], [40, 1]]

    def stream(s: int):
        for w, n in enumerate(waves[s]):
            if w:
                yield WAVE, None
            for i in range(n):
                key = f"{s}.{w}.{i}"
                # every point of the waves before is stored before one of this wave is taken
                assert sum(1 for k in stored[s] if int(k.split(".")[1]) < w) == sum(waves[s][:w])
                # a point whose arch did not load: its row is the error, at once (a quick point)
                yield key, (Point(params={"i": i}, label="w", scenario="{}", weight=1.0, mapper=MapperOptions(),
                                  error=f"point {key}"), ())

    def store(s: int):
        def put(key: str, row: dict) -> None:
            assert row["status"] == "invalid" and row["error"] == f"point {key}"
            stored[s].append(key)
        return put

    tasks = []
    submit = ProcessPoolExecutor.submit
    monkeypatch.setattr(ProcessPoolExecutor, "submit", lambda self, fn, batch: tasks.append(len(batch)) or
                        submit(self, fn, batch))
    run_pool(2, [stream(0), stream(1)], [store(0), store(1)])
    for s in (0, 1):
        assert sorted(stored[s]) == sorted(f"{s}.{w}.{i}" for w, n in enumerate(waves[s]) for i in range(n))
    assert sum(tasks) == sum(map(sum, waves)) and max(tasks) > 1 and len(tasks) < sum(map(sum, waves)) / 4


def test_the_sweep_command_runs_several_specs_in_one_pool(tmp_path, capsys):
    """`storeloop sweep A B --workers 2`: both sweeps into one store (--db) in one pool, a summary
    for each; the same name twice into one store is refused (exit 2), before anything runs."""
    for f in ("tiny.arch.yaml", "matvec.yaml"):
        shutil.copy(DATA / f, tmp_path)
    text = (DATA / "tiny.sweep.yaml").read_text()
    (tmp_path / "a.yaml").write_text(text)
    (tmp_path / "b.yaml").write_text(text.replace("name: tiny", "name: other"))
    db = tmp_path / "r.sqlite"
    assert main(["sweep", str(tmp_path / "a.yaml"), str(tmp_path / "b.yaml"), "--workers", "2", "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert "tiny: 8 points in the grid" in out and "other: 8 points in the grid" in out
    assert set(read_results(db)["sweep"]) == {"tiny", "other"}
    (tmp_path / "c.yaml").write_text(text)
    assert main(["sweep", str(tmp_path / "a.yaml"), str(tmp_path / "c.yaml"), "--db", str(tmp_path / "x.sqlite")]) == 2
    err = capsys.readouterr().err
    assert "c.yaml" in err and "'tiny'" in err and "Traceback" not in err
    assert not (tmp_path / "x.sqlite").exists()


def test_a_seed_from_a_design_with_more_units_is_fitted_to_this_one():
    """A neighbour's mapping whose spatial factors exceed this design's fanouts is a seed all the
    same: the excess moves, a prime at a time, into the same dimension's temporal loop at that level,
    so every level's tile and every dimension's product stay as they were; the strict reading of
    the same file still refuses it."""
    import math

    from storeloop.formats.mapping import mapping_from_native
    from storeloop.formats.yamlio import loads
    from storeloop.ir.check import check_mapping, fit_fanouts
    from storeloop import load_workload

    s = load_sweep(ROOT / "sweeps" / "thesis-initial.yaml")
    w = load_workload(ROOT / "workloads" / "onionpir-64GiB.yaml")
    text = (ROOT / "mappings" / "onionchopper-thesis-best.yaml").read_text()
    big = point_arch(s, {"levels.SRAM.instances": 2, "levels.RF.instances+compute.instances": 2})
    seed = mapping_from_native(loads(text, "seed"), big, w)
    assert fit_fanouts(big, seed) == seed                   # it fits: as it is
    for units in (1, 2):
        small = point_arch(s, {"levels.SRAM.instances": 1, "levels.RF.instances+compute.instances": units})
        with pytest.raises(SpecError, match="exceed the fanout"):
            mapping_from_native(loads(text, "seed"), small, w)
        fitted = mapping_from_native(loads(text, "seed"), small, w, fit=True)
        check_mapping(small, w, fitted)
        for a, b in zip(seed.levels, fitted.levels):         # the same tile at every level
            assert [math.prod(lp.factor for lp in a.temporal + a.spatial if lp.dim == d) for d in range(len(w.dims))] == \
                   [math.prod(lp.factor for lp in b.temporal + b.spatial if lp.dim == d) for d in range(len(w.dims))]
            assert a.keep == b.keep and [lp.dim for lp in a.temporal] == [lp.dim for lp in b.temporal]
        j = w.dims.index("J")
        assert [(lp.dim, lp.factor) for lp in fitted.levels[1].temporal if lp.dim == j] == [(j, 16)]
        assert not fitted.levels[1].spatial


def test_fitting_a_mesh_moves_the_axis_past_its_extent_first():
    """On a 4 x 4 mesh, X = 16 exceeds the X extent: X gives up primes (each from its largest loop)
    until it fits, Y keeps its own, and a dimension with no temporal loop at the level gets one,
    innermost."""
    from storeloop.ir import LevelMapping, Loop, Mapping
    from storeloop.formats.load import load_arch
    from storeloop.ir.check import fit_fanouts

    arch = load_arch(DATA / "a3-v04.arch.yaml")
    L = next(i for i in range(len(arch.levels)) if arch.fanout(i)[1:] == (4, 4))
    lm = LevelMapping(temporal=(Loop(0, 3),), spatial=(Loop(1, 8, True, "X"), Loop(2, 2, True, "X"), Loop(0, 2, True, "Y")))
    levels = [LevelMapping()] * len(arch.levels)
    levels[L] = lm
    fitted = fit_fanouts(arch, Mapping(tuple(levels))).levels[L]
    assert [(lp.dim, lp.factor) for lp in fitted.temporal] == [(0, 3), (1, 4)]
    assert sorted((lp.axis, lp.dim, lp.factor) for lp in fitted.spatial) == [("X", 1, 2), ("X", 2, 2), ("Y", 0, 2)]
