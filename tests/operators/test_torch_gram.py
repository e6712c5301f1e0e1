"""The PyTorch Gram operator (``device=...``) against the numpy operator and the dense G.

Runs on the CPU build of PyTorch in CI (the same code path as on a GPU, minus the fused
kernel), the fused Triton kernel under Triton's CPU interpreter, and on a GPU where one is
present (benchmarks/bench_device.py runs this file there). The contract suite
(test_contract.py) holds the operator to every member of the interface; here: both precisions,
the kernels, the estimator end to end, torch inputs, the Dask GPU-worker path and the errors.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the device operator needs PyTorch "
                            "(pip install 'catdask[gpu]')")

from catdask import KernelCategorySpace  # noqa: E402
from catdask.core.classes import ClassIndex  # noqa: E402
from catdask.kernels import make_kernel  # noqa: E402
from catdask.operators import NumpyGramOperator, TorchGramOperator  # noqa: E402
from tests.helpers.triton_cpu import relative_error  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def _data(N=240, D=6, K=3, seed=0):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, K, N)
    X = rng.normal(size=(N, D)) + 1.5 * y[:, None] + 4.0  # offset: centring is the kernel's
    return X, y


@pytest.mark.slow
def test_fused_kernel_matches_numpy_under_the_interpreter():
    """The fused Triton kernel (every product, both precisions, V split over launches, the
    squared kernel) on the CPU interpreter, in a process of its own (tests/helpers/triton_cpu.py
    says why)."""
    pytest.importorskip("triton", reason="the fused kernel's checks need Triton (Linux x86-64; "
                        "it comes with PyTorch's CUDA builds, or pip install triton)")
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    done = subprocess.run([sys.executable, "-m", "tests.helpers.triton_cpu"], env=env,
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "all checks passed" in done.stdout


def _check_products(op, ref, rng, *, rtol32=2e-5):
    N, K = ref.n_samples, ref.classes.n_classes
    z = rng.normal(size=(3, N))
    V = rng.normal(size=(N, 4))
    for precision, rtol in (("float64", 1e-12), ("float32", rtol32)):
        op.set_precision(precision)
        assert relative_error(op.class_matmul(z), ref.class_matmul(z)) < rtol
        assert relative_error(op.class_block_matmul(V),
                              ref.class_block_matmul(V)) < max(rtol, 1e-11)
    op.set_precision("float64")
    assert relative_error(op.matmul(V), ref.matmul(V)) < 1e-12
    assert relative_error(op.matmul(np.ones((N, 1))), ref.matmul(np.ones((N, 1)))) < 1e-12
    np.testing.assert_allclose(op.covariance_moments(), ref.covariance_moments(), rtol=1e-12)
    np.testing.assert_allclose(op.diagonal(), ref.diagonal(), rtol=1e-13)
    idx = np.array([0, 5, N - 1])
    assert relative_error(op.columns(idx), ref.columns(idx)) < 1e-13
    for k in range(K):
        n_k = len(ref.classes.members(k))
        v = rng.normal(size=n_k)
        assert relative_error(op.class_gram(k), ref.class_gram(k)) < 1e-13
        assert relative_error(op.class_matvec(k, v), ref.class_matvec(k, v)) < 1e-12


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("metric", ["rbf", "poly", "linear"])
def test_tiles_match_numpy(device, metric, rng):
    X, y = _data()
    classes = ClassIndex(y, 3)
    kernel = make_kernel(metric, n_features=X.shape[1])
    ref = NumpyGramOperator(X, classes, kernel)
    op = TorchGramOperator(X, classes, kernel, device=device, fused=False)
    _check_products(op, ref, rng, rtol32=2e-5 if metric == "rbf" else 1e-4)
    assert op.gram_passes > 0


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU here (the fused kernel "
                    "runs on the CPU interpreter in the test above)")
def test_fused_kernel_on_the_gpu_matches_numpy(rng):
    X, y = _data(N=3000, D=20, K=5)
    classes = ClassIndex(y, 5)
    kernel = make_kernel("rbf", n_features=X.shape[1])
    op = TorchGramOperator(X, classes, kernel, device="cuda")
    assert op.fused
    _check_products(op, NumpyGramOperator(X, classes, kernel), rng)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("origin", ["global", "class"])
def test_estimator_on_device_equals_numpy_fit(device, origin):
    """The same starts give the same optimum: the device's float32 phase is made exact by the
    float64 polish, as on the CPU (objective to 1e-9 relative)."""
    X, y = _data(N=300)
    params = dict(origin=origin, max_gram_bytes=0, n_restarts=3, random_state=0, certify=False)
    cpu = KernelCategorySpace(**params).fit(X, y)
    dev = KernelCategorySpace(**params, device=device).fit(X, y)
    assert dev.objective_ == pytest.approx(cpu.objective_, rel=1e-9)
    np.testing.assert_allclose(dev.transform(X), cpu.transform(X), rtol=0,
                               atol=1e-5 * np.abs(cpu.transform(X)).max())
    assert dev.n_iter_float32_ > 0  # the float32 phase ran on the device


def test_tensor_input_is_computed_on_its_device():
    X, y = _data(N=200)
    params = dict(n_restarts=2, random_state=0, certify=False)
    ref = KernelCategorySpace(**params).fit(X, y)
    fitted = KernelCategorySpace(**params).fit(torch.from_numpy(X), torch.from_numpy(y))
    assert fitted.objective_ == pytest.approx(ref.objective_, rel=1e-9)
    np.testing.assert_array_equal(fitted.predict(X), ref.predict(X))


def test_certificate_on_device_equals_cpu():
    X, y = _data(N=120)
    params = dict(n_restarts=2, random_state=0)
    cpu = KernelCategorySpace(**params).fit(X, y)
    dev = KernelCategorySpace(**params, device="cpu").fit(X, y)
    assert dev.certificate_.certified == cpu.certificate_.certified
    assert dev.certificate_.gap == pytest.approx(cpu.certificate_.gap, rel=1e-6, abs=1e-9)


def test_bad_devices_say_what_is_wrong():
    X, y = _data(N=60)
    with pytest.raises(ValueError, match="not a device PyTorch knows"):
        KernelCategorySpace(device="gpu0").fit(X, y)
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="sees no CUDA GPU"):
            KernelCategorySpace(device="cuda").fit(X, y)
    # A device type PyTorch knows but cannot use here: the same one-line error as the CLI's.
    with pytest.raises(ValueError, match="device='meta': PyTorch cannot use it here"):
        KernelCategorySpace(device="meta").fit(X, y)
    with pytest.raises(ValueError, match="approximation='nystroem' fits on N x m features"):
        KernelCategorySpace(approximation="nystroem", device="cpu").fit(X, y)
    with pytest.raises(ValueError, match="built-in kernel"):
        KernelCategorySpace(kernel=lambda a, b: float(a @ b), device="cpu").fit(X, y)


@pytest.fixture(scope="module")
def gpu_worker_cluster():
    """Two local workers that declare a GPU (their tasks run on the CPU stand-in)."""
    distributed = pytest.importorskip("distributed")
    from catdask import operators  # noqa: F401
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, resources={"GPU": 1},
                                  dashboard_address=None, host="127.0.0.1") as cluster:
        yield cluster


@pytest.mark.slow
def test_dask_gpu_workers_equal_numpy(gpu_worker_cluster, monkeypatch):
    """The fit through GPU workers equals the numpy fit (1e-9), and its round trips do not
    grow with K: one per product, so the decoupled start's Lanczos costs one per step for
    all its classes (classes above the dense limit; the smallest class stays dense here, so
    both start paths run) and an iteration's ``G Z`` one."""
    import dask.array as da
    import distributed

    from catdask.core import starts
    from catdask.operators.dask_torch_gram import DaskTorchGramOperator

    X, y = _data(N=200)
    sizes = np.bincount(y)
    monkeypatch.setattr(starts, "_DENSE_EIG_MAX", int(sizes.min()))
    params = dict(n_restarts=2, random_state=0, certify=False, max_gram_bytes=0)
    ref = KernelCategorySpace(**params).fit(X, y)

    calls = {"class_block_matmul": 0, "class_matmul": 0}
    seen = {}

    def counted(name):
        method = getattr(DaskTorchGramOperator, name)

        def wrapper(self, *args):
            if name == "class_matmul":
                seen.setdefault("setup", self.round_trips)
            calls[name] += 1
            return method(self, *args)
        return wrapper

    for name in calls:
        monkeypatch.setattr(DaskTorchGramOperator, name, counted(name))
    close = DaskTorchGramOperator.close

    def closing(self):
        seen["total"] = self.round_trips
        close(self)

    monkeypatch.setattr(DaskTorchGramOperator, "close", closing)
    with distributed.Client(gpu_worker_cluster):
        fitted = KernelCategorySpace(**params, device="cpu").fit(
            da.from_array(X, chunks=(70, -1)), y)
    assert fitted.objective_ == pytest.approx(ref.objective_, rel=1e-9)
    lanczos_steps = calls["class_block_matmul"]
    assert (sizes > sizes.min()).sum() >= 2 and lanczos_steps >= 2  # batched over classes
    # set-up: the centring moments (one trip for both; G 1 comes from them), then one trip
    # per Lanczos step; then one per G Z (the starts' and each iteration's), nothing else
    assert seen["setup"] == 1 + lanczos_steps
    assert seen["total"] == seen["setup"] + calls["class_matmul"]


@pytest.mark.parametrize("n_tasks", [1, 2, 3, 7])
def test_split_rows_covers_every_row_once_in_balanced_groups(n_tasks):
    from catdask.operators.dask_torch_gram import split_rows

    requests = [((0, 100), (0, 30), False), ((5, 5), (0, 9), False),
                ((0, 100), (30, 100), True), ((40, 90), (40, 90), False)]
    groups = split_rows(requests, n_tasks)
    assert len(groups) == n_tasks
    for i, ((a, b), _, _) in enumerate(requests):
        pieces = sorted(rows for g in groups for j, rows in g if j == i)
        if b <= a:
            assert not pieces
            continue
        assert pieces[0][0] == a and pieces[-1][1] == b
        assert all(p[1] == q[0] and p[0] < p[1] for p, q in zip(pieces, pieces[1:]))
    work = [sum((r1 - r0) * (requests[i][1][1] - requests[i][1][0]) for i, (r0, r1) in g)
            for g in groups]
    target = sum(work) / n_tasks
    assert all(target <= w < target + 70 for w in work[:-1])  # 70: the widest request


def test_dask_gpu_operator_is_one_round_trip_per_product(gpu_worker_cluster, rng):
    """Each product through the GPU workers equals numpy's and is one Dask graph, whatever
    the number of classes (K = 4 here)."""
    import distributed

    from catdask.operators.dask_torch_gram import DaskTorchGramOperator

    X, y = _data(N=160, K=4)
    classes = ClassIndex(y, 4)
    kernel = make_kernel("rbf", n_features=X.shape[1])
    ref = NumpyGramOperator(X, classes, kernel)
    z, V = rng.normal(size=(3, 160)), rng.normal(size=(160, 2))
    n_k = len(ref.classes.members(2))
    v = rng.normal(size=n_k)
    with distributed.Client(gpu_worker_cluster):
        with DaskTorchGramOperator(X, classes, kernel, worker_device="cpu") as op:
            products = [
                (lambda: op.class_matmul(z), lambda: ref.class_matmul(z)),
                (lambda: op.class_block_matmul(V), lambda: ref.class_block_matmul(V)),
                (lambda: op.matmul(V), lambda: ref.matmul(V)),
                (lambda: op.covariance_moments(), lambda: ref.covariance_moments()),
                (lambda: op.class_matvec(2, v), lambda: ref.class_matvec(2, v)),
            ]
            for ours, theirs in products:
                before = op.round_trips
                assert relative_error(np.asarray(ours()), np.asarray(theirs())) < 1e-12
                assert op.round_trips == before + 1
            before = op.round_trips
            op.matmul(np.ones((160, 1)))  # G 1: the cached moments, no trip
            assert op.round_trips == before


def test_dask_without_gpu_workers_is_refused(dask_scheduler):
    import dask.array as da
    import distributed

    X, y = _data(N=60)
    with distributed.Client(dask_scheduler):
        with pytest.raises(ValueError, match="none of the cluster's 2 workers declares one"):
            KernelCategorySpace(device="cpu").fit(da.from_array(X, chunks=(30, -1)), y)


def test_a_fused_kernel_that_does_not_compile_falls_back_to_tiles(monkeypatch, caplog, rng):
    """A GPU or Triton that cannot compile the fused kernel costs speed, not the fit."""
    from catdask.operators import fused_rbf, torch_gram

    def broken(*args, **kwargs):
        raise RuntimeError("no such instruction on this GPU")

    X, y = _data(N=90)
    classes = ClassIndex(y, 3)
    kernel = make_kernel("rbf", n_features=X.shape[1])
    op = TorchGramOperator(X, classes, kernel, device="cpu", fused=False)
    op.fused = True  # as on a GPU
    monkeypatch.setattr(fused_rbf, "rbf_matmul", broken)
    monkeypatch.setattr(torch_gram, "_FUSED_VARIANTS", {})
    z = rng.normal(size=(2, 90))
    with caplog.at_level("WARNING", logger="catdask.operators"):
        B = op.class_matmul(z)
    assert "does not run here" in caplog.text and "no such instruction" in caplog.text
    assert relative_error(B, NumpyGramOperator(X, classes, kernel).class_matmul(z)) < 1e-12
