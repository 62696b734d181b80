"""A brute-force oracle for the mapper's certificates (issue 21).

On small random problems, an obviously-correct enumerator walks every mapping of the map space
Timeloop searches -- every factorization of every dimension over every temporal and spatial slot,
every order of the loops at every level, every X/Y assignment and order of the spatial loops,
every keep/bypass choice below the outermost level -- and prices each with the reference model.
Whenever ``map`` says its result is optimal, its objective must equal the enumerator's minimum
exactly, and its certificate must say it covers the complete space.

Written independently of the search: no pruning, no merging of dimensions, no dominance rules.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import random

from storeloop.errors import MappingError, StoreloopError
from storeloop.mapper import MapTimeout, map_workload
from storeloop.model.evaluate import evaluate
from storeloop.ir import (ActionCosts, Arch, ComputeLevel, EnergyTable, LevelMapping, Loop, Mapping,
                                  StorageLevel)
from storeloop.workloads.pir import einsum_workload

EINSUMS = [("Y[m] = A[m,k] * X[k]", "MK"), ("C[m,n] = A[m,k] * B[k,n]", "MNK"),
           ("O[p,q] = I[p,c] * W[c,q]", "PQC"), ("Z[b] = X[b,k] * Y[b,k]", "BK")]
OBJECTIVES = ["energy", "delay", "edp", "delay,energy"]


def compositions(n: int, slots: int):
    """Every way to write n as an ordered product of ``slots`` factors."""
    if slots == 1:
        yield (n,)
        return
    for f in range(1, n + 1):
        if n % f == 0:
            for rest in compositions(n // f, slots - 1):
                yield (f,) + rest


def small_workload(rng: random.Random, name: str, text: str, dims: str, limit: int):
    """The einsum ``text`` with random bounds of 1-4 per dimension, halved at random until their
    product is at most ``limit`` (brute force stays at seconds)."""
    bounds = {d: rng.choice([1, 2, 2, 3, 4]) for d in dims}
    while math.prod(bounds.values()) > limit:
        d = rng.choice(dims)
        bounds[d] = max(1, bounds[d] // 2)
    return einsum_workload(name, text, bounds, bits=16)


def case(seed: int):
    """A random small problem: 2 or 3 storage levels (DRAM -> SRAM [-> RF]) over MACs, a 1D fanout
    of 1-4 lanes or a 2 x 2 mesh, random bandwidths and energies, a random objective, and
    sometimes a keep constraint."""
    from storeloop.ir.constraints import Constraints, LevelConstraint

    rng = random.Random(seed)
    text, dims = rng.choice(EINSUMS)
    three = rng.random() < 0.3
    limit = 8 if three else 24
    work = small_workload(rng, f"w{seed}", text, dims, limit)
    mesh = rng.random() < 0.15                      # 2 x 2: one spatial loop per axis, X or Y
    # a 1D fanout of 4 lets two spatial loops share X: their order decides which units share operands
    lanes = 4 if mesh else rng.choice([1, 2, 3, 4])
    levels = [StorageLevel("DRAM", "DRAM", 1, None, None, 16, 1, shared_bandwidth=rng.choice([None, 0.5, 1.0])),
              StorageLevel("SRAM", "SRAM", 1, None, rng.choice([2, 4, 6, 8, 16]), 16, 1,
                           read_bandwidth=rng.choice([None, 1.0, 2.0]), write_bandwidth=rng.choice([None, 1.0]))]
    if three:
        levels.append(StorageLevel("RF", "regfile", 1, None, rng.choice([1, 2, 4]), 16, 1))
    arch = Arch("oracle", tuple(levels), ComputeLevel("MAC", "intmac", lanes, 2 if mesh else None, 16), clock_hz=1e9)
    energy = EnergyTable({"DRAM": ActionCosts(rng.uniform(50, 200), rng.uniform(50, 200), 0.0, "random"),
                          "SRAM": ActionCosts(rng.uniform(1, 10), rng.uniform(1, 10), 100.0, "random"),
                          "RF": ActionCosts(rng.uniform(0.1, 1), rng.uniform(0.1, 1), 10.0, "random")},
                         ActionCosts(rng.uniform(0.5, 3), 0.0, 50.0, "random"), "random")
    constraints, spec = Constraints(), {}
    if rng.random() < 0.25:
        keep = frozenset(rng.sample([t.name for t in work.tensors], rng.choice([1, 2])))
        constraints = Constraints({1: LevelConstraint(keep=keep)}, source="random")
        spec["keep"] = keep
    elif rng.random() < 0.4:
        constraints, spec = timeloop_case(rng, arch, work)
    return arch, work, energy, rng.choice(OBJECTIVES), constraints, spec


def timeloop_case(rng: random.Random, arch: Arch, work):
    """Random Timeloop v0.3 constraints, read by storeloop's Timeloop reader: a temporal permutation
    at one level (innermost first; after '_' the outermost), and at the fanout a spatial factor of
    one dimension with a permutation and a split."""
    from storeloop.mapper.constraints import timeloop_constraints
    from storeloop.formats.timeloop.schema import ConstraintEntry
    from storeloop.ir import SourcedEntry
    from storeloop.formats.validate import validate
    from storeloop.formats.yamlio import loads

    dims = list(work.dims)
    level = rng.randrange(len(arch.levels))
    named = rng.sample(dims, rng.randint(1, len(dims)))
    cut = rng.randint(0, len(named))
    prefix, suffix = named[:cut], named[cut:]
    entries = [f"- {{target: {arch.levels[level].name}, type: temporal, permutation: "
               f"'{''.join(prefix)}{'_' + ''.join(suffix) if suffix else ''}'}}"]
    spec = {"perm": (level, prefix, suffix)}
    if rng.random() < 0.7:
        d = rng.choice(dims)
        f = rng.choice([x for x in range(1, work.bounds[dims.index(d)] + 1) if work.bounds[dims.index(d)] % x == 0])
        sperm = rng.sample(dims, rng.randint(0, len(dims)))
        split = rng.randint(0, len(dims))
        entries.append(f"- {{target: {arch.levels[-1].name}, type: spatial, factors: '{d}={f}', "
                       f"permutation: '{''.join(sperm)}', split: {split}}}")
        spec["spatial"] = (d, f, sperm, split)
    if rng.random() < 0.5:                # Timeloop's min parallelism: a share of the compute units in use
        share = rng.choice([0.5, 0.75, 1.0])
        entries.append(f"- {{target: {arch.levels[0].name}, type: utilization, min: {share}}}")
        spec["utilization"] = (share, arch.compute.instances)
    doc = loads("mapspace_constraints:\n" + "\n".join(entries) + "\n", "random.yaml")
    items = [SourcedEntry(validate(ConstraintEntry, doc["mapspace_constraints"][i], doc, ("mapspace_constraints", i)),
                          doc, ("mapspace_constraints", i)) for i in range(len(entries))]
    return timeloop_constraints(items, arch, work, "random"), spec


def allowed(spec: dict, work, orders, spatial) -> bool:
    """Whether a mapping's temporal orders (per level, outer -> inner) and spatial loops ((dim,
    axis) pairs) meet Timeloop's reading of ``spec``, written from Timeloop's rules, not storeloop's:
    a permutation's prefix are the innermost loops in that order (innermost first), its suffix the
    outermost; the spatial permutation is prefix + unnamed dims + suffix and its first ``split``
    positions are X."""
    dims = list(work.dims)
    if "utilization" in spec:             # Uber: the product of the fanouts' utilizations >= min
        share, units = spec["utilization"]
        if math.prod(lp.factor for lp in spatial) < share * units:
            return False
    if "perm" in spec:
        level, prefix, suffix = spec["perm"]
        inner_first = [dims[d] for d in reversed(orders[level])]
        pre = [x for x in prefix if x in inner_first]
        suf = [x for x in suffix if x in inner_first]
        if inner_first[:len(pre)] != pre or inner_first[len(inner_first) - len(suf):] != suf:
            return False
    if "spatial" in spec:
        d, f, sperm, split = spec["spatial"]
        factor = math.prod(lp.factor for lp in spatial if dims[lp.dim] == d)
        if factor != f:
            return False
        # Timeloop orders the unnamed dims freely: some order of them must put every loop on its axis
        if not any(all(lp.axis == ("X" if full.index(dims[lp.dim]) < split else "Y") for lp in spatial)
                   for full in (sperm + list(rest) for rest in itertools.permutations(
                       [x for x in dims if x not in sperm]))):
            return False
    return True


def score(objective: str, r):
    return {"energy": (r.energy_pJ,), "delay": (r.cycles,), "edp": (r.cycles * r.energy_pJ,),
            "delay,energy": (r.cycles, r.energy_pJ)}[objective]


def every_mapping(arch: Arch, work, spec: dict, at: int | None = None):
    """Every mapping of the map space: per level a temporal slot (any order of its loops), the
    fanout below level ``at`` (default: the last level's, to the MACs) a spatial slot (every X/Y
    assignment that fits the mesh, any order on each axis), every keep choice below the outermost
    level that the constraints allow."""
    dims = range(len(work.dims))
    names = [t.name for t in work.tensors]
    nlev = len(arch.levels)
    at = nlev - 1 if at is None else at
    fanout, fx, fy = arch.fanout(at)
    per_dim = [list(compositions(work.bounds[d], nlev + 1)) for d in dims]       # nlev temporal + 1 spatial
    keeps = [frozenset(c) for k in range(len(names) + 1) for c in itertools.combinations(names, k)]
    for split in itertools.product(*per_dim):
        if math.prod(split[d][nlev] for d in dims) > fanout:
            continue
        orders = [list(itertools.permutations([d for d in dims if split[d][L] > 1])) for L in range(nlev)]
        # every X/Y assignment of the spatial loops that fits the mesh, and every order on each axis
        spatial = []
        sdims = [d for d in dims if split[d][nlev] > 1]
        for axes in itertools.product("XY", repeat=len(sdims)):
            on = {a: [d for d, x in zip(sdims, axes) if x == a] for a in "XY"}
            if math.prod(split[d][nlev] for d in on["X"]) > fx or math.prod(split[d][nlev] for d in on["Y"]) > fy:
                continue
            for px in itertools.permutations(on["X"]):
                for py in itertools.permutations(on["Y"]):
                    spatial.append(tuple((d, "Y") for d in py) + tuple((d, "X") for d in px))
        for order in itertools.product(*orders):
            for ps in spatial:
                sp = tuple(Loop(d, split[d][nlev], True, a) for d, a in ps)
                if not allowed(spec, work, order, sp):
                    continue
                for keep in itertools.product(keeps, repeat=nlev - 1):
                    if "keep" in spec and not spec["keep"] <= keep[0]:
                        continue
                    top = None
                    if "home" in spec:          # a tensor homed at level H: not kept above it, kept there
                        t, H = spec["home"]
                        if any(t in keep[L - 1] for L in range(1, H)) or t not in keep[H - 1]:
                            continue
                        top = frozenset(names) - {t}
                    levels = [LevelMapping(tuple(Loop(d, split[d][0]) for d in order[0]), sp if at == 0 else (), top)]
                    for L in range(1, nlev):
                        levels.append(LevelMapping(tuple(Loop(d, split[d][L]) for d in order[L]),
                                                   sp if L == at else (), keep[L - 1]))
                    yield Mapping(tuple(levels))


def brute_force(arch: Arch, work, energy: EnergyTable, objective: str, spec: dict, at: int | None = None):
    """The best score over :func:`every_mapping`, each priced by the reference model (None: none is valid)."""
    return best_score(arch, work, energy, objective, every_mapping(arch, work, spec, at))


def best_score(arch: Arch, work, energy: EnergyTable, objective: str, mappings):
    """The best score of ``mappings`` of ``work``, each priced by the reference model (None: none is valid)."""
    best = None
    for mapping in mappings:
        try:
            r = evaluate(arch, work, mapping, energy)
        except MappingError:
            continue
        s = score(objective, r)
        if best is None or s < best:
            best = s
    return best


def naive_score(arch: Arch, work, energy: EnergyTable, objective: str):
    """Every loop at the outermost level, every tensor kept everywhere (None: it does not fit)."""
    levels = [LevelMapping(tuple(Loop(d, b) for d, b in enumerate(work.bounds) if b > 1))]
    levels += [LevelMapping() for _ in arch.levels[1:]]
    try:
        return score(objective, evaluate(arch, work, Mapping(tuple(levels)), energy))
    except MappingError:
        return None


SEEDS = range(220)


def test_the_map_space_matches_brute_force_whenever_map_says_optimal():
    """At least 200 random small cases; every one the mapper calls optimal agrees with the oracle,
    and most of them are proven (the test would be empty otherwise)."""
    proven = shared_axis = nontrivial = infeasible = timeloop = parallelism = 0
    for seed in SEEDS:
        arch, work, energy, objective, constraints, spec = case(seed)
        try:
            out = map_workload(arch, work, energy, objective=objective, time_limit=30, energy_gap=0.0,
                               constraints=constraints)
        except StoreloopError as exc:               # then no mapping meets the constraints
            assert brute_force(arch, work, energy, objective, spec) is None, f"seed {seed}: {exc}"
            infeasible += 1
            continue
        s = out.search
        assert s["space"]["complete"]
        if not s["optimal"]:
            continue
        proven += 1
        shared_axis += any(sum(lp.axis == a for lp in lm.spatial) > 1 for lm in out.mapping.levels for a in "XY")
        timeloop += "perm" in spec
        parallelism += "utilization" in spec
        want = brute_force(arch, work, energy, objective, spec)
        naive = naive_score(arch, work, energy, objective)
        nontrivial += naive is None or naive > want
        got = score(objective, out.result)
        assert want is not None, f"seed {seed}: the oracle found no valid mapping, the mapper did"
        assert len(got) == len(want) and all(math.isclose(g, w, rel_tol=1e-9, abs_tol=1e-9)
                                             for g, w in zip(got, want)), \
            f"seed {seed} ({objective}): map says optimal at {got}, brute force finds {want}\n{work}\n{arch}"
    assert proven >= 150, f"only {proven} of {len(SEEDS)} cases proven optimal"
    assert shared_axis >= 5, f"only {shared_axis} optimal mappings with two spatial loops on one axis"
    assert timeloop >= 30 and infeasible >= 5, f"{timeloop} proven, {infeasible} infeasible cases with Timeloop constraints"
    assert parallelism >= 10, f"only {parallelism} proven cases under a Timeloop utilization constraint"
    assert nontrivial >= proven // 2, f"only {nontrivial} cases where the optimum beats the naive mapping"


def split_case(seed: int):
    """A random small problem whose fanout sits above the innermost level, as on OnionChopper:
    DRAM -> k x SRAM -> k x RF (1-4 words) -> k MACs, k in 2-4 (or a 2 x 2 mesh)."""
    rng = random.Random(10_000 + seed)
    text, dims = rng.choice(EINSUMS)
    work = small_workload(rng, f"s{seed}", text, dims, 12)
    k = rng.choice([2, 3, 4])
    mesh = k == 4 and rng.random() < 0.3
    levels = (StorageLevel("DRAM", "DRAM", 1, None, None, 16, 1),
              StorageLevel("SRAM", "SRAM", k, 2 if mesh else None, rng.choice([4, 8, 16]), 16, 1),
              StorageLevel("RF", "regfile", k, 2 if mesh else None, rng.choice([1, 2, 3, 4]), 16, 1))
    arch = Arch("split", levels, ComputeLevel("MAC", "intmac", k, 2 if mesh else None, 16), clock_hz=1e9)
    energy = EnergyTable({"DRAM": ActionCosts(rng.uniform(50, 200), rng.uniform(50, 200), 0.0, "random"),
                          "SRAM": ActionCosts(rng.uniform(1, 10), rng.uniform(1, 10), 100.0, "random"),
                          "RF": ActionCosts(rng.uniform(0.1, 1), rng.uniform(0.1, 1), 10.0, "random")},
                         ActionCosts(rng.uniform(0.5, 3), 0.0, 50.0, "random"), "random")
    return arch, work, energy


def test_the_energy_lower_bound_holds_when_the_instances_split_the_work():
    """The joint capacity bound (Tree._capacity_bound) credits multicast and spatial reduction only
    to the tensors a split of the instances does not index; on random problems with the fanout
    above the innermost level, it never exceeds the least energy of any mapping (brute force)."""
    from storeloop.mapper.merge import merge
    from storeloop.ir.constraints import Constraints
    from storeloop.mapper.space import MapSpace
    from storeloop.mapper.tree import Tree

    joint = 0
    for seed in range(40):
        arch, work, energy = split_case(seed)
        merged, _, mcons = merge(work, Constraints(), layout=False)
        tree = Tree(MapSpace(arch, merged, mcons), energy)
        lb, parts = tree.energy_bound()
        joint += tree._capacity_bound() is not None
        want = brute_force(arch, work, energy, "energy", {}, at=0)
        assert want is not None
        assert lb <= want[0] * (1 + 1e-12), f"seed {seed}: bound {lb} {parts} above the optimum {want[0]}\n{work}\n{arch}"
    assert joint >= 30


def home_case(seed: int):
    """A random small problem with one tensor homed below the outermost level (a query's
    intermediate kept in DRAM under an SSD): bypassed at every level above its home, kept there."""
    from storeloop.ir.constraints import Constraints, LevelConstraint

    rng = random.Random(50_000 + seed)
    text, dims = rng.choice(EINSUMS)
    three = rng.random() < 0.5
    work = small_workload(rng, f"h{seed}", text, dims, 8 if three else 16)
    lanes = rng.choice([1, 2])
    levels = [StorageLevel("DRAM", "DRAM", 1, None, None, 16, 1, shared_bandwidth=rng.choice([None, 0.5, 1.0])),
              StorageLevel("SRAM", "SRAM", 1, None, rng.choice([8, 16, 32, None]), 16, 1,
                           read_bandwidth=rng.choice([None, 1.0, 2.0]), write_bandwidth=rng.choice([None, 1.0]))]
    if three:
        levels.append(StorageLevel("RF", "regfile", 1, None, rng.choice([2, 4]), 16, 1))
    arch = Arch("home", tuple(levels), ComputeLevel("MAC", "intmac", lanes, None, 16), clock_hz=1e9)
    energy = EnergyTable({"DRAM": ActionCosts(rng.uniform(50, 200), rng.uniform(50, 200), 0.0, "random"),
                          "SRAM": ActionCosts(rng.uniform(1, 10), rng.uniform(1, 10), 100.0, "random"),
                          "RF": ActionCosts(rng.uniform(0.1, 1), rng.uniform(0.1, 1), 10.0, "random")},
                         ActionCosts(rng.uniform(0.5, 3), 0.0, 50.0, "random"), "random")
    t = rng.choice([x.name for x in work.tensors])
    H = rng.choice([1, 2]) if three else 1
    cons = {L: LevelConstraint(bypass=frozenset({t})) for L in range(H)}
    cons[H] = LevelConstraint(keep=frozenset({t}))
    return arch, work, energy, rng.choice(OBJECTIVES), Constraints(cons, source="random"), {"home": (t, H)}


def mapped_as_brute_force_says(seed, arch, work, energy, objective, constraints, spec, at: int | None = None):
    """``map`` asked for a full proof: None where it finds no mapping (and brute force agrees none
    exists), else its answer, which equals the brute-force minimum whenever it says optimal."""
    try:
        out = map_workload(arch, work, energy, objective=objective, time_limit=30, energy_gap=0.0,
                           constraints=constraints)
    except StoreloopError:
        assert brute_force(arch, work, energy, objective, spec, at) is None, f"seed {seed}"
        return None
    if out.search["optimal"]:
        want = brute_force(arch, work, energy, objective, spec, at)
        got = score(objective, out.result)
        assert want is not None and all(math.isclose(g, w, rel_tol=1e-9, abs_tol=1e-9) for g, w in zip(got, want)), \
            f"seed {seed} ({objective}): map says optimal at {got}, brute force finds {want}\n{work}\n{arch}"
    return out


def test_a_tensor_homed_below_the_outermost_level_matches_brute_force():
    """The mapper's bounds and tree with a tensor whose outermost keeper is not the first level
    (its compulsory traffic and energy at its home): whenever map says optimal, brute force agrees."""
    proven = 0
    for seed in range(60):
        arch, work, energy, objective, constraints, spec = home_case(seed)
        out = mapped_as_brute_force_says(seed, arch, work, energy, objective, constraints, spec)
        if out is None:
            continue
        t, H = spec["home"]
        lm = out.mapping.levels
        assert all(lm[L].keep is not None and t not in lm[L].keep for L in range(H)) and \
            (lm[H].keep is None or t in lm[H].keep)
        proven += out.search["optimal"]
    assert proven >= 40, f"only {proven} of 60 cases proven optimal"


def single_case(seed: int):
    """A random small problem of :func:`case` whose levels below the first are single-buffered at
    random (fills wait for the use of the contents to end), with limited ports so that it costs."""
    arch, work, energy, _, constraints, spec = case(70_000 + seed)
    rng = random.Random(seed)
    levels = list(arch.levels)
    for L in range(1, len(levels)):
        if rng.random() < 0.7:
            levels[L] = dataclasses.replace(levels[L], buffering="single", read_bandwidth=rng.choice([1.0, 2.0]),
                                            write_bandwidth=rng.choice([None, 1.0]))
    if all(lvl.buffering != "single" for lvl in levels):
        levels[-1] = dataclasses.replace(levels[-1], buffering="single", read_bandwidth=1.0)
    objective = rng.choice(["delay", "delay,energy", "edp"])
    return dataclasses.replace(arch, levels=tuple(levels)), work, energy, objective, constraints, spec


def test_single_buffered_levels_match_brute_force():
    """The mapper searches archs with single-buffered levels: its leaves serialize those levels'
    fills with use as the model does, its bounds stay bounds; whenever map says optimal, the
    brute-force minimum (priced by the reference model) agrees."""
    proven = serialized = 0
    for seed in range(60):
        out = mapped_as_brute_force_says(seed, *single_case(seed))
        if out is None:
            continue
        serialized += any(b["declared"] == "single" and b["single_cycles"] > b["overlapped_cycles"]
                          for b in out.result.buffering.values())
        proven += out.search["optimal"]
    assert proven >= 40, f"only {proven} of 60 cases proven optimal"
    assert serialized >= 10, f"only {serialized} answers where single buffering costs time"


def deep_case(seed: int):
    """A random small problem with a fanout between two storage levels, as on a Timeloop-style
    accelerator: DRAM -> SRAM -> k x RF (1-6 words) -> k MACs, k in 2-4 (or a 2 x 2 mesh), and
    sometimes a 1-2 word register under each RF: the levels below a node that the refill and
    completion bounds reason about (Tree._refill_cases, Tree._below_cost)."""
    rng = random.Random(90_000 + seed)
    text, dims = rng.choice(EINSUMS)
    four = rng.random() < 0.3
    work = small_workload(rng, f"d{seed}", text, dims, 6 if four else 12)
    k = rng.choice([2, 3, 4])
    mesh = k == 4 and rng.random() < 0.3
    levels = [StorageLevel("DRAM", "DRAM", 1, None, None, 16, 1),
              StorageLevel("SRAM", "SRAM", 1, None, rng.choice([4, 8, 16, None]), 16, 1),
              StorageLevel("RF", "regfile", k, 2 if mesh else None, rng.choice([1, 2, 3, 4, 6]), 16, 1)]
    if four:
        levels.append(StorageLevel("REG", "regfile", k, 2 if mesh else None, rng.choice([1, 2]), 16, 1))
    arch = Arch("deep", tuple(levels), ComputeLevel("MAC", "intmac", k, 2 if mesh else None, 16), clock_hz=1e9)
    energy = EnergyTable({"DRAM": ActionCosts(rng.uniform(50, 200), rng.uniform(50, 200), 0.0, "random"),
                          "SRAM": ActionCosts(rng.uniform(1, 20), rng.uniform(1, 20), 100.0, "random"),
                          "RF": ActionCosts(rng.uniform(0.1, 2), rng.uniform(0.1, 2), 10.0, "random"),
                          "REG": ActionCosts(rng.uniform(0.01, 0.5), rng.uniform(0.01, 0.5), 1.0, "random")},
                         ActionCosts(rng.uniform(0.5, 3), 0.0, 50.0, "random"), "random")
    return arch, work, energy, rng.choice(["energy", "delay,energy"])


def test_the_bounds_below_a_node_never_cut_an_optimum():
    """A node's bound adds what the levels below it must still spend: each tensor's cheapest
    innermost keeper, jointly over the splits of the units below (Tree._below_cost), and what the
    innermost level's capacity forces to cross into it (Tree._refill_cases). On random problems
    with a fanout between storage levels, the tree alone, told that a mapping a hair worse than the
    brute-force optimum exists, must still find the optimum: every bound on the optimum's path
    must stay at or below it (a bound inflated by a few percent prunes it). The refill bound is in
    play on most of them."""
    from storeloop.mapper.objective import Objective
    from storeloop.mapper.search import branch_and_bound
    from storeloop.mapper.space import MapSpace
    from storeloop.mapper.tree import Tree

    refilled = 0
    for seed in range(30):
        arch, work, energy, objective = deep_case(seed)
        want = brute_force(arch, work, energy, "delay,energy" if objective == "delay,energy" else "energy", {}, at=1)
        assert want is not None
        cycles, least = (want if objective == "delay,energy" else (None, want[0]))
        tree = Tree(MapSpace(arch, work), energy)
        hair = (cycles if cycles is not None else math.inf, least * (1 + 1e-7), None)   # a virtual incumbent
        found = branch_and_bound(tree, Objective(objective), progress=False, incumbent=hair)
        got = found.energy_pJ if found.mapping is not None else None
        assert got is not None and math.isclose(got, least, rel_tol=1e-9), \
            f"seed {seed} ({objective}): the tree found {got}, brute force {want}\n{work}\n{arch}"
        refilled += any(v is not None for v in tree._refills.values())
    assert refilled >= 22, refilled


def test_the_refill_bound_at_the_best_cycles_stays_below_the_mappings_with_as_few():
    """With the lexicographic objective's best at C cycles, the refill bound (BelowBounds.refine)
    is of the mappings of at most C cycles only: those run enough units at once, so the splits of
    the units below a level that leave fewer (with the spatial factors chosen above) are not
    weighed. Per node of random walks on 60 plain problems (DRAM -> SRAM -> k RFs [-> k REGs])
    and 60 windowed ones (some with a fanout above the RFs, where the units chosen above count), every
    child whose subtree has a mapping at the problem's fewest cycles is bounded, for those cycles,
    at most at the least energy of those mappings.
    Mutants fail: ignoring the units chosen above, asking for one unit more."""
    from storeloop.ir.constraints import Constraints
    from storeloop.mapper import _prepare
    from storeloop.mapper.objective import Objective
    from storeloop.mapper.search import branch_and_bound
    from tests.test_uneven_mapper import _least_below, random_walk
    from tests.test_window_mapper import _refill_case

    obj, checked, raised = Objective("delay,energy"), 0, 0
    cases = [deep_case(seed)[:3] for seed in range(60)] + [_refill_case(seed) for seed in range(60)]
    for seed, (arch, work, energy) in enumerate(cases):
        fewest = branch_and_bound(_prepare(arch, work, energy, Constraints(), False).tree, Objective("delay"),
                                  progress=False).cycles
        tree = _prepare(arch, work, energy, Constraints(), False).tree
        for node, ch, i, loose, child in random_walk(tree, obj, seed, 12, tree.nlev - 2, False):
            least = _least_below(tree, child, obj) if ch.refill is not None else None
            if least is None or least[0] > fewest:
                continue
            ch.refill.pop("raised")                # (refine keeps the first bound it raised)
            bound = tree.refine(ch, i, fewest)
            ch.refill.pop("raised")
            raised += bound > loose * (1 + 1e-9)
            checked += 1
            assert bound <= least[1] * (1 + 1e-9), \
                f"case {seed}: a node at level {node.depth + 1} is bounded at {bound} for at most " \
                f"{fewest} cycles, its subtree's least there is {least[1]}\n{work}\n{arch}"
    assert checked >= 500 and raised >= 3, (checked, raised)   # 599, 3 seen


def test_a_search_stopped_early_claims_only_what_it_left_open():
    """A branch and bound stopped by a small budget, or by an energy gap of 5 % that the bounds of
    the subtrees it left open already meet (or by the end of a walk that cut subtrees within that
    gap): its cycle bound, its claim that the cycles are optimal and its energy bound at those
    cycles hold against brute force; an 'energy-gap' stop is within 5 % of the optimum, and an
    'optimal' one is the optimum. Some claims must rest on what was left open (else the test is empty)."""
    searched = early = frontier = 0
    for seed in SEEDS:
        arch, work, energy, _, constraints, spec = case(seed)
        want = brute_force(arch, work, energy, "delay,energy", spec)
        if want is None:
            continue
        budget = random.Random(seed).choice([1, 30, 300, None])
        try:
            out = map_workload(arch, work, energy, time_limit=30, energy_gap=0.05, budget=budget,
                               constraints=constraints)
        except MapTimeout:                 # the budget ended the search before any mapping
            continue
        s, r = out.search, out.result
        msg = f"seed {seed} (budget {budget}): {s['stopped']}, {r.cycles} cycles, {r.energy_pJ} pJ, " \
              f"bounds {s['lower_bound_cycles']}, {s['lower_bound_energy_pJ']}; brute force {want}"
        assert s["lower_bound_cycles"] <= want[0], msg
        if s["cycles_optimal"]:
            assert r.cycles == want[0] and s["lower_bound_energy_pJ"] <= want[1] * (1 + 1e-9), msg
        if s["stopped"] == "energy-gap":
            assert r.cycles == want[0] and r.energy_pJ <= want[1] * 1.05 * (1 + 1e-9), msg
        if s["optimal"]:                   # (the gap cut nothing that could hold a better mapping)
            assert r.cycles == want[0] and math.isclose(r.energy_pJ, want[1], rel_tol=1e-9), msg
        if s["lower_bound_energy_searched_pJ"] is not None:
            searched += 1
            early += s["stopped"] in ("budget", "converged")
            frontier += s["stopped"] == "energy-gap"
    assert searched >= 30 and early >= 5 and frontier >= 10, (searched, early, frontier)   # 39, 9, 16 seen


def test_the_bounds_of_what_a_stopped_walk_leaves_hold():
    """The branch and bound alone (no local search before it, no retry after), stopped by a budget
    of 30 to 300 candidates: the fewest cycles it says any mapping could have is at most brute
    force's, and where that proves its cycles, the least energy it says a mapping at them could
    have is at most brute force's."""
    from storeloop.mapper import _prepare
    from storeloop.mapper.objective import Objective
    from storeloop.mapper.search import branch_and_bound

    checked = proven = 0
    for seed in range(400):
        arch, work, energy, _, constraints, spec = case(seed)
        want = brute_force(arch, work, energy, "delay,energy", spec)
        if want is None:
            continue
        tree = _prepare(arch, work, energy, constraints, False).tree
        found = branch_and_bound(tree, Objective("delay,energy"), budget=random.Random(seed).choice([30, 100, 300]),
                                 progress=False)
        if found.left is None:
            continue
        cycles, energy_pJ = found.left
        msg = f"seed {seed}: {found.stopped} at {found.cycles}, {found.energy_pJ}; left {found.left}; brute force {want}"
        assert cycles <= want[0], msg
        checked += 1
        if cycles >= found.cycles:
            assert found.cycles == want[0] and energy_pJ <= want[1] * (1 + 1e-9), msg
            proven += found.energy_pJ > want[1] * (1 + 1e-9)       # a claim the answer alone would break
    assert checked >= 60 and proven >= 5, (checked, proven)


def test_the_combinations_bounded_without_their_orders_lose_in_every_order(monkeypatch):
    """Tree._plausible drops a level's (factors, spatial) combinations whose one relaxed row (each
    tensor arriving as rarely as any order allows, its energy without what the levels below must
    still spend) the best so far dominates. Checked on the random cases, every objective (plain and
    on tiny SSDs): every order of every dropped combination, bounded in full with every keep set,
    is cut by the best so far, and the
    check is not empty (with the relaxed rows tried wherever a level has an order). A mutant whose
    relaxed rows count every loop of the level above each tensor (the most arrivals, not the
    least) fails it."""
    from storeloop.mapper import tree as T
    from test_ssd import ssd_oracle_case

    plausible, checked = T.Tree._plausible, [0, 0]

    def checking(self, n, combos, masks, best, objective):
        kept = plausible(self, n, combos, masks, best, objective)
        if len(kept[0]) == len(combos[0]):
            return kept
        alive = {tuple(map(tuple, x)) for x in zip(*(a.tolist() for a in kept))}
        gone = [i for i, x in enumerate(zip(*(a.tolist() for a in combos))) if tuple(map(tuple, x)) not in alive]
        rows = self._rows(n, *(a[gone] for a in combos))
        if rows is not None:
            got = self._bounded(n, rows, masks, best, objective)
            assert len(got[1]) == 0, f"a dropped combination survives in some order: {got[3][:5]} vs {best}"
            checked[0] += len(rows["P"])
        checked[1] += len(gone)
        return kept

    monkeypatch.setattr(T.Tree, "_plausible", checking)
    monkeypatch.setattr(T, "PLAUSIBLE_ORDERS", 1)          # wherever a level has an order
    for seed in SEEDS:
        arch, work, energy, objective, constraints, _ = case(seed)
        try:
            map_workload(arch, work, energy, objective=objective, time_limit=30, energy_gap=0.0,
                         constraints=constraints)
        except StoreloopError:
            pass
    for seed in range(40):
        arch, work, energy, objective = ssd_oracle_case(seed)
        map_workload(arch, work, energy, objective=objective, time_limit=30, energy_gap=0.0)
    assert checked[0] >= 1000 and checked[1] >= 700, checked
