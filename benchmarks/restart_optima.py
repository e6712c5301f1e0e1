"""Do the restarts of a linear CQS fit reach the same objective? Per data set and origin.

    python benchmarks/restart_optima.py [--restarts 50] [--datasets vehicle wine]

For each of the nine data sets of ``bench_predict.py`` (sklearn's iris, wine, breast cancer,
digits and the paper's UCI sets where their files are available) and both origins, one
``CategorySpace(n_restarts=R, certify=False)`` fit on the standardised data (its default starts:
class means, the decoupled start, then random ones). Printed per case: how many restarts reached
the best objective (relative 1e-8), the distinct local optima found (objectives grouped at
relative 1e-8) with how many restarts reached each, and the largest relative spread of the
objectives. Prints what it measures; nothing is asserted.
"""

from __future__ import annotations

import argparse
import os
import time

import _common  # noqa: F401  (puts the checkout on sys.path)
import numpy as np
from bench_predict import SKLEARN_SETS, load
from sklearn.preprocessing import StandardScaler

from catdask import CategorySpace
from catdask.evaluation.data import PAPER_DATASETS

RTOL = 1e-8


def optima(objectives):
    """[(objective, count)] of the distinct values (grouped at relative RTOL), best first."""
    groups = []
    for f in sorted(objectives, reverse=True):
        if groups and abs(groups[-1][0] - f) <= RTOL * abs(groups[-1][0]):
            groups[-1][1] += 1
        else:
            groups.append([f, 1])
    return [(f, n) for f, n in groups]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--restarts", type=int, default=50)
    ap.add_argument("--datasets", nargs="+", default=None)
    args = ap.parse_args(argv)
    names = args.datasets or list(SKLEARN_SETS) + [d for d in PAPER_DATASETS
                                                     if d not in SKLEARN_SETS]
    print(f"load average {os.getloadavg()[0]:.2f}; {args.restarts} restarts per fit; "
          f"objectives equal within relative {RTOL:g}", flush=True)
    print(f"{'data':<14}{'origin':<8}{'at best':>9}{'optima':>8}{'spread':>10}{'s':>7}  "
          "objectives (restarts)", flush=True)
    for name in names:
        try:
            X, y = load(name)
        except FileNotFoundError as exc:
            print(f"{name:<14}skipped: {exc}", flush=True)
            continue
        X = StandardScaler().fit_transform(np.asarray(X, dtype=float))
        for origin in ("class", "global"):
            t0 = time.perf_counter()
            est = CategorySpace(origin=origin, n_restarts=args.restarts, random_state=0,
                                certify=False).fit(X, y)
            seconds = time.perf_counter() - t0
            f = np.array([r.objective for r in est.restarts_])
            found = optima(f)
            spread = (f.max() - f.min()) / abs(f.max())
            listing = ", ".join(f"{v:.8g} ({n})" for v, n in found[:4])
            print(f"{name:<14}{origin:<8}{found[0][1]:>5}/{len(f):<3}{len(found):>8}"
                  f"{spread:>10.1e}{seconds:>7.1f}  {listing}", flush=True)
    print(f"load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
