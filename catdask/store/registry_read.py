"""Reading the model registry: load, list and compare versions, rebuild estimators.

Loading validates everything before any array is used: the JSON schema, the attribute and
array checksums, numeric dtypes and safe codecs only, and no file besides the listed arrays
(a pickle dropped into a version is refused, never opened).
"""

from __future__ import annotations

import re

import numpy as np
import zarr

from ..errors import ModelNotFoundError, StoreCorruptError
from ..names import did_you_mean, is_valid_name, validate_name
from . import _zarr_io
from ._json import json_sha256
from ..dataset_pointer import location
from .model_entries import (
    checked_attrs,
    committed_versions,
    in_parallel,
    model_names,
    read_version_node,
    version_folders,
    version_key,
)
from .model_index import indexed_meta, record_versions
from .registry import ModelVersion, array_sha256
from .root import StoreRoot, open_store

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
    root = open_store(store)
    return [n for n in model_names(root) if _latest(root, n) is not None]


def _latest(root: StoreRoot, name: str) -> int | None:
    """The highest committed version of ``name`` (the highest prefixes first), or None."""
    for v in reversed(version_folders(root, name)):
        if root.backend.head(version_key(name, v, "zarr.json")) is not None:
            return v
    return None


def _resolve_version(root: StoreRoot, name: str, version) -> int:
    latest = _latest(root, name)
    if latest is None:
        names = registered_model_names(root)
        raise ModelNotFoundError(
            f"No model {name!r} in the registry at {root.url} (registered: "
            f"{', '.join(names) or 'none'}){did_you_mean(name, names) or '.'}"
        )
    if version is None or version == "latest":
        return latest
    v = version
    if isinstance(v, str):
        m = re.fullmatch(r"v?([0-9]+)", v.strip())
        if not m:
            raise ValueError(f"version must be an int, 'v<N>' or 'latest', got {version!r}.")
        v = int(m.group(1))
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
        raise ValueError(f"version must be an int, 'v<N>' or 'latest', got {version!r}.")
    if int(v) < 1 or root.backend.head(version_key(name, int(v), "zarr.json")) is None:
        raise ModelNotFoundError(
            f"Model {name!r} has no version {version!r} (versions: "
            f"{', '.join(f'v{x}' for x in committed_versions(root, name))})."
        )
    return int(v)


def _version_attrs(root: StoreRoot, name: str, v: int) -> dict:
    return checked_attrs(read_version_node(root, name, v),
                         location(root.backend, version_key(name, v)))


def _read_array(root: StoreRoot, name: str, v: int, key: str, entry) -> np.ndarray:
    """One array of a version, its ``zarr.json`` checked before zarr opens it."""
    _zarr_io.check_array_node(root.backend, version_key(name, v, key), version_key(name, v))
    try:
        arr = zarr.open_array(store=root.backend.zarr_store(version_key(name, v, key),
                                                            read_only=True),
                              mode="r", zarr_format=3)
    except Exception as exc:  # zarr raises a variety of types for bad metadata
        raise StoreCorruptError(entry, f"zarr cannot open array {key!r}: {exc}") from exc
    return _zarr_io.read_array(arr, entry, key)


def load_model_version(store, name: str, version=None, *, verify: bool = True):
    """Load the arrays and metadata of one version, validating everything.

    Parameters
    ----------
    store : path, ``s3://`` URL, StoreRoot or None
        The store (see :func:`~catdask.store.root.open_store`).
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
    root = open_store(store)
    v = _resolve_version(root, name, version)
    entry = location(root.backend, version_key(name, v))
    attrs = _version_attrs(root, name, v)
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
    children: dict[str, bool] = {}  # name -> is a folder (has objects below it)
    prefix = version_key(name, v) + "/"
    for obj in root.backend.list(prefix):
        first, _, rest = obj.key[len(prefix):].partition("/")
        children[first] = children.get(first, False) or bool(rest)
    for child in sorted(children):
        if child != "zarr.json" and child not in info:
            raise StoreCorruptError(
                entry,
                f"unexpected {'directory' if children[child] else 'file'} {child!r}: a "
                "model version holds only zarr arrays and JSON metadata; refusing to load "
                "(catdask never unpickles)",
            )
    arrays = {}
    for key, spec in info.items():
        if not children.get(key):
            raise StoreCorruptError(entry, f"array {key!r} listed in the metadata is missing")
        data = _read_array(root, name, v, key, entry)
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


def _listed(root: StoreRoot, names: list[str], verify: bool = False) -> list[ModelVersion]:
    """The committed versions of ``names`` with their metadata: one listing of each model's
    version prefixes, then its listing index (:mod:`.model_index`; not with ``verify``); the
    versions the index lacks are read from their ``zarr.json``, many at once (a prefix without
    it is a registration being written, or a dead one's: not listed), and added to it."""
    found: list[ModelVersion] = []
    for name in names:
        numbers = version_folders(root, name)
        indexed = {} if verify else indexed_meta(root, name, numbers)
        found += [ModelVersion(name, v, location(root.backend, version_key(name, v)),
                               indexed[v]) for v in numbers if v in indexed]
        read = [mv for mv in in_parallel(lambda v: _read_listed(root, name, v),
                                         [v for v in numbers if v not in indexed])
                if mv is not None]
        if not verify:
            record_versions(root, name, {mv.version: mv.meta for mv in read
                                         if mv.problem is None})
        found += read
    return sorted(found, key=lambda mv: (mv.name, mv.version))


def _read_listed(root: StoreRoot, name: str, v: int) -> ModelVersion | None:
    """Version ``v`` read from its ``zarr.json`` (None when uncommitted; ``problem`` set when
    it cannot be read)."""
    path = location(root.backend, version_key(name, v))
    try:
        node = _zarr_io.read_node(root.backend, version_key(name, v), version_key(name, v),
                                  missing_ok=True)
        if node is None:
            return None
        return ModelVersion(name, v, path, checked_attrs(node, path)["meta"])
    except StoreCorruptError as exc:
        return ModelVersion(name, v, path, {}, problem=exc.problem)


def list_versions(store, name: str, *, verify: bool = False) -> list[ModelVersion]:
    """All versions of one model, oldest first (``[]`` if the model does not exist)."""
    return _listed(open_store(store), [validate_name(name, kind="model")], verify)


def list_models(store=None, name: str | None = None, *,
                verify: bool = False) -> list[ModelVersion]:
    """Registered versions, sorted by (name, version); only model ``name`` if given.

    Versions being written (or left uncommitted by a crashed registration) never appear.
    The metadata comes from the models' listing index, a cache of what each version's
    ``zarr.json`` held when it was registered (:mod:`.model_index`); with ``verify`` (gc's
    decisions) every version's ``zarr.json`` is read instead, and versions whose metadata
    cannot be read are listed with ``problem`` set (without it, only those the index lacks).
    """
    if name is not None:
        return list_versions(store, name, verify=verify)
    root = open_store(store)
    return _listed(root, model_names(root), verify)


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
    root = open_store(store)
    metas, versions = [], []
    for version in (v1, v2):
        v = _resolve_version(root, name, version)
        versions.append(v)
        metas.append(_version_attrs(root, name, v)["meta"])

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
