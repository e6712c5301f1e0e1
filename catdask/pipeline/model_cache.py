"""The train cache: a registered version stands for a fit of the same data, spec and code.

A fit is a function of three things: the data set's content (its snapshot's
``content_sha256``), the whole :class:`~catdask.pipeline.training.ModelSpec` (seed and
certificate policy included) and catdask's code. :func:`cache_key` hashes the three, and
:func:`~catdask.pipeline.training.register_outcome` records the key with every version
(``meta["cache_key"]``, beside ``meta["code_version"]``). Before fitting, the train flow asks
:func:`find_cached_version` whether the model's **latest** version was registered under the
same key; if so it returns that version instead of fitting again.

The registry is the source of truth, not a separate cache store: nothing is pickled, nothing
can point at a version that was removed (the lookup reads the registry itself and loads the
version with full verification; a damaged or missing version is a miss, and the flow refits),
and the hit is re-checked field by field (data set, checksum, spec), not only by key. Only the
latest version can hit, so after a hit the model's latest version is always one fitted on the
data asked for (data set A, then B, then A again refits on A rather than hand back the A
model while ``predict NAME`` would use the B one). A rejected fit registers nothing and so is
never cached.

"Code" is catdask's version plus a sha256 of the package's Python sources
(:func:`code_version`): editing any module of catdask, or upgrading it, invalidates every key.
"""

from __future__ import annotations

import hashlib
import json

from ..errors import CatdaskError
from ..versions import installed_version, source_sha256

__all__ = ["CACHE_KEY_FORMAT", "code_version", "cache_key", "current_content_sha256",
           "find_cached_version", "cached_summary", "look_up_fit", "CACHE_MISSES"]

#: What a lookup may raise that counts as a miss (no such data set, a damaged snapshot or
#: registry entry): the fit then runs and reports the problem itself.
CACHE_MISSES = (CatdaskError, LookupError, ValueError, OSError)

#: Bump when the key's ingredients change (old keys then never match: a refit, not a wrong hit).
CACHE_KEY_FORMAT = 1


def code_version() -> dict:
    """``{"catdask": <version>, "source_sha256": <hash of the package's sources>}``
    (:mod:`catdask.versions`)."""
    return {"catdask": installed_version(), "source_sha256": source_sha256()}


def cache_key(dataset_sha256: str, spec: dict, code: dict | None = None) -> str:
    """The hex sha256 of (format, data-set content checksum, whole spec, code version)."""
    record = {"format": CACHE_KEY_FORMAT, "dataset_sha256": dataset_sha256, "spec": spec,
              "code": code_version() if code is None else code}
    text = json.dumps(record, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(text.encode()).hexdigest()


def current_content_sha256(store, dataset: str) -> str:
    """The ``content_sha256`` of the snapshot the data set's name points at now (reads only
    its metadata, not the arrays)."""
    from ..store import open_dataset_arrays

    with open_dataset_arrays(store, dataset) as arrays:
        return arrays.sha256


def find_cached_version(store, model_name: str, dataset: str, dataset_sha256: str,
                        spec: dict):
    """The model's latest version when it was fitted on this content with this spec and this
    code, intact; else None (the caller fits).

    Parameters
    ----------
    store : path or None
    model_name, dataset : str
    dataset_sha256 : str
        The content the fit would be on (:func:`current_content_sha256`).
    spec : dict
        ``ModelSpec.to_dict()`` of the fit asked for.

    Returns
    -------
    catdask.store.registry.ModelVersion or None
    """
    from ..errors import ModelNotFoundError, StoreCorruptError
    from ..store import list_models, load_model_version

    versions = list_models(store, model_name)
    if not versions:
        return None
    latest = versions[-1]
    meta = latest.meta
    if latest.problem is not None or meta.get("cache_key") != cache_key(dataset_sha256, spec):
        return None
    # The key says it; the record must say it too (a key is only a digest of these).
    if (meta.get("dataset") != dataset or meta.get("dataset_sha256") != dataset_sha256
            or meta.get("spec") != spec):
        return None
    try:  # still there and intact (arrays' sha256 included): otherwise refit
        load_model_version(store, model_name, latest.version, verify=True)
    except (ModelNotFoundError, StoreCorruptError):
        return None
    return latest


def cached_summary(version, store=None) -> dict:
    """The train flow's summary for a cached version, from its registry record
    (``cached`` True; ``seconds`` is the original fit's)."""
    from ..store import resolve_store
    from .reports import plot_file_name

    meta = version.meta
    spec = meta["spec"]
    certified = bool(meta.get("certified"))
    plot = resolve_store(store) / "plots" / plot_file_name(meta["dataset"], spec["method"],
                                                            version=str(version))
    return {
        "dataset": meta["dataset"], "method": spec["method"], "origin": spec["origin"],
        "version": str(version), "status": meta.get("registration_status"),
        "certified": certified, "gap": meta.get("gap"),
        "why_not_certified": None if certified else (meta.get("certificate") or {}).get("reason"),
        "next_level": (meta.get("certificate") or {}).get("next_level"),
        "objective": meta.get("objective"), "n_iter": meta.get("n_iter"),
        "seconds": meta.get("fit_seconds"), "plot": str(plot) if plot.is_file() else None,
        "metrics": meta.get("metrics"), "cached": True,
        "device": spec.get("device"), "device_placement": meta.get("device_placement"),
    }


def look_up_fit(store, model_name: str, dataset: str, spec: dict):
    """The train cache's one lookup (the train flow's first task and the CLI make it):
    ``(current content sha256, the cached version's summary or None)``.

    Raises what reading the store raises (a missing data set, a damaged snapshot); callers
    treat that as a miss and let the fit report it.
    """
    sha = current_content_sha256(store, dataset)
    hit = find_cached_version(store, model_name, dataset, sha, spec)
    return sha, (None if hit is None else cached_summary(hit, store))
