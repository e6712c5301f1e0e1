"""MLflow export: seconds per model, against MLflow's own scikit-learn flavour.

    python benchmarks/bench_export_mlflow.py            # the paper's eight data sets (../shared)
    python benchmarks/bench_export_mlflow.py --quick    # iris and wine

Starts a local MLflow tracking server (SQLite backend, 127.0.0.1, a temporary folder), trains
linear CQS on each data set into a temporary catdask store, then exports each model, alternating
``catdask.export.mlflow.export_to_mlflow`` (a models-from-code pyfunc over arrays + JSON) with
the baseline ``mlflow.sklearn.log_model(serialization_format="cloudpickle")`` of the same fitted pipeline, three
rounds each; prints the medians and their ratio, checks that predictions through
``mlflow.pyfunc.load_model`` equal ``catdask predict``'s table exactly, and counts pickle files
among catdask's artifacts. Goal (issue 28): export < 2 s per model, predictions identical,
0 pickles. Skips, saying why, without the mlflow extra or without ../shared for the UCI sets.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))
from _common import load_average, parse_args, quiet_warnings, report  # noqa: E402

ROUNDS = 3


def main():
    args = parse_args(__doc__.split("\n\n")[0])
    try:
        import mlflow  # noqa: F401
    except ImportError:
        print("skipped: the mlflow extra is not installed (pip install 'catdask[mlflow]')")
        return
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    quiet_warnings()
    from catdask.evaluation.data import PAPER_DATASETS
    from tests.helpers.paths import SHARED
    from tests.helpers.procs import Managed, free_port, wait_http

    datasets = ["iris", "wine"] if args.quick else list(PAPER_DATASETS)
    if not args.quick and not (SHARED / "data" / "uci").is_dir():
        print(f"skipped: {SHARED / 'data' / 'uci'} is absent (the UCI files); try --quick")
        return
    os.environ.setdefault("CATDASK_SOURCE_DIR", str(SHARED / "data" / "uci"))
    print(f"load average at start: {load_average()}")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        port = free_port()
        server = Managed(
            [sys.executable, "-m", "mlflow", "server", "--host", "127.0.0.1", "--port",
             str(port), "--backend-store-uri", f"sqlite:///{root / 'mlflow.db'}",
             "--artifacts-destination", str(root / "artifacts"), "--workers", "1"],
            log=root / "server.log", env=dict(os.environ), cwd=root)
        try:
            url = f"http://127.0.0.1:{port}"
            wait_http(url + "/health", timeout=180, proc=server)
            rows = [_measure(root / "store", name, url) for name in datasets]
            import mlflow

            ours_id = mlflow.get_experiment_by_name("catdask").experiment_id
        finally:
            server.stop()
        pickles = _pickle_files(root / "artifacts" / ours_id)
    ours = [r["catdask_s"] for r in rows]
    results = {
        "rows": rows,
        "catdask export s (median over models)": round(statistics.median(ours), 3),
        "catdask export s (max)": round(max(ours), 3),
        "ratio vs mlflow.sklearn (median)": round(statistics.median(r["ratio"] for r in rows), 2),
        "predictions identical": all(r["identical"] for r in rows),
        "pickle files among catdask's artifacts": pickles,
        "goal met (< 2 s, identical, 0 pickles)": max(ours) < 2 and pickles == 0
        and all(r["identical"] for r in rows),
        "load_average_start_end": load_average(),
    }
    report("export_mlflow", results, args)


def _measure(store, dataset, url):
    import mlflow
    import mlflow.sklearn

    from catdask.export.mlflow import export_to_mlflow
    from catdask.pipeline import ingest_dataset
    from catdask.pipeline.reports import class_names_of
    from catdask.pipeline.scoring import predict_table
    from catdask.pipeline.training import ModelSpec, fit_on_dataset, register_outcome
    from catdask.store import load_estimator, read_dataset

    ingest_dataset(dataset, store)
    outcome = fit_on_dataset(store, dataset, ModelSpec(method="cqs", n_restarts=2))
    name = f"{dataset}-cqs"
    register_outcome(store, name, outcome, status="certified")
    model = load_estimator(store, name)
    ours, theirs, done = [], [], None
    mlflow.set_tracking_uri(url)
    mlflow.set_experiment("baseline-sklearn-flavour")
    for _ in range(ROUNDS):
        t0 = time.perf_counter()
        done = export_to_mlflow(store, name, tracking_uri=url, experiment="catdask")
        ours.append(time.perf_counter() - t0)
        mlflow.set_experiment("baseline-sklearn-flavour")
        t0 = time.perf_counter()
        with mlflow.start_run():
            mlflow.sklearn.log_model(model, name="model", registered_model_name=f"{name}-pickled",
                                     serialization_format="cloudpickle")
        theirs.append(time.perf_counter() - t0)
    ds = read_dataset(store, dataset)
    table = predict_table(model, ds.X, class_names=class_names_of(ds))
    loaded = mlflow.pyfunc.load_model(done.model_uri)
    import pandas as pd

    # The inputs as the export names them (the data set's feature names, else x0, x1, ...).
    columns = loaded.metadata.get_input_schema().input_names()
    frame = loaded.predict(pd.DataFrame(ds.X, columns=columns))
    identical = all(np.array_equal(np.asarray(frame[h]), np.asarray(c))
                    for h, c in zip(table.header, table.columns))
    a, b = statistics.median(ours), statistics.median(theirs)
    row = {"dataset": dataset, "catdask_s": round(a, 3), "mlflow_sklearn_s": round(b, 3),
           "ratio": round(a / b, 2), "identical": identical}
    print(row, flush=True)
    return row


def _pickle_files(folder: Path) -> int:
    """Files under the catdask experiments' artifacts that are pickles (name or opening bytes)."""
    count = 0
    for path in folder.rglob("*") if folder.exists() else []:
        if path.is_file():
            head = path.read_bytes()[:2]
            count += path.suffix in (".pkl", ".pickle") or (
                len(head) == 2 and head[0] == 0x80 and 2 <= head[1] <= 5)
    return count


if __name__ == "__main__":
    main()
