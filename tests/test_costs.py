"""The cost kernel gives the same numbers for Python scalars and for NumPy rows."""

import itertools
import math
import random
from fractions import Fraction

import numpy as np
import pytest

from storeloop.model import costs


def _level(rng):
    bw = lambda: rng.choice([None, 0.5, 1, 3.25, 64])       # noqa: E731
    return type("L", (), {"read_bandwidth": bw(), "write_bandwidth": bw(), "shared_bandwidth": bw(),
                          "block_size": rng.choice([1, 4, 16])})()


def test_scalar_and_vector_forms_agree():
    rng = random.Random(3)
    for _ in range(50):
        lvl = _level(rng)
        rows, tensors = 20, 3
        cc = np.array([rng.randint(1, 10**6) for _ in range(rows)], dtype=np.int64)
        r, f, u = (np.array([[rng.randint(0, 10**7) for _ in range(rows)] for _ in range(tensors)], dtype=np.int64)
                   for _ in range(3))
        e_vec, c_vec = costs.level_costs(lvl, 1.5, 2.25, r, f, u, cc)
        for i in range(rows):
            e, c = costs.level_costs(lvl, 1.5, 2.25, [int(x) for x in r[:, i]], [int(x) for x in f[:, i]],
                                     [int(x) for x in u[:, i]], int(cc[i]))
            assert c == c_vec[i] and e == e_vec[i]


def test_throttle_is_timeloops_rule():
    lvl = type("L", (), {"read_bandwidth": 2.0, "write_bandwidth": None, "shared_bandwidth": 3.0})()
    # reads 8/2 = 4 per cycle (2x over), writes 2/2 = 1; shared 5 over 3 -> the read limit wins
    cycles, slow = costs.throttle(lvl, [6, 2], [1, 0], [0, 1], 2)
    assert slow == 0.5 and cycles == 4
    assert costs.throttle(lvl, [1], [0], [0], 2) == (2, 1.0)            # under every limit


def test_keeper_accesses_of_outputs_skip_first_reads_and_fills():
    assert costs.keeper_accesses(True, 100, 40, 10, True) == (90, 30, 100)
    assert costs.keeper_accesses(True, 100, 40, 10, False) == (90, 0, 100)
    assert costs.keeper_accesses(False, 100, 40, 10, True) == (100, 40, 0)


def test_unit_deliveries_follow_operand_changes_only_under_a_unit_fanout():
    # second argument: whether every unit has a mesh neighbour with the same operand
    assert costs.unit_deliveries(costs.changes_only(True, True), 9, 27) == 9
    assert costs.unit_deliveries(costs.changes_only(True, False), 9, 27) == 27
    assert costs.unit_deliveries(costs.changes_only(False, True), 9, 27) == 27


def _share_by_enumeration(factors, indexes, width):
    """Timeloop's grid, literally: units numbered in nest order, row-major, width columns."""
    loops = [(f, i) for f, i in zip(factors, indexes) if f > 1][::-1]           # outer first
    keys = [tuple(d for d, (_, i) in zip(digits, loops) if i)
            for digits in itertools.product(*[range(f) for f, _ in loops])]
    if len(keys) < 2:
        return False
    for u, key in enumerate(keys):
        h = u % width
        near = [v for v in (u - 1 if h else -1, u + 1 if h < width - 1 else -1, u - width, u + width)
                if 0 <= v < len(keys)]
        if not any(keys[v] == key for v in near):
            return False
    return True


@pytest.mark.parametrize("seed", range(200))
def test_units_share_is_timeloops_grid_on_regular_layouts(seed):
    """The closed form equals the literal grid wherever rows do not split the loops' groups."""
    rng = random.Random(seed)
    factors = [rng.choice([1, 2, 2, 3, 4]) for _ in range(rng.randint(1, 4))]
    indexes = [rng.random() < 0.5 for _ in factors]
    products = [math.prod(factors[:k]) for k in range(len(factors) + 1)]
    width = rng.choice(products[1:] + [max(products) * 2])     # a row is a whole inner block
    got = costs.units_share(factors, indexes, width)
    assert got == _share_by_enumeration(factors, indexes, width)
    column = costs.units_share(np.array([factors]), np.array([indexes]), np.array([width]))
    assert bool(column[0]) == got


def test_units_share_on_the_8x2_mesh():
    # Z = A x B on 16 MACs, M2 on Y and N8 on X (innermost first: N then M): B[k,n] is indexed by
    # N, but each unit's column neighbour (the other M) holds the same B -- Timeloop's link
    assert costs.units_share([8, 2], [True, False], 8)
    assert not costs.units_share([8, 2], [True, True], 8)
    # T2 on Y alone on an 8-wide mesh: the two units sit side by side in one row
    assert costs.units_share([2], [False], 8)


def test_pages_round_every_run_up():
    # 8-bit words, 4 KiB pages: a 100-word run moves a whole page
    assert costs.page_ratio(100, 8, 4096) == Fraction(4096, 100)
    assert costs.page_ratio(8192, 8, 4096) == 1
    assert costs.run_words([2, 3, 5], [4, 3, 5]) == 30       # spans the last two ranks, not the first
    assert costs.paged(3, Fraction(7, 2)) == 11
    big = np.array([2**61, 5], dtype=np.int64)
    assert list(costs.paged(big, Fraction(7, 3))) == [-(-(2**61) * 7 // 3), 12]
