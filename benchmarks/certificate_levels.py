"""Which certificate level proves each linear UCI optimum (CQS, standardised, both origins).

    python benchmarks/certificate_levels.py [--restarts 8] [--only wine vehicle] [--json out.json]

For each of the paper's eight data sets and both origins: fit ``CategorySpace`` (CQS) on the
standardised data, then report the level that proved the best restart globally optimal
(Rapcsák, the SDP dual, or the level-2 moment relaxation tried only when the SDP dual is not
tight), the rigorous relative gap, and the time of each level. Data sets whose files are not in
``../shared/data/uci`` are skipped, saying so. Prints what it measures; nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import _common  # noqa: F401  (puts the checkout on sys.path)
import numpy as np
from sklearn.preprocessing import StandardScaler

from catdask import CategorySpace
from catdask.evaluation.data import PAPER_DATASETS, load_xy
from catdask.certificate.moment import RelaxationTooLarge, moment_relaxation_bound

GAP_TOL = 1e-6


def class_matrices(X, y, classes, origin):
    """R_k: class scatter (origin="class") or class second moment about the centroid."""
    centre = X.mean(axis=0)
    R = []
    for c in classes:
        Xk = X[y == c]
        Xk = Xk - (Xk.mean(axis=0) if origin == "class" else centre)
        R.append(Xk.T @ Xk)
    return np.stack(R)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--restarts", type=int, default=8)
    ap.add_argument("--only", nargs="*", default=None)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f}")
    print(f"{'data':<13} {'origin':<7} {'D':>3} {'K':>2} {'objective':>12} {'level':<9} "
          f"{'gap':>9} {'dual s':>7} {'moment s':>8} {'moments':>8} {'block':>5}")
    rows = []
    for name in args.only or PAPER_DATASETS:
        try:
            X, y = load_xy(name)
        except FileNotFoundError as exc:
            print(f"{name:<13} skipped: {exc}")
            continue
        X = StandardScaler().fit_transform(X)
        for origin in ("class", "global"):
            est = CategorySpace(origin=origin, n_restarts=args.restarts, random_state=0).fit(X, y)
            cert = est.certificate_
            row = dict(dataset=name, origin=origin, D=X.shape[1], K=len(est.classes_),
                       objective=est.objective_, dual_seconds=cert.seconds,
                       level=cert.method if cert.certified else None,
                       gap=cert.gap, moment_seconds=None, n_moments=None, block=None)
            if not cert.certified:
                R = class_matrices(X, y, est.classes_, origin)
                t0 = time.perf_counter()
                try:
                    mb = moment_relaxation_bound(R, W=est.components_.T)
                except RelaxationTooLarge as exc:
                    row["level"] = f"none ({exc})"
                else:
                    gap = max(0.0, (mb.upper_bound - est.objective_) / abs(est.objective_))
                    row.update(gap=gap, n_moments=mb.n_moments, block=max(mb.block_sizes),
                               level="moment" if gap <= GAP_TOL else None)
                row["moment_seconds"] = time.perf_counter() - t0
            rows.append(row)
            ms = "" if row["moment_seconds"] is None else f"{row['moment_seconds']:.1f}"
            print(f"{name:<13} {origin:<7} {row['D']:>3} {row['K']:>2} {row['objective']:12.6g} "
                  f"{str(row['level'] or 'no'):<9} {row['gap']:9.2e} {row['dual_seconds']:7.2f} "
                  f"{ms:>8} {row['n_moments'] or '':>8} {row['block'] or '':>5}", flush=True)
    proven = sum(r["level"] in ("sdp-dual", "rapcsak", "moment") for r in rows)
    print(f"proven optimal: {proven} of {len(rows)}; load average {os.getloadavg()[0]:.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"restarts": args.restarts, "gap_tol": GAP_TOL, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
