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
