"""Ingest: original files (or scikit-learn's bundled sets) -> validated zarr data set."""

from __future__ import annotations

import dataclasses

import numpy as np

from ..catalog import get_entry, obtain_sources, parse_dataset, parse_table
from ..catalog.sources import DOWNLOAD_CACHE_DIR
from ..core.validation import check_value_range
from ..names import validate_name
from ..store import write_dataset
from ..store.root import open_store


def _report(info, source):
    out = {k: v for k, v in dataclasses.asdict(info).items() if k != "path"}
    out["path"] = str(info.path)
    out["source"] = source
    return out


def _check_arithmetic_range(X):
    """Refuse values whose squares overflow float64 (near 1e308) before anything is stored:
    stored, they failed ``train`` ~10 s later with a wrong reason ("no variation")."""
    X = np.asarray(X)
    if X.size and X.dtype.kind in "biuf":
        check_value_range(float(np.max(np.abs(X))), *X.shape, squares_only=True)


def ingest_dataset(name, store=None, *, source_dir=None, allow_download=False, cache_dir=None,
                   replace=False):
    """Ingest one catalog data set into the store; a no-op when the content is unchanged.

    Returns
    -------
    dict
        ``name``, ``n_samples``, ``n_features``, ``n_classes``, ``content_sha256``,
        ``written`` (False when identical content was already stored), ``path``, ``source``.
    """
    entry = get_entry(name)
    root = open_store(store)
    paths = None
    if entry.kind != "sklearn":
        paths = obtain_sources(
            entry, source_dir, cache_dir=cache_dir or root.local_folder / DOWNLOAD_CACHE_DIR,
            allow_download=allow_download,
        )
    X, y, label_names, provenance = parse_dataset(entry, paths)
    _check_arithmetic_range(X)
    info = write_dataset(root, entry.name, X, y, label_names=label_names, attrs=provenance,
                         replace=replace)
    return _report(info, "sklearn" if paths is None else [str(p) for p in paths])


def ingest_file(path, name, label_column, store=None, *, delimiter=None, header="infer",
                feature_columns=None, replace=False):
    """Ingest any CSV / whitespace table with a named (or indexed) label column, parsed by
    :func:`catdask.catalog.parse_table` (``feature_columns``: names or indices; default every
    column but the label)."""
    name = validate_name(name, kind="data set")
    X, y, label_names, provenance = parse_table(path, label_column, delimiter=delimiter,
                                                header=header, feature_columns=feature_columns)
    _check_arithmetic_range(X)
    info = write_dataset(open_store(store), name, X, y, label_names=label_names,
                         attrs=provenance, replace=replace)
    return _report(info, str(path))
