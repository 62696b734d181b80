"""The mapper on sliding windows (issue 33): convolutions, strided, dilated and depthwise.

Two oracles on small random windowed problems, both written from the model's side:
* mapping by mapping over the whole map space (every factorization, loop order, spatial order,
  keep choice), the plain surrogate the tree bounds on (:mod:`storeloop.mapper.window`) never
  costs more than the reference model, in cycles or energy, and never fails a capacity the model
  passes -- the property every bound of the search rests on;
* whenever ``map`` says optimal, its answer equals the brute-force minimum (the reference model
  over every mapping), with mutants that show both oracles have teeth.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import random

import numpy as np
import pytest

from conftest import every_count
from storeloop.errors import MappingError
from storeloop.mapper.objective import Objective
from storeloop.mapper.space import prime_factors
from storeloop.mapper.window import surrogate, without_unit_terms
from storeloop.model.evaluate import evaluate
from storeloop.ir import ActionCosts, Arch, ComputeLevel, EnergyTable, LevelMapping, Loop, Mapping, StorageLevel
from storeloop.workloads.pir import einsum_workload
from tests.test_mapper_oracle import OBJECTIVES, brute_force, every_mapping, mapped_as_brute_force_says

WINDOWS = [("O[p] = I[p+r] * W[r]", "PR"), ("O[k,p] = W[k,r] * I[p+r]", "KPR"),
           ("O[p] = I[2*p+r] * W[r]", "PR"), ("O[p] = I[p+2*r] * W[r]", "PR"),
           ("O[c,p] = I[c,p+r] * W[c,r]", "CPR"), ("O[p,q] = I[p+r,q+s] * W[r,s]", "PQRS"),
           ("O[k,p] = W[k,c,r] * I[c,p+r]", "KCPR")]


def window_case(seed: int):
    """A random small windowed problem: DRAM -> SRAM [-> RF] over MACs (1-4 lanes or a 2 x 2
    mesh), or a fanout above the RFs (DRAM -> k x SRAM -> k x RF: link transfers between them);
    random capacities, bandwidths and energies. Returns (arch, workload, energy, objective, at)."""
    rng = random.Random(90_000 + seed)
    text, dims = rng.choice(WINDOWS)
    bounds = {d: rng.choice([1, 2, 2, 3, 4]) for d in dims}
    limit = rng.choice([8, 12, 16])
    while math.prod(bounds.values()) > limit:
        d = rng.choice(dims)
        bounds[d] = max(1, bounds[d] // 2)
    work = einsum_workload(f"win{seed}", text, bounds, bits=16)
    energy = EnergyTable({"DRAM": ActionCosts(rng.uniform(50, 200), rng.uniform(50, 200), 0.0, "random"),
                          "SRAM": ActionCosts(rng.uniform(1, 10), rng.uniform(1, 10), 100.0, "random"),
                          "RF": ActionCosts(rng.uniform(0.1, 1), rng.uniform(0.1, 1), 10.0, "random")},
                         ActionCosts(rng.uniform(0.5, 3), 0.0, 50.0, "random"), "random")
    if rng.random() < 0.3:                            # the fanout above the RFs, 1D or a 2 x 2 mesh
        k = rng.choice([2, 3, 4])
        mesh = k == 4 and rng.random() < 0.5
        levels = (StorageLevel("DRAM", "DRAM", 1, None, None, 16, 1, shared_bandwidth=rng.choice([None, 1.0])),
                  StorageLevel("SRAM", "SRAM", k, 2 if mesh else None, rng.choice([4, 8, 16]), 16, 1),
                  StorageLevel("RF", "regfile", k, 2 if mesh else None, rng.choice([1, 2, 3, 4]), 16, 1))
        arch = Arch("wsplit", levels, ComputeLevel("MAC", "intmac", k, 2 if mesh else None, 16), clock_hz=1e9)
        return arch, work, energy, rng.choice(OBJECTIVES), 0
    mesh = rng.random() < 0.2
    lanes = 4 if mesh else rng.choice([1, 2, 3, 4])
    levels = [StorageLevel("DRAM", "DRAM", 1, None, None, 16, 1, shared_bandwidth=rng.choice([None, 0.5, 1.0])),
              StorageLevel("SRAM", "SRAM", 1, None, rng.choice([3, 4, 6, 8, 16]), 16, 1,
                           read_bandwidth=rng.choice([None, 1.0, 2.0]), write_bandwidth=rng.choice([None, 1.0]))]
    if rng.random() < 0.3:
        levels.append(StorageLevel("RF", "regfile", 1, None, rng.choice([1, 2, 4]), 16, 1))
    arch = Arch("window", tuple(levels), ComputeLevel("MAC", "intmac", lanes, 2 if mesh else None, 16), clock_hz=1e9)
    return arch, work, energy, rng.choice(OBJECTIVES), None


def test_the_surrogate_never_costs_more_than_the_model():
    """Every mapping of 40 random windowed problems: the surrogate's cycles and energy are at most
    the model's, and wherever the model accepts a mapping the surrogate does too."""
    checked = below = 0
    for seed in range(40):
        arch, work, energy, _, at = window_case(seed)
        assert work.windowed
        plain = surrogate(work)
        assert not plain.windowed
        for mapping in every_mapping(arch, work, {}, at):
            try:
                r = evaluate(arch, work, mapping, energy)
            except MappingError:
                continue
            s = evaluate(arch, plain, mapping, energy)
            assert s.cycles <= r.cycles and s.energy_pJ <= r.energy_pJ * (1 + 1e-12), \
                f"seed {seed}: surrogate {s.cycles}, {s.energy_pJ} over the model's {r.cycles}, {r.energy_pJ}\n" \
                f"{work}\n{arch}\n{mapping}"
            checked += 1
            below += s.energy_pJ < r.energy_pJ * (1 - 1e-9)
    assert checked >= 20_000 and below >= checked // 4, (checked, below)


def test_dimensions_of_bound_one_drop_out_of_a_window():
    """A window over a dimension of bound 1 (a 1x1 convolution's ``p+r``, R = 1) is no window:
    every mapping of the random windowed problems that have one prices the same, every count,
    with those terms dropped (:func:`without_unit_terms`, how the mapper searches them). A stride
    stays: ``2*p+r`` with R = 1 is ``2*p``."""
    checked = cases = 0
    for seed in range(200):
        arch, work, energy, _, at = window_case(seed)
        lean = without_unit_terms(work)
        if lean == work:
            continue
        cases += 1
        for mapping in itertools.islice(every_mapping(arch, work, {}, at), 400):
            try:
                r = evaluate(arch, work, mapping, energy)
            except MappingError:
                continue
            q = evaluate(arch, lean, mapping, energy)
            assert every_count(q) == every_count(r) and q.energy_pJ == pytest.approx(r.energy_pJ, rel=1e-12), \
                f"seed {seed}\n{work}\n{mapping}"
            checked += 1
    assert cases >= 100 and checked >= 11_000, (cases, checked)
    w = einsum_workload("s", "O[p] = I[2*p+r] * W[r]", {"P": 4, "R": 1}, bits=16)
    strided = without_unit_terms(w)
    assert strided.tensor("I").ranks == (((w.dim_index("P"), 2),),) and strided.windowed


def test_a_one_by_one_convolution_is_searched_as_a_plain_einsum():
    """ResNet's 1x1 layers: the defaults prove the answer on the plain bounds (a 64-channel 28x28
    layer on the peers' arch stopped 'time-limit' at 60 s and 32.35 uJ, 17.7 % above the surrogate's
    bound; as a plain einsum it is proven optimal in about a second)."""
    from pathlib import Path

    from storeloop.formats.load import energy_table, load_arch
    from storeloop.mapper import map_workload

    root = Path(__file__).resolve().parent
    arch = load_arch(root / "data/arch16.yaml")
    work = einsum_workload("c1x1", "O[n,k,p,q] = W[k,c,r,s] * I[n,c,p+r,q+s]",
                           {"N": 1, "C": 64, "K": 64, "P": 28, "Q": 28, "R": 1, "S": 1}, bits=16)
    out = map_workload(arch, work, energy_table(arch, None))
    assert out.search["stopped"] == "optimal" and "windows" not in out.search["space"]
    assert out.result.energy_pJ < 32.35e6


def test_a_two_axis_fanout_keeps_dimensions_apart():
    """Two dimensions that index the same tensors are merged into one for the search, which has
    one spatial loop a level: on a 2 x 2 mesh it could not put S along Y and R along X, the
    optimum of ``O[k] += I[k, r, s] * W[r, s]`` (K = 1, R = 2, S = 4) there. The search proved 3138.50
    pJ where brute force finds 3137.95; with a two-axis fanout nothing is merged."""
    arch, _, energy, _, at = window_case(17)
    assert arch.fanout(0)[1:] == (2, 2)
    work = einsum_workload("rs", "O[k] = I[k,r,s] * W[r,s]", {"K": 1, "R": 2, "S": 4}, bits=16)
    out = mapped_as_brute_force_says(17, arch, work, energy, "energy", None, {}, at=at)
    assert out.search["optimal"] and out.result.energy_pJ == pytest.approx(3137.948611412069, rel=1e-9)


def test_map_on_windowed_problems_matches_brute_force():
    """Random windowed problems mapped with a full proof asked, until 40 whose windows are not of
    unit dimensions only: whenever map says optimal, the brute-force minimum agrees; the
    certificate names the windowed space (the plain one for the others, searched as plain
    einsums; on a 2 x 2 mesh one of those, ``I[r, s] * W[r, s]``, found the search merging R and
    S, which cannot then take X and Y apart), and no leaf the model priced ever came under its
    surrogate bound."""
    proven = searched = windowed = seed = plain = 0
    while windowed < 40:
        arch, work, energy, objective, at = window_case(seed)
        out = mapped_as_brute_force_says(seed, arch, work, energy, objective, None, {}, at=at)
        seed += 1
        is_window = without_unit_terms(work).windowed
        windowed += is_window
        if out is None:
            continue
        s = out.search
        assert s["space"]["complete"]
        if not is_window:
            assert "windows" not in s["space"]
            plain += s["optimal"]
            continue
        assert "windows" in s["space"] and s["bound_violations"] == 0
        searched += s["exact_leaves"] > 0          # (else the local search's start was proven at once)
        proven += s["optimal"]
    assert proven >= 36, f"only {proven} of 40 windowed cases proven optimal"
    assert searched >= 20, f"only {searched} cases where the branch and bound priced leaves"
    assert plain >= 20, f"only {plain} of {seed - 40} cases searched as plain einsums proven optimal"


def _first_valid(arch, work, energy, at) -> tuple:
    """(cycles, energy, mapping) of the first valid mapping of the space: a poor incumbent."""
    for mapping in every_mapping(arch, work, {}, at):
        try:
            r = evaluate(arch, work, mapping, energy)
        except MappingError:
            continue
        return r.cycles, r.energy_pJ, mapping
    return None


def test_a_parallel_branch_and_bound_finds_the_windowed_optimum():
    """The branch and bound on its own in two processes (each walking every other top-level
    subtree, :func:`storeloop.mapper.search._run_shares`), from nothing (the first subtree walked
    first for an incumbent) and from a poor incumbent (every subtree shared out): on 15 random
    windowed problems its proven answer is the brute-force minimum, and each improvement it
    reports beats the one before."""
    from storeloop.mapper.search import branch_and_bound
    from storeloop.mapper.space import MapSpace
    from storeloop.mapper.tree import Tree

    improved = 0
    for seed in range(15):
        arch, work, energy, objective, at = window_case(seed)
        obj = Objective(objective)
        want = brute_force(arch, work, energy, objective, {}, at)
        poor = _first_valid(arch, work, energy, at)
        for incumbent in (None, poor):
            tree = Tree(MapSpace(arch, surrogate(work), exact=work), energy, exact=work)
            found = branch_and_bound(tree, obj, progress=False, threads=2, incumbent=incumbent)
            assert found.complete and tree.stats["bound_violations"] == 0
            got = (found.cycles, found.energy_pJ)
            got = {"energy": got[1:], "delay": got[:1], "edp": (got[0] * got[1],), "delay,energy": got}[objective]
            assert all(math.isclose(g, w, rel_tol=1e-9) for g, w in zip(got, want)), \
                f"seed {seed} ({objective}, incumbent {incumbent is not None}): {got}, brute force {want}"
            steps = [s[1:] for s in found.stats["improvements"]]
            assert all(obj.better(*b, a) for a, b in zip(steps, steps[1:]))
            improved += incumbent is not None and obj.better(found.cycles, found.energy_pJ, poor[:2])
    assert improved >= 5, f"the search from the poor incumbent improved on it in {improved} cases only"


def test_the_full_walk_skips_only_what_the_first_walk_settled(monkeypatch):
    """A windowed search's two walks (:func:`storeloop.mapper._two_walks`) from a poor incumbent:
    the first prices each exact leaf in its first order only and notes the top-level subtrees it
    walked without a leaf whose other orders could still win; the walk over every order skips
    them. On 20 random windowed problems, in one process and in two, the answer equals the brute
    force minimum, and the full walk skipped subtrees on some. (On problems this small the first
    walk finds the optimum in first orders: a mutant that settles every subtree passes here, on
    175 of them too; the per-leaf test below is the one with teeth.)"""
    from storeloop.mapper import _two_walks
    from storeloop.mapper.search import Goal
    from storeloop.mapper.space import MapSpace
    from storeloop.mapper.tree import Tree

    skipped, seeds = 0, 0
    for seed in range(60):
        arch, work, energy, objective, at = window_case(seed)
        if not without_unit_terms(work).windowed:
            continue
        seeds += 1
        if seeds > 20:
            break
        obj = Objective(objective)
        want = brute_force(arch, work, energy, objective, {}, at)
        poor = _first_valid(arch, work, energy, at)
        for threads in (1, 2):
            tree = Tree(MapSpace(arch, surrogate(work), exact=work), energy, exact=work)
            goal = Goal(tree.global_lb, tree.energy_bound()[0], 0.0, converge=False)
            found = _two_walks(tree, obj, lambda: None, 10 ** 12, threads=threads, progress=False,
                               incumbent=poor, goal=goal, trace=[])
            assert found.complete and tree.stats["bound_violations"] == 0 and not tree.settled
            got = (found.cycles, found.energy_pJ)
            got = {"energy": got[1:], "delay": got[:1], "edp": (got[0] * got[1],), "delay,energy": got}[objective]
            assert all(math.isclose(g, w, rel_tol=1e-9) for g, w in zip(got, want)), \
                f"seed {seed} ({objective}, {threads} processes): {got}, brute force {want}"
            skipped += found.stats.get("settled", 0) > 0
    assert skipped >= 5, f"the full walk skipped settled subtrees in {skipped} runs only"
    # `map` (a budget: the two walks) reports them, and its text says so
    from storeloop.cli.render import map_report
    from storeloop.mapper import map_workload

    arch, work, energy, objective, _ = window_case(16)
    out = map_workload(arch, work, energy, objective=objective, budget=10 ** 9, converge=False, energy_gap=0.0)
    assert out.search["stopped"] == "optimal" and out.search["settled_subtrees"] > 0
    text = map_report(out, arch, work)
    assert f"{out.search['settled_subtrees']:,} top-level subtrees settled" in text
    # (and the last-level nodes its send floor ruled out before they were built: Tree.floor_cut)
    assert out.search["floored_nodes"] > 0 and f"{out.search['floored_nodes']:,} last-level nodes" in text



def test_the_tree_alone_finds_the_windowed_optimum():
    """The branch and bound on its own (no local search to hand it a good start): on 15 random
    windowed problems its proven answer is the brute-force minimum, so every loop order and
    spatial order it must price is in its space."""
    from storeloop.mapper.objective import Objective
    from storeloop.mapper.search import branch_and_bound
    from storeloop.mapper.space import MapSpace
    from storeloop.mapper.tree import Tree

    for seed in range(15):
        arch, work, energy, objective, at = window_case(seed)
        tree = Tree(MapSpace(arch, surrogate(work), exact=work), energy, exact=work)
        found = branch_and_bound(tree, Objective(objective), progress=False)
        want = brute_force(arch, work, energy, objective, {}, at)
        assert found.complete and tree.stats["bound_violations"] == 0
        got = (found.cycles, found.energy_pJ)
        got = {"energy": got[1:], "delay": got[:1], "edp": (got[0] * got[1],), "delay,energy": got}[objective]
        assert all(math.isclose(g, w, rel_tol=1e-9) for g, w in zip(got, want)), \
            f"seed {seed} ({objective}): the tree's optimum {got}, brute force {want}\n{work}\n{arch}"


def test_a_windowed_space_keeps_every_loop_order_apart():
    """A sliding window's arrivals depend on the whole order of the loops above a level (a step
    after a standstill reloads), so the tree's orders at each level (one per surrogate price, as
    for a plain problem) stand for every permutation of the present dimensions, each exactly once."""
    from storeloop.mapper.space import MapSpace

    work = einsum_workload("c1d", "O[k,p] = W[k,c,r] * I[c,p+r]", {"K": 2, "C": 2, "P": 4, "R": 3}, bits=16)
    arch, *_ = window_case(0)
    space = MapSpace(arch, surrogate(work), exact=work)
    every = (1 << len(space.classes)) - 1
    reps = space.orders[0][every]
    assert len(reps) < math.factorial(4)
    covered = [p for rep in reps for p in space.expansions[0][rep]]
    assert sorted(covered) == sorted(itertools.permutations(range(4)))


def test_a_budget_stops_the_exact_leaves_too():
    """A leaf priced by the reference model counts as EXACT_COST candidates, and the pricing of one
    leaf's orders stops where the budget does: a windowed problem whose proof prices hundreds of
    leaves, given a budget of a few, stops `budget` after at most that many in each of its two
    walks (the first over first orders with FIRST_ORDERS of it, then the full one; before, leaves
    were not counted and one leaf could price hundreds of orders past any budget or time limit)."""
    from storeloop.mapper import FIRST_ORDERS, map_workload
    from storeloop.mapper.tree import EXACT_COST

    arch, work, energy, objective, _ = window_case(11)
    full = map_workload(arch, work, energy, objective=objective, energy_gap=0.0, converge=False)
    assert full.search["optimal"] and full.search["exact_leaves"] > 300
    for leaves in (20, 50):
        out = map_workload(arch, work, energy, objective=objective, energy_gap=0.0, converge=False,
                           budget=leaves * EXACT_COST)
        s = out.search
        assert s["stopped"] == "budget" and not s["optimal"] and 0 < s["exact_leaves"] <= leaves * (1 + FIRST_ORDERS), s


@pytest.mark.slow
def test_eyeriss_default_layer_at_least_as_good_as_timeloops_mapper():
    """Timeloop's Eyeriss-like example design and its default layer (a strided 3x3 convolution),
    mapped from the arch and its constraints alone with a budget of a million candidates (about 40 s
    here): no more cycles, and no more energy, than the mapping Timeloop's mapper shipped with the
    design, both priced by the same model (86,016 cycles, 58.31 uJ; the later Timeloop that made the
    reference prints 59.26 uJ, docs/timeloop-rules.md)."""
    from conftest import ROOT
    from storeloop.mapper import map_workload
    from storeloop.formats.load import load_arch, load_energy_table, load_mapping, load_workload

    ex = ROOT / "tests" / "timeloop-exercises" / "design-eyeriss_like"
    arch = load_arch(ex / "arch.yaml")
    work = load_workload(ex / "problem.yaml")
    energy = load_energy_table(arch, ex / "ERT.yaml", ex / "ART.yaml")
    ref = evaluate(arch, work, load_mapping(ex / "mapping.yaml", arch, work), energy)
    out = map_workload(arch, work, energy, budget=1_000_000)
    assert out.result.cycles <= ref.cycles and out.result.energy_pJ <= ref.energy_pJ, \
        (out.result.cycles, out.result.energy_pJ, ref.cycles, ref.energy_pJ)
    assert out.search["bound_violations"] == 0


def test_the_true_tile_bound_never_cuts_a_windowed_optimum():
    """A windowed tensor's fills (where no fanout feeds its level) and its parent's reads (fanout
    or not, per child apart along a plain rank) are bounded by its true tile times the surrogate's
    repetitions (Tree._window_arrivals). On 40 random windowed
    problems the tree alone, told that a mapping a hair worse than the brute-force optimum
    exists, must still find the optimum: every bound on the optimum's path stays at or below it
    (the same bound inflated by a quarter prunes it: seed 35)."""
    from storeloop.mapper.objective import Objective
    from storeloop.mapper.search import branch_and_bound
    from storeloop.mapper.space import MapSpace
    from storeloop.mapper.tree import Tree

    tighter = 0
    for seed in range(40):
        arch, work, energy, objective, at = window_case(seed)
        objective = "delay,energy" if objective in ("delay", "delay,energy") else "energy"
        want = brute_force(arch, work, energy, objective, {}, at)
        if want is None:
            continue
        cycles, least = want if objective == "delay,energy" else (math.inf, want[0])
        tree = Tree(MapSpace(arch, surrogate(work), exact=work), energy, exact=work)
        found = branch_and_bound(tree, Objective(objective), progress=False,
                                 incumbent=(cycles, least * (1 + 1e-7), None))
        assert found.mapping is not None and math.isclose(found.energy_pJ, least, rel_tol=1e-9), \
            f"seed {seed} ({objective}): the tree found {found.energy_pJ}, brute force {want}\n{work}\n{arch}"
        assert tree.stats["bound_violations"] == 0
        tighter += bool(tree.windowed)
    assert tighter >= 30, tighter


def test_an_expansion_in_pieces_and_a_cap_on_children(monkeypatch):
    """A level is expanded in pieces of at most CHUNK_ROWS rows (memory stays bounded on large
    layers): in pieces of 5 rows every answer and claim is the same as in one piece. An expansion
    keeps at most MAX_CHILDREN children: with 3, the search that ends says 'truncated', never
    'optimal' unless a bound proves it, and what it calls optimal is the brute-force minimum."""
    from storeloop.mapper import map_workload
    from storeloop.mapper import tree as T

    def run(seed):
        arch, work, energy, objective, at = window_case(seed)
        out = map_workload(arch, work, energy, objective=objective, energy_gap=0.0, converge=False)
        return out.result.cycles, out.result.energy_pJ, out.search["stopped"]

    seeds = range(12)
    whole = [run(s) for s in seeds]
    monkeypatch.setattr(T, "CHUNK_ROWS", 5)
    assert [run(s) for s in seeds] == whole
    monkeypatch.setattr(T, "MAX_CHILDREN", 3)
    capped = [run(s) for s in seeds]
    assert any(c[2] == "truncated" for c in capped)
    for s, (cyc, pj, stopped), (wc, wpj, _) in zip(seeds, capped, whole):
        assert stopped in ("optimal", "truncated")
        if stopped == "optimal":
            assert (cyc, pj) == pytest.approx((wc, wpj), rel=1e-9), s


def test_the_units_link_walk_in_blocks_counts_the_same(monkeypatch):
    """The units' link walk (model/nest.py) holds at most LINK_WALK_WORDS points at once: walked
    one step at a time, every mapping of windowed problems whose units sit under a fanout costs
    exactly what the whole walk gives."""
    from storeloop.model import nest

    mappings = []
    for seed in range(40):
        arch, work, energy, _, at = window_case(seed)
        if arch.compute.instances > 1:
            mappings += [(arch, work, energy, m) for m in itertools.islice(every_mapping(arch, work, {}, at), 0, None, 7)]
    whole = []
    for arch, work, energy, m in mappings:
        try:
            whole.append(evaluate(arch, work, m, energy).energy_pJ)
        except MappingError:
            whole.append(None)
    monkeypatch.setattr(nest, "LINK_WALK_WORDS", 1)
    for (arch, work, energy, m), want in zip(mappings, whole):
        if want is not None:
            assert evaluate(arch, work, m, energy).energy_pJ == want
    assert sum(w is not None for w in whole) >= 1000


def test_a_search_the_time_limit_ends_still_gets_its_retry():
    """The branch and bound gets all but a tenth of the time limit; when the limit ends it, the
    longer local search from its best still runs in that tenth (as after 'converged'), so a
    search keeps what the local search finds. (ResNet-50 conv3_x on the peers' arch with
    --no-converge: the branch and bound alone stayed at 1,149 uJ for 600 s; with a 40 s limit the
    retry ends at 769 uJ, near the default search's 761.5 uJ.) The seconds it reports are all of
    its time: the local searches' and both walks' (a windowed search first walks the first orders,
    then the whole space; the first walk's seconds were left out)."""
    from conftest import ROOT
    from storeloop.formats.load import energy_table, load_arch, load_workload
    from storeloop.mapper import map_workload

    arch = load_arch(ROOT / "tests/data/arch16.yaml")
    out = map_workload(arch, load_workload(ROOT / "tests/data/conv3x.yaml"), energy_table(arch, None),
                       time_limit=6, converge=False)
    s = out.search
    assert s["stopped"] == "time-limit" and "retry" in s["local_search"]
    assert s["local_search"]["retry"]["time_limit"]     # its patience outlasts the tenth: the report says so
    assert not s["local_search"]["time_limit"]         # (the first local search ended on its own)
    assert s["seconds"] >= 0.85 * 6                # it ran into the limit (1.9 s without the first walk's)
    assert out.result.energy_pJ <= min(i["energy_pJ"] for i in s["improvements"]) * (1 + 1e-12)


def _window_searchers(seeds: int, objective: str | None = None, count: int = 1):
    """Per windowed case of :func:`window_case` (seeds 0 .. seeds - 1; those the mapper searches as
    plain einsums left out): (seed, its prepared search, the objective: ``objective`` or the
    case's, ``count`` local searchers of it)."""
    from storeloop.mapper import _prepare
    from storeloop.mapper.construct import Searcher
    from storeloop.mapper.objective import Objective
    from storeloop.model.fast import FastModel

    for seed in range(seeds):
        arch, work, energy, drawn, _ = window_case(seed)
        p = _prepare(arch, work, energy, None, False)
        if p.window:
            obj = objective or drawn
            yield seed, p, obj, [Searcher(p.space, FastModel(p.arch, p.tree.priced, p.energy), Objective(obj))
                                 for _ in range(count)]


def test_the_local_search_measures_a_windowed_tile_as_the_model_does():
    """The local search ranks a mapping that overflows a buffer by its overflow, and its
    constructive starts grow tiles while they fit: for a windowed tensor both count the model's
    tile (each rank's extent sum(c * (F - 1)) + 1), not the surrogate's. Over the starts, their
    neighbours and theirs on random windowed problems, a mapping fits by that count exactly when
    the model accepts it, and the batched count equals one at a time."""
    fits = overflows = 0
    for seed, p, _, (s,) in _window_searchers(30, "delay,energy"):
        states = []
        for start in s.starts():
            near = list(s.moves(start))
            states += [start] + near + [t for n in near[:10] for t in s.moves(n)]
        states = [st for st in states if s.admissible(st)][:400]
        assert s._overflows(states) == [s._overflow(st.tf, st.sx, st.sy, st.keep) for st in states]
        for st, over in zip(states, s._overflows(states)):
            try:
                evaluate(p.arch, p.tree.priced, s.mapping(st), p.energy)
            except MappingError:
                assert over > 0, f"seed {seed}: the model refuses a mapping the local search counts as fitting"
                overflows += 1
            else:
                assert over == 0, f"seed {seed}: the model accepts a mapping the local search counts {over} words over"
                fits += 1
    assert fits > 500 and overflows > 100, (fits, overflows)


def test_a_windowed_descent_step_is_the_one_full_pricing_takes():
    """A descent's step on a windowed problem prices exactly only the neighbours whose surrogate
    price could still win (:meth:`Searcher._least`): it must take the neighbour that pricing all of
    them takes (the first of the cheapest, if cheaper than the current state), under each case's
    objective (delay, delay-then-energy, EDP or energy), from the starts and from random states
    along the way, and price fewer of them."""
    steps = spared = 0
    for seed, p, objective, (lazy, full) in _window_searchers(40, count=2):
        full.surrogate = None
        assert lazy.surrogate is not None
        rng = random.Random(seed)
        for start in lazy.starts():
            state = start
            for _ in range(6):
                near = list(lazy.moves(state))
                if not near:
                    break
                current = full.cost(state)
                got, want = lazy._least(near, current), full._least(near, current)
                assert got[1] == want[1] and (got[0] is None) == (want[0] is None), (seed, objective)
                assert got[0] is None or got[0].key() == want[0].key(), (seed, objective)
                steps += 1
                state = got[0] if got[0] is not None and rng.random() < 0.5 else near[rng.randrange(len(near))]
        spared += full.evaluations - lazy.evaluations
    assert steps > 500 and spared > 500, (steps, spared)


def test_a_windowed_tensors_send_floor_never_exceeds_the_models_reads():
    """model.nest.send_floors, which bounds a windowed tensor's reads in one loop order (the
    tree's exact leaves skip an order it shows cannot win): over every mapping of 40 random
    windowed problems (fanouts to the MACs and above the register files, meshes with links) it is
    at most the reads the model counts at the parent, per instance, and equal to them on many
    (where the walk only slides or only reloads whole boxes)."""
    from storeloop.model.nest import send_floors

    checked = equal = 0
    for seed, arch, work, mapping, stats, t in _windowed_reads(40):
        for (pl, _), words in send_floors(work, mapping, t).items():
            reads = stats.levels[pl].tensors[t.name].reads
            assert words <= reads, f"seed {seed}: floor {words} over the model's {reads} reads of {t.name} " \
                                   f"at {arch.levels[pl].name}\n{work}\n{arch}\n{mapping}"
            checked += 1
            equal += words == reads
    assert checked >= 20_000 and equal >= checked // 4, (checked, equal)


def _windowed_reads(seeds: int):
    """(seed, arch, workload, mapping, the model's counts, tensor) for every valid mapping of the
    first ``seeds`` random windowed problems and each of their windowed read-only tensors."""
    from storeloop.model.nest import analyze

    for seed in range(seeds):
        arch, work, energy, _, at = window_case(seed)
        tensors = [t for t in work.tensors if t.window and not t.read_write]
        for mapping in every_mapping(arch, work, {}, at):
            try:
                evaluate(arch, work, mapping, energy)
            except MappingError:
                continue
            stats = analyze(arch, work, mapping)
            for t in tensors:
                yield seed, arch, work, mapping, stats, t


def test_a_windowed_tensors_fanout_and_unit_sends_are_the_models_reads():
    """model.nest.fanout_sends, the words a keeper of a windowed tensor serves a child keeper right
    under a fanout (the link walk), and model.nest.unit_sends, the operands its innermost keeper
    serves the compute units (one per compute to each unit with a distinct tile): over every
    mapping of 40 random windowed problems they are the reads the model counts at that keeper,
    per instance (plus, where the keeper itself receives over links, the words it forwards). For
    a child keeper they exceed the box floor of send_floors on 1,982 of them: a walk that let
    every halo pass over a link would not be the model's count."""
    from storeloop.model.nest import fanout_sends, send_floors, unit_sends

    checked = above = units = 0
    for seed, arch, work, mapping, stats, t in _windowed_reads(40):
        floors = send_floors(work, mapping, t)
        got = list(fanout_sends(arch, work, mapping, t).items())
        unit = unit_sends(work, mapping, t)
        if unit is not None:
            got.append(((unit[0], len(arch.levels)), unit[1]))
            units += 1
        for (pl, child), words in got:
            st = stats.levels[pl].tensors[t.name]
            assert st.kept and words <= st.reads, (seed, pl, child, words, st.reads, str(mapping))
            if pl == 0 or not any(lp.factor > 1 for lp in mapping.levels[pl - 1].spatial):
                assert words == st.reads, (seed, pl, child, words, st.reads, str(mapping))
            checked += 1
            above += (pl, child) in floors and words > floors[pl, child]
    assert checked >= 20_000 and units >= 10_000 and above >= 1_000, (checked, units, above)


def test_a_windowed_tensors_send_floor_ignores_the_last_levels_loop_order():
    """The tree's exact leaves bound a leaf's sends once per order of the levels above the last
    (Tree._exact_leaves), because model.nest.send_floors counts only the loops above each child
    keeper, and the last level's only through their products. Over every mapping of 40 random
    windowed problems whose last level has two loops or more, every order of them gives the same
    floors (over 10,000 orders checked)."""
    from storeloop.model.nest import send_floors

    reordered = 0
    for seed in range(40):
        arch, work, _, _, at = window_case(seed)
        tensors = [t for t in work.tensors if t.window and not t.read_write]
        for mapping in every_mapping(arch, work, {}, at):
            last = mapping.levels[-1]
            loops = [lp for lp in last.temporal if lp.factor > 1]
            if len(loops) < 2 or not tensors:
                continue
            for t in tensors:
                want = send_floors(work, mapping, t)
                for order in itertools.permutations(loops):
                    other = dataclasses.replace(mapping, levels=mapping.levels[:-1] + (
                        dataclasses.replace(last, temporal=tuple(order)),))
                    assert send_floors(work, other, t) == want, f"seed {seed}\n{mapping}\n{other}"
                    reordered += 1
    assert reordered >= 10_000, reordered


def _some_leaves(arch, work, energy, monkeypatch) -> tuple:
    """A windowed problem's tree and the first three leaves of each last-level node a budgeted
    search (2 M candidates) priced exactly: (cycles, energy, choice, node) each."""
    from storeloop.mapper.objective import Objective
    from storeloop.mapper.search import branch_and_bound
    from storeloop.mapper.space import MapSpace
    from storeloop.mapper.tree import Tree

    tree = Tree(MapSpace(arch, surrogate(work), exact=work), energy, exact=work)
    leaves = []
    real = Tree._exact_leaves

    def capture(self, cycles, energy_pJ, choice, best, objective, n):
        for i in np.nonzero(np.isfinite(cycles))[0][:3]:
            leaves.append((cycles[i:i + 1], energy_pJ[i:i + 1], choice(int(i)), n))
        return real(self, cycles, energy_pJ, choice, best, objective, n)

    monkeypatch.setattr(Tree, "_exact_leaves", capture)
    branch_and_bound(tree, Objective("energy"), progress=False, budget=2_000_000)
    monkeypatch.setattr(Tree, "_exact_leaves", real)
    tree.halt = lambda: False                       # (the search's budget is spent)
    return tree, leaves


def _windowed_leaves(seeds: int, monkeypatch):
    """(seed, arch, workload, energy, tree, leaf) for the leaves :func:`_some_leaves` captures on
    each of the first ``seeds`` random problems that keep a window."""
    for seed in range(seeds):
        arch, work, energy, _, at = window_case(seed)
        if not without_unit_terms(work).windowed:
            continue
        tree, leaves = _some_leaves(arch, work, energy, monkeypatch)
        for leaf in leaves:
            yield seed, arch, work, energy, tree, leaf


def _spatial_orders(tree, base: tuple, loops: tuple):
    """Leaf ``base`` in the temporal orders ``loops``, in every order of the spatial loops of the
    levels above the last (each a complete choice for ``tree.mapping``)."""
    split = [tree._spatial_dims(c) for c in base[:-1]]
    for inner in itertools.product(*(itertools.permutations(ds) for ds in split)):
        yield tuple(c[:3] + (o,) + c[4:5] + (so,) for c, o, so in zip(base, loops, inner + (base[-1][5],)))


def test_an_exact_leaf_prices_every_order_it_stands_for(monkeypatch):
    """A leaf of a windowed problem stands for every temporal order its levels' orders expand to
    and every order of the spatial loops above the last level: the model prices each combination
    (before, the spatial orders were iterators used up by the first temporal order, so only that
    order was ever priced and a proof covered less than its certificate said). Each is priced or
    ruled out by a bound of its windowed sends (Tree._send_floor) or by its own surrogate price."""
    import storeloop.mapper.tree as tree_module
    from storeloop.mapper.objective import Objective

    checked = 0
    for seed in range(60):
        arch, work, energy, _, at = window_case(seed)
        if not without_unit_terms(work).windowed:
            continue
        tree, leaves = _some_leaves(arch, work, energy, monkeypatch)
        priced = []
        monkeypatch.setattr(tree_module, "evaluate",
                            lambda a, w, m, e: (w is work and priced.append(m)) or evaluate(a, w, m, e))
        for cycles, energy_pJ, base, n in leaves:
            orders = math.prod(len(tree.space.expansions[L][c[3]]) for L, c in enumerate(base))
            spatial = math.prod(math.factorial(len(tree._spatial_dims(c))) for c in base[:-1])
            if orders * spatial < 2:
                continue
            priced.clear()
            floored = tree.stats.get("floored", 0) + tree.stats.get("priced_out", 0)
            tree._exact_leaves(cycles, energy_pJ, lambda i, b=base: b, None, Objective("energy"), n)
            # each priced, or ruled out by its windowed sends or its surrogate price with every spatial order
            ruled_out = tree.stats.get("floored", 0) + tree.stats.get("priced_out", 0) - floored
            assert len(priced) + ruled_out == orders * spatial, \
                (seed, len(priced), orders, spatial)
            checked += 1
        monkeypatch.setattr(tree_module, "evaluate", evaluate)
    assert checked >= 20, checked


def test_a_first_walk_leaves_a_leaf_open_where_another_order_could_win(monkeypatch):
    """A windowed search's first walk prices each exact leaf in its first temporal order only
    (with every spatial order) and notes where a leaf's other orders could still beat the best
    (``Tree.open_orders``): the walk over every order re-walks only those top-level subtrees. On
    the leaves of random windowed problems that stand for several orders, each priced by the
    model in every one: with the best so far just above the cheapest of them, and with it just
    below, a leaf left settled has no order that beats the best after its first order's pricing;
    and where one does, the leaf is left open. A mutant that never leaves a leaf open fails it
    (checked), and one that floors the other orders with the first order's floor."""
    from storeloop.mapper.objective import Objective

    obj = Objective("energy")
    must_open = settled = 0
    for seed in range(60):
        arch, work, energy, _, at = window_case(seed)
        if not without_unit_terms(work).windowed:
            continue
        tree, leaves = _some_leaves(arch, work, energy, monkeypatch)
        for cycles, energy_pJ, base, n in leaves:
            orders = [tree.space.expansions[L][c[3]] for L, c in enumerate(base)]
            if math.prod(len(o) for o in orders) < 2:
                continue
            split = [tree._spatial_dims(c) for c in base[:-1]]
            prices = {}                                   # per temporal order: its spatial orders' least energy
            for loops in itertools.product(*orders):
                for inner in itertools.product(*(itertools.permutations(ds) for ds in split)):
                    ch = tuple(c[:3] + (o,) + c[4:5] + (so,) for c, o, so in zip(base, loops, inner + (base[-1][5],)))
                    try:
                        e = evaluate(tree.model_arch, tree.exact, tree.mapping(ch), tree.energy).energy_pJ
                    except MappingError:
                        continue
                    prices[loops] = min(prices.get(loops, math.inf), e)
            if not prices:
                continue
            first = next(iter(itertools.product(*orders)))
            least = min(prices.values())
            for key_e in (least * (1 + 1e-6), least * (1 - 1e-6)):
                tree.first_orders, tree.open_orders = True, False
                try:
                    tree._exact_leaves(cycles, energy_pJ, lambda i, b=base: b, (0, key_e), obj, n)
                finally:
                    tree.first_orders = False
                after = min(key_e, prices.get(first, math.inf))     # the best once its first order is priced
                wins = any(e < after for loops, e in prices.items() if loops != first)
                assert tree.open_orders or not wins, (seed, base, prices, key_e)
                must_open += wins
                settled += not tree.open_orders
    assert must_open >= 5 and settled >= 5, (must_open, settled)


def test_a_leafs_send_floor_with_the_window_walks_stays_below_the_model(monkeypatch):
    """The floor a windowed leaf adds to its price in each order above the last level
    (Tree._exact_leaves): the box floor of each pair of keepers, raised to the model's own count
    where the child sits right under a fanout (the least over that fanout's spatial orders), plus
    the operands the compute units read from the tensor's innermost keeper beyond what the node
    counted (Tree._window_words, Tree._unit_floor). Per leaf of random windowed problems, in
    every order and spatial order it stands for, the price plus that floor is at most the
    model's energy (12,300 pricings on 200 problems); the window walks raise it above the box
    floor in 4,508 of them. Taking the most over the spatial orders instead of the least, or the
    units' operands without the leaf's own count taken off, fails it."""
    checked = raised = 0
    for seed, arch, work, energy, tree, (cycles, energy_pJ, base, n) in _windowed_leaves(200, monkeypatch):
        orders_above, pairs = tree._send_terms(n)
        index = [{o: k for k, o in enumerate(os)} for os in orders_above]
        for loops in itertools.product(*(tree.space.expansions[L][c[3]] for L, c in enumerate(base))):
            up = tuple(index[L][o] for L, o in enumerate(loops[:-1]))
            floor = tree._order_send_floor(pairs, up, tree._window_words(base, loops[:-1])) + tree._unit_floor(n, base)
            raised += floor > tree._order_send_floor(pairs, up) * (1 + 1e-9)
            for ch in _spatial_orders(tree, base, loops):
                try:
                    model = evaluate(arch, work, tree.mapping(ch), energy).energy_pJ
                except MappingError:
                    continue
                assert (energy_pJ[0] + floor) * (1 - 1e-9) <= model, (seed, energy_pJ[0], floor, model)
                checked += 1
    assert checked >= 5_000 and raised >= 1_000, (checked, raised)


def test_a_leaf_keeps_its_best_order_among_those_its_own_surrogate_price_rules_out(monkeypatch):
    """Tree._exact_leaves skips an order a leaf stands for where the surrogate's price of that very
    order already loses (the orders whose reuse differs from the rep the tree priced,
    MapSpace.pricier: the surrogate prices every mapping at most as the model does). Per leaf of
    random windowed problems, told that a mapping a hair worse than the leaf's best order (the
    model over every order and spatial order it stands for) exists, the leaf still returns that
    best; on some of them the best is one of those orders with its surrogate price within 25 % of
    the model's (on problems this small the surrogate is loose), so a price inflated by 25 % would
    lose it. The surrogate's price of a leaf is the same in every order of its last level and every
    spatial order above it (the search computes it once for the spatial orders, and for the last
    level's orders too where that level has no spatial loop)."""
    from storeloop.mapper.objective import Objective

    checked = tight = 0
    for seed, arch, work, energy, tree, (cycles, energy_pJ, base, n) in _windowed_leaves(200, monkeypatch):
        orders = [tree.space.expansions[L][c[3]] for L, c in enumerate(base)]
        if not any(o in tree.space.pricier[L] for L in range(len(base) - 1) for o in orders[L]):
            continue
        every = []
        for loops in itertools.product(*orders):
            for ch in _spatial_orders(tree, base, loops):
                try:
                    r = evaluate(arch, work, tree.mapping(ch), energy)
                except MappingError:
                    continue
                own = evaluate(arch, tree.workload, tree.mapping(ch), energy).energy_pJ
                every.append((r.energy_pJ, own, loops))
        if not every:
            continue
        # (the surrogate's price does not depend on the last level's order or the spatial
        # orders: the leaf prices it once per order of the levels above the last)
        for up in {x[2][:-1] for x in every}:
            owns = [x[1] for x in every if x[2][:-1] == up]
            assert max(owns) == pytest.approx(min(owns), rel=1e-12), (seed, up, owns)
        least, own, loops = min(every, key=lambda x: x[0])
        out = tree._exact_leaves(cycles, energy_pJ, lambda i, b=base: b, (10 ** 12, least * (1 + 1e-7)),
                                 Objective("energy"), n)
        assert out and out[1] == pytest.approx(least, rel=1e-12), (seed, out and out[1], least)
        checked += 1
        tight += any(o in tree.space.pricier[L] for L, o in enumerate(loops[:-1])) and own * 1.25 > least
    assert checked >= 20 and tight >= 3, (checked, tight)


@pytest.mark.parametrize("seed", [8, 11, 32])
def test_a_windowed_search_priced_ahead_goes_as_one_priced_node_by_node(seed, monkeypatch):
    """The last level's nodes of a windowed problem have their leaves' surrogate prices computed
    ahead in batches (Tree.prefetch; their exact leaves still priced when the search visits them,
    against the best then): the same answer, stop, candidates and exact leaves as a search that
    prices every node alone when it visits it."""
    from storeloop.mapper import map_workload
    from storeloop.mapper.tree import Tree

    arch, work, energy, objective, _ = window_case(seed)
    ahead = map_workload(arch, work, energy, objective=objective, energy_gap=0.0, converge=False)
    monkeypatch.setattr(Tree, "prefetch", lambda self, nodes, objective: None)
    alone = map_workload(arch, work, energy, objective=objective, energy_gap=0.0, converge=False)
    assert ahead.search["exact_leaves"] > 50
    for k in ("candidates", "exact_leaves", "floored_leaves", "floored_nodes", "priced_out_leaves", "stopped"):
        assert ahead.search[k] == alone.search[k], k
    assert (ahead.result.cycles, ahead.result.energy_pJ) == (alone.result.cycles, alone.result.energy_pJ)
    assert ahead.mapping == alone.mapping


def _refill_case(seed: int):
    """A random windowed problem where the refill bound applies: DRAM -> GLB -> k x RF -> k MACs
    (k 1-4, or a 2 x 2 mesh), or with a fanout above the RFs too (DRAM -> GLB -> j x L2 -> j k x
    RF); random capacities and energies."""
    rng = random.Random(70_000 + seed)
    text, dims = rng.choice(WINDOWS + [("O[k,p] = W[k,c,r] * I[c,2*p+r]", "KCPR")])
    while True:
        bounds = {d: rng.choice([1, 2, 2, 3, 4, 6]) for d in dims}
        if 12 <= math.prod(bounds.values()) <= 144:
            break
    work = einsum_workload(f"rw{seed}", text, bounds, bits=16)
    costs = {"DRAM": ActionCosts(rng.uniform(50, 200), rng.uniform(50, 200), 0.0, "r"),
             "GLB": ActionCosts(rng.uniform(2, 20), rng.uniform(2, 20), 100.0, "r"),
             "L2": ActionCosts(rng.uniform(1, 5), rng.uniform(1, 5), 20.0, "r"),
             "RF": ActionCosts(rng.uniform(0.1, 1), rng.uniform(0.1, 1), 10.0, "r")}
    mesh = rng.random() < 0.2
    k = 4 if mesh else rng.choice([1, 2, 3, 4])
    levels = [StorageLevel("DRAM", "DRAM", 1, None, None, 16, 1),
              StorageLevel("GLB", "SRAM", 1, None, rng.choice([12, 16, 24, 48]), 16, 1)]
    j = 1 if mesh else rng.choice([1, 1, 2])
    if j > 1:
        levels.append(StorageLevel("L2", "SRAM", j, None, rng.choice([6, 8, 12]), 16, 1))
    levels.append(StorageLevel("RF", "regfile", j * k, 2 if mesh else None, rng.choice([2, 3, 4, 6, 9]), 16, 1))
    arch = Arch("rw", tuple(levels), ComputeLevel("MAC", "intmac", j * k, 2 if mesh else None, 16), clock_hz=1e9)
    energy = EnergyTable({lvl.name: costs[lvl.name] for lvl in levels},
                         ActionCosts(rng.uniform(0.5, 3), 0.0, 50.0, "r"), "r")
    return arch, work, energy


def test_a_nodes_refill_bound_follows_the_window_and_stays_below_its_subtree():
    """Below a node, the refill bound (BelowBounds.refine) counts a windowed tensor at the
    innermost level by its true tile (capacity), the words each step of the loop above brings
    (the whole tile along a rank of one dimension, the slide's new words along a window), those
    its wraps bring by the loop that may be next out, and the union of the units' tiles across its
    top; a child's own bound counts the same for the loops its level chose above a windowed
    tensor it keeps (Tree._window_slides). Per node, down to the last level's, against the least
    energy of its whole subtree (every leaf priced by the model), on random windowed problems over
    DRAM -> GLB -> RFs (some with a fanout above the RFs, some meshes): no node's bound is above
    it."""
    from storeloop.ir.constraints import Constraints
    from storeloop.mapper import _prepare
    from storeloop.mapper.objective import Objective
    from tests.test_uneven_mapper import _least_below, random_walk

    obj, checked, raised = Objective("energy"), 0, 0
    for seed in range(80):
        arch, work, energy = _refill_case(seed)
        tree = _prepare(arch, work, energy, Constraints(), False).tree
        if tree.exact is None:
            continue
        for node, ch, i, bound, child in random_walk(tree, obj, seed, 30, tree.nlev - 2, False):
            least = _least_below(tree, child, obj)
            if least is None:
                continue
            checked += 1
            raised += bound > ch.elb[i]
            assert bound <= least[1] * (1 + 1e-9), \
                f"seed {seed}: a node at level {node.depth + 1} is bounded at {bound}, its subtree's least " \
                f"is {least[1]}\n{work}\n{arch}"
    assert checked >= 300 and raised >= 100, (checked, raised)


def _random_mapping(rng: random.Random, arch, work, t: str) -> Mapping:
    """A random mapping of ``work`` on a _refill_case arch (its fanouts above the RFs and the
    last level keeping ``t``): random factors, orders, spatial loops and keep sets."""
    nlev, dims = len(arch.levels), range(len(work.dims))
    fan = [arch.fanout(L)[0] for L in range(nlev)]
    parts = {d: [1] * (2 * nlev) for d in dims}          # per level: temporal, spatial
    for d in dims:
        for p in prime_factors(work.bounds[d]):
            parts[d][rng.randrange(2 * nlev)] *= p
    for L in range(nlev):                                 # spatial loops only where a fanout fits them
        while math.prod(parts[d][2 * L + 1] for d in dims) > fan[L]:
            d = rng.choice([d for d in dims if parts[d][2 * L + 1] > 1])
            parts[d][2 * L], parts[d][2 * L + 1] = parts[d][2 * L] * parts[d][2 * L + 1], 1
    names = [x.name for x in work.tensors]
    levels = []
    for L in range(nlev):
        order = [d for d in dims if parts[d][2 * L] > 1]
        rng.shuffle(order)
        axis = "X" if arch.fanout(L)[2] == 1 else None
        sp = []
        for d in dims:
            if parts[d][2 * L + 1] > 1:
                sp.append(Loop(d, parts[d][2 * L + 1], True, axis or rng.choice("XY")))
        keep = None if L == 0 else frozenset(n for n in names if n == t and L == nlev - 1 or rng.random() < 0.5)
        levels.append(LevelMapping(tuple(Loop(d, parts[d][2 * L]) for d in order), tuple(sp), keep))
    return Mapping(tuple(levels))


def test_a_windowed_tensors_refill_words_never_exceed_the_models():
    """The refill bound's words of a windowed tensor at the innermost level R
    (BelowBounds._window_refills), against the model mapping by mapping: for random mappings of
    random windowed problems over DRAM -> GLB [-> L2] -> RFs, with R keeping the tensor and each
    level L1 above R, the words it says enter R are at most the model's fills there, and the words
    it says cross R's top at most the model's reads at the tensor's keeper above R (links between
    the units welcome). Equal on many; mutants that count 1.2x the words into R or across its
    top, every wrap of a window's loop as a step, or the units' union as a box over f x s (a
    stride leaves gaps between the units' tiles), fail at once."""
    from storeloop.ir.constraints import Constraints
    from storeloop.mapper import _prepare

    checked = equal_in = equal_up = 0
    for seed in range(60):
        arch, work, energy = _refill_case(seed)
        tree = _prepare(arch, work, energy, Constraints(), False).tree
        if tree.exact is None or not tree.windowed:
            continue
        R, nlev, rng = tree.nlev - 1, tree.nlev, random.Random(seed)
        for _ in range(150):
            t = rng.choice(tree.windowed)
            name = work.tensors[t].name
            mapping = _random_mapping(rng, arch, work, name)
            try:
                result = evaluate(arch, work, mapping, energy)
            except MappingError:
                continue
            counts = {(lvl.name, n): c for lvl in result.levels for n, c in lvl.tensors.items()}
            fills = counts[arch.levels[R].name, name]
            fills = fills.fills_per_instance * fills.utilized_instances
            parent = max(L for L in range(R) if mapping.levels[L].keep is None or name in mapping.levels[L].keep)
            reads = counts[arch.levels[parent].name, name]
            reads = reads.reads_per_instance * reads.utilized_instances
            f = np.array([math.prod(lp.factor for lp in mapping.levels[R].temporal if lp.dim == d)
                          for d in range(tree.D)], np.int64)
            above = [lp for lm in mapping.levels[:R] for lp in lm.temporal if lp.factor > 1]
            for L1 in range(1, R):
                s = np.array([math.prod(lp.factor for lm in mapping.levels[L1:R] for lp in lm.spatial if lp.dim == d)
                              for d in range(tree.D)], np.int64)
                rem = f * s * np.array([math.prod(lp.factor for lm in mapping.levels[L1:R] for lp in lm.temporal
                                                  if lp.dim == d) for d in range(tree.D)], np.int64)
                e = above[-1].dim if above else -1
                looped = any(lp.factor > 1 for lm in mapping.levels[:L1] for lp in lm.temporal)
                x, up = tree._window_refills(t, f[None], s[None], e, rem, looped)
                # (BelowBounds.refine shares the words across R's top among the units the spatial
                # loops from the keeper down to L1 spread over the dimensions the surrogate lacks)
                up = up / math.prod(lp.factor for lm in mapping.levels[parent:L1] for lp in lm.spatial
                                    if lp.dim in tree.other_dims[t])
                checked += 1
                assert x[0] <= fills * (1 + 1e-9) and up[0] <= reads * (1 + 1e-9), \
                    f"seed {seed}, L1 {L1}: {x[0]} words into R (model: {fills}), {up[0]} across its top " \
                    f"(model: {reads})\n{work}\n{arch}\n{mapping}"
                equal_in += math.isclose(x[0], fills)
                equal_up += math.isclose(up[0], reads)
    assert checked >= 1000 and equal_in >= 100 and equal_up >= 100, (checked, equal_in, equal_up)


def test_a_larger_tile_never_moves_more_of_a_windowed_tensor():
    """The refill bound keeps, per split and loop e, only the tile shapes that cannot grow but
    along e (BelowBounds._refill_cases): that is exact where growing a tile along any dimension
    without a stride or dilation in a window never raises the words a windowed tensor moves into R
    or across its top. Checked on random shapes of the random windowed problems; along a strided
    dimension it can (the mutant that lets those grow too fails)."""
    from storeloop.ir.constraints import Constraints
    from storeloop.mapper import _prepare
    from storeloop.mapper.below import divisors, least_prime

    checked, strided_up = 0, 0
    for seed in range(60):
        arch, work, energy = _refill_case(seed)
        tree = _prepare(arch, work, energy, Constraints(), False).tree
        if tree.exact is None or not tree.windowed:
            continue
        rng = random.Random(seed)
        for _ in range(800):
            t = rng.choice(tree.windowed)
            rem = np.array([rng.choice(divisors(int(b))) for b in tree.bounds], np.int64)
            s = np.array([rng.choice(divisors(int(r))) for r in rem], np.int64)
            f = np.array([rng.choice(divisors(int(r // x))) for r, x in zip(rem, s)], np.int64)
            e = rng.choice([d for d in range(tree.D)] + [-1])
            looped = (rem < tree.bounds).any() and rng.random() < 0.8
            if e >= 0 and f[e] * s[e] == rem[e]:
                continue
            for d in range(tree.D):
                room = rem[d] // (f[d] * s[d])
                if d == e or room == 1 or least_prime(np.array([room]))[0] == room and not (looped and rem[d] < tree.bounds[d]):
                    continue
                grown = f.copy()
                grown[d] *= least_prime(np.array([room]))[0]
                before, after = (tree._window_refills(t, g[None], s[None], e, rem, looped) for g in (f, grown))
                up = after[0][0] > before[0][0] * (1 + 1e-12) or after[1][0] > before[1][0] * (1 + 1e-12)
                if tree.strided[d]:
                    strided_up += up
                    continue
                checked += 1
                assert not up, f"seed {seed}: growing {f} along {d} to {grown} (split {s}, e {e}, rem {rem}) " \
                                f"moves {after} words, before {before}\n{work}"
    assert checked >= 1000 and strided_up > 0, (checked, strided_up)


def test_a_last_level_nodes_least_send_floor_is_the_least_over_the_orders_above():
    """Tree._least_send_floor, the least send floor of a last-level node's leaves over every order
    of the levels above the last (the exact leaves skip a whole leaf where its price plus it
    cannot win), computed per level instead of per order: on random walks of random windowed
    problems (DRAM -> SRAM [-> RF], fanouts above the RFs, meshes, strides; and DRAM -> GLB ->
    L2 -> RF), it equals the least of Tree._send_floor over every order where the arch has three
    levels or fewer, and is at most it on deeper ones (the level just above the last taken at its
    least per pair, the others enumerated). Each order's floor from the same pieces
    (Tree._order_send_floor, which the exact leaves use) equals Tree._send_floor's."""
    from storeloop.mapper.objective import Objective
    from tests.test_uneven_mapper import random_walk

    obj, checked, nonzero, deeper = Objective("delay,energy"), 0, 0, 0
    for seed, arch, work, energy, tree in _windowed_trees(30):
        for _, _, _, _, node in random_walk(tree, obj, seed, 60, tree.nlev - 2, True):
            rows = None if node.depth != tree.nlev - 1 else tree._rows(node, *tree._combos(node))
            if rows is None:
                continue
            row, oid, leaf_orders, _ = tree._leaf_orders(rows)
            base = tree._leaf_choice(node, rows, int(row[0]), leaf_orders[oid[0]])
            orders = [tree.space.expansions[L][c[3]] for L, c in enumerate(base)]
            each = [tree._send_floor(node, tree.mapping(tuple(c[:3] + (o,) + c[4:] for c, o in
                                                              zip(base, up + (orders[-1][0],)))))
                    for up in itertools.product(*orders[:-1])]
            want = min(each)
            got = tree._least_send_floor(node)
            # and per order, from the same pieces (Tree._exact_leaves' floor of each order)
            orders_above, pairs = tree._send_terms(node)
            assert [tree._order_send_floor(pairs, up) for up in
                    itertools.product(*(range(len(o)) for o in orders_above))] == pytest.approx(each, rel=1e-12,
                                                                                             abs=1e-9)
            assert got <= want * (1 + 1e-12) + 1e-9, f"seed {seed}: {got} above {want}\n{work}\n{arch}"
            if tree.nlev <= 3:
                assert got == pytest.approx(want, rel=1e-12, abs=1e-9), f"seed {seed}\n{work}\n{arch}"
            checked += 1
            nonzero += want > 0
            deeper += tree.nlev > 3
    assert checked >= 600 and nonzero >= 300 and deeper >= 100, (checked, nonzero, deeper)


def test_a_node_cut_by_its_send_floor_stays_below_its_subtree():
    """Tree.floor_cut rules a node out where its bound from the parent's expansion plus the least
    send floor of the pairs of keepers down to its level (Tree._least_send_floor) cannot win: a
    last-level node before its rows and leaves are built, a node above it before it is expanded.
    Per node of random walks of random windowed problems (the two kinds of the file, fanouts and
    meshes above the RFs, strides), that sum is at most the model's least energy over the node's
    subtree: every leaf of a last-level node in every order and spatial order it stands for, the
    search's own least below a node above it (the bound counts a windowed tensor's reads at each
    keeper as the node does, the counts the floor is in excess of). A sum that counts the floor
    twice fails it; floor_cut cuts against a best a hair below the sum and not against one above,
    and in a first walk (Tree.first_orders) not by the first orders' floor alone."""
    from tests.test_uneven_mapper import _least_below, random_walk

    obj, checked, floored, tight, inner, orders = Objective("delay,energy"), 0, 0, 0, 0, 0
    for seed, arch, work, energy, tree in _windowed_trees(40):
        for _, ch, i, _, node in random_walk(tree, obj, seed, 40, tree.nlev - 2, True):
            if node.depth == 0:
                continue
            if node.depth < tree.nlev - 1:
                found = _least_below(tree, node, Objective("energy"))
                least_model = math.inf if found is None else found[1]
                least = tree._least_send_floor(node, tree._send_terms(node, first=False))
                inner += least > 0
            else:
                least_model = _least_leaf(tree, arch, work, energy, node)
                least = tree._least_send_floor(node)
                # a first walk (leaves in their first orders only) cuts a node by its first
                # orders' floor only where every order's floor cuts it too, unless its
                # top-level subtree already has a leaf whose other orders may win
                first = tree._least_send_floor(node, tree._send_terms(node, first=True))
                if least < first * (1 - 1e-6):
                    tree.first_orders, between = True, (int(ch.clb[i]), float(ch.elb[i]) + (least + first) / 2)
                    assert not tree.floor_cut(ch, i, node, between, obj)
                    tree.open_orders = True
                    assert tree.floor_cut(ch, i, node, between, obj)
                    tree.first_orders = tree.open_orders = False
                    orders += 1
            if not math.isfinite(least_model):
                continue
            bound = float(ch.elb[i]) + least
            assert bound <= least_model * (1 + 1e-9), (seed, node.depth, float(ch.elb[i]), least, least_model)
            best = (int(ch.clb[i]), bound * (1 - 1e-6))
            assert tree.floor_cut(ch, i, node, best, obj)
            assert not tree.floor_cut(ch, i, node, (best[0], bound * 1.01), obj)
            checked += 1
            floored += least > 0
            tight += least > 0 and float(ch.elb[i]) + 2 * least > least_model
    assert checked >= 300 and floored >= 100 and tight >= 20 and inner >= 20 and orders >= 20, \
        (checked, floored, tight, inner, orders)


def test_the_send_floors_of_an_expansions_rows_are_each_nodes():
    """Tree.row_floors weighs the last-level children of an expansion from its rows, without
    building their nodes (Tree.floor_cuts rules out those it can before they are built). Per child
    of every such expansion met by random walks of random windowed problems (fanouts and meshes
    above the RFs, strides), its least send floor in the first orders and in every order equals
    the one Tree._least_send_floor computes on the child's node, and floor_cuts rules out exactly
    the children floor_cut rules out, in a first walk and after it, against bests around them
    (13,364 floors, 4,670 of them above 0; 40 rows whose tiles form no box). Mutants fail: each
    loop's (f - 1) moves counted f times, the inner levels' steps left out of a level's start,
    the rows without a box given a pair, the node's reads at the keeper without its scatter."""
    from tests.test_uneven_mapper import random_walk

    obj, checked, floored, gaps, cuts = Objective("delay,energy"), 0, 0, 0, 0
    for seed, arch, work, energy, tree in _windowed_trees(30):
        seen = set()
        for node, ch, _, _, _ in random_walk(tree, obj, seed, 40, tree.nlev - 2, False):
            if node.depth != tree.nlev - 2 or id(ch) in seen or not len(ch.row):
                continue
            seen.add(id(ch))
            idx = list(range(len(ch.row)))
            nodes = [tree.child(ch, i) for i in idx]
            for first in (False, True):
                got = tree.row_floors(ch, idx, first)
                want = [tree._least_send_floor(n, tree._send_terms(n, first=first)) for n in nodes]
                assert np.allclose(got, want, rtol=1e-12, atol=0), (seed, first)
                checked += len(idx)
                floored += sum(w > 0 for w in want)
            m = ch.node                         # (rows whose tiles leave gaps or cross: no pair into the RFs)
            for t in tree.windowed:
                if m.last[t] >= 0:
                    ok, _ = tree._row_pair_words(m, ch.rows, np.unique(ch.row), t, int(m.last[t]), False,
                                                 np.zeros((1, tree.nlev - 2), np.int64))
                    gaps += int((~ok).sum())
            least = tree.row_floors(ch, idx, False)
            for first, opened in ((False, False), (True, False), (True, True)):
                tree.first_orders, tree.open_orders = first, opened
                for i in idx[:8]:
                    for best in ((int(ch.clb[i]), (float(ch.elb[i]) + least[i]) * (1 - 1e-6)),
                                 (int(ch.clb[i]), (float(ch.elb[i]) + least[i]) * 1.01)):
                        ruled = tree.floor_cuts(ch, [i], best, obj)
                        assert (i in ruled) == tree.floor_cut(ch, i, tree.child(ch, i), best, obj), (seed, i, first)
                        if i in ruled:
                            assert ruled[i].leaf[0] == tree.floored_count(nodes[i].choice)
                            cuts += 1
            tree.first_orders = tree.open_orders = False
    assert checked >= 5000 and floored >= 1500 and gaps >= 10 and cuts >= 1000, (checked, floored, gaps, cuts)


def _windowed_trees(seeds: int):
    """(seed, arch, workload, energy, tree) of the file's two kinds of random windowed problem
    (:func:`window_case`, :func:`_refill_case`) for each of the first ``seeds`` seeds, where the
    tree keeps a window."""
    from storeloop.ir.constraints import Constraints
    from storeloop.mapper import _prepare

    for seed in range(seeds):
        for arch, work, energy in (window_case(seed)[:3], _refill_case(seed)):
            tree = _prepare(arch, work, energy, Constraints(), False).tree
            if tree.exact is not None and tree.windowed:
                yield seed, arch, work, energy, tree


def _least_leaf(tree, arch, work, energy, node) -> float:
    """The model's least energy over every leaf of last-level ``node``, in every order and spatial
    order each stands for (inf: none fits)."""
    rows = tree._rows(node, *tree._combos(node))
    if rows is None:
        return math.inf
    row, oid, leaf_orders, _ = tree._leaf_orders(rows)
    least = math.inf
    for k in range(len(row)):
        base = tree._leaf_choice(node, rows, int(row[k]), leaf_orders[oid[k]])
        for loops in itertools.product(*(tree.space.expansions[L][c[3]] for L, c in enumerate(base))):
            for mapping in _spatial_orders(tree, base, loops):
                try:
                    least = min(least, evaluate(arch, work, tree.mapping(mapping), energy).energy_pJ)
                except MappingError:
                    continue
    return least


def test_the_slides_are_weighed_only_where_the_rest_of_a_bound_leaves_a_child(monkeypatch):
    """Tree._bounded raises the bound that cuts by what the windows' slides add
    (Tree._slid_bound) only in the rows where the best does not already rule out every child: the
    slides only raise a bound, so the walk must go exactly as when every row is weighed -- the
    same candidates, cuts, notes of the energy gap and answer -- on random windowed problems
    (DRAM -> GLB -> RFs, with and without a gap), while weighing fewer rows."""
    from storeloop.mapper import _prepare
    from storeloop.mapper.search import Goal, branch_and_bound
    from storeloop.mapper.tree import Tree
    from storeloop.ir.constraints import Constraints

    weighed = [0]
    slid, window_slid = Tree._slid_bound, Tree._window_slid

    def counted(self, n, rows, fills, reads):
        weighed[0] += len(rows["tf"])
        return window_slid(self, n, rows, fills, reads)

    monkeypatch.setattr(Tree, "_window_slid", counted)
    fewer = 0
    for seed in range(1, 24):        # (seed 0 alone takes 15 s)
        arch, work, energy = _refill_case(seed)
        obj = Objective("delay,energy")
        runs = []
        for every in (False, True):
            if every:          # every fitting row weighed, as if nothing were known to beat
                monkeypatch.setattr(Tree, "_slid_bound", lambda self, *a: slid(self, *a[:-2], None, a[-1]))
            tree = _prepare(arch, work, energy, Constraints(), False).tree
            weighed[0] = 0
            goal = Goal(0, 0.0, 0.2 if seed % 2 else 0.0, converge=False)
            found = branch_and_bound(tree, obj, progress=False, goal=goal)
            runs.append(((found.cycles, found.energy_pJ, found.stopped), dict(tree.stats), dict(tree.gap_lb),
                         weighed[0]))
            monkeypatch.setattr(Tree, "_slid_bound", slid)
        (ans, stats, gap, rows), (ans2, stats2, gap2, rows2) = runs
        assert (ans, stats, gap) == (ans2, stats2, gap2), f"seed {seed}\n{work}\n{arch}"
        assert rows <= rows2
        fewer += rows < rows2
    assert fewer >= 6, fewer


def test_the_refill_cases_a_share_hands_back_bound_every_child_as_all_of_them():
    """A forked share of the search hands the refill bound's cases it weighed back to the search
    (BelowBounds.refills_since), so that the walk after it starts with them, cut to the cases
    among which BelowBounds.refine's least lies (least_cases: its total grows with each column):
    every child of random walks on random windowed problems is bounded from them exactly as from
    all the cases; and least_cases drops a row only where a row it keeps is at most it everywhere
    (random rows with ties and infinities)."""
    from storeloop.ir.constraints import Constraints
    from storeloop.mapper import _prepare
    from storeloop.mapper.below import least_cases
    from tests.test_uneven_mapper import random_walk

    rng = np.random.default_rng(5)
    for n, most in ((1, 256), (2, 256), (60, 256), (900, 256), (900, 3)):
        p = rng.integers(0, 5, (n, 4)).astype(float)
        p[rng.random(n) < 0.05, rng.integers(0, 4)] = np.inf
        keep = least_cases(p, most)
        for r in np.setdiff1d(np.arange(n), keep):
            assert (p[keep] <= p[r]).all(axis=1).any(), (n, most, r)
        if most > len(keep):        # (then no row kept is at most another kept one everywhere)
            under = (p[keep][:, None, :] <= p[keep][None, :, :]).all(axis=2)
            assert under.sum() == len(keep)
    obj, raised, fewer = Objective("energy"), 0, 0
    for seed in range(40):
        arch, work, energy = _refill_case(seed)
        tree = _prepare(arch, work, energy, Constraints(), False).tree
        seen = [(ch, i, bound) for _, ch, i, bound, _ in random_walk(tree, obj, seed, 12, tree.nlev - 2, False)]
        cases = sum(len(v[0]) for v in tree._refills.values() if v is not None)
        tree._refills = tree.refills_since(set())
        fewer += sum(len(v[0]) for v in tree._refills.values() if v is not None) < cases
        for ch, i, bound in seen:
            if ch.refill is not None:
                ch.refill.pop("raised", None)
            assert tree.refine(ch, i) == bound, f"seed {seed}\n{work}\n{arch}"
            raised += bound > ch.elb[i]
    assert raised >= 50 and fewer >= 10, (raised, fewer)
