"""The category-space problems: one alternating iteration (Z-step, then W-step) each."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import TypeVar

import numpy as np

from .classes import ClassIndex
from .manifold import inv_sqrt_spd, polar_factor
from .protocols import DataOperator, GramOperator
from .zstep import ZStep, absolute_zstep, quadratic_zstep


@dataclass(frozen=True)
class CategoryObjective:
    """The objective: ``"quadratic"`` (CQS) or ``"absolute"`` (CAS), and the origin."""

    kind: str
    origin: str
    eps: float = 0.0

    def zstep(self, u: np.ndarray, classes: ClassIndex) -> ZStep:
        if self.kind == "quadratic":
            return quadratic_zstep(u, classes, self.origin)
        return absolute_zstep(u, classes, self.origin, self.eps)


State = TypeVar("State", "LinearState", "KernelState")


def take_restarts(state: State, idx) -> State:
    """The sub-state of restarts ``idx`` (every field has a leading restart axis)."""
    return type(state)(**{f.name: getattr(state, f.name)[idx] for f in fields(state)})


def put_restarts(state: State, idx, sub: State) -> State:
    """Write ``sub`` into the restarts ``idx`` of ``state`` (in place) and return ``state``."""
    for f in fields(state):
        getattr(state, f.name)[idx] = getattr(sub, f.name)
    return state


@dataclass
class LinearState:
    """Axes W (R, D, K), the ascent matrix Y whose polar factor is the next W, f(W) (R,)."""

    W: np.ndarray
    Y: np.ndarray
    objective: np.ndarray
    rank_deficient: np.ndarray


class LinearProblem:
    """CQS/CAS on data (paper Algorithm 1): two data passes per iteration."""

    def __init__(self, operator: DataOperator, objective: CategoryObjective):
        self.op = operator
        self.objective = objective

    def _evaluate(self, W: np.ndarray, rank_deficient: np.ndarray) -> LinearState:
        zs = self.objective.zstep(self.op.own_projections(W), self.op.classes)
        Y = self.op.class_weighted_sums(zs.z)
        return LinearState(W=W, Y=Y, objective=zs.objective, rank_deficient=rank_deficient)

    def start(self, W0: np.ndarray) -> LinearState:
        return self._evaluate(np.array(W0, dtype=float), np.zeros(W0.shape[0], dtype=bool))

    def step(self, state: LinearState) -> LinearState:
        W, rank_deficient = polar_factor(state.Y)
        return self._evaluate(W, rank_deficient)

    @staticmethod
    def distance(new: LinearState, old: LinearState) -> np.ndarray:
        return np.linalg.norm(new.W - old.W, axis=(1, 2))

    # Hooks of the accelerated solver (catdask.core.acceleration). The mixed coordinates are
    # ascent matrices Y; the W-step of any of them is its polar factor.
    #: Whether :meth:`point` needs no pass over the data (False: two passes per call).
    point_is_free = False

    @staticmethod
    def coordinates(state: LinearState) -> np.ndarray:
        """The W-step's input at ``state``: the ascent matrices Y (R, D, K)."""
        return state.Y

    @staticmethod
    def lift(coords: np.ndarray) -> None:
        """Nothing to precompute: :meth:`point` evaluates the objective itself."""
        return None

    def point(self, coords: np.ndarray, lifted: None) -> LinearState:
        """The state at the polar factor of the ascent matrices ``coords``."""
        W, rank_deficient = polar_factor(coords)
        return self._evaluate(W, rank_deficient)


class ClassMatrixProblem(LinearProblem):
    """CQS with the class matrices R_k precomputed (one data pass in all)."""

    #: One O(K D^2) product on the driver per :meth:`point`, no pass over the data.
    point_is_free = True

    def __init__(self, class_matrices: np.ndarray):
        self.class_matrices = class_matrices

    def _evaluate(self, W: np.ndarray, rank_deficient: np.ndarray) -> LinearState:
        # Y[r, :, k] = R_k w_k^(r): K BLAS products (K, D, D) @ (K, D, R); einsum does not
        # use BLAS here and took 20 ms per call at D = 784, K = 10, R = 5 (8x more).
        Y = np.matmul(self.class_matrices, W.transpose(2, 1, 0)).transpose(2, 1, 0)
        f = 0.5 * np.einsum("rdk,rdk->r", W, Y)
        return LinearState(W=W, Y=Y, objective=f, rank_deficient=rank_deficient)


@dataclass
class KernelState:
    """Kernel point: coefficients A (R, K, N), projections P = A G (R, K, N), Z, f(A)."""

    A: np.ndarray
    P: np.ndarray
    z: np.ndarray
    objective: np.ndarray
    rank_deficient: np.ndarray


@dataclass(frozen=True)
class KernelPoint:
    """One kernel restart as the certificate test receives it: coefficients ``A`` (K, N) and
    the fit's own projections ``P = A G`` (K, N) of the same state. Every precision schedule
    reports a state evaluated from an exact float64 product (:mod:`.precision`), so P is what
    the test would compute with one more pass over G (N^2 kernel entries: at N = 20,000 about
    as much CPU as the rest of the test), and the test takes it instead. ``fit_seconds``: the
    fit's wall time up to its choice, against which the test may buy landmarks
    (``CertificateBudget.growth_fit_share``)."""

    A: np.ndarray
    P: np.ndarray
    fit_seconds: float | None = None


class KernelProblem:
    """K-CQS/K-CAS with the exact cheap W-step (docs/design.md §3)."""

    def __init__(self, operator: GramOperator, objective: CategoryObjective):
        self.op = operator
        self.objective = objective
        self.classes = operator.classes

    def _axes_from_z(self, z: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The W-step for fixed Z: returns A, P and a rank flag (batched over restarts)."""
        return self._axes_from_product(z, self.op.class_matmul(z))

    def _axes_from_product(self, z: np.ndarray, B: np.ndarray
                           ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The W-step for fixed Z given ``B = G Z`` (R, N, K): no product with G."""
        classes = self.classes
        # S[r, k, l] = sum_{i in C_k} z_i B[i, l]   (S = Z^T G Z, symmetric PSD): one contraction
        # per class of the class-sorted samples. einsum, not matmul: these products are too small
        # to gain from BLAS, whose threads woken on the driver would spin on the workers' cores.
        if classes.order is None:
            S = np.empty((B.shape[0], classes.n_classes, B.shape[2]))
            for k, a, b in classes.segments():
                S[:, k, :] = np.einsum("rn,rnl->rl", z[:, a:b], B[:, a:b, :])
        else:
            S = np.swapaxes(classes.sum(np.swapaxes(z[:, :, None] * B, 1, 2)), 1, 2)
        S_inv_sqrt, rank_deficient = inv_sqrt_spd(S)
        P = S_inv_sqrt @ np.swapaxes(B, 1, 2)  # (R, K, N)
        # A = S^{-1/2} Z^T: column i is S^{-1/2}[:, y_i] * z_i (np.take, much faster than fancy
        # indexing on the last axis; scaled in place).
        A = np.take(S_inv_sqrt, classes.codes, axis=2)
        A *= z[:, None, :]
        return A, P, rank_deficient

    def _evaluate(self, A: np.ndarray, P: np.ndarray, rank_deficient: np.ndarray
                  ) -> KernelState:
        zs = self.objective.zstep(self.classes.own(np.swapaxes(P, 1, 2)), self.classes)
        return KernelState(A=A, P=P, z=zs.z, objective=zs.objective, rank_deficient=rank_deficient)

    def start_from_z(self, z0: np.ndarray) -> KernelState:
        """Start at the axes that the W-step produces from auxiliary variables ``z0``."""
        return self._evaluate(*self._axes_from_z(np.asarray(z0, dtype=float)))

    def start_from_coefficients(self, A0: np.ndarray) -> KernelState:
        """Start at arbitrary coefficients A0 (R, K, N), G-orthonormalised first."""
        A0 = np.asarray(A0, dtype=float)
        R, K, N = A0.shape
        V = self.op.matmul(A0.transpose(2, 0, 1).reshape(N, R * K))  # G A0^T for every restart
        P0 = V.reshape(N, R, K).transpose(1, 2, 0)
        S0 = A0 @ np.swapaxes(P0, 1, 2)
        S_inv_sqrt, rank_deficient = inv_sqrt_spd(S0)
        return self._evaluate(S_inv_sqrt @ A0, S_inv_sqrt @ P0, rank_deficient)

    start = start_from_z

    def step(self, state: KernelState) -> KernelState:
        return self._evaluate(*self._axes_from_z(state.z))

    # Hooks of the accelerated solver (catdask.core.acceleration). The mixed coordinates are the
    # auxiliary variables z; since ``G Z`` is linear in z, the product of a mixture is the same
    # mixture of the products, so evaluating a mixed point costs no pass over G.
    #: Whether :meth:`point` needs no product with G (the product comes from :meth:`lift`).
    point_is_free = True

    @staticmethod
    def coordinates(state: KernelState) -> np.ndarray:
        """The W-step's input at ``state``: the Z-step's auxiliary variables z (R, N)."""
        return state.z

    def lift(self, coords: np.ndarray) -> np.ndarray:
        """``G Z`` for auxiliary variables ``coords``: the one Gram pass of an iteration."""
        return self.op.class_matmul(coords)

    def solver_history(self, capacity: int):
        """Where Anderson's history of z and ``G Z`` is kept: the operator's choice."""
        return self.op.solver_history(capacity)

    def point(self, coords: np.ndarray, lifted: np.ndarray) -> KernelState:
        """The state that the W-step produces from ``coords`` with ``lifted = G Z``."""
        return self._evaluate(*self._axes_from_product(coords, lifted))

    @staticmethod
    def distance(new: KernelState, old: KernelState) -> np.ndarray:
        # RKHS norm of the change: tr(dA G dA^T) = <dA, dP> because G dA^T = dP^T. Forming
        # the differences first avoids the cancellation of 2K - 2 tr(A_new G A_old^T).
        # One restart at a time: two (K, N) differences instead of two (R, K, N) temporaries
        # (einsum, not a BLAS dot: see _axes_from_product).
        inner = np.empty(new.A.shape[0])
        for r in range(inner.size):
            inner[r] = np.einsum("kn,kn->", new.A[r] - old.A[r], new.P[r] - old.P[r])
        return np.sqrt(np.maximum(inner, 0.0))
