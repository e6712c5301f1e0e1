"""Benchmark: does a low-rank warm start pay for the exact kernel fit? (issue 13, item 3)

Baseline: the exact RBF K-CQS fit from the decoupled start (one restart, tol 1e-8, the default
accelerated iteration). Candidate: a Nystroem fit whose landmarks the Gram spectrum chooses
(``n_landmarks="auto"``: pivoted-Cholesky pivots until the left-out trace is <= 1e-3 of tr G),
then the same exact fit started from its coefficients (``init=approx.training_coef_``).

Per case: the rank the spectrum chose and its residual, the exact iterations (= Gram passes)
of both, wall times (baseline and candidate interleaved, REPEATS times, medians; the
candidate's time includes its Nystroem fit), and the relative objective difference (same
optimum expected). "passes saved" says whether the warm start cut Gram passes; "pays" whether
it cut wall time too. Cases: the README's N = 4,000 blobs at the benchmark kernel width and a
4x wider kernel (faster spectrum decay), N = 16,000 blobs with the wide kernel on the Dask
backend (a Gram pass costs more there), and the UCI satellite set (standardised, default gamma)
when ``../shared`` is present.

    python benchmarks/bench_warm_start.py [--quick] [--json out.json]
"""

from __future__ import annotations

import statistics
import time

import numpy as np

from _common import (blobs, load_average, local_cluster, parse_args, quiet_warnings, rbf_gamma,
                     report)

D, K = 10, 5


def _cases(quick):
    n = 1500 if quick else 4000
    out = [(f"blobs N={n}, benchmark width", *blobs(n, D, K, seed=4000), rbf_gamma(D), False),
           (f"blobs N={n}, 4x wider", *blobs(n, D, K, seed=4000), rbf_gamma(D) / 4, False)]
    if not quick:
        out.append(("blobs N=16000, 4x wider, Dask", *blobs(16000, D, K, seed=16000),
                    rbf_gamma(D) / 4, True))
    if quick:
        print("UCI satellite case skipped: --quick")
        return out
    from sklearn.preprocessing import StandardScaler

    from catdask.evaluation.data import load_xy

    try:
        Xs, ys = load_xy("satellite")
    except FileNotFoundError as exc:
        print(f"UCI satellite case skipped: its files are not here ({exc})")
    else:
        Xs = StandardScaler().fit_transform(Xs)
        out.append(("UCI satellite (standardised, default gamma)", Xs, ys,
                    0.05 / Xs.shape[1], False))
    return out


def _fit(X, y, gamma, **kw):
    from catdask import KernelCategorySpace

    t0 = time.perf_counter()
    est = KernelCategorySpace(gamma=gamma, n_restarts=1, tol=1e-8, max_iter=5000,
                              random_state=0, certify=False, **kw).fit(X, y)
    return est, time.perf_counter() - t0


def run_case(name, X, y, gamma, distributed, repeats):
    Xin = X
    if distributed:
        import dask.array as da

        Xin = da.from_array(X, chunks=(max(1, X.shape[0] // 8), X.shape[1])).persist()
    base_t, warm_t, approx_t = [], [], []
    for _ in range(repeats):  # interleaved: baseline, then candidate, each repeat
        base, t = _fit(Xin, y, gamma, init="decoupled")
        base_t.append(t)
        approx, ta = _fit(Xin, y, gamma, approximation="nystroem", n_landmarks="auto")
        warm, tw = _fit(Xin, y, gamma, init=approx.training_coef_)
        approx_t.append(ta)
        warm_t.append(ta + tw)
    start_ratio = warm.restarts_[0].history[0] / base.objective_
    row = {
        "case": name,
        "N": X.shape[0],
        "rank (auto)": int(approx.landmark_indices_.size),
        "residual/trG": float(approx.landmark_residual_),
        "start/optimum": start_ratio,
        "passes decoupled": base.n_iter_,
        "passes warm": warm.n_iter_,
        "decoupled s": statistics.median(base_t),
        "nystroem s": statistics.median(approx_t),
        "warm total s": statistics.median(warm_t),
        "objective rel diff": abs(warm.objective_ - base.objective_) / abs(base.objective_),
    }
    row["passes saved"] = base.n_iter_ - warm.n_iter_
    row["pays"] = "yes" if row["warm total s"] < row["decoupled s"] else "no"
    return row


def main():
    args = parse_args(__doc__)
    quiet_warnings()
    repeats = 1 if args.quick else 3
    load_start = load_average()
    print(f"load average at start: {load_start}")
    rows = []
    cases = _cases(args.quick)
    cluster = client = None
    if any(distributed for *_, distributed in cases):
        cluster, client = local_cluster(2)
    try:
        for name, X, y, gamma, distributed in cases:
            rows.append(run_case(name, X, y, gamma, distributed, repeats))
            print(rows[-1], flush=True)
    finally:
        if client is not None:
            client.close()
            cluster.close()
    report("warm_start", {"rows": rows, "load_average_start": load_start}, args)


if __name__ == "__main__":
    main()
