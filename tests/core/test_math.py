"""The math against brute force and closed forms: Z-steps, W-steps, the kernel identity."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import minimize_scalar
from sklearn.metrics.pairwise import rbf_kernel

from catdask import CategorySpace, KernelCategorySpace
from catdask.core.classes import ClassIndex
from catdask.core.manifold import inv_sqrt_spd, polar_factor, random_stiefel
from catdask.core.zstep import absolute_zstep, class_multipliers, quadratic_zstep

from tests.helpers.data import make_blobs


def _classes(n_per=(5, 7, 4), shuffle_seed=None):
    codes = np.concatenate([np.full(n, k) for k, n in enumerate(n_per)])
    if shuffle_seed is not None:
        np.random.default_rng(shuffle_seed).shuffle(codes)
    return ClassIndex(codes, len(n_per))


# ----------------------------------------------------------------------------- Z-steps
@pytest.mark.parametrize("shuffle", [None, 3])
def test_quadratic_zstep_centres_each_class(shuffle):
    classes = _classes(shuffle_seed=shuffle)
    u = np.random.default_rng(0).standard_normal((2, classes.n_samples))
    zs = quadratic_zstep(u, classes, "class")
    for k in range(3):
        members = classes.codes == k
        np.testing.assert_allclose(zs.z[:, members], u[:, members] - u[:, members].mean(1, keepdims=True))
    np.testing.assert_allclose(classes.sum(zs.z), 0, atol=1e-12)
    np.testing.assert_allclose(zs.objective, 0.5 * (zs.z**2).sum(1))


def test_quadratic_zstep_global_origin_is_identity():
    classes = _classes()
    u = np.random.default_rng(1).standard_normal((1, classes.n_samples))
    np.testing.assert_array_equal(quadratic_zstep(u, classes, "global").z, u)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), eps=st.floats(1e-3, 3.0), scale=st.floats(1e-2, 1e3))
def test_absolute_zstep_is_the_exact_kkt_solution(seed, eps, scale):
    """mu_k solves g_k(mu) = 0, so Z meets the sum-to-zero constraint, and f is the dual."""
    classes = _classes((6, 3, 9), shuffle_seed=seed)
    u = scale * np.random.default_rng(seed).standard_normal((2, classes.n_samples))
    eps_abs = eps * scale
    zs = absolute_zstep(u, classes, "class", eps_abs)
    np.testing.assert_allclose(classes.sum(zs.z), 0, atol=1e-10)
    assert np.all(np.abs(zs.z) < 1)
    # The objective is min_mu sum sqrt((u + mu)^2 + eps^2), computed by brute force.
    for r in range(2):
        total = 0.0
        for k in range(3):
            uk = u[r, classes.codes == k]
            res = minimize_scalar(lambda m: np.sqrt((uk + m) ** 2 + eps_abs**2).sum(),
                                  bracket=(-uk.max(), -uk.min()), tol=1e-12)
            total += res.fun
        np.testing.assert_allclose(zs.objective[r], total, rtol=1e-9)


def test_paper_closed_form_cas_z_is_not_the_kkt_solution():
    """Why we root-find: the paper's eq. (26) violates the stationarity condition."""
    classes = _classes((5, 5))
    u = np.array([[0.0, 0.1, 0.2, 3.0, 9.0, -1, -2, 0.5, 0.7, 4.0]])
    eps = 0.5
    t = u / np.sqrt(u**2 + eps**2)
    paper_z = t - classes.expand(classes.mean(t))
    exact = absolute_zstep(u, classes, "class", eps)
    # Exact z satisfies z = (u + mu)/sqrt((u + mu)^2 + eps^2) for one mu per class:
    mu = class_multipliers(u, classes, eps)
    np.testing.assert_allclose(exact.z, (u + classes.expand(mu)) / np.sqrt((u + classes.expand(mu)) ** 2 + eps**2))
    assert np.abs(paper_z - exact.z).max() > 1e-3


# ----------------------------------------------------------------------------- W-steps
def test_polar_factor_maximises_trace():
    rng = np.random.default_rng(0)
    Y = rng.standard_normal((1, 6, 3))
    W, deficient = polar_factor(Y)
    assert not deficient[0]
    best = np.trace(W[0].T @ Y[0])
    others = random_stiefel(2000, 6, 3, rng)
    assert np.all(np.einsum("rdk,dk->r", others, Y[0]) <= best + 1e-12)


def test_random_stiefel_is_orthonormal():
    W = random_stiefel(4, 7, 3, np.random.default_rng(0))
    np.testing.assert_allclose(np.swapaxes(W, 1, 2) @ W, np.broadcast_to(np.eye(3), (4, 3, 3)), atol=1e-12)


def test_kernel_wstep_equals_paper_g_inverse_sqrt_form():
    """A = S^{-1/2} Z^T equals A = U V^T G^{-1/2}, svd(Z^T G G^{-1/2}) = U S V^T (eq. (37))."""
    X, y = make_blobs(n_per_class=8, n_features=3, seed=2)
    G = rbf_kernel(X, gamma=0.3) + 1e-3 * np.eye(len(X))  # well conditioned
    classes = ClassIndex(y, 3)
    z = np.random.default_rng(0).standard_normal(len(X))
    Z = np.zeros((len(X), 3))
    Z[np.arange(len(X)), y] = z
    lam, V = np.linalg.eigh(G)
    G_inv_sqrt = V @ np.diag(lam**-0.5) @ V.T
    U, _, Vt = np.linalg.svd(Z.T @ G @ G_inv_sqrt, full_matrices=False)
    A_paper = U @ Vt @ G_inv_sqrt
    S = Z.T @ G @ Z
    S_inv_sqrt, _ = inv_sqrt_spd(S[None])
    A_ours = S_inv_sqrt[0] @ Z.T
    np.testing.assert_allclose(A_ours, A_paper, atol=1e-9)
    np.testing.assert_allclose(A_ours @ G @ A_ours.T, np.eye(3), atol=1e-10)
    assert classes.n_classes == 3


@pytest.mark.parametrize("shuffled", [False, True])
def test_kernel_state_forms_its_axes_and_distance_like_the_explicit_gram(shuffled, monkeypatch):
    """The kernel state keeps z', G Z' and S^{-1/2}; the A, P, own projections and RKHS
    distance it forms (in blocks of samples) are those of the explicit formulas, for a
    W-step's point and for a start's arbitrary coefficients."""
    from catdask.core import problems
    from catdask.core.problems import CategoryObjective, KernelProblem
    from catdask.operators import NumpyGramOperator

    monkeypatch.setattr(problems, "AXES_BLOCK", 7)  # several blocks, a ragged last one
    X, y = make_blobs(n_per_class=10, n_features=3, seed=6)
    rng = np.random.default_rng(1)
    if shuffled:
        perm = rng.permutation(len(y))
        X, y = X[perm], y[perm]
    classes = ClassIndex(y, 3)
    from catdask.kernels import make_kernel

    op = NumpyGramOperator(X, classes, make_kernel("rbf", n_features=3, gamma=0.3))
    problem = KernelProblem(op, CategoryObjective("quadratic", "class"))
    G = rbf_kernel(X, gamma=0.3)
    N = len(y)

    def explicit_from_z(z):
        Z = np.zeros((N, 3))
        Z[np.arange(N), y] = z
        A = inv_sqrt_spd((Z.T @ G @ Z)[None])[0][0] @ Z.T
        return A, A @ G

    z = rng.standard_normal((2, N))
    state = problem.start_from_z(z)
    A0 = rng.standard_normal((2, 3, N))
    start = problem.start_from_coefficients(A0)
    for r in range(2):
        A, P = explicit_from_z(z[r])
        got_A, got_P = problem.axes(state, r)
        np.testing.assert_allclose(got_A, A, atol=1e-10)
        np.testing.assert_allclose(got_P, P, atol=1e-10)
        np.testing.assert_allclose(got_A @ G @ got_A.T, np.eye(3), atol=1e-10)
        # the Z-step read the own projections P[y_i, i]
        u = P[y, np.arange(N)]
        np.testing.assert_allclose(state.z[r], quadratic_zstep(u[None], classes, "class").z[0],
                                   atol=1e-10)
        # a start's coefficients, G-orthonormalised: (A0 G A0^T)^{-1/2} A0
        S0 = A0[r] @ G @ A0[r].T
        A_start = inv_sqrt_spd(S0[None])[0][0] @ A0[r]
        got_A, got_P = problem.axes(start, r)
        np.testing.assert_allclose(got_A, A_start, atol=1e-9)
        np.testing.assert_allclose(got_P, A_start @ G, atol=1e-9)
    # the RKHS distance tr(dA G dA^T), between the two forms and after one step
    for new, old in ((state, start), (problem.step(state), state)):
        want = [np.sqrt(np.trace((a - b) @ G @ (a - b).T)) for a, b in
                ((problem.axes(new, r)[0], problem.axes(old, r)[0]) for r in range(2))]
        np.testing.assert_allclose(problem.distance(new, old), want, rtol=1e-8, atol=1e-10)
    # a start's coefficients never broadcast into a W-step's z' (one restart would)
    with pytest.raises(ValueError, match="cannot put a 3-D source into a 2-D one"):
        problems.put_restarts(state, [0], problems.take_restarts(start, [0]))


# ----------------------------------------------------------------------------- solver
@pytest.mark.parametrize("objective", ["quadratic", "absolute"])
@pytest.mark.parametrize("origin", ["class", "global"])
def test_objective_is_monotone_and_axes_orthonormal(objective, origin):
    X, y = make_blobs(seed=3)
    cs = CategorySpace(objective, origin, n_restarts=4, random_state=0).fit(X, y)
    for r in cs.restarts_:
        h = np.array(r.history)
        assert np.all(np.diff(h) >= -1e-10 * np.abs(h[1:])), r
    W = cs.components_.T
    np.testing.assert_allclose(W.T @ W, np.eye(3), atol=1e-10)


@pytest.mark.parametrize("objective", ["quadratic", "absolute"])
@pytest.mark.parametrize("origin", ["class", "global"])
def test_kernel_objective_monotone_and_constraint(objective, origin):
    X, y = make_blobs(n_per_class=15, seed=4)
    kcs = KernelCategorySpace(gamma=0.05, objective=objective, origin=origin, n_restarts=3,
                              random_state=0).fit(X, y)
    for r in kcs.restarts_:
        h = np.array(r.history)
        assert np.all(np.diff(h) >= -1e-10 * np.abs(h[1:])), r
    G = rbf_kernel(kcs.X_fit_, gamma=0.05)
    A = kcs.dual_coef_
    np.testing.assert_allclose(A @ G @ A.T, np.eye(3), atol=1e-10)


def test_cqs_objective_matches_brute_force_scatter():
    X, y = make_blobs(seed=5)
    for origin in ("class", "global"):
        cs = CategorySpace(origin=origin, n_restarts=2, random_state=0).fit(X, y)
        x0 = X.mean(0)
        f = 0.0
        for k, w in enumerate(cs.components_):
            Xk = X[y == k] - (X[y == k].mean(0) if origin == "class" else x0)
            f += 0.5 * np.sum((Xk @ w) ** 2)
        np.testing.assert_allclose(cs.objective_, f, rtol=1e-12)


@pytest.mark.parametrize("objective", ["quadratic", "absolute"])
@pytest.mark.parametrize("origin", ["class", "global"])
def test_linear_kernel_reproduces_linear_method(objective, origin):
    X, y = make_blobs(seed=6)
    kw = dict(objective=objective, origin=origin, n_restarts=1, init="decoupled", tol=1e-10)
    lin = CategorySpace(**kw).fit(X, y)
    ker = KernelCategorySpace("linear", **kw).fit(X, y)
    np.testing.assert_allclose(ker.objective_, lin.objective_, rtol=1e-9)
    np.testing.assert_allclose(ker.transform(X), lin.transform(X), atol=1e-6 * np.abs(lin.transform(X)).max())
    # The plain iterations are the same map on the same start: the same iterates. (Anderson
    # mixes different coordinates, z for the kernel method and Y for the linear one, so its
    # iteration counts may differ: 16 against 22 here for the global origin.)
    kw["acceleration"] = "none"
    lin = CategorySpace(**kw).fit(X, y)
    ker = KernelCategorySpace("linear", **kw).fit(X, y)
    np.testing.assert_allclose(ker.objective_, lin.objective_, rtol=1e-9)
    assert abs(ker.n_iter_ - lin.n_iter_) <= 1


@pytest.mark.parametrize("origin", ["class", "global"])
def test_translation_invariance(origin):
    X, y = make_blobs(seed=7)
    a = CategorySpace(origin=origin, n_restarts=1, init="decoupled").fit(X, y)
    b = CategorySpace(origin=origin, n_restarts=1, init="decoupled").fit(X + 1e6, y)
    np.testing.assert_allclose(b.components_, a.components_, atol=1e-7)
    if origin == "global":  # coordinates measured from the centroid move with the data
        np.testing.assert_allclose(b.transform(X + 1e6), a.transform(X), atol=1e-6)


def _riemannian_ascent(R, W, steps=3000, lr=0.02):
    """Independent optimiser: Riemannian gradient ascent with a QR retraction (batched)."""
    for _ in range(steps):
        Gd = np.einsum("kde,sek->sdk", R, W)  # Euclidean gradient [R_k w_k]_k
        WtG = np.swapaxes(W, 1, 2) @ Gd
        W, r = np.linalg.qr(W + lr * (Gd - W @ (0.5 * (WtG + np.swapaxes(WtG, 1, 2)))))
        W = W * np.sign(np.diagonal(r, axis1=1, axis2=2))[:, None, :]
    return 0.5 * np.einsum("sdk,kde,sek->s", W, R, W)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_best_restart_matches_independent_optimiser(seed):
    rng = np.random.default_rng(seed)
    D, K = 4, 3
    X = rng.standard_normal((60, D)) * rng.uniform(0.3, 3, D)
    y = np.repeat(np.arange(K), 20)
    X[y == 1] = X[y == 1] @ rng.standard_normal((D, D))
    cs = CategorySpace(n_restarts=8, random_state=seed).fit(X, y)
    Rk = np.stack([(X[y == k] - X[y == k].mean(0)).T @ (X[y == k] - X[y == k].mean(0)) for k in range(K)])
    scale = np.linalg.norm(Rk, ord=2, axis=(1, 2)).max()
    best_other = _riemannian_ascent(Rk / scale, random_stiefel(25, D, K, rng)).max() * scale
    assert cs.objective_ >= best_other - 1e-6 * abs(best_other)


def test_first_order_conditions_at_convergence():
    X, y = make_blobs(seed=8)
    cs = CategorySpace(origin="class", n_restarts=2, random_state=0).fit(X, y)
    W = cs.components_.T
    Rk = [(X[y == k] - X[y == k].mean(0)).T @ (X[y == k] - X[y == k].mean(0)) for k in range(3)]
    Y = np.stack([Rk[k] @ W[:, k] for k in range(3)], axis=1)
    Lam = W.T @ Y
    assert np.abs(Lam - Lam.T).max() <= 1e-6 * np.abs(Lam).max()
    assert np.linalg.norm(Y - W @ Lam) <= 1e-6 * np.linalg.norm(Y)


@pytest.mark.parametrize("stored", [True, False])
@pytest.mark.parametrize("shuffled", [True, False])
def test_gram_operator_products_against_the_explicit_gram(stored, shuffled):
    """Every product of the in-memory Gram operator equals the one from the explicit G, in
    the caller's order, whether G is kept or recomputed and whether classes are contiguous."""
    from catdask.kernels import make_kernel
    from catdask.operators import NumpyGramOperator

    rng = np.random.default_rng(7)
    X, y = make_blobs(n_per_class=9, n_features=4, n_classes=3)
    if shuffled:
        perm = rng.permutation(len(y))
        X, y = X[perm], y[perm]
    classes = ClassIndex(y, 3)
    kern = make_kernel("rbf", n_features=4, gamma=0.2)
    G = rbf_kernel(X, X, gamma=0.2)
    op = NumpyGramOperator(X, classes, kern, max_gram_bytes=2**40 if stored else 0,
                           block_rows=7)
    assert op.stores_gram is stored
    z = rng.standard_normal((2, len(y)))
    Z = np.zeros((2, len(y), 3))  # the block matrix Z of docs/design.md §3: z_i in column y_i
    Z[:, np.arange(len(y)), y] = z
    np.testing.assert_allclose(op.class_matmul(z), G @ Z, atol=1e-12)
    V = rng.standard_normal((len(y), 2))
    np.testing.assert_allclose(op.matmul(V), G @ V, atol=1e-12)
    for k in range(3):
        idx = classes.members(k)
        np.testing.assert_array_equal(np.sort(idx), np.flatnonzero(y == k))
        np.testing.assert_allclose(op.class_gram(k), G[np.ix_(idx, idx)], atol=1e-12)
    np.testing.assert_allclose(op.columns([5, 0, 11]), G[:, [5, 0, 11]], atol=1e-12)
    np.testing.assert_allclose(op.diagonal(), np.diag(G), atol=1e-12)
    tr, fro2 = op.covariance_moments()
    assert tr == pytest.approx(np.trace(G) / len(y)) and fro2 == pytest.approx((G**2).sum() / len(y)**2)


@pytest.mark.parametrize("asymmetric", [False, True])
def test_stored_gram_product_reads_rows_only_for_a_symmetric_kernel(asymmetric):
    """With G kept, G Z reads contiguous rows G[C_k, :] (valid because G = G^T); a callable
    that is not symmetric is detected and gets the column products, still exact."""
    from catdask.kernels import Kernel
    from catdask.operators import NumpyGramOperator

    rng = np.random.default_rng(3)
    X, y = make_blobs(n_per_class=8, n_features=3, n_classes=3)
    perm = rng.permutation(len(y))
    X, y = X[perm], y[perm]
    shift = np.array([0.5, 0.0, 0.0]) if asymmetric else np.zeros(3)

    def k(A, B):  # an RBF, optionally centred off the diagonal: k(a, b) != k(b, a)
        return np.exp(-0.3 * ((A[:, None, :] - B[None, :, :] - shift) ** 2).sum(-1))

    op = NumpyGramOperator(X, ClassIndex(y, 3), Kernel(k, vectorised=True))
    assert op._symmetric is (not asymmetric)
    G = k(X, X)
    z = rng.standard_normal((3, len(y)))
    Z = np.zeros((3, len(y), 3))
    Z[:, np.arange(len(y)), y] = z
    np.testing.assert_allclose(op.class_matmul(z), G @ Z, atol=1e-12)


def test_stored_gram_class_product_in_row_slabs(monkeypatch):
    """The stored-G product sums each class's rows in slabs (64 rows here, classes of 150,
    250 and 200 rows: slabs that end inside a class and a ragged last one): equal to the
    dense G Z."""
    from catdask.operators import blocks

    rng = np.random.default_rng(11)
    N, sizes = 600, [150, 250, 200]
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    A = rng.standard_normal((N, N))
    G = A + A.T
    y = np.repeat(np.arange(3), sizes)
    z = rng.standard_normal((8, N))
    Z = np.zeros((8, N, 3))
    Z[:, np.arange(N), y] = z
    monkeypatch.setattr(blocks, "_SLAB_ENTRIES", 64 * N)
    np.testing.assert_allclose(blocks.gram_class_product_by_rows(G, offsets, z),
                               (G @ Z).transpose(0, 2, 1), rtol=1e-12, atol=1e-11)
    # the cached-block product (any row block of G, class columns in column blocks)
    rows = (100, 370)
    out = blocks.gram_class_product(None, rows, offsets, z, None, 256,
                                    cache=G[rows[0]:rows[1]])
    np.testing.assert_allclose(out, (G @ Z)[:, rows[0]:rows[1]].transpose(0, 2, 1),
                               rtol=1e-12, atol=1e-11)
    assert out.flags.c_contiguous


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_worker_memory_cache_block_product_needs_no_symmetry(dtype, monkeypatch):
    """A worker-memory cache block (``gram_rows``: G[I, :] in Fortran order) gives rows I of
    G Z through its transpose's rows: exact for a kernel with k(a, b) != k(b, a), with slabs
    ending inside classes, and for a float32 block (the product of the stored values)."""
    from catdask.kernels import Kernel
    from catdask.operators import blocks

    rng = np.random.default_rng(12)
    N, sizes = 300, [70, 140, 90]
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    X = rng.standard_normal((N, 3))
    shift = np.array([0.4, -0.2, 0.0])
    kern = Kernel(lambda A, B: np.exp(-0.3 * ((A[:, None] - B[None] - shift) ** 2).sum(-1)),
                  vectorised=True)
    G = kern(X, X)
    assert not np.allclose(G, G.T)
    y = np.repeat(np.arange(3), sizes)
    z = rng.standard_normal((8, N))
    Z = np.zeros((8, N, 3))
    Z[:, np.arange(N), y] = z
    monkeypatch.setattr(blocks, "_SLAB_ENTRIES", 64 * 100)  # slabs of 64 rows
    rows = (100, 200)
    block = blocks.gram_rows(X, rows, kern, dtype, col_block=128)
    assert block.flags.f_contiguous and block.dtype == dtype
    out = blocks.gram_class_product(X, rows, offsets, z, kern, 128, cache=block)
    Gs = block.astype(float)  # the stored values (float32: rounded once)
    np.testing.assert_allclose(Gs, G[100:200], rtol=1e-6 if dtype == "float32" else 1e-15)
    np.testing.assert_allclose(out, (Gs @ Z).transpose(0, 2, 1), rtol=1e-12, atol=1e-11)
    assert out.shape == (8, 3, 100) and out.flags.c_contiguous


@pytest.mark.parametrize("n, m, D", [(1, 1, 1), (7, 300, 3), (1000, 600, 20)])
def test_rbf_kernel_matches_scikit_learn(n, m, D, monkeypatch):
    """The slab-wise RBF equals sklearn's rbf_kernel (small slabs force many boundaries)."""
    from catdask.kernels import functions as kernels

    monkeypatch.setattr(kernels, "_RBF_SLAB_ENTRIES", 997)
    rng = np.random.default_rng(n + m)
    X, Y = rng.standard_normal((n, D)) * 3, rng.standard_normal((m, D)) * 3
    for gamma in (0.0, 0.01, 1.0, 50.0):
        np.testing.assert_allclose(kernels.rbf_kernel(X, Y, gamma), rbf_kernel(X, Y, gamma=gamma),
                                   rtol=1e-12, atol=1e-14)
    G = kernels.make_kernel("rbf", n_features=D, gamma=0.5)(Y, Y)
    np.testing.assert_allclose(np.diag(G), 1.0, rtol=0, atol=1e-13)
    assert np.all((G >= 0) & (G <= 1))
    with pytest.raises(ValueError, match="finite gamma"):
        kernels.rbf_kernel(X, Y, np.inf)


@pytest.mark.parametrize("n", [1, 63, 64, 65, 300])
def test_rbf_gram_is_the_exactly_symmetric_rbf_kernel(n):
    """The triangle-and-mirror Gram equals sklearn's rbf_kernel and is exactly symmetric."""
    from catdask.kernels import functions as kernels

    X = np.random.default_rng(n).standard_normal((n, 5)) * 2
    for gamma in (0.0, 0.1, 3.0):
        G = kernels.rbf_gram(X, gamma)
        np.testing.assert_allclose(G, rbf_kernel(X, X, gamma=gamma), rtol=1e-12, atol=1e-14)
        np.testing.assert_array_equal(G, G.T)
    kern = kernels.make_kernel("rbf", n_features=5, gamma=0.1)
    np.testing.assert_array_equal(kern.gram(X), kernels.rbf_gram(X, 0.1))
    with pytest.raises(ValueError, match="finite gamma"):
        kernels.rbf_gram(X, -1.0)


def test_the_numpy_target_makes_the_in_memory_operators_and_they_meet_the_protocols():
    """One target makes both methods' operators; every operator offers the whole documented
    interface."""
    from catdask.kernels import make_kernel
    from catdask.operators import (
        CentredGramOperator,
        DataOperator,
        GramOperator,
        NumpyDataOperator,
        NumpyGramOperator,
    )
    from catdask.estimators.target import ComputeTarget

    X, y = make_blobs(n_per_class=6, n_features=4, n_classes=3)
    classes = ClassIndex(y, 3)
    target = ComputeTarget()  # numpy in this process
    data = target.data_operator(X, classes)
    assert type(data) is NumpyDataOperator and isinstance(data, DataOperator)
    np.testing.assert_allclose(data.center, X.mean(axis=0))
    gram = target.gram_operator(X, classes, make_kernel("rbf", n_features=4, gamma=0.2),
                                max_gram_bytes=2 * 1024**3)
    assert type(gram) is NumpyGramOperator and isinstance(gram, GramOperator)
    centred = CentredGramOperator(gram)
    assert isinstance(centred, GramOperator) and not centred.matvec_without_class_block
    assert not isinstance(data, GramOperator)


def test_class_index_sorts_and_unsorts_samples():
    y = np.array([2, 0, 1, 0, 2, 1, 1])
    classes = ClassIndex(y, 3)
    X = np.arange(14.0).reshape(7, 2)
    Xs = classes.sort_rows(X)
    np.testing.assert_array_equal(classes.sorted().codes, np.sort(y))
    assert classes.sorted().order is None
    np.testing.assert_array_equal(y[classes.order], np.sort(y))
    np.testing.assert_array_equal(classes.unsort(Xs, axis=0), X)
    v = np.arange(7.0)[None]
    np.testing.assert_array_equal(classes.unsort(classes.sort(v)), v)
