"""Model registry: immutable numbered versions, concurrency, run keys, failures (crafted and
damaged versions: test_registry_damaged.py)."""

from __future__ import annotations

import datetime as dt
import errno
import json
import os
import subprocess
import sys
import threading
import time
import types
from pathlib import Path

import numpy as np
import pytest

import catdask
from catdask.errors import (
    InvalidNameError,
    ModelNotFoundError,
    StoreCorruptError,
    StoreWriteError,
)
from catdask.store import (
    _zarr_io,
    cleanup_temporaries,
    compare_versions,
    list_models,
    load_estimator,
    load_model_version,
    register_estimator,
    register_model,
)
from catdask.store import registry as reg_mod
from catdask.store.model_entries import remove_uncommitted_versions, remove_version
from catdask.store.root import open_store

from tests.helpers.store_faults import (
    STORE_ONLY_CHILD_PRELUDE,
    exit_when_writing_code,
    fail_writing,
)


def arrays(k=0.0):
    return {
        "W": np.eye(4, 2) + k,
        "mean": np.arange(4.0),
        "counts": np.array([3, 4], dtype=np.int32),
    }


def version_dirs(store, name="m"):
    """What a model's prefix holds besides its bookkeeping (the record of the highest version
    number given, the writers' leases, the run keys' claims, the listing index, an earlier
    catdask's registry lock): versions, committed or not."""
    kept = {".newest-version", ".writing", ".runs", ".index", ".registry.lock"}
    keys = open_store(store).backend.list(f"models/{name}/")
    return sorted({k.key.split("/")[2] for k in keys} - kept)


@pytest.fixture
def store(any_store):
    """Every test here runs on a local folder and on S3 (tests/store/conftest.py)."""
    return any_store.store


def is_local(store):
    return open_store(store).path is not None


# --------------------------------------------------------------------------- basics


def test_register_and_load_versions(store):
    v1 = register_model(store, "m", arrays(0), {"objective": 1.5, "params": {"eps": 0.1}})
    v2 = register_model(store, "m", arrays(1), {"objective": 2.5, "params": {"eps": 0.2}})
    assert (v1.version, v2.version) == (1, 2)
    assert str(v2) == "m:v2"
    if is_local(store):
        assert v2.path == (Path(store) / "models" / "m" / "v2").resolve()
    else:
        assert v2.path == f"{store}/models/m/v2"
    a, meta = load_model_version(store, "m")  # latest
    np.testing.assert_array_equal(a["W"], arrays(1)["W"])
    assert a["counts"].dtype == np.int32 and a["mean"].dtype == np.float64
    assert meta["version"] == 2 and meta["objective"] == 2.5 and meta["run_key"] is None
    created = dt.datetime.fromisoformat(meta["created"])
    assert created.utcoffset() == dt.timedelta(0)
    assert meta["catdask_version"]
    for ref in (1, "1", "v1"):
        a1, m1 = load_model_version(store, "m", ref)
        assert m1["version"] == 1
        np.testing.assert_array_equal(a1["W"], arrays(0)["W"])
    assert load_model_version(store, "m", "latest")[1]["version"] == 2


def test_numeric_dtypes_round_trip(store):
    src = {
        "b": np.array([True, False]),
        "i8": np.arange(3, dtype=np.int8),
        "u": np.arange(3, dtype=np.uint64),
        "f32": np.ones((2, 2), np.float32),
        "c": np.array([1 + 2j]),
        "scalar": np.float64(3.5),
        "empty": np.zeros((0, 3)),
        "big_endian": np.arange(3, dtype=">f8"),
    }
    register_model(store, "dt", src, {})
    got, _ = load_model_version(store, "dt")
    for k, v in src.items():
        np.testing.assert_array_equal(got[k], np.asarray(v))
        assert got[k].shape == np.shape(v)


def test_meta_is_json_and_numpy_values_are_converted(store):
    mv = register_model(
        store,
        "m",
        arrays(),
        {
            "objective": np.float64(1.0),
            "n": np.int64(3),
            "hist": np.arange(3),
            "flag": np.bool_(True),
            "gap": float("nan"),
        },
    )
    _, meta = load_model_version(store, "m")
    assert meta["n"] == 3 and meta["hist"] == [0, 1, 2] and meta["flag"] is True
    assert np.isnan(meta["gap"])
    assert mv.meta["version"] == 1


@pytest.mark.parametrize(
    "bad",
    [
        np.array([{"a": 1}], dtype=object),
        np.array(["a", "b"]),
        np.array([b"x"]),
        np.zeros(2, dtype=[("a", "f8")]),
    ],
)
def test_non_numeric_arrays_are_refused(store, bad):
    with pytest.raises(ValueError, match="only numeric arrays"):
        register_model(store, "m", {"bad": bad}, {})
    assert version_dirs(store) == []


def test_non_json_meta_is_refused(store):
    with pytest.raises(TypeError, match=r"meta\['est'\] is a object"):
        register_model(store, "m", arrays(), {"est": object()})
    assert version_dirs(store) == []


@pytest.mark.parametrize("name", ["../x", ".hidden", "a/b", ""])
def test_bad_model_and_array_names(store, name):
    with pytest.raises(InvalidNameError, match="model name"):
        register_model(store, name, arrays(), {})
    with pytest.raises(InvalidNameError, match="array name"):
        register_model(store, "m", {name: np.ones(2)}, {})


def test_array_names_differing_only_in_case(store):
    with pytest.raises(ValueError, match="differ only in case"):
        register_model(store, "m", {"W": np.ones(2), "w": np.ones(2)}, {})


def test_not_found_messages(store):
    with pytest.raises(ModelNotFoundError, match="No model 'm'.*registered: none") as info:
        load_model_version(store, "m")
    assert isinstance(info.value, KeyError)
    register_model(store, "m", arrays(), {})
    with pytest.raises(ModelNotFoundError, match=r"no version 7 \(versions: v1\)"):
        load_model_version(store, "m", 7)
    with pytest.raises(ModelNotFoundError, match="registered: m"):
        load_model_version(store, "other")
    with pytest.raises(ValueError, match="version must be"):
        load_model_version(store, "m", "newest")


def test_list_models(store):
    register_model(store, "b", arrays(), {})
    register_model(store, "a", arrays(), {})
    register_model(store, "a", arrays(), {}, run_key="r")
    if is_local(store):  # what an earlier catdask's crashed registration left
        (Path(store) / "models" / "a" / ".tmp-v-crashed").mkdir()
        (Path(store) / "models" / "empty").mkdir()
    # An uncommitted version (its zarr.json, the commit, never written) is not listed.
    open_store(store).backend.put("models/a/v3/W/zarr.json", b"{}")
    assert [str(m) for m in list_models(store)] == ["a:v1", "a:v2", "b:v1"]
    assert [m.version for m in list_models(store, "a")] == [1, 2]
    assert list_models(store, "a")[1].run_key == "r"
    assert list_models(store, "nothing") == []


def test_compare_versions(store):
    cert = {"certified": False, "gap": 1e-3}
    register_model(
        store,
        "m",
        arrays(),
        {
            "objective": 1.0,
            "certificate": cert,
            "params": {"eps": 0.1, "k": 2},
            "metrics": {"acc": 0.9},
        },
    )
    register_model(
        store,
        "m",
        arrays(),
        {
            "objective": 1.2,
            "certificate": dict(cert, gap=0.0),
            "params": {"eps": 0.1, "k": 3},
            "metrics": {"acc": 0.95},
        },
    )
    c = compare_versions(store, "m", 1, "latest")
    assert c["versions"] == [1, 2]
    assert c["objective"] == [1.0, 1.2]
    assert c["gap"] == [1e-3, 0.0]
    assert c["params_diff"] == {"k": [2, 3]}
    assert c["metrics_diff"] == {"acc": [0.9, 0.95]}
    assert {"objective", "gap", "certificate", "params", "metrics"} <= set(c["changed"])
    assert "catdask_version" not in c["changed"]


# --------------------------------------------------------------------------- run keys


def test_run_key_is_idempotent(store):
    first = register_model(store, "m", arrays(0), {"objective": 1.0}, run_key="flow-run-42")
    again = register_model(store, "m", arrays(5), {"objective": 9.0}, run_key="flow-run-42")
    assert again.version == first.version == 1
    assert version_dirs(store) == ["v1"]
    a, meta = load_model_version(store, "m")
    np.testing.assert_array_equal(a["W"], arrays(0)["W"])
    other = register_model(store, "m", arrays(1), {}, run_key="flow-run-43")
    assert other.version == 2


def test_concurrent_same_run_key(store):
    out = []
    threads = [
        threading.Thread(
            target=lambda i=i: out.append(
                register_model(store, "m", arrays(i), {"i": i}, run_key="same")
            )
        )
        for i in range(6)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # One version, whichever registration won the run's claim (each took a number first:
    # the losers' numbers stay given, never reused, unless given back untouched).
    (winner,) = {mv.version for mv in out}
    assert [d for d in version_dirs(store) if not d.startswith(".")] == [f"v{winner}"]
    assert [m.version for m in list_models(store, "m")] == [winner]


# --------------------------------------------------------------------------- concurrency


def test_concurrent_threads_get_distinct_versions(store):
    results, errors = [], []

    def work(i):
        try:
            results.append((i, register_model(store, "m", arrays(i), {"worker": i}).version))
        except Exception as exc:  # pragma: no cover
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert sorted(v for _, v in results) == list(range(1, 9))
    for i, v in results:
        a, meta = load_model_version(store, "m", v)
        assert meta["worker"] == i and meta["version"] == v
        np.testing.assert_array_equal(a["W"], arrays(i)["W"])
    assert all(not d.startswith(".tmp-") for d in version_dirs(store))


# Child processes import only catdask.store (not catdask/__init__, which pulls in the
# estimators and scikit-learn): a bare package module pointing at the source folder.
REGISTER_CHILD = (
    STORE_ONLY_CHILD_PRELUDE
    + """
import json, os, time
import numpy as np
from catdask.store import register_model
store, i, barrier = sys.argv[1], int(sys.argv[2]), sys.argv[3]
open(os.path.join(barrier, f"ready-{i}"), "w").close()
while not os.path.exists(os.path.join(barrier, "go")):  # start together: real contention
    time.sleep(0.005)
out = [register_model(store, "m", {"W": np.full((3, 3), float(i))}, {"proc": i, "j": j}).version
       for j in range(2)]
print(json.dumps(out))
"""
)


def test_concurrent_processes_get_distinct_versions(store, tmp_path):
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", REGISTER_CHILD, str(store), str(i), str(barrier)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for i in range(4)
    ]
    try:
        deadline = time.monotonic() + 60
        while len(list(barrier.glob("ready-*"))) < 4 and time.monotonic() < deadline:
            if any(p.poll() is not None for p in procs):
                break
            time.sleep(0.01)
        (barrier / "go").touch()
        outs = [p.communicate(timeout=60) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    for p, (_out, err) in zip(procs, outs):
        assert p.returncode == 0, err.decode()
    versions = [json.loads(out) for out, _ in outs]
    assert sorted(v for vs in versions for v in vs) == list(range(1, 9))
    for i, vs in enumerate(versions):
        for v in vs:
            a, meta = load_model_version(store, "m", v)
            assert meta["proc"] == i and meta["version"] == v
            np.testing.assert_array_equal(a["W"], np.full((3, 3), float(i)))


def test_a_version_present_but_not_counted_is_not_given_again(store):
    """A store of an earlier catdask (its counter says "N\\n", or none: stores before the
    counter) or a lost counter: the next number is above every version present too."""
    backend = open_store(store).backend
    register_model(store, "m", arrays(), {})
    backend.put("models/m/.newest-version", b"1\n")  # the format of an earlier catdask
    assert register_model(store, "m", arrays(1), {}).version == 2
    backend.delete("models/m/.newest-version")
    mv = register_model(store, "m", arrays(2), {})
    assert mv.version == 3 and mv.meta["version"] == 3
    assert load_model_version(store, "m", 3)[1]["version"] == 3
    assert backend.get("models/m/.newest-version")[0].split()[0] == b"3"


def test_a_store_written_by_an_earlier_catdask_reads_and_grows(store):
    """Before issue 39 a version was a folder renamed into place, its zarr.json written by
    zarr's group (the only mark of a version), beside a registry lock, a counter "N\\n" and a
    crashed registration's .tmp- folder; all of it reads, and the next number follows."""
    import zarr

    if not is_local(store):
        pytest.skip("an earlier catdask wrote local folders only")
    folder = Path(store) / "models" / "m"
    for v in (1, 2):
        group = zarr.open_group(str(folder / f"v{v}"), mode="w")
        info = {}
        for key, a in arrays(v).items():
            _zarr_io.write_array(group, key, a)
            info[key] = {"dtype": a.dtype.str, "shape": list(a.shape),
                         "sha256": reg_mod.array_sha256(a)}
        group.attrs.put(reg_mod._version_attrs(info, {"version": v, "run_key": f"old-{v}"}))
    (folder / ".registry.lock").touch()
    (folder / ".newest-version").write_text("2\n")
    (folder / ".tmp-v-0123").mkdir()
    assert [m.version for m in list_models(store)] == [1, 2]
    np.testing.assert_array_equal(load_model_version(store, "m", 1)[0]["W"], arrays(1)["W"])
    assert register_model(store, "m", arrays(5), {}, run_key="old-2").version == 2  # found
    assert register_model(store, "m", arrays(3), {}).version == 3


def test_a_number_is_never_given_twice_after_its_version_was_removed(store):
    backend = open_store(store).backend
    register_model(store, "m", arrays(), {})
    register_model(store, "m", arrays(), {})
    remove_version(open_store(store), "m", 2)  # (by hand: test_model_index.py)
    assert [m.key for m in backend.list("models/m/v2/")] == []
    assert [m.version for m in list_models(store, "m")] == [1]
    assert register_model(store, "m", arrays(), {}).version == 3


# --------------------------------------------------------------------------- failures


def test_crash_mid_write_leaves_no_version(store, monkeypatch):
    register_model(store, "m", arrays(0), {"objective": 1.0})
    monkeypatch.setattr(
        _zarr_io, "write_array", fail_writing("mean", RuntimeError("simulated crash"))
    )
    with pytest.raises(RuntimeError, match="simulated crash"):
        register_model(store, "m", arrays(1), {})
    monkeypatch.undo()
    assert version_dirs(store) == ["v1"]
    assert [m.version for m in list_models(store, "m")] == [1]
    np.testing.assert_array_equal(load_model_version(store, "m")[0]["W"], arrays(0)["W"])


@pytest.mark.parametrize("err", [errno.ENOSPC, errno.EACCES])
def test_disk_full_or_permission_error(store, monkeypatch, err):
    register_model(store, "m", arrays(0), {})
    monkeypatch.setattr(_zarr_io, "write_array", fail_writing("W", OSError(err, os.strerror(err))))
    with pytest.raises(StoreWriteError) as info:
        register_model(store, "m", arrays(1), {})
    assert info.value.errno == err and isinstance(info.value, OSError)
    assert os.strerror(err) in str(info.value) and "earlier versions are intact" in str(info.value)
    monkeypatch.undo()
    assert version_dirs(store) == ["v1"]
    load_model_version(store, "m", 1)


def test_permission_error_taking_the_writers_lease(store, monkeypatch):
    register_model(store, "m", arrays(0), {})

    def denied(backend, key, *a, **k):
        raise PermissionError(errno.EACCES, "Permission denied", key)

    monkeypatch.setattr(reg_mod, "acquire", denied)
    with pytest.raises(StoreWriteError, match="Permission denied"):
        register_model(store, "m", arrays(1), {})
    monkeypatch.undo()
    assert version_dirs(store) == ["v1"]
    assert register_model(store, "m", arrays(1), {}).version == 2  # the number was given back


def test_hard_crash_leaves_only_an_uncommitted_version(store, monkeypatch):
    """A registration killed mid-write leaves an uncommitted prefix: no version, its number
    never given again, and cleanup removes it once its writer's lease is dead."""
    code = (
        STORE_ONLY_CHILD_PRELUDE
        + exit_when_writing_code("b", 3)
        + f"""
import numpy as np
from catdask.store import register_model
register_model({str(store)!r}, "m", {{"a": np.ones(2), "b": np.ones(2)}}, {{}})
"""
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=120)
    assert proc.returncode == 3, proc.stderr.decode()
    assert version_dirs(store) == ["v1"]  # the arrays written so far, and no zarr.json
    assert list_models(store) == []
    with pytest.raises(ModelNotFoundError):
        load_model_version(store, "m")
    assert register_model(store, "m", arrays(), {}).version == 2  # v1 stays used up
    # Its writer's lease names this host's dead process: dead at once, no ttl to wait.
    if is_local(store):
        cleanup_temporaries(store, older_than_seconds=0)
    else:  # (cleanup_temporaries itself reads s3:// once the data-set side is ported)
        remove_uncommitted_versions(open_store(store), older_than_seconds=0)
    assert version_dirs(store) == ["v2"]
    assert [m.version for m in list_models(store, "m")] == [2]


# --------------------------------------------------------------------------- estimator wrappers


def test_estimator_wrappers_use_model_io(store, monkeypatch):
    """The wrappers go through catdask.model_io (replaced here by a fake)."""
    calls = []
    fake = types.ModuleType("catdask.model_io")

    def export_model(est):
        calls.append("export")
        return {"W": est["W"]}, {"class": "Fake", "objective": est["objective"]}

    def import_model(arrays, meta):
        calls.append("import")
        return {"W": arrays["W"], "objective": meta["objective"], "version": meta["version"]}

    fake.export_model, fake.import_model = export_model, import_model
    monkeypatch.setitem(sys.modules, "catdask.model_io", fake)
    monkeypatch.setattr(catdask, "model_io", fake, raising=False)
    mv = register_estimator(
        store, "est", {"W": np.eye(2), "objective": 3.0}, {"dataset": "wine"}, run_key="r1"
    )
    assert mv.meta["dataset"] == "wine" and mv.meta["class"] == "Fake"
    back = load_estimator(store, "est")
    assert back["objective"] == 3.0 and back["version"] == 1
    np.testing.assert_array_equal(back["W"], np.eye(2))
    assert calls == ["export", "import"]


def test_real_estimator_round_trip(store):
    model_io = pytest.importorskip("catdask.model_io")
    from catdask import CategorySpace
    from tests.helpers.data import make_blobs

    X, y = make_blobs(n_per_class=15, n_features=4, n_classes=3)
    est = CategorySpace().fit(X, y)
    mv = register_estimator(store, "cs", est, {"dataset": "blobs"}, run_key="fit-1")
    back = load_estimator(store, "cs", mv.version)
    np.testing.assert_allclose(back.transform(X), est.transform(X))
    np.testing.assert_array_equal(back.predict(X), est.predict(X))
    assert [str(m) for m in list_models(store)] == ["cs:v1"]
    assert register_estimator(store, "cs", est, run_key="fit-1").version == mv.version
    assert model_io is not None
