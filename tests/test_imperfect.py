"""Imperfect factorization (``map --imperfect``, mapper/imperfect.py): a brute-force oracle, the
padded sizes, the model's padded problem and the mapping file's ``imperfect: true``.

The oracle is written from the space's definition, not from the search: for every bound vector
with each dimension in [N, 2N] (wider than the padded sizes the search walks), every mapping of
the brute-force enumerator whose outermost loop over each dimension runs ceil(N / T) times over
its tile T below (the padding is less than one tile), priced by the reference model as the
imperfect mapping of the unpadded workload."""

from __future__ import annotations

import dataclasses
import itertools
import math
import random

import pytest

from storeloop.errors import MappingError, SpecError
from storeloop.ir import ActionCosts, Arch, ComputeLevel, EnergyTable, StorageLevel
from storeloop.mapper import map_workload
from storeloop.mapper.imperfect import padded_problems, padded_sizes
from storeloop.model.evaluate import evaluate
from storeloop.workloads.pir import einsum_workload
from test_mapper_oracle import best_score, every_mapping, score

EINSUMS = [("Y[m] = A[m,k] * X[k]", "MK"), ("C[m,n] = A[m,k] * B[k,n]", "MNK"), ("Z[b] = X[b,k] * Y[b,k]", "BK")]


def outermost_ok(mapping, work, bounds) -> bool:
    """Each dimension's outermost loop (levels outer -> inner, temporal then spatial) runs
    ceil(N / T) times, T the product of its loops below it."""
    for d, n in enumerate(work.bounds):
        loops = [lp.factor for lm in mapping.levels for lp in lm.temporal + lm.spatial_nest() if lp.dim == d]
        outer = next((f for f in loops if f > 1), 1)
        tile = bounds[d] // outer
        if -(-n // tile) != outer:
            return False
    return True


def oracle(arch, work, energy, objective):
    def imperfect():
        for bounds in itertools.product(*[range(n, 2 * n + 1) for n in work.bounds]):
            for mapping in every_mapping(arch, dataclasses.replace(work, bounds=bounds), {}):
                if outermost_ok(mapping, work, bounds):
                    yield dataclasses.replace(mapping, imperfect=True)
    return best_score(arch, work, energy, objective, imperfect())


def case(seed: int):
    rng = random.Random(70_000 + seed)
    text, dims = rng.choice(EINSUMS)
    bounds = {d: rng.choice([1, 3, 5, 5, 7, 7]) for d in dims}
    while math.prod(bounds.values()) > (15 if len(dims) == 3 else 21):
        d = rng.choice(dims)
        bounds[d] = max(1, bounds[d] - 2)
    work = einsum_workload(f"i{seed}", text, bounds, bits=16)
    lanes = rng.choice([2, 3, 4, 4])
    levels = [StorageLevel("DRAM", "DRAM", 1, None, None, 16, 1, shared_bandwidth=rng.choice([None, None, 2.0])),
              StorageLevel("SRAM", "SRAM", 1, None, rng.choice([4, 8, 16, None]), 16, 1)]
    arch = Arch("imperfect", tuple(levels), ComputeLevel("MAC", "intmac", lanes, None, 16), clock_hz=1e9)
    energy = EnergyTable({"DRAM": ActionCosts(rng.uniform(50, 200), rng.uniform(50, 200), 0.0, "random"),
                          "SRAM": ActionCosts(rng.uniform(1, 10), rng.uniform(1, 10), 100.0, "random")},
                         ActionCosts(rng.uniform(0.5, 3), 0.0, 50.0, "random"), "random")
    return arch, work, energy, rng.choice(["energy", "delay", "edp", "delay,energy", "delay,energy"])


def test_the_padded_sizes_are_those_with_a_tile_padded_by_less_than_itself():
    for n in range(1, 60):
        want = [p for p in range(n, 3 * n) if any(p % t == 0 and -(-n // t) * t == p for t in range(1, n + 1))]
        assert list(padded_sizes(n)) == want, n
    walk = list(itertools.islice(padded_problems((7, 5)), 40))
    assert walk[0] == (7, 5) and len(set(walk)) == len(walk)
    assert [math.prod(b) for b in walk] == sorted(math.prod(b) for b in walk)


SEEDS = range(60)


def test_imperfect_mapping_matches_the_padded_oracle_whenever_it_says_optimal():
    """On random small problems with prime bounds over 2-4 lanes, ``--imperfect`` proven optimal
    equals the oracle's minimum; on some, padding beats every perfect mapping (else the walk
    past the problem itself would go untested)."""
    proven = padded_wins = 0
    for seed in SEEDS:
        arch, work, energy, objective = case(seed)
        out = map_workload(arch, work, energy, objective=objective, energy_gap=0.0, imperfect=True, converge=False)
        r = evaluate(arch, work, out.mapping, energy)
        assert (r.cycles, r.energy_pJ) == (out.result.cycles, out.result.energy_pJ)
        assert "imperfect" in out.search["space"]
        if not out.search["optimal"]:
            continue
        proven += 1
        want, got = oracle(arch, work, energy, objective), score(objective, out.result)
        assert all(math.isclose(g, w, rel_tol=1e-9) for g, w in zip(got, want)), \
            f"seed {seed} ({objective}): map --imperfect says optimal at {got}, the oracle finds {want}\n{work}\n{arch}"
        perfect = score(objective, map_workload(arch, work, energy, objective=objective, energy_gap=0.0,
                                                converge=False).result)
        padded_wins += got < perfect
        assert out.mapping.imperfect == bool(out.search["imperfect"]["padded"])
    assert proven >= 50, proven
    assert padded_wins >= 8, padded_wins


def test_an_imperfect_mapping_is_priced_as_its_padded_problem(tmp_path):
    """The model runs the padded problem; the mapping file carries ``imperfect: true``; factors
    short of a bound, or past it without the flag, are errors naming the dimension."""
    from storeloop.formats.load import load_mapping
    from storeloop.formats.mapping import mapping_to_native
    import yaml

    work = einsum_workload("w", "C[m,n] = A[m,k] * B[k,n]", {"M": 7, "N": 5, "K": 2}, bits=16)
    arch, energy = lanes_arch(3)
    out = map_workload(arch, work, energy, objective="delay", imperfect=True)
    assert out.mapping.imperfect and out.result.cycles == 28      # N padded to 6: 84 computes over 3 lanes
    padded = dataclasses.replace(work, bounds=tuple(
        math.prod(lp.factor for lm in out.mapping.levels for lp in lm.temporal + lm.spatial if lp.dim == d)
        for d in range(3)))
    plain = evaluate(arch, padded, dataclasses.replace(out.mapping, imperfect=False), energy)
    assert (plain.cycles, plain.energy_pJ) == (out.result.cycles, out.result.energy_pJ)
    assert out.result.padding == padded.macs - work.macs
    from storeloop.model.evaluate import result_to_json
    assert result_to_json(out.result, arch)["summary"]["padding_computes"] == out.result.padding
    path = tmp_path / "m.yaml"
    path.write_text(yaml.safe_dump(mapping_to_native(out.mapping, arch, work)))
    assert load_mapping(str(path), arch, work) == dataclasses.replace(out.mapping, name=out.mapping.name)
    if True:                                                      # without the flag: an error
        text = "\n".join(line for line in path.read_text().splitlines() if "imperfect: true" not in line)
        path.write_text(text)
        with pytest.raises(SpecError, match="multiply to .*, the bound is"):
            load_mapping(str(path), arch, work)
    from storeloop.crosscheck import export
    files, notes = export(arch, work, out.mapping, energy, tmp_path / "tl")
    problem = yaml.safe_load((tmp_path / "tl" / "problem.yaml").read_text())["problem"]["instance"]
    assert tuple(problem[d] for d in work.dims) == padded.bounds
    assert any("padded to" in n for n in notes)
    short = einsum_workload("w", "C[m,n] = A[m,k] * B[k,n]", {"M": 8, "N": 6, "K": 4}, bits=16)
    with pytest.raises(MappingError, match="less than its bound"):
        evaluate(arch, short, dataclasses.replace(out.mapping, imperfect=True), energy)


def lanes_arch(lanes: int):
    """DRAM -> SRAM -> ``lanes`` MACs, bandwidths unconstrained."""
    levels = [StorageLevel("DRAM", "DRAM", 1, None, None, 16, 1), StorageLevel("SRAM", "SRAM", 1, None, None, 16, 1)]
    energy = EnergyTable({"DRAM": ActionCosts(100.0, 100.0, 0.0, "x"), "SRAM": ActionCosts(1.0, 1.0, 1.0, "x")},
                         ActionCosts(1.0, 0.0, 1.0, "x"), "x")
    return Arch("lanes", tuple(levels), ComputeLevel("MAC", "intmac", lanes, None, 16), clock_hz=1e9), energy


@pytest.mark.parametrize("n,lanes", [(7, 3), (11, 4), (13, 3), (13, 5)])
def test_a_prime_dimension_is_padded_to_fill_the_lanes(n, lanes):
    """A prime bound n over k lanes: no perfect mapping uses more than one lane (n cycles); the
    padding to ceil(n / k) * k runs ceil(n / k) steps over all k lanes, the fewest any mapping can."""
    work = einsum_workload("v", "Y[m] = A[m,k] * X[k]", {"M": n, "K": 1}, bits=16)
    arch, energy = lanes_arch(lanes)
    assert map_workload(arch, work, energy, objective="delay").result.cycles == n
    out = map_workload(arch, work, energy, objective="delay", imperfect=True)
    assert out.result.cycles == -(-n // lanes) and out.search["optimal"]
    assert out.search["imperfect"]["padded"] == {"M": [n, -(-n // lanes) * lanes]}
    assert out.result.padding == -(-n // lanes) * lanes - n


def test_the_cycle_bound_counts_the_units_the_bounds_can_fill():
    """The branch and bound's compute bound divides by the most units a mapping can run at once
    (Tree.most_units): on random bounds over two fanouts (k RFs, each over j MACs), it equals the
    largest product of spatial factors, one per dimension and fanout, that divide the bounds
    together and fit each fanout -- enumerated here dimension by dimension."""
    from storeloop.mapper.space import MapSpace
    from storeloop.mapper.tree import Tree
    from test_mapper_oracle import compositions

    rng = random.Random(5)
    for _ in range(40):
        k, j = rng.choice([2, 3, 4, 6, 8]), rng.choice([1, 2, 3, 4])
        bounds = {d: rng.choice([1, 2, 3, 5, 6, 7, 9, 12]) for d in "MNK"}
        work = einsum_workload("u", "C[m,n] = A[m,k] * B[k,n]", bounds, bits=16)
        levels = [StorageLevel("DRAM", "DRAM", 1, None, None, 16, 1), StorageLevel("SRAM", "SRAM", 1, None, None, 16, 1),
                  StorageLevel("RF", "regfile", k, None, None, 16, 1)]
        arch = Arch("two", tuple(levels), ComputeLevel("MAC", "intmac", k * j, None, 16), clock_hz=1e9)
        want = 0
        for split in itertools.product(*[list(compositions(b, 3)) for b in work.bounds]):
            s1, s2 = math.prod(f[0] for f in split), math.prod(f[1] for f in split)
            if s1 <= k and s2 <= j:
                want = max(want, s1 * s2)
        energy = EnergyTable({n: ActionCosts(1.0, 1.0, 1.0, "x") for n in ("DRAM", "SRAM", "RF")},
                             ActionCosts(1.0, 0.0, 1.0, "x"), "x")
        assert Tree(MapSpace(arch, work), energy).most_units() == want, (work.bounds, k, j)


def test_a_timeloop_residual_factor_is_refused_by_name(tmp_path):
    """Timeloop's mapping format writes an imperfect factor with its last iteration's bound
    ('P=12,5'); storeloop does not price residuals, and says so instead of reading a bare '5'."""
    import shutil
    from storeloop.formats.load import load_arch, load_mapping, load_workload

    case_dir = "tests/corpus/a1-dram-sram-mac-16b__cnn-5x5__b3-r1"
    for name in ("arch.yaml", "problem.yaml", "mapping.yaml"):
        shutil.copy(f"{case_dir}/{name}", tmp_path / name)
    text = (tmp_path / "mapping.yaml").read_text()
    (tmp_path / "mapping.yaml").write_text(text.replace("factors: C=4 M=8 R=5 S=5 N=1 P=12 Q=12,",
                                                        "factors: 'C=4 M=8 R=5 S=5 N=1 P=12,5 Q=12',", 1))
    arch, work = load_arch(str(tmp_path / "arch.yaml")), load_workload(str(tmp_path / "problem.yaml"))
    with pytest.raises(SpecError, match=r"residual factor \('P=12,5'"):
        load_mapping(str(tmp_path / "mapping.yaml"), arch, work)


def test_constraints_a_bound_cannot_meet_are_met_by_a_padded_problem():
    """A spatial factor of 4 that a prime bound of 7 cannot give: with exact factors no mapping
    meets the constraints (a SpecError before any search); with --imperfect the problem is skipped
    and the padding to 8 meets them."""
    from storeloop.ir.constraints import Constraints, LevelConstraint

    work = einsum_workload("v", "Y[m] = A[m,k] * X[k]", {"M": 7, "K": 1}, bits=16)
    arch, energy = lanes_arch(4)
    cons = Constraints({1: LevelConstraint(spatial_x={0: (4, 4)})}, source="test")
    with pytest.raises(SpecError, match="no mapping can meet the constraints"):
        map_workload(arch, work, energy, constraints=cons)
    out = map_workload(arch, work, energy, constraints=cons, imperfect=True)
    assert out.search["imperfect"]["padded"] == {"M": [7, 8]} and out.result.cycles == 2
    assert out.search["imperfect"]["skipped"] >= 1


def test_a_walk_with_no_valid_mapping_says_so():
    """Constraints no padded bound can meet (a spatial factor of 16 over a bound of 7: the padded
    bounds of 7 are 7, 8, 9, 10 and 12): an error naming how many were weighed, not a traceback."""
    from storeloop.errors import StoreloopError
    from storeloop.ir.constraints import Constraints, LevelConstraint

    work = einsum_workload("v", "Y[m] = A[m,k] * X[k]", {"M": 7, "K": 1}, bits=16)
    arch, energy = lanes_arch(16)
    cons = Constraints({1: LevelConstraint(spatial_x={0: (16, 16)})}, source="test")
    with pytest.raises(StoreloopError, match=r"no valid mapping of v or of the 4 padded problems weighed after it \(5 allow none"):
        map_workload(arch, work, energy, constraints=cons, imperfect=True)


def test_a_traffic_bound_problem_ends_the_walk_at_once():
    """Where a slow DRAM binds, padding only adds words: the walk's bound (each padded problem's
    words at the DRAM's port, which no padding lowers) ends it after the problem itself, and the
    walk's order never pops a problem of lower bound after a higher one."""
    work = einsum_workload("w", "C[m,n] = A[m,k] * B[k,n]", {"M": 97, "N": 61, "K": 83}, bits=16)
    levels = [StorageLevel("DRAM", "DRAM", 1, None, None, 16, 1, shared_bandwidth=0.01),
              StorageLevel("SRAM", "SRAM", 1, None, None, 16, 1)]
    arch = Arch("slow", tuple(levels), ComputeLevel("MAC", "intmac", 16, None, 16), clock_hz=1e9)
    _, energy = lanes_arch(1)
    out = map_workload(arch, work, energy, imperfect=True)
    assert out.search["imperfect"]["problems"] == 1 and out.search["cycles_optimal"]
    sizes = {b: b[0] * b[2] + b[2] * b[1] + b[0] * b[1] for b in itertools.product(*[
        list(itertools.islice(padded_sizes(n), 4)) for n in work.bounds])}
    walk = list(itertools.islice(padded_problems(work.bounds, key=lambda b: sizes.get(b, math.inf)), 30))
    assert [sizes[b] for b in walk] == sorted(sizes[b] for b in walk)


def test_a_sweep_point_notes_its_padding():
    """A sweep point mapped with ``mapper: {imperfect: true}`` stores the imperfect mapping (it loads
    back) and says in its notes what it pads and how many of its computes are padding."""
    from storeloop.formats.mapping import mapping_from_native
    from storeloop.formats.yamlio import loads
    from storeloop.mapper.options import MapperOptions
    from storeloop.sweeps.grid import Point
    from storeloop.sweeps.worker import run_point

    work = einsum_workload("v", "Y[m] = A[m,k] * X[k]", {"M": 7, "K": 1}, bits=16)
    levels = [StorageLevel("DRAM", "DRAM", 1, None, None, 16, 1), StorageLevel("SRAM", "SRAM", 1, None, 256, 16, 1)]
    arch = Arch("lanes", tuple(levels), ComputeLevel("MAC", "intmac", 3, None, 16), clock_hz=1e9)   # (priced by plug-ins)
    row = run_point(Point(params={}, label="v", scenario="{}", weight=1.0,
                          mapper=MapperOptions(objective="delay", imperfect=True), workload=work, arch=arch))
    assert row["status"] == "ok" and row["cycles"] == 3 and row["computes"] == 9
    assert "imperfect mapping: pads M 7 -> 9; 2 of its 9 computes are padding" in row["notes"]
    assert mapping_from_native(loads(row["mapping"], "row"), arch, work).imperfect
    assert "seed" not in row             # the Mapping object only where a sweep asks for it (with_mapping)


def test_an_ssd_bound_problem_ends_the_walk_at_once():
    """OnionPIR on OnionChopper with the Disk as an SSD: the Disk binds, and every padded problem
    moves more words through it, at best at its peak streams: the walk ends after the problem itself."""
    from storeloop.formats.load import energy_table, load_arch, load_workload
    from conftest import ROOT

    arch = load_arch(ROOT / "arch" / "onionchopper-ssd.yaml")
    work = load_workload(ROOT / "workloads" / "onionpir-64GiB.yaml")
    out = map_workload(arch, work, energy_table(arch, None), imperfect=True, budget=3_000_000)
    assert out.search["imperfect"]["problems"] == 1 and not out.mapping.imperfect
    assert out.result.bound_by == "Disk"
