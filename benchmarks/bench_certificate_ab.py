"""The kernel test's cost, this checkout against another one, on the same fitted coefficients.

    python benchmarks/bench_certificate_ab.py --baseline /path/to/other/checkout [--quick]
        [--only wine blobs] [--reps 3] [--json out.json]

The cases of ``bench_certificate_scale.py`` (K-CQS, RBF with the default gamma, both origins).
Each case is fitted once here (``certify=False``; wall and CPU seconds); then the low-rank test
(docs/design.md §4c) runs on the fitted coefficients and the fit's projections, with the
estimator's seed, in fresh processes of the baseline checkout and of this one, alternately,
``--reps`` times each. Printed per case: the test's CPU and wall seconds before -> after
(medians), its verdict and gap before -> after (equal when nothing but the cost changed), and
the test's time over the fit's; then the medians over the cases and the load average. CPU time
is the comparison that a loaded host disturbs least (both fits and tests stretch with the
load, by different factors). Nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def _worker(case_dir):
    """Time the test on every saved case with whatever catdask is on sys.path."""
    from catdask.certificate.certifiers import CERTIFIER_SEED
    from catdask.certificate.kernel_lowrank import certify_kernel_lowrank
    from catdask.core.classes import ClassIndex
    from catdask.kernels.functions import Kernel
    from catdask.operators import CentredGramOperator, NumpyGramOperator

    out = {}
    paths = sorted(Path(case_dir).glob("*.npz"))
    for path in paths[:1] + paths:  # the first once untimed: a process's one-off costs
        d = np.load(path)
        y, origin = d["y"], str(d["origin"])
        classes = ClassIndex(y, int(y.max()) + 1)
        kernel = Kernel("rbf", params={"gamma": float(d["gamma"])})
        base = NumpyGramOperator(d["X"], classes, kernel, max_gram_bytes=0)
        op = CentredGramOperator(base) if origin == "global" else base
        t0, c0 = time.perf_counter(), time.process_time()
        cert = certify_kernel_lowrank(op, origin, d["A"], projections=d["P"], rng=CERTIFIER_SEED)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        out[path.stem] = dict(wall=wall, cpu=cpu, certified=bool(cert.certified),
                              gap=float(cert.verified_gap if cert.certified else cert.gap),
                              upper=float(cert.verified_upper_bound))
    print(json.dumps(out))


def _fit_cases(args, case_dir):
    import _common  # noqa: F401  (puts this checkout on sys.path)
    import bench_certificate_scale as scale
    from catdask import KernelCategorySpace

    fits = {}
    ns = argparse.Namespace(quick=args.quick, only=args.only, no_uci=False)
    for name, X, y in scale.cases(ns):
        X, y = scale.sorted_by_class(X, y)
        for origin in scale.ORIGINS:
            est = KernelCategorySpace(origin=origin, n_restarts=5, random_state=0, certify=False)
            t0, c0 = time.perf_counter(), time.process_time()
            est.fit(X, y)
            wall, cpu = time.perf_counter() - t0, time.process_time() - c0
            key = f"{name}__{origin}"
            np.savez(Path(case_dir) / f"{key}.npz", X=X, y=y, A=est.dual_coef_,
                     P=est.transform(X).T, gamma=est.kernel_.params["gamma"], origin=origin)
            fits[key] = dict(wall=wall, cpu=cpu)
            print(f"fitted {key}: {wall:.2f} s wall, {cpu:.2f} s CPU", flush=True)
    return fits


def _run_tree(tree, case_dir):
    env = dict(os.environ, PYTHONPATH=str(tree))
    done = subprocess.run([sys.executable, __file__, "--worker", str(case_dir)], env=env,
                          check=True, capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--baseline", help="another checkout of catdask (its root)")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", nargs="*", default=None)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--json", default=None)
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        return _worker(args.worker)
    here = Path(__file__).resolve().parents[1]
    if not args.baseline:  # run_all: this checkout against itself (the spread of the timing)
        print("no --baseline: this checkout against itself, once")
        args.baseline, args.reps = str(here), 1
    print(f"load average at start {os.getloadavg()}; baseline {args.baseline}; this {here}",
          flush=True)
    with tempfile.TemporaryDirectory() as case_dir:
        fits = _fit_cases(args, case_dir)
        runs = {"before": [], "after": []}
        for rep in range(args.reps):
            for tag, tree in (("before", args.baseline), ("after", here)):
                runs[tag].append(_run_tree(tree, case_dir))
                print(f"rep {rep + 1} {tag}: load {os.getloadavg()[0]:.1f}", flush=True)
    rows = []
    print(f"{'case':<22} {'fit CPU':>8} {'test CPU before -> after':>25} {'wall b -> a':>15} "
          f"{'CPU test/fit b -> a':>20}  verdict, gap before -> after")
    for key, fit in fits.items():
        med = {tag: {m: float(np.median([r[key][m] for r in runs[tag]])) for m in ("cpu", "wall")}
               for tag in runs}
        b, a = runs["before"][0][key], runs["after"][0][key]
        same = all(r[key]["certified"] == b["certified"] and r[key]["gap"] == b["gap"]
                   for tag in runs for r in runs[tag]) and a["gap"] == b["gap"]
        row = dict(case=key, fit=fit, before=med["before"], after=med["after"],
                   certified=(b["certified"], a["certified"]), gap=(b["gap"], a["gap"]),
                   identical=same)
        rows.append(row)
        verdict = lambda c: "cert." if c else "gap"  # noqa: E731
        before, after = med["before"], med["after"]
        print(f"{key:<22} {fit['cpu']:8.3f} {before['cpu']:11.3f} -> {after['cpu']:9.3f} "
              f"{before['wall']:6.2f} -> {after['wall']:5.2f} "
              f"{before['cpu'] / fit['cpu']:9.2f} -> {after['cpu'] / fit['cpu']:6.2f}  "
              f"{verdict(b['certified'])} {b['gap']:.6e} -> {verdict(a['certified'])} "
              f"{a['gap']:.6e}{'' if same else '  CHANGED'}")
    for tag in ("before", "after"):
        cpu = np.median([r[tag]["cpu"] / r["fit"]["cpu"] for r in rows])
        wall = np.median([r[tag]["wall"] / r["fit"]["wall"] for r in rows])
        print(f"{tag}: median test/fit {cpu:.2f} (CPU), {wall:.2f} (wall)")
    print(f"verdicts and gaps identical in every run: {all(r['identical'] for r in rows)}; "
          f"load average at end {os.getloadavg()}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"benchmark": "certificate_ab", "quick": bool(args.quick),
                       "load_average_end": os.getloadavg(), "rows": rows}, f, indent=1)
    return rows


if __name__ == "__main__":
    main()
