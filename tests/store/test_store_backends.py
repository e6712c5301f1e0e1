"""The data-set store's guarantees on both backends, a local folder and S3 (SeaweedFS, issue 39).

- a process killed (``os._exit`` at each step, ``kill -9`` at random moments) leaves nothing
  half-visible: a reader sees the old or the new content, whole; ``check`` is honest about
  what is left (it reports exactly what an independent look at the keys finds) and
  ``check --cleanup`` makes the store whole;
- 8 concurrent ingests of different content under one name: each lands as its own snapshot
  (``replace``), or fails with one line (without it: exactly one lands), none lost;
- concurrent re-ingests while readers read and gc runs: no mixed read;
- gc beside a reader holding a snapshot keeps it, and removes it once released.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from catdask.errors import DatasetExistsError, DatasetNotFoundError, StoreCorruptError
from catdask.store import (
    check_store,
    gc_store,
    open_dataset_arrays,
    read_dataset,
    write_dataset,
)
from catdask.store.content import content_sha256

from tests.helpers.store_faults import STORE_ONLY_CHILD_PRELUDE

# A child opens the store from its URL and the environment (S3 credentials), as a user's would.
_CHILD = STORE_ONLY_CHILD_PRELUDE + """
import json, os, traceback
import numpy as np
from catdask.store import _atomic, write_dataset
url, action = sys.argv[1], sys.argv[2]
"""

_CRASHER = _CHILD + """
point = sys.argv[3]
def hook(label):
    if label == point:
        os._exit(77)
_atomic._CRASH_HOOK = hook
write_dataset(url, "ds", np.full((12, 3), 2.0), [0, 1] * 6, replace=True, chunk_rows=4)
sys.exit(0)
"""

# Writes until killed: big enough (many chunks) that a kill lands mid-write.
_INGEST_LOOP = _CHILD + """
rows = int(sys.argv[3])
v = 10.0
while True:
    write_dataset(url, "ds", np.full((rows, 4), v), [0, 1] * (rows // 2), replace=True,
                  chunk_rows=max(1, rows // 16))
    v += 1.0
"""

_ONE_INGEST = _CHILD + """
value, replace = float(sys.argv[3]), sys.argv[4] == "replace"
try:
    info = write_dataset(url, "ds", np.full((12, 3), value), [0, 1] * 6, replace=replace)
    print(json.dumps({"snapshot": info.snapshot, "written": info.written}))
except Exception as exc:
    print(json.dumps({"error": type(exc).__name__, "message": str(exc)}))
"""


def _child_env(st):
    return dict(os.environ, **st.env)


def _run(st, script, *args, **kw):
    return subprocess.Popen([sys.executable, "-c", script, st.url, *map(str, args)],
                            env=_child_env(st), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, **kw)


def value(st):
    """The one value the current content holds; None: no data set; "corrupt"."""
    try:
        X = read_dataset(st.store, "ds", verify=True).X
    except DatasetNotFoundError:
        return None
    except StoreCorruptError:
        return "corrupt"
    assert np.unique(X).size == 1, "a mixed read"
    return float(X[0, 0])


def whole(st) -> bool:
    """An independent look at the keys: every snapshot prefix committed (has its zarr.json),
    the pointer names a committed snapshot that reads and verifies, none above the newest
    commit; or no data set at all."""
    snaps = [n for n in st.contents("ds") if n != "zarr.json"]
    if any(st.backend.head(f"datasets/ds/{s}/zarr.json") is None for s in snaps):
        return False
    if "zarr.json" not in st.contents("ds"):
        return not snaps
    try:
        pointer = st.pointer("ds")
    except StoreCorruptError:
        return False
    if pointer.snapshot not in snaps or max(int(s[1:]) for s in snaps) > pointer.newest_committed:
        return False
    return value(st) not in (None, "corrupt")


def _honest_then_cleaned(st, where):
    report = check_store(st.store)
    assert report.ok == whole(st), (where, report.problems)
    cleaned = check_store(st.store, cleanup=True)
    assert cleaned.ok and whole(st), (where, cleaned.problems)
    assert check_store(st.store).ok, where


# --------------------------------------------------------------------------- crashes

# (crash point, value right after the crash, value after check --cleanup)
WRITE_POINTS = [("snapshot-started", 1.0, 1.0), ("snapshot-written", 1.0, 1.0),
                ("snapshot-renamed", 1.0, 1.0), ("pointer-written", 1.0, 1.0),
                ("pointer-replaced", 2.0, 2.0)]


@pytest.mark.parametrize("point,after_crash,after_cleanup", WRITE_POINTS,
                         ids=[p[0] for p in WRITE_POINTS])
def test_a_killed_ingest_leaves_nothing_half_visible(any_store, point, after_crash,
                                                     after_cleanup):
    st = any_store
    write_dataset(st.store, "ds", np.full((12, 3), 1.0), [0, 1] * 6)
    proc = _run(st, _CRASHER, "write", point)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 77, err
    assert value(st) == after_crash
    _honest_then_cleaned(st, point)
    assert value(st) == after_cleanup


def _kill_ingests_at_random(st, kills: int, rows: int, seed: int) -> list:
    """``kills`` ingest loops killed with SIGKILL at random moments; after each, the content
    is whole (old or new) and check is honest; returns the values seen."""
    rng = random.Random(seed)
    seen = []
    write_dataset(st.store, "ds", np.full((rows, 4), 1.0), [0, 1] * (rows // 2))
    for i in range(kills):
        before = set(st.contents("ds"))
        proc = _run(st, _INGEST_LOOP, "loop", rows)
        deadline = time.monotonic() + 60
        while set(st.contents("ds")) <= before and time.monotonic() < deadline:
            time.sleep(0.02)  # until its first snapshot's first object is there
        time.sleep(rng.uniform(0.0, 2.0))  # then at a random moment of its writes
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=60)
        seen.append(value(st))
        assert seen[-1] not in (None, "corrupt"), (i, seen)
        _honest_then_cleaned(st, f"kill {i}")
    return seen


@pytest.mark.slow
def test_kill_9_of_ingests_at_random_points(any_store):
    """A few kills here; the stress test has more."""
    seen = _kill_ingests_at_random(any_store, kills=2, rows=64, seed=1)
    assert len(seen) == 2


@pytest.mark.stress
def test_kill_9_of_ingests_at_random_points_many(any_store):
    seen = _kill_ingests_at_random(any_store, kills=12, rows=256, seed=2)
    print(f"\n{any_store.kind}: 12 kills, values seen {seen}")


def test_default_chunks_follow_the_backend(any_store):
    """About 32 MiB of X per chunk in a folder, 8 MiB on S3 (where zarr's concurrent PUTs of
    smaller chunks ingest faster than one large PUT)."""
    from catdask.store import open_dataset_arrays

    rows = 40 * 2**20 // 64  # 40 MiB of 8 float64 columns
    write_dataset(any_store.store, "ds", np.zeros((rows, 8)), np.arange(rows) % 2)
    with open_dataset_arrays(any_store.store, "ds") as arrays:
        chunk_rows = arrays.X.chunks[0]
    assert chunk_rows == {"local": 32, "s3": 8}[any_store.kind] * 2**20 // 64


# --------------------------------------------------------------------------- concurrency


@pytest.mark.slow
def test_8_concurrent_ingests_in_threads_each_land(any_store):
    """The fast variant (threads of one process): 8 replacing ingests, 8 snapshots."""
    st = any_store
    write_dataset(st.store, "ds", np.full((12, 3), 0.0), [0, 1] * 6)
    results, errors = [], []

    def ingest(i):
        try:
            results.append((i, write_dataset(st.store, "ds", np.full((12, 3), 1.0 + i),
                                             [0, 1] * 6, replace=True).snapshot))
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=ingest, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not errors and len({s for _i, s in results}) == 8, (errors, results)
    for i, snapshot in results:
        assert np.all(read_dataset(st.store, "ds", snapshot=snapshot).X == 1.0 + i)
    assert check_store(st.store).ok


def test_an_ingest_refused_after_its_commit_leaves_no_snapshot(any_store):
    """A writer that committed its snapshot but finds other content landed meanwhile (no
    replace) fails in one line and removes its own snapshot (it would be a crashed commit's
    leftover for check, or garbage for gc)."""
    from catdask.store import _atomic

    st = any_store

    def meanwhile(label):
        if label == "snapshot-renamed":
            _atomic._CRASH_HOOK = None
            write_dataset(st.store, "ds", np.full((12, 3), 2.0), [0, 1] * 6)  # lands as s2

    _atomic._CRASH_HOOK = meanwhile
    try:
        with pytest.raises(DatasetExistsError) as err:
            write_dataset(st.store, "ds", np.full((12, 3), 1.0), [0, 1] * 6)  # s1, committed
    finally:
        _atomic._CRASH_HOOK = None
    assert "\n" not in str(err.value)
    assert st.contents("ds") == ["s2", "zarr.json"] and value(st) == 2.0
    assert check_store(st.store).ok and check_store(st.store).problems == []


def test_a_listing_that_missed_a_writers_lease_removes_and_reports_nothing(any_store,
                                                                         monkeypatch):
    """A listing on object storage is not one moment: it can show a running writer's objects
    but not its lease, listed before them. `check --cleanup` then removed the snapshot being
    written, and its commit after: the pointer named a missing snapshot (2 in 500 cleanups
    beside writers on S3). Here every listing misses the writers' leases, and the cleanup runs
    while a writer is between its two arrays."""
    from catdask.store import _atomic
    from catdask.store import check as check_module
    from catdask.store import gc as gc_module
    from catdask.store.snapshots import list_dataset

    def missing_the_writers(backend, folder_key):
        listing = list_dataset(backend, folder_key)
        listing.writing.clear()
        return listing

    st = any_store
    write_dataset(st.store, "ds", np.full((12, 3), 1.0), [0, 1] * 6)
    reports = []

    def meanwhile(label):
        if label == "snapshot-started":  # X written, y not yet: the writer's lease is live
            with monkeypatch.context() as patched:
                patched.setattr(check_module, "list_dataset", missing_the_writers)
                patched.setattr(gc_module, "list_dataset", missing_the_writers)
                reports.append(check_store(st.store, cleanup=True))

    _atomic._CRASH_HOOK = meanwhile
    try:
        info = write_dataset(st.store, "ds", np.full((12, 3), 2.0), [0, 1] * 6, replace=True)
    finally:
        _atomic._CRASH_HOOK = None
    [report] = reports
    assert report.removed == [] and report.problems == [], (report.removed, report.problems)
    assert info.written and value(st) == 2.0 and check_store(st.store).ok


@pytest.mark.slow
def test_8_concurrent_ingests_under_one_name(any_store):
    """Processes: without replace exactly one lands and 7 fail in one line; with replace each
    lands as its own snapshot, none lost."""
    st = any_store
    first = [_run(st, _ONE_INGEST, "once", float(i), "keep") for i in range(8)]
    results = [json.loads(p.communicate(timeout=300)[0].strip().splitlines()[-1])
               for p in first]
    landed = [r for r in results if "snapshot" in r]
    failed = [r for r in results if "error" in r]
    assert len(landed) == 1 and landed[0]["written"], results
    assert {r["error"] for r in failed} == {"DatasetExistsError"}, results
    assert all("\n" not in r["message"] for r in failed)
    procs = [_run(st, _ONE_INGEST, "again", 100.0 + i, "replace") for i in range(8)]
    results = [json.loads(p.communicate(timeout=300)[0].strip().splitlines()[-1])
               for p in procs]
    assert all(r.get("written") for r in results), results
    ids = [r["snapshot"] for r in results]
    assert len(set(ids)) == 8 and landed[0]["snapshot"] not in ids  # each its own, none reused
    for r, i in zip(results, range(8)):  # every one is stored, whole, with its own content
        d = read_dataset(st.store, "ds", snapshot=r["snapshot"], verify=True)
        assert np.all(d.X == 100.0 + i)
    pointer = st.pointer("ds")
    assert pointer.snapshot in ids and pointer.newest_committed == max(int(s[1:]) for s in ids)
    assert check_store(st.store).ok


@pytest.mark.slow
def test_reingests_never_mix_reads_while_gc_runs(any_store):
    st = any_store
    write_dataset(st.store, "ds", np.full((12, 3), 0.0), [0, 1] * 6, chunk_rows=3)
    writers = [_run(st, _ONE_INGEST, "w", 1000.0 + i, "replace") for i in range(4)]
    reads, mixed, errors = [], [], []
    done = threading.Event()

    def reader():
        try:
            while not done.is_set() or len(reads) < 30:
                with open_dataset_arrays(st.store, "ds") as a:
                    first = np.asarray(a.X[:])
                    second = np.asarray(a.X[:])
                    ok = np.array_equal(first, second) and content_sha256(
                        second, a.y_codes[:], a.classes.tolist()) == a.sha256
                if not ok or np.unique(second).size != 1:
                    mixed.append(second)
                reads.append(1)
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    def collector():
        try:
            while not done.is_set():
                gc_store(st.store)
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=reader), threading.Thread(target=collector)]
    for t in threads:
        t.start()
    for w in writers:
        out, err = w.communicate(timeout=300)
        assert "snapshot" in out, (out, err)
    done.set()
    for t in threads:
        t.join(timeout=300)
    assert not errors and not mixed and len(reads) >= 30, errors
    assert check_store(st.store).ok


# --------------------------------------------------------------------------- gc and holds


def test_gc_keeps_a_snapshot_a_reader_holds(any_store):
    st = any_store
    write_dataset(st.store, "ds", np.full((12, 3), 1.0), [0, 1] * 6)
    reader = open_dataset_arrays(st.store, "ds", dask=True)  # holds s1
    write_dataset(st.store, "ds", np.full((12, 3), 2.0), [0, 1] * 6, replace=True)
    result = gc_store(st.store)
    kept = {str(p).rpartition("/")[2]: why for p, why in result.kept}
    assert result.removed == [] and kept["s1"] == "a reader holds it", result
    assert float(reader.X.sum().compute()) == 36.0  # still readable, by its own keys
    reader.close()
    assert [str(p).rpartition("/")[2] for p in gc_store(st.store).removed] == ["s1"]
    assert st.contents("ds") == ["s2", "zarr.json"]
    assert [k for k in st.keys("datasets/ds/") if "/.holds/" in k] == []  # nothing left over
    with pytest.raises(DatasetNotFoundError, match="no snapshot 's1'"):
        read_dataset(st.store, "ds", snapshot="s1")
    with pytest.raises(DatasetExistsError):
        write_dataset(st.store, "ds", np.full((12, 3), 3.0), [0, 1] * 6)
