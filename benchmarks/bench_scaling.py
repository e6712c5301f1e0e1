"""Benchmark 5: kernel fit on 2 Dask workers against 1 worker (same data, same iterations).

RBF, N = 12,000 and 20,000, D = 20, K = 5, recompute mode (every iteration evaluates all N^2 kernel
entries on the workers), 2 batched random restarts, ``max_iter=8``, no certificate. Each
cluster has 1-thread workers with 1 BLAS thread; the driver only does K x N work.

The 1-worker and 2-worker fits alternate three times and the speedup reported is the median
of the three ratios, for the whole fit and for its iterations alone (``fit_seconds_``: the
set-up and finish do not scale out): on this shared 2-core host a single pair measured anywhere from 1.3x to
1.9x within the same hour (the second core is not always ours).

The same run measures the machine's own ceiling: two processes doing the work of a Gram tile
(a float32 ``X_I X_J^T``, ``exp``, times Z; one BLAS thread each) at once against one alone.
Two workers cannot beat that ratio; on this 2-vCPU host it has been 1.75-1.9x.

    python benchmarks/bench_scaling.py [--quick]
"""

from __future__ import annotations

import multiprocessing
import os
import time

import numpy as np

from _common import blobs, local_cluster, parse_args, quiet_warnings, rbf_gamma, report

D, K = 20, 5
REPEATS = 3


def fit_seconds(n_workers, Xd, y, max_iter):
    from catdask import KernelCategorySpace
    from catdask.distributed import gram_options

    cluster, client = local_cluster(n_workers)
    try:
        est = KernelCategorySpace(gamma=rbf_gamma(D), n_restarts=2, init="random", tol=0.0,
                                  max_iter=max_iter, random_state=0, certify=False)
        with gram_options(cache="recompute"):
            t0 = time.perf_counter()
            est.fit(Xd, y)
            total = time.perf_counter() - t0
        # The iterations alone (every one a full Gram pass on the workers), without the set-up
        # (placing X, the centring pass, the starts) and the finish, which do not scale out.
        phases = est.fit_seconds_
        iterating = sum(phases.get(k, 0.0) for k in ("float32", "polish", "iterations"))
        return total, iterating, est.objective_
    finally:
        client.close()
        cluster.close()


def _tile_work(seconds_out):
    """About 0.5 s of Gram-tile arithmetic on one BLAS thread; puts its own duration."""
    from threadpoolctl import threadpool_limits

    rng = np.random.default_rng(0)
    a = rng.random((2048, D), dtype=np.float32)
    b = rng.random((D, 6000), dtype=np.float32)
    z = rng.random((6000, 2 * K), dtype=np.float32)
    with threadpool_limits(1):
        t0 = time.perf_counter()
        for _ in range(20):
            g = a @ b
            np.exp(g, out=g)
            g @ z
        seconds_out.put(time.perf_counter() - t0)


def machine_ceiling(rounds=3):
    """Median over ``rounds`` of (2 x the time of one process alone) / (the wall time of two
    at once): the speed-up two workers would reach with no overhead at all."""
    ctx = multiprocessing.get_context("spawn")
    ratios = []
    for _ in range(rounds):
        walls = []
        for n in (1, 2):
            out = ctx.Queue()
            procs = [ctx.Process(target=_tile_work, args=(out,)) for _ in range(n)]
            for p in procs:
                p.start()
            seconds = [out.get() for _ in procs]
            for p in procs:
                p.join()
            walls.append(max(seconds))
        ratios.append(2 * walls[0] / walls[1])
    return round(float(np.median(ratios)), 2), [round(r, 2) for r in ratios]


def speedups(N, max_iter):
    """1 and 2 workers alternating :data:`REPEATS` times on blobs of N points."""
    import dask.array as da

    X, y = blobs(N, D, K, seed=5)
    Xd = da.from_array(X, chunks=(N // 4, D))
    pairs, iteration_pairs = [], []
    for _ in range(REPEATS):
        t1, i1, f1 = fit_seconds(1, Xd, y, max_iter)
        t2, i2, f2 = fit_seconds(2, Xd, y, max_iter)
        assert abs(f1 - f2) <= 1e-9 * abs(f1), "1 and 2 workers must reach the same objective"
        pairs.append((t1, t2))
        iteration_pairs.append((i1, i2))
    ratios = [t1 / t2 for t1, t2 in pairs]
    iteration_ratios = [i1 / i2 for i1, i2 in iteration_pairs]
    return {"N": N, "max_iter": max_iter,
            "one_worker_s": [round(t1, 2) for t1, _ in pairs],
            "two_workers_s": [round(t2, 2) for _, t2 in pairs],
            "speedup_each_repeat": [round(r, 2) for r in ratios],
            "speedup": round(float(np.median(ratios)), 2),
            "iterations_one_worker_s": [round(i1, 2) for i1, _ in iteration_pairs],
            "iterations_two_workers_s": [round(i2, 2) for _, i2 in iteration_pairs],
            "speedup_iterations": round(float(np.median(iteration_ratios)), 2),
            "objective_rel_diff": abs(f1 - f2) / abs(f1)}


def main():
    args = parse_args(__doc__)
    quiet_warnings()
    sizes = [4000] if args.quick else [12_000, 20_000]
    max_iter = 4 if args.quick else 8
    ceiling, ceiling_rounds = machine_ceiling(1 if args.quick else 3)
    results = {"machine_ceiling": ceiling, "machine_ceiling_each_round": ceiling_rounds,
               "cpu_count": os.cpu_count()}
    for N in sizes:
        results[f"N={N}"] = speedups(N, max_iter)
    ceiling_after, _ = machine_ceiling(1 if args.quick else 3)
    results["machine_ceiling_after"] = ceiling_after
    for N in sizes:
        r = results[f"N={N}"]
        print(f"N = {N}: whole fit {r['speedup']:.2f}x, iterations {r['speedup_iterations']:.2f}x "
              f"(machine ceiling {ceiling:.2f}x before, {ceiling_after:.2f}x after)")
    report("kernel fit, 2 workers vs 1", results, args)


if __name__ == "__main__":
    main()
