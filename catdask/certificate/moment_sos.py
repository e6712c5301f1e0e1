"""The polynomial identity of the level-2 moment / sum-of-squares certificate, as sparse maps."""

from __future__ import annotations

import functools
import math
from collections import Counter

import numpy as np
import scipy.sparse as sp

# Name of the basis layout below; stored with a certificate so that a verifier refuses data
# written for another layout.
LAYOUT = "level2-parity-v2"


def block_sizes(K, r, anchor=None):
    """Sizes of the Gram blocks: ``[1, y_ki y_kj]`` (all classes; ``i < anchor`` when anchored)
    and ``[y_ki]`` per class."""
    a = r if anchor is None else int(anchor)
    per_class = r * (r + 1) // 2 - (r - a) * (r - a + 1) // 2
    return [1 + K * per_class] + [r] * K


def count_moments(K, r):
    """Even-parity monomials of degree <= 4 in K blocks of r variables."""
    pairs = r * (r + 1) // 2  # degree-2 monomials inside one block
    quads = math.comb(r + 3, 4)  # degree-4 monomials inside one block
    return 1 + K * pairs + K * quads + math.comb(K, 2) * pairs * pairs


class _Monomials:
    """Index of monomials (sorted tuples of variable numbers)."""

    def __init__(self):
        self.index = {(): 0}
        self.keys: list[tuple[int, ...]] = [()]

    def __call__(self, mono):
        key = tuple(sorted(mono))
        idx = self.index.get(key)
        if idx is None:
            idx = self.index[key] = len(self.keys)
            self.keys.append(key)
        return idx

    def __len__(self):
        return len(self.keys)


class Identity:
    """Sparse linear maps of the identity for K classes in r reduced dimensions: ``bases`` (the
    monomial vectors ``v_b`` block by block, :func:`block_sizes` order), ``n`` monomials, per block
    the monomial of each upper-triangle entry of ``Q_b`` (``gram_rows``) and its position in
    :meth:`triu` order (``gram_cols``), and ``multipliers`` (n, n_mult; column j the coefficients of
    ``h_j m_j``).
    """

    def __init__(self, K, r, anchor=None):
        self.K, self.r = int(K), int(r)
        self.anchor = r if anchor is None else int(anchor)
        monos = _Monomials()
        var = lambda k, i: k * r + i  # noqa: E731
        full_b0 = [()] + [(var(k, i), var(k, j)) for k in range(K) for i in range(r)
                          for j in range(i, r)]
        b0 = [()] + [(var(k, i), var(k, j)) for k in range(K) for i in range(self.anchor)
                     for j in range(i, r)]
        linear = [[(var(k, i),) for i in range(r)] for k in range(K)]
        # Cross blocks [y_ki y_lj] are left out: measured on wine, vehicle and segmentation
        # (class origin) they never changed the bound, and they cost most of the solve.
        self.bases = [b0] + linear
        self.gram_rows = []
        for basis in self.bases:
            s = len(basis)
            iu, ju = np.triu_indices(s)
            self.gram_rows.append(np.fromiter((monos(basis[i] + basis[j])
                                               for i, j in zip(iu, ju)), dtype=np.int64,
                                              count=len(iu)))
        rows, cols, vals, col = [], [], [], 0
        # h_kk = sum_i y_ki^2 - 1 times every parity-0 monomial of degree <= 2.
        for k in range(K):
            for m in full_b0:
                for i in range(r):
                    rows.append(monos(m + (var(k, i), var(k, i))))
                    cols.append(col)
                    vals.append(1.0)
                rows.append(monos(m))
                cols.append(col)
                vals.append(-1.0)
                col += 1
        # h_kl = sum_i y_ki y_li (k < l) times every monomial y_ka y_lb of the same parity.
        for k in range(K):
            for l in range(k + 1, K):
                for a in range(r):
                    for b in range(r):
                        for i in range(r):
                            rows.append(monos((var(k, a), var(l, b), var(k, i), var(l, i))))
                            cols.append(col)
                            vals.append(1.0)
                        col += 1
        self.n = len(monos)
        self.multipliers = sp.csr_matrix((vals, (rows, cols)), shape=(self.n, col))
        self._monos = monos
        self._groups = None
        # Each monomial's variables, padded with -1 (a variable whose value is 1).
        self._padded = np.full((self.n, 4), -1, dtype=np.int64)
        for idx, mono in enumerate(monos.keys):
            self._padded[idx, :len(mono)] = mono
        self._A = []
        for basis, grow in zip(self.bases, self.gram_rows):
            s = len(basis)
            iu, ju = np.triu_indices(s)
            weight = np.where(iu == ju, 1.0, 2.0)  # Q_ij and Q_ji both land on the monomial
            self._A.append(sp.csr_matrix((weight, (grow, np.arange(len(iu)))),
                                         shape=(self.n, len(iu))))

    @property
    def n_mult(self):
        return self.multipliers.shape[1]

    def sizes(self):
        return [len(b) for b in self.bases]

    def objective(self, A):
        """Coefficient vector of ``f(y) = 1/2 sum_k y_k^T A_k y_k`` (A of shape (K, r, r))."""
        f = np.zeros(self.n)
        r = self.r
        for k in range(self.K):
            for i in range(r):
                f[self._monos((k * r + i, k * r + i))] += 0.5 * A[k, i, i]
                for j in range(i + 1, r):
                    f[self._monos((k * r + i, k * r + j))] += 0.5 * (A[k, i, j] + A[k, j, i])
        return f

    def gram_sum(self, triu_blocks):
        """Coefficients of ``sum_b v_b^T Q_b v_b`` from each Q_b's upper triangle (triu order)."""
        return sum(A @ t for A, t in zip(self._A, triu_blocks))

    def gram_abs_sum(self, triu_blocks):
        """Same with absolute values (for rounding guards)."""
        return sum(abs(A) @ np.abs(t) for A, t in zip(self._A, triu_blocks))

    def groups(self):
        """(group id, weight) per monomial for the residual charge (docs/design.md 4b)."""
        if self._groups is not None:
            return self._groups
        r = self.r
        gid, weight = np.zeros(self.n, dtype=np.int64), np.ones(self.n)
        names: dict[tuple, int] = {}
        for idx, mono in enumerate(self._monos.keys):
            by_class: dict[int, list[int]] = {}
            for v in mono:
                by_class.setdefault(v // r, []).append(v % r)
            sig = tuple(sorted((k, len(ix)) for k, ix in by_class.items()))
            gid[idx] = names.setdefault(sig, len(names))
            w = 1.0
            for ix in by_class.values():
                w *= math.factorial(len(ix)) / math.prod(math.factorial(c)
                                                        for c in Counter(ix).values())
            weight[idx] = w
        gid.flags.writeable = weight.flags.writeable = False
        self._groups = (gid, weight)
        return self._groups

    def moment_vector(self, Y):
        """``y^alpha`` for every monomial at the point Y (r x K): the rank-one moments."""
        y = np.append(np.asarray(Y, dtype=float).T.ravel(), 1.0)  # y[-1] = 1: the padding
        return np.prod(y[self._padded], axis=1)


@functools.lru_cache(maxsize=4)
def identity(K, r, anchor=None):
    """The :class:`Identity` for ``(K, r, anchor)``, built once per process and shared (building it
    is a Python loop over every monomial). Callers must not modify it.
    """
    return Identity(K, r, anchor)
