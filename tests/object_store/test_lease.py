"""Leases on both backends (catdask/object_store/lease.py): exclusion, release, renewal,
expiry takeover (also of a SIGKILLed holder), the holder learning it lost, and exactly one
winner among concurrent acquirers, of a free lease and of an expired one."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from catdask.object_store import LocalBackend
from catdask.object_store.lease import (LeaseHeldError, LeaseLostError, acquire, lease_record,
                                        server_now)

from ..helpers.paths import REPO
from .test_contract import _race

TTL = 1.0
MARGIN = 1.0  # S3's last_modified has whole seconds


def test_a_held_lease_excludes_and_names_its_holder(backend):
    with acquire(backend, "leases/m", "train of m", ttl_s=30):
        with pytest.raises(LeaseHeldError) as info:
            acquire(backend, "leases/m", "another train", ttl_s=30)
        message = str(info.value)
        assert "train of m" in message and str(os.getpid()) in message and "\n" not in message
    with acquire(backend, "leases/m", "another train", ttl_s=30) as second:  # released: free
        assert lease_record(backend, "leases/m")["holder"] == "another train"
        second.check()


@pytest.mark.slow
def test_heartbeat_keeps_the_lease_past_its_ttl(backend):
    with acquire(backend, "leases/hb", "holder", ttl_s=TTL, margin_s=MARGIN) as lease:
        time.sleep(3 * (TTL + MARGIN))
        with pytest.raises(LeaseHeldError):
            acquire(backend, "leases/hb", "other", ttl_s=TTL, margin_s=MARGIN)
        lease.check()
        assert lease_record(backend, "leases/hb")["seq"] >= 3  # renewed, each a new version


def test_an_unrenewed_lease_expires_and_its_holder_learns_it(backend):
    first = acquire(backend, "leases/x", "first", ttl_s=TTL, heartbeat=False, margin_s=MARGIN)
    start = time.monotonic()
    second = acquire(backend, "leases/x", "second", ttl_s=30, wait_s=10, margin_s=MARGIN)
    waited = time.monotonic() - start
    assert waited >= TTL - 0.1  # not before it expired (S3: whole seconds, so about TTL)
    with pytest.raises(LeaseLostError):
        first.renew()
    assert first.lost.is_set()
    first.release()  # a lost lease's release leaves the successor alone
    assert lease_record(backend, "leases/x")["holder"] == "second"
    second.check()
    second.release()


def test_heartbeat_reports_a_takeover(backend):
    lost = threading.Event()
    lease = acquire(backend, "leases/t", "holder", ttl_s=0.9, margin_s=MARGIN,
                    on_lost=lambda _lease: lost.set())
    backend.put("leases/t", b'{"holder": "an intruder", "ttl_s": 60}')  # moved under it
    assert lost.wait(5), "the heartbeat did not notice the lease was taken"
    with pytest.raises(LeaseLostError):
        lease.check()
    lease.release()
    assert lease_record(backend, "leases/t")["holder"] == "an intruder"


CHILD = """
import sys, time
from catdask.object_store import LocalBackend
from catdask.object_store.s3 import S3Backend
from catdask.object_store.lease import acquire
kind, where, prefix = sys.argv[1:4]
backend = LocalBackend(where) if kind == "local" else S3Backend(where, prefix)
lease = acquire(backend, "leases/killed", "a holder about to be killed", ttl_s=float(sys.argv[4]))
print("held", flush=True)
time.sleep(600)
"""


@pytest.mark.slow
def test_a_killed_holders_lease_expires(backend, request):
    if isinstance(backend, LocalBackend):
        args, env = ["local", str(backend.root), ""], {}
    else:
        args, env = ["s3", backend.bucket, backend.prefix], request.getfixturevalue(
            "s3_server").env
    child = subprocess.Popen([sys.executable, "-c", CHILD, *args, str(TTL)], cwd=REPO,
                             stdout=subprocess.PIPE, text=True,
                             env={**os.environ, **env, "PYTHONPATH": str(REPO)})
    try:
        assert child.stdout.readline().strip() == "held"
        time.sleep(2 * (TTL + MARGIN))  # its heartbeat keeps it alive meanwhile
        with pytest.raises(LeaseHeldError):
            acquire(backend, "leases/killed", "taker", ttl_s=30, margin_s=MARGIN)
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=10)
        with acquire(backend, "leases/killed", "taker", ttl_s=30, wait_s=10, margin_s=MARGIN):
            assert lease_record(backend, "leases/killed")["holder"] == "taker"
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


@pytest.mark.parametrize("state", ["free", "expired"])
@pytest.mark.slow
def test_concurrent_acquirers_have_exactly_one_winner(backend, state):
    key = f"leases/race-{state}"
    if state == "expired":
        acquire(backend, key, "gone", ttl_s=0.5, heartbeat=False, margin_s=0.0)
        time.sleep(2.1)  # S3: a second of date resolution on each side
    outcomes = _race(16, lambda i: acquire(backend, key, f"contender {i}", ttl_s=30,
                                           heartbeat=False, margin_s=0.0))
    winners = [o for o in outcomes if not isinstance(o, Exception)]
    assert len(winners) == 1, outcomes
    assert all(isinstance(o, LeaseHeldError) for o in outcomes if o is not winners[0]), outcomes
    assert lease_record(backend, key)["holder"] == winners[0].holder


def test_server_clock_is_close_to_ours(backend):
    assert abs(server_now(backend) - time.time()) < 2.0
    assert list(backend.list("")) == []  # the clock probe leaves nothing behind


def test_a_lease_not_renewed_for_its_ttl_is_lost_to_its_holder_too(backend):
    """Others may take a lease over once its ttl has passed since its last renewal; a holder
    whose renewal hangs (an overloaded server: requests time out after 120 s) must not go on
    to commit under it."""
    lease = acquire(backend, "leases/hung", "holder", ttl_s=TTL, heartbeat=False,
                    margin_s=MARGIN)
    lease.check()  # renewed (taken) just now
    time.sleep(TTL + 0.1)
    with pytest.raises(LeaseLostError):
        lease.check()
    assert lease.lost.is_set()
