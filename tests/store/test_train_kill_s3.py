"""``kill -9`` of ``catdask train`` (the CLI, a child process) on an ``s3://`` store, at random
moments of its run and just as its registration starts (issue 39).

After each kill: nothing half-visible (``models list`` shows only committed versions, each
loads), ``check`` honest (it finds a problem exactly when an uncommitted version is left, and
``--cleanup`` makes the store whole), and the killed run's training lease does not block the
next training (its holder, a dead process of this host, is known dead at once). A last train
that is not killed registers exactly one new version, and one more finds it in the train cache.
"""

from __future__ import annotations

import random
import re
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from catdask.store import check_store, list_models, load_estimator, training_lease, write_dataset
from catdask.store.lease import models_in_training

from ..helpers.dataset_store import make_store
from ..helpers.paths import REPO
from ..helpers.s3_server import s3_server  # noqa: F401 - the session fixture

MODEL = "blobs-cqs"
_VERSION = re.compile(rf"^models/{MODEL}/v(\d+)/")


def _versions(st) -> tuple[set[int], set[int]]:
    """An independent look at the keys: (version prefixes, committed ones: their zarr.json)."""
    keys = st.keys(f"models/{MODEL}/")
    found = {int(m.group(1)) for k in keys if (m := _VERSION.match(k))}
    return found, {v for v in found if f"models/{MODEL}/v{v}/zarr.json" in keys}


def _train(st, env, *extra):
    return subprocess.Popen(
        [sys.executable, "-m", "catdask", "train", "blobs", "--restarts", "2", "--store", st.url,
         *extra], cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _finish(proc, timeout=300) -> str:
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, err[-3000:]
    return out + err


def _whole_after_kill(st, where: str) -> None:
    found, committed = _versions(st)
    listed = {v.version for v in list_models(st.store, MODEL)}
    assert listed == committed, (where, listed, committed)  # nothing half-visible
    for v in sorted(listed):
        load_estimator(st.store, MODEL, v)
    # The killed holder is a dead process of this host: its lease holds nothing.
    assert models_in_training(st.store) == [], where
    with training_lease(st.store, MODEL, holder="test") as waited:
        assert waited == 0.0, where
    report = check_store(st.store)
    assert report.ok == (found == committed), (where, found, committed, report.problems)
    assert {p.kind for p in report.errors} <= {"temporary"}, (where, report.problems)
    cleaned = check_store(st.store, cleanup=True)
    assert cleaned.ok, (where, cleaned.problems)
    assert _versions(st) == (committed, committed), where
    assert check_store(st.store).ok, where


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.parametrize("spread, at_registration", [
    (2, 1),  # 3 kills: one in each half of a run, one as its registration starts
    pytest.param(4, 2, marks=pytest.mark.stress),  # 6: one a quarter, two at registration
], ids=["3-kills", "6-kills"])
def test_kill_9_of_train_on_s3_at_random_points(request, tmp_path, prefect_env, monkeypatch,
                                                spread, at_registration):
    from catdask.distributed.cluster import start_local_cluster

    st = make_store("s3", tmp_path, request)
    for key, value in st.env.items():
        monkeypatch.setenv(key, value)  # before the workers start: they read the store
    rng = np.random.default_rng(0)
    X = np.vstack([rng.normal(c, 1.0, (30, 4)) for c in (0.0, 3.0, 6.0)])
    write_dataset(st.store, "blobs", X, np.repeat([0, 1, 2], 30))
    cluster, client = start_local_cluster(1)
    env = dict(prefect_env, **st.env, CATDASK_SCHEDULER=cluster.scheduler_address)
    try:
        _finish(_train(st, env))  # v1; the next, warm, run's duration spaces the kills
        started = time.monotonic()
        _finish(_train(st, env, "--refit"))
        duration = time.monotonic() - started
        assert _versions(st)[1] == {1, 2}

        kills = random.Random(39)
        moments: list = [(i + kills.random()) / spread * duration for i in range(spread)]
        # As soon as it writes its first object under the model, and a little later.
        moments += [("registration", 0.0),
                    ("registration", kills.uniform(0.02, 0.5))][:at_registration]
        for i, moment in enumerate(moments):
            before = set(st.keys(f"models/{MODEL}/"))
            proc = _train(st, env, "--refit")
            if isinstance(moment, tuple):
                deadline = time.monotonic() + 300
                while set(st.keys(f"models/{MODEL}/")) <= before and proc.poll() is None \
                        and time.monotonic() < deadline:
                    time.sleep(0.01)
                time.sleep(moment[1])
            else:
                try:
                    proc.wait(timeout=moment)
                except subprocess.TimeoutExpired:
                    pass
            proc.send_signal(signal.SIGKILL)
            _, err = proc.communicate(timeout=60)
            assert proc.returncode in (0, -signal.SIGKILL), err[-3000:]
            where = f"kill {i} at {moment} (of {duration:.1f} s): rc {proc.returncode}"
            print(where, "(version prefixes, committed):", _versions(st))
            _whole_after_kill(st, where)

        committed = _versions(st)[1]
        _finish(_train(st, env, "--refit"))
        new = _versions(st)[1] - committed
        assert len(new) == 1 and min(new) > max(committed), (committed, new)  # exactly one
        assert {v.version for v in list_models(st.store, MODEL)} == committed | new
        # Not refit: the train cache answers with that version, nothing is registered.
        _finish(_train(st, env))
        assert _versions(st) == (committed | new, committed | new)
        check = subprocess.run([sys.executable, "-m", "catdask", "check", "--store", st.url],
                               cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
        assert check.returncode == 0, check.stdout + check.stderr
    finally:
        client.close()
        cluster.close()
