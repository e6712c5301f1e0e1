"""The training lease: one training of a model at a time per store (store/lease.py).

A second holder waits for the first and is told who holds it; a holder killed by the OS frees
the model at once; different models do not wait for each other; the lease leaves the store as
it found it, never creates one, and the store's check passes while one is held.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

from catdask.store import check_store, gc_store, training_lease, write_dataset
from catdask.store.lease import lease_holder, training_lease_path

from tests.helpers.paths import REPO

pytestmark = pytest.mark.skipif(os.name == "nt", reason="flock: the lease excludes nothing "
                                "on Windows")


def test_second_holder_waits_and_is_told_who_holds_the_lease(tmp_path):
    events, told = [], []
    first_in = threading.Event()
    release = threading.Event()

    def first():
        with training_lease(tmp_path, "m", holder="run A") as waited:
            events.append(("A in", waited))
            first_in.set()
            release.wait(10)
            events.append(("A out", None))

    def second():
        first_in.wait(10)
        with training_lease(tmp_path, "m", holder="run B", poll_seconds=0.02,
                            on_wait=lambda other, s: told.append(other)) as waited:
            events.append(("B in", waited))

    a, b = threading.Thread(target=first), threading.Thread(target=second)
    a.start()
    b.start()
    time.sleep(0.3)
    assert [e[0] for e in events] == ["A in"]  # B is still waiting
    release.set()
    a.join(10)
    b.join(10)
    assert [e[0] for e in events] == ["A in", "A out", "B in"]
    assert events[0][1] == 0.0 and events[2][1] >= 0.25  # B waited about 0.3 s
    assert told and told[0]["holder"] == "run A" and told[0]["pid"] == os.getpid()
    assert {"host", "since"} <= told[0].keys()
    assert len(told) == 1  # one report, not one per poll (report_every is 300 s)


def test_the_lease_says_who_holds_it_and_leaves_the_store_as_it_was(tmp_path):
    path = training_lease_path(tmp_path, "m")
    with training_lease(tmp_path, "m", holder="flow run 42"):
        assert lease_holder(path)["holder"] == "flow run 42"
        with training_lease(tmp_path, "other"):  # a second lease beside it
            pass
        assert path.exists()
    assert lease_holder(path) == {}
    assert list(tmp_path.iterdir()) == []  # the file and its folder are gone


def test_different_models_do_not_wait_for_each_other(tmp_path):
    with training_lease(tmp_path, "a"):
        done = []
        t = threading.Thread(target=lambda: done.append(
            training_lease(tmp_path, "b").__enter__()))
        t.start()
        t.join(5)
        assert done == [0.0]


def test_a_killed_holder_frees_the_model_at_once(tmp_path):
    code = textwrap.dedent(f"""
        import sys, time
        sys.path.insert(0, {str(REPO)!r})
        from catdask.store import training_lease
        with training_lease({str(tmp_path)!r}, "m", holder="doomed"):
            print("held", flush=True)
            time.sleep(60)
    """)
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "held"
        told, taken = [], threading.Event()

        def wait_then_hold():
            with training_lease(tmp_path, "m", poll_seconds=0.02,
                                on_wait=lambda o, s: told.append(o)):
                taken.set()

        t = threading.Thread(target=wait_then_hold)
        t.start()
        time.sleep(0.3)
        assert not taken.is_set() and told[0]["holder"] == "doomed"
        os.kill(proc.pid, signal.SIGKILL)  # no cleanup runs: the OS drops the lock
        t.join(5)
        assert taken.is_set()
        # The killed run's file was taken over, then removed by the run that took it.
        assert not training_lease_path(tmp_path, "m").exists()
    finally:
        proc.kill()
        proc.wait()


def test_a_file_locked_after_its_holder_removed_it_is_not_the_lease(tmp_path, monkeypatch):
    """A waiter opens the lease file; its holder removes it as it lets go; a third run takes
    the lease on a new file. The waiter's lock on the removed file is free, and taking it
    must not count as holding the lease, or two runs would fit at once: the waiter opens
    the new file and waits for the third run."""
    from catdask.store import lease

    path = training_lease_path(tmp_path, "m")
    with training_lease(tmp_path, "m", holder="first"):
        stale = open(path, "a+b")  # the waiter's open, before its lock
    third_in, release, entered = threading.Event(), threading.Event(), threading.Event()

    def third():
        with training_lease(tmp_path, "m", holder="third"):
            third_in.set()
            release.wait(10)

    def waiter():
        with training_lease(tmp_path, "m", poll_seconds=0.01):
            entered.set()

    opened = [stale]
    real_open = lease._open
    monkeypatch.setattr(lease, "_open", lambda p: opened.pop() if opened else real_open(p))
    t3 = threading.Thread(target=third)
    t3.start()
    assert third_in.wait(10)
    tw = threading.Thread(target=waiter)
    tw.start()
    time.sleep(0.3)
    try:
        assert opened == [] and stale.closed  # it had the removed file, and let it go
        assert not entered.is_set(), "the waiter held a removed file as the lease"
    finally:
        release.set()
        t3.join(10)
        tw.join(10)
    assert entered.is_set()


def test_the_lease_never_creates_a_store(tmp_path):
    missing = tmp_path / "typo-store"
    with training_lease(missing, "m") as waited:
        assert waited == 0.0
    assert not missing.exists()


def test_refuses_a_model_name_that_leaves_the_folder(tmp_path):
    with pytest.raises(ValueError, match="model"):
        with training_lease(tmp_path, "../evil"):
            pass


def test_the_store_check_passes_while_a_lease_is_held(tmp_path):
    X = np.random.default_rng(0).normal(size=(30, 3))
    write_dataset(tmp_path, "d", X, np.repeat([0, 1, 2], 10))
    with training_lease(tmp_path, "m"):
        assert check_store(tmp_path).ok, check_store(tmp_path).problems
        assert gc_store(tmp_path).removed == []
    assert check_store(tmp_path).ok


def test_models_in_training_lists_the_held_leases_only(tmp_path):
    from catdask.store.lease import models_in_training

    assert models_in_training(tmp_path / "no-store") == []
    with training_lease(tmp_path, "m", holder="flow run 1"):
        (held,) = models_in_training(tmp_path)
        assert held["model"] == "m" and held["holder"] == "flow run 1"
        assert held["pid"] == os.getpid()
    assert models_in_training(tmp_path) == []
    # What a killed run leaves: its description, its process gone (this host), or a holder
    # on another host, which cannot be asked and is listed as it says.
    folder = tmp_path / ".training"
    folder.mkdir()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    import json
    import socket

    (folder / "a.lock").write_text(json.dumps({"holder": "killed", "pid": dead.pid,
                                               "host": socket.gethostname(), "since": "t"}))
    (folder / "b.lock").write_text(json.dumps({"holder": "far", "pid": 1, "host": "elsewhere",
                                               "since": "t"}))
    (folder / "c.lock").write_text("")  # a waiter's empty file
    assert [m["model"] for m in models_in_training(tmp_path)] == ["b"]
