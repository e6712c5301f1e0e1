"""The Dask backend against the numpy one: same start, same iterates, same answer.

One module-scoped LocalCluster (2 worker processes, 1 thread each, 127.0.0.1) serves every
test. Problems are small so the file runs in well under two minutes on 2 cores; the Dask
path's cost here is scheduler latency, not arithmetic.
"""

from __future__ import annotations

import gc
import os
import threading
import time
import warnings
import weakref

import numpy as np
import pytest

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")
zarr = pytest.importorskip("zarr")

from sklearn.exceptions import ConvergenceWarning  # noqa: E402

from catdask import CategorySpace, KernelCategorySpace  # noqa: E402
from catdask.core import acceleration  # noqa: E402
from catdask.core.acceleration import HeldHistory, make_stepper  # noqa: E402
from catdask.core.classes import ClassIndex  # noqa: E402
from catdask.core.progress import solver_progress  # noqa: E402
from catdask.distributed import dask_client_context, gram_options  # noqa: E402
from catdask.distributed.cluster import ENV_SCHEDULER, start_local_cluster  # noqa: E402
from catdask.distributed.execute import BlockRunner  # noqa: E402
from catdask.distributed.inputs import is_distributed_input  # noqa: E402
from catdask.kernels import make_kernel  # noqa: E402
from catdask.operators import DaskGramOperator, NumpyGramOperator  # noqa: E402
from catdask.operators import gram_tiles  # noqa: E402

from tests.helpers.data import make_blobs  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")

RTOL = 1e-9


@pytest.fixture(scope="module")
def client():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "Port 8787 in use" and similar
        # the production factory: same scheduler settings and BLAS threads as a real fit
        cluster, c = start_local_cluster(2, set_as_default=True)
    with c:
        yield c
    cluster.close()


def _data(n_per_class=20, n_features=5, n_classes=3, seed=0):
    """Blobs in shuffled order (so classes are not contiguous in any chunk)."""
    X, y = make_blobs(n_per_class=n_per_class, n_features=n_features, n_classes=n_classes,
                      seed=seed)
    perm = np.random.default_rng(seed).permutation(len(y))
    return X[perm] + 5.0, y[perm]


def _rel(a, b):
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-300))


def _assert_same_fit(a, b, coef):
    """Same iterates from the same start: iterations, stopping reason, objective, axes."""
    assert a.n_iter_ == b.n_iter_
    assert a.stopping_reason_ == b.stopping_reason_
    assert abs(a.objective_ - b.objective_) <= RTOL * abs(b.objective_)
    assert _rel(getattr(a, coef), getattr(b, coef)) <= RTOL
    np.testing.assert_array_equal(a.classes_, b.classes_)


# Chunkings of 60 rows: even, ragged last chunk, chunks smaller than a class (20 rows).
CHUNKINGS = {"even": 20, "ragged": 25, "small": 7}


def _given_start(D, K, seed=0):
    """A fixed start on the Stiefel manifold (restarts near saddles amplify round-off, so
    iterate-by-iterate comparisons use one well-defined start)."""
    Q, _ = np.linalg.qr(np.random.default_rng(seed).standard_normal((D, K)))
    return Q


# ------------------------------------------------------------------------------ linear
@pytest.mark.parametrize("origin", ["class", "global"])
@pytest.mark.parametrize("chunks", list(CHUNKINGS))
def test_linear_cqs_matches_numpy(client, origin, chunks):
    X, y = _data()
    Xd = da.from_array(X, chunks=(CHUNKINGS[chunks], -1))
    for init in ("decoupled", _given_start(5, 3)):
        # Same iterates need the plain iteration: Anderson mixing solves a small least-squares
        # problem per step, which turns 1e-16 differences of the class matrices into
        # different (equally valid) iterates; test_accelerated_fits_reach_the_same_optimum
        # covers the default.
        kw = dict(origin=origin, n_restarts=1, init=init, tol=1e-7, random_state=0,
                  acceleration="none")
        ref = CategorySpace(**kw).fit(X, y)
        got = CategorySpace(**kw).fit(Xd, y)
        _assert_same_fit(got, ref, "components_")
        np.testing.assert_allclose(got.mean_, ref.mean_, rtol=1e-12)
        assert got.certificate_.certified == ref.certificate_.certified
    # several restarts: every restart reaches the same objective on both backends
    kw = dict(origin=origin, n_restarts=3, tol=1e-7, random_state=0)
    ref = CategorySpace(**kw).fit(X, y)
    got = CategorySpace(**kw).fit(Xd, y)
    for a, b in zip(got.restarts_, ref.restarts_):
        assert a.objective == pytest.approx(b.objective, rel=RTOL)


@pytest.mark.parametrize("origin", ["class", "global"])
def test_accelerated_fits_reach_the_same_optimum(client, origin):
    """The default (Anderson-accelerated) iteration: numpy and Dask reach the same optimum."""
    X, y = _data()
    Xd = da.from_array(X, chunks=(CHUNKINGS["ragged"], -1))
    kw = dict(origin=origin, n_restarts=2, tol=1e-11, max_iter=5000, random_state=0)
    ref = CategorySpace(**kw).fit(X, y)
    got = CategorySpace(**kw).fit(Xd, y)
    assert got.objective_ == pytest.approx(ref.objective_, rel=RTOL)
    assert _rel(got.components_, ref.components_) <= 1e-7


@pytest.mark.parametrize("origin, chunks", [("class", "small"), ("global", "ragged")])
def test_linear_cas_streaming_matches_numpy(client, origin, chunks):
    """CAS streams X (two passes per iteration): X W, then X^T Z."""
    X, y = _data()
    kw = dict(objective="absolute", origin=origin, n_restarts=1, init=_given_start(5, 3, 1),
              tol=1e-7, max_iter=15)
    ref = CategorySpace(**kw).fit(X, y)
    got = CategorySpace(**kw).fit(da.from_array(X, chunks=(CHUNKINGS[chunks], -1)), y)
    _assert_same_fit(got, ref, "components_")
    assert got.eps_ == pytest.approx(ref.eps_, rel=1e-12)


@pytest.mark.parametrize("origin", ["class", "global"])
def test_linear_cqs_streaming_form_matches_numpy(client, monkeypatch, origin):
    """Class matrices over budget: the solver streams X for CQS too (same iterates)."""
    import catdask.estimators.linear as linear

    monkeypatch.setattr(linear, "CLASS_MATRIX_BUDGET_BYTES", 0)
    X, y = _data(seed=2)
    kw = dict(origin=origin, n_restarts=1, init=_given_start(5, 3, 2), tol=1e-6, max_iter=15)
    ref = CategorySpace(**kw).fit(X, y)
    got = CategorySpace(**kw).fit(da.from_array(X, chunks=(CHUNKINGS["ragged"], -1)), y)
    _assert_same_fit(got, ref, "components_")


def test_the_dask_target_makes_the_dask_operators(client):
    from catdask.estimators.target import ComputeTarget
    from catdask.operators import DaskDataOperator, DataOperator, GramOperator

    X, y = _data()
    classes = ClassIndex(y, 3)
    with ComputeTarget(distributed=True) as target:  # closes both operators as it ends
        op = target.data_operator(da.from_array(X, chunks=(16, -1)), classes)
        assert type(op) is DaskDataOperator and isinstance(op, DataOperator)
        kern = make_kernel("rbf", n_features=X.shape[1], gamma=0.1)
        gram = target.gram_operator(X, classes, kern, max_gram_bytes=2 * 1024**3)
        assert type(gram) is DaskGramOperator and isinstance(gram, GramOperator)
        assert gram.matvec_without_class_block


def test_linear_scatter_path_reads_data_once(client):
    from catdask.core.classes import ClassIndex as CI
    from catdask.operators import DaskDataOperator

    X, y = _data()
    op = DaskDataOperator(da.from_array(X, chunks=(7, -1)), CI(y, 3))
    op.covariance_moments(), op.class_second_moments("class"), op.class_second_moments("global")
    op.class_means(), op.center
    assert op.passes == 1
    Xc = X - X.mean(axis=0)
    for k in range(3):
        Xk = Xc[y == k]
        np.testing.assert_allclose(op.class_second_moments("global")[k], Xk.T @ Xk, rtol=1e-11)
        Xk = Xk - Xk.mean(axis=0)
        np.testing.assert_allclose(op.class_second_moments("class")[k], Xk.T @ Xk, rtol=1e-11)


def test_nonfinite_dask_input_is_rejected(client):
    X, y = _data()
    X[3, 2] = np.nan
    with pytest.raises(ValueError, match="NaN or infinity"):
        CategorySpace(certify=False).fit(da.from_array(X, chunks=(20, -1)), y)


# ------------------------------------------------------------------------------ kernel
@pytest.mark.parametrize(
    "objective, origin, block_rows",
    [
        ("quadratic", "class", None),
        ("quadratic", "global", 7),
        ("absolute", "class", 7),
        ("absolute", "global", None),
    ],
)
def test_kernel_matches_numpy(client, objective, origin, block_rows):
    X, y = _data(n_per_class=15, seed=3)
    kw = dict(gamma=0.05, objective=objective, origin=origin, n_restarts=1, init="decoupled",
              tol=1e-7, max_iter=40, certify=False)
    ref = KernelCategorySpace(**kw).fit(X, y)
    with gram_options(block_rows=block_rows):
        got = KernelCategorySpace(**kw).fit(da.from_array(X, chunks=(13, -1)), y)
    _assert_same_fit(got, ref, "dual_coef_")
    np.testing.assert_allclose(got.projection_offset_, ref.projection_offset_,
                               rtol=1e-9, atol=1e-12)


def test_kernel_certificate_matches_numpy(client):
    X, y = _data(n_per_class=12, seed=4)
    kw = dict(gamma=0.1, origin="global", n_restarts=1, init="decoupled", tol=1e-6)
    ref = KernelCategorySpace(**kw).fit(X, y)
    got = KernelCategorySpace(**kw).fit(da.from_array(X, chunks=(20, -1)), y)
    _assert_same_fit(got, ref, "dual_coef_")
    assert got.certificate_.certified == ref.certificate_.certified
    assert got.certificate_.gap == pytest.approx(ref.certificate_.gap, rel=1e-6, abs=1e-9)


def test_certificate_on_first_access_with_dask_input(client):
    """Issue 26. Linear: the test reads only the class matrices (driver memory), so it waits
    for first access on Dask input too and gives the eager certificate. Kernel: a Dask Gram
    operator (blocks on the workers, through the fit's client) never outlives the fit, so the
    test runs in the fit whatever ``certify_at`` says."""
    import dataclasses

    X, y = _data(n_per_class=15, seed=7)
    Xd = da.from_array(X, chunks=(20, -1))
    kw = dict(n_restarts=2, random_state=0)
    lazy = CategorySpace(**kw).fit(Xd, y)
    assert "_certification" in vars(lazy) and "certificate_" not in vars(lazy)
    eager = CategorySpace(certify_at="fit", **kw).fit(Xd, y)
    assert dataclasses.replace(lazy.certificate_, seconds=0.0) == dataclasses.replace(
        eager.certificate_, seconds=0.0)
    assert "_certification" not in vars(lazy)
    kernel = KernelCategorySpace(gamma=0.1, **kw).fit(Xd, y)
    assert kernel.certify_at == "access"
    assert "certificate_" in vars(kernel) and "_certification" not in vars(kernel)
    assert "certificate" in kernel.fit_seconds_ and kernel.certificate_.applicable


@pytest.mark.parametrize("origin", ["class", "global"])
def test_decoupled_start_by_lanczos_matches_dense(client, monkeypatch, origin):
    """Large classes get the decoupled start from Lanczos on blocked class matvecs (no
    n_k x n_k block on the driver); it must be the dense start up to each class's sign."""
    from catdask.core import starts

    X, y = _data(n_per_class=11, seed=6)
    classes = ClassIndex(y, 3)
    kern = make_kernel("rbf", n_features=X.shape[1], gamma=0.1)
    dense = starts.kernel_decoupled_z(NumpyGramOperator(X, classes, kern), classes, origin)
    op = DaskGramOperator(X, classes, kern, cache="recompute", block_rows=5)
    monkeypatch.setattr(op, "class_gram", lambda k: pytest.fail("formed a dense class block"))
    monkeypatch.setattr(starts, "_DENSE_CLASS_GRAM_BYTES", 0)
    lanczos = starts.kernel_decoupled_z(op, classes, origin)
    for k in range(3):
        a, b = dense[y == k], lanczos[y == k]
        sign = np.sign(a @ b)
        np.testing.assert_allclose(sign * b, a, rtol=1e-7, atol=1e-9)


def test_centred_gram_class_matvec_and_lanczos_start_match_dense(client, monkeypatch):
    """origin="global" wraps the Gram in H G H: its class matvec (and so the Lanczos decoupled
    start) must equal the dense centred class block without ever forming one."""
    from catdask.core import starts
    from catdask.operators import CentredGramOperator

    X, y = _data(n_per_class=11, seed=7)
    classes = ClassIndex(y, 3)
    kern = make_kernel("rbf", n_features=X.shape[1], gamma=0.1)
    ref = CentredGramOperator(NumpyGramOperator(X, classes, kern))
    assert not ref.matvec_without_class_block  # the numpy base forms blocks; no Lanczos path
    op = CentredGramOperator(DaskGramOperator(X, classes, kern, cache="recompute", block_rows=5))
    for k in range(3):
        Gk = ref.class_gram(k)
        v = np.random.default_rng(k).standard_normal(Gk.shape[0])
        V = np.random.default_rng(k + 10).standard_normal((Gk.shape[0], 2))
        np.testing.assert_allclose(op.class_matvec(k, v), Gk @ v, atol=1e-12)
        np.testing.assert_allclose(op.class_matvec(k, V), Gk @ V, atol=1e-12)
    dense = starts.kernel_decoupled_z(ref, classes, "global")
    monkeypatch.setattr(op, "class_gram", lambda k: pytest.fail("formed a dense class block"))
    monkeypatch.setattr(starts, "_DENSE_CLASS_GRAM_BYTES", 0)
    lanczos = starts.kernel_decoupled_z(op, classes, "global")
    for k in range(3):
        a, b = dense[y == k], lanczos[y == k]
        np.testing.assert_allclose(np.sign(a @ b) * b, a, rtol=1e-7, atol=1e-9)


def test_gram_operator_products_match_numpy(client):
    X, y = _data(n_per_class=11, seed=5)
    classes = ClassIndex(y, 3)  # unsorted: the operator sorts internally
    kern = make_kernel("rbf", n_features=X.shape[1], gamma=0.1)
    ref = NumpyGramOperator(X, classes, kern)
    op = DaskGramOperator(X, classes, kern, cache="recompute", block_rows=5)
    z = np.random.default_rng(0).standard_normal((3, len(y)))
    V = np.random.default_rng(1).standard_normal((len(y), 4))
    np.testing.assert_allclose(op.class_matmul(z), ref.class_matmul(z), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(op.matmul(V), ref.matmul(V), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(op.matmul(np.ones((len(y), 1))), ref.matmul(np.ones((len(y), 1))))
    for k in range(3):
        np.testing.assert_allclose(op.class_gram(k), ref.class_gram(k), atol=1e-14)
        v = np.random.default_rng(k).standard_normal(ref.class_gram(k).shape[0])
        np.testing.assert_allclose(op.class_matvec(k, v), ref.class_gram(k) @ v, atol=1e-12)
    np.testing.assert_allclose(op.diagonal(), ref.diagonal(), atol=1e-14)
    np.testing.assert_allclose(op.columns([3, 0]), ref.columns([3, 0]), atol=1e-14)
    np.testing.assert_allclose(op.covariance_moments(), ref.covariance_moments(), rtol=1e-12)


def test_dask_operator_keeps_x_on_the_workers_not_the_driver(client):
    """X (sorted) is on every worker from the start, so a lost worker cannot take the only copy,
    and the driver keeps none (issue 40): G's columns for the certificate are computed on the
    workers, in the operator's input order whether or not the classes come sorted; the
    workers drop X when the operator is closed."""
    X, y = _data(n_per_class=30, seed=9)
    shuffled = np.random.default_rng(1).permutation(len(y))
    X, y = X[shuffled], y[shuffled]
    classes = ClassIndex(y, 3)
    assert classes.order is not None
    kern = make_kernel("rbf", n_features=X.shape[1], gamma=0.1)
    ref = NumpyGramOperator(X, classes, kern)
    op = DaskGramOperator(X, classes, kern, cache="recompute", tile_rows=16)
    assert op.uses_tiles
    assert not hasattr(op, "X") and not hasattr(op, "_Xs")

    def held(dask_worker):
        return sorted(str(k).split("-")[1] for k in dask_worker.data.keys()
                      if str(k).startswith("catdask-"))

    assert all("X" in names for names in client.run(held).values())  # every worker
    idx = np.array([5, 0, 77, 31])
    np.testing.assert_allclose(op.columns(idx), kern(X, X[idx]), atol=1e-14)
    np.testing.assert_allclose(op.columns(idx), ref.columns(idx), atol=1e-14)
    z = np.random.default_rng(0).standard_normal((3, len(y)))
    np.testing.assert_allclose(op.class_matmul(z), ref.class_matmul(z), rtol=1e-12,
                               atol=1e-12)
    np.testing.assert_allclose(op.class_gram(1), ref.class_gram(1), atol=1e-14)
    op.close()
    deadline = time.monotonic() + 10  # the workers drop released keys asynchronously
    while (any("X" in names for names in client.run(held).values())
           and time.monotonic() < deadline):
        time.sleep(0.05)
    assert all("X" not in names for names in client.run(held).values())


@pytest.mark.parametrize("precision", ["float64", "float32"])
def test_gram_tile_pass_matches_numpy_and_dense(client, precision):
    """The Dask tile pass (tile pairs in groups on the workers, their partial sums added on
    the driver) equals the numpy operator's and, in float64, the brute-force G @ Z. In
    float32 each task's band is rounded to float32 once and the driver adds the bands in
    float64, so the two agree to float32 rounding (one task in numpy: one rounding)."""
    X, y = _data(n_per_class=40, seed=8)
    classes = ClassIndex(y, 3)
    kern = make_kernel("rbf", n_features=X.shape[1], gamma=0.1)
    kw = dict(precision=precision, tile_rows=32)
    ref = NumpyGramOperator(X, classes, kern, max_gram_bytes=0, **kw)
    op = DaskGramOperator(X, classes, kern, cache="recompute", **kw)
    assert op.uses_tiles and ref.uses_tiles
    z = np.random.default_rng(0).standard_normal((3, len(y)))
    B, B_ref = op.class_matmul(z), ref.class_matmul(z)
    if precision == "float64":
        np.testing.assert_allclose(B, B_ref, rtol=1e-12, atol=1e-12)
    else:
        np.testing.assert_allclose(B, B_ref, rtol=0, atol=2e-7 * np.abs(B_ref).max())
    Z = np.zeros((3, len(y), 3))
    for r in range(3):
        Z[r, np.arange(len(y)), y] = z[r]
    dense = kern(X, X) @ Z
    rtol = 1e-12 if precision == "float64" else 1e-5
    np.testing.assert_allclose(B, dense, rtol=0, atol=rtol * np.abs(dense).max())
    op.close()


def test_tile_tasks_grow_with_their_band_not_only_with_their_work(client):
    """A tile-pass task returns a band of up to K N R sums whatever its size, so a task takes
    at least ``tile_entries_per_band_entry`` kernel entries per band entry: without that rule
    (the former one) small tasks multiply the bands a pass moves; with it, one per thread."""
    X, y = _data(n_per_class=200, seed=3)
    classes = ClassIndex(y, 3)
    op = DaskGramOperator(X, classes, make_kernel("rbf", n_features=X.shape[1], gamma=0.1),
                          cache="recompute", precision="float32", tile_rows=32)
    zt = np.zeros((len(y), 2), dtype=np.float32)
    op.tile_task_entries = 1_000

    def n_tasks():
        tasks, _ = op._tile_tasks(gram_tiles.gram_symmetric_class_product, op._tile_pairs,
                                  "float32", op._offsets, zt=zt)
        return len(tasks)

    op.tile_entries_per_band_entry = 0
    assert n_tasks() > 50
    op.tile_entries_per_band_entry = 100  # band: 2 restarts x 3 classes x 600 rows
    assert n_tasks() == op._threads
    z = np.random.default_rng(1).standard_normal((2, len(y)))
    ref = NumpyGramOperator(X, classes, op.kernel, precision="float32", tile_rows=32,
                            max_gram_bytes=0)
    np.testing.assert_allclose(op.class_matmul(z), ref.class_matmul(z), rtol=0,
                               atol=2e-7 * np.abs(ref.class_matmul(z)).max())
    op.close()


def test_auto_precision_fit_matches_numpy_and_float64(client):
    """precision="auto" on the Dask recompute path (float32 tiles, float64 polish) reaches the
    float64 fit's objective, and the numpy recompute path's."""
    X, y = _data(n_per_class=60, seed=9)
    kw = dict(gamma=0.1, n_restarts=2, random_state=0, certify=False)
    with gram_options(cache="recompute"):
        dask_auto = KernelCategorySpace(**kw).fit(da.from_array(X, chunks=(50, -1)), y)
    numpy_auto = KernelCategorySpace(max_gram_bytes=0, **kw).fit(X, y)
    exact = KernelCategorySpace(precision="float64", **kw).fit(X, y)
    assert dask_auto.n_iter_float32_ > 0 and dask_auto.converged_
    for fit in (dask_auto, numpy_auto):
        assert abs(fit.objective_ - exact.objective_) <= RTOL * abs(exact.objective_)


@pytest.mark.parametrize("origin", ["class", "global"])
def test_fit_with_the_tiled_start_matches_the_float64_fit(client, monkeypatch, origin):
    """The Dask tile path's whole set-up (float64 centring pass, the decoupled start's
    lockstep Lanczos on float32 class tiles, block or single-vector) and fit reach the numpy
    float64 fit's objective (dense starts) to 1e-9 (issue 27)."""
    from catdask.core import starts

    X, y = _data(n_per_class=60, seed=12)
    kw = dict(gamma=0.1, n_restarts=2, random_state=0, certify=False, origin=origin)
    exact = KernelCategorySpace(precision="float64", **kw).fit(X, y)
    monkeypatch.setattr(starts, "_DENSE_EIG_MAX", 20)  # every class takes the tiled start
    with gram_options(cache="recompute"):
        fit = KernelCategorySpace(**kw).fit(da.from_array(X, chunks=(50, -1)), y)
    assert fit.n_iter_float32_ > 0 and fit.converged_
    assert abs(fit.objective_ - exact.objective_) <= RTOL * abs(exact.objective_)


def test_polish_on_dask_tiles_equals_float64_with_two_float64_passes(client):
    """The polish (docs/design.md §3d) on the Dask tile pass: from the same starts the
    objective equals the float64 fit's to 1e-9, and the float64 products are two passes (the
    anchor and the check) for all restarts together."""
    from catdask.certificate.certifiers import NoCertifier
    from catdask.core.engine import SolverOptions, Starts, fit_restarts
    from catdask.core.precision import Float32ThenFloat64
    from catdask.core.problems import CategoryObjective, KernelProblem
    from catdask.core.starts import kernel_random_z

    X, y = _data(n_per_class=50, seed=11)
    order = np.argsort(y, kind="stable")
    classes = ClassIndex(y[order], 3)
    op = DaskGramOperator(X[order], classes, make_kernel("rbf", n_features=5, gamma=0.1),
                          cache="recompute", tile_rows=32)
    problem = KernelProblem(op, CategoryObjective("quadratic", "class"))
    z0 = kernel_random_z(2, classes, "class", np.random.default_rng(3))
    options = SolverOptions(tol=1e-9, max_iter=300)
    exact = fit_restarts(problem, Starts(("random",) * 2, lambda: problem.start_from_z(z0)),
                         solver_options=options, certifier=NoCertifier("off"))
    seen, tiled = [], op._tiled_class_matmul

    def counted(zs, pairs=None):
        if pairs is None:
            seen.append(op.precision)
        return tiled(zs, pairs)

    op._tiled_class_matmul = counted
    mixed = fit_restarts(problem, Starts(("random",) * 2, lambda: problem.start_from_z(z0)),
                         solver_options=options, certifier=NoCertifier("off"),
                         precision_schedule=Float32ThenFloat64(op))
    op.close()
    assert all(r.converged for r in mixed.restarts)
    assert seen.count("float64") == 2 and seen.count("float32") > 0
    for a, b in zip(mixed.restarts, exact.restarts):
        assert abs(a.objective - b.objective) <= RTOL * abs(b.objective)


def test_restarts_share_gram_passes(client):
    """R restarts cost the same number of Gram passes as one: G [Z_1 ... Z_R] per sweep."""
    X, y = _data(n_per_class=10, seed=6)
    classes = ClassIndex(np.sort(y), 3)
    kern = make_kernel("rbf", n_features=X.shape[1], gamma=0.1)
    op = DaskGramOperator(X[np.argsort(y, kind="stable")], classes, kern, cache="recompute")
    rng = np.random.default_rng(0)
    B1 = op.class_matmul(rng.standard_normal((1, len(y))))
    z8 = rng.standard_normal((8, len(y)))
    before = op.gram_passes
    B8 = op.class_matmul(z8)
    assert op.gram_passes - before == 1 and B8.shape == (8, len(y), 3) and B1.shape[0] == 1


def test_kernel_fit_keeps_andersons_history_on_the_workers(client, monkeypatch):
    """Issue 40: on a cluster the driver holds no N-sized Anderson history (every restart's
    entries are futures on the workers, the driver keeps their keys), and the iterates are those
    of the same fit with the history in the driver's memory, mixtures taken and all."""
    X, y = _data(n_per_class=20, seed=3)
    default_min_bytes = acceleration.HELD_HISTORY_MIN_BYTES
    monkeypatch.setattr(acceleration, "HELD_HISTORY_MIN_BYTES", 0)
    kw = dict(gamma=0.1, n_restarts=2, max_iter=60, random_state=0, certify=False,
              precision="float64")
    made = []
    real = make_stepper
    monkeypatch.setattr("catdask.core.solver.make_stepper",
                        lambda *a, **k: made.append(real(*a, **k)) or made[-1])
    held = KernelCategorySpace(**kw).fit(da.from_array(X, chunks=(20, -1)), y)
    stepper = made[-1]
    assert stepper.accepted.sum() > 0
    for hist in stepper._history:
        assert isinstance(hist, HeldHistory) and len(hist) >= 1
        assert hist.g is None and hist.residual is None and hist.lifted_base is None
        assert all(isinstance(hist.keys[s], str) for s in hist.order)
    with monkeypatch.context() as m:
        # A history this small (N = 60) stays on the driver by default: round trips cost more.
        m.setattr(acceleration, "HELD_HISTORY_MIN_BYTES", default_min_bytes)
        on_driver = KernelCategorySpace(**kw).fit(da.from_array(X, chunks=(20, -1)), y)
    assert not any(isinstance(h, HeldHistory) for h in made[-1]._history)
    _assert_same_fit(held, on_driver, "dual_coef_")
    assert [r.history for r in held.restarts_] == [r.history for r in on_driver.restarts_]


def test_the_driver_keeps_no_input_it_sent(client):
    """distributed's client logs the messages it sends (the last 1000 under 1 MB each), each
    pass's inputs with them; a BlockRunner's client keeps none (issue 40: on the driver, they
    were every iteration's z and history entries for the rest of the fit)."""
    runner = BlockRunner()
    a = np.ones(50_000)
    alive = weakref.ref(a)
    (key,) = runner.persist([(np.sum, a)], "probe")
    assert client.gather(runner._data[key]) == 50_000
    del a
    gc.collect()
    assert alive() is None


def test_gram_cache_modes_agree(client, tmp_path):
    X, y = _data(n_per_class=15, seed=7)
    Xd = da.from_array(X, chunks=(20, -1))
    # precision="float64": float32 tiles (recompute mode only) would change the 8 iterates
    kw = dict(gamma=0.05, n_restarts=1, init="decoupled", tol=1e-7, max_iter=8, certify=False,
              precision="float64")
    fits = {}
    for mode, extra in [("recompute", {}), ("memory", {}),
                        ("zarr", {"store": str(tmp_path / "g64.zarr")}),
                        ("zarr32", {"store": str(tmp_path / "g32.zarr"), "dtype": "float32"})]:
        with gram_options(cache=mode.rstrip("32"), block_rows=16, **extra):
            fits[mode] = KernelCategorySpace(**kw).fit(Xd, y)
    ref = fits["recompute"]
    for mode in ("memory", "zarr"):
        _assert_same_fit(fits[mode], ref, "dual_coef_")
    assert abs(fits["zarr32"].objective_ - ref.objective_) <= 1e-5 * abs(ref.objective_)
    g = zarr.open_array(str(tmp_path / "g64.zarr"), mode="r")
    assert g.shape == (45, 45) and g.dtype == np.float64
    assert zarr.open_array(str(tmp_path / "g32.zarr"), mode="r").dtype == np.float32
    # a second fit reuses the cache (same data, kernel and dtype): the store is not rewritten
    stamp = os.stat(tmp_path / "g64.zarr" / "zarr.json").st_mtime_ns
    with gram_options(cache="zarr", store=str(tmp_path / "g64.zarr"), block_rows=16):
        again = KernelCategorySpace(**kw).fit(Xd, y)
    assert os.stat(tmp_path / "g64.zarr" / "zarr.json").st_mtime_ns == stamp
    _assert_same_fit(again, ref, "dual_coef_")


# ------------------------------------------------------------------------------ inputs
def test_zarr_array_and_group_path_inputs(client, tmp_path):
    X, y = _data(seed=8)
    labels = np.array(["ant", "bee", "cat"])
    lin_kw = dict(n_restarts=1, init="decoupled", acceleration="none")  # same iterates
    ker_kw = dict(gamma=0.05, n_restarts=1, init="decoupled", max_iter=30, certify=False)
    ref_lin = CategorySpace(**lin_kw).fit(X, labels[y])
    ref_ker = KernelCategorySpace(**ker_kw).fit(X, labels[y])
    # a plain zarr group: X chunked by rows, y codes, labels in the attributes
    path = tmp_path / "plain.zarr"
    g = zarr.open_group(str(path), mode="w")
    g.create_array("X", data=X, chunks=(16, X.shape[1]))
    g.create_array("y", data=y.astype(np.int32), chunks=(16,))
    g.attrs["classes"] = labels.tolist()
    lin = CategorySpace(**lin_kw).fit(str(path), None)
    _assert_same_fit(lin, ref_lin, "components_")
    ker = KernelCategorySpace(**ker_kw).fit(path, None)
    _assert_same_fit(ker, ref_ker, "dual_coef_")
    # a zarr array with labels given
    lin2 = CategorySpace(**lin_kw).fit(g["X"], labels[y])
    _assert_same_fit(lin2, ref_lin, "components_")
    # a data set of the catdask store
    datasets = pytest.importorskip("catdask.store.datasets")
    datasets.write_dataset(tmp_path / "store", "toy", X, labels[y])
    lin3 = CategorySpace(**lin_kw).fit(
        str(tmp_path / "store" / "datasets" / "toy"), None)
    _assert_same_fit(lin3, ref_lin, "components_")


@pytest.mark.slow
def test_transform_is_lazy_blockwise_and_matches(client, tmp_path):
    X, y = _data(seed=9)
    Xn = np.random.default_rng(0).standard_normal((37, X.shape[1])) + 5.0
    Xd = da.from_array(Xn, chunks=(10, -1))
    for est in (CategorySpace(origin="global", n_restarts=2, random_state=0),
                KernelCategorySpace(gamma=0.05, origin="global", n_restarts=2, max_iter=30,
                                    random_state=0, certify=False)):
        est.fit(X, y)
        T = est.transform(Xd)
        assert isinstance(T, da.Array)
        assert T.chunks == ((10, 10, 10, 7), (3,))
        np.testing.assert_allclose(T.compute(), est.transform(Xn), rtol=1e-12, atol=1e-12)
        np.testing.assert_array_equal(np.asarray(est.predict(Xd)), est.predict(Xn))
    with pytest.raises(ValueError, match="features"):
        est.transform(da.from_array(Xn[:, :2], chunks=(10, -1)))


def test_local_threaded_scheduler_without_client():
    """With Dask's threaded scheduler chosen explicitly, no cluster is involved."""
    import dask

    X, y = _data(seed=10)
    Xd = da.from_array(X, chunks=(25, -1))
    with dask.config.set(scheduler="threads"):
        for est, coef in ((CategorySpace(objective="absolute", n_restarts=1, init="decoupled",
                                         max_iter=15), "components_"),
                          (KernelCategorySpace(gamma=0.05, n_restarts=1, init="decoupled",
                                               max_iter=15, certify=False), "dual_coef_")):
            ref = type(est)(**est.get_params()).fit(X, y)
            _assert_same_fit(est.fit(Xd, y), ref, coef)


def test_is_distributed_input():
    assert not is_distributed_input(np.zeros((3, 2)))
    assert not is_distributed_input([[1.0, 2.0]])
    assert is_distributed_input(da.zeros((3, 2)))
    assert is_distributed_input("some/path.zarr")


# ------------------------------------------------------------------------------ Nystroem
def test_nystroem_fit_and_warm_start():
    X, y = make_blobs(n_per_class=60, n_features=4, n_classes=3, spread=2.0, seed=11)
    perm = np.random.default_rng(0).permutation(len(y))
    X, y = X[perm], y[perm]
    approx = KernelCategorySpace(gamma=0.02, approximation="nystroem", n_landmarks=120,
                                 origin="class", n_restarts=3, random_state=0,
                                 certify=False).fit(X, y)
    assert approx.dual_coef_.shape == (3, 120) and approx.X_fit_.shape == (120, 4)
    assert approx.training_coef_.shape == (3, len(y))
    assert approx.transform(X).shape == (len(y), 3)
    kw = dict(gamma=0.02, origin="class", n_restarts=1, tol=1e-8, random_state=0, certify=False)
    cold = KernelCategorySpace(init="decoupled", **kw).fit(X, y)
    warm = KernelCategorySpace(init=approx.training_coef_, **kw).fit(X, y)
    # same optimum, fewer exact iterations (measured: 27 instead of 45)
    assert warm.objective_ == pytest.approx(cold.objective_, rel=1e-9)
    assert warm.n_iter_ < cold.n_iter_
    # for origin="class" the Nystroem axes lie in the RKHS, so the exact objective at the
    # warm start equals the approximate fit's objective (a lower bound on the exact optimum)
    assert warm.restarts_[0].history[0] == pytest.approx(approx.objective_, rel=1e-9)
    assert approx.objective_ <= cold.objective_
    # the Nystroem model's projections approximate the exact ones
    corr = [abs(np.corrcoef(approx.transform(X)[:, k], warm.transform(X)[:, k])[0, 1])
            for k in range(3)]
    assert min(corr) > 0.9


def test_nystroem_on_dask_input(client):
    X, y = _data(n_per_class=30, seed=12)
    # The plain iteration (as in the other same-iterate tests): Anderson extrapolation can turn
    # a last-bit difference in the chunked sums into a 1e-8 difference of the final iterate.
    kw = dict(gamma=0.05, approximation="nystroem", n_landmarks=40, n_restarts=1,
              init="decoupled", random_state=0, certify=False, acceleration="none")
    ref = KernelCategorySpace(**kw).fit(X, y)
    got = KernelCategorySpace(**kw).fit(da.from_array(X, chunks=(25, -1)), y)
    _assert_same_fit(got, ref, "dual_coef_")
    np.testing.assert_array_equal(got.landmark_indices_, ref.landmark_indices_)


@pytest.mark.slow
def test_auto_landmarks_on_dask_input_are_the_numpy_ones(client):
    X, y = _data(n_per_class=30, seed=13)
    kw = dict(gamma=0.05, approximation="nystroem", n_landmarks="auto", n_restarts=1,
              init="decoupled", random_state=0, certify=False, acceleration="none")
    ref = KernelCategorySpace(**kw).fit(X, y)
    got = KernelCategorySpace(**kw).fit(da.from_array(X, chunks=(25, -1)), y)
    np.testing.assert_array_equal(got.landmark_indices_, ref.landmark_indices_)
    assert got.landmark_residual_ == pytest.approx(ref.landmark_residual_, rel=1e-9)
    _assert_same_fit(got, ref, "dual_coef_")


@pytest.mark.parametrize("origin", ["global", "class"])
@pytest.mark.slow
def test_linear_class_statistics_on_dask_need_no_coordinates_pass(client, origin, monkeypatch):
    """The Gaussian rules' class statistics come from the class moments in closed form: they
    equal the statistics of ``transform(X)``, and the data are never projected for them
    (at N = 2e7 the (N, K) coordinates on the driver were 1.6 GB)."""
    from catdask.estimators import linear
    from catdask.estimators.classify import class_statistics
    from catdask.operators import DaskDataOperator

    X, y = _data(n_per_class=40, seed=21)
    calls = []
    real = DaskDataOperator.own_projections
    monkeypatch.setattr(DaskDataOperator, "own_projections",
                        lambda self, W: calls.append(1) or real(self, W))
    est = CategorySpace(origin=origin, n_restarts=2, random_state=0).fit(
        da.from_array(X, chunks=(30, -1)), y)
    assert calls == []
    ref = class_statistics(est.transform(X), np.searchsorted(est.classes_, y), 3)
    np.testing.assert_allclose(est.class_means_, ref.means, atol=1e-10)
    np.testing.assert_allclose(est.class_covariances_, ref.covariances, atol=1e-10)
    # Above the class-matrix budget the statistics come from one projection pass instead.
    monkeypatch.setattr(linear, "CLASS_MATRIX_BUDGET_BYTES", 0)
    big = CategorySpace(origin=origin, n_restarts=2, random_state=0).fit(
        da.from_array(X, chunks=(30, -1)), y)
    assert calls
    ref = class_statistics(big.transform(X), np.searchsorted(big.classes_, y), 3)
    np.testing.assert_allclose(big.class_covariances_, ref.covariances, atol=1e-10)


# ------------------------------------------------------------------------------ cluster
def test_dask_client_context_uses_env_scheduler(client, monkeypatch):
    monkeypatch.setenv(ENV_SCHEDULER, client.scheduler.address)
    with dask_client_context() as c:
        assert c is not client
        assert c.scheduler.address == client.scheduler.address
        assert distributed.default_client() is c
    assert c.status in ("closed", "closing")


def test_dask_client_context_reuses_current_client(client, monkeypatch):
    monkeypatch.delenv(ENV_SCHEDULER, raising=False)
    with dask_client_context() as c:
        assert c is client


# ------------------------------------------------------------------------------ resilience
def test_worker_killed_mid_kernel_fit(client):
    """SIGKILL a worker during a Gram pass: the fit completes with the same result."""
    X, y = make_blobs(n_per_class=300, n_features=5, n_classes=3, seed=13)
    kw = dict(gamma=0.05, n_restarts=2, init="random", tol=1e-7, max_iter=8, random_state=0,
              certify=False)
    ref = KernelCategorySpace(**kw).fit(X, y)
    pids_before = set(client.run(os.getpid).values())
    killed = []

    def kill_soon(iteration, *args):
        if iteration == 3 and not killed:
            pid = sorted(pids_before)[0]

            def kill():
                time.sleep(0.02)  # land inside the next pass's tasks
                os.kill(pid, 9)
                killed.append(pid)

            threading.Thread(target=kill, daemon=True).start()

    est = KernelCategorySpace(**kw)
    with gram_options(cache="memory", block_rows=150), solver_progress(kill_soon):
        est.fit(da.from_array(X, chunks=(300, -1)), y)  # kill loses cached Gram blocks too
    assert killed
    _assert_same_fit(est, ref, "dual_coef_")
    client.wait_for_workers(2, timeout=30)
    assert set(client.run(os.getpid).values()) != pids_before


def test_catdask_workers_import_the_task_modules_as_they_start(client):
    """The worker preload imports what the first Gram pass unpickles (the block functions,
    the kernels), so a fresh cluster's first fit does not pay for it (about 50 ms)."""
    def loaded(dask_worker):
        import sys

        return {m: m in sys.modules for m in ("catdask.operators.blocks", "catdask.kernels")}

    assert all(all(v.values()) for v in client.run(loaded).values())


def test_the_worker_preload_imports_what_its_caller_names():
    """catdask.distributed names no module of its own, not even dask.array (25 MiB per worker,
    needed only where an input chunk is read; issue 27); catdask.operators adds its task
    modules (so distributed imports no operator). The user's configured preloads keep their
    arguments."""
    import dask

    from catdask.distributed.preloads import (
        WORKER_PRELOAD,
        worker_imports,
        worker_preload_argv,
        worker_preloads,
    )

    assert "dask.array" not in worker_imports()
    assert {"catdask.kernels", "catdask.operators.blocks"} <= set(worker_imports())
    with dask.config.set({"distributed.worker.preload": ["mine", "theirs"],
                          "distributed.worker.preload-argv": ["--flag"]}):
        assert worker_preloads() == ["mine", "theirs", WORKER_PRELOAD]
        assert worker_preload_argv(["a", "b"]) == [["--flag"], ["--flag"], ["a", "b"]]
    with dask.config.set({"distributed.worker.preload": ["mine"],
                          "distributed.worker.preload-argv": [["--x"]]}):
        assert worker_preload_argv([]) == [["--x"], []]


def _task_result(value):
    return np.full(3, float(value)), os.getpid()


def _sum_and_pid(*parts):
    return sum(p[0] for p in parts), os.getpid()


def test_runner_puts_several_values_on_every_worker_in_one_call(client):
    from catdask.distributed.execute import BlockRunner

    runner = BlockRunner()
    runner.client = client
    values = {"a": np.arange(5.0), "b": np.ones((2, 2))}
    keys = runner.put_many(values, everywhere=True)
    assert len(keys) == 2 and keys[0] != keys[1]
    holders = client.who_has([runner._data[k] for k in keys])
    assert all(len(holders[k]) == 2 for k in keys), holders
    np.testing.assert_array_equal(runner.run([(np.sum, keys[0])])[0], 10.0)
    runner.release()


def test_runner_combines_few_small_parts_on_the_driver_and_many_on_the_workers(client):
    """``reduce`` gathers a few small parts and combines them in this process (one hop fewer
    than the tree); without a size, or above the byte budget, the tree runs on the workers."""
    from catdask.distributed import execute

    runner = execute.BlockRunner()
    runner.client = client
    tasks = [(_task_result, v) for v in (1, 2, 3)]
    driver_sum, where = runner.reduce(tasks, _sum_and_pid, part_nbytes=24)
    assert where == os.getpid()
    worker_pids = set(client.run(os.getpid).values())
    tree_sum, where = runner.reduce(tasks, _sum_and_pid)
    assert where in worker_pids
    too_big, where = runner.reduce(tasks, _sum_and_pid,
                                   part_nbytes=execute.DRIVER_COMBINE_BYTES)
    assert where in worker_pids
    for total in (driver_sum, tree_sum, too_big):
        np.testing.assert_array_equal(total, np.full(3, 6.0))


def _after(seconds, value):
    import time

    time.sleep(seconds)
    return value


def test_runner_accumulate_hands_each_result_to_the_driver_as_it_finishes(client):
    """``accumulate`` calls ``add`` in this process once per task, in finishing order (a slow
    first task arrives last), on a cluster and on local threads; a failing task raises."""
    from catdask.distributed import execute

    runner = execute.BlockRunner()
    runner.client = client
    seen = []
    runner.accumulate([(_after, 1.0, "slow"), (_after, 0.0, "a"), (_after, 0.0, "b")],
                      lambda part: seen.append((part, os.getpid())))
    assert sorted(p for p, _ in seen) == ["a", "b", "slow"]
    assert seen[-1][0] == "slow" and {pid for _, pid in seen} == {os.getpid()}
    local = execute.BlockRunner()
    local.client = None
    total = []
    local.accumulate([(_after, 0.0, v) for v in (1, 2, 3)], total.append)
    assert sorted(total) == [1, 2, 3]
    with pytest.raises(ZeroDivisionError):
        runner.accumulate([(operator_truediv, 1, 0)], total.append)


def operator_truediv(a, b):
    return a / b


class _Untokenizable:
    """A task argument that Dask's tokenize refuses (it would be hashed into a graph name)."""

    def __init__(self, value):
        self.value = value

    def __dask_tokenize__(self):
        raise AssertionError("the graph was tokenized")


def _unwrap(arg):
    return arg.value * 2


def test_runner_graphs_are_not_hashed(client):
    """``Client.get`` of a plain dict hashes every task's arguments to name the graph (z is in
    every task of a Gram pass); the runner's keys are unique, so it names graphs at random."""
    from catdask.distributed.execute import BlockRunner

    runner = BlockRunner()
    runner.client = client
    assert runner.run([(_unwrap, _Untokenizable(21))]) == [42]
    with pytest.raises(AssertionError, match="tokenized"):  # what the runner avoids
        client.get({"plain-dict-graph": (_unwrap, _Untokenizable(1))}, "plain-dict-graph")


def test_tile_tasks_run_with_one_blas_thread_and_restore_it():
    """``_one_blas_thread`` (every tile task) limits BLAS to one thread while the task runs,
    with the controller kept from the first call, and puts the setting back after."""
    from threadpoolctl import threadpool_info, threadpool_limits

    from catdask.operators import dask_gram

    def blas_threads():
        return sorted({p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"})

    with threadpool_limits(limits=2, user_api="blas"):
        before = blas_threads()
        for _ in range(2):  # the first call makes the controller, the second reuses it
            assert dask_gram._one_blas_thread(blas_threads) == [1]
            assert blas_threads() == before
    assert len(dask_gram._BLAS_CONTROLLER) == 1


@pytest.mark.slow
def test_embedded_cluster_keeps_the_copies_of_x_on_every_worker():
    """The embedded cluster's scheduler runs without the Active Memory Manager, whose
    ReduceReplicas policy would drop the per-worker copies of X within seconds and put every
    task of a Gram pass on the one worker left holding X (measured: 2-worker speed-up 1.2x)."""
    import time

    from catdask.distributed.cluster import close_embedded_cluster, embedded_cluster
    from catdask.distributed.execute import BlockRunner

    close_embedded_cluster()
    emb = embedded_cluster(n_workers=2, dashboard_port=0)
    try:
        runner = BlockRunner()
        runner.client = emb
        key = runner.put(np.ones((1000, 10)), "X", everywhere=True)
        time.sleep(5)  # the AMM runs every 2 s by default
        holders = emb.who_has([runner._data[key]])[key]
        assert len(holders) == 2, holders
        runner.release()
    finally:
        close_embedded_cluster()


# ------------------------------------------------------------------------------ pipeline
def test_fit_on_dataset_submits_each_key_once(client, tmp_path, caplog):
    """The standardised data set is computed once on the workers and shared by the fit and the
    metrics: no graph resubmits its keys differently fused (the scheduler's "Detected different
    `run_spec`" warning, which a user saw in every linear train run)."""
    import logging

    from catdask.pipeline import ModelSpec, fit_on_dataset
    from catdask.store import write_dataset

    X, y = _data(n_per_class=40)
    write_dataset(tmp_path, "blobs", X, y)
    with caplog.at_level(logging.WARNING, logger="distributed.scheduler"):
        for method in ("cqs", "kcqs"):
            outcome = fit_on_dataset(tmp_path, "blobs", ModelSpec(method=method, n_restarts=2),
                                     client=client)
            outcome.release()
            assert outcome.metrics["train_accuracy_predict"] > 0.9
    assert "run_spec" not in caplog.text, caplog.text


@pytest.mark.slow
def test_fit_on_dataset_uses_the_given_client_when_another_is_the_default(client, tmp_path):
    """`fit_on_dataset(client=c)` computes on `c` even when `c` is not dask's default client
    (the standardised blocks are persisted on c's workers; computing them with another
    scheduler failed with "Missing dependency")."""
    from catdask.pipeline import ModelSpec, fit_on_dataset
    from catdask.store import write_dataset

    X, y = _data(n_per_class=40)
    write_dataset(tmp_path, "blobs", X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "Port 8787 in use"
        other_cluster, other = start_local_cluster(1, set_as_default=False)
    try:
        assert distributed.default_client() is client  # the module's client stays the default
        outcome = fit_on_dataset(tmp_path, "blobs", ModelSpec(method="kcqs", n_restarts=2),
                                 client=other)
        outcome.release()
        assert outcome.metrics["train_accuracy_predict"] > 0.9
    finally:
        other.close()
        other_cluster.close()


def test_catdask_clusters_batch_messages_briefly(client):
    """distributed batches messages every 10 ms (client) / 5 ms (scheduler to workers),
    hard-coded; a Gram pass is latency-bound at small N, so catdask's clusters shorten both.
    This notices a distributed release that renames the streams (the shortening would stop
    silently), and checks that a worker joining later is shortened too."""
    from types import SimpleNamespace

    from distributed.batched import BatchedSend

    from catdask.distributed.cluster import MESSAGE_BATCH_SECONDS, reduce_message_batching

    scheduler = client.cluster.scheduler
    assert client.scheduler_comm.interval <= MESSAGE_BATCH_SECONDS
    worker_streams = [scheduler.stream_comms[w] for w in scheduler.workers]
    assert len(worker_streams) == 2
    assert all(s.interval <= MESSAGE_BATCH_SECONDS for s in worker_streams)
    assert scheduler.client_comms[client.id].interval <= MESSAGE_BATCH_SECONDS

    # The workers' own streams (their "task finished" messages; distributed's 2 ms) are
    # shortened by catdask's worker preload.
    assert all(v <= MESSAGE_BATCH_SECONDS
               for v in client.run(lambda dask_worker: dask_worker.batched_stream.interval)
               .values())

    [plugin] = [p for name, p in scheduler.plugins.items() if name == "catdask-brief-batching"]
    joining = SimpleNamespace(stream_comms={"tcp://new": BatchedSend(interval="5ms")})
    plugin.add_worker(scheduler=joining, worker="tcp://new")
    assert joining.stream_comms["tcp://new"].interval <= MESSAGE_BATCH_SECONDS
    assert reduce_message_batching(SimpleNamespace()) == 0  # nothing to shorten: no error


def test_catdask_cpu_workers_leave_nvml_alone(client):
    """The workers of a catdask LocalCluster compute on the CPU: NVML diagnostics are off there
    (a GPU host's driver library is not loaded, its GPUs not polled), BLAS at one thread."""
    import os

    import dask

    seen = client.run(lambda: (dask.config.get("distributed.diagnostics.nvml"),
                               os.environ.get("OPENBLAS_NUM_THREADS")))
    assert seen and all(v == (False, "1") for v in seen.values())
