"""Complementary-slackness polish of the moment certificate: it only produces data for the
unchanged proof, so its bounds are valid whatever W, and a wrong W falls back to SCS."""

import numpy as np
import pytest

pytest.importorskip("scs", reason="the moment relaxation needs the sdp extra (SCS)")

from catdask.certificate.budget import CertificateBudget  # noqa: E402
from catdask.certificate.moment import moment_relaxation_bound  # noqa: E402
from catdask.certificate.moment_dual import dual_bound  # noqa: E402
from catdask.certificate.moment_polish import basis_values, slackness_system  # noqa: E402
from catdask.certificate.moment_sos import identity  # noqa: E402

from .test_moment_relaxation import (  # noqa: E402
    _best_local_optimum,
    _competing_classes,
    _objective,
    _polar,
)


def _random_values(R, n, seed):
    rng = np.random.default_rng(seed)
    return [_objective(R, _polar(rng.standard_normal((R.shape[1], R.shape[0]))))
            for _ in range(n)]


@pytest.fixture
def early_stages():
    # The small cases converge within SCS's first 150 iterations; stop after 20 so that the
    # polish, not SCS's convergence, decides.
    return CertificateBudget(polish_first_iters=20)


def test_slackness_rows_are_gram_times_the_point_values():
    """Brute force: the system's last rows are Q_b u_b, u_b the unit vector of the basis
    monomials' values at Y, and its first rows the identity's coefficients but the constant."""
    K, r = 2, 3
    ident = identity(K, r, None)
    rng = np.random.default_rng(0)
    Y = _polar(rng.standard_normal((r, K)))
    values = basis_values(ident, Y)
    y = Y.T.ravel()
    for v, basis in zip(values, ident.bases):
        np.testing.assert_allclose(v, [np.prod(y[list(m)]) for m in basis], rtol=1e-14)
    L, keep, units = slackness_system(ident, Y)
    grams = [rng.standard_normal(s * (s + 1) // 2) for s in ident.sizes()]
    lam = rng.standard_normal(ident.n_mult)
    out = L @ np.concatenate(grams + [lam])
    coeffs = ident.gram_sum(grams) + ident.multipliers @ lam
    np.testing.assert_allclose(out[:keep.sum()], coeffs[keep], rtol=1e-12, atol=1e-12)
    slack, offset = out[keep.sum():], 0
    for t, s, u in zip(grams, ident.sizes(), units):
        Q = np.zeros((s, s))
        Q[np.triu_indices(s)] = t
        Q = Q + np.triu(Q, 1).T
        np.testing.assert_allclose(slack[offset:offset + s], Q @ u, rtol=1e-12, atol=1e-12)
        offset += s


def test_polished_bound_proves_the_optimum_and_is_valid(early_stages):
    R = _competing_classes(376)  # D = 4, K = 2; the SDP dual is not tight here
    f, W = _best_local_optimum(R, seed=376)
    mb = moment_relaxation_bound(R, W=W, target_gap=1e-6, budget=early_stages)
    assert mb.polish_rounds >= 1 and mb.solver == "SCS + slackness polish"
    assert mb.iterations < moment_relaxation_bound(R, W=W, polish=False,
                                                   budget=early_stages).iterations
    assert f <= mb.upper_bound <= f * (1 + 1e-6)
    assert max(_random_values(R, 100, 1)) <= mb.upper_bound
    # The data re-prove the same bound without a solver.
    assert dual_bound(R, mb.dual).upper_bound == mb.upper_bound


@pytest.mark.parametrize("seed", [1, 2])
def test_planted_non_optimal_point_is_not_certified_and_falls_back(early_stages, seed):
    """At a point that is not the global maximiser no polished data can prove the target (the
    proof is valid whatever the data), so the solve falls back to SCS to convergence, and its
    bound is as tight as without the polish."""
    R = _competing_classes(376)
    f, _ = _best_local_optimum(R, seed=376)
    rng = np.random.default_rng(seed)
    W = _polar(rng.standard_normal((R.shape[1], R.shape[0])))
    assert _objective(R, W) < f * (1 - 1e-3)
    mb = moment_relaxation_bound(R, W=W, target_gap=1e-6, budget=early_stages)
    assert mb.polish_rounds == 0 and mb.solver == "SCS"
    assert (mb.upper_bound - _objective(R, W)) > 1e-3 * f  # W not certified
    assert f <= mb.upper_bound <= f * (1 + 1e-6)  # the relaxation still bounds max f tightly
    assert max(_random_values(R, 100, seed)) <= mb.upper_bound


def test_polish_at_a_wrong_point_still_bounds_rigorously():
    """The polish steered by a planted point: each round's data, proved, bound max f."""
    from catdask.certificate.moment_dual import MomentDual
    from catdask.certificate.moment_polish import polish

    R = _competing_classes(376)
    f, _ = _best_local_optimum(R, seed=376)
    K, D, _ = R.shape
    ident = identity(K, D, None)
    Y = _polar(np.random.default_rng(3).standard_normal((D, K)))
    scale = float(max(np.linalg.norm(Rk, 2) for Rk in R))
    f_vec = ident.objective(R / scale)
    start = MomentDual(np.eye(D), scale, 0.0, tuple(np.zeros(s * (s + 1) // 2)
                                                    for s in ident.sizes()),
                       np.zeros(ident.n_mult))
    seen = []

    def prove(data):
        bound = dual_bound(R, data, ident)
        seen.append(bound.upper_bound)
        return (bound.upper_bound - f) / f, bound

    gap, bound, data, rounds = polish(ident, start, f_vec, slackness_system(ident, Y), prove,
                                      target=1e-6)
    assert seen and min(seen) >= f and gap >= 0


def test_the_staged_solve_reports_its_size_and_each_stage(early_stages):
    """A moment solve can take minutes: listeners hear its size first, then each SCS stage's
    iterations and the gap the polish proved (catdask.core.progress.report_stage)."""
    from catdask.core.progress import solver_progress

    class Listener:
        def __init__(self):
            self.stages = []

        def __call__(self, *args):
            pass

        def stage(self, text):
            self.stages.append(text)

    R = _competing_classes(376)
    _, W = _best_local_optimum(R, seed=376)
    listener = Listener()
    with solver_progress(listener):
        mb = moment_relaxation_bound(R, W=W, target_gap=1e-6, budget=early_stages)
    assert listener.stages[0].startswith(
        f"global-optimality test: level-2 moment relaxation, {mb.n_moments:,} moments, "
        f"largest PSD block {max(mb.block_sizes)}")
    assert listener.stages[-1].startswith(
        f"global-optimality test: moment relaxation, {mb.iterations} SCS iterations, proved gap")
