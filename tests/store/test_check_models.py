"""Check's model part on a local folder and on S3: versions load, leftovers of dead
registrations and stray objects are reported, a registration being written is not."""

from __future__ import annotations

from catdask.object_store.lease import acquire
from catdask.store import register_estimator
from catdask.store.check import check_models
from catdask.store.model_entries import remove_uncommitted_versions
from catdask.store.root import open_store


def test_check_models_reports_what_is_wrong_and_nothing_else(any_store):
    from catdask import CategorySpace
    from tests.helpers.data import make_blobs

    X, y = make_blobs(n_per_class=15, n_features=4, n_classes=3)
    register_estimator(any_store.store, "cs", CategorySpace().fit(X, y), {"dataset": "blobs"})
    report = check_models(any_store.store)
    assert report.ok and [r["name"] for r in report.checked] == ["cs:v1"], report.problems
    backend = open_store(any_store.store).backend
    # A registration writing v8 now (its lease live), a dead one's v9, a stray object.
    live = acquire(backend, "models/cs/.writing/v8", "registration of cs:v8", 60)
    try:
        backend.put("models/cs/v8/W/zarr.json", b"{}")
        backend.put("models/cs/v9/W/zarr.json", b"{}")
        backend.put("models/cs/notes.txt", b"hello")
        report = check_models(any_store.store)
        kinds = sorted((p.kind, str(p.path).rsplit("/", 1)[-1]) for p in report.problems)
        assert kinds == [("stray", "notes.txt"), ("temporary", "v9")], report.problems
        assert [str(p).rsplit("/", 1)[-1] for p in remove_uncommitted_versions(
            open_store(any_store.store), older_than_seconds=0)] == ["v9"]
    finally:
        live.release()
    # Let go without committing: v8 is a dead registration's leftover now.
    backend.delete("models/cs/notes.txt")
    assert [p.kind for p in check_models(any_store.store).problems] == ["temporary"]
    remove_uncommitted_versions(open_store(any_store.store), older_than_seconds=0)
    # A damaged version does not load, and says so.
    backend.put("models/cs/v1/zarr.json", b"{damaged")
    report = check_models(any_store.store)
    assert [p.kind for p in report.problems] == ["model"]
    assert "not valid JSON" in report.problems[0].message
