"""Bounds on what the low-rank test's subspace leaves out: ``||D_k||`` (docs/design.md §4c)."""

from __future__ import annotations

import math

import numpy as np

from .budget import DEFAULT_BUDGET
from .certify import one_blas_thread
from .eigen import sym, verified_top

_EPS = np.finfo(float).eps
# The pass's sizes are the budget's (:mod:`.budget`): ``spectral_max_class_bytes`` (a class
# block kept for the spectral bound), ``class_gram_max_bytes`` (blocks asked for whole through
# ``class_gram``: n_k^2 kernel entries instead of the N n_k of columns, K times fewer; a kept
# block is always asked for whole), ``slab_entries`` (rows of a block too large to hold) and
# ``class_block_columns`` (Gram columns per request otherwise).


def _class_block(operator, L, idx, keep, budget, rows_of, k=None):
    """``Delta_kk = G^_kk - L_k L_k^T`` entry by entry (no cancellation between large sums):
    the block itself when ``keep``, the sum of its squared entries and ``max |G^_ij|``."""
    Lk = L[idx]
    block = budget.class_block_columns
    total, gmax = 0.0, 0.0
    if k is not None and (keep or 8 * idx.size**2 <= budget.class_gram_max_bytes):
        # A kept block is held whole anyway: asked for whole it costs n_k^2 kernel entries
        # instead of N n_k (blobs N = 20,000, K = 5: the pass's kernel work 5x smaller).
        out = _writable(operator.class_gram(k))  # (n_k, n_k)
        if out.shape != (idx.size, idx.size):
            raise ValueError(f"class_gram({k}) has shape {out.shape}; expected "
                             f"{(idx.size, idx.size)}")
        gmax = max(float(out.max()), -float(out.min())) if out.size else 0.0
        for a in range(0, idx.size, block):  # entry by entry, as below
            out[:, a : a + block] -= Lk @ Lk[a : a + block].T
        total = float(np.einsum("ij,ij->", out, out))
        return (out if keep else None), total, gmax
    if k is not None and rows_of is not None and not keep:
        # Too large to hold: slabs of rows of G^_kk (n_k^2 kernel entries in all, not the
        # N n_k of columns; blobs N = 50,000, K = 5: 0.5e9 instead of 2.5e9).
        step = max(1, budget.slab_entries // max(idx.size, 1))
        for a in range(0, idx.size, step):
            S = _writable(rows_of(k, a, min(a + step, idx.size)))
            if S.size:
                gmax = max(gmax, float(S.max()), -float(S.min()))
            S -= Lk[a : a + step] @ Lk.T
            total += float(np.einsum("ij,ij->", S, S))
        return None, total, gmax
    kept: np.ndarray | None = np.empty((idx.size, idx.size)) if keep else None
    for a in range(0, idx.size, block):
        J = idx[a : a + block]
        C = np.asarray(operator.columns(J), dtype=float)[idx]
        gmax = max(gmax, float(np.max(np.abs(C))) if C.size else 0.0)
        C -= Lk @ L[J].T
        total += float(np.einsum("ij,ij->", C, C))
        if kept is not None:
            kept[:, a : a + J.size] = C
    return kept, total, gmax


def _writable(block):
    """``block`` as a float64 array this pass may overwrite: itself when it is a fresh array
    of its own (the operators' ``class_gram``), else a copy (no second copy of a 128 MB
    block)."""
    out = np.asarray(block, dtype=float)
    if out.base is None and out.flags.writeable and out.flags.owndata:
        return out
    return np.array(out)  # a view of someone's memory (a stored G, a tensor): copied


def class_block_leftover(operator, L, members, origin, *, spectral=True, budget=DEFAULT_BUDGET):
    """Frobenius (Lemma 1b) and spectral (Lemma 1c) bounds on ``||D_k||``, one class-block pass.
    Returns ``(frobenius, spectral, cross)``: the bounds (K,), rounding allowances included, and per
    class ``(Z_k, a_k)`` with ``Z_k + a_k I >= C_k C_k^T`` (Lemma 2'') where the block was kept,
    else None."""
    with one_blas_thread():  # small eigenproblems: a second BLAS thread under load costs 100x
        return _class_block_leftover(operator, L, members, origin, spectral, budget)


def _class_block_leftover(operator, L, members, origin, spectral, budget):
    m = L.shape[1]
    # Slabs of a class block's rows: a capability of the operator, checked once.
    rows_of = operator.class_gram_rows if operator.makes_class_gram_rows else None
    frob = np.empty(len(members))
    spec = np.full(len(members), math.inf)
    cross = [None] * len(members)
    for k, idx in enumerate(members):
        idx = np.asarray(idx)
        n = idx.size
        keep = spectral and 8 * n * n <= budget.spectral_max_class_bytes
        # members(k) is class_gram's row order (catdask.core.classes.ClassIndex.members)
        own = k if np.array_equal(idx, np.asarray(operator.classes.members(k))) else None
        Delta, total, gmax = _class_block(operator, L, idx, keep, budget, rows_of, own)
        entry = 4.0 * (m + 2) * _EPS * gmax  # rounding of one entry G_ij - L_i . L_j
        frob[k] = math.sqrt(total) + n * entry  # ||error||_2 <= ||error||_F <= n e
        if keep and n:
            M, err = _centred(Delta, origin, entry)
            spec[k] = max(float(verified_top(n, matrix=M)[0]), 0.0) + err
            cross[k] = _cross(L[idx], M, err)
    return frob, spec, cross


def _centred(Delta, origin, entry):
    """``E Delta E`` from the computed ``Delta`` and a bound on its distance (spectral norm)
    from ``E Delta_true E``."""
    n = Delta.shape[0]
    M = _symmetrise(Delta)  # in place: the block is the largest array of the test
    err = n * entry
    if origin == "class":
        top = float(np.max(np.abs(M)))
        row = M.mean(axis=1)
        M -= row[:, None]
        M -= row[None, :]
        M += float(row.mean())
        M = _symmetrise(M)
        err += n * 4.0 * (n + 4) * _EPS * top
    return M, err


def _symmetrise(M, tile=512):
    """``(M + M^T) / 2`` in place, tile pair by tile pair: each entry is ``(M_ij + M_ji) / 2``
    as in ``M += M.T.copy(); M *= 0.5``, without that copy of the whole block (blobs
    N = 20,000: 1.75 s of CPU for five 4,000 x 4,000 blocks, a 128 MB temporary each)."""
    n = M.shape[0]
    for a in range(0, n, tile):
        for b in range(a, n, tile):
            S = M[a : a + tile, b : b + tile] + M[b : b + tile, a : a + tile].T
            S *= 0.5
            M[a : a + tile, b : b + tile] = S
            M[b : b + tile, a : a + tile] = S.T
    return M


def _cross(Lk, M, err):
    """``Z = L_k^T E Delta E L_k`` (``= C_k C_k^T`` in S's coordinates, docs/design.md §4c)
    and an allowance ``a`` with ``C_k C_k^T <= Z + a I``."""
    n = M.shape[0]
    lf2 = float(np.einsum("ij,ij->", Lk, Lk))
    Z = sym(Lk.T @ (M @ Lk))
    gamma = 2.0 * (n + 2) * _EPS / (1.0 - 2.0 * (n + 2) * _EPS)
    a = lf2 * err + gamma * float(np.linalg.norm(M)) * lf2
    return Z, 1.01 * a
