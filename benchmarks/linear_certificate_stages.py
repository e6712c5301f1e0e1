"""Where the linear certificate's time goes on the 16 UCI cases, stage by stage.

    python benchmarks/linear_certificate_stages.py [--only wine vehicle]
        [--origins class global] [--restarts 8] [--json out.json]

For each of the paper's eight data sets (standardised) and both origins, ``CategorySpace`` (CQS)
is fitted without its test; the test (``certify_global_optimum(..., moment=True)``, what
``certify="moment"`` runs) is then run on the best restart's axes with the class matrices of
``benchmarks/certificate_levels.py``, and every stage is timed (wall and CPU, every thread):
setup (``StationaryPoint``), Rapcsák, the SDP-dual search, the subspace bound, the reduced
bound, and inside the moment level: building the identity, the SCS solve, and the proof from
the dual data (``dual_bound`` and the least-norm closing). Printed per case: the verdict, the
gap (verified margin when certified), the stage times; at the end the totals and the load
average. Data sets whose files are not available are skipped, saying so. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import time
from collections import defaultdict

import _common  # noqa: F401  (puts the checkout on sys.path)
from certificate_levels import class_matrices
from certificate_outcomes import cases

import catdask.certificate.certify as certify_mod
import catdask.certificate.moment as moment_mod
from catdask import CategorySpace
from catdask.certificate import certify_global_optimum

STAGES = ("setup", "rapcsak", "sdp_dual", "subspace", "reduced", "moment_build", "scs_solve",
          "moment_proof", "moment_other")
_TIMES: dict = defaultdict(lambda: [0.0, 0.0])


def _timed(stage, fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        t, c = time.perf_counter(), time.process_time()
        try:
            return fn(*args, **kwargs)
        finally:
            _TIMES[stage][0] += time.perf_counter() - t
            _TIMES[stage][1] += time.process_time() - c
    return wrapper


def instrument():
    """Wrap the stages' functions where ``certify`` and ``moment`` look them up."""
    for name, stage in (("StationaryPoint", "setup"), ("rapcsak_lambda_max", "rapcsak"),
                        ("sdp_dual_test", "sdp_dual"), ("subspace_dual_bound", "subspace"),
                        ("reduced_bound", "reduced"), ("moment_relaxation_bound", "moment")):
        setattr(certify_mod, name, _timed(stage, getattr(certify_mod, name)))
    for name, stage in (("Identity", "moment_build"), ("dual_bound", "moment_proof"),
                        ("_closed", "moment_proof")):
        if hasattr(moment_mod, name):
            setattr(moment_mod, name, _timed(stage, getattr(moment_mod, name)))
    import scs

    class TimedSCS(scs.SCS):
        def __init__(self, *args, **kwargs):
            _timed("moment_build", super().__init__)(*args, **kwargs)

        def solve(self, *args, **kwargs):
            return _timed("scs_solve", super().solve)(*args, **kwargs)

    scs.SCS = TimedSCS


def run_case(X, y, origin, restarts):
    est = CategorySpace(origin=origin, n_restarts=restarts, random_state=0, certify=False)
    t0 = time.perf_counter()
    est.fit(X, y)
    fit_s = time.perf_counter() - t0
    R = class_matrices(X, y, est.classes_, origin)
    _TIMES.clear()
    t, c = time.perf_counter(), time.process_time()
    cert = certify_global_optimum(R, est.components_.T, moment=True)
    wall, cpu = time.perf_counter() - t, time.process_time() - c
    stages = {k: tuple(v) for k, v in _TIMES.items()}
    inner = sum(stages.get(s, (0, 0))[1] for s in ("moment_build", "scs_solve", "moment_proof"))
    if "moment" in stages:
        stages["moment_other"] = (0.0, stages["moment"][1] - inner)
    return est, cert, fit_s, wall, cpu, stages


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", nargs="*", default=None)
    ap.add_argument("--origins", nargs="+", default=["class", "global"])
    ap.add_argument("--restarts", type=int, default=8)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    instrument()
    print(f"load average at start {os.getloadavg()}; stage times are CPU seconds (all threads)",
          flush=True)
    head = " ".join(f"{s[:9]:>9}" for s in STAGES)
    print(f"{'data':<13} {'origin':<6} {'D':>3} {'K':>2} {'level':<9} {'gap':>8} {'wall':>7} "
          f"{'cpu':>7} {head}", flush=True)
    rows = []
    args.no_kernel = True  # the linear cases of certificate_outcomes.py, standardised alike
    for name, _, X, y in cases(args):
        for origin in args.origins:
            est, cert, fit_s, wall, cpu, stages = run_case(X, y, origin, args.restarts)
            gap = cert.verified_gap if cert.certified else cert.gap
            level = cert.method if cert.certified else "no"
            row = dict(dataset=name, origin=origin, D=X.shape[1], K=len(est.classes_),
                       level=level, certified=bool(cert.certified), gap=float(gap),
                       test_wall=wall, test_cpu=cpu, fit_s=fit_s,
                       stages_cpu={k: v[1] for k, v in stages.items()},
                       stages_wall={k: v[0] for k, v in stages.items()},
                       reason=cert.reason)
            rows.append(row)
            cells = " ".join(f"{row['stages_cpu'].get(s, 0.0):9.2f}" for s in STAGES)
            print(f"{name:<13} {origin:<6} {row['D']:>3} {row['K']:>2} {level:<9} {gap:8.1e} "
                  f"{wall:7.2f} {cpu:7.2f} {cells}", flush=True)
    tot = {s: sum(r["stages_cpu"].get(s, 0.0) for r in rows) for s in STAGES}
    print(f"{'total':<13} {'':<6} {'':>3} {'':>2} "
          f"{str(sum(r['certified'] for r in rows)) + '/' + str(len(rows)):<9} {'':>8} "
          f"{sum(r['test_wall'] for r in rows):7.2f} {sum(r['test_cpu'] for r in rows):7.2f} "
          + " ".join(f"{tot[s]:9.2f}" for s in STAGES), flush=True)
    print(f"load average at end {os.getloadavg()}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"benchmark": "linear_certificate_stages", "restarts": args.restarts,
                       "rows": rows}, f, indent=1)
    return rows


if __name__ == "__main__":
    main()
