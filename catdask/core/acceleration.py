"""Safeguarded Anderson acceleration of the alternating iteration, one Gram pass per iteration.

The plain iteration is a fixed-point map on the W-step's input: the auxiliary variables z of
the kernel problem (docs/design.md §3) or ``Y = [R_1 w_1, ..., R_K w_K]`` of the class-matrix
problem (§2). Anderson mixing replaces the next input by the affine combination of the last
``memory + 1`` map outputs whose residuals ``T(x) - x`` combine to the smallest norm.

No extra Gram pass: ``B = G Z`` is linear in z, and every map output ``g_j`` has its product
``G g_j`` from the plain step's pass (:meth:`lift`), so a mixture has its product, W-step and
objective for free. The class-matrix problem pays one O(K D^2) product per evaluated point.

Monotone: each iteration takes the mixed point only when its objective is at least the plain
step's (itself at least the current one); a rejected mixture clears the restart's history. The
step reported to the solver is the plain step's, so both iterations stop by the same rule.

Where the history lives: in the driver's memory (:class:`_History`), or, when the problem's
operator runs on a cluster (``problem.solver_history``), on its workers (:class:`HeldHistory`):
the history is ``memory + 1`` N-sized entries per restart, most of what a kernel fit would hold
on the driver. Both keep the same slots and run the same two products (the residual differences'
Gram matrix, the weighted sums); the weights are computed on the driver from the former.
"""

from __future__ import annotations

import numpy as np

from .problems import put_restarts, take_restarts

__all__ = ["ACCELERATIONS", "AndersonStepper", "HeldHistory", "PlainStepper", "make_stepper"]

#: Values of ``solve(acceleration=...)``.
ACCELERATIONS = ("auto", "anderson", "none")

# Relative ridge of the Anderson least-squares problem: keeps the mixing coefficients bounded
# when the residual differences become nearly collinear close to convergence.
RIDGE = 1e-10


def _lift(problem, coords, idx):
    """``problem.lift`` of the batch ``idx``: a problem whose products depend on the restart
    (``per_restart_products``: the anchored products of :mod:`catdask.core.precision`) is told
    which restarts the rows of ``coords`` are."""
    if getattr(problem, "per_restart_products", False):
        return problem.lift(coords, idx)
    return problem.lift(coords)


class PlainStepper:
    """The plain alternating iteration: ``problem.step``."""

    name = "none"

    def __init__(self, problem):
        self.problem = problem

    def step(self, idx, old):
        """Advance restarts ``idx`` (the states ``old``): returns ``(new, step_size)``."""
        problem = self.problem
        if getattr(problem, "per_restart_products", False):
            g = problem.coordinates(old)
            new = problem.point(g, problem.lift(g, idx))
        else:
            new = problem.step(old)
        return new, problem.distance(new, old)


def _entries_like(capacity, like):
    """``(base, view)``: ``capacity`` entries shaped like ``like`` and laid out in its memory
    order (``base`` C-contiguous, ``view[i]`` strided as ``like``), so copying an entry in is
    a straight copy, and mixing entries is one product over ``base``'s rows."""
    outer_first = np.argsort(like.strides, kind="stable")[::-1]
    base = np.empty((capacity, *(like.shape[a] for a in outer_first)))
    return base, base.transpose(0, *(1 + np.argsort(outer_first)))


def _normal_equations(res):
    """Anderson's least-squares problem from residuals ``res`` (n, M), oldest first: the Gram
    matrix of their differences and the differences' products with the newest residual."""
    dres = np.diff(res, axis=0)  # (m, M)
    return dres @ dres.T, dres @ res[-1]


class _History:
    """One restart's last ``capacity`` map outputs ``(g, G g, residual)``, in preallocated buffers.

    Slots ``[0, len)`` are in use (the oldest overwritten), so a mixture weighs the buffers in place
    without stacking copies; the products keep the operator's (K, N) memory order.
    """

    def __init__(self, capacity):
        self.capacity = int(capacity)
        self.order: list[int] = []  # slots, oldest first
        self.g: np.ndarray | None = None
        self.residual: np.ndarray | None = None
        self.lifted: np.ndarray | None = None
        self.lifted_base: np.ndarray | None = None

    def __len__(self):
        return len(self.order)

    def push(self, g, lifted, residual):
        slot = len(self.order) if len(self.order) < self.capacity else self.order.pop(0)
        self._put(slot, g, lifted, residual)
        self.order.append(slot)

    def keep_latest(self):
        """Forget all but the newest entry (moved to slot 0)."""
        if not self.order:
            return
        last = self.order[-1]
        if last != 0:
            self._move(last, 0)
        self.order = [0]

    def _put(self, slot, g, lifted, residual):
        if self.g is None or self.residual is None:
            self.g = np.empty((self.capacity, *np.shape(g)))
            self.residual = np.empty((self.capacity, *np.shape(residual)))
            if lifted is not None:
                self.lifted_base, self.lifted = _entries_like(self.capacity, lifted)
        self.g[slot] = g
        self.residual[slot] = residual
        if self.lifted is not None:
            self.lifted[slot] = lifted

    def _move(self, src, dst):
        for buf in (self.g, self.lifted_base, self.residual):
            if buf is not None:
                buf[dst] = buf[src]

    @staticmethod
    def normal_equations(histories):
        """:func:`_normal_equations` of each history (at least 2 entries each)."""
        return [_normal_equations(h.residual[h.order].reshape(len(h), -1)) for h in histories]


def _held_entry(g, lifted, residual):
    return g, lifted, residual


def _held_normal_equations(*entries):
    """:func:`_normal_equations` of held entries (oldest first), on a worker."""
    return _normal_equations(np.stack([e[2] for e in entries]).reshape(len(entries), -1))


def _held_mixture(w, *entries):
    """The weighted sums of held entries (in slot order) as :meth:`AndersonStepper._mixtures`
    forms them, on a worker: ``(x, lifted)``, the product in the memory order it was pushed in."""
    n = len(entries)
    x = np.dot(w[None], np.stack([e[0] for e in entries]).reshape(n, -1))
    x = x.reshape(np.shape(entries[0][0]))
    if entries[0][1] is None:
        return x, None
    base, view = _entries_like(n, entries[0][1])
    for j, e in enumerate(entries):
        view[j] = e[1]
    out_base, out = _entries_like(1, entries[0][1])
    np.dot(w[None], base.reshape(n, -1), out=out_base.reshape(1, -1))
    return x, out[0]


#: A restart's history smaller than this stays in the driver's memory even on a cluster: holding
#: it on the workers costs round trips each iteration (0.086 -> 0.172 s an iteration at
#: N = 3,000, K = 3 on 2 local workers), worth paying only where the history grows the driver.
HELD_HISTORY_MIN_BYTES = 16 << 20


def held_history(runner, capacity, n_samples, n_classes):
    """A :class:`HeldHistory` on ``runner`` where a restart's entries (``z``, ``G z`` and the
    residual: ``(K + 2) N`` floats each) reach :data:`HELD_HISTORY_MIN_BYTES`, else None."""
    if runner.client is None or capacity * (n_classes + 2) * n_samples * 8 < HELD_HISTORY_MIN_BYTES:
        return None
    return HeldHistory(runner, capacity)


class HeldHistory(_History):
    """:class:`_History` whose entries a task runner holds where it runs tasks
    (:class:`catdask.distributed.execute.BlockRunner`: futures on the workers, recomputed if a
    worker is lost); the driver keeps only their keys. ``normal_equations`` and ``mixtures`` each
    run one task per restart, all restarts of a batch in one round trip.
    """

    def __init__(self, runner, capacity):
        super().__init__(capacity)
        self.runner = runner
        self.keys: list = [None] * self.capacity

    def _put(self, slot, g, lifted, residual):
        self.runner.forget([self.keys[slot]])
        (self.keys[slot],) = self.runner.persist([(_held_entry, g, lifted, residual)],
                                                 "anderson-entry")

    def _move(self, src, dst):
        self.runner.forget([self.keys[dst]])
        self.keys[dst], self.keys[src] = self.keys[src], None

    @staticmethod
    def normal_equations(histories):
        return histories[0].runner.run(
            [(_held_normal_equations, *[h.keys[s] for s in h.order]) for h in histories],
            "anderson-equations")

    @staticmethod
    def mixtures(histories, weights):
        """The mixed inputs (m, ...) and products (or None) of ``histories`` with ``weights``
        on their slots."""
        parts = histories[0].runner.run(
            [(_held_mixture, w, *h.keys[: len(w)]) for h, w in zip(histories, weights)],
            "anderson-mixture")
        x = np.stack([p[0] for p in parts])
        return x, None if parts[0][1] is None else np.stack([p[1] for p in parts])


class AndersonStepper:
    """Anderson mixing of the plain map with a per-restart monotone safeguard.

    ``problem`` (kernel or class-matrix) provides ``coordinates``, ``lift``, ``point`` and
    ``distance``; histories of ``memory`` residual differences are kept per restart of the batch of
    ``n_restarts``; a restart whose plain step is within ``tol`` keeps the plain point.
    ``accepted`` and ``rejected`` count, per restart, the mixed points the safeguard took and
    refused.
    """

    name = "anderson"

    def __init__(self, problem, n_restarts, *, memory=8, tol=0.0):
        if memory < 1:
            raise ValueError(f"Anderson memory must be >= 1; got {memory}")
        self.problem = problem
        self.memory = int(memory)
        self.tol = float(tol)
        self._generator = [None] * n_restarts  # input x of each restart's current point
        # On the cluster where the problem's operator keeps its data, if it says so.
        held = getattr(problem, "solver_history", lambda capacity: None)
        self._history = [held(self.memory + 1) for _ in range(n_restarts)]
        self._history = [_History(self.memory + 1) if h is None else h for h in self._history]
        self.accepted = np.zeros(n_restarts, dtype=int)
        self.rejected = np.zeros(n_restarts, dtype=int)

    def _mixture_weights(self, restarts):
        """Anderson's weights on the history slots of each of ``restarts`` (each with at least
        2 entries)."""
        histories = [self._history[r] for r in restarts]
        out = []
        for hist, (gram, rhs) in zip(histories, type(histories[0]).normal_equations(histories)):
            n = len(hist)
            gram += RIDGE * np.trace(gram) * np.eye(gram.shape[0]) + np.finfo(float).tiny
            gamma = np.linalg.solve(gram, rhs)
            # x = g_last - sum_j gamma_j (g_{j+1} - g_j), written as weights on the g_j (in
            # time order), then placed on the slots that hold them (slots [0, n) are in use).
            weights = np.zeros(n)
            weights[-1] = 1.0
            weights[1:] -= gamma
            weights[:-1] += gamma
            on_slots = np.empty(n)
            on_slots[hist.order] = weights
            out.append(on_slots)
        return out

    def _mixtures(self, restarts, weights):
        """The mixed inputs (m, ...) of ``restarts`` and their products (None without), each one
        product over a history's rows, in fresh arrays (a kernel state keeps its product).
        """
        first = self._history[restarts[0]]
        if isinstance(first, HeldHistory):
            return HeldHistory.mixtures([self._history[r] for r in restarts], weights)
        x = np.empty((len(restarts), *first.g.shape[1:]))
        lifted = None
        if first.lifted is not None:
            base, lifted = _entries_like(len(restarts), first.lifted[0])
        for i, (r, w) in enumerate(zip(restarts, weights)):
            hist, n = self._history[r], len(w)
            np.dot(w[None], hist.g[:n].reshape(n, -1), out=x[i].reshape(1, -1))
            if lifted is not None:
                np.dot(w[None], hist.lifted_base[:n].reshape(n, -1), out=base[i].reshape(1, -1))
        return x, lifted

    def step(self, idx, old):
        """Advance restarts ``idx`` (the states ``old``): returns ``(new, step_size)``.

        One call of ``problem.lift`` (the Gram pass) on the batch; the plain step and every
        mixed point are evaluated from its result.
        """
        problem = self.problem
        g = problem.coordinates(old)
        lifted = _lift(problem, g, idx)
        plain = problem.point(g, lifted)
        step = problem.distance(plain, old)
        for j, r in enumerate(idx):
            if self._generator[r] is not None:
                self._history[r].push(g[j], None if lifted is None else lifted[j],
                                      g[j] - self._generator[r])
            self._generator[r] = g[j]
        # Restarts with too little history (fewer than 2 entries) keep the plain point.
        rows = np.asarray([j for j, r in enumerate(idx) if len(self._history[r]) >= 2], dtype=int)
        new = plain
        if rows.size:
            restarts = [idx[j] for j in rows]
            mixed_x, mixed_lifted = self._mixtures(restarts, self._mixture_weights(restarts))
            cand = problem.point(mixed_x, mixed_lifted)
            # The safeguard: the mixture must do at least as well as the plain step.
            good = np.isfinite(cand.objective) & (cand.objective >= plain.objective[rows])
            good &= step[rows] > self.tol  # a converged restart ends at the plain point
            # ``plain`` and ``cand`` are fresh and nothing else refers to their arrays: the
            # restarts that keep the other's point are copied into one of them, whichever
            # needs fewer copies (every restart mixed and most accepted is the usual case).
            if rows.size == len(idx) and 2 * good.sum() >= rows.size:
                new = cand
                if not good.all():
                    put_restarts(new, ~good, take_restarts(plain, ~good))
            elif np.any(good):
                put_restarts(new, rows[good], take_restarts(cand, np.flatnonzero(good)))
            for k, j in enumerate(rows):
                r = idx[j]
                if good[k]:
                    self.accepted[r] += 1
                    self._generator[r] = mixed_x[k]
                else:
                    self.rejected[r] += 1
                    self._history[r].keep_latest()
        return new, step


def make_stepper(problem, n_restarts, acceleration="auto", *, memory=8, tol=0.0):
    """The stepper for ``acceleration`` (``"auto"``, ``"anderson"`` or ``"none"``).

    ``"auto"`` accelerates CQS where a mixed point costs no pass over the data (the kernel and the
    class-matrix problems). CAS keeps the plain iteration (the streaming problem would pay two more
    data passes per mixed point); ``"anderson"`` forces it for both.
    """
    if acceleration not in ACCELERATIONS:
        raise ValueError(
            f"acceleration must be one of {', '.join(map(repr, ACCELERATIONS))}; "
            f"got {acceleration!r}"
        )
    supported = all(hasattr(problem, a) for a in ("coordinates", "lift", "point"))
    if acceleration == "anderson" and not supported:
        raise ValueError(f"{type(problem).__name__} does not support acceleration='anderson'")
    if acceleration == "auto":
        free = supported and getattr(problem, "point_is_free", False)
        objective = getattr(problem, "objective", None)  # the class-matrix problem is CQS
        quadratic = getattr(objective, "kind", "quadratic") == "quadratic"
        acceleration = "anderson" if free and quadratic else "none"
    if acceleration == "none":
        return PlainStepper(problem)
    return AndersonStepper(problem, n_restarts, memory=memory, tol=tol)
