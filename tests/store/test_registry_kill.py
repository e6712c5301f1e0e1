"""A registration killed (SIGKILL, os._exit) at any point, on a local folder and on S3: no
version is ever half-visible, a number is never given twice afterwards, and cleanup removes
what the dead writer left once its lease is dead (a dead process of this host: at once)."""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from catdask.store import list_models, load_model_version, register_model
from catdask.store.ids import read_counter
from catdask.store.model_entries import model_listing, remove_uncommitted_versions
from catdask.store.root import open_store

from tests.helpers.store_faults import STORE_ONLY_CHILD_PRELUDE

# A child that registers versions of "m" forever (printing each), dying at a crash point
# when one is named: "<label>" (os._exit at that step) or "array:<name>" (mid-array).
LOOP_CHILD = STORE_ONLY_CHILD_PRELUDE + """
import os, sys
import numpy as np
from catdask.store import _atomic, _zarr_io, register_model
store, die_at = sys.argv[1], sys.argv[2]
if die_at.startswith("array:"):
    real = _zarr_io.write_array
    def dying(group, name, *a, **k):
        if name == die_at[6:]:
            os._exit(3)
        return real(group, name, *a, **k)
    _zarr_io.write_array = dying
elif die_at != "never":
    def hook(label):
        if label == die_at:
            os._exit(3)
    _atomic._CRASH_HOOK = hook
i = 0
while True:
    i += 1
    arrays = {"a": np.full((50, 20), float(i)), "b": np.arange(i, i + 30.0)}
    mv = register_model(store, "m", arrays, {"i": i})
    print(mv.version, flush=True)
"""

POINTS = ["model-number-taken", "array:a", "array:b", "model-arrays-written",
          "model-committed"]


def _consistent(store) -> list[int]:
    """Every listed version loads whole, with the arrays its metadata says; returns them."""
    versions = []
    for mv in list_models(store, "m"):
        assert mv.problem is None, mv.problem
        arrays, meta = load_model_version(store, "m", mv.version)
        np.testing.assert_array_equal(arrays["a"], np.full((50, 20), float(meta["i"])))
        versions.append(mv.version)
    return versions


def _numbers_seen(store) -> set[int]:
    listing = model_listing(open_store(store), "m")
    return set(listing.versions.get("m", {}))


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_registration_killed_at_any_point_leaves_nothing_half_visible(any_store):
    rng = random.Random(39)
    rounds = [(point, None) for point in POINTS] + [("never", rng.uniform(0.5, 2.5))
                                                   for _ in range(4)]
    given = set()
    for die_at, kill_after in rounds:
        proc = subprocess.Popen([sys.executable, "-c", LOOP_CHILD, any_store.url, die_at],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            if kill_after is not None:
                proc.stdout.readline()  # started and registered one: kill it mid-loop
                time.sleep(kill_after)
                proc.send_signal(signal.SIGKILL)
            out, err = proc.communicate(timeout=120)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        assert proc.returncode in (3, -signal.SIGKILL), err[-2000:]
        versions = _consistent(any_store.store)
        seen = _numbers_seen(any_store.store)
        assert seen >= given, "a committed version went missing"
        counter = read_counter(open_store(any_store.store).backend, "models/m/.newest-version")
        # The next registration's number is above every number any writer was given.
        mv = register_model(any_store.store, "m", {"a": np.full((50, 20), -1.0), "b": np.ones(3)},
                            {"i": -1})
        assert mv.version > max(seen | given | {counter}), (mv.version, seen, counter)
        given |= set(_consistent(any_store.store)) | seen
        assert set(versions) <= given
    removed = remove_uncommitted_versions(open_store(any_store.store), older_than_seconds=0)
    listing = model_listing(open_store(any_store.store), "m")
    assert listing.uncommitted("m") == [], (removed, listing.uncommitted("m"))
    final = _consistent(any_store.store)
    assert len(final) == len(set(final))
    print(f"\n{len(rounds)} killed registrations: {len(final)} versions intact, "
          f"{len(removed)} uncommitted prefixes removed, numbers up to {max(final)}")
