"""The lifted (Burer & Park) relaxation: its proved bound against brute force.

Every bound is checked against the best of many ascents and Haar-random points
(:mod:`tests.helpers.stiefel`, independent of catdask's solver), for the solver's data and for
data no solver produced; a deliberately broken proof that drops the residual charge must be
caught by the same check.
"""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.lifted import burer_park
from benchmarks.lifted.lowrank_alm import alm_lifted_bound
from benchmarks.lifted.burer_park import (estimated_size, lifted_bound, realign_adjoint,
                                            solve_lifted_dual)
from tests.certificate.test_certificate import _wine_moments
from tests.helpers.stiefel import problem_and_best, random_stiefel, restarts

pytest.importorskip("cvxpy")

SHAPES = [(3, 2), (4, 2), (4, 3), (5, 2)]


@pytest.fixture(scope="module")
def problems():
    """(R, restart points, their objectives, best objective seen) per shape."""
    rng = np.random.default_rng(7)
    return [problem_and_best(rng, D, K, n_restarts=40, n_random=2000) for D, K in SHAPES]


@pytest.fixture(scope="module")
def solved(problems):
    """The SCS dual data of each problem, without and with the Kronecker constraint."""
    return [(solve_lifted_dual(R, time_limit=30), solve_lifted_dual(R, kronecker=True,
                                                                     time_limit=30))
            for R, *_ in problems]


def violations(problems, data):
    """(problem index, proved bound, best f seen) wherever a bound is below a known f."""
    out = []
    for i, ((R, _, _, best), (Lam, Z, Xi)) in enumerate(zip(problems, data)):
        bound = lifted_bound(R, Lam, Z, Xi).upper_bound
        if bound < best:
            out.append((i, bound, best))
    return out


def test_realignment_is_the_kronecker_product_of_w_and_its_transpose():
    rng = np.random.default_rng(0)
    D, K = 5, 3
    W = random_stiefel(rng, D, K)
    x = W.T.ravel()  # x[k D + a] = W[a, k]
    Q = rng.standard_normal((D * K, D * K))
    assert x @ realign_adjoint(Q, D, K) @ x == pytest.approx(np.sum(Q * np.kron(W, W.T)))
    # M(x x^T) = W (x) W^T has every singular value 1 on the manifold (the constraint is valid)
    assert np.allclose(np.linalg.svd(np.kron(W, W.T), compute_uv=False)[:K * K], 1.0)


@pytest.mark.parametrize("kronecker", [False, True])
def test_solver_bound_is_above_every_point_found(problems, solved, kronecker):
    data = [(d.Lam, d.Z, d.Xi) for d in (pair[kronecker] for pair in solved)]
    assert violations(problems, data) == []
    for (R, Ws, f, best), (Lam, Z, Xi) in zip(problems, data):
        bound = lifted_bound(R, Lam, Z, Xi).upper_bound
        assert bound >= f.max()  # f at the fitted (best restart's) W
        # a bound from a converged solve is close to the relaxation's value, not just valid
        assert bound - best <= 0.5 * abs(best)


@pytest.mark.filterwarnings("ignore:Solution may be inaccurate")
def test_bound_holds_for_data_no_solver_produced(problems, solved):
    """Early-stopped, perturbed and random dual data: looser bounds, never invalid ones."""
    rng = np.random.default_rng(3)
    data = []
    for (R, *_), (plain, kron) in zip(problems, solved):
        K, D, _ = R.shape
        n = D * K
        early = solve_lifted_dual(R, kronecker=True, max_iters=5)
        data.append((early.Lam, early.Z, early.Xi))
        data.append((0.8 * plain.Lam, 0.8 * plain.Z, None))
        data.append((kron.Lam, kron.Z, kron.Xi + 0.1 * rng.standard_normal((2 * n, 2 * n))))
        data.append((rng.standard_normal((K, K)), rng.standard_normal((D, D)),
                     rng.standard_normal((2 * n, 2 * n))))
    expanded = [p for p in problems for _ in range(4)]
    assert violations(expanded, data) == []


def test_dropping_the_residual_charge_is_caught(problems, solved, monkeypatch):
    """The mutation check: a proof that trusts ``lambda_max(-C) <= 0`` is unsound, and the
    soundness check above sees it on shrunk dual data (which leave ``-C`` indefinite)."""
    dense = [(0.8 * plain.Lam, 0.8 * plain.Z, None) for plain, _ in solved]
    # diagonal Lam (what the ALM gives) takes the block-diagonal path of the proof
    diagonal = [(np.diag(0.8 * np.diag(plain.Lam)), 0.8 * plain.Z, None) for plain, _ in solved]
    for data in (dense, diagonal):
        assert violations(problems, data) == []
    monkeypatch.setattr(burer_park, "_proved_top", lambda matrix: 0.0)
    for data in (dense, diagonal):
        assert violations(problems, data) != []


def test_block_diagonal_proof_agrees_with_the_dense_one(problems, solved):
    """Diagonal Lam: K factorisations of order D give the dense proof's bound (up to the
    rounding charges)."""
    for (R, *_), (plain, _) in zip(problems, solved):
        Lam = np.diag(np.diag(plain.Lam) + 1.0)
        fast = lifted_bound(R, Lam, plain.Z).upper_bound
        Lam_off = Lam.copy()
        Lam_off[0, 1] = Lam_off[1, 0] = 1e-300  # forces the dense path, same matrix
        assert fast == pytest.approx(lifted_bound(R, Lam_off, plain.Z).upper_bound, rel=1e-9)


def _block_diagonal_value(R):
    """Value of the block-diagonal relaxation (Gilman, Burer & Balzano), solved directly."""
    import cvxpy as cp

    K, D, _ = R.shape
    X = [cp.Variable((D, D), PSD=True) for _ in range(K)]
    cons = [cp.trace(Xk) == 1 for Xk in X] + [np.eye(D) - sum(X) >> 0]
    prob = cp.Problem(cp.Maximize(sum(cp.trace(R[k] @ X[k]) for k in range(K))), cons)
    prob.solve(solver=cp.CLARABEL)
    return 0.5 * prob.value


def test_lift_has_the_block_diagonal_relaxations_value(problems, solved):
    """The sign-symmetry argument of the module docstring: on CQS problems the lift (with or
    without the Kronecker constraint) is worth exactly the block-diagonal relaxation."""
    for (R, _, _, best), (plain, kron) in zip(problems, solved):
        value = _block_diagonal_value(R)
        for d in (plain, kron):
            assert 0.5 * d.value == pytest.approx(value, rel=1e-5, abs=1e-6)


@pytest.mark.parametrize("kronecker", [False, True])
@pytest.mark.slow
def test_lift_is_no_tighter_where_the_block_diagonal_relaxation_is_loose(kronecker):
    """Wine, class origin: the block-diagonal relaxation is 1.6e-3 above the optimum
    (docs/design.md section 4); the lift's value is the same, and its proved bound valid."""
    R = _wine_moments("class")
    _, f = restarts(R, np.random.default_rng(11), 30)
    value = _block_diagonal_value(R)
    assert value > f.max() * (1 + 1e-4)  # loose: the case the lift was meant to close
    d = solve_lifted_dual(R, kronecker=kronecker, time_limit=60)
    assert 0.5 * d.value == pytest.approx(value, rel=1e-5)
    bound = lifted_bound(R, d.Lam, d.Z, d.Xi).upper_bound
    assert value * (1 - 1e-5) <= bound <= value * (1 + 1e-4)


def test_size_estimate():
    assert estimated_size(19, 7) == (133, 28 + 190, float(133 ** 3 + 19 ** 3))
    assert estimated_size(19, 7, kronecker=True)[0] == 266


def test_low_rank_alm_proves_the_relaxations_value(problems):
    """The ALM's bound (proved by lifted_bound from its multiplier) is valid on random
    problems (where the relaxation is tight) and close to their maximum."""
    for R, Ws, f, best in problems:
        result = alm_lifted_bound(R, Ws[int(np.argmax(f))], outer=15)
        assert best <= result.bound.upper_bound <= best * (1 + 1e-4) + 1e-9


def test_low_rank_alm_reaches_the_relaxations_value_where_it_is_loose():
    R = _wine_moments("class")
    Ws, f = restarts(R, np.random.default_rng(11), 30)
    value = _block_diagonal_value(R)  # wine's loose case: within 1e-6 of the relaxation
    result = alm_lifted_bound(R, Ws[int(np.argmax(f))], rank=2)
    assert value * (1 - 1e-7) <= result.bound.upper_bound <= value * (1 + 1e-6)

