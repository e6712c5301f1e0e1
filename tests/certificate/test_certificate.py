"""Tests of the global-optimality certificate (catdask/certificate/, docs/design.md section 4).

Self-contained on purpose: stationary points come from a small local maximiser (the polar
iteration W <- polar([R_k w_k]_k), docs/design.md section 2), not from the rest of catdask.
"""

from __future__ import annotations

import json
import math
import sys

import numpy as np
import pytest

from catdask.certificate import Certificate, certify_global_optimum, not_applicable
from catdask.certificate.budget import CertificateBudget
from tests.helpers.stiefel import (  # noqa: F401
    maximise,
    objective,
    polar,
    problem_and_best,
    random_problem,
    random_stiefel,
    restarts,
)

# --------------------------------------------------------------------------------------------
# Helpers


def dominant_axes_problem(rng, D, K, top):
    """R_k diagonal with a dominant entry ``top + k`` at k, in a random basis: W = the rotated
    e_1..e_K is the global optimum (f = sum_k (top + k) / 2)."""
    R = np.zeros((K, D, D))
    for k in range(K):
        d = rng.uniform(0.0, 1.0, D)
        d[k] = top + k
        R[k] = np.diag(d)
    return rotated(R, np.eye(D)[:, :K], rng)


def rotated(R, W, rng):
    """The same problem in a random orthonormal basis (nothing axis-aligned by accident)."""
    Q = random_stiefel(rng, R.shape[1], R.shape[1])
    return Q @ R @ Q.T, Q @ W


class Operator:
    """Scatter given as an operator: only ``apply(k, V) = R_k @ V`` is available."""

    def __init__(self, R):
        self._R = R
        self.n_classes, self.n_features = R.shape[0], R.shape[1]
        self.widest = 0

    def apply(self, k, V):
        self.widest = max(self.widest, V.shape[1])
        return self._R[k] @ V


# Problem with two local maxima (checked below): A = (e1, e3), f = 2; B = (e2, e1), f = 2.25.
# B is global but w_1 = e2 is not the top eigenvector of R_1, so Rapcsák fails there.
TWO_OPTIMA = np.stack([np.diag([3.0, 2.0, 0.0]), np.diag([2.5, 0.0, 1.0])])


def bounds_hold(cert, best_found, scale):
    return cert.upper_bound >= best_found - 1e-9 * scale


# --------------------------------------------------------------------------------------------
# Soundness on random problems


def test_soundness_on_random_problems():
    """Whenever it fires, nothing beats W; the upper bound is never beaten; a point that is
    beaten is never certified."""
    rng = np.random.default_rng(20240531)
    n_certified = n_beaten = 0
    for trial in range(32):
        D = int(rng.integers(3, 9))
        K = int(rng.integers(2, D + 1))
        R = random_problem(rng, D, K)
        Ws, f = restarts(R, rng, 6)
        probes = objective(R, random_stiefel(rng, D, K, n=2000))
        best_found = max(f.max(), probes.max())
        scale = max(np.linalg.eigvalsh(R[k])[-1] for k in range(K))
        # Certify the best and the worst restart (distinct points when local optima exist).
        for i in sorted({int(np.argmax(f)), int(np.argmin(f))}):
            cert = certify_global_optimum(R, Ws[i], full_sdp=trial % 4 == 0)
            assert cert.applicable
            assert cert.first_order < 1e-8
            assert cert.objective == pytest.approx(f[i], rel=1e-12)
            assert bounds_hold(cert, best_found, scale), (trial, cert)
            assert cert.gap >= 0
            slack = K * cert.tol * scale  # certified: f(W') <= f(W) + K tol scale / 2
            if cert.certified:
                n_certified += 1
                assert cert.method == "sdp-dual"
                assert cert.gap == 0.0 and cert.upper_bound == cert.objective
                assert f[i] >= best_found - slack, (trial, cert)
            if f[i] < best_found - slack:
                n_beaten += 1
                assert not cert.certified, (trial, cert)
    assert n_certified >= 20  # the SDP-dual test is not vacuous on small random problems


def test_perturbed_optimum_is_not_certified():
    """A point 1e-3 away from a certified optimum has a lower f: it must not pass."""
    rng = np.random.default_rng(3)
    R = random_problem(rng, 6, 3)
    Ws, f = restarts(R, rng, 6)
    W = Ws[int(np.argmax(f))]
    assert certify_global_optimum(R, W).certified
    W_off = polar(W + 1e-3 * rng.standard_normal(W.shape))
    cert = certify_global_optimum(R, W_off, full_sdp=False)
    assert not cert.certified
    assert cert.first_order > 1e-5 and "not a stationary point" in cert.reason
    assert cert.upper_bound >= f.max() - 1e-9


# --------------------------------------------------------------------------------------------
# Known global optima, and known non-global stationary points


def test_fires_when_axes_are_the_dominant_eigenvectors():
    """R_k with mutually orthogonal dominant eigenvectors: W = those vectors is optimal, and
    both Rapcsák and the SDP-dual test see it (docs/design.md section 4)."""
    rng = np.random.default_rng(0)
    D, K = 7, 4
    R, W = dominant_axes_problem(rng, D, K, 10.0)
    cert = certify_global_optimum(R, W)
    assert cert.certified and cert.method == "sdp-dual"
    assert cert.rapcsak and cert.rapcsak_lambda_max <= cert.tol
    assert cert.objective == pytest.approx(0.5 * sum(10.0 + k for k in range(K)))
    assert cert.gap == 0.0 and cert.bound_method == "certificate"
    assert "certified" in cert.reason


def test_sdp_certifies_where_rapcsak_fails():
    rng = np.random.default_rng(1)
    R, W = rotated(TWO_OPTIMA, np.eye(3)[:, [1, 0]], rng)
    cert = certify_global_optimum(R, W)
    assert cert.objective == pytest.approx(2.25)
    assert cert.certified and cert.method == "sdp-dual"
    assert not cert.rapcsak and cert.rapcsak_lambda_max > 0.1
    assert cert.nu is not None and len(cert.nu) == 2


def test_local_but_not_global_maximum_is_not_certified():
    rng = np.random.default_rng(2)
    R, W_local = rotated(TWO_OPTIMA, np.eye(3)[:, [0, 2]], rng)
    # W_local is a strict local maximum: the maximiser returns to it from nearby starts.
    W_back = maximise(R, polar(W_local + 0.05 * rng.standard_normal(W_local.shape)))
    assert np.linalg.norm(W_back @ W_back.T - W_local @ W_local.T) < 1e-8
    Ws, f = restarts(R, rng, 30)
    assert f.max() == pytest.approx(2.25) and objective(R, W_local) == pytest.approx(2.0)
    cert = certify_global_optimum(R, W_local)
    assert not cert.certified and cert.method is None
    assert cert.first_order < 1e-12
    assert "not certified" in cert.reason and "no nu passes" in cert.reason
    assert cert.sdp_margin < -cert.tol
    assert cert.upper_bound >= 2.25 - 1e-9  # the relaxation is tight here: bound = f(B)
    assert cert.bound_method == "sdp" and cert.upper_bound == pytest.approx(2.25, rel=1e-6)
    # The global one of the same problem is certified.
    assert certify_global_optimum(R, Ws[int(np.argmax(f))]).certified


def test_random_problem_with_two_local_optima():
    """Found by restarts (docs/design.md 3c): the lower stationary point is never certified."""
    rng = np.random.default_rng(12)
    D = K = int(rng.integers(4, 6))
    R = random_problem(rng, D, K)
    Ws, f = restarts(R, rng, 12)
    assert f.max() - f.min() > 1e-2 * f.max()  # two distinct optima (18.80 and 19.63)
    low = certify_global_optimum(R, Ws[int(np.argmin(f))])
    assert not low.certified and "not certified" in low.reason
    assert low.upper_bound >= f.max() - 1e-9
    high = certify_global_optimum(R, Ws[int(np.argmax(f))])
    assert high.upper_bound >= f.max() - 1e-9


def test_empty_nu_interval_proves_a_better_point_exists():
    """Stationary W = (e2, e3) while e1 (orthogonal to W) is better for both classes."""
    rng = np.random.default_rng(4)
    R, W = rotated(TWO_OPTIMA, np.eye(3)[:, [1, 2]], rng)
    cert = certify_global_optimum(R, W)
    assert cert.first_order < 1e-12 and not cert.certified
    assert "nu interval empty for class" in cert.reason
    assert "better W exists" in cert.reason
    assert cert.upper_bound >= 2.25 - 1e-9


# --------------------------------------------------------------------------------------------
# Upper bounds and the gap


def test_full_sdp_and_reduced_bounds_are_valid_and_ordered():
    rng = np.random.default_rng(5)
    checked = 0
    for _ in range(12):
        # K close to D: orthogonality binds, and the relaxation is sometimes not tight.
        D = int(rng.integers(6, 9))
        K = int(rng.integers(D - 2, D + 1))
        R, Ws, f, best_found = problem_and_best(rng, D, K, n_restarts=8, n_random=2000)
        W = Ws[int(np.argmax(f))]
        reduced = certify_global_optimum(R, W, full_sdp=False)
        if reduced.certified:
            continue
        sdp = certify_global_optimum(R, W, full_sdp=True)
        checked += 1
        trivial = 0.5 * sum(np.linalg.eigvalsh(R[k])[-1] for k in range(K))
        assert sdp.bound_method == "sdp" and reduced.bound_method == "reduced"
        assert best_found - 1e-9 <= sdp.upper_bound <= reduced.upper_bound * (1 + 1e-9)
        assert reduced.upper_bound <= trivial * (1 + 1e-12)
        assert sdp.gap == pytest.approx((sdp.upper_bound - sdp.objective) / sdp.objective)
        assert 0 < sdp.gap <= reduced.gap
        assert "full_sdp=False" in reduced.reason
    assert checked >= 2


def test_reduced_bound_reason_when_sdp_is_skipped(monkeypatch):
    rng = np.random.default_rng(6)
    R = random_problem(rng, 8, 6)
    W = maximise(R, random_stiefel(rng, 8, 6))
    big = certify_global_optimum(R, W, budget=CertificateBudget(max_sdp_dim=5))
    if not big.certified:
        assert big.bound_method == "reduced" and "too large" in big.reason
    monkeypatch.setitem(sys.modules, "cvxpy", None)  # import cvxpy -> ImportError
    missing = certify_global_optimum(R, W, full_sdp=True)
    if not missing.certified:
        assert missing.bound_method == "reduced" and "cvxpy" in missing.reason


# --------------------------------------------------------------------------------------------
# Operator (Lanczos) path


def _well_separated(rng, D, K, n_per_class=40):
    """Global-origin class moments of well-separated Gaussian classes (docs/design.md 3b)."""
    means = 4.0 * rng.standard_normal((K, D))
    X = np.vstack([m + rng.standard_normal((n_per_class, D)) for m in means])
    X -= X.mean(axis=0)
    return np.stack([x.T @ x for x in np.split(X, K)]), means


def test_operator_matches_dense():
    rng = np.random.default_rng(7)
    R = random_problem(rng, 40, 4)
    Ws, f = restarts(R, rng, 4)
    W = Ws[int(np.argmax(f))]
    dense = certify_global_optimum(R, W, full_sdp=False)
    op = Operator(R)
    lanczos = certify_global_optimum(op, W, full_sdp=False,
                                     budget=CertificateBudget(dense_max_dim=10), rng=0)
    assert op.widest == 1  # never materialised: Lanczos on matvecs only
    assert lanczos.certified == dense.certified
    assert lanczos.objective == pytest.approx(dense.objective, rel=1e-12)
    assert lanczos.rapcsak_lambda_max == pytest.approx(dense.rapcsak_lambda_max, abs=1e-7)
    assert lanczos.sdp_margin == pytest.approx(dense.sdp_margin, abs=1e-6)
    assert lanczos.stationarity == pytest.approx(dense.stationarity, rel=1e-6, abs=1e-15)
    assert lanczos.upper_bound >= f.max() - 1e-9
    assert lanczos.upper_bound == pytest.approx(dense.upper_bound, rel=1e-3)
    # Small operators are materialised and give the dense result exactly.
    small = certify_global_optimum(Operator(R), W, full_sdp=False)
    assert small.certified == dense.certified
    assert small.upper_bound == pytest.approx(dense.upper_bound, rel=1e-9)


def test_lanczos_path_large_dimension():
    rng = np.random.default_rng(8)
    D, K = 300, 4
    R, means = _well_separated(rng, D, K)
    W = maximise(R, polar(means.T), tol=1e-11)  # class-mean start
    op = Operator(R)
    cert = certify_global_optimum(op, W, full_sdp="auto", rng=0)  # D > dense_max_dim
    assert op.widest == 1
    assert cert.first_order < 1e-9
    assert cert.upper_bound >= cert.objective
    assert cert.gap < 1e-2
    assert cert.seconds < 20
    if not cert.certified:
        assert cert.bound_method == "reduced" and "too large" in cert.reason
    # No random point beats the bound.
    probes = objective(R, random_stiefel(rng, D, K, n=200))
    assert probes.max() <= cert.upper_bound


def test_lanczos_certifies_constructed_optimum():
    rng = np.random.default_rng(9)
    D, K = 250, 3
    R, W = dominant_axes_problem(rng, D, K, 5.0)
    cert = certify_global_optimum(Operator(R), W, rng=0)
    assert cert.certified and cert.method == "sdp-dual" and cert.rapcsak
    assert cert.objective == pytest.approx(0.5 * (5 + 6 + 7))


# --------------------------------------------------------------------------------------------
# Record, not-applicable, validation


def test_not_applicable():
    cert = not_applicable()
    assert not cert.applicable and not cert.certified and cert.method is None
    assert math.isnan(cert.objective) and math.isnan(cert.gap)
    assert "absolute-value" in cert.reason
    assert str(cert) == ("Certificate(not applicable: the absolute-value objective (CAS) is "
                         "not quadratic)")  # said once
    assert not_applicable("not attempted: too big").reason == "not attempted: too big"


@pytest.mark.parametrize("make", [
    lambda: not_applicable(),
    lambda: certify_global_optimum(TWO_OPTIMA, np.eye(3)[:, [1, 0]]),
    lambda: certify_global_optimum(TWO_OPTIMA, np.eye(3)[:, [0, 2]], full_sdp=False),
])
def test_dict_round_trip(make):
    cert = make()
    d = json.loads(json.dumps(cert.to_dict(), allow_nan=False))
    back = Certificate.from_dict(d)
    for key, value in vars(cert).items():
        other = getattr(back, key)
        if isinstance(value, float) and math.isnan(value):
            assert math.isnan(other)
        else:
            assert other == value, key
    assert isinstance(back.nu, (tuple, type(None)))


def test_repr_is_one_readable_line():
    cert = certify_global_optimum(TWO_OPTIMA, np.eye(3)[:, [1, 0]])
    text = repr(cert)
    assert "\n" not in text and text == str(cert)
    assert text.startswith("Certificate(certified=True (sdp-dual), gap<=0")
    assert "rapcsak=False" in text and "first_order=" in text
    assert "reason=" not in text  # certified: the method says it
    low_cert = certify_global_optimum(TWO_OPTIMA, np.eye(3)[:, [0, 2]])
    low = str(low_cert)
    assert "certified=False" in low and "(sdp)" in low
    # Not certified: the reason is shown (it was only in .reason, behind "gap<=...").
    assert "\n" not in low and low.endswith(f"reason={low_cert.reason!r})")


def test_input_validation():
    W = np.eye(3)[:, :2]
    with pytest.raises(ValueError, match="shape"):
        certify_global_optimum(TWO_OPTIMA, np.eye(3))
    with pytest.raises(ValueError, match="shape"):
        certify_global_optimum(TWO_OPTIMA[0], W)
    # Well-formed but off the manifold: not certified, with the reason (never a crash).
    off = certify_global_optimum(TWO_OPTIMA, 2 * W)
    assert off.applicable and not off.certified and "orthonormal" in off.reason
    with pytest.raises(ValueError, match="full_sdp"):
        certify_global_optimum(TWO_OPTIMA, W, full_sdp="yes")
    with pytest.raises(ValueError, match="tol"):
        certify_global_optimum(TWO_OPTIMA, W, tol=0)
    # Slightly off the manifold: re-orthonormalised, and the reason says so.
    W_near = np.eye(3)[:, [1, 0]] * (1 + 1e-7)
    cert = certify_global_optimum(TWO_OPTIMA, W_near)
    assert cert.certified and "re-orthonormalised" in cert.reason


def test_single_class_is_the_top_eigenvector():
    rng = np.random.default_rng(10)
    A = rng.standard_normal((6, 6))
    R = (A @ A.T)[None]
    evals, evecs = np.linalg.eigh(R[0])
    top = certify_global_optimum(R, evecs[:, -1:])
    assert top.certified and top.rapcsak
    assert top.objective == pytest.approx(0.5 * evals[-1])
    second = certify_global_optimum(R, evecs[:, -2:-1])
    assert not second.certified and "better W exists" in second.reason


# --------------------------------------------------------------------------------------------
# Real data (docs/design.md section 4, "Measured")


def _wine_moments(origin):
    datasets = pytest.importorskip("sklearn.datasets")
    X, y = datasets.load_wine(return_X_y=True)
    X = (X - X.mean(axis=0)) / X.std(axis=0)  # standardised, centred at the global mean x0
    R = []
    for c in np.unique(y):
        Xc = X[y == c]
        if origin == "class":
            Xc = Xc - Xc.mean(axis=0)
        R.append(Xc.T @ Xc)
    return np.stack(R)


@pytest.mark.parametrize("origin", ["global", "class"])
def test_wine(origin):
    R = _wine_moments(origin)
    rng = np.random.default_rng(11)
    Ws, f = restarts(R, rng, 30)
    cert = certify_global_optimum(R, Ws[int(np.argmax(f))])
    assert cert.first_order < 1e-9
    if origin == "global":
        # Measured: the global-origin optimum is certified by the SDP-dual test.
        assert cert.certified and cert.method == "sdp-dual"
    else:
        # Measured: not certified, but the full relaxation bounds it within ~1.6e-3.
        assert not cert.certified and cert.bound_method == "sdp"
        assert 1e-4 < cert.gap < 5e-3
    assert not cert.rapcsak  # vacuous in practice (docs/design.md section 4)


def test_degenerate_problems():
    one = certify_global_optimum(np.array([[[2.0]]]), np.ones((1, 1)))
    assert one.certified and one.objective == 1.0
    zero = certify_global_optimum(np.zeros((2, 4, 4)), np.eye(4)[:, :2])
    assert zero.certified and zero.objective == 0.0 and zero.gap == 0.0


# --------------------------------------------------------------------------------------------
# Never crash; verified margin; eigenvalue checks


def test_internal_failures_become_not_certified(monkeypatch):
    """LinAlgError / ArpackNoConvergence inside the test: a record naming it, no exception."""
    from scipy.sparse.linalg import ArpackNoConvergence

    from catdask.certificate import sdp_dual

    def boom(point):
        raise np.linalg.LinAlgError("Eigenvalues did not converge")

    monkeypatch.setattr("catdask.certificate.levels.sdp_dual_test", boom)
    cert = certify_global_optimum(TWO_OPTIMA, np.eye(3)[:, [1, 0]])
    assert cert.applicable and not cert.certified
    assert "LinAlgError" in cert.reason and "SDP-dual" in cert.reason
    assert cert.objective == pytest.approx(2.25)
    monkeypatch.undo()

    def no_convergence(*args, **kwargs):
        raise ArpackNoConvergence("ARPACK error -1: No convergence", np.empty(0), np.empty(0))

    monkeypatch.setattr(sdp_dual, "top_eig", no_convergence)
    cert = certify_global_optimum(TWO_OPTIMA, np.eye(3)[:, [1, 0]])
    assert not cert.certified and "ArpackNoConvergence" in cert.reason
    json.dumps(cert.to_dict(), allow_nan=False)  # still a registrable record


def test_a_bug_inside_the_test_propagates(monkeypatch):
    """Only numerical failures become "not certified": a TypeError (a bug) is raised."""
    def bug(point):
        raise TypeError("unsupported operand type(s)")

    monkeypatch.setattr("catdask.certificate.levels.sdp_dual_test", bug)
    with pytest.raises(TypeError, match="unsupported operand"):
        certify_global_optimum(TWO_OPTIMA, np.eye(3)[:, [1, 0]])


@pytest.mark.parametrize("failure", ["NumericalFailure", "TypeError"])
def test_full_sdp_failure_falls_back_to_the_cheap_bound_but_a_bug_propagates(monkeypatch,
                                                                            failure):
    from catdask.certificate import levels
    from catdask.certificate.eigen import NumericalFailure

    exc = {"NumericalFailure": NumericalFailure, "TypeError": TypeError}[failure]

    def fails(point):
        raise exc("Clarabel returned status infeasible")

    monkeypatch.setattr(levels, "full_sdp_bound", fails)
    monkeypatch.setattr(levels, "want_full_sdp", lambda *args: (True, ""))
    W = np.eye(3)[:, [0, 2]]  # a local, not global, maximiser: the upper bound is needed
    if exc is TypeError:
        with pytest.raises(TypeError):
            certify_global_optimum(TWO_OPTIMA, W)
        return
    cert = certify_global_optimum(TWO_OPTIMA, W)
    assert not cert.certified and cert.bound_method == "reduced"
    assert "the full SDP failed (NumericalFailure: Clarabel" in cert.reason


def test_no_orthonormal_point_when_d_below_k():
    cert = certify_global_optimum(np.zeros((3, 2, 2)), np.ones((2, 3)))
    assert not cert.certified and "D >= K" in cert.reason


def test_non_finite_class_matrices_are_not_certified():
    R = TWO_OPTIMA.copy()
    R[0, 0, 0] = np.inf
    cert = certify_global_optimum(R, np.eye(3)[:, [1, 0]])
    assert not cert.certified and "non-finite" in cert.reason


@pytest.mark.parametrize("magnitude", [1e-150, 1e77, 1e150])
def test_extreme_magnitudes_give_the_same_verdict(magnitude):
    """Class matrices are normalised by a power of two: no overflow, same certificate."""
    rng = np.random.default_rng(12)
    R = random_problem(rng, 6, 3)
    Ws, f = restarts(R, rng, 8)
    W = Ws[int(np.argmax(f))]
    ref = certify_global_optimum(R, W, full_sdp=False)
    big = certify_global_optimum(R * magnitude, W, full_sdp=False)
    assert big.certified == ref.certified
    assert big.objective == pytest.approx(ref.objective * magnitude, rel=1e-12)
    assert big.upper_bound == pytest.approx(ref.upper_bound * magnitude, rel=1e-9)
    assert big.sdp_margin == pytest.approx(ref.sdp_margin, abs=1e-9)


def test_verified_upper_bound_shows_the_tolerance():
    """Certified: gap rounds to 0 but the verified bound is f(W) plus a small rigorous slack;
    it is never beaten by random points."""
    rng = np.random.default_rng(13)
    for _ in range(10):
        R = random_problem(rng, 5, 3)
        Ws, f = restarts(R, rng, 6)
        cert = certify_global_optimum(R, Ws[int(np.argmax(f))], full_sdp=False)
        probes = objective(R, random_stiefel(rng, 5, 3, n=2000))
        assert cert.verified_upper_bound >= probes.max() - 1e-12
        assert cert.verified_upper_bound >= cert.objective
        if cert.certified:
            assert cert.gap == 0.0 and cert.eigen_check == "dense"
            assert 0 <= cert.verified_gap <= 3 * cert.tol * np.abs(R).sum() / cert.objective
            d = cert.to_dict()
            assert d["verified_gap"] == cert.verified_gap
        else:
            assert cert.verified_upper_bound == cert.upper_bound
            assert cert.verified_gap == pytest.approx(cert.gap)


def test_old_records_without_new_fields_still_load():
    d = certify_global_optimum(TWO_OPTIMA, np.eye(3)[:, [1, 0]]).to_dict()
    for key in ("verified_upper_bound", "verified_gap", "eigen_check"):
        d.pop(key)
    back = Certificate.from_dict(d)
    assert back.certified and math.isnan(back.verified_upper_bound) and back.eigen_check is None


def test_cholesky_proves_the_bound_above_the_dense_limit(monkeypatch):
    """Above verify_dense_max_dim the Lanczos estimate is proved by a Cholesky factorisation;
    a wrong (too low) estimate is caught and dense eigh decides."""
    from catdask.certificate import eigen

    budget = CertificateBudget(verify_dense_max_dim=10)
    rng = np.random.default_rng(14)
    A = rng.standard_normal((60, 60))
    A = A + A.T
    top = np.linalg.eigvalsh(A)[-1]
    upper, v, check = eigen.verified_top(60, matrix=A, v0=rng.standard_normal(60),
                                         budget=budget)
    assert check == "lanczos+cholesky" and top <= upper <= top + 1e-8 * abs(top)

    second = np.linalg.eigh(A)[1][:, -2]
    monkeypatch.setattr(eigen, "_lanczos_top", lambda *args: second)  # converged to the wrong one
    upper, _, check = eigen.verified_top(60, matrix=A, budget=budget)
    assert check == "dense" and upper >= top


def test_large_dense_problem_is_verified_without_trusting_lanczos():
    budget = CertificateBudget(verify_dense_max_dim=50, dense_max_dim=40)
    rng = np.random.default_rng(9)
    D, K = 120, 3
    R, W = dominant_axes_problem(rng, D, K, 5.0)
    cert = certify_global_optimum(R, W, budget=budget, rng=0)
    assert cert.certified and cert.eigen_check == "lanczos+cholesky"
    lanczos = certify_global_optimum(Operator(R), W, budget=budget, rng=0)
    assert lanczos.certified and lanczos.eigen_check == "lanczos"


# --------------------------------------------------------------------------------------------
# Rank-deficient kernel data fit with certify on (issue: certificates never crash a fit)


def _rank_deficient_cases():
    rng = np.random.default_rng(15)
    y = np.repeat([0, 1, 2], 20)
    X = rng.standard_normal((60, 5))
    same = X.copy()
    same[y == 0] = same[0]  # a class of identical rows
    binary = (rng.random((60, 6)) > 0.5).astype(float)
    binary[:, 2] = 1.0  # and a constant feature
    y4 = np.repeat([0, 1, 2, 3], 15)
    return [
        ("identical-class-rbf", same, y, dict(origin="class")),
        ("identical-class-linear", same, y, dict(origin="class", kernel="linear")),
        ("binary-constant", binary, y, dict(origin="class")),
        ("linear-kernel-D<K", rng.standard_normal((60, 2)), y4, dict(kernel="linear")),
        # All features constant is refused before fitting (tests/estimators/test_bad_input.py).
    ]


@pytest.mark.parametrize("name,X,y,params", _rank_deficient_cases(),
                         ids=[c[0] for c in _rank_deficient_cases()])
def test_rank_deficient_kernel_data_fit_with_certify(name, X, y, params):
    import warnings

    from catdask import KernelCategorySpace

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = KernelCategorySpace(n_restarts=2, random_state=0, **params).fit(X, y)
    cert = model.certificate_
    assert cert.applicable and cert.reason
    if not cert.certified:
        assert cert.reason.startswith("not certified")
    if name in ("identical-class-rbf", "linear-kernel-D<K"):
        # Measured: degenerate axes or D < K; the reason names what the test could not do.
        assert not cert.certified
        assert "orthonormal" in cert.reason or "D >= K" in cert.reason
    json.dumps(cert.to_dict(), allow_nan=False)
