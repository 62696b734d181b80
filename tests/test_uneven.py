"""Uneven positions (issue 33): a tensor's tile at a level may lie below some of that level's temporal
loops (``below: {tensor: DIM}`` in a mapping file), as AccelForge places each tensor's storage node
at its own loop position. The model gives that tensor's counts as if those loops belonged to the
level above (the same order and strides): its tile there is smaller and the loops refill it."""

import pytest
import yaml

from conftest import ROOT, every_count
from storeloop.cli import main
from storeloop.formats.load import energy_table, load_arch, load_mapping, load_workload
from storeloop.formats.mapping import mapping_to_native
from storeloop.ir import ActionCosts, Arch, ComputeLevel, EnergyTable, LevelMapping, Loop, Mapping, StorageLevel
from storeloop.model.evaluate import evaluate
from storeloop.workloads.pir import einsum_workload
from tests.test_bad_input import check

ARCH = ROOT / "tests/data/arch16.yaml"
MM = ROOT / "tests/data/mm256.yaml"
# AccelForge FFM's optimum of the 256^3 matmul on the peers' arch (bench/peers.py), as it placed
# its storage nodes (A below GLB's K loop, Z below RF's M loop), and the same reuse written evenly
UNEVEN = """mapping:
  levels:
  - {level: DRAM, temporal: M=2 N=2}
  - {level: GLB, temporal: K=8 N=8, spatial: N=16, keep: [A, Z], below: {A: K}}
  - {level: RF, temporal: M=128 K=32, keep: [B, Z], below: {Z: M}}
"""
EVEN = """mapping:
  levels:
  - {level: DRAM, temporal: M=2 N=2 K=8}
  - {level: GLB, temporal: N=8 M=128, spatial: N=16, keep: [A, Z]}
  - {level: RF, temporal: K=32, keep: [B, Z]}
"""


def _load(tmp_path, text, name="m.yaml"):
    (tmp_path / name).write_text(text)
    arch, work = load_arch(ARCH), load_workload(MM)
    return arch, work, load_mapping(tmp_path / name, arch, work)


def test_an_uneven_mapping_prices_as_the_even_one_with_the_same_reuse(tmp_path):
    """Where the loops above a tensor's tile do not index it, or can move to the level above
    without changing any other tensor's tile, the uneven mapping is an even one in disguise:
    every count and the energy are the same (145.582 uJ, storeloop's proven optimum)."""
    arch, work, uneven = _load(tmp_path, UNEVEN)
    even = _load(tmp_path, EVEN, "e.yaml")[2]
    assert uneven.uneven and not even.uneven
    e = energy_table(arch, None)
    a, b = evaluate(arch, work, uneven, e), evaluate(arch, work, even, e)
    assert (every_count(a), a.energy_pJ) == (every_count(b), b.energy_pJ)
    assert a.levels[2].tensors["Z"].tile == 1 and a.levels[1].tensors["A"].tile == 4096


def test_a_tensor_below_a_loop_that_indexes_it_is_refilled_by_it():
    """Z[m,n] = A[m,k] * B[k,n], M=K=4, N=2: DRAM runs N=2, the buffer M=4 then K=4 and keeps A.
    Even, A's tile is all 16 words, filled once (the N loop above does not index A). Below the
    buffer's M loop, its tile is one row of 4 words, refilled at every M step and again for each
    N: 2 x 4 x 4 = 32 fills, and DRAM reads as many."""
    work = einsum_workload("u", "Z[m,n] = A[m,k] * B[k,n]", {"M": 4, "N": 2, "K": 4}, bits=16)
    arch = Arch("u", (StorageLevel("DRAM", "DRAM", 1, None, None, 16, 1),
                      StorageLevel("BUF", "SRAM", 1, None, 64, 16, 1)),
                ComputeLevel("MAC", "intmac", 1, None, 16), clock_hz=1e9)
    energy = EnergyTable({"DRAM": ActionCosts(100.0, 100.0, 0.0, "t"), "BUF": ActionCosts(1.0, 1.0, 1.0, "t")},
                         ActionCosts(1.0, 0.0, 1.0, "t"), "t")
    M, N, K = (work.dims.index(d) for d in "MNK")
    dram = LevelMapping((Loop(N, 2),))
    buf = LevelMapping((Loop(M, 4), Loop(K, 4)), keep=frozenset({"A"}))
    even = evaluate(arch, work, Mapping((dram, buf)), energy)
    below = evaluate(arch, work, Mapping((dram, LevelMapping(buf.temporal, keep=buf.keep, above=(("A", 1),)))), energy)
    assert (even.levels[1].tensors["A"].tile, even.levels[1].tensors["A"].fills_total) == (16, 16)
    assert (below.levels[1].tensors["A"].tile, below.levels[1].tensors["A"].fills_total) == (4, 32)
    assert below.levels[0].tensors["A"].reads_total == 32 and even.levels[0].tensors["A"].reads_total == 16
    assert below.levels[1].tensors["A"].reads_total == even.levels[1].tensors["A"].reads_total == 32     # one per compute
    assert below.cycles == even.cycles and below.energy_pJ > even.energy_pJ


def test_uneven_positions_round_trip_through_the_mapping_file(tmp_path):
    arch, work, m = _load(tmp_path, UNEVEN)
    (tmp_path / "back.yaml").write_text(yaml.safe_dump(mapping_to_native(m, arch, work), sort_keys=False))
    assert load_mapping(tmp_path / "back.yaml", arch, work) == m
    assert m.levels[1].above == (("A", 1),) and m.levels[2].above == (("Z", 1),)


@pytest.mark.parametrize("edit, needle", [
    ("below: {A: K, Q: N}", "unknown tensor 'Q'"),
    ("below: {B: K}", "does not keep it"),
    ("below: {A: M}", "no temporal loop over 'M'"),
    ("below: [A, K]", "below"),
    ("below: {A: K, A: N}", "duplicate"),
])
def test_bad_uneven_positions_are_refused_at_their_line(edit, needle, tmp_path, capsys):
    (tmp_path / "m.yaml").write_text(UNEVEN.replace("below: {A: K}", edit))
    check(capsys, main(["model", str(ARCH), str(MM), str(tmp_path / "m.yaml")]), "m.yaml:4", needle)


def test_the_outermost_level_has_no_uneven_positions_and_timeloop_cannot_take_them(tmp_path, capsys):
    (tmp_path / "m.yaml").write_text(UNEVEN.replace("{level: DRAM, temporal: M=2 N=2}",
                                                    "{level: DRAM, temporal: M=2 N=2, below: {A: M}}"))
    check(capsys, main(["model", str(ARCH), str(MM), str(tmp_path / "m.yaml")]), "m.yaml:3", "outermost")
    (tmp_path / "u.yaml").write_text(UNEVEN)
    check(capsys, main(["export", str(ARCH), str(MM), str(tmp_path / "u.yaml"), "--out", str(tmp_path / "tl")]),
          "uneven")
