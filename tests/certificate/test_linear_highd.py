"""Linear fits at high D (issue 26, item 2): the top-pair starts, BLAS class statistics, the
Cholesky-proved eigenvalue bounds, the subspace dual bound and the size guard of the
certificate. Soundness first: no bound may fall below a value some orthonormal W attains."""

from __future__ import annotations

import numpy as np
import pytest

from catdask.certificate import certify_global_optimum
from catdask.certificate.budget import CertificateBudget
from catdask.certificate.eigen import cholesky_upper, top_eig, verified_top
from catdask.core.problems import ClassMatrixProblem
from catdask.core.starts import top_eigenvector
from catdask.operators.blocks import block_class_stats, class_second_moments, cross_product
from tests.helpers.stiefel import (  # noqa: F401
    maximise,
    objective,
    polar,
    problem_and_best,
    random_problem,
    random_stiefel,
    restarts,
)



def _random_symmetric(rng, n, kind):
    if kind == "psd":
        A = rng.standard_normal((n, int(rng.integers(1, n + 1))))
        return A @ A.T
    if kind == "clustered":  # a near-multiple top eigenvalue
        Q, _ = np.linalg.qr(rng.standard_normal((n, n)))
        d = rng.uniform(-1.0, 1.0, n)
        d[:3] = 5.0 + 1e-9 * np.arange(3)
        return (Q * d) @ Q.T
    A = rng.standard_normal((n, n))
    return A + A.T


# ------------------------------------------------------------------------- eigen routines
@pytest.mark.parametrize("kind", ["psd", "indefinite", "clustered"])
def test_cholesky_upper_is_an_upper_bound(kind):
    rng = np.random.default_rng(0)
    for n in (5, 60, 230):
        A = _random_symmetric(rng, n, kind)
        top = np.linalg.eigvalsh(A)[-1]
        scale = max(1.0, np.abs(A).max())
        # From the exact value it proves a bound within a tiny slack ...
        mu = cholesky_upper(A, top)
        # (eigvalsh itself is accurate to about n eps ||A||)
        assert mu is not None and top - 1e-12 * scale <= mu <= top + 1e-8 * scale
        # ... and it never "proves" a value below lambda_max, however it is asked.
        for low in (top - 1e-6 * scale, top - 0.5 * scale, np.linalg.eigvalsh(A)[0]):
            mu = cholesky_upper(A, low)
            assert mu is None or mu >= top - 1e-12 * scale


@pytest.mark.parametrize("kind", ["psd", "indefinite", "clustered"])
def test_verified_top_matches_eigh_with_and_without_estimate(kind):
    rng = np.random.default_rng(1)
    for n in (9, 150, 260):  # dense, and above dense_max_dim (Cholesky route)
        A = _random_symmetric(rng, n, kind)
        top = np.linalg.eigvalsh(A)[-1]
        scale = max(1.0, np.abs(A).max())
        upper, v, check = verified_top(n, matrix=A, shift=2 * scale, v0=rng.standard_normal(n))
        # "dense" is the Rayleigh quotient plus the residual norm: an upper bound up to
        # rounding (callers add round_guard); Cholesky-proved bounds include the rounding.
        rounding = 1e-12 * scale
        assert top - rounding <= upper <= top + 1e-7 * scale
        est, u = top_eig(n, matvec=lambda x: A @ x, shift=2 * scale, v0=rng.standard_normal(n))
        upper2, _, check2 = verified_top(n, matrix=A, shift=2 * scale, estimate=(est, u))
        assert top - rounding <= upper2 <= top + 1e-7 * scale
        if n > 200:
            assert check2 == "lanczos+cholesky"
        # A wrong estimate (far too low) costs time, never soundness.
        upper3, _, _ = verified_top(n, matrix=A, shift=2 * scale, estimate=(top - scale, u))
        assert upper3 >= top - rounding


# ------------------------------------------------------------------------- starts and stats
@pytest.mark.parametrize("n", [40, 320, 450])
def test_top_eigenvector_is_the_dense_one(n):
    rng = np.random.default_rng(n)
    for _ in range(3):
        A = rng.standard_normal((n, n + 20))
        M = A @ A.T
        lam, V = np.linalg.eigh(M)
        got_lam, got = top_eigenvector(M)
        assert got_lam == pytest.approx(lam[-1], rel=1e-12)
        assert min(np.linalg.norm(got - V[:, -1]), np.linalg.norm(got + V[:, -1])) < 1e-8


def test_cross_product_and_class_statistics():
    rng = np.random.default_rng(2)
    for shape in [(50, 7), (7, 50), (1, 3), (0, 4)]:
        a = rng.standard_normal(shape)
        for x in (a, np.asfortranarray(a), a[:, ::2]):
            got = cross_product(x)
            np.testing.assert_allclose(got, x.T @ x, rtol=1e-13, atol=1e-12)
            assert np.array_equal(got, got.T)
    X = rng.standard_normal((300, 12))
    c = rng.integers(0, 4, 300)
    stats = block_class_stats(X, c, 4)
    center = X.mean(axis=0)
    for origin in ("class", "global"):
        R = class_second_moments(stats, center, origin)
        for k in range(4):
            Xk = X[c == k] - (X[c == k].mean(axis=0) if origin == "class" else center)
            np.testing.assert_allclose(R[k], Xk.T @ Xk, rtol=1e-12, atol=1e-10)


def test_class_matrix_problem_products():
    rng = np.random.default_rng(3)
    R = random_problem(rng, 9, 4)
    W = random_stiefel(rng, 9, 4, n=5)
    state = ClassMatrixProblem(R).start(W)
    np.testing.assert_allclose(state.Y, np.einsum("kde,rek->rdk", R, W), rtol=1e-13)
    np.testing.assert_allclose(state.objective, objective(R, W), rtol=1e-13)


# ------------------------------------------------------------------------- soundness of bounds
def test_subspace_bound_is_sound_and_between_floor_and_reduced():
    """Above max_sdp_dim the bound comes from the dual in a subspace: it must be >= the best of
    many restarts, never looser than the projected-subgradient bound by more than rounding,
    and the relaxation's floor must lie below it."""
    pytest.importorskip("cvxpy")
    refine = CertificateBudget(subspace_min_gap=0.0)  # always refine
    rng = np.random.default_rng(11)
    checked = 0
    for _ in range(8):
        D = int(rng.integers(7, 11))
        K = int(rng.integers(D - 3, D))
        R, Ws, f, best = problem_and_best(rng, D, K, n_restarts=12, n_random=3000)
        W = Ws[int(np.argmax(f))]
        old = certify_global_optimum(R, W, full_sdp=False, budget=refine)
        if old.certified:
            continue
        # D > max_sdp_dim: subspace bound
        new = certify_global_optimum(R, W, budget=CertificateBudget(max_sdp_dim=2,
                                                                    subspace_min_gap=0.0))
        full = certify_global_optimum(R, W, full_sdp=True, budget=refine)
        checked += 1
        assert not new.certified and new.bound_method == "reduced"
        assert "subspace" in new.reason
        assert new.upper_bound >= best - 1e-9 * abs(best)
        assert new.upper_bound <= old.upper_bound * (1 + 1e-9)
        # The full SDP's (repaired) dual is the relaxation's value up to the solver's accuracy.
        assert new.upper_bound >= full.upper_bound * (1 - 1e-5)
    assert checked >= 3


def test_skipping_the_subspace_bound_changes_no_verdict():
    """The subspace bound is skipped when the cheap bounds' gap is <= subspace_min_gap: the
    verdict is the same as with it (never certified where the full path refutes), every bound
    stays above the best restart, and a skipped refinement's gap is within the threshold."""
    pytest.importorskip("cvxpy")
    rng = np.random.default_rng(21)
    seen = {"skipped": 0, "refined": 0}
    for _ in range(10):
        D = int(rng.integers(7, 12))
        K = int(rng.integers(2, D))
        R, Ws, f, best = problem_and_best(rng, D, K, n_restarts=10, n_random=2000)
        for W in (Ws[int(np.argmax(f))], Ws[int(np.argmin(f))]):  # a global and a worse one
            full, cert, cheap = (  # np.inf: always skip
                certify_global_optimum(R, W, budget=CertificateBudget(max_sdp_dim=2,
                                                                      subspace_min_gap=gap))
                for gap in (0.0, 1e-3, np.inf))
            assert cert.certified == full.certified == cheap.certified
            for c in (full, cert, cheap):
                assert c.upper_bound >= best - 1e-9 * abs(best)
            if "subspace dual bound skipped" in cert.reason:
                seen["skipped"] += 1
                assert cert.gap <= 1e-3
                assert cert.upper_bound == pytest.approx(cheap.upper_bound, rel=1e-12)
            elif not cert.certified:
                seen["refined"] += 1
                assert cert.upper_bound <= cheap.upper_bound * (1 + 1e-9)
    assert seen["skipped"] >= 1 and seen["refined"] >= 1, seen


def test_subspace_bound_sound_at_moderate_dimension():
    """D = 40 (Lanczos search, dense verification): the bound is above every restart."""
    pytest.importorskip("cvxpy")
    rng = np.random.default_rng(12)
    D, K = 40, 6
    R = np.stack([a @ a.T for a in rng.standard_normal((K, D, 3))]) + 0.05 * np.eye(D)
    Ws, f = restarts(R, rng, 30)
    W = Ws[int(np.argmax(f))]
    cert = certify_global_optimum(R, W, budget=CertificateBudget(dense_max_dim=10))
    probes = objective(R, random_stiefel(rng, D, K, n=2000))
    assert cert.upper_bound >= max(f.max(), probes.max()) - 1e-9 * f.max()
    if not cert.certified:
        assert cert.gap >= 0


# ------------------------------------------------------------------------- size guard
def test_size_guard_says_not_attempted():
    rng = np.random.default_rng(4)
    R = random_problem(rng, 12, 3)
    W = maximise(R, random_stiefel(rng, 12, 3))
    cert = certify_global_optimum(R, W, budget=CertificateBudget(max_seconds=1e-9,
                                                                 dense_max_dim=5))
    assert not cert.certified and cert.reason.startswith("not attempted: D too large")
    assert "estimated" in cert.reason and "max_seconds" in cert.reason
    assert cert.objective == pytest.approx(objective(R, W), rel=1e-12)
    with pytest.raises(ValueError, match="max_seconds"):
        certify_global_optimum(R, W, budget=CertificateBudget(max_seconds=0))


def test_covariance_moments_from_class_statistics():
    from catdask.core.classes import ClassIndex
    from catdask.operators.in_memory import NumpyDataOperator

    rng = np.random.default_rng(5)
    X = rng.standard_normal((200, 9)) * rng.uniform(0.1, 3.0, 9) + 1e3
    codes = rng.integers(0, 3, 200)
    op = NumpyDataOperator(X, ClassIndex(codes, 3))
    Xc = X - X.mean(axis=0)
    C = Xc.T @ Xc / 200
    tr, fro2 = op.covariance_moments()
    assert tr == pytest.approx(np.trace(C), rel=1e-12)
    assert fro2 == pytest.approx(np.sum(C * C), rel=1e-12)


@pytest.mark.slow
def test_relaxation_floor_lies_below_every_dual_bound():
    """The repaired primal point is feasible: its value is <= every dual bound and >= f(W)."""
    pytest.importorskip("cvxpy")
    from catdask.certificate.point import StationaryPoint, read_inputs
    from catdask.certificate.sdp_dual import sdp_dual_test
    from catdask.certificate.subspace_dual import subspace_dual_bound

    from benchmarks.relaxation_floor import primal_floor

    rng = np.random.default_rng(13)
    for _ in range(3):
        D, K = 30, 5  # D >= m + K: the repair has room off V
        R = random_problem(rng, D, K)
        Ws, f = restarts(R, rng, 6)
        W = Ws[int(np.argmax(f))]
        point = StationaryPoint(read_inputs(R, W, 200), tol=1e-6,
                                budget=CertificateBudget(dense_max_dim=200),
                                rng=np.random.default_rng(0))
        sdp = sdp_dual_test(point)
        bound, info = subspace_dual_bound(point, sdp["directions"], sdp["nu"])
        F = primal_floor(point, info["V"])
        info["floor"] = None if F is None else 0.5 * F  # on the f scale, as the bound
        full = certify_global_optimum(R, W, full_sdp=True)
        assert info["floor"] is not None
        assert point.f - 1e-7 * point.f <= info["floor"] <= bound
        assert info["floor"] * point.unit <= full.upper_bound * (1 + 1e-9)
