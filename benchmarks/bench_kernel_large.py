"""Benchmark 3: exact RBF kernel fit at N = 50,000 on the Dask backend, run to convergence.

Synthetic Gaussian blobs, D = 20, K = 5; ``KernelCategorySpace`` with its defaults (5 batched
restarts: the decoupled start and 4 random ones; float32 Gram tiles then a float64 polish;
Anderson-accelerated iteration; tol 1e-8) and ``certify=False``. G (20 GB in float64) is never
formed: the default cache rule picks recompute mode. The fit runs on catdask's default embedded
LocalCluster (2 worker processes x 1 thread). Reports the peak summed RSS of the driver and all
worker/nanny processes (sampled every 50 ms), iterations, time per iteration and total time.
``--reference`` then fits again with ``precision="float64"`` from the same starts and reports
the relative objective difference (goal: 1e-9). Each fit's wall time is split into set-up
(validation, placing X, the centring pass, the starts), the float32 iterations (before the
hand-over, and the anchored ones after it), the float64 polish (the exact iterations) and the
finish (``KernelCategorySpace.fit_seconds_``; docs/design.md §3d).

``--scheduler tcp://host:port`` runs against that scheduler instead (a multi-node layout;
deploy/dask/README.md): the peak RSS is then the driver's (sampled) and each worker's own peak
(``ru_maxrss``, since the worker started).

    python benchmarks/bench_kernel_large.py [--quick] [--reference] [--max-iter N] [--n N]
                                            [--scheduler ADDRESS]
"""

from __future__ import annotations

import time

import numpy as np

from _common import GiB, PeakRSS, blobs, parse_args, quiet_warnings, rbf_gamma, report

D, K = 20, 5


def _options(ap):
    ap.add_argument("--reference", action="store_true",
                    help="also fit with precision='float64' from the same starts")
    ap.add_argument("--max-iter", type=int, default=2000, help="iteration cap (default: 2000)")
    ap.add_argument("--n", type=int, default=None, help="samples (default 50,000; quick 4,000)")
    ap.add_argument("--scheduler", default=None,
                    help="Dask scheduler address (default: the embedded 2-worker cluster)")


def _fit(Xd, y, precision, max_iter):
    from catdask import KernelCategorySpace
    from catdask.core.progress import solver_progress

    est = KernelCategorySpace(gamma=rbf_gamma(D), max_iter=max_iter, certify=False,
                              random_state=0, precision=precision)
    stamps = []
    with PeakRSS() as mem, solver_progress(lambda it, *a: stamps.append(time.perf_counter())):
        t0 = time.perf_counter()
        est.fit(Xd, y)
        total = time.perf_counter() - t0
    per_iter = float(np.median(np.diff([t0] + stamps)[1:])) if len(stamps) > 1 else float("nan")
    return est, total, per_iter, mem


def _phases(est):
    return {name: round(seconds, 1) for name, seconds in est.fit_seconds_.items()}


def _worker_peak_rss():
    """Each worker process's peak RSS since it started (bytes)."""
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def main():
    args = parse_args(__doc__, _options)
    quiet_warnings()
    import dask.array as da

    from catdask.distributed import close_embedded_cluster, dask_client_context

    N = args.n or (4_000 if args.quick else 50_000)
    X, y = blobs(N, D, K, seed=3)
    Xd = da.from_array(X, chunks=(min(N, 10_000), D))
    with dask_client_context(args.scheduler) as client:  # default: the embedded cluster
        workers = len(client.scheduler_info()["workers"])
        est, total, per_iter, mem = _fit(Xd, y, "auto", args.max_iter)
        worker_peaks = client.run(_worker_peak_rss) if args.scheduler else None
        ref = _fit(Xd, y, "float64", args.max_iter) if args.reference else None
    if not args.scheduler:
        close_embedded_cluster()
    results = {
        "N": N, "D": D, "K": K, "restarts": est.n_restarts, "max_iter": args.max_iter,
        "workers": workers,
        "cache_mode": "recompute" if est.n_iter_float32_ else "memory (G cached) or float64",
        "scheduler": args.scheduler or "embedded LocalCluster",
        "total_s": round(total, 1),
        "phases_s (setup / float32 / polish / finish)": _phases(est),
        "polish_share_of_fit": round(est.fit_seconds_.get("polish", 0.0) / total, 3),
        "n_iter (chosen restart; float32 tiles + float64 polish)": est.n_iter_,
        "n_iter_float32 (of n_iter)": est.n_iter_float32_,
        "converged": bool(est.converged_),
        "seconds_per_iteration (median)": round(per_iter, 2),
        "kernel_entries_per_s_per_iteration": f"{N * N / per_iter:.3g}",
        "peak_rss_total_GiB": round(mem.peak / GiB, 3),
        "peak_rss_by_process_GiB": {str(k): round(v / GiB, 3) for k, v in mem.peaks.items()},
        **({"worker_peak_rss_GiB (ru_maxrss)": {w: round(v / GiB, 3)
                                                for w, v in worker_peaks.items()},
            "peak_rss_driver_plus_workers_GiB": round(
                (mem.peak + sum(worker_peaks.values())) / GiB, 3)}
           if worker_peaks else {}),
        "objective": est.objective_,
    }
    if ref is not None:
        r_est, r_total, r_per_iter, r_mem = ref
        results.update({
            "float64_reference_total_s": round(r_total, 1),
            "float64_reference_n_iter": r_est.n_iter_,
            "float64_reference_phases_s": _phases(r_est),
            "objective_rel_diff_vs_float64": abs(est.objective_ - r_est.objective_)
            / abs(r_est.objective_),
        })
    report("exact RBF fit at scale, to convergence (Dask backend)", results, args)


if __name__ == "__main__":
    main()
