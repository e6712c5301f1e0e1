"""Benchmark 2: cost of one kernel iteration, and of batched restarts.

(a) Time per iteration of the solver (recompute mode: the Gram blocks are evaluated in every
    pass, G never stored) against one blocked Gram pass ``G v`` over the same N on the same
    backend: the iteration adds only the class-structured product and K x N driver work.
(b) R = 8 restarts batched (one pass serves all: ``G [Z_1 ... Z_8]``) against one restart.

Both on the numpy backend (this process, BLAS on 1 thread like a Dask worker) and on the Dask
backend (LocalCluster, 2 workers x 1 thread). The pass, R = 1 and R = 8 are timed in three
interleaved rounds; the figures are medians (the ratio: the median of the rounds' ratios).

    python benchmarks/bench_iteration_cost.py [--quick]
"""

from __future__ import annotations

import time

import numpy as np

from _common import blobs, local_cluster, parse_args, quiet_warnings, rbf_gamma, report

D, K = 20, 5
ROUNDS = 3


def _per_iteration(problem, z0, n_iter):
    from catdask.core.solver import solve

    state = problem.start_from_z(z0)
    t0 = time.perf_counter()
    solve(problem, state, tol=0.0, max_iter=n_iter, stall_patience=10**9)
    return (time.perf_counter() - t0) / n_iter


def _per_pass(op, N, n_rep):
    V = np.random.default_rng(0).standard_normal((N, 1))
    op.matmul(V)  # warm-up
    t0 = time.perf_counter()
    for _ in range(n_rep):
        op.matmul(V)
    return (time.perf_counter() - t0) / n_rep


def measure(make_op, X, y, n_iter):
    from catdask.core.classes import ClassIndex
    from catdask.core.problems import CategoryObjective, KernelProblem
    from catdask.core.starts import kernel_random_z

    classes = ClassIndex(y, K)
    op = make_op(X, classes)
    problem = KernelProblem(op, CategoryObjective("quadratic", "class"))
    rng = np.random.default_rng(0)
    z1 = kernel_random_z(1, classes, "class", rng)
    z8 = kernel_random_z(8, classes, "class", rng)
    passes, one, eight = [], [], []
    for _ in range(ROUNDS):  # interleaved: a noisy neighbour slows both alike
        passes.append(_per_pass(op, len(y), 3))
        one.append(_per_iteration(problem, z1, n_iter))
        eight.append(_per_iteration(problem, z8, n_iter))
    out = {"gram_pass_s": float(np.median(passes)),
           "iteration_R1_s": float(np.median(one)),
           "iteration_R8_s": float(np.median(eight)),
           "R8_over_R1_each_round": [round(b / a, 2) for a, b in zip(one, eight)]}
    out["iteration_over_pass"] = out["iteration_R1_s"] / out["gram_pass_s"]
    out["R8_over_R1"] = float(np.median([b / a for a, b in zip(one, eight)]))
    if hasattr(op, "close"):
        op.close()
    return out


def main():
    args = parse_args(__doc__)
    quiet_warnings()
    from threadpoolctl import threadpool_limits

    from catdask.kernels import make_kernel
    from catdask.operators import DaskGramOperator, NumpyGramOperator

    N = 3000 if args.quick else 8000
    n_iter = 3 if args.quick else 10
    X, y = blobs(N, D, K, seed=1)
    perm = np.argsort(y, kind="stable")
    X, y = X[perm], y[perm]
    kern = make_kernel("rbf", n_features=D, gamma=rbf_gamma(D))
    results = {"N": N, "D": D, "K": K, "iterations_timed": n_iter}
    with threadpool_limits(1):
        results["numpy_recompute"] = measure(
            lambda X, c: NumpyGramOperator(X, c, kern, max_gram_bytes=0), X, y, n_iter)
        results["numpy_stored_G"] = measure(
            lambda X, c: NumpyGramOperator(X, c, kern), X, y, n_iter)
    cluster, client = local_cluster(2)
    try:
        results["dask_recompute"] = measure(
            lambda X, c: DaskGramOperator(X, c, kern, cache="recompute"), X, y, n_iter)
        results["dask_memory_cache"] = measure(
            lambda X, c: DaskGramOperator(X, c, kern, cache="memory"), X, y, n_iter)
    finally:
        client.close()
        cluster.close()
    for k in ("numpy_recompute", "numpy_stored_G", "dask_recompute", "dask_memory_cache"):
        r = results[k]
        print(f"{k:>18}: pass {r['gram_pass_s']:.3f} s, iteration R=1 {r['iteration_R1_s']:.3f} s "
              f"({r['iteration_over_pass']:.2f}x a pass), R=8 {r['iteration_R8_s']:.3f} s "
              f"({r['R8_over_R1']:.2f}x R=1)")
    report("iteration cost and batched restarts", results, args)


if __name__ == "__main__":
    main()
