"""The mapper's search of uneven positions (``storeloop map --uneven``, mapper/uneven.py) against
brute force: every mapping of the oracle's map space (tests/test_mapper_oracle.py) with every
position of every tensor a level below the first keeps (0 .. its temporal loops), each priced by
the reference model. Whenever ``map --uneven`` says optimal, it equals that minimum; and on the
problems where an uneven mapping beats every even one, it finds it.

The problems have small buffers, where uneven positions pay: a tensor whose tile would not fit
beside the others lies below a loop that indexes it, and keeps its reuse across the loops inside."""

from __future__ import annotations

import itertools
import math
import random

from test_mapper_oracle import EINSUMS, brute_force, every_mapping, score

from storeloop.errors import MappingError
from storeloop.formats.mapping import mapping_to_native
from storeloop.ir import ActionCosts, Arch, ComputeLevel, EnergyTable, LevelMapping, Mapping, StorageLevel
from storeloop.mapper import map_workload
from storeloop.mapper.options import options
from storeloop.model.evaluate import evaluate
from storeloop.workloads.pir import einsum_workload


def uneven_case(seed: int):
    """DRAM -> SRAM (5-12 words) [-> RF (2 words)] -> 1-2 MACs, a matmul of 16 or 32 computes (8
    with the RF; each dimension 2 or 4), random bandwidths and energies and objective."""
    rng = random.Random(seed)
    text, dims = rng.choice(EINSUMS[1:3])
    three = rng.random() < 0.3
    while True:
        bounds = {d: rng.choice([2, 4]) for d in dims}
        if math.prod(bounds.values()) in ((8,) if three else (16, 32)):
            break
    work = einsum_workload(f"u{seed}", text, bounds, bits=16)
    levels = [StorageLevel("DRAM", "DRAM", 1, None, None, 16, 1, shared_bandwidth=rng.choice([None, 1.0])),
              StorageLevel("SRAM", "SRAM", 1, None, rng.choice([5, 7, 12]), 16, 1,
                           read_bandwidth=rng.choice([None, 1.0]), write_bandwidth=rng.choice([None, 1.0]))]
    if three:
        levels.append(StorageLevel("RF", "regfile", 1, None, 2, 16, 1))
    arch = Arch("uneven-oracle", tuple(levels), ComputeLevel("MAC", "intmac", rng.choice([1, 1, 2]), None, 16),
                clock_hz=1e9)
    energy = EnergyTable({"DRAM": ActionCosts(rng.uniform(50, 200), rng.uniform(50, 200), 0.0, "random"),
                          "SRAM": ActionCosts(rng.uniform(1, 10), rng.uniform(1, 10), 100.0, "random"),
                          "RF": ActionCosts(rng.uniform(0.1, 1), rng.uniform(0.1, 1), 10.0, "random")},
                         ActionCosts(rng.uniform(0.5, 3), 0.0, 50.0, "random"), "random")
    return arch, work, energy, rng.choice(["energy", "energy", "delay,energy", "delay"])


def every_uneven_mapping(arch: Arch, work, at: int | None = None):
    """Every mapping of the oracle's space (the fanout below level ``at``, default the last), with
    every position of each tensor kept below the first level: below 0 .. all of that level's
    temporal loops (written independently of the search's split into positions)."""
    names = [t.name for t in work.tensors]
    for m in every_mapping(arch, work, {}, at):
        options_ = [[m.levels[0]]]
        for lm in m.levels[1:]:
            kept = [t for t in names if lm.keeps(t)]
            options_.append([LevelMapping(lm.temporal, lm.spatial, lm.keep,
                                          tuple((t, p) for t, p in zip(kept, pos) if p))
                             for pos in itertools.product(range(len(lm.temporal) + 1), repeat=len(kept))])
        for levels in itertools.product(*options_):
            yield Mapping(tuple(levels))


def uneven_brute_force(arch: Arch, work, energy: EnergyTable, objective: str):
    best = None
    for mapping in every_uneven_mapping(arch, work):
        try:
            r = evaluate(arch, work, mapping, energy)
        except MappingError:
            continue
        if best is None or score(objective, r) < best:
            best = score(objective, r)
    return best


def test_map_uneven_matches_brute_force_and_finds_what_even_mappings_miss():
    proven = beats_even = 0
    for seed in range(20):
        arch, work, energy, objective = uneven_case(seed)
        out = map_workload(arch, work, energy, converge=False,
                           options=options(objective=objective, time_limit=120, energy_gap=0.0, uneven=True))
        s = out.search
        assert s["space"]["uneven"].startswith("each tensor kept at SRAM")
        if not s["optimal"]:
            continue
        proven += 1
        # the search's own price of its answer (a split arch's counts, its levels' shared ports) is the model's
        last = s["improvements"][-1]
        assert last["cycles"] == out.result.cycles and math.isclose(last["energy_pJ"], out.result.energy_pJ), seed
        want = uneven_brute_force(arch, work, energy, objective)
        got = score(objective, out.result)
        assert all(math.isclose(g, w, rel_tol=1e-9) for g, w in zip(got, want)), \
            f"seed {seed} ({objective}): map --uneven says optimal at {got}, brute force finds {want}\n{work}\n{arch}"
        even = brute_force(arch, work, energy, objective, {})
        if even is None or want < even:
            beats_even += 1
            assert out.mapping.uneven
    assert proven >= 18, f"only {proven} of 20 proven"
    assert beats_even >= 4, f"only {beats_even} problems where an uneven mapping beats every even one"


def test_the_innermost_levels_positions_are_bounded_together():
    """The capacity bounds of the innermost level R (the root's, Tree._capacity_bound, and a node's,
    BelowBounds._refill_cases) weigh R's positions as one level: a tensor at an inner position
    takes a word at least and is refilled on every iteration above its position, and words beyond
    R come from a level above all of them. On the uneven cases, against brute force over every
    uneven mapping: the root's energy bound stays at or below the least energy, and is that energy
    on some problems; and the tree alone, told that a mapping a hair worse than it exists, still
    finds it (no node bound on the optimum's path is above it). Mutants fail: R's tensors at inner
    positions weighed as if at the outermost one (the even bound) fails the root bound at 6 of these
    12 problems, and an inner tensor counted as two words at 4."""
    from storeloop.ir.constraints import Constraints
    from storeloop.mapper import _prepare
    from storeloop.mapper.objective import Objective
    from storeloop.mapper.search import branch_and_bound

    tight = even_above = 0
    for seed in range(12):
        arch, work, energy, _ = uneven_case(seed)
        least = math.inf
        for mapping in every_uneven_mapping(arch, work):
            try:
                least = min(least, evaluate(arch, work, mapping, energy).energy_pJ)
            except MappingError:
                continue
        tree = _prepare(arch, work, energy, Constraints(), False, uneven=True).tree
        bound = tree.energy_bound()[0]
        assert bound <= least * (1 + 1e-9), f"seed {seed}: the uneven space's energy bound {bound} > its least {least}"
        tight += math.isclose(bound, least, rel_tol=1e-6)
        even_above += _prepare(arch, work, energy, Constraints(), False).tree.energy_bound()[0] > least * (1 + 1e-9)
        found = branch_and_bound(tree, Objective("energy"), progress=False, incumbent=(math.inf, least * (1 + 1e-7), None))
        assert found.mapping is not None and math.isclose(found.energy_pJ, least, rel_tol=1e-9), \
            f"seed {seed}: the tree found {found.energy_pJ if found.mapping else None}, brute force {least}"
    assert tight >= 4 and even_above >= 4, (tight, even_above)


def _least_below(tree, node, obj, best=None):
    """The least (cycles, energy, mapping) of every mapping in ``node``'s subtree (None: none fits),
    walked to every leaf, cut only by what is already found."""
    out = tree.expand(node, None if best is None else best[:2], obj)
    if node.depth == tree.nlev - 1:
        return out or best
    for k in range(len(out.row) if out is not None else 0):
        if best is None or not tree.cut(out.clb[k:k + 1], out.elb[k:k + 1], best[:2], obj, note=False)[0]:
            best = _least_below(tree, tree.child(out, k), obj, best) or best
    return best


def random_walk(tree, obj, seed: int, steps: int, last: int, every: bool):
    """Up to ``steps`` nodes of a random walk down ``tree`` from its root (those deeper than
    ``last`` are not expanded; ``every``: their children join the walk anyway, taking a step each),
    and up to four of each one's children: (node, children, i, child i's refined bound, child i)."""
    walk = random.Random(seed)
    frontier = [tree.root()]
    for _ in range(steps):
        if not frontier:
            break
        node = frontier.pop(walk.randrange(len(frontier)))
        if node.depth > last:
            continue
        ch = tree.expand(node, None, obj)
        picks = list(range(len(ch.row) if ch is not None else 0))
        walk.shuffle(picks)
        for i in picks[:4]:
            bound, child = tree.refine(ch, i), tree.child(ch, i)
            if every or child.depth <= last:
                frontier.append(child)
            yield node, ch, i, bound, child


def test_a_nodes_refill_bound_in_the_innermost_levels_positions_stays_below_its_subtree():
    """Below a node whose levels down to one of R's positions are chosen, the refill bound
    (BelowBounds.refine) weighs the positions left as one level, in the words the chosen positions
    leave free and without the tensors they keep (none at all after an empty inner position); after
    an empty inner position of a level above R, the rest of that level keeps nothing, so words
    across R's top come from further up. Per node, against the least energy of its whole subtree,
    on random matmuls over DRAM -> GLB -> 1-2 RFs of 3-12 words, uneven: no node's bound is above
    it. Mutants fail: counting the chosen positions' words twice (at 11 of the first 40 problems),
    closing R's positions after an empty first one (20 nodes), closing the GLB's positions after any
    of them (3 nodes)."""
    from storeloop.ir.constraints import Constraints
    from storeloop.mapper import _prepare
    from storeloop.mapper.objective import Objective

    obj, checked, inside = Objective("energy"), 0, 0
    for seed in range(60):
        rng = random.Random(500 + seed)
        while True:
            bounds = {d: rng.choice([1, 2, 3, 4, 6, 8]) for d in "MNK"}
            if 16 <= math.prod(bounds.values()) <= 128:
                break
        work = einsum_workload(f"m{seed}", "Z[m,n] = A[m,k] * B[k,n]", bounds, bits=16)
        k = rng.choice([1, 1, 2])
        arch = Arch("m", (StorageLevel("DRAM", "DRAM", 1, None, None, 16, 1),
                          StorageLevel("GLB", "SRAM", 1, None, rng.choice([16, 24, 48]), 16, 1),
                          StorageLevel("RF", "regfile", k, None, rng.choice([3, 4, 6, 9, 12]), 16, 1)),
                    ComputeLevel("MAC", "intmac", k, None, 16), clock_hz=1e9)
        energy = EnergyTable({"DRAM": ActionCosts(rng.uniform(50, 200), rng.uniform(50, 200), 0.0, "r"),
                              "GLB": ActionCosts(rng.uniform(2, 20), rng.uniform(2, 20), 100.0, "r"),
                              "RF": ActionCosts(rng.uniform(0.1, 1), rng.uniform(0.1, 1), 10.0, "r")},
                             ActionCosts(rng.uniform(0.5, 3), 0.0, 50.0, "r"), "r")
        tree = _prepare(arch, work, energy, Constraints(), False, uneven=True).tree
        for node, ch, i, bound, child in random_walk(tree, obj, seed, 40, tree.nlev - 3, True):
            least = _least_below(tree, child, obj) if bound > ch.elb[i] else None
            if least is None:
                continue
            checked += 1
            inside += tree.split.group[node.depth + 1] == tree.split.group[-1]
            assert bound <= least[1] * (1 + 1e-9), \
                f"seed {seed}: a node at level {node.depth + 1} is bounded at {bound}, its subtree's least is {least[1]}"
    assert checked >= 900 and inside >= 600, (checked, inside)


def test_an_uneven_answer_is_written_and_read_back_as_the_same_mapping(tmp_path):
    """The answer's positions are printed and survive the mapping file (``below:``): loaded back, it
    prices the same."""
    import yaml

    from storeloop.cli.render import map_report
    from storeloop.formats.load import load_mapping

    for seed in range(20):
        arch, work, energy, _ = uneven_case(seed)
        out = map_workload(arch, work, energy, converge=False,
                           options=options(objective="energy", time_limit=60, energy_gap=0.0, uneven=True))
        if out.mapping.uneven:
            break
    else:
        raise AssertionError("no uneven answer among the cases")
    below = [f"{t}: {work.dims[lm.temporal[n - 1].dim]}" for lm in out.mapping.levels for t, n in lm.above if n]
    assert f"below: {{{below[0]}" in map_report(out, arch, work)      # what `storeloop map` prints
    path = tmp_path / "m.yaml"
    path.write_text(yaml.safe_dump(mapping_to_native(out.mapping, arch, work)))
    again = evaluate(arch, work, load_mapping(path, arch, work), energy)
    assert (again.cycles, again.energy_pJ) == (out.result.cycles, out.result.energy_pJ)


def test_map_uneven_on_windowed_problems_matches_brute_force():
    """Sliding windows (the window oracle's problems: 1D and 2D convolutions, strides, dilations,
    fanouts to the MACs and above the register files, meshes): the leaves the model prices are the
    uneven mappings' and the surrogate's bounds hold for them. The problems whose uneven space
    brute force walks in about a second."""
    from test_window_mapper import window_case

    proven = 0
    for seed in (1, 2, 3, 5, 6, 7, 10, 12, 13, 14, 18, 20, 22, 24, 25, 27, 28, 29):
        arch, work, energy, objective, at = window_case(seed)
        out = map_workload(arch, work, energy, converge=False,
                           options=options(objective=objective, time_limit=60, energy_gap=0.0, uneven=True))
        s = out.search
        assert not s.get("bound_violations")
        if not s["optimal"]:
            continue
        proven += 1
        best = None
        for mapping in every_uneven_mapping(arch, work, at):
            try:
                r = evaluate(arch, work, mapping, energy)
            except MappingError:
                continue
            best = score(objective, r) if best is None else min(best, score(objective, r))
        got = score(objective, out.result)
        assert all(math.isclose(g, w, rel_tol=1e-9) for g, w in zip(got, best)), \
            f"window seed {seed} ({objective}): map --uneven says optimal at {got}, brute force finds {best}"
    assert proven >= 16, f"only {proven} of 18 windowed problems proven"
