"""The training lease: one training of a model at a time per store (store/lease.py), on a
local folder and on S3 (tests/store/conftest.py).

A second holder waits for the first and is told who holds it; of many contenders exactly one
holds it at a time; a holder killed on this host frees the model at once, one on another host
after its ttl; different models do not wait for each other; the lease never creates a local
store, and the store's check passes while one is held.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

from catdask.object_store.lease import lease_record
from catdask.store import check_store, gc_store, training_lease, write_dataset
from catdask.store.lease import models_in_training, training_lease_key
from catdask.store.root import open_store

from tests.helpers.paths import REPO


@pytest.fixture
def store(any_store):
    """A store on each backend; a local one exists (the lease never creates a store)."""
    if any_store.kind == "local":
        any_store.store.mkdir()
    return any_store.store


def test_second_holder_waits_and_is_told_who_holds_the_lease(store):
    events, told = [], []
    first_in = threading.Event()
    release = threading.Event()

    def first():
        with training_lease(store, "m", holder="run A") as waited:
            events.append(("A in", waited))
            first_in.set()
            release.wait(10)
            events.append(("A out", None))

    def second():
        first_in.wait(10)
        with training_lease(store, "m", holder="run B", poll_seconds=0.02,
                            on_wait=lambda other, s: told.append(other)) as waited:
            events.append(("B in", waited))

    a, b = threading.Thread(target=first), threading.Thread(target=second)
    a.start()
    b.start()
    assert first_in.wait(10)
    time.sleep(0.5)
    assert [e[0] for e in events] == ["A in"]  # B is still waiting
    release.set()
    a.join(10)
    b.join(10)
    assert [e[0] for e in events] == ["A in", "A out", "B in"]
    assert events[0][1] == 0.0 and events[2][1] >= 0.4  # B waited about 0.5 s
    assert told and told[0]["holder"] == "run A" and told[0]["pid"] == os.getpid()
    assert {"host", "since"} <= told[0].keys()
    assert len(told) == 1  # one report, not one per poll (report_every is 300 s)


def test_of_many_contenders_exactly_one_holds_the_lease_at_a_time(store):
    holding, most, order = [], [0], []
    lock = threading.Lock()

    def train(i):
        with training_lease(store, "m", holder=f"run {i}", poll_seconds=0.02):
            with lock:
                holding.append(i)
                most[0] = max(most[0], len(holding))
            time.sleep(0.1)
            with lock:
                holding.remove(i)
                order.append(i)

    threads = [threading.Thread(target=train, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert sorted(order) == [0, 1, 2, 3] and most[0] == 1


def test_the_lease_says_who_holds_it_and_is_released_after(store):
    """(Before the port the lease file was removed on release; a released record stays now:
    the seam has no conditional delete.)"""
    backend = open_store(store).backend
    with training_lease(store, "m", holder="flow run 42"):
        assert json.loads(lease_record(backend, ".training/m")["holder"])["holder"] == \
            "flow run 42"
        with training_lease(store, "other"):  # a second lease beside it
            pass
        assert [t["model"] for t in models_in_training(store)] == ["m"]
    assert lease_record(backend, ".training/m")["released"] is True
    assert models_in_training(store) == []


def test_different_models_do_not_wait_for_each_other(store):
    with training_lease(store, "a"):
        done = []
        t = threading.Thread(target=lambda: done.append(
            training_lease(store, "b").__enter__()))
        t.start()
        t.join(10)
        assert done == [0.0]


def test_a_killed_holder_on_this_host_frees_the_model_at_once(store):
    code = textwrap.dedent(f"""
        import sys, time
        sys.path.insert(0, {str(REPO)!r})
        from catdask.store import training_lease
        with training_lease({str(store)!r}, "m", holder="doomed"):
            print("held", flush=True)
            time.sleep(60)
    """)
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "held"
        told, taken = [], threading.Event()

        def wait_then_hold():
            with training_lease(store, "m", poll_seconds=0.02,
                                on_wait=lambda o, s: told.append(o)):
                taken.set()

        t = threading.Thread(target=wait_then_hold)
        t.start()
        time.sleep(0.5)
        assert not taken.is_set() and told[0]["holder"] == "doomed"
        os.kill(proc.pid, signal.SIGKILL)  # no cleanup runs; its ttl (60 s) is far away
        t.join(10)
        assert taken.is_set()
    finally:
        proc.kill()
        proc.wait()


def test_a_killed_holder_on_another_host_is_taken_over_after_its_ttl(store):
    """A holder that cannot be asked (another machine) keeps the model until its lease
    expires by the store's clock: ttl plus the margin for clocks (2 s)."""
    backend = open_store(store).backend
    backend.put_new(training_lease_key("m"), json.dumps({
        "holder": json.dumps({"holder": "far run", "since": "t"}), "pid": 1,
        "host": "elsewhere", "token": "x", "seq": 0, "ttl_s": 1.0,
        "released": False}).encode())
    assert [t["model"] for t in models_in_training(store)] == ["m"]
    told = []
    start = time.monotonic()
    with training_lease(store, "m", holder="me", poll_seconds=0.1,
                        on_wait=lambda o, s: told.append(o)) as waited:
        took = time.monotonic() - start
    assert told[0]["holder"] == "far run" and told[0]["host"] == "elsewhere"
    assert 1.0 <= waited <= took < 20, (waited, took)
    print(f"\nanother host's killed holder (ttl 1 s) taken over after {took:.1f} s")


def test_the_lease_never_creates_a_store(tmp_path):
    missing = tmp_path / "typo-store"
    with training_lease(missing, "m") as waited:
        assert waited == 0.0
    assert not missing.exists()


def test_refuses_a_model_name_that_leaves_the_folder(store):
    with pytest.raises(ValueError, match="model"):
        with training_lease(store, "../evil"):
            pass


def test_the_store_check_passes_while_a_lease_is_held(tmp_path):
    X = np.random.default_rng(0).normal(size=(30, 3))
    write_dataset(tmp_path, "d", X, np.repeat([0, 1, 2], 10))
    with training_lease(tmp_path, "m"):
        assert check_store(tmp_path).ok, check_store(tmp_path).problems
        assert gc_store(tmp_path).removed == []
    assert check_store(tmp_path).ok


def test_models_in_training_lists_the_live_leases_only(store, tmp_path):
    assert models_in_training(tmp_path / "no-store") == []
    assert not (tmp_path / "no-store").exists()
    with training_lease(store, "m", holder="flow run 1"):
        (held,) = models_in_training(store)
        assert held["model"] == "m" and held["holder"] == "flow run 1"
        assert held["pid"] == os.getpid()
    assert models_in_training(store) == []
    # What killed runs leave: a record of a dead process of this host, one of another host
    # (listed until it expires), an expired one, and an earlier catdask's lock file.
    backend = open_store(store).backend
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    import socket

    def record(host, pid, ttl):
        return json.dumps({"holder": "x", "pid": pid, "host": host, "token": "t", "seq": 0,
                           "ttl_s": ttl, "released": False}).encode()

    backend.put(".training/a", record(socket.gethostname(), dead.pid, 600))
    backend.put(".training/b", record("elsewhere", 1, 600))
    backend.put(".training/c", record("elsewhere", 1, 0.001))
    backend.put(".training/d.lock", b"")
    time.sleep(3.5)  # c expires (ttl plus the 2 s margin; S3 dates have whole seconds)
    assert [m["model"] for m in models_in_training(store)] == ["b"]
