"""Per-class bookkeeping: which samples belong to which category axis."""

from __future__ import annotations

import numpy as np


class ClassIndex:
    """Class membership of N samples with labels coded ``0..K-1`` (``codes``, in
    ``range(n_classes)``)."""

    def __init__(self, codes, n_classes):
        codes = np.asarray(codes, dtype=np.intp)
        self.codes = codes
        self.n_classes = int(n_classes)
        self.counts = np.bincount(codes, minlength=self.n_classes)
        self.offsets = np.concatenate([[0], np.cumsum(self.counts)])
        is_sorted = codes.size == 0 or bool(np.all(codes[1:] >= codes[:-1]))
        self.order = None if is_sorted else np.argsort(codes, kind="stable")

    @property
    def n_samples(self):
        return self.codes.shape[0]

    def sort(self, v):
        """Reorder the last axis of ``v`` so that classes are contiguous."""
        return v if self.order is None else v[..., self.order]

    def sort_rows(self, X):
        """Reorder the first axis of ``X`` (one row per sample) so that classes are contiguous."""
        return X if self.order is None else X[self.order]

    def unsort(self, v, axis=-1):
        """Inverse of :meth:`sort` along ``axis``: sorted positions back to the caller's order."""
        if self.order is None:
            return v
        out = np.empty_like(v)
        idx = [slice(None)] * np.ndim(v)
        idx[axis] = self.order
        out[tuple(idx)] = v
        return out

    def sorted(self):
        """The same classes with the samples in sorted order (``order`` is None)."""
        return self if self.order is None else ClassIndex(self.codes[self.order], self.n_classes)

    def members(self, k):
        """Indices of class ``k``'s points, in the sorted order (``class_gram`` row order)."""
        a, b = int(self.offsets[k]), int(self.offsets[k + 1])
        return np.arange(a, b) if self.order is None else self.order[a:b]

    def segments(self):
        """``(k, start, stop)`` of each class in the sorted order."""
        return [(k, int(self.offsets[k]), int(self.offsets[k + 1])) for k in range(self.n_classes)]

    def sum(self, v):
        """Per-class sums over the last axis: ``(..., N) -> (..., K)``."""
        return np.add.reduceat(self.sort(v), self.offsets[:-1], axis=-1)

    def mean(self, v):
        """Per-class means over the last axis: ``(..., N) -> (..., K)``."""
        return self.sum(v) / self.counts

    def expand(self, per_class):
        """Broadcast a per-class value to every sample: ``(..., K) -> (..., N)``."""
        return np.take(per_class, self.codes, axis=-1)
