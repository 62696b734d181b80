"""Each thesis figure function on a small fixed results set (tests/data/thesis-small.sqlite: rows of
a real `storeloop reproduce --quick` run): the right series, axes, labels and values."""

import json
import math
from pathlib import Path

import matplotlib
import pytest

matplotlib.use("Agg")

from storeloop.studies import reproduce  # noqa: E402
from storeloop.studies import ssd as ssd_study  # noqa: E402
from storeloop.studies import thesis_figures as T  # noqa: E402
from storeloop.formats.load import load_arch  # noqa: E402
from storeloop.sweeps import read_results  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DB = ROOT / "tests/data/thesis-small.sqlite"


@pytest.fixture(scope="module")
def frames():
    return {k: read_results(DB, f"small-{s}") for k, s in
            (("initial", "thesis-initial"), ("refined", "thesis-refined"), ("sizes", "db-sizes"))}


def _points(ax):
    """(x, y) of every scatter collection and line of ``ax``."""
    out = []
    for c in ax.collections:
        out += [tuple(p) for p in c.get_offsets()]
    for ln in ax.get_lines():
        out += list(zip(ln.get_xdata(), ln.get_ydata()))
    return out


def _no_offset(ax):
    for axis in (ax.xaxis, ax.yaxis):
        f = axis.get_major_formatter()
        assert not getattr(f, "get_useOffset", lambda: False)()


def test_fig_6_1_cycles_by_compute_units_with_both_bounds(frames):
    fig = T.fig_6_1(frames["initial"])
    ax = fig.axes[0]
    d = T.frame(frames["initial"])
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    # one colour series per compute-unit count, each with that count's designs
    units = sorted(d[T.UNITS + "#"].unique())
    series = [c for c in ax.collections if len(c.get_offsets())]
    assert len(series) == len(units)
    assert sum(len(c.get_offsets()) for c in series) == len(d)
    levels = {round(ln.get_ydata()[0]) for ln in ax.get_lines()}
    assert {d["computes"].max(), d["lower_bound_cycles"].min(), T.THESIS["cycles_ssd_bound"]} <= levels
    # one compute unit: one MAC per cycle, the Fig. 6-1 upper cluster
    one = d[d[T.UNITS + "#"] == 1]
    assert (one["cycles"] >= one["computes"]).all()
    assert "6-1" in ax.get_title() and "area" in ax.get_xlabel()
    _no_offset(ax)


def test_fig_6_2_and_6_3_refined_sweep_zero_based(frames):
    d = T.frame(frames["refined"])
    ax = T.fig_6_2(frames["refined"]).axes[0]
    assert ax.get_ylim()[0] == 0 and ax.get_xscale() == "log"
    points = set(_points(ax))
    assert all((r["on_chip_area_mm2"], r["cycles"]) in points for _, r in d.iterrows())   # every design, at its values
    ax = T.fig_6_3(frames["refined"]).axes[0]
    assert ax.get_ylim()[0] == 0
    xs_ys = set(_points(ax))
    for _, r in d.iterrows():                           # every design is one point, at its own values
        assert (r["on_chip_area_mm2"], r["energy_J"]) in xs_ys
    assert (T.THESIS["on_chip_area_mm2"], T.THESIS["energy_J"]) in xs_ys
    front = [ln for ln in ax.get_lines() if ln.get_label() == "Pareto front"][0]
    ys = list(front.get_ydata())
    assert ys == sorted(ys, reverse=True)               # a front: energy falls as area grows


def test_fig_6_4_keeps_only_fast_designs(frames):
    d = T.frame(frames["refined"])
    fast = d[d["cycles"] <= 1.01 * d["cycles"].min()]
    ax = T.fig_6_4(frames["refined"]).axes[0]
    n = sum(len(c.get_offsets()) for c in ax.collections) - 1        # minus the thesis's star
    assert n == len(fast)
    assert f"{len(fast)} designs" in ax.get_title()


def test_fig_6_5_rf_depth_lines_above_the_least_bound_with_bars_to_each_bound(frames):
    d = T.fast_only(T.frame(frames["refined"]))
    ax = T.fig_6_5(frames["refined"]).axes[0]
    series = {c.get_label(): c for c in ax.containers}            # one errorbar per SRAM size
    lines = {k: c.lines[0] for k, c in series.items()}
    sizes = sorted(d[T.SRAM + "#"].unique())[:4]
    assert len(lines) == len(sizes)
    shown = d[d[T.SRAM + "#"].isin(sizes)]
    base = shown["lower_bound_energy_pJ"].min() / 1e12
    g = d[d[T.SRAM + "#"] == sizes[0]].sort_values(T.RF + "#")
    ln = lines[f"SRAM {T._label(T.SRAM, sizes[0])}"]
    assert list(ln.get_xdata()) == list(g[T.RF + "#"])
    assert all(math.isclose(a, (b - base) * 1e3) for a, b in zip(ln.get_ydata(), g["energy_J"]))
    # each point's bar ends at its own energy lower bound
    bars = series[f"SRAM {T._label(T.SRAM, sizes[0])}"].lines[2][0]
    lows = sorted(min(seg[:, 1]) for seg in bars.get_segments())
    want = sorted((g["lower_bound_energy_pJ"] / 1e12 - base) * 1e3)
    assert all(math.isclose(a, b, abs_tol=1e-9) for a, b in zip(lows, want))
    assert ax.get_xscale() == "log" and ax.get_ylim()[0] == 0
    assert f"{base:.3f} J" in ax.get_ylabel()


def test_fig_6_6_and_roofline_from_the_stored_breakdown(frames):
    best = T.frame(frames["refined"]).iloc[0]
    arch = load_arch(ROOT / "arch/onionchopper.yaml")
    fig = T.fig_6_6(best, arch)
    texts = [t.get_text() for t in fig.axes[0].texts if t.get_text()]      # (arrows are empty texts)
    assert [t.split("  ")[0] for t in texts] == [f"{lvl.instances} x {lvl.name}" for lvl in arch.levels] + \
        [f"{arch.compute.instances} x {arch.compute.name}"]
    levels = json.loads(best["levels"])
    share = 100 * levels["Disk"]["energy_pJ"] / sum(v["energy_pJ"] for v in levels.values())
    assert f"{share:.2f} % of energy" in texts[0]
    ax = T.roofline(best).axes[0]
    bars = [p.get_width() for p in ax.patches if p.get_width() == p.get_width()]     # (no bar: no limit)
    need = [v.get("busy", v["cycles"]) for v in levels.values()]
    assert sorted(bars) == sorted(c for c in need if c)
    assert max(bars) == best["cycles"]                     # the bottleneck reaches the achieved line


def test_the_roofline_bars_what_each_level_needs_on_its_own():
    """A compute-bound design: its levels' bars are their own ports' cycles (``busy``), below the
    compute's, not Timeloop's per-level cycles (floored at the compute's), so only the compute
    units reach the achieved line."""
    from storeloop import evaluate, load_mapping, load_workload, price

    arch = load_arch(ROOT / "arch/onionchopper.yaml")
    wl = load_workload(ROOT / "workloads/onionpir-64GiB.yaml")
    r = evaluate(arch, wl, load_mapping(ROOT / "mappings/onionchopper-thesis-best.yaml", arch, wl), price(arch))
    ax = T.roofline(r).axes[0]
    widths = {t.get_text(): p.get_width() for t, p in zip(ax.get_yticklabels(), ax.patches)}
    assert all(lr.busy for lr in r.levels)                 # (every level here has a bandwidth limit)
    assert widths == {lr.name: lr.busy for lr in r.levels} | {r.compute_name: r.compute_cycles}
    assert any(lr.busy < lr.cycles for lr in r.levels)     # some level is faster than Timeloop's floor says
    assert [n for n, w in widths.items() if w + 1 >= r.cycles] == [r.bound_by.split(" ")[0]]


def test_database_size_figures(frames):
    s = T.sized(frames["sizes"])
    onion = s[s["scheme"] == "onionpir"]
    ax = T.fig_6_7(frames["sizes"], 10.0).axes[0]
    line = [ln for ln in ax.get_lines() if ln.get_label() == "onionpir"][0]
    assert list(line.get_xdata()) == list(onion["db_GiB"]) and list(line.get_ydata()) == list(onion["GB_per_s"])
    assert ax.get_xscale() == "log" and ax.get_ylim()[0] == 0
    assert any(ln.get_ydata()[0] == 10.0 for ln in ax.get_lines())          # the SSD line
    ax = T.fig_6_8(frames["sizes"], 1e8).axes[0]
    cpu = [ln for ln in ax.get_lines() if ln.get_label().startswith("CPU")][0]
    assert list(cpu.get_ydata()) == list(onion["computes"] / 1e8)
    assert ax.get_yscale() == "log" and "271.9" in ax.get_title()
    for fn, col in ((T.fig_6_9, "J_per_GB"), (T.fig_6_10, "power_W")):
        ax = fn(frames["sizes"]).axes[0]
        assert list([ln for ln in ax.get_lines() if ln.get_label() == "onionpir"][0].get_ydata()) == list(onion[col])
    for fn, col in ((T.fig_6_11, "GB_per_s"), (T.fig_6_12, "J_per_GB"), (T.fig_6_13, "power_W")):
        ax = fn(frames["sizes"]).axes[0]
        got = {ln.get_label(): list(ln.get_ydata()) for ln in ax.get_lines()}
        assert set(got) == set(s["scheme"])
        for scheme, g in s.groupby("scheme"):
            assert got[scheme] == list(g[col])
        assert ax.get_ylim()[0] == 0 and ax.get_legend().get_title().get_text() == "scheme"
        _no_offset(ax)


def test_save_writes_png_and_pdf(frames, tmp_path):
    paths = T.save(T.fig_6_11(frames["sizes"]), tmp_path / "f")
    assert [p.suffix for p in paths] == [".png", ".pdf"] and all(p.stat().st_size > 1000 for p in paths)


def test_report_reads_every_number_from_the_store(frames, tmp_path):
    # the refined spec is needed to rebuild the pick's arch; write the small sweep's spec beside
    spec = reproduce._specs(True, ROOT)["refined"]
    f = tmp_path / "small-thesis-refined.sweep.yaml"
    import yaml

    f.write_text(yaml.safe_dump({"sweep": spec}))
    cpu = {"macs_per_s": 1e8, "db_bytes": 2**26}
    text = reproduce.report(frames, cpu, True, {"x": 1.0}, f)
    design = T.frame(frames["refined"])
    row = design[(design[T.SRAM] == "4 KiB") & (design[T.RF] == "32 words")].iloc[0]
    assert f"{int(row['cycles']):,}" in text and f"{row['energy_pJ'] / 1e12:.2f} J" in text
    onion = T.sized(frames["sizes"])
    big = onion[onion["scheme"] == "onionpir"].iloc[-1]
    assert f"{big['computes'] / 1e8 / big['time_s']:.1f}x" in text
    for published in ("12,833,318,209", "169.09 J", "26.35 W", "6.87 mm²", "64.99 %", "33.43 %", "99.54 %",
                      "271.9x", "89 %", "29 min"):
        assert published in text


def test_reproduce_end_to_end_on_tiny_grids(tmp_path, monkeypatch):
    """The whole command (sweeps, CPU baseline, 13 figures + roofline, reproduction.md) on 1-4 points
    per sweep; the real grids only change the number of points."""
    real = reproduce._specs

    def tiny(quick, root):
        specs = real(True, root)
        specs["initial"]["parameters"] = {"levels.SRAM.instances": [2], "levels.RF.capacity": ["32 words"],
                                          "levels.RF.instances+compute.instances": [1, 2]}
        specs["initial"]["constraints"] = []
        specs["refined"]["parameters"] = {"levels.SRAM.capacity": ["4 KiB"], "levels.RF.capacity": ["32 words"]}
        specs["sizes"]["workloads"] = [str(ROOT / f"workloads/{s}-{z}.yaml") for s in ("onionpir", "simplepir")
                                       for z in ("512MiB", "1GiB")]
        return specs

    real_ssd = ssd_study.ssd_specs

    def tiny_ssd(quick, root):
        specs = real_ssd(True, root)
        specs["speed"]["parameters"] = {"levels.Disk.ssd.channels": [2, 8]}
        specs["placement"]["parameters"] = {"levels.Disk.ssd.accelerator": ["internal", "host"],
                                            "levels.Disk.ssd.host.pcie_gen": [4]}
        return specs

    monkeypatch.setattr(reproduce, "_specs", tiny)
    monkeypatch.setattr(ssd_study, "ssd_specs", tiny_ssd)
    monkeypatch.setattr(reproduce, "ssd_specs", tiny_ssd)      # (run in one pool with the others first)
    units = "levels.SRAM.instances+levels.RF.instances+compute.instances"
    monkeypatch.setattr(reproduce.studies, "QUICK", {
        "set": {"levels.SRAM.capacity": ["4 KiB"], "levels.RF.capacity": ["32 words"], units: [1, 2]},
        "set_sizes": ("512MiB",), "batches": (1, 2), "units": [2, 4], "first_dims": (256, 1024), "db_bytes": 2**30})
    monkeypatch.setattr("storeloop.studies.reproduce.macs_per_second", lambda w, repeats=3: 5e7)
    monkeypatch.chdir(tmp_path.parent)                     # a relative --out, as the command's default
    done = reproduce.run(Path(tmp_path.name), quick=True, workers=1)
    names = {p.stem for p in done["figures"]}
    thesis = {n for n in names if n.startswith(("fig-6-", "roofline"))}
    assert len(thesis) == 14 and {f"fig-6-{i:02d}" for i in range(1, 14)} <= {n[:8] for n in thesis}
    ssd = {"ssd-3a-access-pattern", "ssd-3b-speed-vs-architecture", "ssd-3c-disk-energy", "ssd-3d-placement"}
    studies = {"study-workload-set", "study-batching", "study-dimension-choice"}
    assert names - thesis == {"copa", "fidr", "rotation", "p4-enckv"} | ssd | studies   # a figure per seed system
    assert all(p.stat().st_size > 1000 for p in done["figures"])
    text = done["report"].read_text()
    assert "| cycles | 12,833,318,209 | 13,811,004,212 |" in text
    assert text.count("\n## ") >= 6 and "| rotation cores for 10 Gb/s | 6 | 6 |" in text
    # how each sweep's searches ended, counted from the store
    rows = [line for line in text.splitlines() if line.startswith(("| initial |", "| refined |"))]
    assert len(rows) == 2 and rows[1].startswith("| refined | 1 |")
    assert all(sum(int(c) for c in r.split("|")[3:7]) == int(r.split("|")[2]) for r in rows)
    assert json.loads((tmp_path / "cpu.json").read_text())["macs_per_s"] == 5e7
    # the SSD questions: the thesis's mapping reads randomly and the mapper's streams, proven;
    # behind PCIe 4.0 x4 the accelerator is slower than on the flash channels
    assert "# The Disk as an SSD" in text and all(f"## 3{q}:" in text for q in "abcd")
    assert "| SSD model | thesis's mapping | random |" in text
    assert "| SSD model | storeloop map | sequential | 12,920,182,272 | 6.46 s |" in text and "| optimal |" in text
    rows = {line.split("|")[1].strip(): float(line.split("|")[3].split()[0]) for line in text.splitlines()
            if line.startswith(("| on the flash channels", "| behind PCIe"))}
    assert rows["behind PCIe 4.0 x4"] > rows["on the flash channels"]
    # the whole-server studies: every scheme at 512 MiB, 2 designs; the thesis's design is the only one
    # with 2 units, so it ranks first; a batch of 2 makes its 2 units bind instead of the Disk
    assert "# One design for a workload set" in text and "on 4 workloads" in text
    assert "Best across the set: 2 x (SRAM 4 KiB, RF 32 words, ModMAC)" in text
    assert "| 2 | 1 x (SRAM 4 KiB, RF 32 words, ModMAC) |" in text
    assert "| 1 | " in text and "| 2 | " in text and "stops being Disk-bound at batch 2" in text
    assert "| 256 | 4 | 231,717,274 |" in text and "| 1024 | " in text      # the 1 GiB query of docs/query.md
    assert "# Buffering" in text and "need double buffering only at DRAM" in text


def test_cpu_baseline_computes_the_pir_einsum_exactly():
    from storeloop.studies import cpu
    from storeloop.workloads.pir import pir_workload

    w = pir_workload("t", {"M": 2, "N": 3, "P": 2, "Q": 1, "J": 4, "K": 2, "C": 2, "D": 8})
    cpu.check(w)                                   # against an exact integer einsum, mod each modulus
    assert cpu.macs_per_second(w, repeats=1) > 0
