"""``bench/peers.py`` prices storeloop's answer in AccelForge's model and the peers' answers in
storeloop's, through two converters: a storeloop mapping as AccelForge mapping nodes (storage nodes
moved above the loops Timeloop reuses a tile across) and AccelForge nodes back as a storeloop
mapping (loops between a level's storage nodes moved up where no tensor above them has their
dimension, else uneven positions). Neither peer is needed here: a mapping taken there and back must
price exactly as it did, every count of every tensor at every level."""

import importlib.util
import random

import pytest

from conftest import ROOT, every_count
from storeloop.errors import MappingError
from storeloop.ir import ActionCosts, Arch, ComputeLevel, EnergyTable, LevelMapping, Mapping, StorageLevel
from storeloop.mapper.search import sample
from storeloop.mapper.space import MapSpace
from storeloop.mapper.window import surrogate
from storeloop.model.evaluate import evaluate
from storeloop.workloads.pir import einsum_workload

_spec = importlib.util.spec_from_file_location("peers", ROOT / "bench" / "peers.py")
peers = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(peers)

PROBLEMS = [("Z[m,n] = A[m,k] * B[k,n]", {"M": 8, "N": 4, "K": 8}),
            ("O[n,k,p,q] = W[k,c,r,s] * I[n,c,p+r,q+s]", {"N": 1, "K": 4, "C": 2, "P": 4, "Q": 2, "R": 3, "S": 2}),
            ("C[m,n,p,q,c,d] = A[m,j,p,k,c,d] * B[j,n,k,q,c,d]",     # the thesis einsum (peers.py pir)
             {"M": 1, "N": 4, "P": 2, "Q": 1, "J": 4, "K": 2, "C": 2, "D": 4})]
ENERGY = EnergyTable({"DRAM": ActionCosts(128.0, 128.0, 0.0, "t"), "GLB": ActionCosts(16.4, 11.0, 1.0, "t"),
                      "RF": ActionCosts(0.17, 0.17, 1.0, "t")}, ActionCosts(3.8, 0.0, 1.0, "t"), "t")
# the peers' arch in small: DRAM -> GLB -> 4 x (RF -> MAC)
ARCH = Arch("small16", (StorageLevel("DRAM", "DRAM", 1, None, None, 16, 1),
                        StorageLevel("GLB", "SRAM", 1, None, 4096, 16, 1),
                        StorageLevel("RF", "regfile", 4, None, 256, 16, 1)),
            ComputeLevel("MAC", "intmac", 4, None, 16), clock_hz=1e9)


def _counts(m: Mapping, work):
    r = evaluate(ARCH, work, m, ENERGY)
    return every_count(r), r.energy_pJ


@pytest.mark.parametrize("text, bounds", PROBLEMS, ids=["matmul", "conv", "pir"])
def test_a_mapping_taken_to_accelforge_and_back_prices_the_same(text, bounds):
    work = einsum_workload("p", text, bounds, bits=16)
    space = MapSpace(ARCH, surrogate(work), exact=work) if work.windowed else MapSpace(ARCH, work)
    rng = random.Random(7)
    checked = uneven = 0
    while checked < 150:
        m = sample(space, rng, pruned=False)
        if rng.random() < 0.5:             # some tensors below some of their level's loops
            m = Mapping(tuple(lm if L == 0 else LevelMapping(
                lm.temporal, lm.spatial, lm.keep,
                tuple((t.name, rng.randint(0, len(lm.temporal))) for t in work.tensors if lm.keeps(t.name)))
                for L, lm in enumerate(m.levels)))
        try:
            want = _counts(m, work)
        except MappingError:               # a tile that does not fit
            continue
        back = peers.from_accelforge(ARCH, work, peers.accelforge_nodes(ARCH, work, m))
        assert _counts(back, work) == want, (m, back)
        checked += 1
        uneven += m.uneven
    assert uneven >= 30


def test_an_imperfect_mapping_taken_to_accelforge_and_back_prices_the_same():
    """storeloop's padded mappings of a matmul of primes go to AccelForge as tile shapes that do
    not divide the bounds (its imperfect loops) and come back as the same padded mappings: each
    loop runs ceil(above / shape) times."""
    import dataclasses

    work = einsum_workload("p", "Z[m,n] = A[m,k] * B[k,n]", {"M": 7, "N": 5, "K": 3}, bits=16)
    rng, checked = random.Random(3), 0
    assert work.dims == ("M", "K", "N")
    for bounds in [(8, 3, 5), (7, 3, 6), (8, 4, 6), (9, 4, 5)]:          # (M 7 -> 8, 9; K 3 -> 4; N 5 -> 6)
        wide = dataclasses.replace(work, bounds=bounds)
        for _ in range(40):
            m = dataclasses.replace(sample(MapSpace(ARCH, wide), rng, pruned=False), imperfect=True)
            outer = [next(lp.factor for lm in m.levels for lp in lm.temporal + lm.spatial_nest()
                          if lp.dim == d and lp.factor > 1) if b > n else 1 for d, (n, b) in enumerate(zip(work.bounds, bounds))]
            if any(b > n and -(-n // (b // f)) != f for n, b, f in zip(work.bounds, bounds, outer)):
                continue                   # a whole outer iteration of padding: not a tile shape AccelForge writes
            try:
                want = _counts(m, work)
            except MappingError:
                continue
            back = peers.from_accelforge(ARCH, work, peers.accelforge_nodes(ARCH, work, m))
            assert back.imperfect and _counts(back, work) == want, (m, back)
            checked += 1
    assert checked >= 60, checked
