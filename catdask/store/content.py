"""What a data-set snapshot holds: label coding, content checksums and the attribute schema.

A snapshot's content is X (float64, N x D), the class codes y (int32, 0..K-1) and the sorted
classes; ``content_sha256`` hashes exactly that, so two snapshots with equal checksums hold
equal data. The attributes carry the classes, their display names, counts, provenance and a
checksum of the attributes themselves (``attrs_sha256``), so a hand edit is detected.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np

from ..errors import StoreCorruptError
from ._json import json_sha256

FORMAT = 1
_REQUIRED_ATTRS = {
    "catdask_dataset_format": int,
    "name": str,
    "n_samples": int,
    "n_features": int,
    "n_classes": int,
    "classes": list,
    "classes_kind": str,
    "label_names": list,
    "class_counts": list,
    "content_sha256": str,
    "attrs_sha256": str,
}


def encode_labels(y) -> tuple[np.ndarray, np.ndarray, str]:
    """Class codes, sorted classes and their kind ("int" or "str") for a label vector.

    Float labels are accepted only when integral (e.g. 1.0, 2.0); anything else is refused
    because a class must round-trip exactly through JSON.
    """
    y = np.asarray(y)
    if y.ndim != 1:
        raise ValueError(f"y must be one-dimensional, got shape {y.shape}.")
    kind = y.dtype.kind
    if kind == "O":
        if all(isinstance(v, str) for v in y):
            y = y.astype(str)
        elif all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in y):
            y = y.astype(np.int64)
        else:
            raise ValueError("y mixes types or holds objects; labels must be all str or all int.")
        kind = y.dtype.kind
    if kind == "S":
        y = np.char.decode(y, "utf-8")
        kind = "U"
    if kind == "b":
        y = y.astype(np.int64)
        kind = "i"
    if kind == "f":
        if not np.all(np.isfinite(y)) or not np.all(y == np.round(y)):
            raise ValueError("y holds non-integral float labels; use integer or string labels.")
        y = y.astype(np.int64)
        kind = "i"
    if kind not in "iuU":
        raise ValueError(f"y has dtype {y.dtype}; labels must be integers or strings.")
    classes, codes = np.unique(y, return_inverse=True)
    return codes.astype(np.int32).ravel(), classes, ("str" if kind == "U" else "int")


def classes_json(classes: np.ndarray, kind: str) -> list:
    """The sorted classes as JSON values (str or int)."""
    return [str(c) for c in classes] if kind == "str" else [int(c) for c in classes]


def label_names_for(label_names, classes: list) -> list[str]:
    """Display name of each class: from a list (one per sorted class) or a dict label -> name."""
    if label_names is None:
        return [str(c) for c in classes]
    if isinstance(label_names, dict):
        out = []
        for c in classes:
            if c in label_names:
                out.append(str(label_names[c]))
            elif str(c) in label_names:
                out.append(str(label_names[str(c)]))
            else:
                out.append(str(c))
        return out
    names = [str(n) for n in label_names]
    if len(names) != len(classes):
        raise ValueError(
            f"label_names has {len(names)} entries but y has {len(classes)} classes "
            f"{classes}; give one name per sorted class or a dict label -> name."
        )
    return names


def content_sha256(X, y_codes, classes: list, block_rows: int = 65536) -> str:
    """sha256 over the shape, the classes, X (little-endian float64) and y codes (int32).

    ``X`` and ``y_codes`` may be numpy or zarr arrays; they are hashed in row blocks so a
    large stored data set can be verified without loading it whole.
    """
    n, d = X.shape
    h = hashlib.sha256(b"catdask-dataset-v1\x00")
    h.update(json.dumps({"shape": [int(n), int(d)], "classes": classes}).encode())
    for start in range(0, n, block_rows):
        h.update(np.ascontiguousarray(X[start : start + block_rows], dtype="<f8").tobytes())
    h.update(np.ascontiguousarray(y_codes[...], dtype="<i4").tobytes())
    return h.hexdigest()


def source_sha256(attrs: dict) -> dict:
    """``{file name: sha256}`` from a parser's provenance (its ``files`` list), if present.

    Accepts the provenance itself or attributes that nest it under ``"provenance"``.
    """
    if isinstance(attrs.get("source_sha256"), dict):
        return dict(attrs["source_sha256"])
    files = attrs.get("files")
    if files is None and isinstance(attrs.get("provenance"), dict):
        files = attrs["provenance"].get("files")
    out = {}
    for f in files if isinstance(files, list) else []:
        if isinstance(f, dict) and f.get("name") and f.get("sha256"):
            out[str(f["name"])] = str(f["sha256"])
    return out


def feature_names_in(provenance) -> list | None:
    """The column names a parser's provenance records (``feature_names``, also when nested
    under ``"provenance"``), or None."""
    if not isinstance(provenance, dict):
        return None
    names = provenance.get("feature_names")
    if names is None and isinstance(provenance.get("provenance"), dict):
        names = provenance["provenance"].get("feature_names")
    return names if isinstance(names, list) else None


def check_data(X, y):
    """Validate a table for storing: ``(X float64, codes, classes as JSON, kind)``."""
    X = np.asarray(X)
    if X.dtype.kind not in "biuf":
        raise ValueError(f"X has dtype {X.dtype}; it must be numeric.")
    X = np.ascontiguousarray(X, dtype=np.float64)
    if X.ndim != 2 or X.shape[0] < 1 or X.shape[1] < 1:
        raise ValueError(f"X must be a non-empty 2-D table, got shape {X.shape}.")
    if not np.all(np.isfinite(X)):
        bad = np.argwhere(~np.isfinite(X))[0]
        raise ValueError(
            f"X has a non-finite value at row {bad[0]}, column {bad[1]}; "
            "impute or drop missing values before storing."
        )
    codes, classes, kind = encode_labels(y)
    if codes.shape[0] != X.shape[0]:
        raise ValueError(f"y has {codes.shape[0]} labels but X has {X.shape[0]} rows.")
    return X, codes, classes_json(classes, kind), kind


def check_attrs(attrs, entry: Path) -> dict:
    """Validate a snapshot's attributes against the schema (types, counts, format)."""
    if not isinstance(attrs, dict):
        raise StoreCorruptError(entry, "the group has no attributes")
    for key, typ in _REQUIRED_ATTRS.items():
        if key not in attrs:
            raise StoreCorruptError(entry, f"attribute {key!r} is missing")
        if not isinstance(attrs[key], typ) or isinstance(attrs[key], bool):
            raise StoreCorruptError(
                entry,
                f"attribute {key!r} should be {typ.__name__}, found {type(attrs[key]).__name__}",
            )
    if attrs["catdask_dataset_format"] != FORMAT:
        raise StoreCorruptError(
            entry,
            f"unknown data-set format {attrs['catdask_dataset_format']} "
            f"(this catdask reads format {FORMAT}); upgrade catdask",
        )
    k = attrs["n_classes"]
    if (
        len(attrs["classes"]) != k
        or len(attrs["label_names"]) != k
        or len(attrs["class_counts"]) != k
    ):
        raise StoreCorruptError(
            entry, f"classes, label_names and class_counts must each have n_classes={k} entries"
        )
    if attrs["classes_kind"] not in ("int", "str"):
        raise StoreCorruptError(
            entry, f"classes_kind is {attrs['classes_kind']!r}, expected int or str"
        )
    return attrs


def classes_array(attrs: dict, entry: Path) -> np.ndarray:
    """The stored classes as an array (str or int64), checked against ``classes_kind``."""
    classes, kind = attrs["classes"], attrs["classes_kind"]
    want = str if kind == "str" else int
    if not isinstance(classes, list) or not all(
        isinstance(c, want) and not isinstance(c, bool) for c in classes
    ):
        raise StoreCorruptError(
            entry, f"the class labels in the attributes are not all {want.__name__}s"
        )
    if kind == "str":
        return np.array([str(c) for c in classes], dtype=str)
    return np.array(classes, dtype=np.int64)


def verify_content(entry: Path, attrs: dict, X, codes) -> None:
    """Recompute the attribute and content checksums and the class counts of a snapshot."""
    stored = {k: v for k, v in attrs.items() if k != "attrs_sha256"}
    if json_sha256(stored) != attrs["attrs_sha256"]:
        raise StoreCorruptError(
            entry,
            "the attributes were modified after writing (attrs_sha256 "
            "mismatch); re-ingest the data set",
        )
    got = content_sha256(X, codes, attrs["classes"])
    if got != attrs["content_sha256"]:
        raise StoreCorruptError(
            entry,
            f"content checksum mismatch: expected {attrs['content_sha256']}, "
            f"got {got}; the arrays were modified or damaged, re-ingest",
        )
    counts = np.bincount(np.asarray(codes[...]), minlength=attrs["n_classes"]).tolist()
    if counts != attrs["class_counts"]:
        raise StoreCorruptError(
            entry, f"class counts {counts} differ from the attributes {attrs['class_counts']}"
        )
