"""Security defaults: localhost-only servers, stores that never run code, checked downloads.

Covered elsewhere and not repeated here:

- tests/store/test_registry.py: a stray ``model.pkl`` in a version folder, object-dtype arrays,
  ``data_type: object`` in an array's JSON, unsafe array names, edited metadata/values;
- tests/store/test_store.py: string arrays and unknown codecs in a data set, edited attributes;
- tests/catalog/test_catalog.py: http://, ftp://, file:// and scheme-relative URLs refused, redirects
  to http refused, a download with the wrong sha256 leaves nothing in the cache.

Here: the sockets of the Prefect server started by ``catdask.serve.start_prefect_server`` and
of the embedded Dask cluster (scheduler, dashboard, nannies, workers) listen on 127.0.0.1
only; crafted stores whose payload *would* run code if unpickled or evaluated (proved by a
control that unpickles the payload directly) are refused with a clear error and the payload's
marker never appears; a wrong-checksum download through the whole ingest pipeline stores
nothing.
"""

from __future__ import annotations

import json
import os
import pickle
import urllib.parse
from pathlib import Path

import numpy as np
import psutil
import pytest

from catdask.errors import ChecksumMismatchError, StoreCorruptError
from catdask.store import (
    list_datasets,
    list_models,
    load_estimator,
    load_model_version,
    open_dataset_arrays,
    read_dataset,
    register_estimator,
    register_model,
    write_dataset,
)
from catdask.store._json import json_sha256

from .helpers.data import make_blobs
from .helpers.procs import (
    LOCALHOST,
    free_port,
    http_get,
    listening_sockets,
    seeded_prefect_home,
    tree_pids,
)

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")


# ============================================================================ bindings
def _kill_tree(pid):
    procs = []
    try:
        root = psutil.Process(pid)
        procs = [root] + root.children(recursive=True)
    except psutil.NoSuchProcess:
        return
    for p in procs:
        try:
            p.terminate()
        except psutil.Error:
            pass
    _, alive = psutil.wait_procs(procs, timeout=20)
    for p in alive:
        try:
            p.kill()
        except psutil.Error:
            pass
    psutil.wait_procs(alive, timeout=10)


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_prefect_server_started_by_catdask_listens_on_localhost_only(tmp_path, monkeypatch):
    from catdask.serve import start_prefect_server

    monkeypatch.setenv("PREFECT_HOME", str(seeded_prefect_home(tmp_path / "prefect-home")))
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    port = free_port()
    proc, api = start_prefect_server(port=port, log_file=tmp_path / "server.log")
    try:
        assert api == f"http://{LOCALHOST}:{port}/api"
        sockets = listening_sockets(tree_pids(proc.pid))
        assert port in {p for _, _, p in sockets}, sockets
        assert all(ip == LOCALHOST for _, ip, _ in sockets), sockets
        # The UI in the browser is pointed at this API, not at the default port 4200.
        _, body = http_get(f"http://{LOCALHOST}:{port}/ui-settings")
        assert json.loads(body)["api_url"] == api
    finally:
        _kill_tree(proc.pid)
        proc.wait(timeout=30)


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_embedded_dask_cluster_listens_on_localhost_only(monkeypatch):
    distributed = pytest.importorskip("distributed")
    from catdask.distributed.cluster import ENV_SCHEDULER, close_embedded_cluster, dask_client_context

    monkeypatch.delenv(ENV_SCHEDULER, raising=False)
    try:
        distributed.default_client()
        pytest.skip("a Dask client is already current in this process; dask_client_context would reuse it")
    except ValueError:
        pass
    dash = free_port()
    try:
        with dask_client_context(n_workers=2, dashboard_port=dash) as client:
            info = client.scheduler_info()
            scheduler_port = int(client.scheduler.address.rsplit(":", 1)[1])
            assert client.scheduler.address.startswith(f"tcp://{LOCALHOST}:")
            assert client.dashboard_link == f"http://{LOCALHOST}:{dash}/status"
            worker_pids = set(client.run(os.getpid).values())
            workers = info["workers"]
            assert len(workers) == 2
            ours = {scheduler_port, dash}
            for addr, w in workers.items():
                assert addr.startswith(f"tcp://{LOCALHOST}:"), addr
                ours.add(int(addr.rsplit(":", 1)[1]))
                if w.get("nanny"):
                    assert w["nanny"].startswith(f"tcp://{LOCALHOST}:"), w["nanny"]
                    ours.add(int(w["nanny"].rsplit(":", 1)[1]))
            # Scheduler, dashboard and nannies live in this process, workers in their own.
            here = [s for s in listening_sockets([os.getpid()]) if s[2] in ours]
            there = listening_sockets(worker_pids)
            assert {p for _, _, p in here + there} >= ours
            assert all(ip == LOCALHOST for _, ip, _ in here + there), here + there
            status, _ = http_get(client.dashboard_link)
            assert status == 200
    finally:
        close_embedded_cluster()


# ============================================================================ crafted stores
class _Payload:
    """Unpickling this creates the directory ``marker`` (stands for arbitrary code)."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (os.mkdir, (self.marker,))


@pytest.fixture
def marker(tmp_path):
    return tmp_path / "payload-ran"


@pytest.fixture
def evil(marker):
    """Pickle bytes that create ``marker`` when unpickled (the control proves they do)."""
    data = pickle.dumps(_Payload(marker))
    pickle.loads(data)  # control: the payload is live
    assert marker.is_dir()
    marker.rmdir()
    return data


@pytest.fixture
def model_v1(store):
    register_model(store, "m", {"W": np.eye(3), "b": np.arange(3.0)}, {"objective": 1.0})
    return Path(store) / "models" / "m" / "v1"


@pytest.fixture
def dataset(store):
    X, y = make_blobs(n_per_class=6, n_features=3, n_classes=2)
    write_dataset(store, "d", X, y)
    return Path(store) / "datasets" / "d" / "s1"  # the current (first) snapshot


def _edit(path: Path, fn):
    meta = json.loads(path.read_text())
    fn(meta)
    path.write_text(json.dumps(meta))


def _reseal(group_json: Path, fn):
    """Edit a group's attributes and recompute attrs_sha256, as a tamperer could."""

    def edit(meta):
        attrs = meta["attributes"]
        fn(attrs)
        attrs["attrs_sha256"] = json_sha256({k: v for k, v in attrs.items() if k != "attrs_sha256"})

    _edit(group_json, edit)


def _load_model(store):
    return load_model_version(store, "m", 1)


def _load_dataset(store):
    return read_dataset(store, "d")


def _chunk_files(array_dir: Path):
    return [p for p in (array_dir / "c").rglob("*") if p.is_file()]


@pytest.mark.parametrize("kind", ["model", "dataset"])
def test_pickle_codec_with_live_payload_is_refused_unread(kind, store, evil, marker, request):
    """An array whose codec is a pickle, and whose chunk is a live pickle: refused unread."""
    entry = request.getfixturevalue("model_v1" if kind == "model" else "dataset")
    array = entry / ("W" if kind == "model" else "X")
    _edit(array / "zarr.json", lambda m: m.update(codecs=[{"name": "numcodecs.pickle"}]))
    for chunk in _chunk_files(array):
        chunk.write_bytes(evil)
    load = _load_model if kind == "model" else _load_dataset
    with pytest.raises(StoreCorruptError, match="codec 'numcodecs.pickle'.*not load"):
        load(store)
    if kind == "dataset":
        with pytest.raises(StoreCorruptError, match="numcodecs.pickle"):
            open_dataset_arrays(store, "d", dask=True)
    assert not marker.exists()


def test_pickle_file_in_model_version_is_never_opened(store, model_v1, evil, marker):
    """A pickle beside the arrays (what a pickle-based registry would load) is refused."""
    (model_v1 / "model.pkl").write_bytes(evil)
    with pytest.raises(StoreCorruptError, match="unexpected file 'model.pkl'.*never unpickles"):
        load_model_version(store, "m", 1)
    with pytest.raises(StoreCorruptError, match="model.pkl"):
        load_estimator(store, "m", 1)
    assert [v.version for v in list_models(store, "m")] == [1]  # listing reads JSON only
    assert not marker.exists()


def test_pickle_files_in_a_data_set_are_never_opened(store, dataset, evil, marker):
    """Data sets are read array by array through zarr's JSON; stray files are inert."""
    (dataset / "data.pkl").write_bytes(evil)
    (dataset / "X" / "c" / "evil.pkl").write_bytes(evil)
    ds = read_dataset(store, "d")
    assert ds.X.dtype == np.float64
    open_dataset_arrays(store, "d", dask=True).X.compute()
    assert not marker.exists()


NON_NUMERIC = [
    "object",
    "string",
    "variable_length_bytes",
    "r64",
    {"name": "numpy.datetime64", "configuration": {"unit": "s", "scale_factor": 1}},
    {"name": "structured", "configuration": {"fields": [["a", "float64"]]}},
]


@pytest.mark.parametrize("dtype", NON_NUMERIC, ids=lambda d: d if isinstance(d, str) else d["name"])
@pytest.mark.parametrize("kind", ["model", "dataset"])
def test_non_numeric_dtypes_are_refused(kind, dtype, store, request):
    entry = request.getfixturevalue("model_v1" if kind == "model" else "dataset")
    array = entry / ("W" if kind == "model" else "X")
    _edit(array / "zarr.json", lambda m: m.update(data_type=dtype))
    load = _load_model if kind == "model" else _load_dataset
    with pytest.raises(StoreCorruptError, match="only numeric arrays are allowed"):
        load(store)


# JSON that a careless loader (jsonpickle, yaml.unsafe_load, eval) would turn into a call.
REDUCE = {
    "__reduce__": ["os.system", ["mkdir {marker}"]],
    "py/reduce": [{"py/function": "os.system"}, {"py/tuple": ["mkdir {marker}"]}],
    "!!python/object/apply:os.system": ["mkdir {marker}"],
}


def _reduce_payload(marker):
    return json.loads(json.dumps(REDUCE).replace("{marker}", str(marker)))


@pytest.fixture
def kernel_model(store):
    from catdask import KernelCategorySpace

    X, y = make_blobs(n_per_class=8, n_features=3, n_classes=3, seed=2)
    est = KernelCategorySpace(gamma=0.5, n_restarts=1, max_iter=50, random_state=0).fit(X, y)
    register_estimator(store, "k", est, {"dataset": "blobs"})
    return Path(store) / "models" / "k" / "v1", X


@pytest.mark.parametrize(
    "where, value, match",
    [
        ("kernel", "reduce", "Unknown kernel"),
        ("kernel", "os.system", "Unknown kernel 'os.system'"),
        ("kernel", "builtins.eval", "Unknown kernel 'builtins.eval'"),
        ("kernel", "lambda X, Y: __import__('os').system('true')", "Unknown kernel"),
        ("class", "subprocess.Popen", "Unknown model class 'subprocess.Popen'"),
        ("class", "reduce", "Unknown model class"),
    ],
)
def test_code_in_model_metadata_is_refused_even_with_a_valid_checksum(
    store, kernel_model, marker, where, value, match
):
    """Metadata naming code (a callable kernel, a class path, a __reduce__ object) never runs.

    The tamperer also recomputes ``attrs_sha256`` (a checksum, not a signature), so loading
    gets as far as rebuilding the estimator, which accepts only named kernels and classes.
    """
    entry, _ = kernel_model
    value = _reduce_payload(marker) if value == "reduce" else value

    def tamper(attrs):
        if where == "kernel":
            attrs["meta"]["params"]["kernel"] = value
        else:
            attrs["meta"]["class"] = value

    _reseal(entry / "zarr.json", tamper)
    load_model_version(store, "k", 1)  # arrays + JSON: loads, nothing evaluated
    with pytest.raises(ValueError, match=match):
        load_estimator(store, "k", 1)
    assert not marker.exists()


def test_reduce_payload_in_model_metadata(store, kernel_model, marker):
    """Unsealed: refused as modified. Resealed in a free-form field: loaded as inert data."""
    entry, X = kernel_model
    original = (entry / "zarr.json").read_text()
    _edit(entry / "zarr.json",
          lambda m: m["attributes"]["meta"].update(note=_reduce_payload(marker)))
    with pytest.raises(StoreCorruptError, match="modified after registration"):
        load_estimator(store, "k", 1)
    (entry / "zarr.json").write_text(original)
    _reseal(entry / "zarr.json",
            lambda a: a["meta"].update(note=_reduce_payload(marker)))
    _, meta = load_model_version(store, "k", 1)
    assert meta["note"] == _reduce_payload(marker)  # plain dicts and strings
    load_estimator(store, "k", 1).transform(X)
    assert not marker.exists()


def test_reduce_payload_in_data_set_attributes(store, dataset, marker):
    group = dataset / "zarr.json"
    original = group.read_text()
    _edit(group, lambda m: m["attributes"]["provenance"].update(note=_reduce_payload(marker)))
    with pytest.raises(StoreCorruptError, match="attributes were modified"):
        read_dataset(store, "d")
    group.write_text(original)
    _reseal(group, lambda a: a["provenance"].update(note=_reduce_payload(marker)))
    ds = read_dataset(store, "d")
    assert ds.attrs["provenance"]["note"] == _reduce_payload(marker)
    assert [d.problem for d in list_datasets(store)] == [None]
    assert not marker.exists()


def test_reduce_payload_as_a_class_label_is_refused(store, dataset, marker):
    _reseal(dataset / "zarr.json",
            lambda a: a["classes"].__setitem__(0, _reduce_payload(marker)))
    with pytest.raises(StoreCorruptError, match="content checksum mismatch"):
        read_dataset(store, "d")
    assert not marker.exists()


def test_reduce_payload_as_a_class_label_is_refused_lazily(store, dataset, marker):
    _reseal(dataset / "zarr.json",
            lambda a: a["classes"].__setitem__(0, _reduce_payload(marker)))
    try:
        with pytest.raises(StoreCorruptError):
            open_dataset_arrays(store, "d", dask=True)
    finally:
        assert not marker.exists()


# ============================================================================ downloads
def test_wrong_checksum_download_stores_nothing(tmp_path, monkeypatch):
    """ingest with downloads allowed, the server returns other bytes: nothing is kept."""
    import catdask.catalog.sources as catalog
    from catdask.pipeline import ingest_dataset

    asked = []

    class Response:
        def __init__(self, data):
            self.data = data

        def read(self, n=-1):
            out, self.data = self.data[:n], self.data[n:]
            return out

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    def opener(url, timeout):
        asked.append(url)
        return Response(b"1.0 2.0 1\n" * 50)

    monkeypatch.setattr(catalog, "SHARED_UCI_DIR", tmp_path / "no-shared")
    monkeypatch.delenv(catalog.SOURCE_ENV, raising=False)
    monkeypatch.setattr(catalog, "_open_url", opener)
    store = tmp_path / "store"
    with pytest.raises(ChecksumMismatchError, match="expected [0-9a-f]{64}, got [0-9a-f]{64}"):
        ingest_dataset("seeds", store, source_dir=tmp_path / "empty", allow_download=True)
    assert [urllib.parse.urlsplit(u).scheme for u in asked] == ["https"]
    downloads = store / ".downloads"
    assert not downloads.exists() or [p for p in downloads.rglob("*") if p.is_file()] == []
    assert list_datasets(store) == []
    assert not (store / "datasets").exists() or list((store / "datasets").iterdir()) == []


# Not a test of catdask: fail loudly if a test above left a server behind.
def test_no_stray_listeners_left_by_this_module():
    mine = [s for s in listening_sockets([os.getpid()]) if s[1] != LOCALHOST]
    assert mine == [], f"sockets on a non-local address in the test process: {mine}"
