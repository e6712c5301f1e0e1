"""Rejected candidates: fits that a run's policy did not register, kept so that a decision
can be overturned without a refit."""

from __future__ import annotations

from pathlib import Path

#: The candidates' registry, under the store root.
CANDIDATES_FOLDER = "candidates"
REJECTED_STATUS = "rejected-uncertified"


def candidates_root(store):
    """The candidates' registry: a :class:`~catdask.store.root.StoreRoot` of
    ``<store>/candidates/`` (any store :func:`~catdask.store.root.open_store` opens)."""
    from ..store.substore import sub_store

    return sub_store(store, CANDIDATES_FOLDER)


def save_candidate(store, model_name: str, outcome, *, plot: str | None = None):
    """Keep a rejected fit as a candidate for ``model_name``; returns its record
    (a :class:`~catdask.store.ModelVersion` of the candidates' registry)."""
    from ..store import register_estimator
    from .training import outcome_meta

    meta = outcome_meta(outcome, status=REJECTED_STATUS, extra={"plot": plot})
    return register_estimator(candidates_root(store), model_name, outcome.model, meta)


def _remove(root, candidate) -> None:
    """Out of view at once (its zarr.json goes first), then deleted; a concurrent remover
    wins quietly."""
    from ..store.model_entries import remove_version

    remove_version(root, candidate.name, candidate.version)


def _candidate_summary(candidate, store, plot) -> dict:
    from .model_cache import cached_summary

    summary = cached_summary(candidate, store)
    summary.update(reused="candidate", plot=plot if plot and Path(plot).is_file() else None)
    return summary


def reconsider_candidate(store, model_name: str, dataset: str, dataset_sha256: str,
                         spec: dict, *, run_key=None) -> dict | None:
    """The train cache's second look: a candidate fitted on this content with this spec's
    identity and code, decided again under ``spec``'s policy; None when there is none.
    Returns the summary of the version registered from it (``reused`` ``"candidate"``), or of
    the candidate rejected again (``version`` None, ``status`` ``"rejected-uncertified"``).
    ``run_key`` (default: one derived from the candidate) makes the registration idempotent,
    so two runs promoting the same candidate at once register one version."""
    from ..certificate import Certificate
    from ..store import load_model_version, register_model
    from .model_cache import find_stored_fit
    from .spec import ModelSpec

    root = candidates_root(store)
    candidate = find_stored_fit(root, model_name, dataset, dataset_sha256, spec)
    if candidate is None:
        return None
    asked = ModelSpec.from_dict(spec)
    meta = candidate.meta
    ok, status = asked.registration_decision(Certificate.from_dict(meta["certificate"]))
    plot = meta.get("plot")
    if not ok:
        return dict(_candidate_summary(candidate, store, plot), version=None, status=status,
                    max_gap=asked.max_gap)
    arrays, stored = load_model_version(root, model_name, candidate.version, verify=True)
    stored = dict(stored, spec=asked.to_dict(), registration_status=status,
                  registration_policy={"max_gap": asked.max_gap,
                                       "allow_uncertified": asked.allow_uncertified},
                  decided_again={"candidate_created": meta.get("created"),
                                 "fit_seconds": meta.get("fit_seconds")})
    key = run_key or f"candidate:{meta['cache_key'][:16]}:{meta.get('created')}"
    version = register_model(store, model_name, arrays, stored, run_key=key)
    _remove(root, candidate)
    return dict(_candidate_summary(version, store, plot), max_gap=asked.max_gap)


def gc_candidates(store, *, dry_run: bool = False) -> list[tuple[Path | str, str]]:
    """Remove the candidates nothing can use any more; ``(path, why)`` for each (with
    ``dry_run``, those that would be removed; ``path`` a local folder, or a URL on object
    storage): the data set's content or the code changed
    since (no train can ask for that fit again), or the fit is registered already."""
    from ..store import list_models
    from .model_cache import CACHE_MISSES, code_version, current_content_sha256, find_stored_fit

    root = candidates_root(store)
    doomed = []
    for candidate in list_models(root, verify=True):  # not the listing's cache: gc removes
        meta = candidate.meta
        try:
            sha = current_content_sha256(store, meta.get("dataset", ""))
        except CACHE_MISSES:
            sha = None
        if candidate.problem is not None:
            why = f"unreadable ({candidate.problem})"
        elif sha != meta.get("dataset_sha256"):
            why = "its data set has new content (or is gone)"
        elif meta.get("code_version") != code_version():
            why = "fitted by other catdask code"
        elif find_stored_fit(store, candidate.name, meta["dataset"], sha, meta["spec"]):
            why = "its fit is registered"
        else:
            continue
        doomed.append((candidate.path, why))
        if not dry_run:
            _remove(root, candidate)
    return doomed


def look_up_fit(store, model_name: str, dataset: str, spec: dict, *, run_key=None):
    """The train cache's one lookup (the train flow's first task and the CLI make it):
    ``(current content sha256, summary or None)``.
    Raises what reading the store raises (a missing data set, a damaged snapshot); callers
    treat that as a miss and let the fit report it."""
    from .model_cache import cached_summary, current_content_sha256, find_cached_version

    sha = current_content_sha256(store, dataset)
    hit = find_cached_version(store, model_name, dataset, sha, spec)
    if hit is not None:
        return sha, dict(cached_summary(hit, store), reused="registered")
    return sha, reconsider_candidate(store, model_name, dataset, sha, spec, run_key=run_key)
