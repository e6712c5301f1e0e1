"""The paper's eight UCI data sets as ``(X, y)`` arrays, for the evaluation protocol.

:func:`load_xy` reads them through the catalog (:mod:`catdask.catalog`), from the original files
checked against their sha256; a data set whose files are not there raises
:class:`FileNotFoundError` saying what was looked for, so callers skip it with a message.
The ``evaluate`` flow reads the same data sets from the zarr store instead.
"""

from __future__ import annotations

import numpy as np

__all__ = ["PAPER_DATASETS", "load_xy"]

#: The data sets of the paper's Tables 1-3, in the paper's row order.
PAPER_DATASETS = (
    "vehicle",
    "wine",
    "iris",
    "seeds",
    "thyroid",
    "satellite",
    "segmentation",
    "vertebral",
)


def load_xy(name, source_dir=None):
    """Features and labels of one of the paper's data sets.

    Parameters
    ----------
    name : str
        One of :data:`PAPER_DATASETS` (case-insensitive).
    source_dir : path, optional
        Folder with the original files (default: the catalog's search path).

    Returns
    -------
    X : ndarray of shape (n_samples, n_features), float64
    y : ndarray of shape (n_samples,)
        Labels as in the source (integers, or strings for vehicle and segmentation).

    Raises
    ------
    FileNotFoundError
        The data set's files are not available locally (``SourceNotFoundError``).
    ValueError
        ``name`` is not one of the paper's data sets.
    """
    from ..catalog import get_entry, locate_sources, parse_dataset

    key = name.lower()
    if key not in PAPER_DATASETS:
        raise ValueError(f"Unknown data set {name!r}; the paper's are {list(PAPER_DATASETS)}.")
    entry = get_entry(key)
    paths = None if entry.kind == "sklearn" else locate_sources(entry, source_dir)
    X, y, _, _ = parse_dataset(entry, paths)
    return np.asarray(X, dtype=float), np.asarray(y)
