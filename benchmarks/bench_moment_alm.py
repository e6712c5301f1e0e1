"""The moment level solved two ways: SCS with the slackness polish (what the certificate runs)
against the low-rank augmented Lagrangian of ``benchmarks/lifted/moment_alm.py`` (issue 42,
item 2), on the same problems, interleaved, in one run.

    python benchmarks/bench_moment_alm.py [--only wine vehicle segmentation] [--rank 16 48]
                                          [--repeats 1] [--max-seconds 300] [--quick]
                                          [--json out.json]

For the class-origin optima that only the level-2 moment relaxation proves (standardised, best of
8 CQS restarts), both solvers start from the fitted W and stop once ``dual_bound`` proves a gap
of 1e-6 (relative to f), or at their limits. Printed per case and solver: the proved gap,
iterations (SCS's, or the ALM's outer / L-BFGS ones), CPU and wall seconds (medians), the ALM's
proved gap per outer iteration, and the load average before and after. Nothing is asserted.
``--quick`` (what ``run_all.py --quick`` runs): wine, rank 16 only.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import _common  # noqa: F401  (puts the checkout on sys.path)
from certificate_levels import class_matrices
from certificate_outcomes import cases
from threadpoolctl import threadpool_limits

from benchmarks.lifted.moment_alm import alm_moment_bound
from catdask import CategorySpace
from catdask.certificate.budget import CertificateBudget
from catdask.certificate.moment import moment_relaxation_bound

TARGET_GAP = 1e-6


def timed(solve, f):
    t, c = time.perf_counter(), time.process_time()
    with threadpool_limits(1):  # as the certificate runs (docs/design.md 4, one BLAS thread)
        out = solve()
    return out, {"wall": time.perf_counter() - t, "cpu": time.process_time() - c,
                 "gap": (out.upper_bound - f) / f}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", nargs="*", default=["wine", "vehicle", "segmentation"])
    ap.add_argument("--rank", nargs="*", type=int, default=[16, 48],
                    help="ALM factor ranks to try (each a row)")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--max-seconds", type=float, default=300.0)
    ap.add_argument("--quick", action="store_true", help="wine, rank 16 (run_all.py --quick)")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    args.no_kernel = True
    if args.quick:
        args.only, args.rank = ["wine"], [16]
    rows = []
    print(f"load average at start {os.getloadavg()}", flush=True)
    print(f"{'data':<13} {'solver':<16} {'gap':>9} {'iterations':>14} {'cpu s':>7} {'wall s':>7}",
          flush=True)
    budget = CertificateBudget(max_solve_seconds=args.max_seconds)
    for name, _, X, y in cases(args):
        est = CategorySpace(origin="class", n_restarts=8, random_state=0, certify=False).fit(X, y)
        R = class_matrices(X, y, est.classes_, "class")
        W = est.components_.T
        f = 0.5 * sum(W[:, k] @ R[k] @ W[:, k] for k in range(R.shape[0]))
        solvers = {"SCS + polish": lambda: moment_relaxation_bound(
            R, W=W, target_gap=TARGET_GAP, budget=budget)}
        for rank in args.rank:
            solvers[f"ALM rank {rank}"] = lambda rank=rank: alm_moment_bound(
                R, W, rank=rank, outer=100, inner=300, target_gap=TARGET_GAP,
                max_seconds=args.max_seconds)
        runs: dict = {label: [] for label in solvers}
        for _ in range(args.repeats):
            for label, solve in solvers.items():  # interleaved
                runs[label].append(timed(solve, f))
        for label, rs in runs.items():
            out = rs[-1][0]
            iters = (f"{out.iterations}" if label.startswith("SCS")
                     else f"{out.outer_iterations} / {out.inner_iterations}")
            cpu = statistics.median(m["cpu"] for _, m in rs)
            wall = statistics.median(m["wall"] for _, m in rs)
            gap = max(m["gap"] for _, m in rs)
            rows.append(dict(dataset=name, solver=label, gap=gap, iterations=iters, cpu_s=cpu,
                             wall_s=wall))
            print(f"{name:<13} {label:<16} {gap:9.1e} {iters:>14} {cpu:7.1f} {wall:7.1f}",
                  flush=True)
            if not label.startswith("SCS"):
                print(f"{'':<13} {'':<16} gap per outer iteration: "
                      + ", ".join(f"{g:.1e}" for _, g, _ in out.history), flush=True)
    print(f"load average at end {os.getloadavg()}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"benchmark": "bench_moment_alm", "quick": args.quick, "rows": rows,
                       "load_average_end": os.getloadavg()}, fh, indent=2)


if __name__ == "__main__":
    main()
