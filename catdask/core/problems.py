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
        into, value = getattr(state, f.name), getattr(sub, f.name)
        if into.ndim != value.ndim:  # e.g. a kernel start's coefficients into z's: no broadcast
            raise ValueError(f"cannot put a {value.ndim}-D {f.name} into a {into.ndim}-D one")
        into[idx] = value
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


#: Samples per block where a restart's (K, N) coefficients and projections are formed from its
#: stored state (:meth:`KernelProblem.distance`): (K, 32,768) temporaries, never (R, K, N) ones.
AXES_BLOCK = 1 << 15


@dataclass
class KernelState:
    """The kernel points of every restart, kept as what makes them instead of their (R, K, N)
    coefficients A and projections P: the driver holds this state, also when G lives on a
    cluster, and A and P would be two more (R, K, N) arrays per state (docs/design.md §3).

    ``source``: the W-step's input, the auxiliary variables z' (R, N), or a start's explicit
    coefficients C (R, K, N); ``B = G Z'`` (or ``G C^T``), (R, N, K); ``M = S^{-1/2}``
    (R, K, K). Then ``A = M Z'^T`` (``M C``) and ``P = A G = M B^T``
    (:meth:`KernelProblem.axes`). ``z``: the Z-step at this point, f(A), the rank flag.
    """

    source: np.ndarray
    B: np.ndarray
    M: np.ndarray
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

    def _inv_sqrt_class_product(self, z: np.ndarray, B: np.ndarray
                                ) -> tuple[np.ndarray, np.ndarray]:
        """The W-step for fixed Z given ``B = G Z`` (R, N, K): ``M = S^{-1/2}`` of
        ``S = Z^T G Z`` (R, K, K) and a rank flag; no product with G."""
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
        return inv_sqrt_spd(S)

    def _own_projections(self, B: np.ndarray, M: np.ndarray) -> np.ndarray:
        """``u[r, i] = P[r, y_i, i] = sum_l M[r, y_i, l] B[r, i, l]`` (R, N), P not formed."""
        classes = self.classes
        if classes.order is None:
            u = np.empty(B.shape[:2])
            for k, a, b in classes.segments():
                u[:, a:b] = np.einsum("rl,rnl->rn", M[:, k, :], B[:, a:b, :])
            return u
        return np.einsum("rnl,rnl->rn", np.take(M, classes.codes, axis=1), B)

    def _evaluate(self, source: np.ndarray, B: np.ndarray, M: np.ndarray,
                  rank_deficient: np.ndarray) -> KernelState:
        zs = self.objective.zstep(self._own_projections(B, M), self.classes)
        return KernelState(source=source, B=B, M=M, z=zs.z, objective=zs.objective,
                           rank_deficient=rank_deficient)

    def _point_from_z(self, z: np.ndarray, B: np.ndarray) -> KernelState:
        # A copy of z: the state never shares its arrays with the iterate that made it.
        return self._evaluate(np.array(z, dtype=float), B, *self._inv_sqrt_class_product(z, B))

    def _axes_block(self, state: KernelState, r: int, start: int, stop: int
                   ) -> tuple[np.ndarray, np.ndarray]:
        """Samples ``start:stop`` of restart ``r``'s coefficients A and projections P,
        (K, stop - start) each, fresh arrays."""
        M, source = state.M[r], state.source[r]
        P = M @ state.B[r, start:stop].T
        if source.ndim == 2:  # a start's explicit coefficients C: A = M C
            return M @ source[:, start:stop], P
        # A = M Z'^T: column i is M[:, y_i] z'_i (np.take: faster than fancy indexing here)
        A = np.take(M, self.classes.codes[start:stop], axis=1)
        A *= source[start:stop]
        return A, P

    def axes(self, state: KernelState, r: int) -> tuple[np.ndarray, np.ndarray]:
        """Restart ``r``'s coefficients A and projections P = A G, (K, N) each."""
        return self._axes_block(state, r, 0, state.z.shape[1])

    def start_from_z(self, z0: np.ndarray) -> KernelState:
        """Start at the axes that the W-step produces from auxiliary variables ``z0``."""
        z0 = np.asarray(z0, dtype=float)
        return self._point_from_z(z0, self.op.class_matmul(z0))

    def start_from_coefficients(self, A0: np.ndarray) -> KernelState:
        """Start at arbitrary coefficients A0 (R, K, N), G-orthonormalised first."""
        A0 = np.array(A0, dtype=float)
        R, K, N = A0.shape
        V = self.op.matmul(A0.transpose(2, 0, 1).reshape(N, R * K))  # G A0^T for every restart
        B0 = V.reshape(N, R, K).transpose(1, 0, 2)  # (R, N, K): P0 = A0 G = B0^T
        S0 = A0 @ B0
        M, rank_deficient = inv_sqrt_spd(S0)
        return self._evaluate(A0, B0, M, rank_deficient)

    start = start_from_z

    def step(self, state: KernelState) -> KernelState:
        return self._point_from_z(state.z, self.op.class_matmul(state.z))

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
        """The state that the W-step produces from ``coords`` with ``lifted = G Z`` (kept as
        the state's ``B``: the caller hands over a fresh array)."""
        return self._point_from_z(coords, lifted)

    def distance(self, new: KernelState, old: KernelState) -> np.ndarray:
        # RKHS norm of the change: tr(dA G dA^T) = <dA, dP> because G dA^T = dP^T. Forming
        # the differences first avoids the cancellation of 2K - 2 tr(A_new G A_old^T).
        # One restart and AXES_BLOCK samples at a time: (K, AXES_BLOCK) temporaries (einsum,
        # not a BLAS dot: see _inv_sqrt_class_product).
        R, N = new.z.shape
        inner = np.zeros(R)
        for r in range(R):
            for a in range(0, N, AXES_BLOCK):
                b = min(a + AXES_BLOCK, N)
                dA, dP = self._axes_block(new, r, a, b)
                A_old, P_old = self._axes_block(old, r, a, b)
                dA -= A_old
                dP -= P_old
                inner[r] += np.einsum("kn,kn->", dA, dP)
        return np.sqrt(np.maximum(inner, 0.0))
