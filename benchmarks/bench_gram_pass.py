"""One recompute-mode Gram pass ``G Z`` against a plain float32 tiled loop (issue 13, goal 1).

N = 20,000 (``--quick``: 5,000), D = 20, K = 5 classes, R = 8 restarts, Z with one non-zero per
row (column y_i), rows sorted by class as the operator holds them. Timed, interleaved, with one
BLAS thread each (as on a Dask worker thread):

(a) the baseline: a plain float32 full-square loop, row blocks of 2048:
    ``X_b @ X^T`` by BLAS, add the norms, clip at 0, ``exp`` in place, times Z;
(b) the library's numpy operator in recompute mode, float32 symmetric tiles;
(c) the same operator in float64.

Prints medians of the repeats, the ratios to (a) (goal: (b) <= 0.6x (a)), the load average,
and the agreement of (b) with (c).

    python benchmarks/bench_gram_pass.py [--quick] [--json out.json]
"""

from __future__ import annotations

import time

import numpy as np

from _common import blobs, load_average, parse_args, quiet_warnings, rbf_gamma, report

D, K, R = 20, 5, 8
BASELINE_ROWS = 2048


def baseline_pass(X32, gamma, zt32):
    """The plain float32 loop over full row blocks (float64 accumulation of the result)."""
    norms = gamma * np.einsum("ij,ij->i", X32, X32)
    Xt = (2.0 * gamma) * X32.T
    out = np.zeros((X32.shape[0], zt32.shape[1]))
    for a in range(0, X32.shape[0], BASELINE_ROWS):
        b = min(a + BASELINE_ROWS, X32.shape[0])
        T = X32[a:b] @ Xt
        T -= norms[a:b, None]
        T -= norms[None, :]
        np.minimum(T, 0.0, out=T)
        np.exp(T, out=T)
        out[a:b] += T @ zt32
    return out


def main():
    args = parse_args(__doc__)
    quiet_warnings()
    from threadpoolctl import threadpool_limits

    from catdask.core.classes import ClassIndex
    from catdask.kernels import make_kernel
    from catdask.operators import NumpyGramOperator

    N = 5000 if args.quick else 20000
    repeats = 3 if args.quick else 5
    X, y = blobs(N, D, K, seed=1)
    order = np.argsort(y, kind="stable")
    X, y = X[order], y[order]
    gamma = rbf_gamma(D)
    kern = make_kernel("rbf", n_features=D, gamma=gamma)
    classes = ClassIndex(y, K)
    z = np.random.default_rng(0).standard_normal((R, N))
    X32, zt32 = X.astype(np.float32), np.ascontiguousarray(z.T, dtype=np.float32)

    ops = {p: NumpyGramOperator(X, classes, kern, max_gram_bytes=0, precision=p)
           for p in ("float32", "float64")}
    runs = {
        "a_baseline_float32_loop": lambda: baseline_pass(X32, gamma, zt32),
        "b_library_float32_symmetric": lambda: ops["float32"].class_matmul(z),
        "c_library_float64_symmetric": lambda: ops["float64"].class_matmul(z),
    }
    times = {name: [] for name in runs}
    load_start = load_average()
    with threadpool_limits(1):
        outputs = {name: run() for name, run in runs.items()}  # warm-up (factors, pages)
        for _ in range(repeats):
            for name, run in runs.items():  # interleaved: load changes hit every side
                t0 = time.perf_counter()
                run()
                times[name].append(time.perf_counter() - t0)
    med = {name: float(np.median(t)) for name, t in times.items()}
    base = med["a_baseline_float32_loop"]
    B32, B64 = outputs["b_library_float32_symmetric"], outputs["c_library_float64_symmetric"]
    # (a) computes G z_r summed over all classes; the library keeps the K columns apart.
    a_vs_c = np.abs(outputs["a_baseline_float32_loop"].T - B64.sum(axis=2)).max()
    results = {
        "N": N, "D": D, "K": K, "R": R, "repeats": repeats, "blas_threads": 1,
        "tile_rows": ops["float32"].tile_rows, "load_average_start": load_start,
        "median_seconds": {k: round(v, 4) for k, v in med.items()},
        "ratio_b_float32_over_baseline": round(med["b_library_float32_symmetric"] / base, 3),
        "ratio_c_float64_over_baseline": round(med["c_library_float64_symmetric"] / base, 3),
        "goal_b_over_baseline_at_most": 0.6,
        "float32_vs_float64_max_rel_diff": float(np.abs(B32 - B64).max() / np.abs(B64).max()),
        "baseline_vs_float64_max_rel_diff": float(a_vs_c / np.abs(B64.sum(axis=2)).max()),
    }
    results["goal_met"] = results["ratio_b_float32_over_baseline"] <= 0.6
    report("gram_pass", results, args)
    if results["float32_vs_float64_max_rel_diff"] > 1e-5:  # must hold at any speed
        raise SystemExit("float32 tiles disagree with float64 beyond 1e-5 relative")


if __name__ == "__main__":
    main()
