"""Certificate outcomes of CQS and K-CQS on iris and wine, both origins.

    python benchmarks/certificate_outcomes.py [--restarts 8] [--json out.json]

For each data set (standardised on all rows), method and origin: the objective of the best
restart, which test certified it (SDP dual, Rapcsak), the optimality gap against the upper
bound, the first-order residual, how many restarts reached the best objective, and the fit time.
Prints what it measures; nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import time

import _common  # noqa: F401  (puts the checkout on sys.path)
from sklearn.datasets import load_iris, load_wine
from sklearn.preprocessing import StandardScaler

from catdask import CategorySpace, KernelCategorySpace


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--restarts", type=int, default=8)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()

    rows = []
    print(f"{'data':<5} {'method':<6} {'origin':<6} {'objective':>12} {'certified':<22} "
          f"{'gap':>9} {'rapcsak':<7} {'first-order':>11} {'best/R':>6} {'fit s':>6}")
    for name, loader in (("iris", load_iris), ("wine", load_wine)):
        X, y = loader(return_X_y=True)
        X = StandardScaler().fit_transform(X)
        for method, make in (
            ("CQS", lambda o: CategorySpace(origin=o, n_restarts=args.restarts, random_state=0)),
            ("K-CQS", lambda o: KernelCategorySpace(origin=o, n_restarts=args.restarts,
                                                    random_state=0)),
        ):
            for origin in ("class", "global"):
                t0 = time.perf_counter()
                est = make(origin).fit(X, y)
                seconds = time.perf_counter() - t0
                c = est.certificate_
                best = max(r.objective for r in est.restarts_)
                n_best = sum(abs(r.objective - best) <= 1e-8 * abs(best) for r in est.restarts_)
                how = f"yes ({c.method})" if c.certified else "no"
                gap = f"{c.gap:.2e}"
                print(f"{name:<5} {method:<6} {origin:<6} {est.objective_:12.6g} {how:<22} "
                      f"{gap:>9} {str(c.rapcsak):<7} {c.first_order:11.1e} "
                      f"{n_best:>3}/{len(est.restarts_):<2} {seconds:6.2f}")
                rows.append(dict(dataset=name, method=method, origin=origin,
                                 objective=est.objective_, certified=c.certified,
                                 certificate_method=c.method, gap=c.gap, rapcsak=c.rapcsak,
                                 first_order=c.first_order, restarts_at_best=n_best,
                                 restarts=len(est.restarts_), seconds=seconds))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"restarts": args.restarts, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
