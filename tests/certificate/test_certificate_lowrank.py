"""The low-rank kernel certificate (docs/design.md §4c) against the dense one and brute force.

Small problems, so the exact feature map (eigenvectors of the Gram matrix) and many restarts
of the plain CQS ascent are cheap references: every bound must lie above the best restart, a
planted local maximum must never be certified, and where both tests apply the low-rank one
must agree with the dense one. Each check runs on the numpy operator and on the Dask one.
"""

from __future__ import annotations

import numpy as np
import pytest

from catdask import KernelCategorySpace
from catdask.certificate import certify_global_optimum
from catdask.certificate.budget import CertificateBudget, budget_scope
from catdask.certificate.complement import class_block_leftover
from catdask.certificate.kernel_lowrank import (
    _delta,
    axis_leakage,
    certify_kernel_lowrank,
    lifted_dual_bound,
    sqrt_lift_bound,
)
from catdask.core.classes import ClassIndex
from catdask.kernels import make_kernel
from catdask.operators import CentredGramOperator, NumpyGramOperator

from tests.helpers.data import make_blobs

BACKENDS = ["numpy", "dask"]


def gram_operator(X, y, kernel, origin, backend):
    classes = ClassIndex(y, int(y.max()) + 1)
    if backend == "dask":
        pytest.importorskip("dask")
        from catdask.operators import DaskGramOperator

        base = DaskGramOperator(X, classes, kernel, cache="recompute", block_rows=16)
    else:
        base = NumpyGramOperator(X, classes, kernel)
    return CentredGramOperator(base) if origin == "global" else base


def exact_features(op, y, origin):
    """Rows F_i with F F^T = G^ (the operator's Gram), and the class matrices R_k on them."""
    G = op.matmul(np.eye(len(y)))
    lam, V = np.linalg.eigh(0.5 * (G + G.T))
    keep = lam > 1e-12 * lam[-1]
    F = V[:, keep] * np.sqrt(lam[keep])
    R = []
    for k in range(int(y.max()) + 1):
        Fk = F[y == k]
        if origin == "class":
            Fk = Fk - Fk.mean(axis=0)
        R.append(Fk.T @ Fk)
    return F, np.stack(R)


def leftover_case(origin, backend):
    """A small blobs operator, its exact features F and class matrices R, an orthonormal span
    S of 3 random axes and 5 feature rows, and L = F S: the class-block leftover's inputs."""
    X, y = make_blobs(n_per_class=14, n_features=3, n_classes=3, seed=4, spread=1.0)
    op = gram_operator(X, y, make_kernel("rbf", n_features=3, gamma=0.5), origin, backend)
    F, R = exact_features(op, y, origin)
    W = np.linalg.qr(np.random.default_rng(2).standard_normal((F.shape[1], 3)))[0]
    S = np.linalg.qr(np.column_stack([W, F[:5].T]))[0]
    return op, y, F, R, S, F @ S


def polar(Y):
    U, _, Vt = np.linalg.svd(Y, full_matrices=False)
    return U @ Vt


def ascend(R, W, iters=3000):
    """The CQS iteration on explicit class matrices (W <- polar [R_k w_k])."""
    for _ in range(iters):
        Wn = polar(np.column_stack([R[k] @ W[:, k] for k in range(len(R))]))
        if np.linalg.norm(Wn - W) < 1e-12:
            return Wn
        W = Wn
    return W


def objective(R, W):
    return 0.5 * sum(W[:, k] @ R[k] @ W[:, k] for k in range(len(R)))


def best_of_restarts(R, K, n=100, seed=0):
    rng = np.random.default_rng(seed)
    best, W_best = -np.inf, None
    for _ in range(n):
        W = ascend(R, np.linalg.qr(rng.standard_normal((R.shape[1], K)))[0])
        if objective(R, W) > best:
            best, W_best = objective(R, W), W
    return best, W_best


def coefficients(F, W):
    """A with ``w_k = sum_i A_ki F_i`` (W in the row space of F)."""
    return np.linalg.lstsq(F.T, W, rcond=None)[0].T


def test_delta_solves_its_equation():
    for nu, eps, rho in [(2.0, 1e-6, 3.0), (1e-9, 1e-3, 5.0), (-1.0, 0.0, 1.0), (0.5, 0.5, 0.0)]:
        d = _delta(nu, eps, rho)
        assert d >= max(0.0, eps - nu) - 1e-15
        if rho * eps > 0:
            assert d * (nu + d - eps) == pytest.approx(rho * eps, rel=1e-12)


def two_optima_data(n=20, seed=0):
    """Linear-kernel data whose class scatters are TWO_OPTIMA of test_certificate, rotated:
    a global maximum f = 2.25 and a strict local one f = 2.0."""
    rng = np.random.default_rng(seed)
    Q = np.linalg.qr(rng.standard_normal((3, 3)))[0]
    X = []
    for k, d in enumerate(([3.0, 2.0, 0.0], [2.5, 0.0, 1.0])):
        Z = rng.standard_normal((n, 3))
        Z -= Z.mean(axis=0)
        Z = np.linalg.qr(Z)[0]  # centred (the mean is in the span removed above), Z^T Z = I
        Z -= Z.mean(axis=0)
        Z = Z @ np.linalg.inv(np.linalg.cholesky(Z.T @ Z).T)
        X.append(Z * np.sqrt(d) @ Q.T + 3.0 * rng.standard_normal(3))
    y = np.repeat([0, 1], n)
    return np.vstack(X), y, Q


def wide_rbf_optima(backend, n=100):
    """The two-optima data through a wide RBF kernel (13 Gram dimensions; a strict local
    maximum at 0.889 of the global one): the operator, exact features F, its class matrices
    R, the optima of ``n`` ascents from random starts and their objective values."""
    X, y, _ = two_optima_data()
    op = gram_operator(X, y, make_kernel("rbf", n_features=3, gamma=0.001), "class", backend)
    F, R = exact_features(op, y, "class")
    rng = np.random.default_rng(0)
    optima = [ascend(R, np.linalg.qr(rng.standard_normal((R.shape[1], 2)))[0])
              for _ in range(n)]
    return op, F, R, optima, np.array([objective(R, W) for W in optima])


@pytest.mark.parametrize("backend", BACKENDS)
def test_planted_local_maximum_is_refuted_and_global_one_certified(backend):
    X, y, Q = two_optima_data()
    op = gram_operator(X, y, make_kernel("linear", n_features=3), "class", backend)
    F, R = exact_features(op, y, "class")
    best, W_best = best_of_restarts(R, 2, n=30)
    assert best == pytest.approx(2.25, rel=1e-9)
    W_local = ascend(R, polar(np.linalg.lstsq(F, X @ Q[:, [0, 2]], rcond=None)[0]))
    assert objective(R, W_local) == pytest.approx(2.0, rel=1e-9)
    local = certify_kernel_lowrank(op, "class", coefficients(F, W_local))
    dense_local = certify_global_optimum(R, W_local)
    assert not local.certified and not dense_local.certified
    assert local.verified_upper_bound >= best - 1e-9
    glob = certify_kernel_lowrank(op, "class", coefficients(F, W_best))
    assert glob.certified and certify_global_optimum(R, W_best).certified
    assert glob.objective == pytest.approx(2.25, rel=1e-9)
    assert glob.verified_upper_bound >= best - 1e-12


@pytest.mark.parametrize("backend", BACKENDS)
def test_planted_local_maximum_of_a_kernel_with_leftover_is_never_certified(backend):
    """The two-optima data through a wide RBF kernel (13 Gram dimensions; a strict local
    maximum at 0.889 of the global one): at every rank, with the class-block pass and the
    Schur lift (Lemmas 1c, 2'') running on a real leftover, the local maximum is refuted like
    the dense test refutes it, and every bound lies above the best of 100 restarts."""
    op, F, R, optima, values = wide_rbf_optima(backend)
    best = values.max()
    local = optima[int(np.argmin(values))]
    assert objective(R, local) < 0.9 * best  # the planted local maximum was reached
    assert not certify_global_optimum(R, local).certified  # the dense test refutes it
    for rank in (1, 2, 4, 8):
        cert, res = certify_kernel_lowrank(op, "class", coefficients(F, local), details=True,
                                           budget=CertificateBudget(lowrank_max_rank=rank))
        assert not cert.certified
        assert cert.verified_upper_bound >= best - 1e-9
        if rank == 1:  # the compressed test alone would certify: only the lift refutes
            assert res.compressed.certified and res.frobenius and res.norm == "spectral"
    glob = certify_kernel_lowrank(op, "class", coefficients(F, optima[int(np.argmax(values))]))
    assert glob.verified_upper_bound >= best - 1e-9


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_dense_test_decides_where_the_lift_keeps_the_gap_open(backend):
    """Above dense_max_samples and up to exact_factor_max_rank samples, a gap that
    the low-rank test's lift leaves open (its compressed relaxation tight) goes to the test
    through the exact factor: the planted local maximum stays refuted, the global one is
    certified, and neither outcome is better than the dense test's own; above
    exact_factor_max_rank the low-rank outcome stands."""
    import dataclasses

    from catdask.certificate import kernel as kernel_module

    op, F, R, optima, values = wide_rbf_optima(backend)
    best = values.max()
    # One landmark: the compressed test certifies, only the lift keeps a gap (see above).
    coarse = CertificateBudget(lowrank_max_rank=1, probe_rank=0, dense_max_samples=4)
    for W in (optima[int(np.argmin(values))], optima[int(np.argmax(values))]):
        A = coefficients(F, W)
        low, res = certify_kernel_lowrank(op, "class", A, details=True, budget=coarse)
        assert not low.certified and res.compressed.certified
        dense = certify_global_optimum(R, W)
        cert = kernel_module.certify_kernel_axes(op, op.classes, "class", A, budget=coarse)
        assert "the exact Gram factor decided" in cert.reason
        assert cert.certified == dense.certified == (W is optima[int(np.argmax(values))])
        assert cert.gap == pytest.approx(dense.gap, rel=1e-6, abs=1e-9) and cert.gap < low.gap
        assert cert.verified_upper_bound >= best - 1e-9
    kept = kernel_module.certify_kernel_axes(
        op, op.classes, "class", A, budget=dataclasses.replace(coarse, exact_factor_max_rank=4))
    assert not kept.certified and "exact Gram factor" not in kept.reason


def test_only_a_gap_the_lift_leaves_goes_to_the_dense_test():
    from types import SimpleNamespace as NS

    from catdask.certificate.kernel import lift_keeps_gap_open

    def case(gap, compressed_certified, compressed_gap):
        cert = NS(applicable=True, gap=gap)
        return cert, NS(compressed=NS(certified=compressed_certified, gap=compressed_gap))

    assert lift_keeps_gap_open(*case(2e-2, True, 0.0))  # high-rank blobs, class origin
    assert lift_keeps_gap_open(*case(2e-3, False, 4e-4))
    assert not lift_keeps_gap_open(*case(5.1e-3, False, 5.1e-3))  # the relaxation's own gap
    assert not lift_keeps_gap_open(*case(1e-3, False, 6e-4))
    assert not lift_keeps_gap_open(case(1e-3, True, 0.0)[0], None)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("origin", ["class", "global"])
def test_bounds_at_low_rank_lie_above_the_best_of_100_restarts(origin, backend):
    X, y = make_blobs(n_per_class=12, n_features=3, n_classes=3, seed=3, spread=1.0)
    op = gram_operator(X, y, make_kernel("rbf", n_features=3, gamma=0.5), origin, backend)
    F, R = exact_features(op, y, origin)
    best, W_best = best_of_restarts(R, 3)
    A = coefficients(F, W_best)
    # At a random point S = span(W, landmarks) misses the optimum: the compressed problem's
    # maximum is below it and only the lifts (Lemmas 2, 3) keep the bounds valid.
    W_rand = np.linalg.qr(np.random.default_rng(1).standard_normal((F.shape[1], 3)))[0]
    passes = 0
    for W in (W_best, W_rand):
        for rank in (2, 6, 15):  # large leftovers: both lifts carry real weight
            cert, res = certify_kernel_lowrank(op, origin, coefficients(F, W), details=True,
                                               frobenius=rank != 2,
                                               budget=CertificateBudget(lowrank_max_rank=rank))
            passes += res.frobenius
            assert res.residual > 0 and not (W is W_rand and cert.certified)
            assert cert.objective == pytest.approx(objective(R, W), rel=1e-8)
            assert res.lifted_dual >= best - 1e-9 and res.lifted_sqrt >= best - 1e-9
            assert cert.verified_upper_bound >= best - 1e-9
    assert passes  # the class-block pass (Lemmas 1b, 1c, 2'') ran and was checked
    # A full-rank subspace: the same verdict as the dense test on the exact features.
    full = certify_kernel_lowrank(op, origin, A)
    dense = certify_global_optimum(R, W_best)
    assert full.certified == dense.certified
    assert full.verified_upper_bound >= best - 1e-9


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_point_that_is_not_stationary_is_never_certified(backend):
    X, y = make_blobs(n_per_class=15, n_features=4, n_classes=3, seed=1)
    X = (X - X.mean(0)) / X.std(0)
    kw = dict(gamma=0.2, origin="class", n_restarts=1, init="random", random_state=4)
    loose = KernelCategorySpace(tol=0.5, max_iter=2, acceleration="none", certify=False, **kw)
    loose.fit(X, y)
    good = KernelCategorySpace(n_restarts=10, certify=False, gamma=0.2, origin="class",
                               random_state=0).fit(X, y)
    assert loose.objective_ < good.objective_ * (1 - 1e-4)
    op = gram_operator(X, y, loose.kernel_, "class", backend)
    cert = certify_kernel_lowrank(op, "class", loose.dual_coef_)
    assert not cert.certified
    assert cert.objective == pytest.approx(loose.objective_, rel=1e-8)
    assert cert.verified_upper_bound >= good.objective_ - 1e-9


def _explicit_two_classes(rng, N, D, *, smallest_scale):
    """Explicit features (N, D) of decaying scale, two equal classes, and their class matrices
    R_k = X_k^T X_k (the linear problem whose kernel form the lifts bound)."""
    X = rng.standard_normal((N, D)) * np.linspace(2.0, smallest_scale, D)
    y = np.repeat([0, 1], N // 2)
    return X, y, np.stack([X[y == k].T @ X[y == k] for k in range(2)])


def test_lifts_are_valid_for_any_nu():
    """Lemma 2 holds for every nu and Lemma 3 for every compressed bound: on explicit features
    split into a random S (containing W) and its complement, against the best restart."""
    rng = np.random.default_rng(5)
    N, D, K = 30, 8, 2
    X, y, R = _explicit_two_classes(rng, N, D, smallest_scale=0.2)
    best, W_best = best_of_restarts(R, K, n=50)
    for W in (W_best, np.linalg.qr(rng.standard_normal((D, K)))[0]):
        S = np.linalg.qr(np.column_stack([W, rng.standard_normal((D, 2))]))[0]  # dim S = 4
        P_perp = np.eye(D) - S @ S.T
        R_S = np.stack([S.T @ R[k] @ S for k in range(K)])
        W_S = S.T @ W
        eps = np.array([np.trace(P_perp @ R[k] @ P_perp) for k in range(K)])
        # gamma_k^2 = ||(I - P) R_k u_k||^2 exactly (Lemma 2'), and a generous over-estimate.
        gamma2 = np.array([np.sum((P_perp @ R[k] @ W[:, k]) ** 2) for k in range(K)])
        cert = certify_global_optimum(R_S, W_S)
        nus = [np.zeros(K), np.array([0.3, 7.0]), -np.ones(K)]
        nus += [] if cert.nu is None else [np.asarray(cert.nu)]
        for nu in nus:
            assert lifted_dual_bound(R_S, W_S, nu, eps)[0] >= best - 1e-9
            for g2 in (gamma2, 10 * gamma2 + 1e-3):
                assert lifted_dual_bound(R_S, W_S, nu, eps, gamma2=g2)[0] >= best - 1e-9
        assert sqrt_lift_bound(cert.verified_upper_bound, eps) >= best - 1e-9
    # The optimum of a subspace that misses the global one, certified there: the compressed
    # bound is below the global maximum, and only the lifts make up the difference.
    S = np.linalg.qr(rng.standard_normal((D, 4)))[0]
    P_perp = np.eye(D) - S @ S.T
    R_S = np.stack([S.T @ R[k] @ S for k in range(K)])
    best_S, W_S = best_of_restarts(R_S, K, n=50)
    cert = certify_global_optimum(R_S, W_S)
    assert cert.certified and cert.verified_upper_bound < best - 1e-3
    eps = np.array([np.trace(P_perp @ R[k] @ P_perp) for k in range(K)])
    gamma2 = np.array([np.sum((P_perp @ R[k] @ S @ W_S[:, k]) ** 2) for k in range(K)])
    nu = np.asarray(cert.nu)
    assert lifted_dual_bound(R_S, W_S, nu, eps)[0] >= best - 1e-9
    assert lifted_dual_bound(R_S, W_S, nu, eps, gamma2=gamma2)[0] >= best - 1e-9
    assert sqrt_lift_bound(cert.verified_upper_bound, eps) >= best - 1e-9


def test_schur_lift_is_valid_for_any_nu_and_tighter_at_the_optimum():
    """Lemma 2'' with the exact cross term C_k C_k^T, on explicit features split into a subspace
    S containing W and its complement: above the best restart for every nu and every S, and at
    the optimum with a good S below Lemma 2's bound."""
    rng = np.random.default_rng(7)
    N, D, K = 40, 9, 2
    X, y, R = _explicit_two_classes(rng, N, D, smallest_scale=0.3)
    best, W_best = best_of_restarts(R, K, n=100)
    tighter = 0
    for W in (W_best, np.linalg.qr(rng.standard_normal((D, K)))[0]):
        for extra in (1, 3, 5):
            S = np.linalg.qr(np.column_stack([W, rng.standard_normal((D, extra))]))[0]
            P_perp = np.eye(D) - S @ S.T
            R_S = np.stack([S.T @ R[k] @ S for k in range(K)])
            W_S = S.T @ W
            eps = np.array([np.linalg.eigvalsh(P_perp @ R[k] @ P_perp)[-1] for k in range(K)])
            cross = [((S.T @ R[k] @ P_perp) @ (S.T @ R[k] @ P_perp).T, 0.0) for k in range(K)]
            cert = certify_global_optimum(R_S, W_S)
            nus = [np.zeros(K), np.array([0.3, 7.0]), -np.ones(K)]
            nus += [] if cert.nu is None else [np.asarray(cert.nu)]
            for nu in nus:
                plain = lifted_dual_bound(R_S, W_S, nu, eps)[0]
                schur = lifted_dual_bound(R_S, W_S, nu, eps, cross=cross)[0]
                assert schur >= best - 1e-9 and schur <= plain + 1e-9
                tighter += W is W_best and schur < plain - 1e-6 * best
    assert tighter
    # Subspaces that miss the global optimum, their own optimum certified there: the
    # compressed bound is below max f, and only the cross term makes up the difference.
    for seed in range(3):
        S = np.linalg.qr(np.random.default_rng(seed).standard_normal((D, 4)))[0]
        P_perp = np.eye(D) - S @ S.T
        R_S = np.stack([S.T @ R[k] @ S for k in range(K)])
        best_S, W_S = best_of_restarts(R_S, K, n=30)
        cert = certify_global_optimum(R_S, W_S)
        assert cert.certified and cert.verified_upper_bound < best - 1e-3
        eps = np.array([np.linalg.eigvalsh(P_perp @ R[k] @ P_perp)[-1] for k in range(K)])
        cross = [((S.T @ R[k] @ P_perp) @ (S.T @ R[k] @ P_perp).T, 0.0) for k in range(K)]
        assert lifted_dual_bound(R_S, W_S, np.asarray(cert.nu), eps, cross=cross)[0] >= best - 1e-9


def test_axis_leakage_matches_explicit_features():
    X, y = make_blobs(n_per_class=10, n_features=3, n_classes=3, seed=2, spread=1.0)
    for origin in ("class", "global"):
        op = gram_operator(X, y, make_kernel("rbf", n_features=3, gamma=0.5), origin, "numpy")
        F, R = exact_features(op, y, origin)
        W = np.linalg.qr(np.random.default_rng(0).standard_normal((F.shape[1], 3)))[0]
        S = np.linalg.qr(np.column_stack([W, F[:4].T]))[0]
        L = F @ S  # coordinates of P psi_i in the basis S
        members = [np.flatnonzero(y == k) for k in range(3)]
        got = axis_leakage(op, L, S.T @ W, members, origin)
        P_perp = np.eye(F.shape[1]) - S @ S.T
        want = [np.sum((P_perp @ R[k] @ W[:, k]) ** 2) for k in range(3)]
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-10)
        assert np.all(got >= np.asarray(want) - 1e-14)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("origin", ["class", "global"])
def test_complement_norms_bound_the_explicit_complement(origin, backend):
    """Lemmas 1b and 1c against ``D_k = (I - P) R_k (I - P)`` on the exact features: both are
    upper bounds on ``||D_k||``, the spectral one equal to it up to rounding, and below the
    Frobenius one and the trace."""
    op, y, F, R, S, L = leftover_case(origin, backend)
    members = [np.flatnonzero(y == k) for k in range(3)]
    frob, spec, cross = class_block_leftover(op, L, members, origin,
                                             budget=CertificateBudget(class_block_columns=5))
    P_perp = np.eye(F.shape[1]) - S @ S.T
    for k in range(3):
        D_k = P_perp @ R[k] @ P_perp
        norm = np.linalg.eigvalsh(D_k)[-1]
        trace = np.sum(np.clip(np.diag(op.matmul(np.eye(len(y)))) - np.sum(L**2, 1), 0, None)[
            members[k]])
        assert norm > 1e-3  # a real leftover
        assert norm - 1e-12 <= spec[k] <= norm * (1 + 1e-8) + 1e-12
        assert spec[k] <= frob[k] + 1e-12 and frob[k] <= trace + 1e-9
        assert frob[k] >= np.linalg.norm(D_k) - 1e-12
        # The cross term C_k C_k^T in S's coordinates (Lemma 2''), its allowance covering it.
        C_k = S.T @ R[k] @ P_perp
        Z, a = cross[k]
        np.testing.assert_allclose(Z, C_k @ C_k.T, atol=1e-10 * np.abs(Z).max())
        assert np.linalg.eigvalsh(Z + a * np.eye(len(Z)) - C_k @ C_k.T)[0] >= -1e-13
    # A class block above the memory cap gets the Frobenius bound only.
    frob2, spec2, cross2 = class_block_leftover(
        op, L, members, origin, budget=CertificateBudget(spectral_max_class_bytes=8))
    np.testing.assert_allclose(frob2, frob, rtol=1e-12)
    assert np.all(np.isinf(spec2)) and all(c is None for c in cross2)


def test_estimator_uses_the_low_rank_test_above_the_cap():
    X, y = make_blobs(n_per_class=15, n_features=4, n_classes=3, seed=2)
    kw = dict(gamma=0.1, n_restarts=2, random_state=0)
    dense = KernelCategorySpace(**kw).fit(X, y)
    with budget_scope(CertificateBudget(dense_max_samples=20)):  # the fit's certifier keeps it
        low = KernelCategorySpace(**kw).fit(X, y)
    assert "low-rank test" in low.certificate_.reason
    assert low.certificate_.certified == dense.certificate_.certified
    assert low.objective_ == pytest.approx(dense.objective_, rel=1e-12)


def test_in_place_symmetrise_and_centred_class_gram_are_bit_identical():
    """The pass's memory-lean forms compute every entry as before: ``(M_ij + M_ji) / 2`` by
    tile pairs, and the centred class block ``G_kk - (g_i + g_j) / N + 1^T G 1 / N^2`` by row
    slabs (without writing into a stored G)."""
    from catdask.certificate.complement import _symmetrise
    from catdask.operators import centred

    rng = np.random.default_rng(0)
    for n in (1, 5, 8, 13):
        M = rng.standard_normal((n, n))
        want = M + M.T.copy()
        want *= 0.5
        np.testing.assert_array_equal(_symmetrise(M, tile=4), want)
    X, y = make_blobs(n_per_class=30, n_features=3, n_classes=3, seed=1)
    kernel = make_kernel("rbf", n_features=3, gamma=0.5)
    for stored in (True, False):
        order = np.argsort(y, kind="stable")
        base = NumpyGramOperator(X[order], ClassIndex(y[order], 3), kernel,
                                 max_gram_bytes=2**30 if stored else 0)
        before = base.class_gram(1).copy()
        op = CentredGramOperator(base)
        N, g = op.n_samples, op.row_sums[op.classes.members(1)]
        want = before - (g[:, None] + g[None, :]) / N + op.total / N**2
        old = centred._SLAB_ENTRIES
        try:
            centred._SLAB_ENTRIES = 7 * g.size  # several slabs
            np.testing.assert_array_equal(op.class_gram(1), want)
        finally:
            centred._SLAB_ENTRIES = old
        np.testing.assert_array_equal(base.class_gram(1), before)


@pytest.mark.parametrize("origin", ["class", "global"])
def test_fit_hands_its_projections_to_the_test(monkeypatch, origin):
    """The estimator's low-rank test takes the fit's ``P = A G`` (a KernelPoint) instead of a
    product with G, and reaches what the test reaches on A alone: the same verdict and bound
    (the projections equal ``G A^T`` to rounding)."""
    from catdask.certificate import subspace_factor
    from catdask.certificate.certifiers import CERTIFIER_SEED
    from catdask.certificate.kernel import certify_kernel_axes

    budget = CertificateBudget(dense_max_samples=20)
    X, y = make_blobs(n_per_class=40, n_features=4, n_classes=3, seed=3)
    products = []
    real = subspace_factor.SubspaceFactor.__init__

    def spy(self, operator, A, capacity, projections=None):
        products.append(projections is None)
        real(self, operator, A, capacity, projections)

    monkeypatch.setattr(subspace_factor.SubspaceFactor, "__init__", spy)
    with budget_scope(budget):
        est = KernelCategorySpace(origin=origin, gamma=0.1, n_restarts=2, random_state=0,
                                  certify_at="fit").fit(X, y)
    assert products == [False]  # the fit's projections, no product with G
    order = np.argsort(y, kind="stable")
    op = gram_operator(X[order], y[order], est.kernel_, origin, "numpy")
    alone = certify_kernel_axes(op, op.classes, origin, est.dual_coef_[:, order],
                                rng=CERTIFIER_SEED, budget=budget)
    assert products == [False, True]
    cert = est.certificate_
    assert "low-rank test" in cert.reason and cert.certified == alone.certified
    assert cert.verified_upper_bound == pytest.approx(alone.verified_upper_bound, rel=1e-9)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("origin", ["class", "global"])
def test_class_blocks_too_large_to_hold_come_in_row_slabs(monkeypatch, origin, backend):
    """A class block above the memory caps is read as slabs of its own rows
    (``class_gram_rows``: ``n_k^2`` entries) and gives the Frobenius bound the ``N x block``
    columns gave, to rounding."""
    X, y = make_blobs(n_per_class=25, n_features=3, n_classes=3, seed=5, spread=1.0)
    op = gram_operator(X, y, make_kernel("rbf", n_features=3, gamma=0.5), origin, backend)
    L = np.random.default_rng(0).standard_normal((len(y), 6)) * 0.1
    members = [np.flatnonzero(y == k) for k in range(3)]
    budget = CertificateBudget(class_gram_max_bytes=0, slab_entries=7 * 25)  # 7 rows a slab
    asked = []
    real = op.class_gram_rows
    monkeypatch.setattr(op, "class_gram_rows", lambda k, a, b: asked.append(b - a) or real(k, a, b))
    slabs = class_block_leftover(op, L, members, origin, spectral=False, budget=budget)[0]
    assert asked and max(asked) == 7 and sum(asked) == len(y)
    monkeypatch.setattr(op, "class_gram_rows", None)  # as an operator without slabs
    columns = class_block_leftover(op, L, members, origin, spectral=False, budget=(
        CertificateBudget(class_gram_max_bytes=0, class_block_columns=4)))[0]
    np.testing.assert_allclose(slabs, columns, rtol=1e-12)
