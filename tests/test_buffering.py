"""Buffering made explicit (issue 29, item 5): ``buffering: double`` charges a second copy's area,
``single`` serializes a level's fills with the use of its contents, and every result says which
levels its mapping needs double-buffered."""

import dataclasses
import math

import pytest

import storeloop as sl
from conftest import ROOT
from storeloop.cli import main
from storeloop.errors import SpecError
from storeloop.model import costs


@pytest.fixture(scope="module")
def thesis():
    arch = sl.load_arch(ROOT / "arch/onionchopper.yaml")
    w = sl.load_workload(ROOT / "workloads/onionpir-1GiB.yaml")
    table = sl.price(arch)
    m = sl.map(arch, w, table, time_limit=30).mapping
    return arch, w, table, m


def _with(arch, **buffering):
    return dataclasses.replace(arch, levels=tuple(dataclasses.replace(lvl, buffering=buffering.get(lvl.name))
                                                  for lvl in arch.levels))


def test_double_buffering_charges_a_second_copy_and_nothing_else(thesis):
    arch, w, table, m = thesis
    base = sl.evaluate(arch, w, m, table)
    doubled = _with(arch, SRAM="double")
    r = sl.evaluate(doubled, w, m, sl.price(doubled))
    sram = {lv.name: lv for lv in base.levels}["SRAM"]
    assert r.cycles == base.cycles and r.energy_pJ == pytest.approx(base.energy_pJ, rel=1e-12)
    assert r.on_chip_area_um2 == pytest.approx(base.on_chip_area_um2 + sram.area_total_um2, rel=1e-12)
    assert "double-buffered" in {lv.name: lv for lv in r.levels}["SRAM"].energy_source


def test_single_buffering_serializes_fill_and_use(thesis):
    """A single-buffered level's time is its fill time plus the longer of its own reads and updates and
    everything below it, recomputed here from the result's per-level counts and the arch's ports."""
    arch, w, table, m = thesis
    base = sl.evaluate(arch, w, m, table)
    names = [lv.name for lv in arch.levels]
    for name in names[1:]:
        single = _with(arch, **{name: "single"})
        r = sl.evaluate(single, w, m, table)
        L = names.index(name)
        lvl, res, parent = arch.levels[L], base.levels[L], base.levels[L - 1]

        def port(level, reads, writes):
            return max([0.0] + [words / bw for bw, words in ((level.read_bandwidth, reads),
                       (level.write_bandwidth, writes), (level.shared_bandwidth, reads + writes)) if bw and words])

        per = res.utilized_instances
        fills = sum(t.fills_total for t in res.tensors.values()) / per
        reads = sum(t.reads_total for t in res.tensors.values()) / per
        updates = sum(t.updates_total for t in res.tensors.values()) / per
        parent_reads = sum(t.reads_total for t in parent.tensors.values()) / parent.utilized_instances
        fill = max(port(lvl, 0, fills), port(arch.levels[L - 1], parent_reads, 0))
        below = max([base.compute_cycles] + [lv.cycles for lv in base.levels[L + 1:]])
        expected = max([math.ceil(fill + max(below, port(lvl, reads, updates)))] + [lv.cycles for lv in base.levels[:L]])
        assert r.cycles == expected >= base.cycles, name
        assert r.buffering[name]["declared"] == "single"
        assert r.buffering[name]["needs_double"] == (expected > base.cycles)
        assert base.buffering[name]["single_cycles"] == expected
    # on the thesis's arch the DRAM must overlap its fills (else the Disk stream stalls); SRAM and RF need not
    assert [n for n, b in base.buffering.items() if b["needs_double"]] == ["DRAM"]


def test_single_buffering_is_free_with_unlimited_ports():
    assert costs.buffered_cycles([100, 80, 60], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0], 50, {1, 2}) == 100
    assert costs.buffered_cycles([100, 80, 60], [10.0, 30.0, 20.0], [5.0, 70.0, 40.0], 50, set()) == 100
    # innermost single: 20 + max(50, 40) = 70; then the middle one: 30 + max(70, 70) = 100; top 100
    assert costs.buffered_cycles([100, 80, 60], [10.0, 30.0, 20.0], [5.0, 70.0, 40.0], 50, {1, 2}) == 100
    assert costs.buffered_cycles([100, 80, 60], [10.0, 31.0, 20.0], [5.0, 70.0, 40.0], 50, {1, 2}) == 101


def test_buffering_values_are_checked(tmp_path):
    text = (ROOT / "arch/onionchopper.yaml").read_text()
    bad = tmp_path / "bad.yaml"
    bad.write_text(text.replace("      read_bandwidth: 4 ", "      buffering: triple\n      read_bandwidth: 4 "))
    with pytest.raises(SpecError) as info:
        sl.load_arch(bad)
    assert "bad.yaml:" in str(info.value) and "buffering" in str(info.value) and "'double'" in str(info.value)


def test_the_mapper_searches_a_single_buffered_level(thesis):
    """With the DRAM single-buffered, the mapping found for overlapped fills stalls (its fills wait
    for use); the mapper, searching with the serialized time, does at least as well, and its report
    prices exactly what the model prices."""
    arch, w, table, m = thesis
    single = _with(arch, DRAM="single")
    found = sl.map(single, w, table, budget=1_000_000)
    stalled = sl.evaluate(single, w, m, table)
    assert stalled.cycles > sl.evaluate(arch, w, m, table).cycles          # the overlap was worth something
    assert found.result.cycles <= stalled.cycles
    assert found.result == sl.evaluate(single, w, found.mapping, table)
    assert found.result.buffering["DRAM"]["declared"] == "single"


def _add_attribute(node, level: str, key: str, value) -> bool:
    """Set ``key`` in the attributes of the Timeloop component named ``level`` (in any subtree)."""
    if isinstance(node, dict):
        if node.get("name") == level and "class" in node:
            node.setdefault("attributes", {})[key] = value
            return True
        return any(_add_attribute(v, level, key, value) for v in node.values())
    return isinstance(node, list) and any(_add_attribute(v, level, key, value) for v in node)


def test_timeloop_multiple_buffering_leaves_tiles_a_share_of_the_depth(tmp_path):
    """Timeloop's ``multiple_buffering: m`` (BufferLevel::ParseSpecs): tiles must fit in
    floor(size / m). On every corpus case, the fullest level gets m = 2: the reference mapping is
    refused exactly where its tiles take more than half, and priced as before elsewhere."""
    import yaml

    from storeloop.errors import MappingError
    from storeloop.formats.load import load_energy_table

    refused = kept = 0
    for case in sorted(p for p in (ROOT / "tests/corpus").iterdir() if (p / "expected.json").exists()):
        arch = sl.load_arch(case / "arch.yaml")
        w = sl.load_workload(case / "problem.yaml")
        m = sl.load_mapping(case / "mapping.yaml", arch, w)
        table = load_energy_table(arch, case / "ERT.yaml", case / "ART.yaml")
        base = sl.evaluate(arch, w, m, table)
        sized = [(sum(t.tile for t in lv.tensors.values() if t.kept) / lvl.size_words, lvl, lv)
                 for lvl, lv in zip(arch.levels, base.levels) if lvl.size_words]
        if not sized:
            continue
        _, lvl, lv = max(sized, key=lambda s: s[0])
        doc = yaml.safe_load((case / "arch.yaml").read_text())
        assert _add_attribute(doc, lvl.name, "multiple_buffering", 2)
        (tmp_path / "arch.yaml").write_text(yaml.safe_dump(doc))
        halved = sl.load_arch(tmp_path / "arch.yaml")
        assert {x.name: x.size_words for x in halved.levels}[lvl.name] == lvl.size_words // 2
        used = sum(t.tile for t in lv.tensors.values() if t.kept)
        if used > lvl.size_words // 2:
            with pytest.raises(MappingError, match="capacity"):
                sl.evaluate(halved, w, m, table)
            refused += 1
        else:
            r = sl.evaluate(halved, w, m, table)
            assert (r.cycles, r.energy_pJ) == (base.cycles, base.energy_pJ)
            kept += 1
    assert refused >= 10 and kept >= 10, (refused, kept)


def test_double_buffering_exports_as_timeloop_multiple_buffering(tmp_path):
    """A double-buffered level goes to Timeloop as the depth of both copies with
    multiple_buffering: 2; read back, the same capacity, cycles, energy and (two-copy) area."""
    text = (ROOT / "arch/onionchopper.yaml").read_text()
    src = tmp_path / "double.yaml"
    src.write_text(text.replace("      read_bandwidth: 4 ", "      buffering: double\n      read_bandwidth: 4 "))
    out = tmp_path / "out"
    wl, mp = str(ROOT / "workloads/onionpir-64GiB.yaml"), str(ROOT / "mappings/onionchopper-thesis-best.yaml")
    assert main(["export", str(src), wl, mp, "--out", str(out)]) == 0
    exported = (out / "arch.yaml").read_text()
    assert "multiple_buffering: 2" in exported and "depth: 256" in exported
    arch, back = sl.load_arch(src), sl.load_arch(out / "arch.yaml")
    assert {x.name: x.size_words for x in back.levels}["SRAM"] == {x.name: x.size_words for x in arch.levels}["SRAM"]
    w = sl.load_workload(wl)
    from storeloop.formats.load import load_energy_table

    mine = sl.evaluate(arch, w, sl.load_mapping(mp, arch, w), sl.price(arch))
    theirs = sl.evaluate(back, sl.load_workload(out / "problem.yaml"),
                         sl.load_mapping(out / "mapping.yaml", back, sl.load_workload(out / "problem.yaml")),
                         load_energy_table(back, out / "ERT.yaml", out / "ART.yaml"))
    assert (theirs.cycles, theirs.energy_pJ) == (mine.cycles, pytest.approx(mine.energy_pJ, rel=1e-12))
    assert theirs.area_um2 == pytest.approx(mine.area_um2, rel=1e-12)


@pytest.mark.parametrize("value", ["0", "0.5", "abc"])
def test_timeloop_multiple_buffering_below_one_is_refused_at_its_line(value, tmp_path, capsys):
    case = ROOT / "tests/corpus/a1-dram-sram-mac-16b__cnn-5x5__b3-r1"
    text = (case / "arch.yaml").read_text()
    assert "depth: 2048" in text
    (tmp_path / "arch.yaml").write_text(text.replace("depth: 2048,", f"depth: 2048, multiple_buffering: {value},", 1))
    assert main(["model", str(tmp_path / "arch.yaml"), str(case / "problem.yaml"), str(case / "mapping.yaml")]) == 2
    err = capsys.readouterr().err
    assert "arch.yaml:" in err and "multiple_buffering" in err and "Traceback" not in err
