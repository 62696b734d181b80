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
