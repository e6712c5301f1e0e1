"""A model as a self-checking folder: ``arrays/<key>.npy`` plus ``meta.json``.

It holds the same arrays and metadata as a store version (:mod:`catdask.model_io`), the classes'
display names, and the sha256 of every array and of everything ``meta.json`` says. Reading it
checks every digest and loads arrays with ``allow_pickle=False``, so a bundle runs no code and an
accidental change is refused. The digests are not signatures: protect the folder from writes
as you would the model.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..names import is_valid_name

__all__ = ["ARTIFACT_KEY", "BUNDLE_FORMAT", "ModelBundle", "read_bundle", "write_bundle"]

#: The artifact key under which an exported model's bundle folder travels (MLflow).
ARTIFACT_KEY = "catdask_model"
#: Version of the folder layout; :func:`read_bundle` refuses any other (2: the metadata's
#: digest, ``document_sha256``).
BUNDLE_FORMAT = 2


@dataclass(frozen=True)
class ModelBundle:
    """What :func:`read_bundle` returns.

    Attributes
    ----------
    model : fitted CategorySpace, KernelCategorySpace or Pipeline ending in one
    meta : dict
        The registered version's metadata (certificate, spec, data set, metrics, ...).
    class_names : dict or None
        Display name of each class label, as ``catdask predict`` shows them.
    feature_names : list of str
        Column names the model expects, in order.
    """

    model: object
    meta: dict
    class_names: dict | None
    feature_names: list


def _digest(array: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(array).tobytes()).hexdigest()


def _document_digest(document: dict) -> str:
    """sha256 of ``meta.json``'s content but its own digest, in a canonical JSON form."""
    content = {k: v for k, v in document.items() if k != "document_sha256"}
    text = json.dumps(content, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(text.encode()).hexdigest()


def write_bundle(folder, arrays: dict, meta: dict, *, class_names=None, feature_names=None):
    """Write a model's arrays and metadata into ``folder`` (created; must not exist)."""
    folder = Path(folder)
    (folder / "arrays").mkdir(parents=True)
    listing = {}
    for key, value in arrays.items():
        value = np.asarray(value)
        if value.dtype.kind not in "fiub":
            raise ValueError(f"model array {key!r} has non-numeric dtype {value.dtype}")
        np.save(folder / "arrays" / f"{key}.npy", value, allow_pickle=False)
        listing[key] = {"shape": list(value.shape), "dtype": value.dtype.str,
                        "sha256": _digest(value)}
    names = None if class_names is None else [[_json_label(k), str(v)]
                                              for k, v in class_names.items()]
    document = {"catdask_bundle_format": BUNDLE_FORMAT, "meta": meta, "arrays": listing,
                "class_names": names, "feature_names": feature_names}
    document["document_sha256"] = _document_digest(document)
    (folder / "meta.json").write_text(json.dumps(document, indent=1, allow_nan=False))
    return folder


def _json_label(label):
    """A class label as JSON keeps it (numpy integers become int)."""
    return label.item() if isinstance(label, np.generic) else label


def read_bundle(folder) -> ModelBundle:
    """Load and check a bundle written by :func:`write_bundle`.

    Raises
    ------
    ValueError
        Unknown format, metadata or an array altered (sha256 mismatch), an array missing or
        unlisted, an unsafe array name, or an array that is not plain numbers.
    """
    from ..model_io import import_model

    folder = Path(folder)
    document = json.loads((folder / "meta.json").read_text())
    if document.get("catdask_bundle_format") != BUNDLE_FORMAT:
        raise ValueError(f"{folder}: not a catdask model bundle of format {BUNDLE_FORMAT} "
                         "(export the model again with `catdask export`)")
    if document.get("document_sha256") != _document_digest(document):
        raise ValueError(f"{folder}: meta.json does not match its sha256 (altered)")
    listing = document["arrays"]
    present = {p.stem for p in (folder / "arrays").iterdir()}
    if present != set(listing):
        raise ValueError(f"{folder}: arrays on disk {sorted(present)} differ from the listing "
                         f"{sorted(listing)}")
    arrays = {}
    for key, spec in listing.items():
        if not is_valid_name(key):
            raise ValueError(f"{folder}: unsafe array name {key!r}")
        value = np.load(folder / "arrays" / f"{key}.npy", allow_pickle=False)
        if value.dtype.str != spec["dtype"] or list(value.shape) != spec["shape"]:
            raise ValueError(f"{folder}: array {key!r} is {value.dtype.str}{list(value.shape)}, "
                             f"the listing says {spec['dtype']}{spec['shape']}")
        if _digest(value) != spec["sha256"]:
            raise ValueError(f"{folder}: array {key!r} does not match its sha256 (altered)")
        arrays[key] = value
    names = document.get("class_names")
    return ModelBundle(
        model=import_model(arrays, document["meta"]),
        meta=document["meta"],
        class_names=None if names is None else {k: v for k, v in names},
        feature_names=list(document.get("feature_names") or []),
    )
