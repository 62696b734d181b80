"""The cost kernel gives the same numbers for Python scalars and for NumPy rows."""

import random
from fractions import Fraction

import numpy as np

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
    assert costs.unit_deliveries(costs.changes_only(True, False), 9, 27) == 9
    assert costs.unit_deliveries(costs.changes_only(True, True), 9, 27) == 27
    assert costs.unit_deliveries(costs.changes_only(False, False), 9, 27) == 27


def test_pages_round_every_run_up():
    # 8-bit words, 4 KiB pages: a 100-word run moves a whole page
    assert costs.page_ratio(100, 8, 4096) == Fraction(4096, 100)
    assert costs.page_ratio(8192, 8, 4096) == 1
    assert costs.run_words([2, 3, 5], [4, 3, 5]) == 30       # spans the last two ranks, not the first
    assert costs.paged(3, Fraction(7, 2)) == 11
    big = np.array([2**61, 5], dtype=np.int64)
    assert list(costs.paged(big, Fraction(7, 3))) == [-(-(2**61) * 7 // 3), 12]
