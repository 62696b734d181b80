"""The mapper across the thesis's initial design space: incumbents, stop rules, honest outcomes."""

import json
import math
import random
import time

import pytest

from conftest import ROOT
from storeloop.mapper import MapTimeout, map_workload, search
from storeloop.formats.constraints import load_constraints
from storeloop.formats.load import load_arch, load_mapping, load_workload
from storeloop.ir import ActionCosts, EnergyTable, LevelMapping, Loop, Mapping
from storeloop.model.fast import FastModel
from storeloop.errors import MappingError
from storeloop.sweeps import load_sweep, point_arch, points, satisfies

SWEEP = load_sweep(ROOT / "sweeps" / "thesis-initial.yaml")
WORKLOAD = load_workload(ROOT / "workloads" / "onionpir-64GiB.yaml")
THESIS = ROOT / "mappings" / "onionchopper-thesis-best.yaml"


def flat_energy(arch) -> EnergyTable:
    """Per-action energies that do not need CACTI (the cycle proofs do not depend on them)."""
    per = {"Disk": 20000.0, "DRAM": 400.0, "SRAM": 10.0, "RF": 0.5}
    return EnergyTable({lvl.name: ActionCosts(per[lvl.name], per[lvl.name] * 1.2, area_um2=1.0) for lvl in arch.levels},
                       ActionCosts(3.0, area_um2=1.0))


def sampled_points(n: int, seed: int = 11):
    pts = [p for p, _ in points(SWEEP) if satisfies(SWEEP, p)]
    assert len(pts) == 4896
    return random.Random(seed).sample(pts, n)


def certificates(arch):
    """The thesis mapping and its spatial variants that fit this arch (J=2 over the DRAM fanout,
    over the SRAM fanout, or not spread)."""
    base = load_mapping(THESIS, load_arch(ROOT / "arch" / "onionchopper.yaml"), WORKLOAD)
    j = WORKLOAD.dim_index("J")
    disk, dram, sram, rf = base.levels
    dram_t = tuple(lp if lp.dim != j else Loop(j, lp.factor * 2) for lp in dram.temporal)
    sram_t = tuple(lp for lp in sram.temporal if lp.dim != j)
    variants = [base,
                Mapping((disk, LevelMapping(dram_t, (), dram.keep), sram, rf)),
                Mapping((disk, LevelMapping(dram.temporal, (), dram.keep),
                         LevelMapping(sram.temporal, (Loop(j, 2, True),), sram.keep), rf)),
                Mapping((disk, dram, LevelMapping(sram_t, (Loop(j, 2, True),), sram.keep), rf))]
    fast = FastModel(arch, WORKLOAD, flat_energy(arch))
    out = []
    for m in variants:
        try:
            out.append(fast.evaluate(m).cycles)
        except MappingError:
            pass
    return out


@pytest.mark.parametrize("params", sampled_points(10), ids=lambda p: "-".join(str(v).replace(" ", "") for v in p.values()))
def test_bound_reached_wherever_a_certificate_meets_it(params):
    """With the sweep's settings, the mapper reaches the cycle bound on every sampled architecture
    where the thesis mapping (or a spatial variant of it) meets the bound, and proves it."""
    arch = point_arch(SWEEP, params)
    e = flat_energy(arch)
    out = map_workload(arch, WORKLOAD, e, time_limit=10)
    lb = out.search["lower_bound_cycles"]
    if any(c == lb for c in certificates(arch)):
        assert out.result.cycles == lb
    assert out.search["cycles_optimal"]
    assert out.search["stopped"] in ("optimal", "energy-gap", "converged")
    # deterministic: the same answer again
    again = map_workload(arch, WORKLOAD, e, time_limit=10)
    assert again.mapping == out.mapping


def onionchopper():
    arch = load_arch(ROOT / "arch" / "onionchopper.yaml")
    return arch, flat_energy(arch)


def test_stop_energy_gap_is_within_the_gap_of_a_valid_bound():
    arch, e = onionchopper()
    out = map_workload(arch, WORKLOAD, e, time_limit=30)
    s = out.search
    assert s["stopped"] == "energy-gap" and out.result.cycles == s["lower_bound_cycles"]
    assert s["lower_bound_energy_pJ"] <= out.result.energy_pJ <= s["lower_bound_energy_pJ"] * 1.001
    assert 0 <= s["energy_gap"] <= 1e-3


def test_stop_converged_and_time_limit(monkeypatch):
    arch, e = onionchopper()
    monkeypatch.setattr(search, "CONVERGE_MIN", 20_000)
    out = map_workload(arch, WORKLOAD, e, energy_gap=0, time_limit=None)     # (no share of a time limit held)
    assert out.search["stopped"] == "converged" and not out.search["optimal"]
    assert out.result.cycles == out.search["lower_bound_cycles"] and out.search["cycles_optimal"]
    out = map_workload(arch, WORKLOAD, e, energy_gap=0, converge=False, time_limit=0.5)
    assert out.search["stopped"] == "time-limit" and not out.search["optimal"]


def test_stop_budget_gives_the_same_answer_whatever_the_clock(monkeypatch):
    """A budget of candidates stops the search where the same inputs always stop it: a clock that
    runs 1000 times slower (a busy machine) changes neither the answer nor the work."""
    arch, e = onionchopper()
    runs = []
    for slow in (1, 1000):
        t0 = time.monotonic()
        monkeypatch.setattr(search.time, "monotonic", lambda t0=t0, slow=slow: t0 + (time.perf_counter() - t0) * slow)
        out = map_workload(arch, WORKLOAD, e, energy_gap=0, converge=False, budget=200_000, time_limit=86400)
        runs.append((out.search["stopped"], out.search["candidates"], out.result.energy_pJ, out.mapping))
    assert runs[0] == runs[1]
    assert runs[0][0] == "budget" and 200_000 <= runs[0][1] < 400_000


def test_a_budget_too_small_for_any_mapping_is_not_no_valid_mapping(monkeypatch):
    from storeloop.mapper import construct

    arch, e = onionchopper()
    monkeypatch.setattr(construct.Searcher, "search", lambda self, *a, **k: (None, (math.inf,)))
    monkeypatch.setattr(search, "_dive", lambda *a: (None, False))
    with pytest.raises(MapTimeout, match="budget"):
        map_workload(arch, WORKLOAD, e, budget=1)


def test_timeout_is_not_no_valid_mapping(monkeypatch):
    """A time limit that ends the search before any mapping is a timeout, not 'no valid mapping'."""
    from storeloop.mapper import construct

    arch, e = onionchopper()
    monkeypatch.setattr(construct.Searcher, "search", lambda self, *a, **k: (None, (math.inf,)))
    with pytest.raises(MapTimeout, match="timeout"):
        map_workload(arch, WORKLOAD, e, time_limit=1e-4)


def test_seed_mapping_is_a_start(tmp_path, capsys):
    from storeloop.cli import main

    args = ["map", str(ROOT / "arch" / "onionchopper.yaml"), str(ROOT / "workloads" / "onionpir-64GiB.yaml"),
            "--ert", str(ROOT / "arch" / "onionchopper.ERT.yaml"), "--art", str(ROOT / "arch" / "onionchopper.ART.yaml"),
            "--json", "--time-limit", "10"]
    assert main(args + ["--seed-mapping", str(THESIS)]) == 0
    seeded = json.loads(capsys.readouterr().out)
    assert seeded["search"]["local_search"]["seeds"] == 1
    assert seeded["summary"]["cycles"] == 13_811_004_212
    assert seeded["summary"]["energy_pJ"] <= 173.2743e12


def test_timeloop_constraints_full_permutations_and_spatial_split(tmp_path):
    """Every factor fixed at the outer levels, full permutations that interleave dimensions of one
    relevance class, a spatial split equal to the number of dimensions (all along X)."""
    cons = tmp_path / "c.yaml"
    cons.write_text("""mapspace_constraints:
  - {target: Disk, type: temporal, factors: M=1 N=1 P=1 Q=1 J=1 K=1 C=1 D=32, permutation: DCKJQPNM}
  - {target: DRAM, type: temporal, factors: M=1 N=512 P=1 Q=1 J=8 K=2 C=2 D=128, permutation: NJDKCMPQ}
  - {target: DRAM, type: spatial, factors: J=2 M=1 N=1 P=1 Q=1 K=1 C=1 D=1, permutation: JMNPQKCD, split: 8}
""")
    arch, e = onionchopper()
    c = load_constraints(cons, arch, WORKLOAD)
    out = map_workload(arch, WORKLOAD, e, constraints=c, time_limit=30)
    assert out.result.cycles == 13_811_004_212
    dram = out.mapping.levels[1]
    names = [WORKLOAD.dims[lp.dim] for lp in dram.temporal]
    assert names == ["C", "K", "D", "J", "N"]          # Timeloop lists innermost first
    assert [(WORKLOAD.dims[lp.dim], lp.factor, lp.axis) for lp in dram.spatial] == [("J", 2, "X")]


def test_one_cycle_of_float_rounding_is_at_the_bound():
    """OnionPIR 32 GiB: the Disk-bound time is an exact integer, which Timeloop's floating-point
    throttling (and the model, which matches it) rounds up by one cycle. The mapper recognises the
    mapping as at the bound from its exact rational time, instead of searching until the limit."""
    from storeloop.model.evaluate import evaluate, exact_cycles

    arch, e = onionchopper()
    w = load_workload(ROOT / "workloads" / "onionpir-32GiB.yaml")
    out = map_workload(arch, w, e, time_limit=30)
    s = out.search
    assert out.result.cycles == s["lower_bound_cycles"] + 1 and s["cycles_rounding"] == 1
    assert exact_cycles(evaluate(arch, w, out.mapping, e), arch) == s["lower_bound_cycles"]
    assert s["cycles_optimal"] and s["stopped"] == "energy-gap"


def test_a_local_search_near_the_goal_searches_longer_before_the_branch_and_bound():
    """Where the local search ends at the cycle bound with its energy short of the 0.1 % gap by
    less than ten gaps, a longer local search from its answer comes first. On this thesis point
    the first one misses the gap; the longer one meets it, so the branch and bound has nothing
    to prove (without it, the branch and bound spent 5 M candidates and stopped 'converged')."""
    from storeloop.sweeps.grid import PointMaker
    from storeloop.sweeps.worker import energy_table

    params = {"levels.RF.capacity": "32 words", "levels.RF.instances+compute.instances": 32,
              "levels.SRAM.capacity": "32 MiB", "levels.SRAM.instances": 32}
    point = PointMaker(SWEEP)(params, SWEEP.workloads[0])
    out = map_workload(point.arch, point.workload, energy_table(point.arch, point.energy), options=point.mapper)
    s = out.search
    first, longer = s["local_search"], s["local_search"]["longer"]
    assert first["energy_pJ"] > s["lower_bound_energy_pJ"] * 1.001          # the first missed the gap
    assert longer["energy_pJ"] < first["energy_pJ"] and s["stopped"] == "energy-gap"
    assert s["candidates"] < search.CONVERGE_MIN and out.result.energy_pJ <= longer["energy_pJ"] * (1 + 1e-12)
