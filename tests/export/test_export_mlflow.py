"""``catdask export --mlflow``: against a real local MLflow tracking server (SQLite backend).

The server is started by the tests themselves (127.0.0.1, a free port, a temporary folder).
What is checked: predictions through ``mlflow.pyfunc.load_model`` equal ``catdask predict``'s
exactly; no pickle is written into the artifacts, and none is read on load and predict; the
certificate arrives as metrics and tags; the alias ``certified`` names the newest certified
version; a wrong address fails in seconds with one line.
"""

from __future__ import annotations

import csv
import io
import json
import os
import pickle
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pytest

from tests.helpers.paths import REPO
from tests.helpers.procs import Managed, free_port, wait_http

mlflow = pytest.importorskip("mlflow", reason="the mlflow extra is not installed "
                                              "(pip install 'catdask[mlflow]')")

from catdask.evaluation.data import PAPER_DATASETS as UCI_SETS  # noqa: E402


@pytest.fixture(scope="module")
def mlflow_server(tmp_path_factory):
    """A real MLflow tracking server with a SQLite backend and served artifacts."""
    root = tmp_path_factory.mktemp("mlflow")
    port = free_port()
    server = Managed(
        [sys.executable, "-m", "mlflow", "server", "--host", "127.0.0.1", "--port", str(port),
         "--backend-store-uri", f"sqlite:///{root / 'mlflow.db'}",
         "--artifacts-destination", str(root / "artifacts"), "--workers", "1"],
        log=root / "server.log", env={**os.environ, "MLFLOW_TRACKING_URI": "", "MLFLOW_DISABLE_TELEMETRY": "true"},
    )
    try:
        url = f"http://127.0.0.1:{port}"
        wait_http(url + "/health", timeout=120, proc=server)
        yield url, root / "artifacts"
    finally:
        server.stop()


def _train(store, dataset, method="cqs", name=None):
    from catdask.pipeline import ingest_dataset
    from catdask.pipeline.training import ModelSpec, fit_on_dataset, register_outcome

    ingest_dataset(dataset, store)
    outcome = fit_on_dataset(store, dataset, ModelSpec(method=method, n_restarts=2))
    status = "certified" if outcome.certificate.certified else "uncertified-allowed"
    return register_outcome(store, name or f"{dataset}-{method}", outcome, status=status)


def _cli(*args, store, timeout=120):
    env = {**os.environ, "PYTHONPATH": str(REPO), "CATDASK_STORE": str(store)}
    return subprocess.run([sys.executable, "-m", "catdask", *map(str, args)], env=env,
                          capture_output=True, text=True, timeout=timeout, cwd=REPO)


def _pickles_under(folder: Path):
    """Files that are pickles: a .pkl/.pickle name, or pickle's protocol-2+ opening bytes."""
    found = []
    for path in folder.rglob("*"):
        if not path.is_file():
            continue
        head = path.read_bytes()[:2]
        if path.suffix in (".pkl", ".pickle") or (len(head) == 2 and head[0] == 0x80
                                                  and 2 <= head[1] <= 5):
            found.append(path)
    return found


class _NoPickle:
    """Within the block, any pickle load raises (the test fails if MLflow or catdask unpickles)."""

    def __enter__(self):
        self._saved = (pickle.load, pickle.loads)

        def refuse(*a, **k):
            raise AssertionError("a pickle was read")

        pickle.load = pickle.loads = refuse
        return self

    def __exit__(self, *exc):
        pickle.load, pickle.loads = self._saved


def _round_trip(store, name, url):
    """Export through the CLI, load through MLflow, compare with ``catdask predict``."""
    t0 = time.perf_counter()
    done = _cli("export", name, "--mlflow", url, "--json", store=store)
    assert done.returncode == 0, done.stderr
    info = json.loads(done.stdout)
    export_seconds = info["seconds"]
    predicted = _cli("predict", name, store=store)
    assert predicted.returncode == 0, predicted.stderr
    rows = list(csv.reader(io.StringIO(predicted.stdout)))
    header, body = rows[0], rows[1:]

    from catdask.store import load_model_version, read_dataset

    from catdask.pipeline.scoring import feature_names_of

    _, meta = load_model_version(store, name)
    ds = read_dataset(store, meta["dataset"], snapshot=meta["dataset_snapshot"])
    X = ds.X
    # The inputs are named as the data set names its features (iris: 'sepal length (cm)', ...),
    # as `catdask predict` matches a file's header; x0, x1, ... only where it records none.
    columns = feature_names_of(ds) or [f"x{j}" for j in range(X.shape[1])]
    mlflow.set_tracking_uri(url)
    with _NoPickle(), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        loaded = mlflow.pyfunc.load_model(info["model_uri"])
    # Issue 43: no UserWarning (MLflow's "Add type hints to the `predict` method") on load.
    assert [str(w.message)[:80] for w in caught if issubclass(w.category, UserWarning)] == []
    with _NoPickle():
        assert loaded.metadata.get_input_schema().input_names() == columns
        frame = loaded.predict(__import__("pandas").DataFrame(X, columns=columns))
    for j, column in enumerate(header):
        if column == "label":  # catdask predict on the stored set adds the known labels
            continue
        ours = [r[j] for r in body]
        theirs = frame[column].to_numpy()
        if column.startswith("axis_"):
            # The same arithmetic, but `catdask predict` may take X in row blocks and MLflow
            # whole: BLAS may round a block's last bits differently on another CPU.
            np.testing.assert_allclose(np.array(ours, dtype=float), theirs, rtol=1e-12,
                                       atol=1e-12, err_msg=f"{name}: {column}")
        else:
            assert ours == [str(v) for v in theirs], f"{name}: {column}"
    return info, export_seconds, time.perf_counter() - t0


@pytest.mark.slow
def test_export_round_trip_metrics_alias_and_no_pickles(tmp_path, mlflow_server):
    url, artifacts = mlflow_server
    store = tmp_path / "store"
    _train(store, "iris")
    info, _, _ = _round_trip(store, "iris-cqs", url)
    assert info["certified"] and info["alias"] == "certified"

    client = mlflow.MlflowClient(url)
    run = client.get_run(info["run_id"])
    assert run.data.tags["catdask.certified"] == "true"
    assert run.data.tags["catdask.model"] == "iris-cqs:v1"
    assert run.data.params["method"] == "cqs"
    assert np.isfinite(run.data.metrics["objective"])
    assert run.data.metrics["certificate_gap"] <= 1e-6
    assert client.get_model_version_by_alias("iris-cqs", "certified").version == "1"
    assert _pickles_under(artifacts) == []

    assert "newest certified" in info["alias_reason"] and not info["already_exported"]
    # Issue 43 (was: a second MLflow version): exporting the same catdask version again is
    # the same MLflow version, nothing logged; the line says which alias it has and why.
    done = _cli("export", "iris-cqs", "--mlflow", url, store=store)
    assert done.returncode == 0, done.stderr
    assert "was exported before" in done.stderr and "alias @certified" in done.stderr
    assert done.stdout.strip() == info["model_uri"]
    assert [v.version for v in client.search_model_versions("name = 'iris-cqs'")] == ["1"]
    assert client.get_model_version_by_alias("iris-cqs", "certified").version == "1"


def test_export_refuses_a_bundle_that_was_altered(tmp_path):
    from catdask.export.bundle import read_bundle, write_bundle
    from catdask.model_io import export_model
    from sklearn.datasets import load_iris

    from catdask import CategorySpace

    X, y = load_iris(return_X_y=True)
    arrays, meta = export_model(CategorySpace(n_restarts=1, random_state=0).fit(X, y))
    folder = write_bundle(tmp_path / "b", arrays, meta, feature_names=["a", "b", "c", "d"])
    np.testing.assert_array_equal(read_bundle(folder).model.transform(X),
                                  read_bundle(folder).model.transform(X))
    target = folder / "arrays" / "components_.npy"
    data = np.load(target)
    data[0, 0] += 1e-12
    np.save(target, data)
    with pytest.raises(ValueError, match="sha256"):
        read_bundle(folder)
    np.save(folder / "arrays" / "extra.npy", np.zeros(2))
    with pytest.raises(ValueError, match="differ from the listing"):
        read_bundle(folder)


@pytest.mark.slow
def test_export_to_a_wrong_address_fails_fast(tmp_path):
    store = tmp_path / "store"
    _train(store, "iris")
    port = free_port()
    t0 = time.perf_counter()
    done = _cli("export", "iris-cqs", "--mlflow", f"http://127.0.0.1:{port}", store=store)
    assert done.returncode == 3, done.stderr
    assert time.perf_counter() - t0 < 60  # the probe waits at most 5 s; the rest is imports
    lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "no MLflow tracking server" in lines[0], done.stderr


@pytest.mark.slow
def test_export_round_trip_on_two_uci_sets(tmp_path, mlflow_server, shared_dir):
    """The smallest and the largest of the paper's sets (the stress tier runs all eight)."""
    _round_trips(tmp_path, mlflow_server, shared_dir, ("wine", "satellite"))


@pytest.mark.stress
def test_export_round_trip_on_the_eight_uci_sets(tmp_path, mlflow_server, shared_dir):
    _round_trips(tmp_path, mlflow_server, shared_dir, UCI_SETS)


def _round_trips(tmp_path, mlflow_server, shared_dir, datasets):
    url, artifacts = mlflow_server
    store = tmp_path / "store"
    os.environ.setdefault("CATDASK_SOURCE_DIR", str(shared_dir / "data" / "uci"))
    times = {}
    for dataset in datasets:
        _train(store, dataset)
        _, seconds, _ = _round_trip(store, f"{dataset}-cqs", url)
        times[dataset] = seconds
    # Seconds are measured (benchmarks/bench_export_mlflow.py), not asserted: load varies.
    print("export seconds per model:", {k: round(v, 2) for k, v in times.items()})
    assert _pickles_under(artifacts) == []
