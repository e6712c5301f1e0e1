"""Benchmark: the plain alternating iteration vs safeguarded Anderson acceleration (issue 13).

For each case both iterations start from the SAME points (the estimators' default starts: the
decoupled start plus random ones for kernels, decoupled, class means and random ones for the
linear CQS) and run to tol=1e-8. Per case: iterations of the slowest restart (the batch runs
that many Gram passes) and of every restart, wall time (plain and accelerated runs
interleaved, REPEATS times, medians), and the relative difference of the best objectives
(the goal: equal to 1e-9). Goal: at least 3x fewer iterations.

Cases: the README's N = 4,000 RBF benchmark (``bench_kernel_vs_paper``: blobs D = 10, K = 5,
class origin, decoupled start), RBF K-CQS on blobs with origin="global" and "class", and the
linear CQS (class-matrix problem), N = 1,000-16,000.

    python benchmarks/bench_acceleration.py [--quick] [--json out.json]
"""

from __future__ import annotations

import time

import numpy as np

from _common import blobs, load_average, parse_args, quiet_warnings, rbf_gamma, report

D, K = 10, 5
N_RESTARTS = 5
TOL = 1e-8
MAX_ITER = 20000


def kernel_case(N, origin, *, readme=False, seed=0):
    """(problem, start state, labels) of an RBF K-CQS fit on blobs."""
    from catdask.core.classes import ClassIndex
    from catdask.kernels import make_kernel
    from catdask.operators import CentredGramOperator, NumpyGramOperator
    from catdask.core.problems import CategoryObjective, KernelProblem
    from catdask.core.starts import kernel_decoupled_z, kernel_random_z, start_labels

    X, y = blobs(N, D, K, seed=N)
    perm = np.argsort(y, kind="stable")
    X, y = X[perm], y[perm]
    classes = ClassIndex(y, K)
    base = NumpyGramOperator(X, classes, make_kernel("rbf", n_features=D, gamma=rbf_gamma(D)))
    op = CentredGramOperator(base) if origin == "global" else base
    problem = KernelProblem(op, CategoryObjective("quadratic", origin))
    labels = ["decoupled"] if readme else start_labels("auto", N_RESTARTS, kernel=True)
    z0 = kernel_random_z(len(labels), classes, origin, np.random.default_rng(seed))
    for r, label in enumerate(labels):
        if label == "decoupled":
            z0[r] = kernel_decoupled_z(op, classes, origin)
    return problem, lambda: problem.start_from_z(z0), labels


def linear_case(N, origin, *, seed=0):
    """(problem, start state, labels) of the linear CQS on blobs (class-matrix problem)."""
    from catdask.core.classes import ClassIndex
    from catdask.operators import NumpyDataOperator
    from catdask.core.problems import ClassMatrixProblem
    from catdask.core.starts import linear_starts, start_labels

    X, y = blobs(N, D, K, seed=N)
    op = NumpyDataOperator(X, ClassIndex(y, K))
    problem = ClassMatrixProblem(op.class_second_moments(origin))
    labels = start_labels("auto", N_RESTARTS, kernel=False)
    W0 = linear_starts(labels, class_matrices=problem.class_matrices,
                       class_means=op.class_means(), n_features=D,
                       rng=np.random.default_rng(seed))
    return problem, lambda: problem.start(W0), labels


def compare(name, N, make, repeats):
    from catdask.core.solver import solve

    problem, start, labels = make()
    runs = {"none": [], "anderson": []}
    results = {}
    for _ in range(repeats):
        for acceleration in ("none", "anderson"):  # interleaved: same load for both
            t0 = time.perf_counter()
            _, res = solve(problem, start(), tol=TOL, max_iter=MAX_ITER,
                           acceleration=acceleration)
            runs[acceleration].append(time.perf_counter() - t0)
            results[acceleration] = res
    plain, fast = results["none"], results["anderson"]
    f_plain = max(r.objective for r in plain)
    f_fast = max(r.objective for r in fast)
    monotone = all(np.all(np.diff(r.history) >= -1e-12 * abs(r.history[-1])) for r in fast)
    row = {
        "case": name,
        "N": N,
        "restarts": labels,
        "iterations_plain": [r.n_iter for r in plain],
        "iterations_accelerated": [r.n_iter for r in fast],
        "passes_plain": max(r.n_iter for r in plain),
        "passes_accelerated": max(r.n_iter for r in fast),
        "converged": all(r.converged for r in plain + fast),
        "seconds_plain": float(np.median(runs["none"])),
        "seconds_accelerated": float(np.median(runs["anderson"])),
        "objective_rel_diff": abs(f_fast - f_plain) / abs(f_plain),
        "accelerated_monotone": bool(monotone),
        "load_average": load_average(),
    }
    row["iteration_ratio"] = row["passes_plain"] / row["passes_accelerated"]
    row["iteration_ratio_per_restart_median"] = float(np.median(
        [p.n_iter / f.n_iter for p, f in zip(plain, fast)]))
    row["time_ratio"] = row["seconds_plain"] / row["seconds_accelerated"]
    print(f"{name:>22} N={N:>6}: iterations {row['passes_plain']:>5} -> "
          f"{row['passes_accelerated']:>4} ({row['iteration_ratio']:.1f}x; per restart "
          f"{row['iteration_ratio_per_restart_median']:.1f}x), time "
          f"{row['seconds_plain']:.2f} -> {row['seconds_accelerated']:.2f} s "
          f"({row['time_ratio']:.1f}x), objective diff {row['objective_rel_diff']:.1e}, "
          f"load {row['load_average'][0]}", flush=True)
    return row


def main():
    args = parse_args(__doc__)
    quiet_warnings()
    if args.quick:
        readme_n, kernel_sizes, linear_sizes, repeats = 1000, [500, 1000], [1000, 4000], 1
    else:
        readme_n, kernel_sizes, linear_sizes, repeats = 4000, [1000, 4000, 16000], \
            [1000, 4000, 16000], 3
    rows = [compare("README RBF (class)", readme_n,
                    lambda: kernel_case(readme_n, "class", readme=True), repeats)]
    for N in kernel_sizes:
        for origin in ("global", "class"):
            rows.append(compare(f"RBF K-CQS {origin}", N,
                                lambda N=N, o=origin: kernel_case(N, o),
                                1 if N > 4000 else repeats))
    for N in linear_sizes:
        for origin in ("global", "class"):
            rows.append(compare(f"linear CQS {origin}", N,
                                lambda N=N, o=origin: linear_case(N, o), repeats))
    ratios = [r["iteration_ratio"] for r in rows]
    summary = {
        "iteration_ratio_min": float(min(ratios)),
        "iteration_ratio_median": float(np.median(ratios)),
        "objective_rel_diff_max": float(max(r["objective_rel_diff"] for r in rows)),
        "goal": ">= 3x fewer iterations, objective equal to 1e-9",
    }
    report("plain vs Anderson-accelerated iteration", {"rows": rows, **summary}, args)


if __name__ == "__main__":
    main()
