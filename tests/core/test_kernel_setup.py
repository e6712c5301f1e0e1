"""The kernel fit's set-up work: the centring moments from the symmetric tiles, the class-block
product and the lockstep Lanczos of the decoupled start, and the phase breakdown
(docs/design.md §3, §3b, §3c). numpy and Dask operators must agree."""

import warnings

import numpy as np
import pytest

from catdask import KernelCategorySpace
from catdask.core.classes import ClassIndex
from catdask.kernels import make_kernel
from catdask.operators import CentredGramOperator, NumpyGramOperator
from catdask.operators.gram_tiles import class_diagonal_tile_pairs, gram_symmetric_moments
from catdask.core.class_eigen import class_block_top_eigenpairs
from tests.helpers.data import make_blobs


def _data(n_per_class=40, seed=0):
    X, y = make_blobs(n_per_class=n_per_class, n_features=4, n_classes=3, seed=seed)
    perm = np.random.default_rng(seed).permutation(len(y))
    return X[perm], y[perm]


def _block_diagonal(G, y):
    return np.where(y[:, None] == y[None, :], G, 0.0)


@pytest.mark.parametrize("tile", [7, 32, 500])
def test_symmetric_moments_match_the_dense_gram(tile):
    X, y = _data(seed=1)
    kern = make_kernel("rbf", n_features=4, gamma=0.3)
    G = kern(X, X)
    op = NumpyGramOperator(X, ClassIndex(y, 3), kern, max_gram_bytes=0, tile_rows=tile)
    assert op.uses_tiles
    np.testing.assert_allclose(op.matmul(np.ones((len(y), 1)))[:, 0], G.sum(axis=1), rtol=1e-13)
    np.testing.assert_allclose(op.diagonal(), np.diag(G), rtol=1e-13)
    tr, fro2 = op.covariance_moments()
    assert tr == pytest.approx(np.trace(G) / len(y), rel=1e-14)
    assert fro2 == pytest.approx(np.sum(G * G) / len(y) ** 2, rel=1e-13)
    assert op.gram_passes == 1  # one sweep for all three


def test_symmetric_moments_of_no_tiles_are_zero():
    left = np.zeros((5, 3))
    out = gram_symmetric_moments(left, left, np.zeros((0, 4), dtype=np.int64), None)
    assert out.shape == (11,) and not out.any()


def test_class_diagonal_tiles_cover_each_class_block_once():
    offsets = (0, 5, 5, 17, 40)  # an empty class too
    pairs = class_diagonal_tile_pairs(offsets, 4)
    covered = np.zeros((40, 40), dtype=int)
    for a, b, c, d in pairs:
        covered[a:b, c:d] += 1
        if c != a:
            covered[c:d, a:b] += 1
    codes = np.repeat(np.arange(4), np.diff(offsets))
    np.testing.assert_array_equal(covered, (codes[:, None] == codes[None, :]).astype(int))


@pytest.mark.parametrize("precision", ["float64", "float32"])
def test_class_block_matmul_is_the_block_diagonal_product(precision):
    X, y = _data(seed=2)
    classes = ClassIndex(y, 3)
    kern = make_kernel("rbf", n_features=4, gamma=0.3)
    op = NumpyGramOperator(X, classes, kern, max_gram_bytes=0, tile_rows=16,
                           precision=precision)
    V = np.random.default_rng(0).standard_normal((len(y), 2))
    dense = _block_diagonal(kern(X, X), y) @ V
    tol = 1e-12 if precision == "float64" else 1e-5
    np.testing.assert_allclose(op.class_block_matmul(V), dense, atol=tol * np.abs(dense).max())
    assert op.gram_passes == 0  # a fraction of a pass, not counted as one
    # The centred operator's class blocks: H G H restricted to each class.
    centred = CentredGramOperator(op)
    N = len(y)
    H = np.eye(N) - 1.0 / N
    dense_c = _block_diagonal(H @ kern(X, X) @ H, y) @ V
    np.testing.assert_allclose(centred.class_block_matmul(V), dense_c,
                               atol=tol * np.abs(dense_c).max())


def test_lockstep_lanczos_matches_eigh_per_block():
    rng = np.random.default_rng(3)
    sizes = [30, 1, 0, 55]
    members, blocks_ = [], []
    start = 0
    perm = rng.permutation(sum(sizes))
    for n in sizes:
        members.append(perm[start : start + n])
        F = rng.standard_normal((n, n))
        blocks_.append(F @ F.T)
        start += n

    def matmul(v):
        out = np.zeros_like(v)
        for idx, M in zip(members, blocks_):
            out[idx] = M @ v[idx]
        return out

    got = class_block_top_eigenpairs(matmul, members, tol=1e-12)
    for (lam, a), M in zip(got, blocks_):
        if M.size == 0:
            assert a.size == 0
            continue
        w, V = np.linalg.eigh(M)
        assert lam == pytest.approx(w[-1], rel=1e-10)
        np.testing.assert_allclose(np.sign(a @ V[:, -1]) * a, V[:, -1], atol=1e-6)


def test_block_lanczos_matches_eigh_on_blocks_that_skip_the_last_indices():
    """The blocks need not reach the operator's last index (``n``): the products then take
    vectors of the full length, zero outside the blocks. A block of vectors per step reaches
    the same pair as one vector, in fewer products when the top gap is small."""
    rng = np.random.default_rng(5)
    n, members, mats = 90, [np.arange(0, 40), np.arange(40, 75)], []
    for idx in members:
        w = np.linspace(1.0, 10.0, len(idx)) ** 2
        w[-1] = w[-2] * 1.05  # a small top gap: many Lanczos steps
        Q = np.linalg.qr(rng.standard_normal((len(idx), len(idx))))[0]
        mats.append((Q * w) @ Q.T)
    steps = {}
    for block in (1, 4):
        calls = []

        def matmul(V):
            assert V.shape[0] == n and not V[75:].any()
            calls.append(V.shape[1])
            out = np.zeros_like(V)
            for idx, M in zip(members, mats):
                out[idx] = M @ V[idx]
            return out

        got = class_block_top_eigenpairs(matmul, members, n=n, tol=1e-12, block=block)
        for (lam, a), M in zip(got, mats):
            w, V = np.linalg.eigh(M)
            assert lam == pytest.approx(w[-1], rel=1e-10)
            assert a[np.argmax(np.abs(a))] > 0  # the sign convention
            np.testing.assert_allclose(np.sign(a @ V[:, -1]) * a, V[:, -1], atol=1e-6)
        steps[block] = len(calls)
    assert steps[4] < steps[1]


def _batched_start(op, classes, origin):
    """The decoupled start on ``op`` as the Dask operator gets it (no class blocks)."""
    from catdask.core import starts

    op.matvec_without_class_block = True
    return starts.kernel_decoupled_z(op, classes, origin)


def _assert_same_start_up_to_sign(dense, batched, y, **tolerance):
    for k in np.unique(y):
        a, b = dense[y == k], batched[y == k]
        np.testing.assert_allclose(np.sign(a @ b) * b, a, **tolerance)


def _dense_start_and_tiled_operator(X, y, origin, **tile_options):
    """The dense decoupled start for ``origin``, and a tiled numpy operator that, as the Dask
    operator, has no class blocks to multiply; ``wrap`` centres an operator for ``origin``."""
    from catdask.core import starts

    classes = ClassIndex(y, 3)
    kern = make_kernel("rbf", n_features=X.shape[1], gamma=0.3)

    def wrap(op):
        return CentredGramOperator(op) if origin == "global" else op

    dense = starts.kernel_decoupled_z(wrap(NumpyGramOperator(X, classes, kern)), classes, origin)
    tiled = NumpyGramOperator(X, classes, kern, max_gram_bytes=0, tile_rows=8, **tile_options)
    tiled.matvec_without_class_block = True
    return classes, dense, tiled, wrap


@pytest.mark.parametrize("origin", ["class", "global"])
def test_batched_start_with_a_small_last_class_matches_dense(monkeypatch, origin):
    """Only the large classes go to the lockstep Lanczos; a small last class (a dense block)
    must not shorten the vectors it multiplies (they failed with an IndexError)."""
    from catdask.core import starts

    X, y = make_blobs(n_per_class=30, n_features=4, n_classes=3, seed=6)
    keep = np.r_[0:60, 60:72]  # classes of 30, 30 and 12 rows, the last one small
    X, y = X[keep], y[keep]
    classes, dense, tiled, wrap = _dense_start_and_tiled_operator(X, y, origin)
    monkeypatch.setattr(starts, "_DENSE_EIG_MAX", 20)
    batched = _batched_start(wrap(tiled), classes, origin)
    _assert_same_start_up_to_sign(dense, batched, y, rtol=1e-7, atol=1e-9)


@pytest.mark.parametrize("origin", ["class", "global"])
def test_batched_start_on_float32_tiles_is_the_dense_start_to_their_rounding(monkeypatch,
                                                                              origin):
    """The start's own precision (float32 tiles, as under the float32 schedule) stops the
    Lanczos earlier (``_START_TOL``); its vector is still the float64 dense one to the float32
    products' rounding, and the globally centred start begins at the row sums g."""
    from catdask.core import starts

    X, y = _data(n_per_class=40, seed=8)
    classes, dense, tiled, wrap = _dense_start_and_tiled_operator(X, y, origin,
                                                                  precision="float32")
    monkeypatch.setattr(starts, "_DENSE_EIG_MAX", 20)
    assert tiled.precision == "float32" and starts._START_TOL["float32"] > 1e-10
    batched = _batched_start(wrap(tiled), classes, origin)
    _assert_same_start_up_to_sign(dense, batched, y, rtol=0, atol=1e-5 * np.abs(dense).max())


@pytest.mark.parametrize("origin", ["class", "global"])
def test_batched_decoupled_start_matches_dense_and_never_forms_a_class_block(monkeypatch,
                                                                             origin):
    """On a tiled operator without class blocks (the Dask path), large classes' starts come
    from the lockstep Lanczos; they equal the dense start up to each class's sign."""
    from catdask.core import starts

    X, y = _data(n_per_class=30, seed=4)
    classes, dense, tiled, wrap = _dense_start_and_tiled_operator(X, y, origin)
    monkeypatch.setattr(tiled, "class_gram", lambda k: pytest.fail("formed a class block"))
    monkeypatch.setattr(tiled, "class_matvec", lambda k, v: pytest.fail("one class per pass"))
    monkeypatch.setattr(starts, "_DENSE_EIG_MAX", 10)
    batched = _batched_start(wrap(tiled), classes, origin)
    _assert_same_start_up_to_sign(dense, batched, y, rtol=1e-7, atol=1e-9)


def test_fit_reports_its_phases():
    X, y = _data(n_per_class=30, seed=5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = KernelCategorySpace(gamma=0.3, n_restarts=2, random_state=0, certify=False,
                                  max_gram_bytes=0).fit(X, y)
    phases = est.fit_seconds_
    assert set(phases) == {"setup", "float32", "polish", "finish", "total"}
    assert all(v >= 0 for v in phases.values())
    parts = sum(v for name, v in phases.items() if name != "total")
    assert parts == pytest.approx(phases["total"], rel=1e-9)
    exact = KernelCategorySpace(gamma=0.3, n_restarts=2, random_state=0, certify=False,
                                precision="float64").fit(X, y)
    assert set(exact.fit_seconds_) == {"setup", "iterations", "finish", "total"}
    assert abs(est.objective_ - exact.objective_) <= 1e-9 * abs(exact.objective_)


def test_driver_uses_one_blas_thread_only_during_distributed_fits():
    from threadpoolctl import threadpool_info

    from catdask.estimators.target import ComputeTarget

    def blas_threads():
        return [p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"]

    before = blas_threads()
    with ComputeTarget(distributed=True).driver_blas_threads():
        assert all(n == 1 for n in blas_threads())
    assert blas_threads() == before
    with ComputeTarget(distributed=False).driver_blas_threads():
        assert blas_threads() == before
