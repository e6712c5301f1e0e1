"""``catdask train --device``: parsed, checked before anything is read or started, and a fit on
the device (PyTorch's CPU build: the stand-in for a GPU) registering the default fit's model."""

from __future__ import annotations

import json
import sys

import pytest

from catdask.cli.exits import EXIT_INPUT, EXIT_OK, EXIT_USAGE
from catdask.cli.parser import build_parser
from catdask.store import list_models, load_estimator, load_model_version

from .test_cli import cli_env, flows_env, run_cli  # noqa: F401 - fixtures

torch = pytest.importorskip("torch", reason="the device path needs PyTorch "
                            "(pip install 'catdask[gpu]')")


def test_device_is_parsed_and_passed_to_the_flow():
    from catdask.cli.flow_commands import train_kwargs

    args = build_parser().parse_args(["train", "iris", "--method", "kcqs", "--device", "cuda:1"])
    assert train_kwargs(args, "iris")["device"] == "cuda:1"
    args = build_parser().parse_args(["train", "iris", "--method", "kcqs"])
    assert "device" not in train_kwargs(args, "iris")  # left out: the flow's default, None


@pytest.mark.parametrize("args, code, expect", [
    (["--device", "cuda"], EXIT_USAGE,
     "argument --device: applies only to --method kcqs or kcas (the linear methods have no Gram "
     "products to run on a device), not to cqs"),
    (["--method", "kcqs", "--device", "gpu0"], EXIT_USAGE,
     "argument --device: device='gpu0' is not a device PyTorch knows (Invalid device string: "
     "'gpu0'); use e.g. 'cuda', 'cuda:0' or 'cpu'."),
], ids=["linear", "typo"])
def test_device_mistakes_exit_before_the_store_is_read(capsys, tmp_path, args, code, expect):
    store = tmp_path / "no-such-store"  # checked after the device: never reached
    got, out, err = run_cli(capsys, "train", "iris", *args, "--store", store)
    assert got == code, err
    assert err.strip() == f"catdask train: error: {expect}"


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a CUDA GPU")
def test_no_cuda_here_says_what_to_install(capsys, iris_store):
    code, out, err = run_cli(capsys, "train", "iris", "--method", "kcqs", "--device", "cuda",
                             "--store", iris_store)
    assert code == EXIT_INPUT, err
    assert err.startswith("catdask train: error: argument --device cuda: PyTorch sees no CUDA "
                          "GPU here"), err
    assert "pip install 'catdask[gpu]'" in err and len(err.strip().splitlines()) == 1
    # In the command's terms, not the Python parameter's (was: "or use device='cpu' or None").
    assert err.rstrip().endswith("or use --device cpu, or leave --device out (the default: no "
                                 "PyTorch)."), err
    assert "device=" not in err and "None" not in err, err
    assert sorted(p.name for p in iris_store.iterdir()) == ["datasets"]  # no model, no server


def test_no_pytorch_says_what_to_install(capsys, iris_store, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # as where PyTorch is not installed
    code, out, err = run_cli(capsys, "train", "iris", "--method", "kcqs", "--device", "cpu",
                             "--store", iris_store)
    assert code == EXIT_INPUT, err
    assert err.strip() == ("catdask train: error: argument --device cpu: needs PyTorch: pip "
                           "install 'catdask[gpu]' (or any torch build with your GPU's CUDA).")


@pytest.mark.slow
def test_train_on_the_device_registers_the_default_runs_model(capsys, iris_store, flows_env):
    """End to end: the flow on the tests' cluster (no GPU workers), so the data set is read into
    memory and fitted on the device in the fit task's process (catdask.pipeline.device)."""
    args = ("train", "iris", "--method", "kcqs", "--restarts", "2", "--store", iris_store)
    code, out, err = run_cli(capsys, *args)
    assert code == EXIT_OK, err
    default = json.loads(out)
    code, out, err = run_cli(capsys, *args, "--device", "cpu", "--name", "iris-kcqs-cpu")
    assert code == EXIT_OK, err
    on_device = json.loads(out)
    assert (default["device"], default["device_placement"]) == (None, None)
    assert (on_device["device"], on_device["device_placement"]) == ("cpu", "host")
    assert on_device["version"] == "iris-kcqs-cpu:v1" and on_device["certified"]
    assert on_device["objective"] == pytest.approx(default["objective"], rel=1e-9)
    _, meta = load_model_version(iris_store, "iris-kcqs-cpu")
    assert meta["spec"]["device"] == "cpu" and meta["device_placement"] == "host"
    model = load_estimator(iris_store, "iris-kcqs-cpu")[-1]
    assert model.objective_ == pytest.approx(default["objective"], rel=1e-9)
    assert [str(v) for v in list_models(iris_store)] == ["iris-kcqs:v1", "iris-kcqs-cpu:v1"]
    code, out, err = run_cli(capsys, "models", "show", "iris-kcqs-cpu", "--store", iris_store)
    assert code == EXIT_OK and "device cpu (host)" in out, out
    # The same spec again: the train cache answers, and says where the version was fitted.
    code, out, err = run_cli(capsys, *args, "--device", "cpu", "--name", "iris-kcqs-cpu")
    assert code == EXIT_OK and json.loads(out)["cached"], err
    assert (json.loads(out)["device"], json.loads(out)["device_placement"]) == ("cpu", "host")


@pytest.mark.parametrize("device, reason", [
    ("mps", None),  # PyTorch's own words, which vary between its versions
    ("meta", "a meta tensor holds no data"),
])
def test_a_device_pytorch_knows_but_cannot_use_here_fails_before_the_fit(capsys, iris_store,
                                                                        device, reason):
    """Was: the check passed (it checked CUDA devices only), Prefect and the cluster started,
    and the fit failed with exit 1 ("RuntimeError: PyTorch is not linked with support for mps
    devices")."""
    if device == "mps" and torch.backends.mps.is_available():
        pytest.skip("this machine has MPS")
    code, out, err = run_cli(capsys, "train", "iris", "--method", "kcqs", "--device", device,
                             "--store", iris_store)
    assert code == EXIT_INPUT and len(err.strip().splitlines()) == 1, err
    assert err.startswith(f"catdask train: error: argument --device {device}: PyTorch cannot "
                          f"use it here ({reason or ''}"), err
    assert err.rstrip().endswith("); use e.g. 'cuda', 'cuda:0' or 'cpu'."), err
    assert sorted(p.name for p in iris_store.iterdir()) == ["datasets"]  # no model, no server


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a CUDA GPU")
def test_a_cluster_without_gpu_workers_is_refused_before_the_flow(capsys, iris_store,
                                                                 dask_scheduler):
    """The module's cluster declares no GPU, so the products would run in this process, which
    has no CUDA: one line naming the cluster and how to start GPU workers, from the scheduler
    probe's reply, before Prefect starts (was: the flow started and its fit task failed with the
    library's message, naming device='cuda' and nothing about the cluster, about 18 s later)."""
    code, out, err = run_cli(capsys, "train", "iris", "--method", "kcqs", "--device", "cuda",
                             "--scheduler", dask_scheduler, "--store", iris_store)
    assert code == EXIT_INPUT and out == "", err
    assert err.strip() == (
        f"catdask train: error: argument --device cuda: the Dask cluster at {dask_scheduler} "
        "has no worker declaring the GPU resource, and the fit cannot run here instead "
        "(PyTorch sees no CUDA GPU here): start one worker per GPU with `CUDA_VISIBLE_DEVICES=0 "
        f"dask worker {dask_scheduler} --resources GPU=1` (deploy/gpu-cluster.md), or leave out "
        "--device")
    assert sorted(p.name for p in iris_store.iterdir()) == ["datasets"]  # no model, no server


def test_gpu_workers_or_the_device_here_pass_the_cluster_check():
    from catdask.cli.device_checks import check_gpu_workers

    gpu = {"workers": {"tcp://w:1": {"resources": {}}, "tcp://w:2": {"resources": {"GPU": 1}}}}
    check_gpu_workers("cuda", "tcp://s:8786", gpu)  # a GPU worker: the products run there
    check_gpu_workers("cpu", "tcp://s:8786", {"workers": {"tcp://w:1": {"resources": {}}}})
    check_gpu_workers("cuda", "tcp://s:8786", None)  # not probed (TLS, inproc): the fit checks
    check_gpu_workers(None, "tcp://s:8786", {"workers": {}})  # no device asked


def test_the_scheduler_probe_returns_the_workers_and_their_resources(dask_scheduler):
    from catdask.cli.runtime import check_scheduler

    identity = check_scheduler(dask_scheduler)
    assert identity["type"] == "Scheduler" and identity["workers"]
    assert all("resources" in w for w in identity["workers"].values())
    assert check_scheduler(None) is None
