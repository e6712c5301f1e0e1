"""The moment certificate's dual data and its verification (docs/design.md section 4b)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .moment_sos import LAYOUT
from .moment_sos import identity as shared_identity

_EPS = np.finfo(float).eps


@dataclass(frozen=True, eq=False)
class MomentDual:
    """Dual data of a level-2 moment certificate (numeric arrays and a layout name)."""

    basis: np.ndarray
    scale: float
    gamma: float
    gram: tuple
    multipliers: np.ndarray
    anchor: int | None = None
    layout: str = LAYOUT
    class_matrices: np.ndarray | None = None

    def to_arrays(self):
        """(arrays, JSON metadata) for a store: numeric arrays only, never pickles."""
        arrays = {"basis": np.asarray(self.basis, dtype=float),
                  "multipliers": np.asarray(self.multipliers, dtype=float),
                  "gram": np.concatenate([np.asarray(g, dtype=float) for g in self.gram])}
        if self.class_matrices is not None:
            arrays["class_matrices"] = np.asarray(self.class_matrices, dtype=float)
        meta = {"layout": self.layout, "scale": float(self.scale), "gamma": float(self.gamma),
                "anchor": None if self.anchor is None else int(self.anchor),
                "gram_lengths": [int(len(g)) for g in self.gram]}
        return arrays, meta

    @classmethod
    def from_arrays(cls, arrays, meta):
        """Inverse of :meth:`to_arrays`; checks the shapes it can check without the data."""
        lengths = [int(n) for n in meta["gram_lengths"]]
        flat = np.asarray(arrays["gram"], dtype=float).ravel()
        if flat.size != sum(lengths):
            raise ValueError(f"moment certificate: gram has {flat.size} entries, the metadata "
                             f"says {sum(lengths)}")
        gram = tuple(np.split(flat, np.cumsum(lengths)[:-1]))
        basis = np.asarray(arrays["basis"], dtype=float)
        if basis.ndim != 2:
            raise ValueError(f"moment certificate: basis must be 2-D, got shape {basis.shape}")
        R = arrays.get("class_matrices")
        anchor = meta.get("anchor")
        return cls(basis=basis, scale=float(meta["scale"]), gamma=float(meta["gamma"]),
                   gram=gram, multipliers=np.asarray(arrays["multipliers"], dtype=float).ravel(),
                   anchor=None if anchor is None else int(anchor), layout=str(meta["layout"]),
                   class_matrices=None if R is None else np.asarray(R, dtype=float))


@dataclass(frozen=True)
class DualBound:
    """A rigorous bound from :func:`dual_bound` and what it charged (all in units of f)."""

    upper_bound: float
    reduced_bound: float
    gamma: float
    residual_charge: float
    psd_charge: float
    nullspace_charge: float
    rounding: float
    residual_l1: float = math.nan


def reduction_basis(R, K, rank_tol=1e-12):
    """Basis (D x r) of the range of ``sum_k R_k`` (at least K columns), r = D when full rank."""
    D = R.shape[1]
    total = R.sum(axis=0)
    evals, evecs = np.linalg.eigh((total + total.T) / 2)
    keep = evals > rank_tol * max(evals[-1], 0.0)
    r = max(int(keep.sum()), K)
    if r >= D:
        return np.eye(D)
    return evecs[:, -r:]


def _triu_to_full(t, s):
    Q = np.zeros((s, s))
    iu = np.triu_indices(s)
    Q[iu] = t
    return Q + np.triu(Q, 1).T


def _check_shapes(dual, K, D, ident):
    if dual.layout != LAYOUT:
        raise ValueError(f"moment certificate layout {dual.layout!r} is not {LAYOUT!r}")
    r = dual.basis.shape[1]
    if dual.basis.shape[0] != D or not K <= r <= D:
        raise ValueError(f"moment certificate basis has shape {dual.basis.shape}; the class "
                         f"matrices need ({D}, r) with {K} <= r <= {D}")
    sizes = ident.sizes()
    if [len(g) for g in dual.gram] != [s * (s + 1) // 2 for s in sizes]:
        raise ValueError("moment certificate Gram blocks do not match the layout's sizes "
                         f"{sizes}")
    if dual.multipliers.shape != (ident.n_mult,):
        raise ValueError(f"moment certificate has {dual.multipliers.size} multipliers; the "
                         f"layout needs {ident.n_mult}")
    if not (np.isfinite(dual.scale) and dual.scale > 0 and np.isfinite(dual.gamma)):
        raise ValueError("moment certificate scale/gamma must be finite (scale > 0)")


def dual_bound(R, dual, identity=None):
    """Rigorous upper bound on ``max 1/2 sum_k w_k^T R_k w_k`` over orthonormal W from dual data
    (``identity``: the maps for ``(K, r)`` when already built). Returns a :class:`DualBound`
    (``inf`` when the data are not finite); raises ``ValueError`` when the data do not fit the class
    matrices' shape or the layout.
    """
    R = np.asarray(R, dtype=float)
    K, D, _ = R.shape
    r = dual.basis.shape[1]
    if dual.anchor is not None and not K <= dual.anchor <= r:
        raise ValueError(f"moment certificate anchor {dual.anchor} is not in [{K}, {r}]")
    ident = identity if identity is not None else shared_identity(K, r, dual.anchor)
    _check_shapes(dual, K, D, ident)
    finite = all(np.all(np.isfinite(g)) for g in dual.gram)
    if not (finite and np.all(np.isfinite(dual.multipliers)) and np.all(np.isfinite(dual.basis))):
        return DualBound(math.inf, math.inf, dual.gamma, math.inf, math.inf, math.inf, 0.0,
                         math.inf)
    s, B = dual.scale, dual.basis
    Rs = R / s
    A = B.T @ Rs @ B  # batched products, not an unoptimised einsum (K D^2 r^2)
    # |exact A - computed A| <= (D + 2) eps |B|^T |R| |B| entrywise (two dot products of length D).
    absA = np.abs(B).T @ np.abs(Rs) @ np.abs(B)
    a_guard = 0.5 * (D + 2) * _EPS * float(sum(np.linalg.norm(a) for a in absA)) * 1.01

    f = ident.objective(A)
    gram = [np.asarray(g, dtype=float) for g in dual.gram]
    lam = dual.multipliers
    e0 = np.zeros(ident.n)
    e0[0] = 1.0
    rho = dual.gamma * e0 - f - ident.gram_sum(gram) - ident.multipliers @ lam
    # Rounding in forming rho: each coefficient is a sum of at most `terms` products.
    terms = 4 + max(len(b) for b in ident.bases) + ident.multipliers.getnnz(axis=1).max()
    magnitude = (abs(dual.gamma) * e0 + np.abs(f) + ident.gram_abs_sum(gram)
                 + abs(ident.multipliers) @ np.abs(lam))
    rho_guard = 2 * terms * _EPS * magnitude

    gid, weight = ident.groups()
    # The constant term enters with its sign (f <= gamma - rho_0 + |rest|): gamma and rho_0
    # only ever appear as gamma - rho_0, so gamma itself cannot be wrong, only the identity.
    charge = 0.0
    for g in range(gid.max() + 1):
        sel = gid == g
        if g == gid[0]:
            charge += float(rho_guard[0] - rho[0])
            continue
        bound_g = np.abs(rho[sel]) + rho_guard[sel]
        charge += math.sqrt(float(np.sum(bound_g**2 / weight[sel]))) * (1 + 1e-12)

    psd = 0.0
    v_norm_sq = [1.0 + K] + [1.0] * (len(gram) - 1)  # max ||v_b(y)||^2, unit columns
    for t, size, c in zip(gram, ident.sizes(), v_norm_sq):
        Q = _triu_to_full(t, size)
        w = np.linalg.eigvalsh(Q)
        lmin = w[0] - 2 * size * _EPS * max(abs(w[0]), abs(w[-1]))
        psd += c * max(0.0, -lmin)

    U = dual.gamma + charge + psd * (1 + 1e-12) + a_guard
    U = max(U, 0.0)  # f >= 0 for PSD class matrices
    reduced, tail = U, 0.0
    if not (r == D and np.array_equal(B, np.eye(D))):
        # W = B Y + E W with E = I - B B^T and ||Y||_2 <= sigma (so f_red(Y) <= sigma^2 U), and
        # sum_k w_k^T E R_k E w_k <= sum of the K largest eigenvalues of E T E, T = sum_k R_k.
        BtB = B.T @ B
        sigma_sq = float(np.linalg.eigvalsh((BtB + BtB.T) / 2)[-1]) + 4 * D * _EPS
        E = np.eye(D) - B @ B.T
        T = (Rs.sum(axis=0) + Rs.sum(axis=0).T) / 2
        C = E @ T @ E
        ev = np.linalg.eigvalsh((C + C.T) / 2)
        absE = np.abs(E) + (D + 2) * _EPS * (np.abs(B) @ np.abs(B.T))
        guard = (2 * D + 4) * _EPS * float(np.linalg.norm(absE @ np.abs(T) @ absE)) \
            + 2 * D * _EPS * max(abs(ev[0]), abs(ev[-1]))
        tail = float(np.sum(np.clip(ev[-K:], 0.0, None))) + K * guard
        reduced = max(sigma_sq, 1.0) * U
    total = (math.sqrt(reduced) + math.sqrt(0.5 * tail))**2 * (1 + 1e-12)
    rounding = a_guard + float(np.sum(rho_guard))
    return DualBound(upper_bound=s * total, reduced_bound=s * U, gamma=s * dual.gamma,
                     residual_charge=s * charge, psd_charge=s * psd,
                     nullspace_charge=s * (total - U), rounding=s * rounding,
                     residual_l1=s * float(np.abs(rho[1:]).sum() + abs(rho[0])))
