"""Driver memory of a distributed K-CQS fit against N (issue 40: it should not grow with N).

A LocalCluster of 2 single-thread worker processes; each fit runs in a fresh driver process
(``--child``) on blobs (D = 20, K = 5) given as a Dask array, with ``max_iter`` small enough to
keep the run short but past the 9 iterations that fill Anderson's history. Reported per N: the
driver's peak RSS (``ru_maxrss``), its growth during the fit, the peak of numpy's traced
allocations (tracemalloc) during the fit, and the largest traced allocation sites at that peak
and at the solver iteration that held the most.

    python benchmarks/driver_memory.py [--sizes 10000 40000] [--max-iter 14] [--top 8]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import threading
import time
import tracemalloc

from _common import REPO, blobs, quiet_warnings, rbf_gamma

D, K = 20, 5
MiB = 1024**2


def child(args) -> None:
    quiet_warnings()
    import dask.array as da
    import psutil
    from distributed import Client

    from catdask import KernelCategorySpace
    from catdask.core.progress import solver_progress

    X, y = blobs(args.n, D, K, seed=3)
    # The traced allocations at the fit's peak (a snapshot whenever the traced total passes the
    # last snapshot's by 2%, polled every 20 ms) and at the solver's largest iteration.
    peak = {"bytes": 0, "snapshot": None}
    solver = {"bytes": 0, "snapshot": None}
    done = threading.Event()

    def snap_if_larger(record):
        current = tracemalloc.get_traced_memory()[0]
        if current > 1.02 * record["bytes"]:
            record["bytes"], record["snapshot"] = current, tracemalloc.take_snapshot()

    def poll():
        while not done.wait(0.02):
            snap_if_larger(peak)

    with Client(args.scheduler, timeout=60):
        Xd = da.from_array(X, chunks=(-(-args.n // 4), -1))
        est = KernelCategorySpace(gamma=rbf_gamma(D), certify=False, random_state=0,
                                  max_iter=args.max_iter)
        before = psutil.Process().memory_info().rss
        tracemalloc.start(args.frames)
        poller = threading.Thread(target=poll, daemon=True)
        poller.start()
        t0 = time.perf_counter()
        with solver_progress(lambda *_: snap_if_larger(solver)):
            est.fit(Xd, y)
        seconds = time.perf_counter() - t0
        done.set()
        poller.join()
        traced_peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    rss_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps({"n": args.n, "seconds": round(seconds, 1), "n_iter": int(est.n_iter_),
                      "objective": float(est.objective_),
                      "driver_peak_rss_MiB": round(rss_peak / MiB, 1),
                      "rss_growth_during_fit_MiB": round((rss_peak - before) / MiB, 1),
                      "traced_peak_MiB": round(traced_peak / MiB, 1),
                      "traced_at_largest_iteration_MiB": round(solver["bytes"] / MiB, 1),
                      "top_at_peak": _top(peak["snapshot"], args.top),
                      "top_at_largest_iteration": _top(solver["snapshot"], args.top)}))


def _top(snapshot, n):
    if snapshot is None:
        return []
    out = []
    for stat in snapshot.statistics("traceback")[:n]:
        where = " < ".join(f"{f.filename.split('site-packages/')[-1].split('catdask/')[-1]}"
                           f":{f.lineno}" for f in stat.traceback)
        out.append(f"{stat.size / MiB:8.1f} MiB  {where}")
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 40_000])
    ap.add_argument("--max-iter", type=int, default=14)
    ap.add_argument("--top", type=int, default=8)
    ap.add_argument("--frames", type=int, default=4, help="traceback frames per site")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--n", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--scheduler", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return child(args)
    quiet_warnings()
    from distributed import LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster:
        for n in args.sizes:
            out = subprocess.run(
                [sys.executable, __file__, "--child", "--n", str(n), "--scheduler",
                 cluster.scheduler_address, "--max-iter", str(args.max_iter),
                 "--top", str(args.top), "--frames", str(args.frames)], cwd=REPO, capture_output=True, text=True)
            if out.returncode:
                raise RuntimeError(out.stderr[-3000:])
            result = json.loads(out.stdout.strip().splitlines()[-1])
            for key in ("top_at_peak", "top_at_largest_iteration"):
                print(f"  {key}:")
                for line in result.pop(key):
                    print("   ", line)
            print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
