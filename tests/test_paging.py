"""Disk access granularity (issue: the thesis's first limitation, ch. 7): a transfer whose
contiguous run is shorter than a page pays for the whole page, in bandwidth and energy."""

import dataclasses

import pytest

from conftest import ROOT
from storeloop.energy import price
from storeloop.errors import SpecError
from storeloop.mapper import map_workload
from storeloop.model.evaluate import evaluate
from storeloop.formats.load import load_arch, load_mapping, load_workload
from storeloop.ir import LevelMapping, Loop, Mapping

DATA = ROOT / "tests" / "data"


@pytest.fixture(scope="module")
def setup():
    paged = load_arch(DATA / "paged-disk.yaml")
    flat = dataclasses.replace(paged, levels=(dataclasses.replace(paged.levels[0], page_bytes=None),) + paged.levels[1:])
    w = load_workload(DATA / "matvec.yaml")               # Y[m] = A[m,k] * X[k], M=1024, K=4096
    return paged, flat, w, price(paged)[0]


def mapping(buf_keeps, disk_loops, buf_loops):
    M, K = 0, 1
    return Mapping((LevelMapping(tuple(Loop(d, f) for d, f in disk_loops)),
                    LevelMapping(tuple(Loop(d, f) for d, f in buf_loops), keep=frozenset(buf_keeps))))


def test_whole_page_runs_cost_what_they_move(setup):
    paged, flat, w, energy = setup
    # A in tiles of 1 x 2048 words and X in tiles of 2048 words: runs of 16 KiB, whole pages;
    # Y is written back one word per row: each write pays a 4 KiB page
    m = mapping({"A", "X", "Y"}, [(0, 1024), (1, 2)], [(1, 2048)])
    a, b = evaluate(paged, w, m, energy), evaluate(flat, w, m, energy)
    for t in ("A", "X"):
        assert a.levels[0].tensors[t].reads_per_instance == b.levels[0].tensors[t].reads_per_instance > 0
    assert a.levels[0].tensors["Y"].updates_per_instance == 512 * b.levels[0].tensors["Y"].updates_per_instance


def test_word_by_word_pays_a_page_per_word(setup):
    paged, flat, w, energy = setup
    # A bypasses the buffer: every MAC reads one word of A from the Disk
    m = mapping({"X", "Y"}, [], [(0, 1024), (1, 4096)])
    a, b = evaluate(paged, w, m, energy), evaluate(flat, w, m, energy)
    assert b.levels[0].tensors["A"].reads_per_instance == 1024 * 4096
    assert a.levels[0].tensors["A"].reads_per_instance == 1024 * 4096 * (4096 // 8)     # a 4 KiB page per 8 B word
    assert a.cycles > 100 * b.cycles and a.energy_pJ > 100 * b.energy_pJ


def test_column_tiles_pay_for_partial_runs(setup):
    paged, flat, w, energy = setup
    # A tiles of 8 rows x 256 columns: runs of 256 words = 2 KiB, half a page each -> factor 2
    m = mapping({"A", "X", "Y"}, [(0, 128), (1, 16)], [(0, 8), (1, 256)])
    a, b = evaluate(paged, w, m, energy), evaluate(flat, w, m, energy)
    assert a.levels[0].tensors["A"].reads_per_instance == 2 * b.levels[0].tensors["A"].reads_per_instance


def test_mapper_sees_pages(setup):
    paged, flat, w, energy = setup
    blind = map_workload(flat, w, energy, time_limit=20)
    aware = map_workload(paged, w, energy, time_limit=20)
    assert aware.search["optimal"]
    assert evaluate(paged, w, aware.mapping, energy).cycles == aware.result.cycles
    # the page-blind optimum streams A word by word; priced with pages it is far worse
    assert aware.result.cycles < evaluate(paged, w, blind.mapping, energy).cycles / 10


def test_page_size_errors_name_the_field(tmp_path):
    text = (DATA / "paged-disk.yaml").read_text().replace("page_size: 4 KiB", "page_size: 4 parsecs")
    (tmp_path / "a.yaml").write_text(text)
    with pytest.raises(SpecError) as info:
        load_arch(tmp_path / "a.yaml")
    assert "page_size" in str(info.value) and "a.yaml" in str(info.value)
