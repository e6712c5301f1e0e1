"""The subspace dual bound's cost on a mid-size uncertified linear fit, with and without the skip.

    python benchmarks/subspace_skip.py [--n 100000] [--reps 5]

The in-memory case of ``benchmarks/bench_linear.py --quick`` (blobs, N = 100,000, D = 50,
K = 10, seed 4; its certificate is not certified: the SDP relaxation is not tight there).
Interleaved, ``--reps`` times each: scikit-learn's ``LinearDiscriminantAnalysis().fit`` (the
baseline), ``CategorySpace(random_state=0).fit`` with the subspace bound always run
(``subspace_min_gap = 0``: the behaviour before the skip), and with the default skip (the
subspace bound runs only when the cheap bounds leave a gap above the budget's
``subspace_min_gap``).
Printed: medians, ratios to LDA, the certificate's gap and time, the load average. Nothing is
asserted.
"""

from __future__ import annotations

import argparse
import os
import time

import _common  # noqa: F401  (puts the checkout on sys.path)
import numpy as np
from _common import blobs, quiet_warnings
from sklearn.discriminant_analysis import LinearDiscriminantAnalysis

from catdask import CategorySpace
from catdask.certificate.budget import DEFAULT_BUDGET, CertificateBudget, budget_scope


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args(argv)
    quiet_warnings()
    X, y = blobs(args.n, 50, 10, seed=4)
    default = DEFAULT_BUDGET.subspace_min_gap
    print(f"load average at start {os.getloadavg()}; N = {args.n}, D = 50, K = 10", flush=True)
    times = {"lda": [], "always": [], "skip": []}
    certs = {}
    for _ in range(args.reps):
        t0 = time.perf_counter()
        LinearDiscriminantAnalysis().fit(X, y)
        times["lda"].append(time.perf_counter() - t0)
        for name, threshold in (("always", 0.0), ("skip", default)):
            t0 = time.perf_counter()
            with budget_scope(CertificateBudget(subspace_min_gap=threshold)):
                est = CategorySpace(random_state=0).fit(X, y)
            times[name].append(time.perf_counter() - t0)
            certs[name] = est.certificate_
    med = {k: float(np.median(v)) for k, v in times.items()}
    for name, label in (("always", "subspace bound always"), ("skip", "default (skip)")):
        c = certs[name]
        print(f"CategorySpace, {label:<22}: fit {med[name]:.3f} s = {med[name] / med['lda']:.2f}x "
              f"LDA; certificate {c.seconds:.3f} s, certified {c.certified}, gap {c.gap:.2e}")
    print(f"LDA: {med['lda']:.3f} s; fit time skip / always: {med['skip'] / med['always']:.2f}")
    print(f"load average at end {os.getloadavg()}")


if __name__ == "__main__":
    main()
