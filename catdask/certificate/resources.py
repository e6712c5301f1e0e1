"""What the test may spend: BLAS threads, the failures it absorbs, the size guard at large D."""

from __future__ import annotations

import logging
import sys
import time

import numpy as np
from scipy.sparse.linalg import ArpackError

from .eigen import NumericalFailure
from .record import not_certified

logger = logging.getLogger("catdask.certificate")

#: Dense D x D factorisations of the whole test, per class (the scale, the verifications, the
#: search's Lanczos runs in Cholesky units), rounded up.
_FACTORISATIONS_PER_CLASS = 10
#: Slowest factorisation speed assumed (flop/s): one core of a small machine, with overheads.
_NOMINAL_FLOPS = 1e9


def one_blas_thread():
    """Limit BLAS to one thread until the returned limiter's ``restore_original_limits()`` (or the
    end of its ``with`` block): the test is many small products and factorisations, where a second
    BLAS thread beside other busy processes loses far more than it gains (docs/benchmarks.md).
    """
    global _BLAS_CONTROLLER
    if _BLAS_CONTROLLER is None:
        from threadpoolctl import ThreadpoolController

        _BLAS_CONTROLLER = ThreadpoolController()
    return _BLAS_CONTROLLER.limit(limits=1, user_api="blas")


_BLAS_CONTROLLER = None


def numerical_failures():
    """The exceptions a test can meet on well-formed input, which become "not certified"."""
    failures: tuple[type[BaseException], ...] = (
        np.linalg.LinAlgError, ArpackError, NumericalFailure, FloatingPointError, OverflowError,
        MemoryError)
    cvxpy_error = sys.modules.get("cvxpy.error")  # only a loaded cvxpy can have raised one
    if cvxpy_error is not None:
        failures += (cvxpy_error.SolverError,)
    return failures



def estimated_seconds(n_features, n_classes, *, probe=384):
    """Rough time of the test on dense (K, D, D) class matrices, in seconds on this machine:
    ``_FACTORISATIONS_PER_CLASS * K`` Cholesky factorisations of order D, extrapolated as D^3 from
    the fastest of five timed ones of order ``min(D, probe)``, and never below ``_NOMINAL_FLOPS``.
    """
    d0 = int(min(n_features, probe))
    A = np.random.default_rng(0).standard_normal((d0, d0 + 8))
    A = A @ A.T
    np.linalg.cholesky(A)  # warm-up (first LAPACK call, thread start)
    times = []
    for _ in range(5):
        t = time.perf_counter()
        np.linalg.cholesky(A)
        times.append(time.perf_counter() - t)
    measured = min(times) * (n_features / d0) ** 3
    # A load spike while probing must not refuse a feasible test: never estimate a
    # factorisation slower than _NOMINAL_FLOPS (n^3 / 3 flops).
    nominal = n_features**3 / 3.0 / _NOMINAL_FLOPS
    return _FACTORISATIONS_PER_CLASS * n_classes * min(measured, nominal)


def size_guard(inputs, dense_max_dim, max_seconds, tol, t0):
    """A "not attempted" certificate when the estimated time exceeds ``max_seconds``."""
    R, _, W = inputs
    D, K = W.shape
    if R is None or D <= dense_max_dim:
        return None
    ceiling = _FACTORISATIONS_PER_CLASS * K * D**3 / 3.0 / _NOMINAL_FLOPS
    if ceiling <= max_seconds:
        # estimated_seconds never exceeds this: no probe needed (under load the probe's
        # factorisations took 0.2-2.8 s at D = 784, K = 10, of a test of 3-9 s).
        logger.info("certificate at D = %d, K = %d: at most %.1f s estimated", D, K, ceiling)
        return None
    estimate = estimated_seconds(D, K)
    logger.info("certificate at D = %d, K = %d: estimated %.1f s", D, K, estimate)
    if estimate <= max_seconds:
        return None
    reason = (f"not attempted: D too large (estimated {estimate:.0f} s for D = {D}, K = {K} > "
              f"max_seconds = {max_seconds:g})")
    logger.warning("global-optimality certificate %s", reason)
    objective = 0.5 * float(sum(W[:, k] @ R[k] @ W[:, k] for k in range(K)))
    return not_certified(reason, objective=objective, tol=tol,
                         seconds=time.perf_counter() - t0, status="not_attempted")
