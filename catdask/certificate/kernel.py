"""The kernel certificate: K-CQS certified as the linear problem on a Gram factor's rows.

With ``G = L L^T`` (pivoted Cholesky, :mod:`catdask.kernels.gram_factor`) the kernel problem is
exactly the linear one on the rows of L, features in an r-dimensional isometric copy of the data
span (docs/design.md §4, "Kernel version"), so :func:`certify_global_optimum` applies to the
class matrices of L's rows and the point ``W = L^T A^T``. That needs L to round-off; above
:data:`CERTIFICATE_DENSE_MAX_SAMPLES` samples the low-rank test of docs/design.md §4c
(:mod:`.kernel_lowrank`) runs instead: ``O(N r)`` memory whatever G's rank, a certificate where
the compressed relaxation is tight and a rigorous gap elsewhere.
"""

from __future__ import annotations

import dataclasses
import time

import numpy as np

from ..kernels.gram_factor import pivoted_cholesky
from ..operators import blocks
from .certify import certify_global_optimum
from . import kernel_lowrank
from .kernel_lowrank import certify_kernel_lowrank
from .record import not_applicable

__all__ = ["certify_kernel_axes", "dense_kernel_test", "lift_keeps_gap_open",
           "equivalent_class_matrices", "CERTIFICATE_MAX_RANK", "CERTIFICATE_DENSE_MAX_SAMPLES"]

#: Fits of more samples go to the low-rank test (docs/design.md §4c): it reached the dense
#: test's verdicts at a fraction of its cost (vehicle, N = 846, global origin: certified in
#: 3.3 s where the dense test made the fit 25x slower; benchmarks/bench_certificate_scale.py),
#: and searching for an exact factor of a high-rank G cost 45% of a fit only to give up.
CERTIFICATE_DENSE_MAX_SAMPLES = 300

# Certify kernel fits through a pivoted-Cholesky factor G = L L^T of at most this rank
# (docs/design.md §4, "Kernel version"); beyond it the certificate is not attempted.
CERTIFICATE_MAX_RANK = 1500


def certify_kernel_axes(operator, classes, origin, A, *, full_sdp="auto", moment=False,
                        rng=None, projections=None):
    """Certificate of kernel axes ``A`` (K, N) on a Gram operator of class-sorted samples.

    Parameters
    ----------
    operator : GramOperator
        ``G`` for ``origin="class"``, the centred ``H G H`` for ``origin="global"``: the one
        the problem was solved on (its ``diagonal`` and ``columns`` feed the factor).
    classes : ClassIndex
        The classes of the operator's (sorted) samples.
    origin : {"class", "global"}
    A : ndarray of shape (K, N)
        The coefficients, ``w_k = sum_j A[k, j] phi(x_j)``.
    full_sdp, moment, rng
        As in :func:`certify_global_optimum`.
    projections : ndarray of shape (K, N), optional
        The fit's ``A G`` in float64 (the low-rank test then makes no product with G).

    Returns
    -------
    Certificate
        Up to :data:`CERTIFICATE_DENSE_MAX_SAMPLES` samples the low-rank test's probe when it
        certifies, else the test through the exact factor (not attempted when G's numerical
        rank exceeds :data:`CERTIFICATE_MAX_RANK`); above, the low-rank test's certificate or
        rigorous gap, except that up to :data:`CERTIFICATE_MAX_RANK` samples, where that gap
        is the lift's rather than the relaxation's, the test through the exact factor runs
        too and the better outcome is returned (certified, else the smaller gap).
    """
    if operator.n_samples > CERTIFICATE_DENSE_MAX_SAMPLES:
        cert, result = certify_kernel_lowrank(operator, origin, A, full_sdp=full_sdp,
                                              moment=moment, rng=rng, projections=projections,
                                              details=True)
        if cert.certified or operator.n_samples > CERTIFICATE_MAX_RANK \
                or not lift_keeps_gap_open(cert, result):
            return cert
        # Up to CERTIFICATE_MAX_RANK samples an exact factor always exists (rank <= N), and
        # where the lift, not the relaxation, keeps the gap open the dense test can close it
        # (high-rank blobs, D = 200, N = 1,500, class origin: gap 1.9e-2 -> certified in 2.6 s;
        # N = 800: 2.2e-2 -> 1.9e-3; docs/design.md §4c).
        dense = dense_kernel_test(operator, classes, origin, A, full_sdp, moment, rng)
        if dense is None or not (dense.certified or dense.gap < cert.gap):
            return cert
        return dataclasses.replace(dense, reason=(
            f"{dense.reason}; the exact Gram factor decided: the low-rank test's lift left a "
            f"gap of {cert.gap:.1e}"), seconds=cert.seconds + dense.seconds)
    # The low-rank test's probe first (docs/design.md §4c, "Cost"): a certificate at 48
    # landmarks ends the test (wine, global origin: 0.015 s against the dense test's 0.053 s);
    # otherwise the dense test decides, with its gap.
    probe = certify_kernel_lowrank(operator, origin, A, full_sdp=full_sdp, rng=rng,
                                   probe_rank=kernel_lowrank.PROBE_RANK, probe_only=True,
                                   projections=projections)
    if probe is not None:
        return probe
    dense = dense_kernel_test(operator, classes, origin, A, full_sdp, moment, rng)
    if dense is None:
        return not_applicable(
            "not attempted: the Gram matrix's numerical rank exceeds "
            f"{CERTIFICATE_MAX_RANK} (pivoted Cholesky did not converge)"
        )
    return dense


def dense_kernel_test(operator, classes, origin, A, full_sdp="auto", moment=False, rng=None):
    """The test through an exact factor ``G = L L^T`` (docs/design.md §4, "Kernel version"),
    or None when G's numerical rank exceeds :data:`CERTIFICATE_MAX_RANK`."""
    t0 = time.perf_counter()
    L, _, ok = pivoted_cholesky(operator.diagonal(), operator.columns, rtol=1e-12,
                                max_rank=CERTIFICATE_MAX_RANK)
    if not ok:
        return None
    cert = certify_global_optimum(equivalent_class_matrices(L, classes, origin), L.T @ A.T,
                                  full_sdp=full_sdp, moment=moment, rng=rng)
    return dataclasses.replace(cert, seconds=time.perf_counter() - t0)


def lift_keeps_gap_open(cert, result):
    """Whether the lift to the full problem, not the compressed SDP relaxation, is what keeps
    the low-rank test's gap open: the compressed problem's own gap is under half the lifted
    one (0 where the compressed test certified)."""
    if result is None or not cert.applicable:
        return False
    compressed = result.compressed
    own = 0.0 if compressed.certified else compressed.gap
    return own < 0.5 * cert.gap


def equivalent_class_matrices(L, classes, origin):
    """Class matrices of the linear problem on the rows of the Gram factor L (sorted rows)."""
    stats = blocks.block_class_stats(L, classes.codes, classes.n_classes)
    return blocks.class_second_moments(stats, np.zeros(L.shape[1]), origin)
