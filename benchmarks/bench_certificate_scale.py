"""The kernel certificate at scale: the low-rank test (docs/design.md §4c) against the fit.

    python benchmarks/bench_certificate_scale.py [--quick] [--only wine blobs] [--json out.json]

K-CQS, RBF with the default gamma, both origins, on: the paper's UCI data sets (standardised;
skipped, saying so, when their files are not in ``../shared/data/uci``), anisotropic blobs
(D = 20, K = 5; N = 20,000 and 50,000, ``--quick``: 3,000), and a high-rank set (blobs at
D = 200, K = 5; N = 4,000, ``--quick``: 1,500) whose Gram spectrum decays slowly.

Each case fits with ``certify=False`` (the fit's time), then runs the low-rank test on the
fitted coefficients with the fit's time above 1,500 samples, as the estimator does (it sizes
the landmarks where the lift keeps a gap open: issue 42) (its time; its extra peak memory by tracemalloc, in a separate run; its
verdict and gap; fits under 2 s and their tests are timed ``--reps`` times, interleaved,
medians) and, where the estimator would (up to 1,500 samples, a gap the lift leaves open), the
test through the exact factor after it (its time added; the better outcome kept, as the
estimator keeps it; the low-rank test's own outcome stays in the JSON as ``low_rank``), and,
up to N = 600 (``--dense-max-n``), the dense test of docs/design.md §4 on the same coefficients
(its time and verdict: the baseline). For N <= 1,500 it also fits the estimator with and
without its own test (``--overhead-reps`` times each, interleaved; medians): what a user pays.
Printed per case: the verdict, the gap, the compressed relaxation's own gap ("relax") and what
limits an open gap (the relaxation or the lift), the load average; then the goals of issue 26:
certified fraction (verified gap <= 1e-6), the other fits' gaps (<= 1e-3), the median of test
time / fit time (<= 10%), extra memory. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time
import tracemalloc

import _common  # noqa: F401  (puts the checkout on sys.path)
import numpy as np
from sklearn.preprocessing import StandardScaler

from catdask import KernelCategorySpace
from catdask.certificate.certifiers import CERTIFIER_SEED
from catdask.certificate.kernel_lowrank import certify_kernel_lowrank
from catdask.core.classes import ClassIndex
from catdask.certificate.budget import DEFAULT_BUDGET, CertificateBudget
from catdask.certificate.kernel import dense_kernel_test, lift_keeps_gap_open
from catdask.evaluation.data import PAPER_DATASETS, load_xy
from catdask.operators import CentredGramOperator, NumpyGramOperator

ORIGINS = ("global", "class")


def cases(args):
    """(name, X standardised, integer labels) for every case; prints what is skipped."""
    uci = () if args.no_uci else (args.only or PAPER_DATASETS)
    for name in uci:
        if name in ("blobs", "highrank"):
            continue
        try:
            X, y = load_xy(name)
        except (FileNotFoundError, ValueError) as exc:
            print(f"{name:<12} skipped: {str(exc)[:100]}", flush=True)
            continue
        yield name, StandardScaler().fit_transform(X), np.unique(y, return_inverse=True)[1]
    sizes = [3000] if args.quick else [20000, 50000]
    if not args.only or "blobs" in args.only:
        for n in sizes:
            X, y = _common.blobs(n, 20, 5)
            yield f"blobs-{n}", StandardScaler().fit_transform(X), y
    if not args.only or "highrank" in args.only:
        n = 1500 if args.quick else 4000
        X, y = _common.blobs(n, 200, 5, seed=3)
        yield f"highrank-{n}", StandardScaler().fit_transform(X), y


def sorted_by_class(X, y):
    order = np.argsort(y, kind="stable")
    return X[order], y[order]


def _limited_by(cert, gap, comp_gap):
    """What keeps a gap open: the compressed SDP relaxation (its own verified gap is most of
    the lifted one) or the lift to the full problem."""
    if cert.certified:
        return "-"
    if comp_gap is None:
        return "?"
    return "relaxation" if comp_gap >= 0.5 * gap else "lift"


def measure(name, X, y, origin, restarts, max_rank, overhead_reps=3, dense_baseline=True,
            reps=3):
    X, y = sorted_by_class(X, y)
    K = int(y.max()) + 1

    def fit():
        e = KernelCategorySpace(origin=origin, n_restarts=restarts, random_state=0,
                                certify=False)
        t0 = time.perf_counter()
        e.fit(X, y)
        return e, time.perf_counter() - t0

    est, fit_s = fit()
    classes = ClassIndex(y, K)
    base = NumpyGramOperator(X, classes, est.kernel_, max_gram_bytes=0)
    op = CentredGramOperator(base) if origin == "global" else base
    A = est.dual_coef_  # sorted order; A H works on H G H as A does (sum_i psi~_i = 0)
    # The fit's projections A G^ (what the estimator hands the test): transform gives them.
    P = est.transform(X).T
    # The fit's time, as the estimator hands it where no exact factor follows the test.
    grow_with = fit_s if len(y) > DEFAULT_BUDGET.exact_factor_max_rank else None

    def test():
        t0 = time.perf_counter()
        # The estimator's seed (its Lanczos start vectors): the verdicts and gaps users get,
        # the same from one run to the next (unseeded, blobs N = 20,000 moved by 5%).
        out = certify_kernel_lowrank(op, origin, A, details=True, projections=P,
                                     rng=CERTIFIER_SEED, fit_seconds=grow_with,
                                     budget=CertificateBudget(lowrank_max_rank=max_rank))
        return out, time.perf_counter() - t0

    # Times without tracemalloc (it made the test 2.7-3.5x slower: wine, seeds, vehicle) and,
    # where the fit is short enough to be noise, the medians of `reps` fits and tests,
    # interleaved; the memory from one more test, under tracemalloc.
    (cert, res), cert_s = test()
    fits, tests = [fit_s], [cert_s]
    for _ in range(reps - 1 if fit_s < 2.0 else 0):
        fits.append(fit()[1])
        tests.append(test()[1])
    fit_s, cert_s = float(np.median(fits)), float(np.median(tests))
    tracemalloc.start()
    test()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    f = float(cert.objective)
    comp_gap = (max(0.0, res.compressed.verified_upper_bound - f) / abs(f)
                if res is not None and f else None)
    low_rank = dict(certified=bool(cert.certified), gap=float(
        cert.verified_gap if cert.certified else cert.gap), seconds=cert_s,
        limited_by=_limited_by(cert, cert.gap, comp_gap))
    if DEFAULT_BUDGET.dense_max_samples < len(y) <= DEFAULT_BUDGET.exact_factor_max_rank \
            and not cert.certified and lift_keeps_gap_open(cert, res):
        # What the estimator then does (catdask.certificate.kernel.certify_kernel_axes): the
        # test through the exact factor, kept where it is better; its time is the test's too.
        t0 = time.perf_counter()
        dense = dense_kernel_test(op, classes, origin, A, rng=CERTIFIER_SEED)
        cert_s += time.perf_counter() - t0
        if dense is not None and (dense.certified or dense.gap < cert.gap):
            cert = dense
    gap = cert.verified_gap if cert.certified else cert.gap
    row = dict(case=name, origin=origin, N=len(y), D=X.shape[1], K=K, fit_s=fit_s,
               cert_s=cert_s, ratio=cert_s / fit_s, certified=bool(cert.certified),
               gap=float(gap), rank=res.rank if res else None,
               complement=res.residual if res else None,
               frobenius=bool(res.frobenius) if res else None,
               columns=res.columns if res else None, extra_mib=peak / 2**20,
               objective=float(est.objective_), reason=cert.reason[:300],
               low_rank=low_rank,
               compressed_gap=comp_gap, norm=res.norm if res else None,
               limited_by=_limited_by(cert, gap, comp_gap),
               load_average=os.getloadavg()[0])
    if len(y) <= DEFAULT_BUDGET.exact_factor_max_rank and overhead_reps:
        # What users pay: the estimator's own fit with and without its test, interleaved.
        with_test, without = [], []
        for _ in range(overhead_reps):
            for flag, out in ((False, without), (True, with_test)):
                e = KernelCategorySpace(origin=origin, n_restarts=restarts, random_state=0,
                                        certify=flag, certify_at="fit")
                t0 = time.perf_counter()
                e.fit(X, y)
                out.append(time.perf_counter() - t0)
        row["fit_without_test_s"] = float(np.median(without))
        row["fit_with_test_s"] = float(np.median(with_test))
        row["test_share"] = (row["fit_with_test_s"] - row["fit_without_test_s"]) / row[
            "fit_without_test_s"]
    if len(y) <= DEFAULT_BUDGET.exact_factor_max_rank and dense_baseline:
        t0 = time.perf_counter()
        dense = dense_kernel_test(op, classes, origin, A)
        row["dense_s"] = time.perf_counter() - t0
        row["dense_certified"] = None if dense is None else bool(dense.certified)
        row["dense_gap"] = None if dense is None else float(
            dense.verified_gap if dense.certified else dense.gap)
    return row


def _num(x):
    return "-" if x is None else f"{x:.1e}"


def summary(rows):
    """The issue's goals, measured: certified fraction (verified gap <= 1e-6), the others'
    gaps (goal <= 1e-3), the test's time over the fit's (goal: median <= 10%), its memory."""
    n = len(rows)
    cert = [r for r in rows if r["certified"]]
    rest = [r for r in rows if not r["certified"]]
    bounded = [r for r in rest if r["gap"] <= 1e-3]
    print(f"GOALS: certified {len(cert)} of {n} ({100 * len(cert) / n:.0f}%, goal >= 90%); "
          f"of the other {len(rest)}, {len(bounded)} with a gap <= 1e-3 (goal: all)"
          + (", gaps " + ", ".join(f"{r['case']}/{r['origin']} {r['gap']:.1e}" for r in rest)
             if rest else ""))
    why = {}
    for r in rest:
        why[r["limited_by"]] = why.get(r["limited_by"], 0) + 1
    if rest:
        print(f"GOALS: open gaps limited by {why} ('relaxation': the compressed SDP relaxation's "
              "own gap is at least half of it; the dense test, where run, agrees)")
    ratios = [r["ratio"] for r in rows]
    print(f"GOALS: test / fit time median {np.median(ratios):.2f} (goal <= 0.10), largest "
          f"{max(ratios):.2f}; largest extra memory {max(r['extra_mib'] for r in rows):.0f} MiB "
          f"(goal <= 1024); load average now {os.getloadavg()}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", nargs="*", default=None,
                    help="UCI names, 'blobs', 'highrank' (default: all)")
    ap.add_argument("--no-uci", action="store_true")
    ap.add_argument("--origins", nargs="+", choices=ORIGINS, default=list(ORIGINS))
    ap.add_argument("--restarts", type=int, default=5)
    ap.add_argument("--max-rank", type=int, default=1024)
    ap.add_argument("--overhead-reps", type=int, default=3,
                    help="N <= 1,500: fit the estimator with and without its own test this many "
                         "times each, interleaved (0: skip)")
    ap.add_argument("--dense-max-n", type=int, default=600,
                    help="also run the dense test (the baseline) up to this N")
    ap.add_argument("--reps", type=int, default=3,
                    help="fits under 2 s: time the fit and the test this many times each, "
                         "interleaved (medians)")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    print(f"load average at start {os.getloadavg()}; restarts {args.restarts}; max_rank "
          f"{args.max_rank}", flush=True)
    print(f"{'case':<15} {'origin':<6} {'N':>6} {'D':>4} {'fit s':>8} {'cert s':>8} {'ratio':>6} "
          f"{'cert':>5} {'gap':>8} {'relax':>8} {'limit':>10} {'rank':>5} {'MiB':>6} "
          f"{'load':>5} {'dense s':>8} {'dense':>6} {'dense gap':>9}", flush=True)
    rows = []
    for name, X, y in cases(args):
        for origin in args.origins:
            row = measure(name, X, y, origin, args.restarts, args.max_rank,
                          overhead_reps=args.overhead_reps,
                          dense_baseline=len(y) <= args.dense_max_n, reps=args.reps)
            rows.append(row)
            dense = ("" if "dense_s" not in row else
                     f"{row['dense_s']:8.2f} {str(row['dense_certified']):>6} "
                     f"{row['dense_gap'] if row['dense_gap'] is not None else math.nan:9.1e}")
            if "test_share" in row:
                dense += (f"  estimator: {row['fit_without_test_s']:.2f} s without its test, "
                          f"{row['fit_with_test_s']:.2f} s with (+{100 * row['test_share']:.0f}%)")
            print(f"{name:<15} {origin:<6} {row['N']:>6} {row['D']:>4} {row['fit_s']:8.2f} "
                  f"{row['cert_s']:8.2f} {row['ratio']:6.2f} {str(row['certified']):>5} "
                  f"{row['gap']:8.1e} {_num(row['compressed_gap']):>8} {row['limited_by']:>10} "
                  f"{row['rank']!s:>5} {row['extra_mib']:6.0f} {row['load_average']:5.1f} {dense}",
                  flush=True)
    if rows:
        summary(rows)
        n_cert = sum(r["certified"] for r in rows)
        agree = [r for r in rows if r.get("dense_certified") is not None]
        print(f"certified {n_cert} of {len(rows)}; largest gap "
              f"{max(r['gap'] for r in rows):.1e}; median certificate/fit "
              f"{np.median([r['ratio'] for r in rows]):.2f}; largest extra memory "
              f"{max(r['extra_mib'] for r in rows):.0f} MiB")
        if agree:
            same = sum(r["certified"] == r["dense_certified"] for r in agree)
            ratio = np.median([r["cert_s"] / r["dense_s"] for r in agree])
            print(f"agrees with the dense test on {same} of {len(agree)} cases; median "
                  f"low-rank/dense time {ratio:.2f}")
        shares = [r["test_share"] for r in rows if "test_share" in r]
        if shares:
            print(f"estimator's own test (N <= 1,500): median +{100 * np.median(shares):.0f}% of "
                  f"the fit without it, largest +{100 * max(shares):.0f}%")
    print(f"load average at end {os.getloadavg()}")
    if args.json:  # the shape every benchmark's JSON has (run_all, tests/test_benchmarks.py)
        with open(args.json, "w") as f:
            json.dump({"benchmark": "certificate_scale", "quick": bool(args.quick),
                       "load_average_end": os.getloadavg(), "rows": rows}, f, indent=1,
                      default=str)
    return rows


if __name__ == "__main__":
    main()
