"""One contract, every operator: each member of the interfaces of ``catdask/core/protocols.py``
checked against a dense numpy reference (X centred at x0; ``G = k(X, X)``; ``H G H``).

Every operator the package has is listed once below (:data:`DATA_OPERATORS`,
:data:`GRAM_OPERATORS`); the centred wrapper is checked over each Gram operator. A new operator
(a GPU one, say) joins the suite with one line in one of the two tables.

The samples come in shuffled order with classes of unequal size, and the row blocks, chunks and
tiles are small enough that blocks end inside classes and tiles straddle class boundaries.
Products that an operator evaluates in float32 (its ``precision``: ``class_matmul`` and
``class_block_matmul`` only) are compared at a float32 tolerance, everything else at float64's.
"""

from __future__ import annotations

import numpy as np
import pytest

from catdask.core.classes import ClassIndex
from catdask.core.protocols import DataOperator, GramOperator
from catdask.kernels import Kernel, make_kernel
from catdask.operators import (
    CentredGramOperator,
    DaskDataOperator,
    DaskGramOperator,
    NumpyDataOperator,
    NumpyGramOperator,
)

SIZES = (9, 14, 6)  # unequal classes
D = 4
GAMMA = 0.15
TILE, BLOCK, CHUNK = 8, 7, 10  # tiles, Gram row blocks and Dask chunks all cut classes
RTOL64, RTOL32 = 1e-11, 2e-5


def _sample():
    rng = np.random.default_rng(2026)
    X = np.vstack([rng.standard_normal((n, D)) @ rng.standard_normal((D, D)) + 2 * k
                   for k, n in enumerate(SIZES)])
    y = np.repeat(np.arange(len(SIZES)), SIZES)
    perm = rng.permutation(len(y))
    return X[perm] + 3.0, y[perm]  # offset: the operators must measure from x0 themselves


X, Y = _sample()
N, K = len(Y), len(SIZES)


def _rbf():
    return make_kernel("rbf", n_features=D, gamma=GAMMA)


def _user_kernel():
    """A user's callable (not built in): no tile pass, G recomputed by row blocks."""
    return Kernel(lambda A, B: np.exp(-GAMMA * ((A[:, None] - B[None]) ** 2).sum(-1)),
                  vectorised=True)


def _dask_x():
    import dask.array as da

    return da.from_array(X, chunks=(CHUNK, -1))


def _torch_operator(X, classes, precision):
    pytest.importorskip("torch", reason="the device operator needs PyTorch "
                        "(pip install 'catdask[gpu]')")
    from catdask.operators import TorchGramOperator

    return TorchGramOperator(X, classes, _rbf(), device="cpu", precision=precision,
                             fused=False)


# name -> factory(X, classes, center, tmp_dir). One line per operator.
DATA_OPERATORS = {
    "numpy": lambda X, c, center, tmp: NumpyDataOperator(X, c, center),
    "dask": lambda X, c, center, tmp: DaskDataOperator(_dask_x(), c, center),
}

# name -> (factory(X, classes, tmp_dir), tolerance of the G it reads: RTOL32 when it keeps G
# in float32). One entry per operator; the float32 *products* follow from its ``precision``.
GRAM_OPERATORS = {
    "numpy-stored": (lambda X, c, tmp: NumpyGramOperator(X, c, _rbf()), RTOL64),
    "numpy-tiles-f64": (lambda X, c, tmp: NumpyGramOperator(
        X, c, _rbf(), max_gram_bytes=0, tile_rows=TILE), RTOL64),
    "numpy-tiles-f32": (lambda X, c, tmp: NumpyGramOperator(
        X, c, _rbf(), max_gram_bytes=0, tile_rows=TILE, precision="float32"), RTOL64),
    "numpy-rows-callable": (lambda X, c, tmp: NumpyGramOperator(
        X, c, _user_kernel(), max_gram_bytes=0, block_rows=BLOCK), RTOL64),
    "dask-memory": (lambda X, c, tmp: DaskGramOperator(
        X, c, _rbf(), cache="memory", block_rows=BLOCK), RTOL64),
    "dask-zarr-f32": (lambda X, c, tmp: DaskGramOperator(
        X, c, _rbf(), cache="zarr", store=tmp / "gram.zarr", cache_dtype="float32",
        block_rows=BLOCK), RTOL32),
    "dask-tiles-f64": (lambda X, c, tmp: DaskGramOperator(
        X, c, _rbf(), cache="recompute", block_rows=BLOCK, tile_rows=TILE), RTOL64),
    "dask-tiles-f32": (lambda X, c, tmp: DaskGramOperator(
        X, c, _rbf(), cache="recompute", block_rows=BLOCK, tile_rows=TILE,
        precision="float32"), RTOL64),
    # PyTorch's CPU build stands in for a GPU (bench_device.py runs the fused kernel there).
    "torch-f64": (lambda X, c, tmp: _torch_operator(X, c, "float64"), RTOL64),
    "torch-f32": (lambda X, c, tmp: _torch_operator(X, c, "float32"), RTOL64),
}

GRAM_CASES = [*GRAM_OPERATORS, *(f"centred:{name}" for name in GRAM_OPERATORS)]


def _needs_dask(name):
    return "dask" in name


# ----------------------------------------------------------------------------- references
def _reference_gram(name):
    """The dense G, or ``H G H`` for the centred wrapper."""
    G = _rbf()(X, X)
    if name.startswith("centred:"):
        H = np.eye(N) - 1.0 / N
        G = H @ G @ H
    return G


def _class_block_matrix(z):
    """The block matrix Z (R, N, K) of docs/design.md §3: ``Z[r, i, y_i] = z[r, i]``."""
    Z = np.zeros((z.shape[0], N, K))
    Z[:, np.arange(N), Y] = z
    return Z


def _close(actual, expected, rtol):
    """Equal up to ``rtol`` of the reference's largest entry, and at least of 1 (the largest
    RBF entry; sums cancel, so entries near zero carry the rounding of the whole sum, and the
    centred row sums are zero)."""
    expected = np.asarray(expected, dtype=float)
    scale = max(float(np.abs(expected).max()), 1.0) if expected.size else 1.0
    np.testing.assert_allclose(np.asarray(actual, dtype=float), expected, rtol=0,
                               atol=rtol * scale)


# ----------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def dask_client(dask_scheduler):
    """One client of the shared module cluster (``dask_scheduler``), current for the module."""
    distributed = pytest.importorskip("distributed")
    with distributed.Client(dask_scheduler, set_as_default=True) as client:
        yield client


@pytest.fixture(scope="module")
def classes():
    return ClassIndex(Y, K)


@pytest.fixture(scope="module", params=GRAM_CASES)
def gram(request, classes, tmp_path_factory):
    """``(operator, G, tolerance of G's storage)``: every Gram operator, built once."""
    name = request.param
    base = name.removeprefix("centred:")
    if _needs_dask(base):
        request.getfixturevalue("dask_client")
    factory, stored_rtol = GRAM_OPERATORS[base]
    op = factory(X, classes, tmp_path_factory.mktemp(base))
    if name.startswith("centred:"):
        op = CentredGramOperator(op)
    yield op, _reference_gram(name), stored_rtol
    op.close()


@pytest.fixture(scope="module", params=[(n, c) for n in DATA_OPERATORS for c in (False, True)],
                ids=lambda p: f"{p[0]}-{'given' if p[1] else 'mean'}-origin")
def data(request, classes, tmp_path_factory):
    """``(operator, Xc)``: every data operator, with x0 the mean or given, and ``X - x0``."""
    name, given = request.param
    if _needs_dask(name):
        request.getfixturevalue("dask_client")
    center = np.linspace(-1.0, 2.0, D) if given else None
    op = DATA_OPERATORS[name](X, classes, center, tmp_path_factory.mktemp(name))
    x0 = center if given else X.mean(axis=0)
    yield op, X - x0
    op.close()


def _product_rtol(op, stored_rtol):
    """The tolerance of the products an operator may evaluate in float32 (its tile pass)."""
    return max(RTOL32 if op.uses_tiles and op.precision == "float32" else RTOL64, stored_rtol)


# ----------------------------------------------------------------------------- Gram contract
def test_gram_operator_declares_the_interface(gram, classes):
    op, _, _ = gram
    assert isinstance(op, GramOperator) and not isinstance(op, DataOperator)
    assert op.n_samples == N and op.classes is classes
    assert isinstance(op.matvec_without_class_block, bool) and isinstance(op.uses_tiles, bool)
    assert op.precision in ("float32", "float64") and isinstance(op.gram_passes, int)


def test_class_matmul_is_g_times_the_block_matrix(gram):
    op, G, stored_rtol = gram
    z = np.random.default_rng(1).standard_normal((3, N))
    before = op.gram_passes
    B = op.class_matmul(z)
    assert B.shape == (3, N, K)
    _close(B, G @ _class_block_matrix(z), _product_rtol(op, stored_rtol))
    assert op.gram_passes == before + 1  # one pass over G for all restarts


def test_matmul_is_g_times_v(gram):
    op, G, stored_rtol = gram
    V = np.random.default_rng(2).standard_normal((N, 2))
    _close(op.matmul(V), G @ V, stored_rtol)
    ones = np.ones((N, 1))  # the row sums: from the moments sweep on a Gram operator
    _close(op.matmul(ones), G @ ones, stored_rtol)


def test_class_gram_and_class_matvec_are_the_class_block(gram, classes):
    op, G, stored_rtol = gram
    rng = np.random.default_rng(3)
    for k in range(K):
        idx = classes.members(k)
        np.testing.assert_array_equal(np.sort(idx), np.flatnonzero(Y == k))
        Gk = G[np.ix_(idx, idx)]
        _close(op.class_gram(k), Gk, stored_rtol)
        v, V = rng.standard_normal(len(idx)), rng.standard_normal((len(idx), 3))
        out = op.class_matvec(k, v)
        assert out.shape == v.shape
        _close(out, Gk @ v, stored_rtol)
        _close(op.class_matvec(k, V), Gk @ V, stored_rtol)


def test_class_block_matmul_is_the_block_diagonal_product(gram):
    op, G, stored_rtol = gram
    V = np.random.default_rng(4).standard_normal((N, 2))
    blockdiag = np.where(Y[:, None] == Y[None, :], G, 0.0)
    before = op.gram_passes
    _close(op.class_block_matmul(V), blockdiag @ V, _product_rtol(op, stored_rtol))
    assert op.gram_passes == before  # the class blocks only: not a full pass over G


def test_diagonal_columns_and_moments(gram):
    op, G, stored_rtol = gram
    rtol = stored_rtol
    _close(op.diagonal(), np.diag(G), rtol)
    idx = np.array([5, 0, N - 1, 12])
    _close(op.columns(idx), G[:, idx], rtol)
    tr, fro2 = op.covariance_moments()
    assert tr == pytest.approx(np.trace(G) / N, rel=rtol)
    assert fro2 == pytest.approx(np.sum(G * G) / N**2, rel=10 * rtol)


def test_set_precision_switches_only_the_tile_products(gram):
    op, G, stored_rtol = gram
    before = op.precision
    try:
        for precision in ("float32", "float64"):
            op.set_precision(precision)
            assert op.precision == precision
            z = np.random.default_rng(5).standard_normal((1, N))
            _close(op.class_matmul(z), G @ _class_block_matrix(z),
                   _product_rtol(op, stored_rtol))
        with pytest.raises(ValueError, match="precision"):
            op.set_precision("float16")
    finally:
        op.set_precision(before)


# ----------------------------------------------------------------------------- data contract
def test_data_operator_declares_the_interface(data, classes):
    op, Xc = data
    assert isinstance(op, DataOperator) and not isinstance(op, GramOperator)
    assert (op.n_samples, op.n_features) == (N, D) and op.classes is classes
    _close(op.center, X[0] - Xc[0], RTOL64)


def test_own_projections_and_weighted_sums(data):
    op, Xc = data
    rng = np.random.default_rng(6)
    W = rng.standard_normal((2, D, K))
    u = op.own_projections(W)
    _close(u, np.einsum("id,rdi->ri", Xc, W[:, :, Y]), RTOL64)
    z = rng.standard_normal((2, N))
    _close(op.class_weighted_sums(z), np.einsum("id,rik->rdk", Xc, _class_block_matrix(z)),
           RTOL64)


def test_class_statistics(data):
    op, Xc = data
    means = np.stack([Xc[Y == k].mean(axis=0) for k in range(K)])
    _close(op.class_means(), means, RTOL64)
    about_x0 = np.stack([Xc[Y == k].T @ Xc[Y == k] for k in range(K)])
    scatter = np.stack([(Xc[Y == k] - means[k]).T @ (Xc[Y == k] - means[k]) for k in range(K)])
    _close(op.class_second_moments("global"), about_x0, RTOL64)
    _close(op.class_second_moments("class"), scatter, RTOL64)
    C = Xc.T @ Xc / N
    tr, tr2 = op.covariance_moments()
    assert tr == pytest.approx(np.trace(C), rel=RTOL64)
    assert tr2 == pytest.approx(np.sum(C * C), rel=RTOL64)
