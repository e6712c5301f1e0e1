"""The symmetric Gram tile pass (float32 and float64) and precision="auto"'s float64 polish."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from catdask import KernelCategorySpace
from catdask.core.classes import ClassIndex
from catdask.kernels import make_kernel
from catdask.operators import NumpyGramOperator

from tests.helpers.data import make_blobs


def _data(n_per_class=70, n_features=5, n_classes=3, seed=0):
    X, y = make_blobs(n_per_class=n_per_class, n_features=n_features, n_classes=n_classes,
                      seed=seed)
    perm = np.random.default_rng(seed).permutation(len(y))
    return X[perm] + 3.0, y[perm]


def _dense_product(G, classes, z):
    """``G Z_r`` by brute force: Z_r (N, K) with z[r, i] in column y_i."""
    Z = np.zeros((z.shape[0], G.shape[0], classes.n_classes))
    for r in range(z.shape[0]):
        Z[r, np.arange(G.shape[0]), classes.codes] = z[r]
    return G @ Z


@pytest.mark.parametrize("metric", ["rbf", "poly", "linear"])
def test_tile_pass_equals_dense_product(metric):
    """Several tiles, class boundaries inside tiles, unsorted input: equals G @ Z exactly."""
    X, y = _data()
    classes = ClassIndex(y, 3)
    kern = make_kernel(metric, n_features=X.shape[1], gamma=0.1)
    op = NumpyGramOperator(X, classes, kern, max_gram_bytes=0, tile_rows=64)
    assert op.uses_tiles and len(op._tile_pairs) == 10  # 4 row tiles: 4 + 3 + 2 + 1
    z = np.random.default_rng(1).standard_normal((3, len(y)))
    ref = _dense_product(kern(X, X), classes, z)
    np.testing.assert_allclose(op.class_matmul(z), ref, rtol=1e-12, atol=1e-12 * np.abs(ref).max())
    assert op.gram_passes == 1


@pytest.mark.parametrize("n_groups", [1, 3, 7])
@pytest.mark.parametrize("diagonal_only", [False, True])
def test_tile_parts_add_up_to_the_dense_product(n_groups, diagonal_only):
    """Tile pairs cut into contiguous groups (as the Dask pass cuts them, group ends inside a
    row of tiles): each group's part holds every class for its own rows and only its own
    classes below them, and the parts add up to G @ Z (to the class blocks for the
    class-diagonal tiles)."""
    from catdask.operators import gram_tiles

    X, y = _data(n_per_class=50)
    order = np.argsort(y, kind="stable")
    Xs, ys = X[order], y[order]
    classes = ClassIndex(ys, 3)
    kern = make_kernel("rbf", n_features=X.shape[1], gamma=0.1)
    offsets = tuple(int(o) for o in classes.offsets)
    N = len(ys)
    G = kern(Xs, Xs)
    if diagonal_only:
        G = G * (ys[:, None] == ys[None, :])
        pairs = gram_tiles.class_diagonal_tile_pairs(offsets, 16)
    else:
        pairs = gram_tiles.symmetric_tile_pairs(N, 16)
    z = np.random.default_rng(1).standard_normal((2, N))
    left, right = kern.tile_factors(Xs, "float64")
    acc = np.zeros((3, N, 2))
    for group in np.array_split(pairs, n_groups):
        lo, hi, head, k0, tail = gram_tiles.gram_symmetric_class_product(
            left, right, group, offsets, np.ascontiguousarray(z.T), kern)
        assert head.shape == (3, hi - lo, 2) and tail.shape[1:] == (N - hi, 2)
        own = {int(c) for c in ys[lo:hi]}
        assert set(range(k0, k0 + tail.shape[0])) == own
        gram_tiles.add_class_product_part(acc, part=(lo, hi, head, k0, tail))
    want = _dense_product(G, classes, z)  # (R, N, K)
    np.testing.assert_allclose(acc.transpose(2, 1, 0), want, rtol=0,
                               atol=1e-12 * np.abs(want).max())


@pytest.mark.parametrize("dtype, rtol", [("float64", 1e-12), ("float32", 1e-5)])
def test_duplicate_rows_in_different_tiles(dtype, rtol):
    """Exact duplicates far apart (an off-diagonal tile, which skips the clip of the exponent):
    the pass still equals the dense product within the dtype's rounding, moments included."""
    X, y = _data()
    X[150:160] = X[0:10]  # rows 0-9 and 150-159 in different 64-row tiles
    classes = ClassIndex(y, 3)
    kern = make_kernel("rbf", n_features=X.shape[1], gamma=0.1)
    op = NumpyGramOperator(X, classes, kern, max_gram_bytes=0, tile_rows=64, precision=dtype)
    z = np.random.default_rng(1).standard_normal((2, len(y)))
    G = kern(X, X)
    ref = _dense_product(G, classes, z)
    np.testing.assert_allclose(op.class_matmul(z), ref, rtol=rtol, atol=rtol * np.abs(ref).max())
    sums, diag, fro2 = op._gram_moments()
    np.testing.assert_allclose(sums, G.sum(axis=1), rtol=1e-12)
    assert np.all(diag <= 1.0) and np.all(diag >= 1.0 - 1e-12)  # clipped diagonal tiles
    assert abs(fro2 - float(np.sum(G * G))) <= 1e-12 * fro2


def test_the_clip_keeps_an_exponent_rounded_above_zero_at_one():
    kern = make_kernel("rbf", n_features=2, gamma=1.0)
    T = np.array([[1e-7, -1.0]], dtype=np.float32)
    assert kern.finish_tile(T.copy())[0, 0] == 1.0
    assert kern.finish_tile(T.copy(), clip=False)[0, 0] > 1.0


def test_float32_tiles_agree_with_float64():
    X, y = _data(n_per_class=150)
    classes = ClassIndex(y, 3)
    kern = make_kernel("rbf", n_features=X.shape[1], gamma=0.05)
    z = np.random.default_rng(2).standard_normal((4, len(y)))
    exact = NumpyGramOperator(X, classes, kern, max_gram_bytes=0, tile_rows=100)
    fast = NumpyGramOperator(X, classes, kern, max_gram_bytes=0, tile_rows=100,
                             precision="float32")
    B64, B32 = exact.class_matmul(z), fast.class_matmul(z)
    err = np.abs(B32 - B64).max() / np.abs(B64).max()
    assert 0 < err <= 1e-5  # float32 really in use, and within its rounding
    assert B32.dtype == np.float64


def test_stored_gram_and_user_kernels_do_not_use_tiles():
    X, y = _data(n_per_class=10)
    classes = ClassIndex(y, 3)
    assert not NumpyGramOperator(X, classes, make_kernel("rbf", n_features=5)).uses_tiles
    user = make_kernel(lambda a, b: float(a @ b), n_features=5)
    assert not NumpyGramOperator(X, classes, user, max_gram_bytes=0).uses_tiles
    with pytest.raises(ValueError, match="precision must be one of"):
        NumpyGramOperator(X, classes, make_kernel("rbf", n_features=5), precision="half")
    with pytest.raises(ValueError, match="built-in kernel"):
        user.tile_factors(X, "float32")


@pytest.mark.parametrize("origin", ["global", "class"])
def test_auto_precision_fit_equals_float64_fit(origin):
    """precision="auto" (float32 phase, float64 polish) returns the float64 fit's objective."""
    X, y = _data(n_per_class=200, seed=3)
    # certify=False: the certificate reads only float64 products (diagonal, columns) at the
    # polished point; its pivoted Cholesky in recompute mode would dominate this test's time.
    kw = dict(max_gram_bytes=0, n_restarts=2, random_state=0, origin=origin, gamma=0.05,
              certify=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        auto = KernelCategorySpace(precision="auto", **kw).fit(X, y)
        exact = KernelCategorySpace(precision="float64", **kw).fit(X, y)
    assert auto.n_iter_float32_ > 0 and exact.n_iter_float32_ == 0
    assert auto.converged_ and exact.converged_
    assert abs(auto.objective_ - exact.objective_) <= 1e-9 * abs(exact.objective_)
    assert auto.n_iter_ > auto.n_iter_float32_  # at least one float64 (polish) iteration
    coordinates = [m.transform(X) for m in (auto, exact)]
    np.testing.assert_allclose(coordinates[0], coordinates[1], atol=1e-5)
