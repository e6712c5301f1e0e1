"""Data-set store: round trips, idempotent and atomic writes, validation of damaged stores."""

from __future__ import annotations

import errno
import json
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
import zarr

from catdask.errors import (
    DatasetExistsError,
    DatasetNotFoundError,
    InvalidNameError,
    StoreCorruptError,
    StoreWriteError,
)
from catdask.store import (
    _atomic,
    _zarr_io,
    check_store,
    cleanup_temporaries,
    list_datasets,
    open_dataset_arrays,
    read_dataset,
    resolve_store,
    verify_dataset,
    write_dataset,
)
from tests.helpers.dataset_store import pointer_of
from tests.helpers.paths import REPO
from tests.helpers.store_faults import (
    STORE_ONLY_CHILD_PRELUDE,
    exit_when_writing_code,
    fail_writing,
)


def toy(n=10, d=3, seed=0):
    r = np.random.default_rng(seed)
    X = r.standard_normal((n, d))
    y = np.array(["a", "b"] * (n // 2))
    return X, y


def make(store, name="toy", chunk_rows=4, **kw):
    X, y = toy(**kw)
    info = write_dataset(
        store,
        name,
        X,
        y,
        {"a": "Alpha", "b": "Beta"},
        {"files": [{"name": "toy.csv", "sha256": "0" * 64}]},
        chunk_rows=chunk_rows,
    )
    return info, X, y


def visible(store):
    """The names under datasets/ and any temporary left behind there (none when the backend
    removed the emptied folder: object storage has no folders)."""
    parent = Path(store) / "datasets"
    return sorted(p.name for p in parent.iterdir()) if parent.exists() else []


def contents(store, name="toy"):
    """What a data-set folder holds besides its records (the id counter, leases): snapshots,
    pointer, temporaries."""
    return sorted(p.name for p in (Path(store) / "datasets" / name).iterdir()
                  if p.name not in (".newest-snapshot", ".writing", ".holds", ".removing"))


def snap(store, name="toy") -> Path:
    """The folder of the current snapshot of data set ``name``."""
    folder = Path(store) / "datasets" / name
    return folder / pointer_of(folder).snapshot


def edit_json(path: Path, fn):
    meta = json.loads(path.read_text())
    fn(meta)
    path.write_text(json.dumps(meta))


# --------------------------------------------------------------------------- store root


def test_resolve_store_argument_env_default(tmp_path, monkeypatch):
    monkeypatch.delenv("CATDASK_STORE", raising=False)
    monkeypatch.chdir(tmp_path)
    assert resolve_store() == tmp_path.resolve() / "catdask-store"
    monkeypatch.setenv("CATDASK_STORE", str(tmp_path / "env-store"))
    assert resolve_store() == (tmp_path / "env-store").resolve()
    assert resolve_store(tmp_path / "arg") == (tmp_path / "arg").resolve()
    (tmp_path / "file").write_text("x")
    with pytest.raises(NotADirectoryError):
        resolve_store(tmp_path / "file")


def test_env_store_is_used_by_writers(tmp_path, monkeypatch):
    monkeypatch.setenv("CATDASK_STORE", str(tmp_path / "envstore"))
    X, y = toy()
    write_dataset(None, "toy", X, y)
    assert (tmp_path / "envstore" / "datasets" / "toy" / "zarr.json").is_file()
    assert [d.name for d in list_datasets()] == ["toy"]


# --------------------------------------------------------------------------- round trip


def test_round_trip_string_labels(store):
    info, X, y = make(store)
    assert info.written and not info.replaced
    assert (info.n_samples, info.n_features, info.n_classes) == (10, 3, 2)
    d = read_dataset(store, "toy")
    np.testing.assert_array_equal(d.X, X)
    assert d.X.dtype == np.float64
    np.testing.assert_array_equal(d.y, y)
    np.testing.assert_array_equal(d.classes, ["a", "b"])
    np.testing.assert_array_equal(d.y_codes, (y == "b").astype(np.int32))
    assert d.label_names == ["Alpha", "Beta"]
    a = d.attrs
    assert a["n_samples"] == 10 and a["n_features"] == 3 and a["class_counts"] == [5, 5]
    assert a["source_sha256"] == {"toy.csv": "0" * 64}
    assert a["provenance"]["files"][0]["name"] == "toy.csv"
    assert a["content_sha256"] == info.content_sha256 and len(info.content_sha256) == 64
    assert a["created"].endswith("+00:00")
    assert isinstance(a["catdask_version"], str) and a["catdask_version"]


def test_round_trip_int_labels_and_row_chunks(store):
    r = np.random.default_rng(1)
    X = r.standard_normal((25, 4))
    y = np.repeat([7, 1, 3, 5, 2], 5)
    write_dataset(store, "ints", X, y, chunk_rows=6)
    d = read_dataset(store, "ints")
    np.testing.assert_array_equal(d.y, y)
    assert d.y.dtype.kind == "i"
    np.testing.assert_array_equal(d.classes, [1, 2, 3, 5, 7])
    assert d.label_names == ["1", "2", "3", "5", "7"]
    arr = zarr.open_group(str(snap(store, "ints")), mode="r")["X"]
    assert arr.chunks == (6, 4)  # chunked by rows only
    assert arr.dtype == np.float64


def test_label_names_as_list_and_bad_length(store):
    X, y = toy()
    write_dataset(store, "l", X, y, ["first", "second"])
    assert read_dataset(store, "l").label_names == ["first", "second"]
    with pytest.raises(ValueError, match="label_names has 3 entries"):
        write_dataset(store, "l2", X, y, ["a", "b", "c"])


def test_open_dataset_arrays_zarr_and_dask(store):
    _info, X, y = make(store, n=20)
    lazy = open_dataset_arrays(store, "toy")
    assert isinstance(lazy.X, zarr.Array) and lazy.X.shape == (20, 3)
    np.testing.assert_array_equal(lazy.X[:], X)
    dk = open_dataset_arrays(store, "toy", dask=True)
    assert dk.X.chunks[0] == (4, 4, 4, 4, 4)
    assert isinstance(dk.y_codes, np.ndarray)  # labels (N small integers) read on the driver
    np.testing.assert_allclose(dk.X.sum(axis=0).compute(), X.sum(axis=0))
    np.testing.assert_array_equal(dk.classes[dk.y_codes], y)
    assert verify_dataset(store, "toy").content_sha256 == lazy.attrs["content_sha256"]


def test_list_datasets_skips_temporaries(store):
    make(store, "b")
    make(store, "a")
    (store / "datasets" / ".tmp-ds-c-123").mkdir()
    infos = list_datasets(store)
    assert [i.name for i in infos] == ["a", "b"]
    assert all(i.problem is None and i.n_samples == 10 for i in infos)
    assert list_datasets(store / "nowhere") == []


def test_not_found_lists_stored_names(store):
    make(store, "vehicle")
    with pytest.raises(DatasetNotFoundError, match="vehicle") as info:
        read_dataset(store, "wine")
    assert isinstance(info.value, KeyError)
    assert "catdask ingest wine" in str(info.value)


def test_invalid_name_is_rejected_before_touching_disk(store):
    X, y = toy()
    with pytest.raises(InvalidNameError):
        write_dataset(store, "../escape", X, y)
    with pytest.raises(InvalidNameError):
        read_dataset(store, "a/b")
    assert not (store / "escape").exists() and not store.exists()


@pytest.mark.parametrize(
    "X, y, match",
    [
        (np.array([[1.0, np.nan], [2.0, 3.0]]), ["a", "b"], "non-finite value at row 0, column 1"),
        (np.ones((3, 2)), ["a", "b"], "y has 2 labels but X has 3 rows"),
        (np.ones(3), ["a", "b", "c"], "2-D"),
        (np.ones((2, 2)), np.array(["a", 1], dtype=object), "mixes types"),
        (np.ones((2, 2)), [0.5, 1.5], "non-integral float labels"),
        (np.array([["x", "y"], ["z", "w"]]), ["a", "b"], "must be numeric"),
    ],
)
def test_write_rejects_bad_data(store, X, y, match):
    with pytest.raises(ValueError, match=match):
        write_dataset(store, "bad", X, y)
    assert not (store / "datasets" / "bad").exists()


# --------------------------------------------------------------------------- idempotency


def test_same_content_is_not_rewritten(store):
    info1, X, y = make(store)
    mtime = (store / "datasets" / "toy" / "zarr.json").stat().st_mtime_ns
    info2 = write_dataset(
        store, "toy", X.copy(), list(y), {"a": "Alpha", "b": "Beta"}, {"other": "prov"}
    )
    assert info2.written is False and info2.content_sha256 == info1.content_sha256
    assert (store / "datasets" / "toy" / "zarr.json").stat().st_mtime_ns == mtime
    assert visible(store) == ["toy"]


def test_new_label_names_rewrite(store):
    _info, X, y = make(store)
    info = write_dataset(store, "toy", X, y, {"a": "A!", "b": "B!"})
    assert info.written and info.replaced
    assert read_dataset(store, "toy").label_names == ["A!", "B!"]


def test_different_content_needs_replace_and_names_both_checksums(store):
    info1, X, y = make(store)
    X2 = np.arange(12.0).reshape(4, 3)
    with pytest.raises(DatasetExistsError) as err:
        write_dataset(store, "toy", X2, ["p", "q", "p", "q"])
    assert isinstance(err.value, ValueError)
    msg = str(err.value)
    assert info1.content_sha256 in msg and "Pass replace=True" in msg
    assert "--replace" not in msg  # the library speaks Python; the CLI says its own flag
    assert err.value.describe("Pass --replace").count("--replace") == 1
    import pickle  # a failed flow run's exception may be persisted: it must come back whole

    again = pickle.loads(pickle.dumps(err.value))
    assert str(again) == msg and again.stored_sha256 == info1.content_sha256
    assert "s2" not in contents(store)  # nothing written
    info = write_dataset(store, "toy", X2, ["p", "q", "p", "q"], replace=True)
    assert msg.count(info.content_sha256) == 1
    assert info.written and info.replaced and info.snapshot == "s2"
    d = read_dataset(store, "toy")
    np.testing.assert_array_equal(d.X, X2)
    assert (d.snapshot, d.sha256, d.path) == ("s2", info.content_sha256, snap(store))
    # The old snapshot stays (models may refer to it) until gc; no temporaries are left.
    assert contents(store) == ["s1", "s2", "zarr.json"]
    np.testing.assert_array_equal(read_dataset(store, "toy").X, X2)


def test_concurrent_identical_writes(store):
    X, y = toy(n=200)
    results, errors = [], []

    def work():
        try:
            results.append(write_dataset(store, "same", X, y))
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert sum(r.written for r in results) == 1
    assert len({r.content_sha256 for r in results}) == 1
    assert visible(store) == ["same"]
    np.testing.assert_array_equal(read_dataset(store, "same").X, X)


@pytest.mark.slow
def test_readers_never_see_a_mixed_or_missing_data_set_during_replacement(store):
    write_dataset(store, "ds", np.zeros((10, 2)), [0, 1] * 5)
    errors, stop = [], threading.Event()

    def writer(i):
        try:
            for j in range(10):
                write_dataset(store, "ds", np.full((10, 2), float(100 * i + j + 1)), [0, 1] * 5,
                              replace=True)
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    def reader():
        try:
            while not stop.is_set():
                d = read_dataset(store, "ds")
                assert np.all(d.X == d.X[0, 0]), "mixed content"
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    readers = [threading.Thread(target=reader) for _ in range(3)]
    writers = [threading.Thread(target=writer, args=(i,)) for i in range(6)]
    for t in readers + writers:
        t.start()
    for t in writers:
        t.join()
    stop.set()
    for t in readers:
        t.join()
    assert not errors, errors
    assert visible(store) == ["ds"]


# --------------------------------------------------------------------------- atomic writes


def test_crash_mid_write_leaves_nothing_visible(store, monkeypatch):
    monkeypatch.setattr(_zarr_io, "write_array", fail_writing("y", RuntimeError("simulated crash")))
    X, y = toy()
    with pytest.raises(RuntimeError, match="simulated crash"):
        write_dataset(store, "toy", X, y)
    assert visible(store) == []  # no data set, no temporary
    assert list_datasets(store) == []
    with pytest.raises(DatasetNotFoundError):
        read_dataset(store, "toy")


def test_crash_mid_replace_keeps_previous(store, monkeypatch):
    _info, X, y = make(store)
    monkeypatch.setattr(_zarr_io, "write_array", fail_writing("y", KeyboardInterrupt()))
    with pytest.raises(KeyboardInterrupt):
        write_dataset(store, "toy", X + 1, y, replace=True)
    monkeypatch.undo()
    np.testing.assert_array_equal(read_dataset(store, "toy").X, X)
    assert visible(store) == ["toy"]


def test_disk_full_is_reported_and_cleaned(store, monkeypatch):
    _info, X, y = make(store)
    monkeypatch.setattr(
        _zarr_io, "write_array", fail_writing("X", OSError(errno.ENOSPC, "No space left on device"))
    )
    with pytest.raises(StoreWriteError) as info:
        write_dataset(store, "toy", X * 2, y, replace=True)
    err = info.value
    assert isinstance(err, OSError) and err.errno == errno.ENOSPC
    assert "No space left" in str(err) and "unchanged" in str(err)
    assert visible(store) == ["toy"] and contents(store) == ["s1", "zarr.json"]
    np.testing.assert_array_equal(read_dataset(store, "toy").X, X)


def test_hard_crash_leaves_only_a_temporary(store):
    """A process killed mid-write (os._exit) leaves an uncommitted snapshot (no zarr.json)
    that is invisible and cleanable."""
    # Import only catdask.store in the child (not catdask/__init__ and scikit-learn): faster.
    code = STORE_ONLY_CHILD_PRELUDE + exit_when_writing_code("y", 3) + f"""
import numpy as np
from catdask.store import write_dataset
write_dataset({str(store)!r}, "toy", np.ones((4, 2)), [0, 0, 1, 1])
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=120)
    assert proc.returncode == 3, proc.stderr.decode()
    leftovers = contents(store)
    assert leftovers == ["s1"] and not (store / "datasets" / "toy" / "s1" / "zarr.json").exists()
    assert list_datasets(store) == []
    assert cleanup_temporaries(store, older_than_seconds=3600) == []  # too young: maybe running
    removed = cleanup_temporaries(store, older_than_seconds=0)
    assert [p.name for p in removed] == leftovers
    assert contents(store) == [] and list_datasets(store) == []


def test_cleanup_skips_a_running_writers_temporary(store):
    """A writer holds a lock on its temporary: cleanup (even with age 0) leaves it alone."""
    seen = []

    def hook(label):
        if label == "snapshot-written":
            seen.append(cleanup_temporaries(store, older_than_seconds=0))
            seen.append([p.kind for p in check_store(store).problems])

    _atomic._CRASH_HOOK = hook
    try:
        make(store)
    finally:
        _atomic._CRASH_HOOK = None
    assert seen == [[], ["empty"]]
    assert read_dataset(store, "toy").snapshot == "s1"


@pytest.mark.parametrize("folder", ["datasets/toy", "models/m"])
def test_a_seam_write_in_flight_is_no_leftover_for_a_minute(store, folder):
    """A seam write's ``.tmp-put-`` holds no lock: check and cleanup leave it alone while it
    is younger than a minute (a running registration's index write, in CI), not after."""
    import os

    make(store)
    tmp = store / folder / ".tmp-put-0123456789abcdef"
    tmp.parent.mkdir(parents=True, exist_ok=True)
    tmp.write_bytes(b"{}")
    assert [p.path for p in check_store(store).problems if p.kind == "temporary"] == []
    assert cleanup_temporaries(store, older_than_seconds=0) == [] and tmp.exists()
    os.utime(tmp, (tmp.stat().st_atime - 120, tmp.stat().st_mtime - 120))
    assert [p.path for p in check_store(store).problems if p.kind == "temporary"] == [tmp]
    assert cleanup_temporaries(store, older_than_seconds=0) == [tmp] and not tmp.exists()


# --------------------------------------------------------------------------- damaged stores


def corrupt(store, match, verify=True):
    with pytest.raises(StoreCorruptError, match=match) as info:
        read_dataset(store, "toy", verify=verify)
    assert "toy" in str(info.value)
    return info.value


def test_missing_array(store):
    make(store)
    import shutil

    shutil.rmtree(snap(store) / "y")
    corrupt(store, "array 'y' is missing")


def test_wrong_dtype(store):
    make(store)
    g = zarr.open_group(str(snap(store)), mode="r+")
    X = g["X"][:]
    del g["X"]
    g.create_array("X", data=X.astype(np.float32))
    corrupt(store, "data type float32")


def test_wrong_shape_in_attributes(store):
    make(store)
    edit_json(
        snap(store) / "zarr.json", lambda m: m["attributes"].update(n_samples=11)
    )
    corrupt(store, r"X has shape \(10, 3\) but the attributes say \(11, 3\)")


def test_y_length_mismatch(store):
    make(store)
    g = zarr.open_group(str(snap(store)), mode="r+")
    del g["y"]
    g.create_array("y", data=np.zeros(9, dtype=np.int32))
    corrupt(store, "y has 9 labels but X has 10 rows")


def test_edited_attributes(store):
    make(store)
    edit_json(
        snap(store) / "zarr.json",
        lambda m: m["attributes"]["provenance"].update(note="edited by hand"),
    )
    corrupt(store, "attributes were modified")
    read_dataset(store, "toy", verify=False)  # structure is fine; only the checksum catches it


def test_edited_values(store):
    make(store)
    g = zarr.open_group(str(snap(store)), mode="r+")
    g["X"][0, 0] = 123.0
    corrupt(store, "content checksum mismatch")


def test_swapped_class_labels(store):
    make(store)

    def swap(m):
        m["attributes"]["classes"] = ["b", "a"]

    edit_json(snap(store) / "zarr.json", swap)
    corrupt(store, "modified")


def test_truncated_chunk(store):
    make(store)
    chunk = snap(store) / "X" / "c" / "1" / "0"
    data = chunk.read_bytes()
    chunk.write_bytes(data[: len(data) // 2])
    corrupt(store, "truncated or corrupt chunk", verify=False)


def test_missing_chunk(store):
    make(store)
    (snap(store) / "X" / "c" / "1" / "0").unlink()
    corrupt(store, "1 of 3 chunk file", verify=False)
    with pytest.raises(StoreCorruptError, match="chunk file"):
        open_dataset_arrays(store, "toy", dask=True)


def test_group_json_not_json(store):
    make(store)
    (snap(store) / "zarr.json").write_text("{not json")
    corrupt(store, "not valid JSON")
    [info] = list_datasets(store)
    assert info.name == "toy" and "not valid JSON" in info.problem


def test_missing_attribute(store):
    make(store)
    edit_json(snap(store) / "zarr.json", lambda m: m["attributes"].pop("classes"))
    corrupt(store, "attribute 'classes' is missing")


def test_string_array_is_rejected(store):
    make(store)
    g = zarr.open_group(str(snap(store)), mode="r+")
    del g["y"]
    s = g.create_array("y", shape=(10,), dtype=str)
    s[:] = np.array(["a"] * 10)
    corrupt(store, "only numeric arrays")


def test_unknown_codec_is_rejected(store):
    make(store)

    def pickle_codec(m):
        m["codecs"] = [
            {"name": "bytes", "configuration": {"endian": "little"}},
            {"name": "numcodecs.pickle"},
        ]

    edit_json(snap(store) / "X" / "zarr.json", pickle_codec)
    corrupt(store, "codec 'numcodecs.pickle'")


def test_reingest_repairs_a_damaged_data_set(store):
    _info, X, y = make(store)
    zarr.open_group(str(snap(store)), mode="r+")["X"][0, 0] = 123.0
    info = write_dataset(store, "toy", X, y, {"a": "Alpha", "b": "Beta"})
    assert info.written and info.replaced  # same attributes, but the stored values were damaged
    np.testing.assert_array_equal(read_dataset(store, "toy").X, X)


def test_verify_dataset_streams_and_detects(store):
    make(store)
    g = zarr.open_group(str(snap(store)), mode="r+")
    g["X"][9, 2] = -1.0
    with pytest.raises(StoreCorruptError, match="content checksum mismatch"):
        verify_dataset(store, "toy")


def test_end_to_end_with_parser(store):
    from catdask.catalog import parse_table

    X, y, names, prov = parse_table(REPO / "data" / "tiny" / "header.csv", "species")
    info = write_dataset(store, "tiny-iris", X, y, names, prov)
    d = read_dataset(store, "tiny-iris")
    np.testing.assert_array_equal(d.X, X)
    np.testing.assert_array_equal(d.y, y)
    assert d.attrs["source_sha256"] == {"header.csv": prov["files"][0]["sha256"]}
    assert write_dataset(store, "tiny-iris", X, y, names, prov).written is False
    assert info.n_classes == 2
    # Provenance nested under "provenance" (as the ingest pipeline passes it) works too.
    write_dataset(store, "nested", X, y, names, {"provenance": prov})
    assert read_dataset(store, "nested").attrs["source_sha256"] == d.attrs["source_sha256"]


# --------------------------------------------------------------------------- the pointer


def test_damaged_pointer_is_reported_and_a_write_repairs_it(store):
    _info, X, y = make(store)
    (store / "datasets" / "toy" / "zarr.json").write_text("{not json")
    with pytest.raises(StoreCorruptError, match="not valid JSON"):
        read_dataset(store, "toy")
    [info] = list_datasets(store)
    assert "not valid JSON" in info.problem
    assert [p.kind for p in check_store(store).errors] == ["pointer"]
    info = write_dataset(store, "toy", X, y, {"a": "Alpha", "b": "Beta"})
    # Content addressing: s1 holds this content intact, so the new pointer names it again
    # and nothing is written.
    assert not info.written and info.replaced and info.snapshot == "s1"
    assert contents(store) == ["s1", "zarr.json"]
    np.testing.assert_array_equal(read_dataset(store, "toy").X, X)
    assert check_store(store).ok


def _old_layout(store, name="toy"):
    """Turn data set ``name`` into the in-place layout older catdask versions wrote."""
    import shutil

    folder = store / "datasets" / name
    current = snap(store, name)
    for child in ("X", "y"):
        shutil.move(str(current / child), str(folder / child))
    shutil.copy(current / "zarr.json", folder / "zarr.json")
    shutil.rmtree(current)
    (folder / ".lock").unlink(missing_ok=True)  # the name lock of versions before issue 39
    (folder / ".newest-snapshot").unlink()  # the older versions wrote no record either


def test_a_data_set_of_the_older_in_place_layout_is_upgraded(store):
    _info, X, y = make(store)
    _old_layout(store)
    (store / "datasets" / ".lock-toy").touch()  # its swap lock
    with pytest.raises(StoreCorruptError, match="older catdask.*check --cleanup"):
        read_dataset(store, "toy")
    assert not check_store(store).ok
    report = check_store(store, cleanup=True)
    assert report.restored == ["toy: old in-place layout -> s1"] and report.ok, report.problems
    assert contents(store) == ["s1", "zarr.json"] and visible(store) == ["toy"]
    np.testing.assert_array_equal(read_dataset(store, "toy").X, X)
    # A re-ingest upgrades too (then finds the same content: nothing to write).
    make(store, "other")
    _old_layout(store, "other")
    assert make(store, "other")[0].written is False
    assert read_dataset(store, "other").snapshot == "s1"
