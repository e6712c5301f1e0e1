"""What the store must never do, whatever was damaged or removed: replace content behind a
damaged pointer, give an id twice, or call two tables equal that differ in their header."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from catdask.errors import DatasetExistsError, StoreCorruptError
from catdask.store import check_store, gc_store, list_datasets, read_dataset, write_dataset
from catdask.store.registry import register_model


def table(value: float, features=("a", "b", "c")):
    """A 6 x 3 table holding ``value`` everywhere, two classes, with a header."""
    return np.full((6, 3), value), ["x", "y"] * 3, None, {"feature_names": list(features)}


def names(paths) -> list[str]:
    """The last names of local paths or URLs (what gc and check report on S3)."""
    return [str(p).rstrip("/").rpartition("/")[2] for p in paths]


def on_disk(st, name="ds"):
    """The snapshots and the pointer (not the store's dot records: the id counter, leases)."""
    return st.contents(name)


@pytest.mark.parametrize("damage", ["empty", "missing-snapshot", "snapshot-metadata"])
def test_a_damaged_pointer_makes_a_writer_refuse_and_loses_nothing(any_store, damage):
    """Was: with datasets/<name>/zarr.json truncated to 0 bytes, an ingest of other content
    without --replace committed it ("replaced"), and the next gc removed the only copy of
    the old content. The same with the current snapshot's zarr.json truncated (its arrays
    intact): the ingest replaced it, and gc removed both it and the older good copy."""
    st, store = any_store, any_store.store
    write_dataset(store, "ds", *table(1.0))
    write_dataset(store, "ds", *table(2.0), replace=True)  # s2 current, s1 kept
    if damage == "empty":
        st.write("datasets/ds/zarr.json", b"")
    elif damage == "snapshot-metadata":
        st.write("datasets/ds/s2/zarr.json", b"")
    else:
        st.remove("datasets/ds/s2")
    before = on_disk(st)
    with pytest.raises(StoreCorruptError, match=r"damaged.*`catdask check --cleanup`") as err:
        write_dataset(store, "ds", *table(3.0))
    assert "\n" not in str(err.value) and "nothing was written" in str(err.value)
    assert on_disk(st) == before
    [listed] = list_datasets(store)
    assert listed.problem  # listed, flagged
    assert gc_store(store).removed == []  # the old content is not anybody's garbage
    report = check_store(store, cleanup=True)
    damaged = ["corrupt-snapshot"] if damage == "snapshot-metadata" else []  # stays, reported
    assert [p.kind for p in report.errors] == damaged, report.problems
    expected = 2.0 if damage == "empty" else 1.0  # the newest committed one that verifies
    np.testing.assert_array_equal(read_dataset(store, "ds").X, np.full((6, 3), expected))
    with pytest.raises(DatasetExistsError):  # and now the usual rule: replace needs --replace
        write_dataset(store, "ds", *table(3.0))
    assert write_dataset(store, "ds", *table(3.0), replace=True).snapshot == "s3"


def test_the_content_a_damaged_pointer_records_may_be_written_again(any_store):
    """The pointer names a lost snapshot but records its checksum: ingesting that content again
    repairs the name without --replace (was: refused, and check --cleanup then restored the
    older content, so the user's own re-ingest needed --replace)."""
    st, store = any_store, any_store.store
    write_dataset(store, "ds", *table(1.0))
    write_dataset(store, "ds", *table(2.0), replace=True)
    st.remove("datasets/ds/s2")
    info = write_dataset(store, "ds", *table(2.0))
    assert info.written and info.snapshot == "s3", info
    assert check_store(store).ok


def test_a_damaged_pointer_does_not_let_older_content_replace_the_newest(any_store):
    """Content addressing under a damaged pointer: ingesting A again while B (newer) may be
    current must not point the name back at A's snapshot without --replace (gc would then
    remove B); the newest snapshot that verifies may be named again, as check --cleanup would."""
    st, store = any_store, any_store.store
    write_dataset(store, "ds", *table(1.0))  # s1: A
    write_dataset(store, "ds", *table(2.0), replace=True)  # s2: B, current
    st.write("datasets/ds/zarr.json", b"")
    with pytest.raises(StoreCorruptError, match="`catdask check --cleanup`"):
        write_dataset(store, "ds", *table(1.0))
    assert on_disk(st) == ["s1", "s2", "zarr.json"]
    info = write_dataset(store, "ds", *table(2.0))  # B: what check --cleanup restores
    assert not info.written and info.snapshot == "s2"
    assert check_store(store).ok


def test_cleanup_of_an_unreadable_pointer_removes_nothing_it_guessed_about(any_store):
    """A, B, then A again: the pointer names s1 (content addressing), s2 is newer. With the
    pointer truncated, check --cleanup can only guess (the newest that verifies, s2); it removed
    s1 in the same pass, the content that was current. Now it keeps it and says so."""
    st, store = any_store, any_store.store
    write_dataset(store, "ds", *table(1.0))
    write_dataset(store, "ds", *table(2.0), replace=True)
    assert write_dataset(store, "ds", *table(1.0), replace=True).snapshot == "s1"
    st.write("datasets/ds/zarr.json", b"")
    report = check_store(store, cleanup=True)
    assert report.restored == ["ds: unreadable pointer -> s2 (the newest that verifies; the "
                               "other snapshots stay)"]
    assert report.removed == [] and on_disk(st) == ["s1", "s2", "zarr.json"]
    assert write_dataset(store, "ds", *table(1.0), replace=True).snapshot == "s1"


def test_cleanup_restores_the_content_a_readable_pointer_records(any_store):
    """The pointer names a lost snapshot but records its content, which an older snapshot
    holds too: that one is restored, not merely the newest that verifies."""
    st, store = any_store, any_store.store
    write_dataset(store, "ds", *table(1.0))  # s1: A
    write_dataset(store, "ds", *table(2.0), replace=True)  # s2: B
    write_dataset(store, "ds", *table(1.0, features=("p", "q", "r")), replace=True)  # s3: A
    st.remove("datasets/ds/s3")
    report = check_store(store, cleanup=True)
    assert report.restored == ["ds: s3 -> s1"], report.restored
    np.testing.assert_array_equal(read_dataset(store, "ds").X, np.full((6, 3), 1.0))


def test_replace_over_a_damaged_pointer_is_allowed_and_keeps_the_old_snapshots(any_store):
    st, store = any_store, any_store.store
    write_dataset(store, "ds", *table(1.0))
    st.write("datasets/ds/zarr.json", b"")
    info = write_dataset(store, "ds", *table(2.0), replace=True)
    assert info.written and info.snapshot == "s2" and on_disk(st) == ["s1", "s2", "zarr.json"]


def test_a_snapshot_id_is_never_given_twice_even_after_gc(any_store):
    """Was: `d/s2` named content B, gc removed it, and a later ingest named content C `s2`."""
    st, store = any_store, any_store.store
    write_dataset(store, "ds", *table(1.0))  # s1
    write_dataset(store, "ds", *table(2.0), replace=True)  # s2
    assert write_dataset(store, "ds", *table(1.0), replace=True).snapshot == "s1"  # back to s1
    assert names(gc_store(store).removed) == ["s2"]
    assert on_disk(st) == ["s1", "zarr.json"]
    info = write_dataset(store, "ds", *table(3.0), replace=True)
    assert info.snapshot == "s3", info
    assert st.pointer("ds").newest_committed == 3
    assert check_store(store).ok


def test_a_snapshot_id_is_never_given_twice_after_gc_and_a_damaged_pointer(any_store):
    """Was: the pointer back at s1, gc removed s2, the pointer then damaged (its
    ``newest_committed`` lost with it): an ingest with --replace named new content `s2`."""
    st, store = any_store, any_store.store
    write_dataset(store, "ds", *table(1.0))  # s1
    write_dataset(store, "ds", *table(2.0), replace=True)  # s2
    write_dataset(store, "ds", *table(1.0), replace=True)  # back to s1
    assert names(gc_store(store).removed) == ["s2"]
    st.write("datasets/ds/zarr.json", b"")
    info = write_dataset(store, "ds", *table(3.0), replace=True)
    assert info.written and info.snapshot == "s3", info
    # "<N> <uuid>" since issue 39 (the uuid makes every compare-and-swap's bytes unique)
    assert st.read("datasets/ds/.newest-snapshot").split()[0] == b"3"
    report = check_store(store)
    assert report.ok, report.problems  # the record is the store's own file, not a stray


def test_a_model_version_number_is_never_given_twice_after_removal(store):
    """Was: `n:v10` removed, then the next fit registered another `n:v10`."""
    w = {"W": np.eye(3, 2)}
    assert [register_model(store, "n", w, {}).version for _ in range(3)] == [1, 2, 3]
    shutil.rmtree(Path(store) / "models" / "n" / "v3")
    assert register_model(store, "n", w, {}).version == 4
    for v in (1, 2, 4):
        shutil.rmtree(Path(store) / "models" / "n" / f"v{v}")
    assert register_model(store, "n", w, {}).version == 5
    # The record of the highest number is the store's own file, not a stray (these bare
    # arrays are no estimator, so the loader's own finding is left aside).
    assert [p.kind for p in check_store(store).problems] == ["model"]


def test_feature_names_are_part_of_the_content(store):
    """Was: a re-ingest that changed only the header was "unchanged" and the new feature names
    were dropped."""
    assert write_dataset(store, "ds", *table(1.0)).snapshot == "s1"
    renamed = write_dataset(store, "ds", *table(1.0, features=("p", "q", "r")))
    assert renamed.written and renamed.snapshot == "s2"
    assert read_dataset(store, "ds").attrs["provenance"]["feature_names"] == ["p", "q", "r"]
    same = write_dataset(store, "ds", *table(1.0, features=("p", "q", "r")))
    assert not same.written and same.snapshot == "s2"
    back = write_dataset(store, "ds", *table(1.0))  # the first header: s1 holds it again
    assert not back.written and back.snapshot == "s1"
    assert read_dataset(store, "ds").attrs["provenance"]["feature_names"] == ["a", "b", "c"]
