"""The moment level with and without the complementary-slackness polish (docs/design.md 4b).

    python benchmarks/moment_polish.py [--only wine vehicle segmentation] [--repeats 2]

For the class-origin optima that only the level-2 moment relaxation proves (wine, vehicle,
segmentation; standardised, best of 8 CQS restarts), ``moment_relaxation_bound`` is run with
``polish=False`` (the baseline: one SCS solve to eps = 1e-8, then the proof) and with the staged
solve and polish (``target_gap=1e-6``), interleaved, ``--repeats`` times each. Printed per case:
SCS iterations, polish rounds, the proved relative gap, CPU and wall seconds (medians) and the
candidate/baseline CPU ratio; the load average before and after. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import _common  # noqa: F401  (puts the checkout on sys.path)
from certificate_levels import class_matrices
from certificate_outcomes import cases
from threadpoolctl import threadpool_limits

from catdask import CategorySpace
from catdask.certificate.moment import moment_relaxation_bound

TARGET_GAP = 1e-6


def run(R, W, f, polish):
    t, c = time.perf_counter(), time.process_time()
    with threadpool_limits(1):  # as the certificate runs it (docs/design.md 4, one BLAS thread)
        mb = moment_relaxation_bound(R, W=W, target_gap=TARGET_GAP, polish=polish)
    return dict(wall=time.perf_counter() - t, cpu=time.process_time() - c, iters=mb.iterations,
                rounds=mb.polish_rounds, gap=(mb.upper_bound - f) / f)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", nargs="*", default=["wine", "vehicle", "segmentation"])
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args(argv)
    print(f"load average at start {os.getloadavg()}", flush=True)
    print(f"{'data':<13} {'variant':<9} {'iters':>6} {'rounds':>6} {'gap':>9} {'cpu s':>7} "
          f"{'wall s':>7}", flush=True)
    totals = {False: 0.0, True: 0.0}
    args.no_kernel = True  # the linear cases of certificate_outcomes.py, standardised alike
    for name, _, X, y in cases(args):
        est = CategorySpace(origin="class", n_restarts=8, random_state=0, certify=False).fit(X, y)
        R = class_matrices(X, y, est.classes_, "class")
        W = est.components_.T
        f = 0.5 * sum(W[:, k] @ R[k] @ W[:, k] for k in range(R.shape[0]))
        runs = {False: [], True: []}
        for _ in range(args.repeats):
            for polish in (False, True):
                runs[polish].append(run(R, W, f, polish))
        med = {}
        for polish, label in ((False, "baseline"), (True, "polish")):
            rs = runs[polish]
            med[polish] = {k: statistics.median(r[k] for r in rs) for k in ("cpu", "wall")}
            totals[polish] += med[polish]["cpu"]
            print(f"{name:<13} {label:<9} {rs[-1]['iters']:>6} {rs[-1]['rounds']:>6} "
                  f"{max(r['gap'] for r in rs):9.1e} {med[polish]['cpu']:7.1f} "
                  f"{med[polish]['wall']:7.1f}", flush=True)
        print(f"{name:<13} polish/baseline CPU {med[True]['cpu'] / med[False]['cpu']:.2f}",
              flush=True)
    print(f"total CPU (medians): baseline {totals[False]:.1f} s, polish {totals[True]:.1f} s, "
          f"ratio {totals[True] / max(totals[False], 1e-9):.2f}")
    print(f"load average at end {os.getloadavg()}")


if __name__ == "__main__":
    main()
