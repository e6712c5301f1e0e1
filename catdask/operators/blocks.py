"""The heavy products on one block of rows: every formula of the operator layer, once.

Every heavy product of an iteration is a sum (or a concatenation) over row blocks. The
in-memory operators (:mod:`.in_memory`) call these functions in a loop over blocks; the Dask
operators (:mod:`.dask_data`, :mod:`.dask_gram`) put the same functions into a graph and
combine their small results. The functions know nothing about Dask, which keeps them testable
on their own and identical on any scheduler.

Linear blocks receive ``x`` (n_b, D) in the stored dtype (float32 is fine: it is promoted to
float64 here, docs/design.md §3c) and the block's class codes ``c`` (n_b,); rows already sorted
by class are sliced, not gathered. Gram blocks receive the whole training matrix ``X`` sorted by
class (N x D is small next to N x N) and a row range. The recompute-mode product ``G Z`` of a
built-in kernel instead works on square tiles of the upper triangle
(:func:`gram_symmetric_class_product`): each off-diagonal tile is evaluated once, in float32 or
float64, and serves both ``G[I, J] Z_J`` and ``G[J, I] Z_I``.
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "cross_product",
    "class_segments",
    "block_class_stats",
    "combine_class_stats",
    "class_second_moments",
    "block_own_projections",
    "block_weighted_sums",
    "sum_arrays",
    "gram_class_product",
    "gram_class_product_by_rows",
    "gram_matmul",
    "gram_moments",
    "gram_rows",
    "gram_rows_to_zarr",
    "gram_range_matmul",
    "gram_submatrix",
    "symmetric_tile_pairs",
    "gram_symmetric_class_product",
    "add_class_product_part",
    "class_diagonal_tile_pairs",
    "gram_symmetric_moments",
]


# ---------------------------------------------------------------------------------- linear
def cross_product(a):
    """``a^T a`` for a float64 matrix ``a`` (n, D), by BLAS ``syrk`` (half the flops of
    ``a.T @ a``), mirrored to a full symmetric (D, D) array (exactly symmetric)."""
    # Imported here: a worker that runs only Gram tiles never loads SciPy's linear algebra
    # (43 modules, 6 MiB of RSS in each worker process; issue 27).
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
    """Per-class count, mean and scatter ``M2 = sum (x - mean)(x - mean)^T`` of one block.

    Scatter about the block's own class means (not about zero) so that combining blocks
    (:func:`combine_class_stats`) never subtracts large numbers (docs/design.md §3c). Also reports
    whether every value is finite (input validation folded into the one pass).
    """
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
    """Merge per-class statistics of disjoint blocks (Chan, Golub & LeVeque's pairwise update).

    ``M2 = M2_a + M2_b + n_a n_b / n * d d^T`` with ``d = mean_b - mean_a``: no cancellation.
    """
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
def _column_blocks(N, col_block):
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
    """Rows ``rows`` of ``B = G Z`` for every restart, transposed: ``B^T`` (R, K, n_rows).

    ``X`` and ``z`` (R, N) are sorted by class, class k occupying ``offsets[k]:offsets[k+1]``.
    Z has one non-zero per row, so only the class-k columns of G feed column k of G Z
    (docs/design.md §3): each Gram entry is used once, and the R restarts share it.

    The result is C-contiguous, the layout the W-step reads, and a Dask worker sends it as
    it is (a strided (R, n_rows, K) view would be copied to serialise it, then again on the
    driver). A worker-memory cache block (:func:`gram_rows`, Fortran order) goes to
    :func:`gram_class_product_by_rows` through its transpose, whose rows are contiguous.
    """
    if isinstance(cache, np.ndarray) and cache.flags.f_contiguous:
        return gram_class_product_by_rows(cache.T, offsets, z)
    a, b = rows
    R, N = z.shape
    K = len(offsets) - 1
    out = np.zeros((R, K, b - a))
    cache = _open_cache(cache)
    for c0, c1 in _column_blocks(N, col_block):
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
    """Rows ``I`` of ``B = G Z``, transposed (R, K, n_I), from ``GT = G[I, :]^T`` (N, n_I),
    reading contiguous rows only.

    Column k of ``B[I]`` is ``G[I, C_k] z_k = (z_k^T GT[C_k, :])^T``: rows of ``GT`` instead
    of strided columns of ``G[I, :]`` (measured 1.2x faster for one restart, 1.6x for 8 on a
    stored G; 0.85x the time for 8 restarts on a 4,000-row cache block). A stored symmetric
    G is its own ``GT`` (all rows, ``I`` = everything). The rows of a class go in slabs of
    about :data:`_SLAB_ENTRIES` entries: with 8 restarts one product over a whole class ran
    1.2-1.3x slower at N = 8,000-12,000 (BLAS packs the whole operand), with one restart it
    is the same.

    Each class's product is written straight into its own contiguous row of the (R, K, n_I)
    result, with no accumulator copied into a strided column (measured 0.92x the time at
    N = 2,000-4,000, the same at 8,000-12,000), and the W-step's ``S^{-1/2} B^T`` then reads
    contiguous rows.
    """
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
    for c0, c1 in _column_blocks(V.shape[0], col_block):
        out += _gram_block(X, rows, (c0, c1), kernel, cache) @ V[c0:c1]
    return out


def gram_moments(X, rows, kernel, col_block, cache=None):
    """One sweep over G's rows ``rows``: row sums ``G 1``, the diagonal and ``||G_rows||_F^2``.

    These feed the centred operator (``g = G 1``) and the CAS scale (``tr G``, ``||G||_F``),
    so a fit spends one Gram pass on them, not three.
    """
    a, b = rows
    sums = np.zeros(b - a)
    diag = np.zeros(b - a)
    fro2 = 0.0
    cache = _open_cache(cache)
    for c0, c1 in _column_blocks(X.shape[0], col_block):
        G = _gram_block(X, rows, (c0, c1), kernel, cache)
        sums += G.sum(axis=1)
        fro2 += float(np.einsum("ij,ij->", G, G))
        s0, s1 = max(a, c0), min(b, c1)
        if s1 > s0:
            diag[s0 - a : s1 - a] = np.diagonal(G[s0 - a : s1 - a, s0 - c0 : s1 - c0])
    return sums, diag, fro2


def gram_rows(X, rows, kernel, dtype, col_block):
    """The row block ``G[rows, :]`` in ``dtype``, in Fortran order (the in-memory Gram cache).

    Fortran order makes the block's transpose C-contiguous, so ``G Z`` reads it by rows
    (:func:`gram_class_product_by_rows`); no symmetry of the kernel is assumed.
    """
    a, b = rows
    N = X.shape[0]
    out = np.empty((b - a, N), dtype=dtype, order="F")
    for c0, c1 in _column_blocks(N, col_block):
        out[:, c0:c1] = kernel(X[a:b], X[c0:c1])
    return out


def gram_rows_to_zarr(X, rows, kernel, path, col_block):
    """Write ``G[rows, :]`` into the zarr Gram cache at ``path``; returns ``rows``.

    Row blocks are aligned with the store's chunks, so concurrent writers never share a chunk
    and each chunk write is atomic (docs/stack.md, zarr 3): no lock needed.
    """
    import zarr

    arr = zarr.open_array(path, mode="r+")
    a, b = rows
    for c0, c1 in _column_blocks(X.shape[0], col_block):
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
    """``G[rows, cols]`` for two index ranges (class blocks, for the decoupled start)."""
    return kernel(X[rows[0] : rows[1]], X[cols[0] : cols[1]])


# ------------------------------------------------------------------ symmetric Gram tiles
def symmetric_tile_pairs(N, tile):
    """The tiles ``(a, b, c, d)`` (rows a:b, columns c:d, a <= c) of G's upper triangle.

    Returned as an int array of shape (n_pairs, 4), ordered by row tile, so that a contiguous
    run of pairs keeps one row panel in cache and a task's argument is one small array.
    """
    bounds = _column_blocks(N, int(tile))
    pairs = [(*bounds[i], *bounds[j]) for i in range(len(bounds)) for j in range(i, len(bounds))]
    return np.asarray(pairs, dtype=np.int64).reshape(-1, 4)


def class_diagonal_tile_pairs(offsets, tile):
    """The upper-triangle tiles of the class blocks ``G[C_k, C_k]`` only (sorted positions).

    A pass over them with :func:`gram_symmetric_class_product` gives the block-diagonal
    product ``diag(G_11, ..., G_KK) V`` for all classes at once (the decoupled start's Lanczos,
    docs/design.md §3c), at ``sum n_k^2 / 2`` kernel entries instead of ``N^2 / 2``.
    """
    parts = [symmetric_tile_pairs(int(b) - int(a), tile) + int(a)
             for a, b in zip(offsets[:-1], offsets[1:]) if b > a]
    return np.concatenate(parts) if parts else np.zeros((0, 4), dtype=np.int64)


def _class_ranges(offsets, a, b):
    """``(k, s0, s1)`` for every class k whose sorted rows overlap ``a:b``."""
    return [(k, max(a, offsets[k]), min(b, offsets[k + 1])) for k in range(len(offsets) - 1)
            if min(b, offsets[k + 1]) > max(a, offsets[k])]


def gram_symmetric_class_product(left, right, pairs, offsets, zt, kernel):
    """The contribution of the tiles ``pairs`` to ``G Z``: a part ``(lo, hi, head, k0, tail)``
    of the (K, N, R) sum, in the tile dtype (:func:`add_class_product_part` adds it up).

    ``left``, ``right`` (N, D') are the kernel's tile factors
    (:meth:`catdask.kernels.Kernel.tile_factors`) in the tile dtype, ``zt`` (N, R) the restarts'
    z in the same dtype, rows sorted by class (class k at ``offsets[k]:offsets[k+1]``). Each tile
    ``T = G[I, J]`` is one BLAS product plus the kernel's in-place finish (clip and ``exp`` for
    RBF); an off-diagonal tile then adds ``T Z_J`` to rows I and ``T^T Z_I`` to rows J (G is
    symmetric), so the tiles of the upper triangle give all of ``G Z``. Z has one non-zero per
    row, so column k of ``G Z`` only reads the class-k part of a tile (docs/design.md §3). A
    tile's products are formed in the tile dtype and accumulated in float64 across tiles.

    What the part holds: the tasks' row tiles span rows ``lo:hi`` (upper-triangle tiles touch
    no row above ``lo``); those rows get every class (``head``, (K, hi - lo, R)). Rows ``hi:``
    get only ``T^T Z_I`` with I among the task's row tiles, so only the classes ``k0:k0 +
    len(tail)`` present in rows ``lo:hi`` (``tail``, one or two of K classes, sorted rows): the
    rest of that band is exact zeros. The parts travel to the driver, which adds them as they
    arrive; the whole band (K, N - lo, R) made 56 MB per pass on 16 workers at N = 50,000, K = 5
    (benchmarks/pass_overhead.py), mostly zeros, all of it received and added after the last
    tile task (issue 27). A float32 part adds one float32 rounding of a sum that float32 tiles
    made already; float64 passes stay float64.
    """
    N, R = zt.shape
    K = len(offsets) - 1
    pairs = np.asarray(pairs).reshape(-1, 4)
    if pairs.shape[0] == 0:
        return N, N, np.zeros((K, 0, R), dtype=zt.dtype), 0, np.zeros((0, 0, R), zt.dtype)
    lo, hi = int(pairs[:, 0].min()), int(pairs[:, 1].max())
    own = _class_ranges(offsets, lo, hi)
    k0, k1 = own[0][0], own[-1][0] + 1
    head = np.zeros((K, hi - lo, R))
    tail = np.zeros((k1 - k0, N - hi, R))
    spans = pairs[:, 1::2] - pairs[:, 0::2]
    buf = np.empty((int(spans[:, 0].max()), int(spans[:, 1].max())), dtype=left.dtype)
    # Products into one reused buffer, class ranges once per tile bound (0.95-1.0x per entry).
    part = np.empty((max(buf.shape), R), dtype=np.result_type(buf, zt))
    bounds = set(map(tuple, pairs[:, 0:2].tolist())) | set(map(tuple, pairs[:, 2:4].tolist()))
    ranges = {(a, b): _class_ranges(offsets, a, b) for a, b in bounds}
    for a, b, c, d in pairs.tolist():
        T = buf[: b - a, : d - c]
        np.matmul(left[a:b], right[c:d].T, out=T)
        kernel.finish_tile(T, clip=a == c)  # x = y pairs lie on diagonal tiles only
        rows = part[: b - a]
        for k, s0, s1 in ranges[c, d]:
            np.matmul(T[:, s0 - c : s1 - c], zt[s0:s1], out=rows)
            head[k, a - lo : b - lo] += rows
        if c != a:
            cols = part[: d - c]
            split = min(max(hi, c), d)  # rows c:split in the head, split:d in the tail
            for k, s0, s1 in ranges[a, b]:
                np.matmul(T[s0 - a : s1 - a].T, zt[s0:s1], out=cols)
                if c < hi:
                    head[k, c - lo : split - lo] += cols[: split - c]
                if d > hi:
                    tail[k - k0, split - hi : d - hi] += cols[split - c :]
    return lo, hi, head.astype(zt.dtype, copy=False), k0, tail.astype(zt.dtype, copy=False)


def add_class_product_part(acc, part):
    """Add a part of :func:`gram_symmetric_class_product` into ``acc`` (K, N, R) float64."""
    lo, hi, head, k0, tail = part
    acc[:, lo:hi] += head
    if tail.size:
        acc[k0 : k0 + tail.shape[0], hi:] += tail
    return acc


def gram_symmetric_moments(left, right, pairs, kernel):
    """The tiles ``pairs``' share of G's row sums, diagonal and squared Frobenius norm.

    Same tiles as :func:`gram_symmetric_class_product` (each off-diagonal tile evaluated once,
    counted for ``G[I, J]`` and ``G[J, I]``), in the factors' dtype, accumulated in float64.
    Returns one float64 array ``[row sums (N), diagonal (N), ||G||_F^2 share]`` of length
    ``2 N + 1``, so that partial results of several tasks simply add up.
    """
    N = left.shape[0]
    out = np.zeros(2 * N + 1)
    sums, diag = out[:N], out[N : 2 * N]
    pairs = np.asarray(pairs).reshape(-1, 4)
    if pairs.shape[0] == 0:
        return out
    spans = pairs[:, 1::2] - pairs[:, 0::2]
    buf = np.empty((int(spans[:, 0].max()), int(spans[:, 1].max())), dtype=left.dtype)
    # float64 tiles (the centring pass): sums by gemv against ones, the norm by a dot (one
    # core, N = 8,192: 1.4 -> 0.7 ns per entry); float32 tiles sum in float64 through numpy.
    blas = left.dtype == np.float64
    ones = np.ones(max(buf.shape), dtype=left.dtype)
    fro2 = 0.0
    for a, b, c, d in pairs.tolist():
        T = buf[: b - a, : d - c]
        np.matmul(left[a:b], right[c:d].T, out=T)
        kernel.finish_tile(T, clip=a == c)  # x = y pairs lie on diagonal tiles only
        if blas:
            sums[a:b] += T @ ones[: d - c]
            flat = T.reshape(-1)  # a view when the tile fills buf's rows, else a copy
            t2 = float(np.dot(flat, flat))
        else:
            sums[a:b] += T.sum(axis=1, dtype=np.float64)
            t2 = float(np.einsum("ij,ij->", T, T, dtype=np.float64))
        if c != a:
            sums[c:d] += ones[: b - a] @ T if blas else T.sum(axis=0, dtype=np.float64)
            fro2 += 2.0 * t2
        else:
            diag[a:b] = np.diagonal(T)
            fro2 += t2
    out[2 * N] = fro2
    return out
