"""``ModelSpec.device`` (``catdask train --device``) through the pipeline: the spec, where the
products run (:mod:`catdask.pipeline.device`), the checks before any data are read, and a fit on
the device equal to the default fit.

PyTorch's CPU build is the stand-in for a GPU (``device="cpu"`` runs the same code path as
``"cuda"`` minus the fused kernel, as in tests/operators/test_torch_gram.py); the GPU itself is
measured by benchmarks/bench_device.py.
"""

from __future__ import annotations

import sys

import pytest

torch = pytest.importorskip("torch", reason="the device path needs PyTorch "
                            "(pip install 'catdask[gpu]')")

from catdask.pipeline import ModelSpec, fit_on_dataset, register_outcome  # noqa: E402
from catdask.pipeline import training  # noqa: E402
from catdask.pipeline.device import GPU_WORKERS, HOST, device_placement  # noqa: E402
from catdask.store import list_models  # noqa: E402

KERNEL = dict(method="kcqs", n_restarts=2)


def test_the_spec_takes_a_device_for_kernel_methods_only():
    with pytest.raises(ValueError, match=r"device='cuda' applies only to the kernel methods "
                                         r"\(kcqs, kcas\).*cqs runs on the CPU"):
        ModelSpec(method="cqs", device="cuda")
    with pytest.raises(ValueError, match="device must be a string"):
        ModelSpec(method="kcqs", device=torch.device("cpu"))
    spec = ModelSpec(method="kcqs", device="cuda:1")
    assert ModelSpec.from_dict(spec.to_dict()) == spec
    assert spec.estimator().get_params()["device"] == "cuda:1"
    # A version recorded before the field existed reads as no device.
    old = {k: v for k, v in ModelSpec(method="kcqs").to_dict().items() if k != "device"}
    assert ModelSpec.from_dict(old) == ModelSpec(method="kcqs")
    assert ModelSpec(method="kcqs").estimator().get_params()["device"] is None


class _Client:
    """What device_placement reads of a Dask client: its workers' resources."""

    def __init__(self, *resources):
        self.workers = {f"w{i}": {"resources": r} for i, r in enumerate(resources)}

    def scheduler_info(self, n_workers=0):
        return {"workers": self.workers}


def test_gpu_workers_take_the_products_else_this_process():
    assert device_placement(None, _Client({"GPU": 1})) is None  # no device: as before
    assert device_placement("cpu", None) == HOST
    assert device_placement("cpu", _Client({}, {})) == HOST  # workers without a GPU
    # GPU workers: the device is theirs, so "cuda" is accepted even where this process has no
    # CUDA (the cluster's driver often has no GPU); only its form and PyTorch are checked here.
    assert device_placement("cuda", _Client({}, {"GPU": 1})) == GPU_WORKERS
    with pytest.raises(ValueError, match="not a device PyTorch knows"):
        device_placement("gpu0", _Client({"GPU": 1}))


@pytest.fixture
def no_data_read(monkeypatch):
    """Fail the test if fit_on_dataset opens the data set."""
    def refuse(*args, **kwargs):
        raise AssertionError("the data set was opened before the device was checked")

    monkeypatch.setattr(training, "open_dataset_arrays", refuse)


@pytest.mark.usefixtures("no_data_read")
def test_a_bad_device_fails_before_the_data_are_read(iris_store, monkeypatch):
    with pytest.raises(ValueError, match=r"device='gpu0' is not a device PyTorch knows .*use "
                                         r"e\.g\. 'cuda', 'cuda:0' or 'cpu'"):
        fit_on_dataset(iris_store, "iris", ModelSpec(**KERNEL, device="gpu0"))
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match=r"device='cuda': PyTorch sees no CUDA GPU here.*"
                                             r"pip install 'catdask\[gpu\]'"):
            fit_on_dataset(iris_store, "iris", ModelSpec(**KERNEL, device="cuda"))
    monkeypatch.setitem(sys.modules, "torch", None)  # PyTorch not installed
    with pytest.raises(ImportError, match=r"needs PyTorch: pip install 'catdask\[gpu\]'"):
        fit_on_dataset(iris_store, "iris", ModelSpec(**KERNEL, device="cpu"))


def test_a_fit_on_the_device_registers_the_default_fits_model(iris_store):
    default = fit_on_dataset(iris_store, "iris", ModelSpec(**KERNEL))
    default.release()
    outcome = fit_on_dataset(iris_store, "iris", ModelSpec(**KERNEL, device="cpu"))
    assert (default.device_placement, outcome.device_placement) == (None, HOST)
    assert outcome.estimator.device == "cpu"
    assert outcome.estimator.objective_ == pytest.approx(default.estimator.objective_,
                                                         rel=1e-9)
    assert outcome.certificate.certified == default.certificate.certified
    register_outcome(iris_store, "iris-kcqs", outcome, status="certified")
    (version,) = list_models(iris_store)
    assert version.meta["spec"]["device"] == "cpu"
    assert version.meta["device_placement"] == HOST


@pytest.mark.slow  # a cluster of its own (about 10 s on 2 loaded cores)
def test_a_cluster_with_gpu_workers_runs_the_products_there(iris_store, monkeypatch):
    """Workers declaring ``GPU`` (their tasks on the CPU stand-in): the data set stays a Dask
    array and the estimator's DaskTorchGramOperator runs every Gram product on them."""
    distributed = pytest.importorskip("distributed")
    from catdask.operators.dask_torch_gram import DaskTorchGramOperator

    passes = []
    product = DaskTorchGramOperator._products
    monkeypatch.setattr(DaskTorchGramOperator, "_products",
                        lambda self, *a, **k: passes.append(1) or product(self, *a, **k))
    default = fit_on_dataset(iris_store, "iris", ModelSpec(**KERNEL))
    default.release()
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, resources={"GPU": 1},
                                  dashboard_address=None, host="127.0.0.1") as cluster, \
            distributed.Client(cluster) as client:
        outcome = fit_on_dataset(iris_store, "iris", ModelSpec(**KERNEL, device="cpu"),
                                 client=client)
    outcome.release()
    assert outcome.device_placement == GPU_WORKERS and passes
    assert outcome.estimator.objective_ == pytest.approx(default.estimator.objective_,
                                                         rel=1e-9)


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a CUDA GPU")
def test_a_cluster_without_gpu_workers_says_why_the_device_was_needed_here():
    """A deployment run (no CLI check before it) on a cluster without GPU workers: the message
    names the cluster's missing GPU workers and how to start them, then the local reason."""
    with pytest.raises(ValueError, match=r"^the Dask cluster has no worker declaring the GPU "
                                         r"resource \(start them with `dask worker SCHEDULER "
                                         r"--resources GPU=1`, deploy/gpu-cluster.md\), so the "
                                         r"products would run in this process: device='cuda': "
                                         r"PyTorch sees no CUDA GPU here"):
        device_placement("cuda", _Client({}, {}))
    with pytest.raises(ValueError, match=r"^device='cuda': PyTorch sees no CUDA GPU here"):
        device_placement("cuda", None)  # no cluster: the library's message as it was
