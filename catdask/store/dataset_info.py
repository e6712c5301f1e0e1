"""What a listing or a write says about a stored data set (:class:`DatasetInfo`)."""

from __future__ import annotations

import dataclasses
from pathlib import Path


@dataclasses.dataclass(frozen=True)
class DatasetInfo:
    """Summary of a stored data set (of its current snapshot).

    Attributes
    ----------
    path : Path or str
        The snapshot's folder in a local store, else its URL (``s3://...``).
    written : bool
        True when this call wrote the data (``write_dataset`` only); False when identical
        content was already stored (current, or in another snapshot of the name that the
        pointer now names again), and in listings.
    replaced : bool
        True when ``write_dataset`` replaced different content stored under the same name
        (by a new snapshot, or by pointing at a stored one that holds the new content).
    problem : str or None
        Set by :func:`~catdask.store.datasets.list_datasets` for an entry whose metadata cannot
        be read.
    snapshot : str or None
        Id of the snapshot (``s<N>``).
    """

    name: str
    path: Path | str
    n_samples: int | None
    n_features: int | None
    n_classes: int | None
    content_sha256: str | None
    created: str | None = None
    written: bool = False
    replaced: bool = False
    problem: str | None = None
    snapshot: str | None = None


def info_from_attrs(name, path, attrs, *, problem=None, snapshot=None, **flags):
    """A :class:`DatasetInfo` from a snapshot's attributes (missing values become None)."""
    attrs = attrs or {}

    def get(key, typ):
        v = attrs.get(key)
        return v if isinstance(v, typ) and not isinstance(v, bool) else None

    return DatasetInfo(
        name,
        path,
        get("n_samples", int),
        get("n_features", int),
        get("n_classes", int),
        get("content_sha256", str),
        get("created", str),
        problem=problem,
        snapshot=snapshot,
        **flags,
    )
