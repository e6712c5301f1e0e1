"""The model registry: immutable, numbered versions of models as arrays plus JSON.

Layout: ``<root>/models/<name>/v<N>/`` is one zarr v3 group per version, holding one numeric
array per model array and the attributes

- ``meta``: the caller's JSON metadata plus ``version``, ``created`` (UTC ISO 8601),
  ``catdask_version`` and ``run_key``;
- ``arrays``: name -> dtype, shape and sha256 of each array;
- ``attrs_sha256``: checksum of the two above (detects hand edits).

Nothing is ever pickled, and loading refuses object/string dtypes, unknown codecs and any
file that is not part of the zarr group (docs/design.md section 7).

A version is written in a private ``.tmp-`` directory, then renamed onto ``v<N>`` under a
short OS file lock (released by the OS if the process dies) around "look for the run key,
pick a number, rename": the number is one above both the highest version present and the
highest ever given, which ``<name>/.newest-version`` records after the rename, so a number is
never given twice, even after its version was removed (logs, events and MLflow runs that name
``model:vN`` stay unambiguous). The rename also refuses an existing ``v<N>`` (a writer of an
older catdask that does not read the record), and the writer then picks again. So
concurrent registrations (threads or processes) get distinct versions, a crash never leaves a
half-written version visible, and a rerun of the same training run returns the existing
version.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import re
from pathlib import Path

import numpy as np
import zarr

from ..errors import StoreCorruptError, StoreWriteError
from ..names import validate_name
from ..object_store import LocalBackend, NotFound
from . import _zarr_io
from ._atomic import (
    file_lock,
    fsync_dir,
    fsync_tree,
    locked_temp_dir,
    remove_tree,
    rename_no_replace,
)
from ..versions import installed_version
from ._json import json_sha256, to_json_safe, utc_now
from .layout import MODEL_COUNTER, MODEL_LOCK, entry_path, models_dir, numbered_folders, resolve_store, space_hint

__all__ = [
    "ModelVersion",
    "register_model",
    "register_estimator",
    "checked_attrs",
    "model_folder",
    "version_numbers",
    "version_number",
    "array_sha256",
]

FORMAT = 1
RESERVED_META = ("version", "created", "catdask_version", "run_key")
_VERSION_DIR = re.compile(r"v([1-9][0-9]*)")
_LOCK_NAME = MODEL_LOCK
_ALLOWED_KINDS = "biufc"  # bool, int, uint, float, complex: numbers only


@dataclasses.dataclass(frozen=True)
class ModelVersion:
    """One registered version of a model.

    Attributes
    ----------
    name : str
    version : int
    path : Path
        The version's zarr group.
    meta : dict
        Its metadata (empty if unreadable; see ``problem``).
    problem : str or None
        Set by :func:`list_models` for a version whose metadata cannot be read.
    """

    name: str
    version: int
    path: Path
    meta: dict
    problem: str | None = None

    @property
    def run_key(self):
        return self.meta.get("run_key")

    @property
    def created(self):
        return self.meta.get("created")

    def __str__(self) -> str:
        return f"{self.name}:v{self.version}"


# --------------------------------------------------------------------------- helpers


def model_folder(store, name: str) -> tuple[Path, Path]:
    root = resolve_store(store)
    return root, entry_path(models_dir(root), name, "model")


def version_numbers(model_dir: Path) -> list[int]:
    """Sorted version numbers present under ``model_dir``."""
    numbers = (version_number(v) for v in numbered_folders(model_dir, version_number))
    return [n for n in numbers if n is not None]


def version_number(folder_name: str) -> int | None:
    """N of a version folder's name ``v<N>``, None for anything else."""
    m = _VERSION_DIR.fullmatch(folder_name)
    return int(m.group(1)) if m else None


def array_sha256(a: np.ndarray) -> str:
    h = hashlib.sha256(f"{a.dtype.str}|{list(a.shape)}|".encode())
    h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()


def _check_arrays(arrays) -> dict[str, np.ndarray]:
    if not isinstance(arrays, dict):
        raise TypeError(f"arrays must be a dict of name -> ndarray, got {type(arrays).__name__}.")
    out = {}
    lower = {}
    for key, value in arrays.items():
        validate_name(key, kind="array")
        # Case-insensitive file systems (macOS, Windows) would store "W" and "w" in one place.
        if key.lower() in lower:
            raise ValueError(f"Array names {lower[key.lower()]!r} and {key!r} differ only in case.")
        lower[key.lower()] = key
        if key == "zarr.json":
            raise ValueError(
                "'zarr.json' cannot be an array name (it is the group's metadata file)."
            )
        a = np.asarray(value)
        if a.dtype.kind not in _ALLOWED_KINDS:
            raise ValueError(
                f"Array {key!r} has dtype {a.dtype}; only numeric arrays (bool, int, float, "
                "complex) can be registered. Put strings and other values in meta (JSON); "
                "the registry never pickles."
            )
        # Native byte order so the stored dtype string is predictable; keeps 0-d arrays 0-d.
        out[key] = np.asarray(a, dtype=a.dtype.newbyteorder("="), order="C")
    return out


def _version_attrs(arrays_info: dict, meta: dict) -> dict:
    attrs = {"catdask_model_format": FORMAT, "arrays": arrays_info, "meta": meta}
    attrs["attrs_sha256"] = json_sha256(attrs)
    return attrs


# --------------------------------------------------------------------------- writing


def register_model(
    store, name: str, arrays: dict, meta: dict, *, run_key: str | None = None
) -> ModelVersion:
    """Register a new immutable version ``v1, v2, ...`` of model ``name``.

    Parameters
    ----------
    store : path or None
        Store root (see :func:`~catdask.store.resolve_store`).
    name : str
        Model name (validated: letters, digits, ``_.-``).
    arrays : dict of str -> ndarray
        Numeric arrays only (object, string and structured dtypes are refused).
    meta : dict
        JSON-safe metadata (numpy scalars/arrays are converted). The keys ``version``,
        ``created``, ``catdask_version`` and ``run_key`` are set by the registry.
    run_key : str, optional
        Identifies the run that produced the model. If a version with this key exists, it
        is returned and nothing is written (a rerun after a crash does not duplicate).

    Returns
    -------
    ModelVersion

    Raises
    ------
    InvalidNameError, ValueError, TypeError
        Bad name, non-numeric array, non-JSON metadata.
    StoreWriteError
        Writing failed (disk full, permissions, ...): the temporary directory was removed
        and earlier versions are intact.
    """
    _root, model_dir = model_folder(store, name)
    arrays = _check_arrays(arrays)
    if not isinstance(meta, dict):
        raise TypeError(f"meta must be a dict, got {type(meta).__name__}.")
    if run_key is not None and (not isinstance(run_key, str) or not run_key or len(run_key) > 1024):
        raise ValueError(
            f"run_key must be a non-empty str of at most 1024 characters, got {run_key!r}."
        )
    meta = to_json_safe(dict(meta), "meta")
    meta.update(created=utc_now(), catdask_version=installed_version(), run_key=run_key)

    if run_key is not None:
        found = _find_run_key(model_dir, name, run_key)
        if found is not None:
            return found

    tmp = None
    try:
        # Created already locked: cleanup and check never see it unlocked while we run.
        with locked_temp_dir(model_dir, "v", model_dir / _LOCK_NAME) as tmp:
            found, version, meta = _write_and_claim(tmp, model_dir, name, arrays, meta, run_key)
            if found is not None:
                remove_tree(tmp)  # while still locked: never seen as a crash leftover
        if found is not None:
            return found
    except OSError as exc:
        if tmp is not None:
            remove_tree(tmp)
        raise StoreWriteError(
            exc.errno,
            f"Could not register a version of model {name!r} in {model_dir}: {exc}. "
            f"The temporary directory was removed; earlier versions are intact."
            f"{space_hint(exc.errno)}",
            str(model_dir),
        ) from exc
    except BaseException:
        if tmp is not None:
            remove_tree(tmp)
        raise
    fsync_dir(model_dir)
    return ModelVersion(name, version, model_dir / f"v{version}", meta)


def _write_and_claim(tmp: Path, model_dir: Path, name: str, arrays, meta, run_key):
    """Write the arrays into ``tmp`` and claim a version: ``(existing, version, meta)``."""
    group = zarr.open_group(str(tmp), mode="a")  # "w" would recreate the locked folder
    info = {}
    for key, a in arrays.items():
        _zarr_io.write_array(group, key, a)
        info[key] = {"dtype": a.dtype.str, "shape": list(a.shape), "sha256": array_sha256(a)}
    with file_lock(model_dir / _LOCK_NAME):
        if run_key is not None:
            found = _find_run_key(model_dir, name, run_key)
            if found is not None:
                return found, None, meta
        version, meta = _claim_version(tmp, group, model_dir, info, meta)
    return None, version, meta


def _claim_version(tmp: Path, group, model_dir: Path, info: dict, meta: dict):
    """Rename ``tmp`` onto a version number never given before (under the registry lock);
    rewrite its version number on each retry."""
    for _ in range(10000):
        version = _next_version(model_dir)
        meta = dict(meta, version=version)
        # The temporary group is private, so updating its attributes before the rename is safe.
        group.attrs.put(_version_attrs(info, meta))
        fsync_tree(tmp)
        if rename_no_replace(tmp, model_dir / f"v{version}"):
            # Until it is recorded the folder itself says the number is taken; a failure to
            # record (a full disk) leaves that, and the version is registered all the same.
            with contextlib.suppress(OSError):
                _counter_backend(model_dir).put(_counter_key(model_dir), f"{version}\n".encode())
            return version, meta
    raise OSError(
        f"Could not claim a version number under {model_dir}: too many concurrent writers."
    )


def _next_version(model_dir: Path) -> int:
    """One above every version present and every number given before (call under the
    registry lock)."""
    try:
        text = _counter_backend(model_dir).get(_counter_key(model_dir))[0].strip()
        given = int(text) if text.isdigit() else 0
    except NotFound:
        given = 0
    return max(max(version_numbers(model_dir), default=0), given) + 1


# The record is a small object written through the store's seam (the same key on any medium).
def _counter_backend(model_dir: Path) -> LocalBackend:
    return LocalBackend(model_dir.parent.parent)


def _counter_key(model_dir: Path) -> str:
    return f"{model_dir.parent.name}/{model_dir.name}/{MODEL_COUNTER}"


def _find_run_key(model_dir: Path, name: str, run_key: str) -> ModelVersion | None:
    """Lowest version whose metadata carries ``run_key`` (unreadable versions are skipped)."""
    for v in version_numbers(model_dir):
        path = model_dir / f"v{v}"
        try:
            attrs = checked_attrs(path)
        except StoreCorruptError:
            continue
        if attrs["meta"].get("run_key") == run_key:
            return ModelVersion(name, v, path, attrs["meta"])
    return None


def checked_attrs(entry: Path) -> dict:
    return node_attrs(_zarr_io.read_node_json(entry, entry), entry)


def node_attrs(node: dict, entry) -> dict:
    """The checked attributes of a model version's parsed ``zarr.json`` (``entry`` names it
    in errors: a path or a URL)."""
    if node.get("node_type") != "group":
        raise StoreCorruptError(entry, "zarr.json does not describe a group")
    attrs = node.get("attributes")
    if not isinstance(attrs, dict):
        raise StoreCorruptError(entry, "the group has no attributes")
    if attrs.get("catdask_model_format") != FORMAT:
        raise StoreCorruptError(
            entry,
            f"unknown model format {attrs.get('catdask_model_format')!r} "
            f"(this catdask reads format {FORMAT})",
        )
    if not isinstance(attrs.get("meta"), dict):
        raise StoreCorruptError(entry, "attribute 'meta' is missing or not an object")
    if not isinstance(attrs.get("arrays"), dict):
        raise StoreCorruptError(entry, "attribute 'arrays' is missing or not an object")
    return attrs



# --------------------------------------------------------------------------- estimators


def register_estimator(
    store, name: str, estimator, meta: dict | None = None, *, run_key: str | None = None
) -> ModelVersion:
    """Register a fitted catdask estimator (via ``catdask.model_io.export_model``).

    ``meta`` (e.g. data-set name and checksum, metrics) is merged over the exported metadata.
    """
    from .. import model_io  # lazy: keeps the store importable without the estimators

    arrays, exported = model_io.export_model(estimator)
    merged = dict(exported)
    merged.update(meta or {})
    return register_model(store, name, arrays, merged, run_key=run_key)
