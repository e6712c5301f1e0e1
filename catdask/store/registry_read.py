"""Reading the model registry: load, list and compare versions, rebuild estimators.

Loading validates everything before any array is used: the JSON schema, the attribute and
array checksums, numeric dtypes and safe codecs only, and no file besides the listed arrays
(a pickle dropped into a version is refused, never opened).
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from ..errors import ModelNotFoundError, StoreCorruptError
from ..names import did_you_mean, is_valid_name
from . import _zarr_io
from ._json import json_sha256
from .layout import list_entries, models_dir, resolve_store
from .registry import (
    ModelVersion,
    array_sha256,
    checked_attrs,
    model_folder,
    version_numbers,
)

__all__ = [
    "load_model_version",
    "list_models",
    "list_versions",
    "compare_versions",
    "load_estimator",
    "registered_model_names",
]

COMPARE_FIELDS = (
    "objective",
    "gap",
    "certificate",
    "metrics",
    "params",
    "class",
    "dataset",
    "n_iter",
    "converged",
    "created",
    "run_key",
    "catdask_version",
)


def registered_model_names(store=None) -> list[str]:
    """Sorted names of the models with at least one version (none when the store does not
    exist yet)."""
    parent = models_dir(resolve_store(store))
    return [m for m in list_entries(parent) if version_numbers(parent / m)]


def _resolve_version(model_dir: Path, root: Path, name: str, version) -> int:
    versions = version_numbers(model_dir)
    if not versions:
        names = registered_model_names(root)
        raise ModelNotFoundError(
            f"No model {name!r} in the registry at {root} (registered: "
            f"{', '.join(names) or 'none'}){did_you_mean(name, names) or '.'}"
        )
    if version is None or version == "latest":
        return versions[-1]
    v = version
    if isinstance(v, str):
        m = re.fullmatch(r"v?([0-9]+)", v.strip())
        if not m:
            raise ValueError(f"version must be an int, 'v<N>' or 'latest', got {version!r}.")
        v = int(m.group(1))
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
        raise ValueError(f"version must be an int, 'v<N>' or 'latest', got {version!r}.")
    if int(v) not in versions:
        raise ModelNotFoundError(
            f"Model {name!r} has no version {version!r} (versions: "
            f"{', '.join(f'v{x}' for x in versions)})."
        )
    return int(v)


def load_model_version(store, name: str, version=None, *, verify: bool = True):
    """Load the arrays and metadata of one version, validating everything.

    Parameters
    ----------
    store : path or None
        Store root.
    name : str
        Model name.
    version : int, "v<N>", "latest" or None
        None and "latest" mean the highest version.
    verify : bool, default True
        Check the sha256 of every array and of the attributes.

    Returns
    -------
    arrays : dict of str -> ndarray
    meta : dict

    Raises
    ------
    ModelNotFoundError
        Unknown model or version (the message lists what exists).
    StoreCorruptError
        Corrupt JSON, missing arrays, object/string dtypes, unexpected files (e.g. a
        pickle), checksum mismatches, unreadable chunks.
    """
    root, model_dir = model_folder(store, name)
    v = _resolve_version(model_dir, root, name, version)
    entry = model_dir / f"v{v}"
    attrs = checked_attrs(entry)
    meta, info = attrs["meta"], attrs["arrays"]
    if meta.get("version") != v:
        raise StoreCorruptError(
            entry, f"directory v{v} holds metadata for version {meta.get('version')!r}"
        )
    if verify:
        stored = {k: val for k, val in attrs.items() if k != "attrs_sha256"}
        if json_sha256(stored) != attrs.get("attrs_sha256"):
            raise StoreCorruptError(
                entry, "the metadata was modified after registration (attrs_sha256 mismatch)"
            )
    for key in info:
        if not is_valid_name(key) or key == "zarr.json":
            raise StoreCorruptError(
                entry, f"the metadata lists an array with an unsafe name {key!r}"
            )
    for child in sorted(entry.iterdir()):
        if child.name != "zarr.json" and child.name not in info:
            raise StoreCorruptError(
                entry,
                f"unexpected {'directory' if child.is_dir() else 'file'} {child.name!r}: a "
                "model version holds only zarr arrays and JSON metadata; refusing to load "
                "(catdask never unpickles)",
            )
    group = _zarr_io.open_group_checked(entry)
    arrays = {}
    for key, spec in info.items():
        if not (entry / key).is_dir():
            raise StoreCorruptError(entry, f"array {key!r} listed in the metadata is missing")
        arr = _zarr_io.open_array_checked(group, key, entry)
        data = _zarr_io.read_array(arr, entry, key)
        if (
            not isinstance(spec, dict)
            or list(data.shape) != spec.get("shape")
            or data.dtype.str != spec.get("dtype")
        ):
            raise StoreCorruptError(
                entry, f"array {key!r} is {data.dtype.str}{list(data.shape)}, metadata says {spec}"
            )
        if verify and array_sha256(data) != spec.get("sha256"):
            raise StoreCorruptError(
                entry, f"array {key!r} does not match its sha256 (modified or damaged)"
            )
        arrays[key] = data
    return arrays, meta


def list_versions(store, name: str) -> list[ModelVersion]:
    """All versions of one model, oldest first (``[]`` if the model does not exist)."""
    _root, model_dir = model_folder(store, name)
    out = []
    for v in version_numbers(model_dir):
        path = model_dir / f"v{v}"
        try:
            out.append(ModelVersion(name, v, path, checked_attrs(path)["meta"]))
        except StoreCorruptError as exc:
            out.append(ModelVersion(name, v, path, {}, problem=exc.problem))
    return out


def list_models(store=None, name: str | None = None) -> list[ModelVersion]:
    """Registered versions, sorted by (name, version); only model ``name`` if given.

    Temporaries of running or crashed registrations never appear. Versions whose metadata
    cannot be read are listed with ``problem`` set.
    """
    if name is not None:
        return list_versions(store, name)
    parent = models_dir(resolve_store(store))
    return [mv for model in list_entries(parent) for mv in list_versions(store, model)]


def compare_versions(store, name: str, v1, v2) -> dict:
    """Side-by-side metadata of two versions.

    Returns
    -------
    dict
        ``{"name", "versions": [a, b], "<field>": [value_a, value_b] ..., "changed": [fields
        that differ], "params_diff": {param: [a, b]}, "metrics_diff": {metric: [a, b]}}`` for the
        fields objective, gap (top level or inside ``certificate``), certificate, metrics,
        params, class, dataset, n_iter, converged, created, run_key, catdask_version.
    """
    root, model_dir = model_folder(store, name)
    metas, versions = [], []
    for version in (v1, v2):
        v = _resolve_version(model_dir, root, name, version)
        versions.append(v)
        metas.append(checked_attrs(model_dir / f"v{v}")["meta"])

    def field(meta, key):
        if key == "gap" and "gap" not in meta and isinstance(meta.get("certificate"), dict):
            return meta["certificate"].get("gap")
        return meta.get(key)

    out = {"name": name, "versions": versions}
    changed = []
    for key in COMPARE_FIELDS:
        a, b = field(metas[0], key), field(metas[1], key)
        out[key] = [a, b]
        if json_sha256(a) != json_sha256(b):
            changed.append(key)
    out["changed"] = changed
    for key in ("params", "metrics"):
        a = metas[0].get(key) if isinstance(metas[0].get(key), dict) else {}
        b = metas[1].get(key) if isinstance(metas[1].get(key), dict) else {}
        out[f"{key}_diff"] = {
            k: [a.get(k), b.get(k)]
            for k in sorted(set(a) | set(b))
            if json_sha256(a.get(k)) != json_sha256(b.get(k))
        }
    return out


def load_estimator(store, name: str, version=None):
    """Rebuild a fitted estimator from a registered version (no code from the store runs)."""
    from .. import model_io

    arrays, meta = load_model_version(store, name, version)
    return model_io.import_model(arrays, meta)
