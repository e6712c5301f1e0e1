"""What the solver side asks of the data: the two operator interfaces, spelled out."""

from __future__ import annotations

from abc import abstractmethod
from typing import Protocol, runtime_checkable

import numpy as np

from .classes import ClassIndex


class _SampleOperator(Protocol):
    """What both operators have: ``classes`` (the N samples' :class:`ClassIndex`, in the operator's
    sample order), ``n_samples``, the moments, and ``close``.
    """

    classes: ClassIndex
    n_samples: int

    @abstractmethod
    def covariance_moments(self) -> tuple[float, float]:
        """``(tr C, tr C^2)`` of the total covariance C about the origin (sets the CAS scale);
        for G: ``(tr G / N, ||G||_F^2 / N^2)``, the same quantities in feature space."""

    @abstractmethod
    def close(self) -> None:
        """Release whatever the operator holds (cluster data, temporary Gram caches); a no-op
        in memory."""


@runtime_checkable
class DataOperator(_SampleOperator, Protocol):
    """The linear method's data ``X`` (N, D) with ``n_features``, measured from the origin
    ``center`` (x0, the training centroid unless given).
    """

    n_features: int

    @property
    def center(self) -> np.ndarray:
        """The origin x0, shape (D,)."""
        raise NotImplementedError

    @abstractmethod
    def own_projections(self, W: np.ndarray) -> np.ndarray:
        """``u[r, i] = w_{y_i}^T (x_i - x0)`` for W (R, D, K); returns (R, N). One data pass."""

    @abstractmethod
    def class_weighted_sums(self, z: np.ndarray) -> np.ndarray:
        """``Y = X^T Z``: ``Y[r, :, k] = sum_{i in C_k} z[r, i] (x_i - x0)``; (R, N) -> (R, D, K)."""

    @abstractmethod
    def class_second_moments(self, origin: str) -> np.ndarray:
        """The class matrices R_k (K, D, D): scatter about the class mean (``"class"``, paper
        eq. (43)) or second moment about x0 (``"global"``, docs/design.md §3b)."""

    @abstractmethod
    def class_means(self) -> np.ndarray:
        """Class means measured from x0, shape (K, D)."""


@runtime_checkable
class GramOperator(_SampleOperator, Protocol):
    """The kernel method's Gram matrix ``G`` (N, N), never required to exist in memory."""

    #: True when :meth:`class_matvec` never forms the dense class block, so the decoupled start
    #: may use Lanczos on it for classes too large to hold ``G[C_k, C_k]``.
    matvec_without_class_block: bool

    @property
    def gram_passes(self) -> int:
        """Number of full passes over G so far (for benchmarks and tests)."""
        raise NotImplementedError

    @property
    def uses_tiles(self) -> bool:
        """True when :meth:`class_matmul` recomputes G by symmetric tiles (built-in kernel, G not
        stored): then it can run in float32 (``set_precision``), and :meth:`class_block_matmul`
        is one pass over the class blocks' tiles; every other product stays float64."""
        raise NotImplementedError

    @property
    def precision(self) -> str:
        """``"float32"`` or ``"float64"``: what :meth:`class_matmul` evaluates tiles in now."""
        raise NotImplementedError

    @abstractmethod
    def set_precision(self, precision: str) -> None:
        """Evaluate the tiles of :meth:`class_matmul` in ``"float32"`` or ``"float64"``."""

    @abstractmethod
    def class_matmul(self, z: np.ndarray) -> np.ndarray:
        """``B[r] = G Z_r`` with ``Z_r[i, y_i] = z[r, i]``: (R, N) -> (R, N, K)."""

    @abstractmethod
    def matmul(self, V: np.ndarray) -> np.ndarray:
        """``G V`` for a dense (N, m) V."""

    @abstractmethod
    def class_gram(self, k: int) -> np.ndarray:
        """The dense class block ``G[C_k, C_k]`` (n_k, n_k), rows in ``classes.members(k)``
        order."""

    def solver_history(self, capacity: int):
        """Where the solver keeps its N-sized history (Anderson's ``capacity`` entries a
        restart, :mod:`catdask.core.acceleration`): None, in the driver's memory, here; an
        operator on a cluster returns a :class:`~catdask.core.acceleration.HeldHistory` that
        keeps it on the workers, so that the driver's memory does not grow with it."""
        return None

    @property
    def makes_class_gram_rows(self) -> bool:
        """An optional capability (False here): True when :meth:`class_gram_rows` makes a class
        block's rows in slabs (the certificate's class-block pass then reads ``n_k^2`` kernel
        entries instead of ``N n_k`` through :meth:`columns`)."""
        return False

    def class_gram_rows(self, k: int, start: int, stop: int) -> np.ndarray:
        """Rows ``start:stop`` of :meth:`class_gram`, a fresh array. Here through the whole
        block; operators that make them without it say so (:attr:`makes_class_gram_rows`)."""
        return np.array(self.class_gram(k)[start:stop])

    @abstractmethod
    def class_matvec(self, k: int, V: np.ndarray) -> np.ndarray:
        """``G[C_k, C_k] @ V`` for V of shape (n_k,) or (n_k, m)."""

    @abstractmethod
    def class_block_matmul(self, V: np.ndarray) -> np.ndarray:
        """``diag(G_11, ..., G_KK) V`` for V (N, m): every class block times its rows of V."""

    @abstractmethod
    def diagonal(self) -> np.ndarray:
        """The diagonal of G, shape (N,)."""

    @abstractmethod
    def columns(self, idx: np.ndarray) -> np.ndarray:
        """``G[:, idx]`` as a dense (N, len(idx)) array (for the pivoted-Cholesky factor)."""
