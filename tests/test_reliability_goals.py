"""Two goals of issue 16 (reliability), each a test with the issue's counts.

1. Concurrent re-ingests during trains: every registered model equals a fit on exactly one
   content and records that content's checksum. The trains go through the training pipeline as
   the ``catdask-train`` flow's ``fit_restarts`` task runs it (a client from
   ``dask_client_context(scheduler)`` on one shared local cluster, ``fit_on_dataset``,
   ``registration_decision``, ``register_outcome``); the re-ingests are ``write_dataset(...,
   replace=True)`` in separate writer processes, each writing a content of its own.
2. ``kill -9`` of ``catdask train`` / ``catdask ingest`` (the real console script, with its
   temporary Prefect server and embedded Dask cluster): every process of the killed command's
   tree is gone within 30 s and the store holds nothing half-written.

The fast variants (a few trains, a few kills) run in the default suite; the ``slow`` ones have
the issue's counts.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import psutil
import pytest
from sklearn.preprocessing import StandardScaler

from catdask.distributed import dask_client_context
from catdask.pipeline import ModelSpec, fit_on_dataset, register_outcome, registration_decision
from catdask.core.progress import solver_progress
from catdask.store import (
    check_store,
    gc_store,
    list_versions,
    load_estimator,
    load_model_version,
    write_dataset,
)
from catdask.store.content import content_sha256

from .helpers.data import make_blobs
from .helpers.procs import BIN, Managed, child_env, seeded_prefect_home
from .helpers.store_faults import STORE_ONLY_CHILD_PRELUDE

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")


# ============================================================================ goal 1
DATASET = "mixed"
MODEL = "mixed-cqs"
# Small blocks, so every Dask pass reads several chunk files of the snapshot.
CHUNK_ROWS = 40
# Where a train asks for "its" re-ingest: before the moments pass (after the name resolved),
# or at the solver's first iteration (before the metrics pass). Trains alternate.
TRIGGERS = ("before-moments", "mid-solve")

# A writer process: re-ingests the contents it is asked for (a file go-<i> appears), each
# with replace=True, and answers with done-<i> holding the checksum it committed.
_WRITER = STORE_ONLY_CHILD_PRELUDE + """
import os, time
from pathlib import Path
import numpy as np
from catdask.store import write_dataset
store, work, mine = sys.argv[1], Path(sys.argv[2]), [int(i) for i in sys.argv[3].split(",")]
deadline = time.monotonic() + float(sys.argv[4])
while mine and time.monotonic() < deadline:
    for i in [i for i in mine if (work / f"go-{i}").exists()]:
        c = np.load(work / f"content-{i}.npz")
        info = write_dataset(store, %r, c["X"], c["y"], chunk_rows=%d, replace=True)
        assert info.written, i
        (work / f"done-{i}.tmp").write_text(info.content_sha256)
        os.replace(work / f"done-{i}.tmp", work / f"done-{i}")
        mine.remove(i)
    time.sleep(0.01)
sys.exit(1 if mine else 0)
""" % (DATASET, CHUNK_ROWS)


# A collector process: `catdask gc` over and over until the file stop appears; prints how many
# snapshots it removed.
_COLLECTOR = STORE_ONLY_CHILD_PRELUDE + """
import time
from pathlib import Path
from catdask.store import gc_store
store, stop = sys.argv[1], Path(sys.argv[2])
removed = 0
deadline = time.monotonic() + 900
while not stop.exists() and time.monotonic() < deadline:
    removed += len(gc_store(store).removed)
    time.sleep(0.02)
print(removed)
"""
# The flow's task boundaries between the fit and the registration (fit_restarts returns, then
# review_certificates, then register) take at least this long; the test waits as long.
TASK_BOUNDARIES_SECONDS = 0.3


def _content(i):
    """Content ``i``: three Gaussian classes drawn with seed ``i`` (every content differs)."""
    X, y = make_blobs(n_per_class=60, n_features=6, n_classes=3, seed=1000 + i)
    return X, y


def _snapshot_sha(path):
    from catdask.object_store import LocalBackend
    from catdask.store.snapshots import verify_snapshot

    return verify_snapshot(LocalBackend(path.parent), path.name)["content_sha256"]


def _sha(X, y):
    classes = np.unique(y)
    return content_sha256(X, np.searchsorted(classes, y), classes.tolist())


class _TriggeringClient:
    """The real client, except that its first ``compute`` first runs ``before`` (the fit has
    resolved the data set by then: the moments pass is its first computation)."""

    def __init__(self, client, before):
        self._client, self._before = client, before

    def compute(self, *args, **kwargs):
        before, self._before = self._before, None
        if before is not None:
            before()
        return self._client.compute(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._client, name)


def _reference_fit(X, y, spec):
    """``spec`` fitted from scratch on (X, y) in memory: the numpy path, no store, no Dask."""
    mean, std = X.mean(axis=0), X.std(axis=0)
    scale = np.where(std > 0, std, 1.0)
    return mean, scale, spec.estimator().fit((X - mean) / scale, y)


def _same_model(model, reference, probe):
    """Scaler means and scales to 1e-10 (relative), the probe's category-space coordinates
    to 1e-6 of their size (different contents differ by O(1); the issue's mixes by >= 1.69)."""
    mean, scale, est = reference
    scaler = model[0]
    if not isinstance(scaler, StandardScaler):
        return False
    if not np.allclose(scaler.mean_, mean, rtol=1e-10, atol=1e-12):
        return False
    if not np.allclose(scaler.scale_, scale, rtol=1e-10, atol=1e-12):
        return False
    got = np.asarray(model.transform(probe))
    want = est.transform((probe - mean) / scale)
    return bool(np.abs(got - want).max() <= 1e-6 * max(1.0, np.abs(want).max()))


def _trains_during_reingests(tmp_path, scheduler, *, n_trains, n_writers, concurrency):
    """Run the trains, each triggering one re-ingest mid-fit, then audit every version."""
    store, work = tmp_path / "store", tmp_path / "work"
    work.mkdir()
    contents = {i: _content(i) for i in range(n_trains + 1)}
    shas = {i: _sha(*c) for i, c in contents.items()}
    assert len(set(shas.values())) == len(shas)  # every content distinct
    for i, (X, y) in contents.items():
        np.savez(work / f"content-{i}.npz", X=X, y=y)
    write_dataset(store, DATASET, *contents[0], chunk_rows=CHUNK_ROWS)
    spec = ModelSpec(method="cqs", origin="global", n_restarts=2, random_state=0)
    t0 = time.monotonic()

    # Re-ingest i (content i) is asked for by train i (1-based), from a separate process.
    writers = []
    for w in range(n_writers):
        mine = [i for i in range(1, n_trains + 1) if i % n_writers == w]
        writers.append(subprocess.Popen(
            [sys.executable, "-c", _WRITER, str(store), str(work), ",".join(map(str, mine)),
             "600"], stderr=subprocess.PIPE))

    collector = subprocess.Popen([sys.executable, "-c", _COLLECTOR, str(store), str(work / "stop")],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    def reingest(i):
        (work / f"go-{i}").touch()
        deadline = time.monotonic() + 300
        while not (work / f"done-{i}").exists():
            assert time.monotonic() < deadline, f"re-ingest {i} not done in 300 s"
            time.sleep(0.01)
        assert (work / f"done-{i}").read_text() == shas[i]

    def train(i):
        trigger = TRIGGERS[i % len(TRIGGERS)]
        asked = threading.Event()

        def once(*_):
            if not asked.is_set():
                asked.set()
                reingest(i)

        # As fit_restarts: a client on the scheduler, the fit, the decision, the registration.
        with dask_client_context(scheduler) as client:
            instrumented = _TriggeringClient(client, once if trigger == "before-moments" else None)
            with solver_progress(once if trigger == "mid-solve" else None):
                outcome = fit_on_dataset(store, DATASET, spec, client=instrumented)
        assert asked.is_set(), f"train {i}: its re-ingest was never triggered ({trigger})"
        time.sleep(TASK_BOUNDARIES_SECONDS)
        ok, status = registration_decision(outcome, allow_uncertified=True)
        assert ok
        return str(register_outcome(store, MODEL, outcome, status=status, run_key=f"train-{i}"))

    try:
        with ThreadPoolExecutor(concurrency) as pool:
            registered = list(pool.map(train, range(1, n_trains + 1)))
    finally:
        (work / "stop").touch()
        outputs = {}
        for w in writers + [collector]:
            with contextlib.suppress(subprocess.TimeoutExpired):
                outputs[w.pid] = w.communicate(timeout=60)
            if w.poll() is None:
                w.kill()
                w.wait()
    seconds = time.monotonic() - t0
    for w in writers + [collector]:
        assert w.returncode == 0, outputs.get(w.pid, (b"", b""))[1].decode()
    reingests = sum((work / f"done-{i}").exists() for i in range(1, n_trains + 1))
    collected = int(outputs[collector.pid][0].decode().strip())

    # The audit: each version's recorded checksum names one content; a fit from scratch on
    # that content (and on no other) gives the same model.
    probe = np.random.default_rng(7).standard_normal((25, 6)) * 5
    references = {}
    versions = list_versions(store, MODEL)
    matching, report = 0, []
    for v in versions:
        _, meta = load_model_version(store, MODEL, v.version)
        recorded = meta["dataset_sha256"]
        named = [i for i, s in shas.items() if s == recorded]
        model = load_estimator(store, MODEL, v.version)
        fits = []
        for i in contents:
            if i not in references:
                references[i] = _reference_fit(*contents[i], spec)
            if _same_model(model, references[i], probe):
                fits.append(i)
        # The snapshot it records is still there (gc keeps what a model refers to) and holds
        # that content.
        snapshot = store / "datasets" / DATASET / str(meta["dataset_snapshot"])
        kept = (snapshot / "zarr.json").is_file() and _snapshot_sha(snapshot) == recorded
        report.append((v.version, meta["dataset_snapshot"], named, fits, kept))
        if len(named) == 1 and fits == named and kept:
            matching += 1
    print(f"\ngoal 1: {len(registered)} trains, {reingests} re-ingests "
          f"({n_writers} writer processes), {len(versions)} versions, "
          f"{matching}/{len(versions)} models equal a fit on exactly one content and record its "
          f"checksum (and its snapshot is kept); gc removed {collected} snapshots meanwhile; "
          f"{seconds:.0f} s")
    assert len(registered) == n_trains and reingests == n_trains
    assert len(versions) == n_trains
    assert matching == n_trains, report
    assert check_store(store).ok, check_store(store).errors


@pytest.mark.slow
def test_trains_during_reingests_fit_one_content(tmp_path, dask_scheduler):
    """Fast variant: 2 trains at once, each with a re-ingest landing mid-fit (one before the
    moments pass, one mid-solve), 2 writer processes, gc running."""
    _trains_during_reingests(tmp_path, dask_scheduler, n_trains=2, n_writers=2, concurrency=2)


@pytest.mark.slow
@pytest.mark.timeout(480)
def test_20_trains_during_20_reingests_fit_one_content(tmp_path, dask_scheduler):
    """The issue's counts: 20 trains, 20 re-ingests from 4 writer processes, 4 trains at once;
    20/20 models equal a fit on exactly one content and record that content's checksum."""
    _trains_during_reingests(tmp_path, dask_scheduler, n_trains=20, n_writers=4, concurrency=4)


def test_gc_keeps_a_fits_snapshot_until_its_model_is_registered(tmp_path, monkeypatch):
    """The race goal 1 exposed (4/4 models lost their snapshot to a concurrent gc): a fit
    released its snapshot when the fit ended, before its version was registered, and gc read
    the model references once, before such a registration."""
    from catdask.store import gc as gc_mod

    store = tmp_path / "store"
    write_dataset(store, DATASET, *_content(0))
    outcome = fit_on_dataset(store, DATASET, ModelSpec(n_restarts=1))
    write_dataset(store, DATASET, *_content(1), replace=True)  # s1 is no longer current
    kept = dict(gc_store(store).kept)
    assert kept[store / "datasets" / DATASET / "s1"] == "a reader holds it"
    # gc read the references before the registration (stale), the fit then registered and
    # released the snapshot: the references read again under the snapshot's lock keep it.
    real = gc_mod.model_references
    calls = []

    def stale_first(root):
        calls.append(root)
        if len(calls) == 1:
            version = register_outcome(store, MODEL, outcome, status="certified")
            assert version.version == 1 and outcome.dataset_hold is None
            return set(), {}, []  # what gc saw before the version existed
        return real(root)

    monkeypatch.setattr(gc_mod, "model_references", stale_first)
    result = gc_store(store)
    assert result.removed == [] and len(calls) == 2
    assert "registered meanwhile" in dict(result.kept)[store / "datasets" / DATASET / "s1"]
    monkeypatch.setattr(gc_mod, "model_references", real)
    assert (store / "datasets" / DATASET / "s1" / "zarr.json").is_file()
    assert check_store(store).ok
    # A fit whose outcome is dropped unregistered releases its snapshot.
    other = fit_on_dataset(store, DATASET, ModelSpec(n_restarts=1))
    write_dataset(store, DATASET, *_content(2), replace=True)
    other.release()
    assert store / "datasets" / DATASET / "s2" in gc_store(store).removed


def test_reports_read_the_snapshot_a_model_was_fitted_on(tmp_path):
    """The train flow's plot and `catdask plot` show the data the model was fitted on
    (``read_dataset(snapshot=)``), not what a re-ingest put under the name since."""
    from catdask.errors import DatasetNotFoundError
    from catdask.store import read_dataset

    store = tmp_path / "store"
    write_dataset(store, DATASET, *_content(0))
    outcome = fit_on_dataset(store, DATASET, ModelSpec(n_restarts=1))
    write_dataset(store, DATASET, *_content(1), replace=True)
    fitted_on = read_dataset(store, DATASET, snapshot=outcome.dataset_snapshot)
    assert fitted_on.snapshot == "s1" and fitted_on.sha256 == _sha(*_content(0))
    np.testing.assert_array_equal(fitted_on.X, _content(0)[0])
    assert read_dataset(store, DATASET).sha256 == _sha(*_content(1))
    outcome.release()
    for missing in ("s9", "../s1", "x"):
        with pytest.raises(DatasetNotFoundError, match="no snapshot"):
            read_dataset(store, DATASET, snapshot=missing)


# ============================================================================ goal 2
CATDASK = BIN / "catdask"
KERNEL_DATASET = "kblobs"  # N = 2,000: a 5-restart kernel fit runs about 3 s (quiet machine)
# N = 12,000: tens of seconds, for the late mid-fit kills. At N = 8,000 one CI run registered
# the model before the "+ 15 s" kill once the kernel certificate got faster (issue 26).
LARGE_KERNEL_DATASET = "kblobs-large"
TABLE_DATASET = "table"  # re-ingested from a CSV file with --replace
ORPHAN_SECONDS = 30.0
# Kinds of check problems a killed writer may leave: its own unpublished work (removed by
# `check --cleanup`), never anything a reader sees.
CRASH_LEFTOVERS = {"temporary", "uncommitted"}


def _cmdline(p):
    try:
        return " ".join(p.cmdline())
    except psutil.Error:
        return ""


def _server_port(tree):
    """The temporary Prefect server's port, once its process exists in the command's tree."""
    for p in tree:
        words = _cmdline(p).split()
        if "uvicorn" in words and "--port" in words:
            return int(words[words.index("--port") + 1])
    return None


def _answers(port):
    import urllib.request

    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/health", timeout=1) as r:
            return r.status == 200
    except OSError:
        return False


def _n_workers(tree):
    return sum("spawn_main" in _cmdline(p) for p in tree)


def _temporaries(store):
    """Snapshots being written: written in place, committed by their zarr.json (issue 39)."""
    return [p for p in (Path(store) / "datasets").glob("*/s*")
            if p.is_dir() and not (p / "zarr.json").exists()]


def _registered(store):
    return list((Path(store) / "models").glob("*/v*"))


# Each scenario: (command, what it does, when to kill). ``when`` looks at the command's tree
# and store and returns True at the moment to kill; ``moment`` names it in the printout.
def _server_starting(proc, store, _t):
    return _server_port(proc.tree()) is not None


def _server_up(delay):
    def when(proc, store, t):
        port = _server_port(proc.tree())
        if port is None or not _answers(port):
            return False
        t.setdefault("up", time.monotonic())
        return time.monotonic() - t["up"] >= delay
    return when


def _mid_fit(delay):
    def when(proc, store, t):
        if _n_workers(proc.tree()) < 2:  # the embedded cluster's workers: the fit has begun
            return False
        t.setdefault("cluster", time.monotonic())
        return time.monotonic() - t["cluster"] >= delay
    return when


def _mid_write(delay):
    def when(proc, store, t):
        if not _temporaries(store):
            return False
        t.setdefault("tmp", time.monotonic())
        return time.monotonic() - t["tmp"] >= delay
    return when


def _mid_parse(csv):
    def when(proc, store, t):
        try:
            return any(f.path == str(csv) for f in psutil.Process(proc.pid).open_files())
        except psutil.Error:
            return False
    return when


def _train(dataset=KERNEL_DATASET):
    return ["train", dataset, "--method", "kcqs", "--restarts", "5", "--allow-uncertified"]


def _ingest_catalog():
    return ["ingest", "iris", "wine"]


def _ingest_file(csv):
    return ["ingest", "--file", str(csv), "--name", TABLE_DATASET, "--label-column", "0",
            "--replace"]


def _scenarios(csv):
    """The ten kills of the stress test: five of train, five of ingest, at varied moments."""
    return [
        ("train", _train(), "server starting", _server_starting),
        ("train", _train(), "server up, flow starting", _server_up(0.5)),
        ("train", _train(), "mid-fit (cluster up + 1 s)", _mid_fit(1.0)),
        # The small set's fit is done a few seconds after the cluster is up (measured 3.3 s).
        ("train", _train(LARGE_KERNEL_DATASET), "mid-fit (cluster up + 6 s)", _mid_fit(6.0)),
        ("train", _train(LARGE_KERNEL_DATASET), "mid-fit (cluster up + 15 s)", _mid_fit(15.0)),
        ("ingest", _ingest_catalog(), "server starting", _server_starting),
        ("ingest", _ingest_catalog(), "server up + 0.2 s", _server_up(0.2)),
        ("ingest", _ingest_catalog(), "server up + 2 s (flow running)", _server_up(2.0)),
        ("ingest", _ingest_file(csv), "mid-write (temporary created)", _mid_write(0.0)),
        ("ingest", _ingest_file(csv), "mid-parse (table file open)", _mid_parse(csv)),
    ]


def _template_store(tmp_path, csv_rows):
    """A store with the kernel data set and an old content of the table data set, and a CSV
    file of ``csv_rows`` rows whose content differs from it."""
    store = tmp_path / "template"
    X, y = make_blobs(n_per_class=500, n_features=8, n_classes=4, seed=1)
    write_dataset(store, KERNEL_DATASET, X, y)
    X, y = make_blobs(n_per_class=3000, n_features=8, n_classes=4, seed=2)
    write_dataset(store, LARGE_KERNEL_DATASET, X, y)
    old = np.arange(60, dtype=float).reshape(20, 3)
    write_dataset(store, TABLE_DATASET, old, [0, 1] * 10)
    # The CSV: one block of random rows repeated (fast to write, any size).
    rng = np.random.default_rng(3)
    block = "".join(f"{k % 3}," + ",".join(f"{v:.6f}" for v in rng.standard_normal(12)) + "\n"
                    for k in range(1000))
    csv = tmp_path / "table.csv"
    with open(csv, "w") as f:
        for _ in range(max(1, csv_rows // 1000)):
            f.write(block)
    return store, csv


def _check_after_kill(store):
    """The store after a kill: nothing half-written visible. Every data set reads and
    verifies; `catdask check` either passes, or reports only the killed writer's unpublished
    leftovers, which `catdask check --cleanup` removes (exit 0), then `catdask check` passes."""
    from catdask.store import check_store, list_datasets, read_dataset

    errors = check_store(store).errors
    assert {p.kind for p in errors} <= CRASH_LEFTOVERS, [(p.kind, p.message) for p in errors]
    for info in list_datasets(store):
        assert info.problem is None, info
        read_dataset(store, info.name, verify=True)
    env = child_env(Path(store).parent / "check-home")
    runs = []
    for args in ([] if not errors else [["--cleanup"]]) + [[]]:
        r = subprocess.run([str(CATDASK), "check", "--store", str(store), *args], env=env,
                           capture_output=True, text=True, timeout=300)
        runs.append(r.returncode)
        assert r.returncode == 0, (args, r.stdout[-2000:], r.stderr[-2000:])
    return len(errors)


def _kill_one(tmp_path, template, index, scenario, seeded):
    import shutil

    command, args, moment, when = scenario
    work = tmp_path / f"kill-{index}"
    store = work / "store"
    shutil.copytree(template, store)
    home = work / "prefect-home"
    home = seeded_prefect_home(home) if seeded else home
    # Several servers start at once on a loaded machine: more than the CLI's 120 s may pass.
    env = child_env(home, PREFECT_LOGGING_LEVEL="WARNING",
                    PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS=300)
    proc = Managed([CATDASK, *args, "--store", store], log=work / "command.log", env=env)
    result = {"command": command, "moment": moment, "pid": proc.pid}
    try:
        t0, marks = time.monotonic(), {}
        deadline = t0 + 300
        while not when(proc, store, marks):
            assert proc.alive(), (f"{command} ({moment}) exited with {proc.proc.returncode} "
                                  f"before the kill:\n{proc.tail()}")
            assert time.monotonic() < deadline, f"{command}: no '{moment}' in 300 s:\n{proc.tail()}"
            time.sleep(0.01)  # a quiet machine writes the table's temporary in well under 1 s
        tree = proc.tree()  # the descendants, just before the kill
        descendants = tree[1:]
        result.update(kill_at=time.monotonic() - t0, n_descendants=len(descendants),
                      registered_before=len(_registered(store)),
                      descendants=[_cmdline(p)[:100] for p in descendants])
        os.kill(proc.pid, signal.SIGKILL)
        assert proc.proc.wait(timeout=30) == -signal.SIGKILL
        t_kill = time.monotonic()
        gone, alive = psutil.wait_procs(descendants, timeout=ORPHAN_SECONDS)
        result["gone_after"] = time.monotonic() - t_kill if not alive else None
        result["orphans"] = [(p.pid, _cmdline(p)[:120]) for p in alive]
    finally:
        proc.kill()  # whatever is left (counted above), so no test leaves processes behind
    result["crash_leftovers"] = _check_after_kill(store)
    return result


def _kills(tmp_path, scenarios, template, *, concurrency, seeded):
    t0 = time.monotonic()
    with ThreadPoolExecutor(concurrency) as pool:
        futures = [pool.submit(_kill_one, tmp_path, template, i, s, seeded)
                   for i, s in enumerate(scenarios)]
        outcomes = []
        for f in futures:  # every scenario runs to its end; failures are reported together
            try:
                outcomes.append(f.result())
            except Exception as exc:
                outcomes.append(exc)
    seconds = time.monotonic() - t0
    failed = [exc for exc in outcomes if isinstance(exc, Exception)]
    results = [r for r in outcomes if not isinstance(r, Exception)]
    orphans = sum(len(r["orphans"]) for r in results)
    print(f"\ngoal 2: {len(results)} kill -9s "
          f"({sum(r['command'] == 'train' for r in results)} train, "
          f"{sum(r['command'] == 'ingest' for r in results)} ingest), "
          f"{sum(r['n_descendants'] for r in results)} descendant processes, "
          f"{orphans} orphaned after {ORPHAN_SECONDS:.0f} s, "
          f"{sum(r['crash_leftovers'] > 0 for r in results)} stores with crash leftovers "
          f"(cleaned by check --cleanup), all pass catdask check; {len(failed)} scenarios "
          f"failed; {seconds:.0f} s")
    for r in results:
        gone = "n/a" if r["n_descendants"] == 0 else (
            "ORPHANS" if r["gone_after"] is None else f"{r['gone_after']:.1f} s")
        print(f"  {r['command']:6s} {r['moment']:34s} killed at {r['kill_at']:5.1f} s, "
              f"{r['n_descendants']} descendants, all gone after {gone}, "
              f"{r['registered_before']} versions registered before, "
              f"{r['crash_leftovers']} leftovers")
    assert not failed, failed
    assert orphans == 0, [(r["command"], r["moment"], r["orphans"]) for r in results
                          if r["orphans"]]
    return results


@pytest.mark.slow
def test_kill_9_of_train_and_ingest_leaves_no_orphans(tmp_path):
    """Fast variant: `catdask train` killed while its Prefect server starts, `catdask ingest
    --file` killed mid-write; no descendant left after 30 s, the store passes check."""
    template, csv = _template_store(tmp_path, csv_rows=300_000)
    scenarios = [("train", _train(), "server starting", _server_starting),
                 ("ingest", _ingest_file(csv), "mid-write (temporary created)", _mid_write(0.0))]
    results = _kills(tmp_path, scenarios, template, concurrency=2, seeded=False)
    assert results[0]["n_descendants"] >= 1  # the server (or its launcher) was there to kill


@pytest.mark.stress
@pytest.mark.timeout(480)
def test_10_kill_9s_of_train_and_ingest_leave_no_orphans(tmp_path):
    """The issue's count: 10 `kill -9`s (5 train, 5 ingest; while the server starts, with
    the server up, mid-fit, mid-write), 0 orphaned processes after 30 s."""
    template, csv = _template_store(tmp_path, csv_rows=300_000)
    results = _kills(tmp_path, _scenarios(csv), template, concurrency=7, seeded=True)
    fits = [r for r in results if r["moment"].startswith("mid-fit")]
    # A mid-fit kill found the embedded cluster running and no version registered yet.
    assert all(r["registered_before"] == 0 and r["n_descendants"] >= 3 for r in fits), [
        (r["moment"], f"killed at {r['kill_at']:.1f} s", f"{r['registered_before']} registered",
         f"{r['n_descendants']} descendants") for r in fits]
