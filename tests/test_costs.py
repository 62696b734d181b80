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


def test_unit_content_counts_changes_and_units_without_a_neighbour():
    # 2 groups (scatter 6 over 3 distinct elements per group), 9 changes in 27 computes
    assert costs.unit_content(True, 9, 27, 6, 3, 0) == 2 * 9 * 3              # every unit has a neighbour
    assert costs.unit_content(True, 9, 27, 6, 3, 3) == 27 * 6                  # none has one
    assert costs.unit_content(True, 9, 27, 6, 3, 1) == 2 * (9 * 3 + 18 * 1)   # one element's units lack one
    assert costs.unit_content(False, 9, 27, 6, 3, 0) == 27 * 6                 # units not under a fanout


def _unshared_by_enumeration(factors, indexes, width):
    """Timeloop's grid, literally: units numbered in nest order, row-major, width columns; the
    distinct elements of units with no left/right/up/down neighbour holding the same one."""
    loops = [(f, i) for f, i in zip(factors, indexes) if f > 1][::-1]           # outer first
    keys = [tuple(d for d, (_, i) in zip(digits, loops) if i)
            for digits in itertools.product(*[range(f) for f, _ in loops])]
    lonely = set()
    for u, key in enumerate(keys):
        h = u % width
        near = [v for v in (u - 1 if h else -1, u + 1 if h < width - 1 else -1, u - width, u + width)
                if 0 <= v < len(keys)]
        if not any(keys[v] == key for v in near):
            lonely.add(key)
    return len(lonely)


@pytest.mark.parametrize("seed", range(200))
def test_unshared_operands_is_timeloops_grid(seed):
    """Any layout, rows that split the loops' groups included (X loops of 3 or 6 on an 8-wide
    mesh, which real Timeloop v3.0.3 confirmed): the kernel equals the literal grid."""
    rng = random.Random(seed)
    factors = [rng.choice([1, 2, 2, 3, 4, 6]) for _ in range(rng.randint(1, 4))]
    indexes = [rng.random() < 0.5 for _ in factors]
    products = [math.prod(factors[:k]) for k in range(len(factors) + 1)]
    width = rng.choice(products[1:] + [max(products) * 2, 8])
    got = costs.unshared_operands(factors, indexes, width)
    assert got == _unshared_by_enumeration(factors, indexes, width)
    column = costs.unshared_operands(np.array([factors]), np.array([indexes]), np.array([width]))
    assert int(column[0]) == got


def test_unshared_operands_on_the_8x2_mesh():
    # Z = A x B on 16 MACs, M2 on Y and N8 on X (innermost first: N then M): B[k,n] is indexed by
    # N, but each unit's column neighbour (the other M) holds the same B -- Timeloop's link
    assert costs.unshared_operands([8, 2], [True, False], 8) == 0
    assert costs.unshared_operands([8, 2], [True, True], 8) == 16
    # T2 on Y alone on an 8-wide mesh: the two units sit side by side in one row
    assert costs.unshared_operands([2], [False], 8) == 0
    # M6 on X (not indexing B) and N2 on Y on the 8-wide mesh: rows split the M groups, yet every
    # unit has a neighbour with its B (a real timeloop-model run reads B half as often)
    assert costs.unshared_operands([6, 2], [False, True], 8) == 0


def test_pages_round_every_run_up():
    # 8-bit words, 4 KiB pages: a 100-word run moves a whole page
    assert costs.page_ratio(100, 8, 4096) == Fraction(4096, 100)
    assert costs.page_ratio(8192, 8, 4096) == 1
    assert costs.run_words([2, 3, 5], [4, 3, 5]) == 30       # spans the last two ranks, not the first
    assert costs.paged(3, Fraction(7, 2)) == 11
    big = np.array([2**61, 5], dtype=np.int64)
    assert list(costs.paged(big, Fraction(7, 3))) == [-(-(2**61) * 7 // 3), 12]
