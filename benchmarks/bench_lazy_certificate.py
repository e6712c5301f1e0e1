"""Benchmark: the certificate on first access (``certify_at="access"``, issue 26) against the
test in every fit (``certify_at="fit"``, the baseline), in a grid search.

Goal: "the test is not paid for in fits whose certificate nobody reads". A 3-fold x 3-gamma
``GridSearchCV`` of ``StandardScaler + KernelCategorySpace`` (K-CQS, global origin) on wine,
read through the data-set catalog, then the refitted model's certificate is read (the one fit
whose certificate someone reads). A third setting, ``certify=False`` (no test anywhere, its
certificate "not requested"), is the floor. Each round runs the three settings, interleaved
(the order rotates), and reports:

- the grid search's wall time, certificate read included, the ratio baseline / candidate,
  and what each pays above the floor (the tests' cost);
- the tests run (counted at the certifier): 10 with the test in every fit (9 folds and the
  refit), 1 on first access;
- for the fit whose certificate is read (the refit): the test's seconds over the fit's own
  seconds (``fit_seconds_``), measured when it ran, in the fit or on access;
- that both settings give the same certificate (seconds aside).

Medians over the rounds; the load average is printed before and after.

    python benchmarks/bench_lazy_certificate.py [--quick] [--rounds 5] [--json out.json]
"""

from __future__ import annotations

import dataclasses
import re
import statistics
import time

from _common import load_average, parse_args, quiet_warnings, report

SETTINGS = ("fit", "access", "none")  # baseline, candidate, floor (certify=False)
GAMMAS = (0.002, 0.004, 0.008)  # around the default 0.05 / n_features = 0.0038 on wine


def _timeless(cert):
    return dataclasses.replace(cert, seconds=0.0,
                               reason=re.sub(r"\d+(\.\d+)? s\b", "# s", cert.reason))


def _count_tests():
    """Wrap the kernel certifier's test: returns the list each call appends to."""
    from catdask.certificate import certifiers

    calls = []
    real = certifiers.certify_kernel_axes

    def counting(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    certifiers.certify_kernel_axes = counting
    return calls


def _search(X, y, certify_at, n_restarts, calls):
    from sklearn.model_selection import GridSearchCV, StratifiedKFold
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    from catdask import KernelCategorySpace

    none = certify_at == "none"
    model = make_pipeline(StandardScaler(), KernelCategorySpace(
        n_restarts=n_restarts, random_state=0, certify=not none,
        certify_at="access" if none else certify_at))
    search = GridSearchCV(model, {"kernelcategoryspace__gamma": list(GAMMAS)},
                          cv=StratifiedKFold(3, shuffle=True, random_state=0))
    before = len(calls)
    t0 = time.perf_counter()
    search.fit(X, y)
    best = search.best_estimator_[-1]
    cert = best.certificate_  # the certificate someone reads
    wall = time.perf_counter() - t0
    seconds = best.fit_seconds_
    test = seconds.get("certificate", 0.0)  # none: no test
    own = seconds["total"] - (test if certify_at == "fit" else 0.0)
    return {
        "certify_at": certify_at,
        "wall_s": wall,
        "tests_run": len(calls) - before,
        "refit_certificate_s": test,
        "refit_fit_s_without_test": own,
        "refit_certificate_over_fit": test / own,
        "best_gamma": search.best_params_["kernelcategoryspace__gamma"],
        "certified": bool(cert.certified),
    }, cert


def main():
    args = parse_args(__doc__, lambda ap: ap.add_argument(
        "--rounds", type=int, default=None, help="interleaved rounds (default 5, quick 1)"))
    quiet_warnings()
    from catdask.evaluation.data import load_xy

    rounds = args.rounds or (1 if args.quick else 5)
    n_restarts = 2 if args.quick else 5
    X, y = load_xy("wine")
    calls = _count_tests()
    load_start = load_average()
    print(f"load average at start: {load_start}", flush=True)
    rows, certs = [], {}
    for r in range(rounds):
        order = SETTINGS[r % 3:] + SETTINGS[:r % 3]
        for certify_at in order:
            row, cert = _search(X, y, certify_at, n_restarts, calls)
            rows.append({"round": r, **row})
            certs.setdefault(certify_at, []).append(_timeless(cert))
            print(f"   round {r} certify_at={certify_at}: {row['wall_s']:.2f} s, "
                  f"{row['tests_run']} tests, refit test/fit "
                  f"{row['refit_certificate_over_fit']:.2f}", flush=True)
    same = all(a == b for a, b in zip(certs["fit"], certs["access"]))
    if not same:
        raise SystemExit("the certificate on first access differs from the one in the fit")

    def median(setting, key):
        return statistics.median(row[key] for row in rows if row["certify_at"] == setting)

    wall = {s: median(s, "wall_s") for s in SETTINGS}
    tested = SETTINGS[:2]
    report("bench_lazy_certificate", {
        "data": f"wine {X.shape}, StandardScaler + KernelCategorySpace(global origin, "
                f"n_restarts={n_restarts}), GridSearchCV 3 folds x gamma {list(GAMMAS)}, "
                "then best_estimator_.certificate_ read",
        "rounds": rounds,
        "load_average_start": load_start,
        "median_wall_s": {s: round(v, 3) for s, v in wall.items()},
        "speedup_access_vs_fit": round(wall["fit"] / wall["access"], 2),
        "wall_above_no_test_s": {s: round(wall[s] - wall["none"], 3) for s in tested},
        "tests_run": {s: median(s, "tests_run") for s in SETTINGS},
        "refit_certificate_over_fit": {
            s: round(median(s, "refit_certificate_over_fit"), 3) for s in tested},
        "refit_certificate_s": {s: round(median(s, "refit_certificate_s"), 3) for s in tested},
        "same_certificate": same,
        "rows": rows,
    }, args)


if __name__ == "__main__":
    main()
