"""The train cache (issue 28 item 4): the registry as the cache of fits.

A version is found again when it records the same data-set content, the same spec identity
(the registration policy is not part of it: issue 43) and the same code, and still loads with
full verification; any version of the model, not only the latest (issue 43); anything else is
a miss (the flow refits). Library level, no Prefect: one small in-memory fit
per test. The flow's use of it (a ``Cached`` run, no refit) is in tests/orchestration/test_prefect_events.py.
"""

from __future__ import annotations

import shutil

import pytest

from catdask.pipeline import ModelSpec, fit_on_dataset, register_outcome
from catdask.pipeline import model_cache
from catdask.pipeline.model_cache import (
    cache_key,
    cached_summary,
    current_content_sha256,
    find_cached_version,
)
from catdask.store import list_models, write_dataset

from tests.helpers.data import make_blobs

SPEC = ModelSpec(n_restarts=1)


@pytest.fixture
def registered(tmp_path):
    """A store with data set ``blobs`` and one certified version ``m:v1`` fitted on it."""
    store = tmp_path / "store"
    X, y = make_blobs()
    write_dataset(store, "blobs", X, y)
    outcome = fit_on_dataset(store, "blobs", SPEC)
    version = register_outcome(store, "m", outcome, status="certified")
    return store, version, (X, y)


def _find(store, spec=SPEC, name="m"):
    return find_cached_version(store, name, "blobs", current_content_sha256(store, "blobs"),
                               spec.to_dict())


def test_the_version_records_its_key_and_is_found_again(registered):
    store, version, _ = registered
    meta = version.meta
    assert meta["cache_key"] == cache_key(meta["dataset_sha256"], SPEC.to_dict())
    assert meta["code_version"] == model_cache.code_version()
    assert len(meta["code_version"]["source_sha256"]) == 64
    hit = _find(store)
    assert hit is not None and str(hit) == "m:v1"
    summary = cached_summary(hit, store)
    assert summary["cached"] is True and summary["version"] == "m:v1"
    assert summary["status"] == "certified" and summary["certified"] is True
    assert summary["objective"] == pytest.approx(meta["objective"])
    assert summary["n_iter"] == meta["n_iter"] and summary["metrics"] == meta["metrics"]


def test_another_spec_another_model_or_other_code_misses(registered, monkeypatch):
    store, _, _ = registered
    assert _find(store, ModelSpec(n_restarts=2)) is None
    assert _find(store, ModelSpec(n_restarts=1, random_state=1)) is None
    # The registration policy is not the model (issue 43 changed this from a miss).
    assert str(_find(store, ModelSpec(n_restarts=1, allow_uncertified=True))) == "m:v1"
    assert str(_find(store, ModelSpec(n_restarts=1, max_gap=1e-3))) == "m:v1"
    assert _find(store, ModelSpec(n_restarts=1, certify="moment")) is None
    assert _find(store, name="other") is None
    # Any edit of catdask's sources (or another version) is another key.
    monkeypatch.setattr(model_cache, "source_sha256", lambda: "0" * 64)
    assert _find(store) is None


def test_new_content_misses_and_any_version_can_hit(registered):
    """A -> (v1), B -> (v2), A again: v1 is found (issue 43: any registered version of the
    same data, spec and code, not only the latest; it was a miss and a duplicate v3)."""
    store, _, (X, y) = registered
    write_dataset(store, "blobs", X * 2.0, y, replace=True)
    assert _find(store) is None
    register_outcome(store, "m", fit_on_dataset(store, "blobs", SPEC), status="certified")
    assert str(_find(store)) == "m:v2"
    write_dataset(store, "blobs", X, y, replace=True)  # back to A's content
    assert str(_find(store)) == "m:v1"


def test_a_removed_or_damaged_version_is_a_miss(registered):
    store, version, _ = registered
    # Damaged: one chunk of one array rewritten; the registry's sha256 refuses it.
    chunk = next(p for p in sorted(version.path.rglob("c/*")) if p.is_file())
    data = bytearray(chunk.read_bytes())
    data[-1] ^= 0xFF
    chunk.write_bytes(bytes(data))
    assert _find(store) is None
    # Removed: nothing to find (the next fit registers v1 again).
    shutil.rmtree(version.path)
    assert list_models(store, "m") == [] and _find(store) is None


def test_a_record_that_contradicts_its_key_is_a_miss(registered, monkeypatch):
    """The key is a digest; the hit is checked against the record's own fields too."""
    store, version, _ = registered
    other = dict(version.meta, dataset="elsewhere")
    monkeypatch.setattr(model_cache, "cache_key", lambda *a, **k: version.meta["cache_key"])
    import catdask.store as store_mod

    real = store_mod.list_models
    monkeypatch.setattr(store_mod, "list_models", lambda s, n=None: [
        type(v)(v.name, v.version, v.path, other) for v in real(s, n)])
    assert _find(store) is None

