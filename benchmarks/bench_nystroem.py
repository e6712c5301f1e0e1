"""Nystroem approximation against the exact kernel fit: accuracy, time, warm-start savings.

RBF on blobs, N = 4000, D = 10, K = 5 (numpy backend, exact fit from the decoupled start).
For m landmarks:
- ``objective_ratio``: the exact objective at the Nystroem axes (they live in the RKHS, so
  this is a feasible value) over the exact optimum (<= 1; the gap is the approximation cost);
- ``projection_corr``: mean over axes of |corr| between Nystroem and exact training projections;
- ``predict_agreement``: fraction of held-out points given the same class by the angle
  classifier of both models; ``test_accuracy`` of each;
- warm start: exact iterations from the Nystroem coefficients (``init=training_coef_``) vs
  from the decoupled start and from a random start, and whether the optimum is the same.

    python benchmarks/bench_nystroem.py [--quick]
"""

from __future__ import annotations

import time

import numpy as np

from _common import blobs, parse_args, quiet_warnings, rbf_gamma, report

D, K = 10, 5


def main():
    args = parse_args(__doc__)
    quiet_warnings()
    from catdask import KernelCategorySpace

    N = 1500 if args.quick else 4000
    X, y = blobs(N + 2000, D, K, seed=6)
    Xt, yt, X, y = X[N:], y[N:], X[:N], y[:N]
    kw = dict(gamma=rbf_gamma(D), n_restarts=1, tol=1e-8, max_iter=5000, random_state=0,
              certify=False)
    t0 = time.perf_counter()
    exact = KernelCategorySpace(init="decoupled", **kw).fit(X, y)
    t_exact = time.perf_counter() - t0
    P_exact, pred_exact = exact.transform(X), exact.predict(Xt)
    rand = KernelCategorySpace(init="random", **kw).fit(X, y)
    rows = []
    for m in ([50, 100, 200] if args.quick else [100, 200, 400, 800]):
        t0 = time.perf_counter()
        approx = KernelCategorySpace(approximation="nystroem", n_landmarks=m, **kw).fit(X, y)
        t_approx = time.perf_counter() - t0
        t0 = time.perf_counter()
        warm = KernelCategorySpace(init=approx.training_coef_, **kw).fit(X, y)
        t_warm = time.perf_counter() - t0
        P = approx.transform(X)
        rows.append({
            "m": m,
            "fit_s": round(t_approx, 2),
            "objective_ratio": warm.restarts_[0].history[0] / exact.objective_,
            "projection_corr": float(np.mean([abs(np.corrcoef(P[:, k], P_exact[:, k])[0, 1])
                                              for k in range(K)])),
            "predict_agreement": float(np.mean(approx.predict(Xt) == pred_exact)),
            "test_accuracy": float(np.mean(approx.predict(Xt) == yt)),
            "warm_exact_iterations": warm.n_iter_,
            "warm_exact_s (incl. nystroem fit)": round(t_warm + t_approx, 2),
            "warm_same_optimum": bool(abs(warm.objective_ - exact.objective_)
                                      <= 1e-9 * abs(exact.objective_)),
        })
    results = {"N": N, "exact_s": round(t_exact, 2), "exact_iterations": exact.n_iter_,
               "decoupled_start_objective_ratio": exact.restarts_[0].history[0] / exact.objective_,
               "random_start_iterations": rand.n_iter_,
               "random_start_same_optimum": bool(abs(rand.objective_ - exact.objective_)
                                                 <= 1e-9 * abs(exact.objective_)),
               "exact_test_accuracy": float(np.mean(pred_exact == yt)), "rows": rows}
    for r in rows:
        print(r)
    report("Nystroem vs exact kernel fit", results, args)


if __name__ == "__main__":
    main()
