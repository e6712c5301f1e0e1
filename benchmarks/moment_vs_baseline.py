"""The moment level against a baseline checkout, case by case, in the same run.

    python benchmarks/moment_vs_baseline.py --baseline /path/to/other/checkout [--only wine vehicle]
        [--repeats 1]

For the class-origin CQS optima the SDP dual does not certify (wine, vehicle, segmentation;
standardised data, 8 restarts, class matrices as ``certificate_levels.py`` builds them), runs
``moment_relaxation_bound`` of this checkout (with the fitted W, as the estimators call it) and
of the baseline checkout (``moment_relaxation_bound(R)``, its API before W existed), each in a
fresh subprocess, alternating, and prints per run the wall and CPU seconds (the child's user +
system time: on a loaded machine CPU time is the fairer measure), the relative gap of the bound
to f(W), and the ratios baseline / candidate. Prints os.getloadavg(); nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _common  # noqa: F401  (puts the checkout on sys.path)
import numpy as np
from certificate_levels import class_matrices
from sklearn.preprocessing import StandardScaler

from catdask import CategorySpace
from catdask.evaluation.data import load_xy

HERE = Path(__file__).resolve().parents[1]
CHILD = """
import json, sys, time, numpy as np
from catdask.certificate.moment import moment_relaxation_bound
d = np.load(sys.argv[1]); t = time.perf_counter()
kw = {"W": d["W"]} if sys.argv[2] == "candidate" else {}
mb = moment_relaxation_bound(d["R"], **kw)
print(json.dumps({"bound": mb.upper_bound, "seconds": time.perf_counter() - t}))
"""


def run(kind, path, checkout):
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", CHILD, path, kind], env=env, check=True,
                         capture_output=True, text=True).stdout
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {**json.loads(out.strip().splitlines()[-1]), "wall": wall, "cpu": cpu}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--baseline", required=True, help="checkout of the baseline (its root)")
    ap.add_argument("--only", nargs="+", default=["wine", "vehicle", "segmentation"])
    ap.add_argument("--repeats", type=int, default=1)
    args = ap.parse_args(argv)
    print(f"load average {os.getloadavg()}; baseline {args.baseline}; candidate {HERE}",
          flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.only:
            X, y = load_xy(name)
            X = StandardScaler().fit_transform(X)
            est = CategorySpace(origin="class", n_restarts=8, random_state=0,
                                certify=False).fit(X, y)
            R = class_matrices(X, y, est.classes_, "class")
            W = est.components_.T
            f = 0.5 * float(np.einsum("dk,kde,ek->", W, R, W))
            path = str(Path(tmp) / f"{name}.npz")
            np.savez(path, R=R, W=W)
            res = {"baseline": [], "candidate": []}
            for _ in range(args.repeats):
                for kind, checkout in (("baseline", args.baseline), ("candidate", HERE)):
                    r = run(kind, path, checkout)
                    res[kind].append(r)
                    print(f"{name:<13} {kind:<9} wall {r['wall']:8.1f} s  cpu {r['cpu']:8.1f} s  "
                          f"gap {(r['bound'] - f) / f:.2e}", flush=True)
            med = {k: {m: float(np.median([r[m] for r in v])) for m in ("wall", "cpu")}
                   for k, v in res.items()}
            ratio = {m: med["baseline"][m] / med["candidate"][m] for m in ("wall", "cpu")}
            print(f"{name:<13} baseline / candidate: wall {ratio['wall']:.2f}x, "
                  f"cpu {ratio['cpu']:.2f}x", flush=True)
    print(f"load average {os.getloadavg()}")


if __name__ == "__main__":
    main()
