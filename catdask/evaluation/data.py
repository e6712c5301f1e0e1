"""The paper's eight UCI data sets as ``(X, y)`` arrays, for the evaluation protocol."""

from __future__ import annotations

import numpy as np

#: The data sets of the paper's Tables 1-3, in the paper's row order.
PAPER_DATASETS = ("vehicle", "wine", "iris", "seeds", "thyroid", "satellite", "segmentation",
                  "vertebral")


def load_xy(name, source_dir=None):
    """Features (float64) and labels (as in the source: integers, or strings for vehicle and
    segmentation) of the paper's data set ``name`` (one of :data:`PAPER_DATASETS`,
    case-insensitive), from ``source_dir`` (default: the catalog's search path). Raises
    ``FileNotFoundError`` when its files are not available locally, ``ValueError`` for another name.
    """
    from ..catalog import get_entry, locate_sources, parse_dataset

    key = name.lower()
    if key not in PAPER_DATASETS:
        raise ValueError(f"Unknown data set {name!r}; the paper's are {list(PAPER_DATASETS)}.")
    entry = get_entry(key)
    paths = None if entry.kind == "sklearn" else locate_sources(entry, source_dir)
    X, y, _, _ = parse_dataset(entry, paths)
    return np.asarray(X, dtype=float), np.asarray(y)
