"""The train cache: a stored fit stands for a fit of the same data, model and code."""

from __future__ import annotations

import hashlib
import json

from ..errors import CatdaskError
from ..versions import installed_version, source_sha256

#: What a lookup may raise that counts as a miss (no such data set, a damaged snapshot or
#: registry entry): the fit then runs and reports the problem itself.
CACHE_MISSES = (CatdaskError, LookupError, ValueError, OSError)

#: Bump when the key's ingredients change (old keys then never match: a refit, not a wrong hit).
#: 2: the spec's identity, not the whole spec (the registration policy is not the model's).
CACHE_KEY_FORMAT = 2


def code_version() -> dict:
    """``{"catdask": <version>, "source_sha256": <hash of the package's sources>}``
    (:mod:`catdask.versions`)."""
    return {"catdask": installed_version(), "source_sha256": source_sha256()}


def cache_key(dataset_sha256: str, spec: dict, code: dict | None = None) -> str:
    """The hex sha256 of (format, data-set content checksum, the spec's identity, code
    version)."""
    from .model_identity import identity

    record = {"format": CACHE_KEY_FORMAT, "dataset_sha256": dataset_sha256,
              "spec": identity(spec),
              "code": code_version() if code is None else code}
    text = json.dumps(record, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(text.encode()).hexdigest()


def current_content_sha256(store, dataset: str) -> str:
    """The ``content_sha256`` of the snapshot the data set's name points at now (reads only
    its metadata, not the arrays)."""
    from ..store import open_dataset_arrays

    with open_dataset_arrays(store, dataset) as arrays:
        return arrays.sha256


def same_fit(meta: dict, dataset: str, dataset_sha256: str, spec: dict) -> bool:
    """Whether a stored fit's record is a fit of this content with this identity by this
    code (the key, and the fields it digests: a key is only a digest of these)."""
    from .model_identity import identity

    if meta.get("cache_key") != cache_key(dataset_sha256, spec) or "spec" not in meta:
        return False
    return (meta.get("dataset") == dataset and meta.get("dataset_sha256") == dataset_sha256
            and identity(meta["spec"]) == identity(spec))


def find_stored_fit(store, model_name: str, dataset: str, dataset_sha256: str, spec: dict):
    """The newest version of ``model_name`` in ``store`` (the registry, or the candidates'
    own registry) that is :func:`same_fit` and loads intact; else None."""
    from ..errors import ModelNotFoundError, StoreCorruptError
    from ..store import list_models, load_model_version

    for version in reversed(list_models(store, model_name)):
        if version.problem is not None or not same_fit(version.meta, dataset, dataset_sha256,
                                                       spec):
            continue
        try:  # still there and intact (arrays' sha256 included): otherwise look further
            load_model_version(store, model_name, version.version, verify=True)
        except (ModelNotFoundError, StoreCorruptError):
            continue
        return version
    return None


def find_cached_version(store, model_name: str, dataset: str, dataset_sha256: str,
                        spec: dict):
    """Any registered version of the model fitted on this content with this spec's identity
    and this code, intact (the newest such ``ModelVersion``); else None. ``dataset_sha256``:
    the content the fit would be on; ``spec``: ``ModelSpec.to_dict()`` of the fit asked for."""
    return find_stored_fit(store, model_name, dataset, dataset_sha256, spec)


def cached_summary(version, store=None) -> dict:
    """The train flow's summary for a cached version, from its registry record
    (``cached`` True; ``seconds`` is the original fit's)."""
    from ..store.root import open_store
    from .reports import plot_file_name

    meta = version.meta
    spec = meta["spec"]
    certified = bool(meta.get("certified"))
    plot = open_store(store).local_folder / "plots" / plot_file_name(
        meta["dataset"], spec["method"], version=str(version))
    return {
        "dataset": meta["dataset"], "method": spec["method"], "origin": spec["origin"],
        "version": str(version), "status": meta.get("registration_status"),
        "certified": certified, "gap": meta.get("gap"),
        "why_not_certified": None if certified else (meta.get("certificate") or {}).get("reason"),
        "next_level": (meta.get("certificate") or {}).get("next_level"),
        "objective": meta.get("objective"), "n_iter": meta.get("n_iter"),
        "fit_seconds": meta.get("fit_seconds"), "plot": str(plot) if plot.is_file() else None,
        "metrics": meta.get("metrics"), "cached": True,
        "device": spec.get("device"), "device_placement": meta.get("device_placement"),
    }
