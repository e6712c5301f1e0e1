"""The heavy products on one block of rows: every formula of the operator layer, once."""

from __future__ import annotations

import numpy as np


# ---------------------------------------------------------------------------------- linear
def cross_product(a):
    """``a^T a`` for a float64 matrix ``a`` (n, D), by BLAS ``syrk`` (half the flops of
    ``a.T @ a``), mirrored to a full symmetric (D, D) array (exactly symmetric)."""
    # Imported here: a worker that runs only Gram tiles never loads SciPy's linear algebra.
    from scipy.linalg.blas import dsyrk

    a = np.asarray(a, dtype=np.float64)
    if a.shape[0] == 0 or a.shape[1] == 0:
        return np.zeros((a.shape[1], a.shape[1]))
    # BLAS reads Fortran order: a C-ordered a is read as a.T (no copy), an F-ordered one as is.
    if a.flags.f_contiguous:
        upper = dsyrk(1.0, a, trans=1)
    else:
        upper = dsyrk(1.0, np.ascontiguousarray(a).T, trans=0)
    iu = np.triu_indices_from(upper, 1)
    upper.T[iu] = upper[iu]
    return upper


def class_segments(c, n_classes):
    """Stable sort of a block's codes: ``order`` and the offsets of each class's segment."""
    order = np.argsort(c, kind="stable")
    offsets = np.searchsorted(c[order], np.arange(n_classes + 1))
    return order, offsets


def _class_blocks(x, c, n_classes, center=None):
    """Yield ``(k, rows, seg)``: the block's class-k rows (positions in the block) and those
    rows in float64, minus ``center``. Rows are sorted in the stored dtype (float32 stays
    float32 until a class segment is promoted), so a task holds one float64 segment at a time.
    ``seg`` may be a view of ``x``: callers never write into it.
    """
    c = np.asarray(c)
    if c.size == 0 or bool(np.all(c[1:] >= c[:-1])):  # sorted by class: slices, no copy
        order, off = None, np.searchsorted(c, np.arange(n_classes + 1))
        xs = np.asarray(x)
    else:
        order, off = class_segments(c, n_classes)
        xs = np.asarray(x)[order]
    for k in range(n_classes):
        a, b = int(off[k]), int(off[k + 1])
        if b > a:
            if center is None:
                seg = np.asarray(xs[a:b], dtype=np.float64)
            else:
                seg = np.subtract(xs[a:b], center, dtype=np.float64)
            yield k, (slice(a, b) if order is None else order[a:b]), seg


def block_class_stats(x, c, n_classes):
    """Per-class count, mean and scatter ``M2 = sum (x - mean)(x - mean)^T`` of one block."""
    D = x.shape[1]
    n = np.zeros(n_classes)
    mean = np.zeros((n_classes, D))
    M2 = np.zeros((n_classes, D, D))
    finite = True
    for k, rows, seg in _class_blocks(x, c, n_classes):
        finite = finite and bool(np.isfinite(seg).all())
        n[k] = seg.shape[0]
        mean[k] = seg.mean(axis=0)
        M2[k] = cross_product(seg - mean[k])
    return {"n": n, "mean": mean, "M2": M2, "finite": finite}


def combine_class_stats(*parts):
    """Merge per-class statistics of disjoint blocks (Chan, Golub & LeVeque's pairwise update)."""
    out = {k: np.array(v, copy=True) if k != "finite" else v for k, v in parts[0].items()}
    for p in parts[1:]:
        na, nb = out["n"], p["n"]
        n = na + nb
        safe = np.where(n > 0, n, 1.0)
        d = p["mean"] - out["mean"]
        out["mean"] = out["mean"] + d * (nb / safe)[:, None]
        out["M2"] = out["M2"] + p["M2"] + (na * nb / safe)[:, None, None] * (
            d[:, :, None] * d[:, None, :]
        )
        out["n"] = n
        out["finite"] = out["finite"] and p["finite"]
    return out


def class_second_moments(stats, center, origin):
    """The class matrices R_k (K, D, D) from :func:`block_class_stats`: the scatter about each
    class mean (``origin="class"``, paper eq. (43)) or the second moment about ``center``
    (``origin="global"``, docs/design.md §3b), ``M2 + n_k d_k d_k^T`` with ``d_k = mean_k - x0``.
    """
    out = np.array(stats["M2"], dtype=np.float64, copy=True)
    if origin == "class":
        return out
    d = stats["mean"] - center
    for k in range(out.shape[0]):  # in place: no (K, D, D) temporaries (49 MB each at D = 784)
        out[k] += stats["n"][k] * np.outer(d[k], d[k])
    return out


def block_own_projections(x, c, center, W):
    """``u[r, i] = w_{y_i}^T (x_i - x0)`` for the block's rows; W has shape (R, D, K)."""
    R, _, K = W.shape
    u = np.empty((R, x.shape[0]))
    for k, rows, seg in _class_blocks(x, c, K, center):
        u[:, rows] = (seg @ W[:, :, k].T).T
    return u


def block_weighted_sums(x, c, center, z, n_classes):
    """``Y[r, :, k] = sum_{i in C_k, i in block} z[r, i] (x_i - x0)`` (paper eq. (17))."""
    Y = np.zeros((z.shape[0], x.shape[1], n_classes))
    for k, rows, seg in _class_blocks(x, c, n_classes, center):
        Y[:, :, k] = (seg.T @ z[:, rows].T).T
    return Y


def sum_arrays(*parts):
    """Tree-reduction node: elementwise sum of equally shaped arrays."""
    out = np.array(parts[0], dtype=np.float64, copy=True)
    for p in parts[1:]:
        out += p
    return out


# ---------------------------------------------------------------------------------- Gram
def column_blocks(N, col_block):
    """``(start, stop)`` of the consecutive ranges of ``col_block`` indices that cover ``0:N``."""
    return [(a, min(a + col_block, N)) for a in range(0, N, col_block)]


def _gram_block(X, rows, cols, kernel, cache):
    """``G[rows, cols]`` in float64: read from a cached row block or recomputed."""
    if cache is None:
        return kernel(X[rows[0] : rows[1]], X[cols[0] : cols[1]])
    return np.asarray(_read_cache(cache, rows, cols), dtype=np.float64)


def _read_cache(cache, rows, cols):
    """``cache`` is the row block itself (in memory) or the whole zarr Gram array."""
    if isinstance(cache, np.ndarray):
        return cache[:, cols[0] : cols[1]]
    return cache[rows[0] : rows[1], cols[0] : cols[1]]


def _open_cache(cache):
    if isinstance(cache, str):  # a zarr store path: open once per task
        import zarr

        return zarr.open_array(cache, mode="r")
    return cache


def gram_class_product(X, rows, offsets, z, kernel, col_block, cache=None):
    """Rows ``rows`` of ``B = G Z`` for every restart, transposed: ``B^T`` (R, K, n_rows)."""
    if isinstance(cache, np.ndarray) and cache.flags.f_contiguous:
        return gram_class_product_by_rows(cache.T, offsets, z)
    a, b = rows
    R, N = z.shape
    K = len(offsets) - 1
    out = np.zeros((R, K, b - a))
    cache = _open_cache(cache)
    for c0, c1 in column_blocks(N, col_block):
        G = _gram_block(X, rows, (c0, c1), kernel, cache)
        for k in range(K):
            s0, s1 = max(c0, offsets[k]), min(c1, offsets[k + 1])
            if s1 > s0:
                # (R, n) @ (n, rows): measured 1.5x faster for 8 restarts than the product
                # in the other orientation (a 4,000 x 8,000 block), the same for one.
                out[:, k] += z[:, s0:s1] @ G[:, s0 - c0 : s1 - c0].T
    return out


# Entries of G per slab of rows in :func:`gram_class_product_by_rows` (32 MiB of float64).
_SLAB_ENTRIES = 4 * 1024**2


def gram_class_product_by_rows(GT, offsets, z):
    """Rows ``I`` of ``B = G Z``, transposed (R, K, n_I), from ``GT = G[I, :]^T`` (N, n_I)."""
    R = z.shape[0]
    n_out = GT.shape[1]
    K = len(offsets) - 1
    slab = int(np.clip(_SLAB_ENTRIES // max(n_out, 1), 64, 512))
    out = np.empty((R, K, n_out))
    for k in range(K):
        a, b = offsets[k], offsets[k + 1]
        acc = out[:, k]
        first = min(a + slab, b)
        np.matmul(z[:, a:first], GT[a:first], out=acc)  # an empty class gives zeros
        for r in range(first, b, slab):
            acc += z[:, r : min(r + slab, b)] @ GT[r : min(r + slab, b)]
    return out


def gram_matmul(X, rows, V, kernel, col_block, cache=None):
    """Rows ``rows`` of ``G V`` for a dense (N, m) V."""
    a, b = rows
    out = np.zeros((b - a, V.shape[1]))
    cache = _open_cache(cache)
    for c0, c1 in column_blocks(V.shape[0], col_block):
        out += _gram_block(X, rows, (c0, c1), kernel, cache) @ V[c0:c1]
    return out


def gram_moments(X, rows, kernel, col_block, cache=None):
    """One sweep over G's rows ``rows``: row sums ``G 1``, the diagonal and ``||G_rows||_F^2``."""
    a, b = rows
    sums = np.zeros(b - a)
    diag = np.zeros(b - a)
    fro2 = 0.0
    cache = _open_cache(cache)
    for c0, c1 in column_blocks(X.shape[0], col_block):
        G = _gram_block(X, rows, (c0, c1), kernel, cache)
        sums += G.sum(axis=1)
        fro2 += float(np.einsum("ij,ij->", G, G))
        s0, s1 = max(a, c0), min(b, c1)
        if s1 > s0:
            diag[s0 - a : s1 - a] = np.diagonal(G[s0 - a : s1 - a, s0 - c0 : s1 - c0])
    return sums, diag, fro2


def gram_rows(X, rows, kernel, dtype, col_block):
    """The row block ``G[rows, :]`` in ``dtype``, in Fortran order (the in-memory Gram cache)."""
    a, b = rows
    N = X.shape[0]
    out = np.empty((b - a, N), dtype=dtype, order="F")
    for c0, c1 in column_blocks(N, col_block):
        out[:, c0:c1] = kernel(X[a:b], X[c0:c1])
    return out


def gram_rows_to_zarr(X, rows, kernel, path, col_block):
    """Write ``G[rows, :]`` into the zarr Gram cache at ``path``; returns ``rows``."""
    import zarr

    arr = zarr.open_array(path, mode="r+")
    a, b = rows
    for c0, c1 in column_blocks(X.shape[0], col_block):
        arr[a:b, c0:c1] = kernel(X[a:b], X[c0:c1]).astype(arr.dtype, copy=False)
    return rows


def gram_range_matmul(X, rows, cols, V, kernel, col_block):
    """``G[rows, cols] @ V`` for index ranges, V of shape (cols[1] - cols[0], m)."""
    out = np.zeros((rows[1] - rows[0], V.shape[1]))
    for c0 in range(cols[0], cols[1], col_block):
        c1 = min(c0 + col_block, cols[1])
        out += kernel(X[rows[0] : rows[1]], X[c0:c1]) @ V[c0 - cols[0] : c1 - cols[0]]
    return out


def gram_submatrix(X, rows, cols, kernel):
    """``G[rows, cols]`` for a row range and columns ``cols``, a slice (class blocks, for the
    decoupled start) or an index array (the certificate's pivots)."""
    return kernel(X[rows[0] : rows[1]], X[cols])
