"""The sweep store users can trust: content keys, stale rows, WAL, Ctrl-C, no orphans, safe paths."""

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import ROOT
from storeloop.cli import main
from storeloop.errors import SpecError
from storeloop.sweeps import best_points, load_sweep, read_results, run_sweep

pytestmark = pytest.mark.serial      # Ctrl-C within 2 s, killed workers, clusters: run alone (./run test)

DATA = ROOT / "tests" / "data"


def tiny(tmp_path, **edits):
    """The tiny sweep copied into tmp_path, with text replacements in the spec."""
    for f in ("tiny.arch.yaml", "matvec.yaml"):
        shutil.copy(DATA / f, tmp_path)
    text = (DATA / "tiny.sweep.yaml").read_text()
    for old, new in edits.items():
        text = text.replace(old, new)
    spec = tmp_path / "tiny.sweep.yaml"
    spec.write_text(text)
    return spec


def test_changed_inputs_rerun_and_old_rows_become_stale(tmp_path):
    spec = tiny(tmp_path)
    db = tmp_path / "r.sqlite"
    first = run_sweep(load_sweep(spec), db, progress=False)
    assert first["run"] == 6
    assert run_sweep(load_sweep(spec), db, progress=False)["run"] == 0
    before = read_results(db, "tiny")
    # the workload's contents change (same file name): every point runs again
    wl = tmp_path / "matvec.yaml"
    wl.write_text(wl.read_text().replace("K: 4096", "K: 2048"))
    again = run_sweep(load_sweep(spec), db, progress=False)
    assert again["run"] == 6 and again["done_before"] == 0
    df = read_results(db, "tiny")
    assert len(df) == 12 and (df["stale"] == 1).sum() == 6
    assert set(df[df["stale"] == 1]["key"]) == set(before["key"])
    fresh = df[df["stale"] == 0]
    assert (fresh[fresh["status"] == "ok"]["cycles"] < before[before["status"] == "ok"]["cycles"].max()).all()
    assert set(best_points(df)["key"]) <= set(fresh["key"])
    # the mapper settings are an input too
    spec.write_text(spec.read_text().replace("mapper: {budget: 200000}", "mapper: {budget: 200000, objective: energy}"))
    assert run_sweep(load_sweep(spec), db, progress=False)["run"] == 6
    # and the arch file's contents (a bandwidth that no parameter sets)
    arch = tmp_path / "tiny.arch.yaml"
    text = arch.read_text()
    assert "bandwidth" in text
    arch.write_text(text.replace("bandwidth: ", "bandwidth: 2 * ", 1))
    assert run_sweep(load_sweep(spec), db, progress=False)["run"] == 6


def test_same_workload_name_in_two_folders_are_two_points(tmp_path):
    spec = tiny(tmp_path)
    other = tmp_path / "other"
    other.mkdir()
    (other / "matvec.yaml").write_text((tmp_path / "matvec.yaml").read_text().replace("M: 1024", "M: 512"))
    spec.write_text(spec.read_text().replace("workloads: [matvec.yaml]", "workloads: [matvec.yaml, other/matvec.yaml]"))
    counts = run_sweep(load_sweep(spec), tmp_path / "r.sqlite", progress=False)
    assert counts["run"] == 12
    df = read_results(tmp_path / "r.sqlite")
    assert df["key"].nunique() == 12
    assert set(df["workload"]) == {"matvec.yaml", "other/matvec.yaml"}     # told apart in the rows too


def test_a_reader_holding_a_transaction_does_not_lock_the_sweep(tmp_path):
    spec = tiny(tmp_path)
    db = tmp_path / "r.sqlite"
    run_sweep(load_sweep(spec), db, progress=False)
    reader = sqlite3.connect(db)
    reader.execute("begin")
    assert reader.execute("select count(*) from points").fetchone()[0] == 6      # holds a read transaction
    spec.write_text(spec.read_text().replace("[512 B, 2 KiB]", "[512 B, 2 KiB, 4 KiB]"))
    counts = run_sweep(load_sweep(spec), db, progress=False)
    assert counts["run"] == 3 and counts["done_before"] == 6
    reader.rollback()
    assert reader.execute("select count(*) from points").fetchone()[0] == 9
    assert sqlite3.connect(db).execute("pragma journal_mode").fetchone()[0] == "wal"


def test_store_and_name_paths_are_checked(tmp_path, capsys):
    spec = tiny(tmp_path)
    text_file = tmp_path / "notes.txt"
    text_file.write_text("not a database\n" * 100)
    assert main(["sweep", str(spec), "--db", str(text_file)]) == 2
    assert "notes.txt" in capsys.readouterr().err
    assert main(["sweep", str(spec), "--db", str(tmp_path)]) == 2
    assert "not a file" in capsys.readouterr().err
    for name in ("../../x", "/tmp/x", "a/b"):
        bad = tiny(tmp_path, **{"name: tiny": f"name: {json.dumps(name)}"})
        with pytest.raises(SpecError, match="plain file name"):
            load_sweep(bad)


def long_sweep(tmp_path):
    """OnionChopper points that each search for seconds (the energy objective asks for a proof)."""
    spec = tmp_path / "long.yaml"
    spec.write_text(f"""sweep:
  name: long
  arch: {ROOT / 'arch' / 'onionchopper.yaml'}
  workloads: [{ROOT / 'workloads' / 'onionpir-64GiB.yaml'}]
  parameters:
    levels.RF.capacity: [16 words, 32 words, 64 words, 128 words, 256 words, 512 words]
    levels.SRAM.capacity: [2 KiB, 4 KiB, 8 KiB, 16 KiB]      # enough points to outlast any machine's 5 s
  mapper: {{budget: 2000000, objective: energy}}
  energy: {{ert: {ROOT / 'arch' / 'onionchopper.ERT.yaml'}, art: {ROOT / 'arch' / 'onionchopper.ART.yaml'}}}
""")
    return spec


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False


def _sweep_process(spec, db, workers: int = 2, dask: bool = False):
    return subprocess.Popen([sys.executable, "-m", "storeloop.cli", "sweep", str(spec), "--db", str(db),
                             "--workers", str(workers)] + (["--dask", "local"] if dask else []),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def _group_running(pgid: int) -> list[str]:
    """The processes of group ``pgid`` that still run (killed ones not yet reaped by init are not)."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            out.append(stat.parent.name)
    return out


@pytest.mark.parametrize("workers,dask", [(1, False), (2, False), (2, True)], ids=["one", "pool", "dask-local"])
@pytest.mark.parametrize("terminal", [False, True], ids=["sweep", "group"])
def test_ctrl_c_stops_a_sweep_within_2_s_and_leaves_no_worker(tmp_path, workers, dask, terminal):
    """One worker (the search runs in the sweep's process), a pool or a local Dask cluster: Ctrl-C
    (to the sweep, or to its whole process group as a terminal sends it) stops the sweep within
    2 s with one line, no traceback and no Dask warnings, and no worker keeps running."""
    spec = long_sweep(tmp_path)
    db = tmp_path / "r.sqlite"
    p = _sweep_process(spec, db, workers, dask)
    time.sleep(9 if dask else 5)                      # a local cluster starts first
    sent = time.monotonic()
    if terminal:
        os.killpg(p.pid, signal.SIGINT)
    else:
        p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=30)
    assert time.monotonic() - sent < 2.0, "Ctrl-C took more than 2 s"
    assert p.returncode == 130, err
    assert "Traceback" not in err and "WARNING" not in err and len(err.splitlines()) <= 2, err
    time.sleep(0.5)
    assert not _group_running(p.pid), "workers outlived the sweep"
    df = read_results(db) if db.exists() else None
    if df is not None and len(df):
        # nothing half-done stored as a result: the point in flight (one worker) is 'interrupted'
        assert set(df["status"]) <= {"ok", "invalid", "interrupted"}
        assert (df["status"] == "interrupted").sum() <= 1
    assert p.returncode == 130 and "interrupted" in err


def test_a_resume_right_after_a_kill_takes_over_its_claims(tmp_path):
    """A claim of a sweep killed a moment ago (its process not yet reaped, so a pid probe still
    finds it) or of a pid that a new, unrelated process now has is taken over: the grid finishes."""
    spec = tiny(tmp_path)
    db = tmp_path / "r.sqlite"
    run_sweep(load_sweep(spec), db, progress=False)
    con = sqlite3.connect(db)
    keys = [k for (k,) in con.execute("select key from points order by key limit 2")]
    dead = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    dead.kill()                                       # not waited for: a zombie, os.kill(pid, 0) succeeds
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])   # alive, holds no lease
    try:
        for key, pid in zip(keys, (dead.pid, other.pid)):
            con.execute("delete from points where key = ?", (key,))
            con.execute("insert into claims values ((select sweep from points limit 1), ?, ?, ?, ?)",
                        (key, pid, __import__("socket").gethostname(), time.time()))
        con.commit()
        con.close()
        counts = run_sweep(load_sweep(spec), db, progress=False)
        assert counts["taken"] == 0 and counts["run"] == 2 and counts["ok"] + counts["invalid"] == 2, counts
    finally:
        other.kill()
        dead.wait()
        other.wait()


def test_killed_sweep_leaves_no_orphan_workers(tmp_path):
    spec = long_sweep(tmp_path)
    p = _sweep_process(spec, tmp_path / "r.sqlite")
    time.sleep(4)
    p.kill()
    p.wait(timeout=10)
    end = time.monotonic() + 5
    while _group_alive(p.pid) and time.monotonic() < end:
        time.sleep(0.1)
    assert not _group_alive(p.pid), "pool workers outlived a killed sweep"


def test_results_export_and_version(tmp_path, capsys):
    import csv

    spec = tiny(tmp_path)
    db = tmp_path / "r.sqlite"
    run_sweep(load_sweep(spec), db, progress=False)
    out = tmp_path / "r.csv"
    assert main(["results", str(db), "--csv", str(out)]) == 0
    rows = list(csv.DictReader(out.open()))
    assert len(rows) == 6 and {"status", "cycles", "stopped", "levels.SRAM.capacity"} <= set(rows[0])
    capsys.readouterr()
    assert main(["results", str(db), "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)) == 6
    assert main(["results", str(tmp_path / "missing.sqlite")]) == 2
    assert main(["results", str(db), "--csv", str(tmp_path)]) == 2
    pq = tmp_path / "r.parquet"                      # Parquet out of the box (pyarrow is a dependency)
    assert main(["results", str(db), "--format", "parquet", "--out", str(pq)]) == 0
    import pandas as pd

    assert pd.read_parquet(pq).shape[0] == 6
    capsys.readouterr()
    assert main(["results", str(db), "--sweep", "no-such-sweep"]) == 2
    assert "no rows of a sweep named 'no-such-sweep'" in capsys.readouterr().err
    assert main(["results", str(db), "--format", "json", "--csv", str(out)]) == 2
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0 and "storeloop" in capsys.readouterr().out


@pytest.mark.parametrize("column,value,needle", [
    ("cycles", "'lots'", "cycles is 'lots', not a number"),
    ("params", "'not json'", "is not a JSON object"),
    ("status", "'done'", "status 'done'"),
], ids=["text-in-a-number-column", "params-not-json", "unknown-status"])
def test_a_store_row_storeloop_would_not_write_is_refused_by_every_reader(column, value, needle, tmp_path, capsys):
    spec = tiny(tmp_path)
    db = tmp_path / "r.sqlite"
    run_sweep(load_sweep(spec), db, progress=False)
    con = sqlite3.connect(db)
    # a row without a checksum (a store written before checksums, or by another program): its cells
    # are checked (a row with a checksum that fails is left out: test_a_flipped_bit_...)
    con.execute(f"update points set {column} = {value}, checksum = null where rowid = (select min(rowid) from points)")
    con.commit()
    con.close()
    capsys.readouterr()
    for args in (["results", str(db)], ["plot", str(db), "--out", str(tmp_path / "fig")]):
        assert main(args) == 2
        err = capsys.readouterr().err
        assert "r.sqlite" in err and f"points.{column}" in err and needle in err and "Traceback" not in err


def test_cacti_runs_outside_the_installed_package(tmp_path, monkeypatch):
    """CACTI's input and output files go to a private temporary folder, never into site-packages."""
    import hwcomponents_cacti

    from storeloop.energy.hwc import HwComponentsPlugin

    pkg = os.path.dirname(hwcomponents_cacti.__file__)
    before = {os.path.join(d, f) for d, _, fs in os.walk(pkg) for f in fs}
    # a size no cache has seen: CACTI really runs
    est = HwComponentsPlugin().estimate("sram", {"technology": 45e-9, "width": 64, "depth": 1000 + os.getpid() % 500})
    assert est.actions["read"] > 0 and est.area_um2 > 0
    after = {os.path.join(d, f) for d, _, fs in os.walk(pkg) for f in fs}
    assert after == before


def test_dask_cluster_with_a_killed_worker_stores_every_point_once(tmp_path):
    """A real `dask scheduler` and two `dask worker` processes on 127.0.0.1; one worker is killed
    mid-sweep. Every point is stored exactly once, with the results of a local run."""
    import socket
    import threading

    pytest.importorskip("dask.distributed")
    dask = os.path.join(os.path.dirname(sys.executable), "dask")
    if not os.path.exists(dask):
        pytest.skip("the dask command is not installed next to this Python")
    spec = tiny(tmp_path, **{"[512 B, 2 KiB]": "[512 B, 1 KiB, 2 KiB, 4 KiB, 8 KiB, 16 KiB, 32 KiB, 64 KiB]",
                             "compute.instances: [1, 2]": "compute.instances: [1, 2, 4]"})
    local = tmp_path / "local.sqlite"
    run_sweep(load_sweep(spec), local, progress=False)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    addr = f"tcp://127.0.0.1:{port}"
    procs = [subprocess.Popen([dask, "scheduler", "--host", "127.0.0.1", "--port", str(port), "--no-dashboard"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)]
    try:
        time.sleep(2)
        for _ in range(2):
            procs.append(subprocess.Popen([dask, "worker", addr, "--nthreads", "1", "--no-dashboard"],
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True))
        db = tmp_path / "dask.sqlite"
        done: dict = {}
        runner = threading.Thread(target=lambda: done.update(run_sweep(load_sweep(spec), db, dask=addr, progress=False)))
        runner.start()
        end = time.monotonic() + 60        # kill a worker once the sweep is under way
        while time.monotonic() < end and not (db.exists() and _rows(db) >= 3):
            time.sleep(0.05)
        os.killpg(procs[1].pid, signal.SIGKILL)
        at_kill = _rows(db)
        runner.join(timeout=300)
        assert not runner.is_alive()
        assert 3 <= at_kill < len(read_results(local)), "the worker was not killed mid-sweep"
    finally:
        for p in procs:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    got, want = read_results(db), read_results(local)
    assert len(got) == len(want) and got["key"].is_unique
    cols = ["key", "status", "cycles", "energy_pJ"]
    assert got[cols].sort_values("key").reset_index(drop=True).equals(want[cols].sort_values("key").reset_index(drop=True))


def _rows(db) -> int:
    try:
        return sqlite3.connect(db, timeout=1).execute("select count(*) from points").fetchone()[0]
    except sqlite3.Error:
        return 0


def test_two_sweeps_on_one_store_share_the_points(tmp_path):
    import re

    spec = tiny(tmp_path, **{"[512 B, 2 KiB]": "[512 B, 1 KiB, 2 KiB, 4 KiB, 8 KiB, 16 KiB, 32 KiB, 64 KiB]",
                             "compute.instances: [1, 2]": "compute.instances: [1, 2, 4]"})
    db = tmp_path / "r.sqlite"
    run_sweep(load_sweep(spec), tmp_path / "warm.sqlite", progress=False)     # warm the energy cache
    cmd = [sys.executable, "-m", "storeloop.cli", "sweep", str(spec), "--db", str(db)]
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    ran = [int(re.search(r"(\d+) run now", out).group(1)) for out, _ in outs]
    total = len(read_results(db))
    assert total == len(read_results(tmp_path / "warm.sqlite"))
    assert sum(ran) == total, f"points computed twice: {ran} for {total} points"
    assert min(ran) > 0, "one sweep did all the work: they did not run together"


def test_a_plugin_that_falls_back_is_named_in_the_row(tmp_path):
    """The ModMAC plug-in refuses a pipeline stage that misses the clock; the warning it gives
    when the registry moves on is kept in the point's notes (here no other plug-in prices it)."""
    arch = (ROOT / "arch" / "onionchopper.yaml").read_text().replace("    class: modmac ", "    class: modmac\n"
                                                                     "    attributes: {fa_per_stage: 4}\n    #", 1)
    (tmp_path / "a.yaml").write_text(arch)
    spec = tmp_path / "s.yaml"
    spec.write_text(f"""sweep:
  name: fallback
  arch: a.yaml
  workloads: [{ROOT / 'workloads' / 'onionpir-1GiB.yaml'}]
  parameters:
    levels.RF.capacity: [32 words]
""")
    run_sweep(load_sweep(spec), tmp_path / "r.sqlite", progress=False)
    row = read_results(tmp_path / "r.sqlite").iloc[0]
    assert "fa_per_stage" in arch and "storeloop-modmac" in row["notes"] and "clock" in row["notes"]


def test_scenarios_get_a_best_design_each(tmp_path, capsys):
    spec = tiny(tmp_path, **{"  constraints:": "  scenarios:\n    levels.DRAM.shared_bandwidth: [1, 4]\n  constraints:"})
    s = load_sweep(spec)
    assert s.scenarios == ["levels.DRAM.shared_bandwidth"] and s.size() == 16
    db = tmp_path / "r.sqlite"
    assert main(["sweep", str(spec), "--db", str(db)]) == 0
    out = capsys.readouterr().out
    # one best line per scenario, naming the scenario and not listing it among the design's parameters
    best = [ln for ln in out.splitlines() if ln.startswith("best for")]
    assert len(best) == 2
    assert "levels.DRAM.shared_bandwidth = 1 (" in best[0] and "levels.DRAM.shared_bandwidth = 4 (" in best[1]
    assert all("shared_bandwidth" not in ln.split("):")[1] for ln in best)
    df = read_results(db, "tiny")
    picks = best_points(df)
    assert sorted(picks["levels.DRAM.shared_bandwidth"]) == [1, 4]
    for _, row in picks.iterrows():       # each pick is the best of its own scenario's rows
        mine = df[(df["status"] == "ok") & (df["levels.DRAM.shared_bandwidth"] == row["levels.DRAM.shared_bandwidth"])]
        assert row["cycles"] == mine["cycles"].min()
        assert json.loads(row["scenario"]) == {"levels.DRAM.shared_bandwidth": row["levels.DRAM.shared_bandwidth"]}
        assert "DRAM" in json.loads(row["levels"])


def test_a_key_in_both_parameters_and_scenarios_is_refused(tmp_path):
    spec = tiny(tmp_path, **{"  constraints:": "  scenarios:\n    compute.instances: [1]\n  constraints:"})
    with pytest.raises(SpecError, match="sets a field another parameter or scenario sets"):
        load_sweep(spec)
    # two parameters that share one field (joined with '+' in one of them) would mislabel rows
    spec = tiny(tmp_path, **{"  constraints:": "  scenarios:\n    levels.SRAM.block_size+compute.instances: [1]\n"
                                              "  constraints:"})
    with pytest.raises(SpecError, match="sets a field another parameter or scenario sets"):
        load_sweep(spec)


def test_a_billion_point_grid_starts_at_once_in_flat_memory(tmp_path):
    """The grid is generated as points are needed: the first points of 10^9 are stored within
    seconds, and the sweep's memory does not grow with the grid."""
    values = [f"{2 ** i} KiB" for i in range(10)]
    spec = tiny(tmp_path, **{"    levels.SRAM.capacity: [512 B, 2 KiB]":
                             "    levels.SRAM.capacity: [" + ", ".join(values) + "]\n"
                             + "".join(f"    {field}: [" + ", ".join(map(str, range(1, 11))) + "]\n"
                                       for field in ("levels.DRAM.shared_bandwidth", "levels.SRAM.read_bandwidth",
                                                     "levels.SRAM.write_bandwidth", "levels.SRAM.block_size",
                                                     "levels.DRAM.block_size", "levels.DRAM.instances")),
                             "    compute.instances: [1, 2]": "    compute.instances: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]",
                             "    levels.SRAM.instances: [1, 2]": "    levels.SRAM.instances: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]",
                             '  constraints: ["SRAM.instances <= MAC.instances"]': "  constraints: []"})
    assert load_sweep(spec).size() == 10 ** 9
    _first_rows_in_flat_memory(spec, tmp_path / "big.sqlite")


def test_a_trillion_point_grid_of_scenarios_starts_at_once_in_flat_memory(tmp_path):
    """10^12 points, 10^9 of them scenario combinations: the grid and the scenario product stream too."""
    values = lambda unit: "[" + ", ".join(f"{i} {unit}" for i in range(1, 1001)) + "]"
    spec = tiny(tmp_path, **{"    levels.SRAM.capacity: [512 B, 2 KiB]":
                             f"    levels.SRAM.capacity: {values('B')}",
                             "    compute.instances: [1, 2]": "",
                             "    levels.SRAM.instances: [1, 2]": "",
                             '  constraints: ["SRAM.instances <= MAC.instances"]':
                             f"  scenarios:\n    levels.DRAM.shared_bandwidth: {values('B/cycle')}\n"
                             f"    levels.SRAM.read_bandwidth: {values('')}\n    levels.SRAM.write_bandwidth: {values('')}"})
    sweep = load_sweep(spec)
    assert sweep.size() == 10 ** 12 * len(sweep.workloads) and len(sweep.scenarios) == 3
    _first_rows_in_flat_memory(spec, tmp_path / "big.sqlite")


def _first_rows_in_flat_memory(spec, db):
    proc = subprocess.Popen([sys.executable, "-m", "storeloop.cli", "sweep", str(spec), "--db", str(db)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    rows, peak = 0, 0
    try:
        deadline = time.monotonic() + 40
        while time.monotonic() < deadline and rows < 3:
            time.sleep(1)
            with open(f"/proc/{proc.pid}/status") as f:
                peak = max(peak, *(int(line.split()[1]) for line in f if line.startswith("VmRSS")))
            if db.exists():
                with sqlite3.connect(db, timeout=5) as con:
                    made = con.execute("select count(*) from sqlite_master where name = 'points'").fetchone()[0]
                    # (the sweep creates the file a moment before its tables)
                    rows = con.execute("select count(*) from points").fetchone()[0] if made else 0
    finally:
        proc.kill()
        proc.wait()
    assert rows >= 3, proc.stderr.read().decode()[-2000:]
    assert peak < 600_000, f"{peak} kB resident"          # a list of 10^9 points would be tens of GB


def test_an_unreachable_dask_scheduler_fails_within_seconds(tmp_path, capsys):
    spec = tiny(tmp_path)
    t0 = time.monotonic()
    assert main(["sweep", str(spec), "--db", str(tmp_path / "r.sqlite"), "--dask", "tcp://127.0.0.1:9"]) == 2
    assert time.monotonic() - t0 < 15
    err = capsys.readouterr().err
    assert "cannot reach the Dask scheduler" in err and "Traceback" not in err


def _store_case(tmp_path, kind: str):
    path = tmp_path / "db.sqlite"
    if kind == "text":
        path.write_text("not a database\n")
    elif kind in ("foreign", "view", "newer", "users", "no-mapping"):
        con = sqlite3.connect(path)
        if kind == "foreign":
            con.execute("create table points (a, b)")
        elif kind == "users":                 # an unrelated program's database
            con.execute("create table users (id integer primary key, name text)")
            con.execute("insert into users (name) values ('ada')")
        elif kind == "no-mapping":            # storeloop's table without a column it always had
            from storeloop.sweeps.store import REQUIRED

            con.execute(f"create table points ({', '.join(c for c in REQUIRED if c != 'mapping')})")
        elif kind == "view":
            con.execute("create table t (sweep, key, params, workload, status)")
            con.execute("create view points as select * from t")
        else:
            con.execute("create table points (sweep, key, params, workload, status)")
            con.execute("pragma user_version = 99")
        con.commit()
        con.close()
    elif kind in ("truncated", "garbage"):
        run_sweep(load_sweep(tiny(tmp_path)), path, progress=False)
        data = path.read_bytes()
        path.write_bytes(data[: len(data) // 2] if kind == "truncated" else data[:4096] + os.urandom(8192))
    elif kind == "empty-db":
        sqlite3.connect(path).close()
    return path


@pytest.mark.parametrize("kind", ["text", "foreign", "view", "newer", "users", "no-mapping", "truncated", "garbage",
                                  "empty-db"])
def test_results_plot_and_sweep_refuse_what_is_not_a_store(kind, tmp_path, capsys):
    path = _store_case(tmp_path, kind)
    before = path.read_bytes()
    for args in (["results", str(path)], ["plot", str(path), "--out", str(tmp_path / "f")]):
        assert main(args) == 2, args
        err = capsys.readouterr().err
        assert str(path) in err and "Traceback" not in err and len(err.splitlines()) <= 25, err
    if kind in ("text", "foreign", "view", "newer", "users", "no-mapping"):
        assert main(["sweep", str(tiny(tmp_path)), "--db", str(path)]) == 2
        err = capsys.readouterr().err
        assert str(path) in err and "Traceback" not in err and len(err.splitlines()) <= 25, err
        assert path.read_bytes() == before, "sweep wrote to a file that is not its store"


def test_an_old_store_migrated_by_a_sweep_reads_whole(tmp_path, capsys):
    """A store of the first schema (user_version 1, no added columns) that a new sweep extends:
    its old rows and the new ones read together."""
    from storeloop.sweeps.store import REQUIRED

    path = tmp_path / "old.sqlite"
    con = sqlite3.connect(path)
    con.execute(f"create table points ({', '.join(REQUIRED)}, primary key (sweep, key))")
    con.execute("insert into points (sweep, key, params, workload, status, cycles, energy_pJ) "
                "values ('old', 'k1', '{\"levels.RF.capacity\": \"8 words\"}', 'matvec.yaml', 'ok', 100, 5.0)")
    con.execute("pragma user_version = 1")
    con.commit()
    con.close()
    assert main(["sweep", str(tiny(tmp_path)), "--db", str(path)]) == 0
    capsys.readouterr()
    assert main(["results", str(path), "--format", "csv"]) == 0
    out = capsys.readouterr().out
    df = read_results(path)
    assert "old" in set(df["sweep"]) and len(set(df["sweep"])) == 2, out


def test_results_into_a_closed_pipe_exits_quietly(tmp_path):
    db = tmp_path / "r.sqlite"
    run_sweep(load_sweep(tiny(tmp_path)), db, progress=False)
    p = subprocess.run(f"{sys.executable} -m storeloop.cli results {db} --json --all | head -c 10", shell=True,
                       capture_output=True, text=True, timeout=120)
    assert "Traceback" not in p.stderr and "BrokenPipe" not in p.stderr, p.stderr


class _FailingCommits:
    """A store connection whose commits fail after ``ok`` of them, as on a full disk."""

    def __init__(self, con, ok: int):
        self.con, self.ok = con, ok

    def commit(self):
        if self.ok <= 0:
            raise sqlite3.OperationalError("database or disk is full")
        self.ok -= 1
        return self.con.commit()

    def __getattr__(self, name):
        return getattr(self.con, name)


def test_a_full_disk_stops_the_sweep_cleanly_and_it_resumes(tmp_path, monkeypatch):
    import storeloop.sweeps.run as run
    from storeloop.errors import StoreloopError
    from storeloop.sweeps.store import open_store

    spec, db = tiny(tmp_path), tmp_path / "r.sqlite"
    monkeypatch.setattr(run, "open_store", lambda path: _FailingCommits(open_store(path), ok=4))
    with pytest.raises(StoreloopError, match="disk is full") as e:
        run_sweep(load_sweep(spec), db, progress=False)
    assert "committed before are kept" in str(e.value)
    kept = read_results(db, "tiny")
    assert 1 <= len(kept) < 6 and set(kept["status"]) <= {"ok", "invalid"}
    monkeypatch.undo()
    again = run_sweep(load_sweep(spec), db, progress=False)
    assert again["done_before"] == len(kept) and again["run"] == 6 - len(kept)
    assert len(read_results(db, "tiny")) == 6


def _mount_small(folder, size: str) -> bool:
    """A real size-limited file system (tmpfs) at ``folder``; False where mounting is not allowed."""
    folder.mkdir(exist_ok=True)
    if os.geteuid() != 0 or shutil.which("mount") is None:
        return False
    return subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)],
                          capture_output=True).returncode == 0


def test_a_sweep_on_a_real_full_file_system_keeps_its_points_and_resumes(tmp_path):
    """The store on a 192 KiB tmpfs: the disk fills mid-sweep, the sweep stops with a one-line
    error, every committed point can be read, and once there is room the next run resumes."""
    from storeloop.errors import StoreloopError

    small = tmp_path / "small"
    if not _mount_small(small, "192k"):
        pytest.skip("mounting a tmpfs needs root (the injected full disk above covers the logic)")
    try:
        values = ", ".join(f"{i} words" for i in range(8, 8 + 600))
        spec = tiny(tmp_path, **{"    levels.SRAM.capacity: [512 B, 2 KiB]": f"    levels.SRAM.capacity: [{values}]",
                                 "    levels.SRAM.instances: [1, 2]": "    levels.SRAM.instances: [3]",
                                 "    compute.instances: [1, 2]": "    compute.instances: [1]",
                                 '  constraints: ["SRAM.instances <= MAC.instances"]': "  constraints: []"})
        db = small / "r.sqlite"
        with pytest.raises(StoreloopError, match="disk is full.*committed before are kept") as e:
            run_sweep(load_sweep(spec), db, progress=False)
        assert len(str(e.value).splitlines()) <= 25
        kept = read_results(db, "tiny")
        assert 0 < len(kept) < 600 and kept["key"].is_unique
        subprocess.run(["mount", "-o", "remount,size=64m", str(small)], check=True)
        again = run_sweep(load_sweep(spec), db, progress=False)
        assert again["done_before"] == len(kept) and again["run"] == 600 - len(kept)
        assert len(read_results(db, "tiny")) == 600
    finally:
        subprocess.run(["umount", "-l", str(small)], capture_output=True)


def test_grids_of_more_than_a_thousand_points_run_through(tmp_path):
    """Keys go to the store's temporary table in batches of 1,000; a batch must not leave a
    transaction open for the next point's claim (it once stopped every sweep at point 1,000)."""
    values = ", ".join(f"{i} words" for i in range(8, 8 + 1100))
    spec = tiny(tmp_path, **{"    levels.SRAM.capacity: [512 B, 2 KiB]": f"    levels.SRAM.capacity: [{values}]",
                             "    levels.SRAM.instances: [1, 2]": "    levels.SRAM.instances: [3]",
                             "    compute.instances: [1, 2]": "    compute.instances: [1]",
                             '  constraints: ["SRAM.instances <= MAC.instances"]': "  constraints: []"})
    counts = run_sweep(load_sweep(spec), tmp_path / "r.sqlite", workers=2, progress=False)
    assert counts["run"] == 1100 and counts["invalid"] == 1100          # 3 SRAMs over 1 MAC: each invalid, fast


def test_results_read_as_a_user_reads_them(tmp_path, capsys):
    """results: parameters first and sorted as quantities (512 B < 1 KiB < 2 KiB), Result's units,
    what binds each point with its runner-up and margin, per-level cycles, no JSON in the table;
    the raw columns stay for scripts."""
    import io

    import pandas as pd

    spec = tiny(tmp_path, **{"[512 B, 2 KiB]": "[2 KiB, 512 B, 1 KiB]"})
    db = tmp_path / "r.sqlite"
    run_sweep(load_sweep(spec), db, progress=False)
    df = read_results(db)
    assert list(df.columns[:2]) == ["sweep", "workload"]
    assert set(df.columns[2:5]) == {"levels.SRAM.capacity", "levels.SRAM.instances", "compute.instances"}
    ok = df[df["status"] == "ok"]
    for _, row in ok.iterrows():
        levels = json.loads(row["levels"])
        # what binds: the most busy ports (not the compute floor of a level's cycles), the compute on a tie
        top = max(v["busy"] for v in levels.values())
        most = [k for k, v in levels.items() if v["busy"] == top]
        assert row["bound_by"] in ([k for k in most if levels[k].get("compute")] or most)
        assert row["cycles"] == max(v["cycles"] for v in levels.values()) >= top
        assert all(row[f"cycles.{k}"] == v["cycles"] for k, v in levels.items())
        assert row["time_s"] == row["cycles"] / row["clock_hz"] and row["energy_J"] == row["energy_pJ"] / 1e12
        assert row["margin"] >= 0 and row["runner_up"] in levels
    assert main(["results", str(db)]) == 0
    table = capsys.readouterr().out
    assert "{" not in table and "bound_by" in table.splitlines()[0]
    import re

    first = [re.search(r"\d+ K?i?B\b", line).group(0) for line in table.splitlines()[1:]]
    assert first.index("512 B") < first.index("1 KiB") < first.index("2 KiB"), first
    assert main(["results", str(db), "--format", "csv"]) == 0
    csv = pd.read_csv(io.StringIO(capsys.readouterr().out))
    assert {"params", "levels", "energy_pJ", "on_chip_area_um2", "bound_by"} <= set(csv.columns)


def _open_at(path, barrier, out):
    from storeloop.sweeps.store import open_store

    barrier.wait()
    try:
        open_store(path).close()
        out.put(None)
    except Exception as exc:                  # noqa: BLE001 -- reported to the test
        out.put(str(exc))


def test_two_sweeps_creating_one_new_store_at_once_both_open_it(tmp_path):
    """SQLite refuses a second WAL switch of a new file at once ('database is locked', no busy
    wait): two sweeps started together on a new store both open it (it failed in most rounds)."""
    import multiprocessing

    ctx = multiprocessing.get_context("fork")
    for i in range(20):
        path, barrier, out = tmp_path / f"r{i}.sqlite", ctx.Barrier(2), ctx.Queue()
        procs = [ctx.Process(target=_open_at, args=(path, barrier, out)) for _ in range(2)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(60)
        assert [out.get(timeout=5) for _ in procs] == [None, None], f"round {i}"


def _flip_a_bit_in(path, text: str) -> None:
    """One bit of the middle byte of ``text`` (a cell, found once in the store file) flipped, after a
    checkpoint so that the row sits in the main file."""
    con = sqlite3.connect(path)
    con.execute("pragma wal_checkpoint(truncate)")
    con.close()
    data, needle = bytearray(path.read_bytes()), text.encode()
    at = data.find(needle)
    assert at >= 0 and data.find(needle, at + 1) < 0
    data[at + len(needle) // 2] ^= 0x01
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("cell", ["params", "levels"])
def test_a_flipped_bit_in_a_row_is_reported_not_served(cell, tmp_path, capsys):
    """Each row carries a checksum of its cells: a bit flipped since it was written leaves the row
    out of every reader (with its sweep and key), `results --verify` lists it (exit 2), and the
    next sweep runs its point again."""
    db = tmp_path / "r.sqlite"
    run_sweep(load_sweep(tiny(tmp_path)), db, progress=False)
    con = sqlite3.connect(db)
    key, text = con.execute(f"select key, {cell} from points where status = 'ok' order by key").fetchone()
    con.close()
    assert main(["results", str(db), "--verify"]) == 0
    capsys.readouterr()
    _flip_a_bit_in(db, text)
    with pytest.warns(UserWarning, match="changed since they were written"):
        df = read_results(db)
    assert len(df) == 5 and key not in set(df["key"])
    assert main(["results", str(db), "--verify"]) == 2
    out = capsys.readouterr()
    assert f"key {key}" in out.out and "1 changed since written" in out.out and "fail their checksum" in out.err
    counts = run_sweep(load_sweep(tiny(tmp_path)), db, progress=False)
    assert counts["run"] == 1
    assert main(["results", str(db), "--verify"]) == 0
