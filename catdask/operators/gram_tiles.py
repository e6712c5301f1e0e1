"""Square tiles of G's upper triangle: the recompute-mode products of a built-in kernel."""

from __future__ import annotations

import numpy as np

from .blocks import column_blocks


def symmetric_tile_pairs(N, tile):
    """The tiles ``(a, b, c, d)`` (rows a:b, columns c:d, a <= c) of G's upper triangle."""
    bounds = column_blocks(N, int(tile))
    pairs = [(*bounds[i], *bounds[j]) for i in range(len(bounds)) for j in range(i, len(bounds))]
    return np.asarray(pairs, dtype=np.int64).reshape(-1, 4)


def class_diagonal_tile_pairs(offsets, tile):
    """The upper-triangle tiles of the class blocks ``G[C_k, C_k]`` only (sorted positions)."""
    parts = [symmetric_tile_pairs(int(b) - int(a), tile) + int(a)
             for a, b in zip(offsets[:-1], offsets[1:]) if b > a]
    return np.concatenate(parts) if parts else np.zeros((0, 4), dtype=np.int64)


def _class_ranges(offsets, a, b):
    """``(k, s0, s1)`` for every class k whose sorted rows overlap ``a:b``."""
    return [(k, max(a, offsets[k]), min(b, offsets[k + 1])) for k in range(len(offsets) - 1)
            if min(b, offsets[k + 1]) > max(a, offsets[k])]


def gram_symmetric_class_product(left, right, pairs, offsets, zt, kernel):
    """The contribution of the tiles ``pairs`` to ``G Z``: a part ``(lo, hi, head, k0, tail)`` of
    the (K, N, R) sum, in the tile dtype (:func:`add_class_product_part` adds it up)."""
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
    """The tiles ``pairs``' share of G's row sums, diagonal and squared Frobenius norm."""
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
