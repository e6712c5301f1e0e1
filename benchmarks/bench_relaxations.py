"""The lifted (Burer & Park) relaxation against the SDP dual on the linear class-origin cases.

    python benchmarks/bench_relaxations.py [--only wine vehicle segmentation] [--kronecker]
        [--restarts 8] [--time-limit 120] [--json out.json] [--kernel [--budget S]]

For each data set (standardised, class origin; the UCI files of ``benchmarks/certificate_outcomes.py``,
skipped, saying why, when they are not found), ``CategorySpace`` (CQS) is fitted without its
test, and on the best restart's axes it prints: f; the bound of the existing test without the
moment level (``certify_global_optimum(..., full_sdp=True)``: the SDP dual, and the
block-diagonal relaxation solved by Clarabel where it does not certify); the lifted
relaxation's value (SCS's objective) and its bound proved from the dual data
(:func:`benchmarks.lifted.burer_park.lifted_bound`), both as relative gaps to f; its PSD
block, SCS iterations and wall/CPU seconds; the load average. ``--kronecker`` adds the
realignment constraint (a second PSD block of order 2 D K). ``--alm`` also runs the low-rank
augmented Lagrangian of :mod:`benchmarks.lifted.lowrank_alm` (rank 2, warm-started at the
fitted axes) on the same problem and prints its proved gap, iterations and seconds.
``--highd N`` runs instead the 784-pixel image set of ``bench_linear_highd.py`` (N rows, K = 10,
default origin): the existing test and the ALM only (the lift's block, 7,840, is out of SCS's
reach). ``--kernel`` runs instead the seven open kernel fits of ``bench_certificate_scale.py
--quick`` (fitted and tested as it does) and, on the last compressed problem ``(R_S, W_S)`` of
each kernel test, its SDP-dual bound (``full_sdp='auto'``) and the lift, smallest block first
(one BLAS thread); a block over ``--max-block`` or one that cannot finish within ``--budget``
seconds of the start is skipped. ``--kernel --subspace`` prints instead, per r, the charge
that a moment level on r of the m coordinates (a sublevel) pays for the rest (Lemma 3 of
docs/design.md 4b), against the Gram block r needs. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import _common  # noqa: F401  (puts the checkout on sys.path)
from certificate_levels import class_matrices
from certificate_outcomes import cases

from catdask import CategorySpace
from catdask.certificate import certify_global_optimum
from benchmarks.lifted.burer_park import estimated_size, lifted_bound, solve_lifted_dual
from benchmarks.lifted.lowrank_alm import alm_lifted_bound

DEFAULT = ["wine", "vehicle", "segmentation"]


def _timed(fn, *args, **kwargs):
    t, c = time.perf_counter(), time.process_time()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - t, time.process_time() - c


def run_case(name, X, y, args):
    est = CategorySpace(origin="class", n_restarts=args.restarts, random_state=0,
                        certify=False).fit(X, y)
    R = class_matrices(X, y, est.classes_, "class")
    W = est.components_.T
    f = 0.5 * float(sum(W[:, k] @ R[k] @ W[:, k] for k in range(R.shape[0])))
    cert, sdp_wall, sdp_cpu = _timed(certify_global_optimum, R, W, full_sdp=True)
    row = dict(dataset=name, D=R.shape[1], K=R.shape[0], f=f,
               sdp_bound=float(cert.upper_bound), sdp_gap=(cert.upper_bound - f) / f,
               sdp_certified=bool(cert.certified), sdp_wall=sdp_wall, sdp_cpu=sdp_cpu,
               load_before=os.getloadavg()[0])
    block, unknowns, _ = estimated_size(R.shape[1], R.shape[0], args.kronecker)
    dual, wall, cpu = _timed(solve_lifted_dual, R, kronecker=args.kronecker,
                             time_limit=args.time_limit)
    proved, proof_wall, _ = _timed(lifted_bound, R, dual.Lam, dual.Z, dual.Xi)
    row.update(block=block, unknowns=unknowns, status=dual.status, iterations=dual.iterations,
               lift_value=0.5 * dual.value, lift_value_gap=(0.5 * dual.value - f) / f,
               lift_bound=proved.upper_bound, lift_gap=(proved.upper_bound - f) / f,
               residual_charge=proved.residual_charge, lift_wall=wall, lift_cpu=cpu,
               proof_wall=proof_wall, load_after=os.getloadavg()[0])
    if args.alm:
        alm, alm_wall, alm_cpu = _timed(alm_lifted_bound, R, W, rank=2)
        row.update(alm_gap=(alm.bound.upper_bound - f) / f, alm_wall=alm_wall, alm_cpu=alm_cpu,
                   alm_outer=alm.outer_iterations, alm_inner=alm.inner_iterations,
                   alm_infeasibility=alm.infeasibility)
    return row


def run_highd(n_samples, seconds):
    """The existing test and the ALM on the 784-pixel set (``bench_linear_highd.py``)."""
    from bench_linear_highd import digits784

    X, y = digits784(n_samples)
    X = (X - X.mean(axis=0)) / X.std(axis=0)
    est = CategorySpace(n_restarts=1, random_state=0, certify=False).fit(X, y)
    R = class_matrices(X, y, est.classes_, est.origin)
    W = est.components_.T
    f = 0.5 * float(sum(W[:, k] @ R[k] @ W[:, k] for k in range(R.shape[0])))
    cert, wall, cpu = _timed(certify_global_optimum, R, W)
    print(f"784-pixel set, N = {n_samples}, origin {est.origin}: f = {f:.6g}; existing test: "
          f"gap {(cert.upper_bound - f) / f:.2e} ({cert.bound_method}), {wall:.1f} s wall, "
          f"{cpu:.1f} s cpu", flush=True)
    alm, wall, cpu = _timed(alm_lifted_bound, R, W, rank=2, max_seconds=seconds)
    print(f"  ALM: proved gap {(alm.bound.upper_bound - f) / f:.2e}, primal "
          f"{(alm.primal_value - f) / f:.2e}, residual {alm.infeasibility:.1e}, "
          f"{alm.outer_iterations} outer / {alm.inner_iterations} L-BFGS iterations, "
          f"{wall:.1f} s wall, {cpu:.1f} s cpu; load {os.getloadavg()[0]:.1f}", flush=True)


KERNEL_OPEN = [("wine", "class"), ("vehicle", "class"), ("segmentation", "class"),
               ("satellite", "class"), ("blobs-3000", "global"), ("blobs-3000", "class"),
               ("highrank-1500", "global")]  # docs/design.md 4c, "Why the open gaps stay open"


def run_kernel(args):
    """The SDP dual and the lift on the last compressed problem of each open kernel fit's test."""
    from types import SimpleNamespace
    from unittest import mock

    import numpy as np
    import bench_certificate_scale as scale
    import catdask.certificate.kernel_lowrank as kl
    from catdask import KernelCategorySpace

    start, problems = time.perf_counter(), []
    for name, X, y in scale.cases(SimpleNamespace(no_uci=False, quick=True, only=[
            "wine", "vehicle", "segmentation", "satellite", "blobs", "highrank"])):
        for origin in [o for n, o in KERNEL_OPEN if n == name]:
            Xs, ys = scale.sorted_by_class(X, y)
            (est, fit_s, _) = _timed(KernelCategorySpace(origin=origin, n_restarts=5,
                                                         random_state=0, certify=False).fit, Xs, ys)
            base = scale.NumpyGramOperator(Xs, scale.ClassIndex(ys, int(ys.max()) + 1),
                                           est.kernel_, max_gram_bytes=0)
            op = scale.CentredGramOperator(base) if origin == "global" else base
            seen, real = {}, kl.certify_global_optimum
            with mock.patch.object(kl, "certify_global_optimum",
                                   lambda R, W, **kw: seen.update(R=R, W=W) or real(R, W, **kw)):
                cert = scale.certify_kernel_lowrank(
                    op, origin, est.dual_coef_, projections=est.transform(Xs).T,
                    rng=scale.CERTIFIER_SEED, fit_seconds=fit_s if len(ys) > 1500 else None,
                    budget=scale.CertificateBudget(lowrank_max_rank=1024))
            R, W = np.array(seen["R"]), np.array(seen["W"])
            print(f"{name}/{origin}: N {len(ys)}, fit {fit_s:.1f} s, kernel test gap "
                  f"{cert.gap:.1e} (certified {cert.certified}); last compressed problem K = "
                  f"{R.shape[0]}, m = {R.shape[1]}", flush=True)
            problems.append((f"{name}/{origin}", R, W))
    if args.subspace:
        return [subspace_charges(label, R, W) for label, R, W in problems]
    print(f"{'fit':<20} {'K':>2} {'m':>5} {'f_S':>12} {'sdp gap':>9} {'lift val':>9} "
          f"{'lift gap':>9} {'block':>5} {'iters':>6} {'wall s':>7} {'cpu s':>7} {'load':>5}",
          flush=True)
    rows = []
    for label, R, W in sorted(problems, key=lambda p: p[1].shape[0] * p[1].shape[1]):
        K, m, _ = R.shape
        f = 0.5 * float(sum(W[:, k] @ R[k] @ W[:, k] for k in range(K)))
        # the test's own bound (full_sdp='auto': Clarabel's full SDP at m = 131 took 23 GB, OOM)
        cert, sdp_wall, _ = _timed(certify_global_optimum, R, W)
        row = dict(fit=label, K=K, m=m, f=f, block=m * K, sdp_gap=(cert.upper_bound - f) / f,
                   sdp_certified=bool(cert.certified), sdp_wall=sdp_wall)
        rows.append(row)
        left = args.budget - (time.perf_counter() - start)
        # setup (cvxpy + SCS): about 5 s at block 1,000 here (2 cores), ~ block^2; twice that kept
        if m * K > args.max_block or left < args.time_limit + 10.0 * (m * K / 1000) ** 2:
            print(f"{label:<20} {K:>2} {m:>5} {f:12.6g} {row['sdp_gap']:9.2e} skipped: block "
                  f"{m * K} (max {args.max_block}; {left:.0f} s left)", flush=True)
            continue
        dual, wall, cpu = _timed(solve_lifted_dual, R, time_limit=args.time_limit)
        proved = lifted_bound(R, dual.Lam, dual.Z, dual.Xi)
        row.update(status=dual.status, iterations=dual.iterations, lift_wall=wall, lift_cpu=cpu,
                   lift_value_gap=(0.5 * dual.value - f) / f,
                   lift_gap=(proved.upper_bound - f) / f, load=os.getloadavg()[0])
        print(f"{label:<20} {K:>2} {m:>5} {f:12.6g} {row['sdp_gap']:9.2e} "
              f"{row['lift_value_gap']:9.2e} {row['lift_gap']:9.2e} {m * K:>5} "
              f"{dual.iterations!s:>6} {wall:7.1f} {cpu:7.1f} {row['load']:5.1f}  "
              f"({dual.status}; SDP-dual test {sdp_wall:.2f} s)", flush=True)
    return rows


def subspace_charges(label, R, W, targets=(1e-2, 1e-3)):
    """The moment level on an r-dimensional subspace of a compressed kernel problem (a sublevel
    of the level-2 relaxation: degree-4 moments in r coordinates only) pays Lemma 3's charge
    for the rest (docs/design.md 4b): even if it proved the reduced problem exactly (U = f),
    its gap is at least ``(sqrt(f) + sqrt(e_r / 2))^2 / f - 1``, ``e_r`` the sum of the K
    largest eigenvalues of ``E T E``, ``T = sum_k R_k``, ``E`` the projector off the subspace.
    Printed per r for two subspaces, span(W) plus the top eigenvectors of ``T`` off it, and the
    top r eigenvectors of ``T``, with the anchored Gram block that r needs (block_sizes)."""
    import numpy as np

    from catdask.certificate.moment_sos import block_sizes

    K, m, _ = R.shape
    f = 0.5 * float(sum(W[:, k] @ R[k] @ W[:, k] for k in range(K)))
    T = R.sum(axis=0)
    T = (T + T.T) / 2
    Q = np.linalg.qr(W)[0]
    P = np.eye(m) - Q @ Q.T
    off = np.linalg.eigh(P @ T @ P)[1][:, ::-1]
    top = np.linalg.eigh(T)[1][:, ::-1]

    def charge(B):
        E = np.eye(m) - B @ B.T
        e = float(np.sort(np.linalg.eigvalsh(E @ T @ E))[-K:].sum())
        return (np.sqrt(f) + np.sqrt(max(e, 0.0) / 2)) ** 2 / f - 1

    rows, first = [], {}
    for r in sorted({*range(K, min(m, 12 * K) + 1, K), m}):
        with_w = charge(np.linalg.qr(np.column_stack([Q, off[:, :r - K]]))[0])
        by_t = charge(top[:, :r])
        best = min(with_w, by_t)
        rows.append({"r": r, "charge_with_W": with_w, "charge_top_T": by_t,
                     "anchored_block": block_sizes(K, r, K)[0], "full_block": block_sizes(K, r)[0]})
        for t in targets:
            first.setdefault(t, None if best > t else r)
    print(f"{label}: K = {K}, m = {m}, f_S = {f:.6g}", flush=True)
    for row in rows:
        print(f"  r = {row['r']:>4}: charge >= {min(row['charge_with_W'], row['charge_top_T']):.2e}"
              f" (span W + T: {row['charge_with_W']:.2e}, top of T: {row['charge_top_T']:.2e}); "
              f"anchored block {row['anchored_block']:,}, full {row['full_block']:,}",
              flush=True)
    return {"fit": label, "K": K, "m": m, "f": f, "rows": rows,
            "smallest_r_for": {str(t): r for t, r in first.items()}}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", nargs="*", default=DEFAULT)
    ap.add_argument("--restarts", type=int, default=8)
    ap.add_argument("--kronecker", action="store_true")
    ap.add_argument("--alm", action="store_true")
    ap.add_argument("--highd", type=int, default=None, metavar="N")
    ap.add_argument("--time-limit", type=float, default=120.0)
    ap.add_argument("--kernel", action="store_true")
    ap.add_argument("--subspace", action="store_true",
                    help="with --kernel: Lemma 3's charge of a moment level on r of the m "
                         "coordinates, per r, instead of the lift")
    ap.add_argument("--max-block", type=int, default=4000)
    ap.add_argument("--budget", type=float, default=float("inf"))
    ap.add_argument("--json", default=None)
    ap.add_argument("--quick", action="store_true", help="wine only (run_all.py --quick)")
    args = ap.parse_args(argv)
    args.no_kernel = True
    if args.quick:
        args.only = ["wine"]
    print(f"load average at start {os.getloadavg()}; gaps are (bound - f) / f", flush=True)
    if args.highd:
        return run_highd(args.highd, args.time_limit)
    if args.kernel:
        from threadpoolctl import threadpool_limits

        with threadpool_limits(1):  # one BLAS thread, as the certificate runs
            rows = run_kernel(args)
        print(f"load average at end {os.getloadavg()}")
        if args.json:
            with open(args.json, "w") as fh:
                json.dump({"benchmark": "bench_relaxations", "kernel": True, "rows": rows}, fh,
                          indent=1)
        return rows
    print(f"{'data':<13} {'D':>3} {'K':>2} {'f':>12} {'sdp gap':>9} {'lift val':>9} "
          f"{'lift gap':>9} {'block':>5} {'iters':>6} {'wall s':>7} {'cpu s':>7} {'load':>5}",
          flush=True)
    rows = []
    for name, _, X, y in cases(args):
        r = run_case(name, X, y, args)
        rows.append(r)
        print(f"{name:<13} {r['D']:>3} {r['K']:>2} {r['f']:12.6g} {r['sdp_gap']:9.2e} "
              f"{r['lift_value_gap']:9.2e} {r['lift_gap']:9.2e} {r['block']:>5} "
              f"{r['iterations'] if r['iterations'] is not None else '-':>6} "
              f"{r['lift_wall']:7.2f} {r['lift_cpu']:7.2f} {r['load_after']:5.1f}  "
              f"({r['status']}; SDP-dual test {r['sdp_wall']:.2f} s)", flush=True)
        if args.alm:
            print(f"{'  ALM':<13} proved gap {r['alm_gap']:.2e}, {r['alm_outer']} outer / "
                  f"{r['alm_inner']} L-BFGS iterations, residual {r['alm_infeasibility']:.1e}, "
                  f"{r['alm_wall']:.2f} s wall, {r['alm_cpu']:.2f} s cpu", flush=True)
    print(f"load average at end {os.getloadavg()}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"benchmark": "bench_relaxations", "quick": args.quick,
                       "kronecker": args.kronecker,
                       "rows": rows}, fh, indent=1)


if __name__ == "__main__":
    main()
