"""The Kelley search's LP solved through HiGHS directly returns what linprog returns."""

import numpy as np
import pytest
from scipy.optimize import linprog

from catdask.certificate import kelley_lp
from catdask.certificate.kelley_lp import solve_kelley_lp


def _linprog(A_ub, b_ub, lo, hi, s_cap):
    K = lo.size
    res = linprog(np.append(np.zeros(K), -1.0), A_ub=A_ub, b_ub=b_ub,
                  bounds=[(a, b) for a, b in zip(lo, hi)] + [(None, s_cap)], method="highs")
    return res.status, res.x, res.fun


def _cuts(rng, K, rows, sparse):
    """Rows of Kelley cuts ``s - g . nu <= c`` (``-g`` has zeros when some p_j vanish)."""
    G = rng.standard_normal((rows, K))
    if sparse:
        G[rng.random(G.shape) < 0.3] = 0.0
    A = np.column_stack([-G, np.ones(rows)])
    return A, rng.standard_normal(rows)


@pytest.mark.parametrize("seed", range(40))
def test_same_answer_as_linprog(seed):
    rng = np.random.default_rng(seed)
    K = int(rng.integers(1, 9))
    A, b = _cuts(rng, K, int(rng.integers(1, 40)), sparse=seed % 2 == 0)
    lo = -rng.random(K)
    hi = lo + rng.random(K) * (seed % 5 != 0)  # some boxes collapsed to a point
    s_cap = 10.0
    got = solve_kelley_lp(A, b, lo, hi, s_cap)
    want = _linprog(A, b, lo, hi, s_cap)
    assert got[0] == want[0]
    if want[0] == 0:
        np.testing.assert_array_equal(got[1], want[1])
        assert got[2] == want[2]


def test_infeasible_is_not_solved():
    # s <= -1 - nu and s >= ... : rows that contradict the box make no feasible point only
    # through s's cap; an empty feasible set: 0 <= nu <= 1 with -nu <= -2 (nu >= 2).
    A = np.array([[-1.0, 0.0], [0.0, 1.0]])
    b = np.array([-2.0, 0.0])
    lo, hi = np.zeros(1), np.ones(1)
    assert solve_kelley_lp(A, b, lo, hi, 5.0)[0] != 0
    assert _linprog(A, b, lo, hi, 5.0)[0] != 0


def test_fallback_without_private_highs(monkeypatch):
    rng = np.random.default_rng(1)
    A, b = _cuts(rng, 3, 7, sparse=False)
    lo, hi = -np.ones(3), np.ones(3)
    direct = solve_kelley_lp(A, b, lo, hi, 4.0)
    monkeypatch.setattr(kelley_lp, "_highs", None)
    fallback = solve_kelley_lp(A, b, lo, hi, 4.0)
    assert fallback[0] == direct[0] == 0
    np.testing.assert_array_equal(fallback[1], direct[1])
