"""The model registry: immutable, numbered versions of models as arrays plus JSON.

Layout (:mod:`catdask.store.model_entries`): ``models/<name>/v<N>/`` is one zarr v3 group per
version, holding one numeric array per model array and the attributes

- ``meta``: the caller's JSON metadata plus ``version``, ``created`` (UTC ISO 8601),
  ``catdask_version`` and ``run_key``;
- ``arrays``: name -> dtype, shape and sha256 of each array;
- ``attrs_sha256``: checksum of the two above (detects hand edits).

Nothing is ever pickled, and loading refuses object/string dtypes, unknown codecs and any
object that is not part of the zarr group (docs/design.md section 7).

A registration works the same on a local folder and on S3, through the store's backend only
(docs/object-store-api.md):

1. it takes a version number N by compare-and-swap on ``.newest-version``
   (:mod:`catdask.store.ids`): one above every number given before and every version
   present, so a number is never given twice, even after its version was removed (logs,
   events and MLflow runs that name ``model:vN`` stay unambiguous);
2. it takes the writer's lease ``.writing/v<N>`` (heartbeat on), so cleanup and check know
   the prefix is being written;
3. with a run key, it claims the run by a create-only write of ``.runs/<sha256(run key)>``:
   exactly one registration per run wins; a loser returns the winner's version (waiting
   while the winner writes; taking the claim over if the winner died before committing);
4. it writes the arrays in place, each a root array of ``v<N>/<array>``, then commits by
   writing the group document ``v<N>/zarr.json`` last, create-only. Until then the version
   does not exist for any reader; a writer killed at any point leaves only an uncommitted
   prefix, which nothing reads and cleanup removes once its lease is dead;
5. it adds the version's metadata to the model's listing index (:mod:`.model_index`, a
   cache that listings read instead of every version's ``zarr.json``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import time
from pathlib import Path

import numpy as np

from ..errors import StoreCorruptError, StoreWriteError
from ..names import validate_name
from ..object_store import NotFound, ObjectStoreError, PreconditionFailed
from ..object_store.lease import acquire
from ..versions import installed_version
from . import _zarr_io
from ._atomic import crash_point
from ._json import json_sha256, to_json_safe, utc_now
from .ids import give_back, take_next_id
from .layout import MODEL_COUNTER, space_hint
from .lease import lease_is_live
from ..dataset_pointer import location
from .model_entries import (
    RUNS,
    FORMAT,
    checked_attrs,
    committed_versions,
    in_parallel,
    read_version_node,
    remove_version,
    version_key,
    version_number,
    writer_lease_key,
)
from .model_index import record_versions
from .root import StoreRoot, open_store

RESERVED_META = ("version", "created", "catdask_version", "run_key")
_ALLOWED_KINDS = "biufc"  # bool, int, uint, float, complex: numbers only
#: Seconds a registration's lease lives without a renewal (tests shorten it).
WRITER_LEASE_TTL_S = 60.0
#: How often a registration that lost its run key's claim looks at the winner again.
_CLAIM_POLL_S = 0.05


@dataclasses.dataclass(frozen=True)
class ModelVersion:
    """One registered version of a model.

    Attributes
    ----------
    name : str
    version : int
    path : Path or str
        The version's zarr group: its folder in a local store, its URL on object storage.
    meta : dict
        Its metadata (empty if unreadable; see ``problem``).
    problem : str or None
        Set by :func:`list_models` for a version whose metadata cannot be read.
    """

    name: str
    version: int
    path: Path | str
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
    store : path, ``s3://`` URL, StoreRoot or None
        The store (see :func:`~catdask.store.root.open_store`).
    name : str
        Model name (validated: letters, digits, ``_.-``).
    arrays : dict of str -> ndarray
        Numeric arrays only (object, string and structured dtypes are refused).
    meta : dict
        JSON-safe metadata (numpy scalars/arrays are converted). The keys ``version``,
        ``created``, ``catdask_version`` and ``run_key`` are set by the registry.
    run_key : str, optional
        Identifies the run that produced the model. If a version with this key exists, it
        is returned and nothing is written (a rerun after a crash does not duplicate; of
        concurrent registrations with one key exactly one writes).

    Returns
    -------
    ModelVersion

    Raises
    ------
    InvalidNameError, ValueError, TypeError
        Bad name, non-numeric array, non-JSON metadata.
    StoreWriteError
        Writing failed (disk full, permissions, ...): what was written of the version was
        removed and earlier versions are intact.
    ObjectStoreError
        The object store failed (unreachable, credentials refused): one line.
    """
    root = open_store(store)
    validate_name(name, kind="model")
    arrays = _check_arrays(arrays)
    if not isinstance(meta, dict):
        raise TypeError(f"meta must be a dict, got {type(meta).__name__}.")
    if run_key is not None and (not isinstance(run_key, str) or not run_key or len(run_key) > 1024):
        raise ValueError(
            f"run_key must be a non-empty str of at most 1024 characters, got {run_key!r}."
        )
    meta = to_json_safe(dict(meta), "meta")
    meta.update(created=utc_now(), catdask_version=installed_version(), run_key=run_key)
    try:
        if run_key is not None:
            found = _registered_run(root, name, run_key)
            if found is not None:
                return found
        return _register(root, name, arrays, meta, run_key)
    except ObjectStoreError:
        raise  # already one line naming the store
    except OSError as exc:
        where = location(root.backend, StoreRoot.model_key(name))
        raise StoreWriteError(
            exc.errno,
            f"Could not register a version of model {name!r} in {where}: {exc}. "
            f"What was written of it was removed; earlier versions are intact."
            f"{space_hint(exc.errno)}",
            str(where),
        ) from exc


def _register(root: StoreRoot, name: str, arrays: dict, meta: dict, run_key) -> ModelVersion:
    backend = root.backend
    counter = StoreRoot.model_key(name, MODEL_COUNTER)
    while True:
        version, tag = take_next_id(backend, counter,
                                    lambda: committed_versions(root, name))
        crash_point("model-number-taken")
        try:
            lease = acquire(backend, writer_lease_key(name, version),
                            f"registration of {name}:v{version}", WRITER_LEASE_TTL_S)
        except BaseException:
            give_back(backend, counter, version, tag)
            raise
        try:
            winner = None if run_key is None else _claim_run(root, name, run_key, version)
        except BaseException:
            _undo(root, name, version, lease, tag)
            raise
        if winner is None:
            break
        _undo(root, name, version, lease, tag)
        if isinstance(winner, ModelVersion):
            return winner
    meta = dict(meta, version=version)
    try:
        info = _write_arrays(root, name, version, arrays)
        node = {"zarr_format": 3, "node_type": "group",
                "attributes": _version_attrs(info, meta)}
        crash_point("model-arrays-written")
        lease.check()  # a registration whose lease was taken over must not commit
        _commit(root, name, version, node)
    except BaseException:
        _undo(root, name, version, lease, tag)
        raise
    crash_point("model-committed")
    record_versions(root, name, {version: meta})  # a cache: a version it lacks still lists
    _let_go(root, name, version, lease)
    return ModelVersion(name, version, location(root.backend, version_key(name, version)), meta)


def _commit(root: StoreRoot, name: str, version: int, node: dict) -> None:
    """The version's group document, written last and create-only: the version exists now."""
    root.backend.put_new(version_key(name, version, "zarr.json"),
                         json.dumps(node, allow_nan=True).encode())


def _undo(root: StoreRoot, name: str, version: int, lease, tag: str) -> None:
    """After a failure (or a lost run claim): remove what was written of the version, let the
    lease go, and give the number back, which only an empty prefix may be (a prefix that could
    not be removed keeps its number: cleanup removes it once the lease is dead). Quiet: the
    failure being handled is what the caller reports."""
    try:
        remove_version(root, name, version)
    except Exception:  # noqa: BLE001 - the store failing again; the number stays given
        with contextlib.suppress(Exception):
            lease.release()
        return
    with contextlib.suppress(Exception):
        _let_go(root, name, version, lease)
    give_back(root.backend, StoreRoot.model_key(name, MODEL_COUNTER), version, tag)


def _let_go(root: StoreRoot, name: str, version: int, lease) -> None:
    """Release the writer's lease and remove its record (its number is never given again,
    so nobody else can hold that key)."""
    lease.release()
    root.backend.delete(writer_lease_key(name, version))


def _write_arrays(root: StoreRoot, name: str, version: int, arrays: dict) -> dict:
    group = _zarr_io.EntryArrays(root.backend, version_key(name, version))
    info = {}
    for key, a in arrays.items():
        _zarr_io.write_array(group, key, a)
        info[key] = {"dtype": a.dtype.str, "shape": list(a.shape), "sha256": array_sha256(a)}
    return info


# --------------------------------------------------------------------------- run keys


def _claim_key(name: str, run_key: str) -> str:
    return StoreRoot.model_key(name, RUNS, hashlib.sha256(run_key.encode()).hexdigest())


def _committed(root: StoreRoot, name: str, version: int, run_key: str) -> ModelVersion | None:
    """Version ``version`` if it is committed and carries ``run_key``."""
    try:
        attrs = checked_attrs(read_version_node(root, name, version),
                              location(root.backend, version_key(name, version)))
    except StoreCorruptError:
        return None
    if attrs["meta"].get("run_key") != run_key:
        return None
    return ModelVersion(name, version, location(root.backend, version_key(name, version)),
                        attrs["meta"])


def _claimed_version(root: StoreRoot, name: str, run_key: str) -> tuple[int, str] | None:
    """(version, object version) of the run's claim, None if nobody claimed it."""
    try:
        data, tag = root.backend.get(_claim_key(name, run_key))
    except NotFound:
        return None
    try:
        version = int(json.loads(data)["version"])
    except (ValueError, KeyError, TypeError):
        version = 0  # a damaged claim: taken over like a dead one
    return version, tag


def _registered_run(root: StoreRoot, name: str, run_key: str) -> ModelVersion | None:
    """The version the run registered: the one its claim names, once committed; for a store
    of an earlier catdask (no claims) the lowest version whose metadata carries the key."""
    claim = _claimed_version(root, name, run_key)
    if claim is not None:
        return _committed(root, name, claim[0], run_key) if claim[0] else None
    found = in_parallel(lambda v: _committed(root, name, v, run_key),
                        committed_versions(root, name))
    return next((mv for mv in found if mv is not None), None)


def _claim_run(root: StoreRoot, name: str, run_key: str, version: int):
    """Claim ``run_key`` for ``version``: None when ours; the winner's ModelVersion when
    another registration of the run committed; True when our number must be given up (the
    claim moved while we looked: take a new number and look again)."""
    backend = root.backend
    record = json.dumps({"run_key": run_key, "version": version}).encode()
    try:
        backend.put_new(_claim_key(name, run_key), record)
        return None
    except PreconditionFailed:
        pass
    while True:
        claim = _claimed_version(root, name, run_key)
        if claim is None:
            return True
        other, tag = claim
        if other == version:
            return None  # the claim of a failed attempt whose number we were given again
        if other:
            found = _committed(root, name, other, run_key)
            if found is not None:
                return found
            if lease_is_live(backend, writer_lease_key(name, other)):
                time.sleep(_CLAIM_POLL_S)  # the winner writes: wait for its commit
                continue
            found = _committed(root, name, other, run_key)  # committed, then let go
            if found is not None:
                return found
        try:  # the winner died before committing: the run is ours now
            backend.put_if_match(_claim_key(name, run_key), record, tag)
            return None
        except PreconditionFailed:
            continue


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
