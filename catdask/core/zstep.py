"""The Z-step: optimal auxiliary variables for fixed axes (paper section "Estimation of Z")."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class ZStep:
    """Result of a Z-step."""

    z: np.ndarray  # (R, N): the non-zero entry of each row of Z (Z[i, y_i] = z[i])
    #: (R,): ``f(W)`` at the axes that produced ``u`` (the maximised value of the Z-subproblem).
    objective: np.ndarray


def quadratic_zstep(u, classes, origin):
    """CQS Z-step (paper eq. (24)): centre ``u`` within each class."""
    if origin == "class":
        z = u - classes.expand(classes.mean(u))
    else:
        z = u.copy()
    return ZStep(z=z, objective=0.5 * np.einsum("rn,rn->r", z, z))


def class_multipliers(u, classes, eps, *, max_iter=200):
    """Per-class multipliers ``mu_k`` of the CAS Z-step (paper eq. (29))."""
    R = u.shape[0]
    v = classes.sort(u)
    starts = classes.offsets[:-1]
    counts = classes.counts.astype(float)
    lo = np.empty((R, classes.n_classes))
    hi = np.empty_like(lo)
    mu = np.empty_like(lo)
    for k, a, b in classes.segments():
        seg = v[:, a:b]
        lo[:, k] = -seg.max(axis=1) - eps
        hi[:, k] = -seg.min(axis=1) + eps
        mu[:, k] = -np.median(seg, axis=1)  # the eps -> 0 solution: a good start
    sorted_codes = np.repeat(np.arange(classes.n_classes), classes.counts)
    for _ in range(max_iter):
        t = v + mu[:, sorted_codes]
        root = np.sqrt(t * t + eps * eps)
        g = np.add.reduceat(t / root, starts, axis=1)
        dg = np.add.reduceat(eps * eps / root**3, starts, axis=1)
        # Keep the bracket: g is increasing, so g < 0 means the root lies above mu.
        lo = np.where(g < 0, mu, lo)
        hi = np.where(g > 0, mu, hi)
        if np.all(np.abs(g) <= 1e-13 * counts):
            break
        newton = mu - g / np.maximum(dg, np.finfo(float).tiny)
        inside = (newton > lo) & (newton < hi)
        mu = np.where(inside, newton, 0.5 * (lo + hi))
        if np.all(hi - lo <= 4 * np.finfo(float).eps * np.maximum(1.0, np.abs(mu))):
            break
    return mu


def absolute_zstep(u, classes, origin, eps):
    """CAS Z-step, solved exactly (paper eqs. (28)-(29), docs/design.md §2)."""
    if origin == "class":
        t = u + classes.expand(class_multipliers(u, classes, eps))
    else:
        t = u
    root = np.sqrt(t * t + eps * eps)
    return ZStep(z=t / root, objective=root.sum(axis=-1))
