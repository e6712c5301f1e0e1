"""Starting points for the restarts (docs/design.md §3c: "Include the decoupled start")."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import scipy.linalg
from scipy.sparse.linalg import ArpackNoConvergence, LinearOperator, eigsh

from .class_eigen import BLOCK, class_block_top_eigenpairs
from .classes import ClassIndex
from .manifold import polar_factor, random_stiefel
from .protocols import GramOperator

_DENSE_EIG_MAX = 2000
#: Dense matrices up to this order take their top pair from LAPACK (``evx``); larger ones from
#: Lanczos (cheaper than reducing the whole matrix to tridiagonal form).
_DENSE_TOP_MAX = 300
#: Largest class Gram block (bytes) formed densely on the driver for the decoupled kernel start;
#: larger classes use Lanczos on a blocked matvec when the operator has one (Dask backend).
_DENSE_CLASS_GRAM_BYTES = 256 * 2**20
#: Ritz-residual tolerance of the batched decoupled start, by the precision of its products: on
#: float32 tiles the vector is only as good as their rounding, so 1e-8 loses nothing there.
_START_TOL = {"float64": 1e-10, "float32": 1e-8}


def start_labels(init: str, n_restarts: int, *, kernel: bool) -> list[str]:
    """Labels of the ``n_restarts`` starting points for an ``init`` strategy."""
    deterministic: list[str]
    if init == "random":
        deterministic = []
    elif init == "auto":
        deterministic = ["decoupled"] if kernel else ["decoupled", "class-means"]
    else:
        deterministic = [init]
    labels = deterministic[:n_restarts]
    return labels + ["random"] * (n_restarts - len(labels))


def top_eigenvector(M: np.ndarray | None = None, *,
                    matvec: Callable[[np.ndarray], np.ndarray] | None = None,
                    n: int | None = None) -> tuple[float, np.ndarray]:
    """Top eigenpair of a symmetric PSD matrix (dense, or Lanczos on a matvec): LAPACK's
    selected-eigenvalue driver for a small matrix, Lanczos to machine precision above
    ``_DENSE_TOP_MAX`` (falling back to the driver if it does not converge).
    """
    if M is not None and M.shape[0] <= _DENSE_EIG_MAX:
        n = M.shape[0]
        if n > _DENSE_TOP_MAX:
            try:
                return _lanczos_top_pair(LinearOperator((n, n), matvec=M.__matmul__, dtype=float))
            except ArpackNoConvergence:
                pass  # the selected-eigenvalue driver below
        lam, V = scipy.linalg.eigh(M, subset_by_index=[n - 1, n - 1], driver="evx")
        return float(lam[-1]), V[:, -1]
    if matvec is None:
        if M is None:
            raise ValueError("top_eigenvector needs a matrix M or a matvec")
        matvec = M.__matmul__
        n = M.shape[0]
    if n is None:
        raise ValueError("top_eigenvector with a matvec needs its size n")
    op = LinearOperator((n, n), matvec=matvec, dtype=float)
    lam, V = eigsh(op, k=1, which="LA")
    return float(lam[0]), V[:, 0]


def _lanczos_top_pair(op) -> tuple[float, np.ndarray]:
    """Top eigenpair by ARPACK to machine precision, from a fixed start (reproducible)."""
    v0 = np.random.default_rng(0).standard_normal(op.shape[0])
    lam, V = eigsh(op, k=1, which="LA", v0=v0, tol=0, maxiter=50 * op.shape[0])
    return float(lam[0]), V[:, 0]


def _centred_matvec(matvec: Callable[[np.ndarray], np.ndarray]
                    ) -> Callable[[np.ndarray], np.ndarray]:
    """``v -> E M E v`` with ``E = I - 11^T/n`` (the class centring), without forming E M E."""

    def centred(v: np.ndarray) -> np.ndarray:
        v = np.ravel(v)
        u = matvec(v - v.mean())
        return u - u.mean()

    return centred


def linear_starts(labels: list[str], *, class_matrices: np.ndarray | None,
                  class_means: np.ndarray, n_features: int,
                  rng: np.random.Generator) -> np.ndarray:
    """Starting axes W0 of shape (R, D, K) for the linear method, one per label. The decoupled
    start needs the class matrices R_k (skipped when None); ``class_means`` (K, D) are measured
    from x0."""
    K = class_means.shape[0]
    W0 = random_stiefel(len(labels), n_features, K, rng)
    for r, label in enumerate(labels):
        if label == "decoupled" and class_matrices is not None:
            V = np.stack([top_eigenvector(class_matrices[k])[1] for k in range(K)], axis=1)
            W0[r] = polar_factor(V)[0]
        elif label == "class-means":
            W0[r] = polar_factor(class_means.T)[0]
    return W0


def kernel_decoupled_z(operator: GramOperator, classes: ClassIndex, origin: str) -> np.ndarray:
    """Auxiliary variables whose W-step gives the decoupled kernel start."""
    z = np.zeros(classes.n_samples)
    batched = _batched_class_starts(operator, classes, origin)
    for k, a, b in classes.segments():
        n_k = b - a
        if k in batched:
            lam, vec = batched[k]
        elif 8 * n_k * n_k > _DENSE_CLASS_GRAM_BYTES and operator.matvec_without_class_block:
            def matvec(v: np.ndarray, k: int = k) -> np.ndarray:
                return operator.class_matvec(k, v)

            if origin == "class":  # E_k G_kk E_k: the class scatter in feature space
                lam, vec = top_eigenvector(matvec=_centred_matvec(matvec), n=n_k)
            else:
                lam, vec = top_eigenvector(matvec=matvec, n=n_k)
        else:
            Gk = np.asarray(operator.class_gram(k), dtype=float)
            if not Gk.flags.owndata or not Gk.flags.writeable:
                Gk = Gk.copy()  # centred in place below: never touch a stored Gram
            if origin == "class":
                col_means = Gk.mean(axis=0)  # = row means (Gk is symmetric)
                Gk -= col_means
                Gk -= col_means[:, None]
                Gk += col_means.mean()
            lam, vec = top_eigenvector(Gk)
            del Gk
        z[classes.members(k)] = vec / np.sqrt(max(lam, np.finfo(float).tiny))
    return z


def _batched_class_starts(operator: GramOperator, classes: ClassIndex,
                          origin: str) -> dict[int, tuple[float, np.ndarray]]:
    """``{k: (lambda, a)}`` for the classes whose top eigenpair comes from one Lanczos run per
    class in lockstep, all classes per pass (a tiled cluster operator's ``class_block_matmul``):
    classes above the dense limits, which would otherwise cost one round trip per class and
    step. Empty when the operator forms class blocks anyway (numpy), or when its
    ``class_block_matmul`` is not one tile pass (then it is a product per class, no gain)."""
    if not (operator.matvec_without_class_block and operator.uses_tiles):
        return {}
    large = [k for k, a, b in classes.segments()
             if b - a > _DENSE_EIG_MAX or 8 * (b - a) ** 2 > _DENSE_CLASS_GRAM_BYTES]
    if not large:
        return {}

    def matmul(V: np.ndarray) -> np.ndarray:
        v = np.ascontiguousarray(V.T)  # (m, N): one row per vector
        if origin == "class":  # E_k G_kk E_k: the class scatter in feature space
            v = v - classes.expand(classes.mean(v))
        u = operator.class_block_matmul(v.T).T
        if origin == "class":
            u = u - classes.expand(classes.mean(u))
        return u.T

    # n: the large classes need not include the last one, and the products take all N rows.
    # A block of 4 vectors per class where the top gap is small (the class-centred blocks lose
    # the dominant mean direction); one vector for the globally centred blocks, started at
    # their rows' sums g = G 1 from the centring pass, which is close to the top eigenvector.
    row_sums = getattr(operator, "row_sums", None)
    start = None if origin == "class" or row_sums is None else (
        lambda k, idx: np.asarray(row_sums)[idx][:, None])
    pairs = class_block_top_eigenpairs(
        matmul, [classes.members(k) for k in large], n=classes.n_samples,
        block=BLOCK if origin == "class" else 1, start=start,
        tol=_START_TOL.get(getattr(operator, "precision", "float64"), 1e-10))
    return dict(zip(large, pairs))


def kernel_random_z(n_points: int, classes: ClassIndex, origin: str,
                    rng: np.random.Generator) -> np.ndarray:
    """Random auxiliary variables (centred within classes for the class origin)."""
    z = rng.standard_normal((n_points, classes.n_samples))
    if origin == "class":
        z -= classes.expand(classes.mean(z))
    return z
