"""The models' listing index (catdask.store.model_index), on a local folder and on S3: a listing
reads it instead of every version's zarr.json, and stays exactly the committed versions when
the index lags (a writer killed between its commit and the index), is damaged, or is raced by
a removal."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from catdask.store import list_models, load_model_version, register_model
from catdask.store import model_index
from catdask.store.model_check import check_models
from catdask.store.model_entries import remove_version
from catdask.store.model_index import forget_version, indexed_meta, page_key, record_versions
from catdask.store.root import open_store

from tests.helpers.store_faults import STORE_ONLY_CHILD_PRELUDE
from tests.store.test_registry import arrays

# A child that registers one version of "m" and dies right after its commit, before the index.
DIES_AFTER_COMMIT = STORE_ONLY_CHILD_PRELUDE + """
import os, sys
import numpy as np
from catdask.store import _atomic, register_model
def hook(label):
    if label == "model-committed":
        os._exit(3)
_atomic._CRASH_HOOK = hook
register_model(sys.argv[1], "m", {"a": np.ones(3)}, {"objective": 7.0})
"""


@pytest.fixture
def root(any_store, monkeypatch):
    monkeypatch.setattr(model_index, "PAGE_SIZE", 2)  # three versions span two pages
    return open_store(any_store.store)


def listed(root, name=None):
    return [(mv.name, mv.version, mv.meta, mv.problem) for mv in list_models(root, name)]


def loaded(root, name, versions):
    return [(name, v, load_model_version(root, name, v)[1], None) for v in versions]


def index_problems(root):
    """Check's findings about the listing index (the test's arrays are no real estimator, so
    check's loader finds each version "does not load": not what these tests look at)."""
    found = check_models(root).problems
    return [p for p in found if "listing index" in p.message]


def test_a_listing_is_the_committed_versions_read_from_the_index(root, monkeypatch):
    for i in range(3):
        register_model(root, "m", arrays(i), {"objective": float(i)})
    register_model(root, "other", arrays(), {"objective": 9.0})
    assert sorted(indexed_meta(root, "m", [1, 2, 3])) == [1, 2, 3]
    assert sorted(m.key for m in root.backend.list("models/m/.index/")) == [
        page_key("m", 0), page_key("m", 1)]
    expected = loaded(root, "m", [1, 2, 3]) + loaded(root, "other", [1])
    assert listed(root) == expected
    # Read from the index alone: no version's zarr.json is opened by the listing.
    from catdask.store import registry_read

    def no_reads(*a, **k):
        raise AssertionError("a version's zarr.json was read")

    monkeypatch.setattr(registry_read._zarr_io, "read_node", no_reads)
    assert listed(root) == expected
    assert listed(root, "m") == expected[:3]


def test_a_version_committed_but_not_indexed_is_listed_and_added(any_store, root):
    register_model(root, "m", arrays(), {"objective": 1.0})
    proc = subprocess.run([sys.executable, "-c", DIES_AFTER_COMMIT, any_store.url],
                          capture_output=True, timeout=120)
    assert proc.returncode == 3, proc.stderr.decode()
    assert sorted(indexed_meta(root, "m", [1, 2])) == [1]  # the writer died before the index
    assert listed(root) == loaded(root, "m", [1, 2])
    assert listed(root)[1][2]["objective"] == 7.0
    assert sorted(indexed_meta(root, "m", [1, 2])) == [1, 2]  # the listing added it
    assert register_model(root, "m", arrays(), {}).version == 3
    assert [v for _, v, _, _ in listed(root)] == [1, 2, 3]
    assert index_problems(root) == []


def test_a_damaged_page_is_read_around_and_written_again(root):
    for i in range(3):
        register_model(root, "m", arrays(i), {"objective": float(i)})
    root.backend.put(page_key("m", 0), b'{"format": 1, "versions": ')
    assert listed(root) == loaded(root, "m", [1, 2, 3])
    assert sorted(indexed_meta(root, "m", [1, 2, 3])) == [1, 2, 3]
    root.backend.put(page_key("m", 1), json.dumps(  # an entry naming another version
        {"format": 1, "versions": {"3": {"version": 1}}, "removed": []}).encode())
    assert listed(root) == loaded(root, "m", [1, 2, 3])


def test_a_removed_version_leaves_the_listing_and_is_never_indexed_again(root):
    for i in range(3):
        register_model(root, "m", arrays(i), {"objective": float(i)})
    meta2 = load_model_version(root, "m", 2)[1]
    remove_version(root, "m", 2)
    assert [v for _, v, _, _ in listed(root)] == [1, 3]
    # A registration or a reader that read v2 before its removal adds it too late: refused.
    record_versions(root, "m", {2: meta2})
    assert sorted(indexed_meta(root, "m", [1, 2, 3])) == [1, 3]


def test_a_removal_killed_after_the_index_keeps_the_version_listed(root):
    """Between ``forget_version`` and the deletion of its zarr.json the version is still
    committed: listed (read from its zarr.json) and loadable, as before the removal began."""
    for i in range(2):
        register_model(root, "m", arrays(i), {"objective": float(i)})
    forget_version(root, "m", 2)
    assert sorted(indexed_meta(root, "m", [1, 2])) == [1]
    assert listed(root) == loaded(root, "m", [1, 2])
    remove_version(root, "m", 2)
    assert [v for _, v, _, _ in listed(root)] == [1]


def test_check_reports_an_index_that_disagrees_with_a_version(root):
    from sklearn.datasets import load_iris

    from catdask import CategorySpace
    from catdask.store import register_estimator

    model = CategorySpace(n_restarts=1).fit(*load_iris(return_X_y=True))
    for i in range(2):
        register_estimator(root, "m", model, {"objective": float(i)})
    data, tag = root.backend.get(page_key("m", 0))
    page = json.loads(data)
    page["versions"]["2"]["objective"] = 99.0
    assert index_problems(root) == []
    root.backend.put(page_key("m", 0), json.dumps(page).encode())
    [problem] = index_problems(root)
    assert "listing index holds other metadata for m:v2" in problem.message
    assert str(problem.path).endswith("models/m/.index")


def test_a_version_deleted_by_hand_is_named_by_check(root):
    """Deleted behind the store's back (its keys, not through the registry, which leaves the
    index first), a version stays in the index; where its prefix still lists (SeaweedFS keeps
    empty folders) check names the entry, and the listing is right once the index is gone."""
    for i in range(2):
        register_model(root, "m", arrays(i), {"objective": float(i)})
    for key in [m.key for m in root.backend.list("models/m/v2/")]:
        root.backend.delete(key)
    if 2 in [v for _, v, _, _ in listed(root)]:
        [problem] = index_problems(root)
        assert "names m:v2, which is not committed" in problem.message
    for key in [m.key for m in root.backend.list("models/m/.index/")]:
        root.backend.delete(key)
    assert listed(root) == loaded(root, "m", [1])
    assert index_problems(root) == []
