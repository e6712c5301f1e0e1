"""Issue 27: the kernel fit's set-up on the Dask tile path and the float32 tile pass, the current
code against the previous one (benchmarks/_previous_tiles.py) in one run.

    python benchmarks/bench_setup.py [--quick] [--json PATH] [--n N] [--workers W] [--threads T]
                                     [--rounds R] [--origin global|class]

(a) ``tile``: one float32 ``G Z`` pass on one core (``gram_symmetric_class_product``, N = 8,192,
    K = 5, R = 5, tile 384): ns per tile entry, previous and current interleaved, medians.
(b) ``pieces``: on a LocalCluster (default 2 workers x 1 thread) at N (default 24,000), one
    operator: the float64 centring pass, the decoupled start (float32 class tiles; its passes
    counted) and one float32 ``G Z`` pass (R = 5: the starts' first product, and every
    iteration's), previous and current interleaved round by round, medians.
(c) ``fit set-up``: KernelCategorySpace (defaults, G recomputed, certify=False, max_iter=3: the
    set-up phase is timed before the iterations) on the same cluster, previous and current
    interleaved; ``fit_seconds_["setup"]`` medians.

Everything is D = 20, K = 5, RBF with the default gamma, blobs from benchmarks/_common.py. The
load average is printed with every figure (2-core machine: other jobs slow both alike).
"""

from __future__ import annotations

import statistics
import time

import numpy as np

from _common import (blobs, class_sorted_blobs, default_rbf, load_average,  # noqa: E402
                     local_cluster, parse_args, quiet_warnings, report)
from _previous_tiles import previous_code, previous_symmetric_class_product

D, K, R = 20, 5, 5
VARIANTS = ("previous", "current")


def _options(ap):
    ap.add_argument("--n", type=int, default=None, help="N of (b) and (c) (default 24,000)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--origin", default="global", choices=("global", "class"))


def _kernel():
    return default_rbf(D)


def _sorted_blobs(N, seed=0):
    return class_sorted_blobs(N, D, K, seed=seed)


def _code(variant):
    import contextlib

    return previous_code() if variant == "previous" else contextlib.nullcontext()


def _summary(times, unit_scale=1.0, digits=3):
    out = {v: round(statistics.median(times[v]) * unit_scale, digits) for v in VARIANTS}
    out["current / previous (median of rounds)"] = round(statistics.median(
        c / p for c, p in zip(times["current"], times["previous"])), 3)
    return out


def part_tile(args):
    """ns per tile entry of one float32 pass on one core (BLAS on one thread)."""
    from threadpoolctl import threadpool_limits

    from catdask.operators import gram_tiles

    N = 2048 if args.quick else 8192
    X, y = _sorted_blobs(N)
    offsets = tuple(int(v) for v in np.searchsorted(y, np.arange(K + 1)))
    kern = _kernel()
    pairs = gram_tiles.symmetric_tile_pairs(N, 384)
    left, right = kern.tile_factors(X, "float32")
    zt = np.random.default_rng(0).normal(size=(N, R)).astype("float32")
    funcs = {"previous": previous_symmetric_class_product,
             "current": gram_tiles.gram_symmetric_class_product}
    ref, got = (gram_tiles.add_class_product_part(np.zeros((K, N, R)),
                                              funcs[v](left, right, pairs, offsets, zt, kern))
                for v in ("previous", "current"))
    times: dict = {v: [] for v in VARIANTS}
    with threadpool_limits(1, "blas"):
        for _ in range(max(5, 2 * args.rounds + 1)):
            for v in VARIANTS:
                t0 = time.perf_counter()
                funcs[v](left, right, pairs, offsets, zt, kern)
                times[v].append(time.perf_counter() - t0)
    out = {"N": N, "ns per tile entry": _summary(times, 1e9 / (N * N / 2), 3),
           "max |current - previous| / max |previous|":
               float(np.abs(got - ref).max() / np.abs(ref).max()),
           "load": load_average()}
    print(f"  tile: {out}", flush=True)
    return out


def part_pieces(args, N):
    """The set-up's passes on one operator, previous and current interleaved."""
    from catdask.core import starts
    from catdask.core.classes import ClassIndex
    from catdask.estimators.target import ComputeTarget
    from catdask.operators import CentredGramOperator, DaskGramOperator

    X, y = _sorted_blobs(N)
    classes = ClassIndex(y, K)
    op = DaskGramOperator(X, classes, _kernel(), cache="recompute")
    z = np.random.default_rng(2).normal(size=(R, N))
    counted = {"n": 0}
    block_matmul = op.class_block_matmul

    def counting(V):
        counted["n"] += 1
        return block_matmul(V)

    op.class_block_matmul = counting
    times: dict = {p: {v: [] for v in VARIANTS} for p in ("centring", "start", "pass")}
    passes: dict = {v: [] for v in VARIANTS}
    # The driver at one BLAS thread, as in a fit (estimators/kernel.py): the Lanczos' own
    # products on the driver must not compete with the workers for the cores.
    with ComputeTarget(distributed=True).driver_blas_threads():
        try:
            op.set_precision("float32")
            op.class_matmul(z)  # warm-up: the workers' first tasks
            for _ in range(args.rounds):
                for v in VARIANTS:
                    with _code(v):
                        op.set_precision("float64")
                        op._moments = None
                        t0 = time.perf_counter()
                        centred = CentredGramOperator(op)
                        times["centring"][v].append(time.perf_counter() - t0)
                        target = centred if args.origin == "global" else op
                        op.set_precision("float32")
                        counted["n"] = 0
                        t0 = time.perf_counter()
                        starts.kernel_decoupled_z(target, classes, args.origin)
                        times["start"][v].append(time.perf_counter() - t0)
                        passes[v].append(counted["n"])
                        t0 = time.perf_counter()
                        op.class_matmul(z)
                        times["pass"][v].append(time.perf_counter() - t0)
        finally:
            op.close()
    out = {"N": N, "origin": args.origin,
           "float64 centring pass s": _summary(times["centring"]),
           "decoupled start s (float32 class tiles)": _summary(times["start"]),
           "decoupled start: class-tile passes": {v: passes[v][0] for v in VARIANTS},
           "float32 G Z pass s (R = 5)": _summary(times["pass"]),
           "load": load_average()}
    print(f"  pieces: {out}", flush=True)
    return out


def part_fit_setup(args, N):
    """The fit's set-up phase (validation, operator, centring, starts, first product)."""
    import dask.array as da

    from catdask import KernelCategorySpace

    X, y = blobs(N, D, K, seed=0)
    Xd = da.from_array(X, chunks=(10_000, -1))  # a Dask array: the fit runs on the cluster
    times: dict = {v: [] for v in VARIANTS}
    KernelCategorySpace(random_state=0, certify=False, max_iter=3, max_gram_bytes=0).fit(
        da.from_array(X[:2000]), y[:2000])  # warm-up: imports, the workers' first tasks
    for _ in range(args.rounds):
        for v in VARIANTS:
            with _code(v):
                model = KernelCategorySpace(random_state=0, certify=False, max_iter=3,
                                            origin=args.origin, max_gram_bytes=0).fit(Xd, y)
            times[v].append(model.fit_seconds_["setup"])
    out = {"N": N, "origin": args.origin, "set-up s": _summary(times, 1.0, 2),
           "load": load_average()}
    print(f"  fit set-up: {out}", flush=True)
    return out


def main():
    args = parse_args(__doc__, _options)
    quiet_warnings()
    N = args.n or (4_000 if args.quick else 24_000)
    if args.quick:  # small classes: still take the tiled start (above 200 rows, not 2,000)
        from catdask.core import starts

        starts._DENSE_EIG_MAX = 200
    results = {"load at start": load_average(), "tile": part_tile(args)}
    cluster, client = local_cluster(args.workers, threads_per_worker=args.threads)
    try:
        results["cluster"] = f"{args.workers} workers x {args.threads} threads"
        results["pieces"] = part_pieces(args, N)
        results["fit set-up"] = part_fit_setup(args, N)
    finally:
        client.close()
        cluster.close()
    report("issue 27: kernel fit set-up and float32 tile pass, current vs previous", results,
           args)


if __name__ == "__main__":
    main()
