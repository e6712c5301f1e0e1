"""The backend contract (catdask/object_store/base.py), the same tests on a local folder and on
S3 (SeaweedFS): reads, writes, listing, and the two conditional writes the store's atomic
commits rest on, including under concurrency (exactly one winner of a race)."""

from __future__ import annotations

import threading
import time

import pytest

from catdask.object_store import NotFound, PreconditionFailed

WRITERS = 32
ROUNDS = 4


def test_missing_key_reads_as_absent(backend):
    with pytest.raises(NotFound):
        backend.get("no/such/key")
    assert backend.head("no/such/key") is None
    assert list(backend.list("no/")) == []
    backend.delete("no/such/key")  # no error


def test_put_get_head_agree(backend):
    before = time.time()
    version = backend.put("a/b/c.json", b"hello")
    data, got_version = backend.get("a/b/c.json")
    meta = backend.head("a/b/c.json")
    assert data == b"hello" and got_version == version
    assert meta is not None and meta.key == "a/b/c.json" and meta.size == 5
    assert meta.version == version
    # The server's clock: S3 dates have whole seconds, so allow one second each way.
    assert before - 1.5 <= meta.last_modified <= time.time() + 1.5


def test_every_write_changes_the_version(backend):
    v1 = backend.put("k", b"one")
    v2 = backend.put("k", b"two")
    v3 = backend.put_if_match("k", b"three", v2)
    assert len({v1, v2, v3}) == 3
    assert backend.get("k") == (b"three", v3)


def test_list_is_a_plain_string_prefix_recursive_and_skips_temporaries(backend):
    for key in ("ds/a/1", "ds/a/sub/2", "ds/ab/3", "ds/b/4", "other/5", "ds/a/.tmp-x/6",
                "ds/a/.tmp-7"):
        backend.put(key, key.encode())
    keys = lambda prefix: sorted(m.key for m in backend.list(prefix))  # noqa: E731
    assert keys("ds/a/") == ["ds/a/1", "ds/a/sub/2"]
    assert keys("ds/a") == ["ds/a/1", "ds/a/sub/2", "ds/ab/3"]
    assert keys("ds/") == ["ds/a/1", "ds/a/sub/2", "ds/ab/3", "ds/b/4"]
    assert keys("") == ["ds/a/1", "ds/a/sub/2", "ds/ab/3", "ds/b/4", "other/5"]
    sizes = {m.key: m.size for m in backend.list("ds/b")}
    assert sizes == {"ds/b/4": len(b"ds/b/4")}
    assert {m.version for m in backend.list("other/")} == {backend.head("other/5").version}


def test_list_folders_names_one_level_of_prefixes_with_keys_below(backend):
    for key in ("m/a/v1/zarr.json", "m/a/v1/W/c/0", "m/a/v2/W/zarr.json", "m/a/.runs/x",
                "m/a/.newest-version", "m/a/.tmp-v-9/zarr.json", "m/b/v1/zarr.json"):
        backend.put(key, b"x")
    assert sorted(backend.list_folders("m/a/")) == [".runs", "v1", "v2"]
    assert sorted(backend.list_folders("m/")) == ["a", "b"]
    assert backend.list_folders("") == ["m"]
    assert backend.list_folders("nothing/") == []


def test_put_new_creates_only(backend):
    version = backend.put_new("p", b"first")
    with pytest.raises(PreconditionFailed):
        backend.put_new("p", b"second")
    assert backend.get("p") == (b"first", version)


def test_put_if_match_is_a_compare_and_swap(backend):
    v1 = backend.put_new("ptr", b"1")
    v2 = backend.put_if_match("ptr", b"2", v1)
    with pytest.raises(PreconditionFailed):
        backend.put_if_match("ptr", b"stale", v1)
    assert backend.get("ptr") == (b"2", v2)
    with pytest.raises(PreconditionFailed):  # a key that does not exist matches no version
        backend.put_if_match("absent", b"x", v2)
    assert backend.head("absent") is None


def test_delete_then_stale_compare_and_swap_fails(backend):
    version = backend.put_new("gone", b"x")
    backend.delete("gone")
    backend.delete("gone")
    assert backend.head("gone") is None
    with pytest.raises(PreconditionFailed):
        backend.put_if_match("gone", b"y", version)
    assert backend.head("gone") is None
    assert backend.put_new("gone", b"again")  # a deleted key can be created anew


@pytest.mark.parametrize("key", ["", "/abs", "a//b", "a/../b", "./a", "a/", "a\\b"])
def test_bad_keys_are_refused(backend, key):
    with pytest.raises(ValueError):
        backend.put(key, b"x")


def test_zarr_store_round_trip(backend):
    import numpy as np
    import zarr

    values = np.arange(60, dtype="float64").reshape(20, 3)
    array = zarr.create_array(backend.zarr_store("data/X", read_only=False), shape=values.shape,
                              chunks=(7, 3), dtype=values.dtype)
    array[:] = values
    back = zarr.open_array(backend.zarr_store("data/X", read_only=True), mode="r")
    np.testing.assert_array_equal(back[:], values)
    keys = {m.key for m in backend.list("data/X/")}
    assert "data/X/zarr.json" in keys and len(keys) == 1 + 3  # metadata and three chunks


def _race(n: int, attempt) -> list[object]:
    """Run ``attempt(i)`` in ``n`` threads released together; each returns or raises."""
    barrier = threading.Barrier(n)
    outcomes: list[object] = [None] * n

    def run(i: int) -> None:
        barrier.wait()
        try:
            outcomes[i] = attempt(i)
        except Exception as exc:  # noqa: BLE001 - recorded and checked by the caller
            outcomes[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    return outcomes


@pytest.mark.slow
def test_concurrent_compare_and_swaps_have_exactly_one_winner(backend):
    """The proof the store's pointer rests on: many writers CAS one key from the same version;
    exactly one wins each round, every other one is told it lost, and the winner's bytes are
    what is stored."""
    version = backend.put_new("race/pointer", b"start")
    for round_ in range(ROUNDS):
        outcomes = _race(WRITERS, lambda i, v=version, r=round_: backend.put_if_match(
            "race/pointer", f"round {r} writer {i}".encode(), v))
        winners = [i for i, o in enumerate(outcomes) if isinstance(o, str)]
        losers = [o for o in outcomes if isinstance(o, PreconditionFailed)]
        assert len(winners) == 1, (round_, outcomes)
        assert len(losers) == WRITERS - 1, outcomes
        data, version = backend.get("race/pointer")
        assert data == f"round {round_} writer {winners[0]}".encode()
        assert version == outcomes[winners[0]]


@pytest.mark.slow
def test_concurrent_creates_have_exactly_one_winner(backend):
    for round_ in range(ROUNDS):
        key = f"race/new-{round_}"
        outcomes = _race(WRITERS, lambda i, k=key: backend.put_new(k, f"writer {i}".encode()))
        winners = [i for i, o in enumerate(outcomes) if isinstance(o, str)]
        assert len(winners) == 1, outcomes
        assert sum(isinstance(o, PreconditionFailed) for o in outcomes) == WRITERS - 1, outcomes
        assert backend.get(key) == (f"writer {winners[0]}".encode(), outcomes[winners[0]])


RACER = """
import os, sys, time
from catdask.object_store import LocalBackend, PreconditionFailed
root, key, version, go = sys.argv[1:5]
backend = LocalBackend(root)
print("ready", flush=True)
while not os.path.exists(go):
    time.sleep(0.001)
try:
    print("won", backend.put_if_match(key, f"pid {os.getpid()}".encode(), version), flush=True)
except PreconditionFailed:
    print("lost", flush=True)
"""


@pytest.mark.slow  # 36 interpreters; the thread races above are the fast proof
def test_local_compare_and_swap_across_processes(tmp_path):
    """flock and link(2) exclude processes as they exclude threads: the same race between
    separate interpreters on one folder."""
    import os
    import subprocess
    import sys

    from catdask.object_store import LocalBackend

    from ..helpers.paths import REPO

    backend = LocalBackend(tmp_path / "store")
    version = backend.put_new("ptr", b"start")
    for round_ in range(3):
        go = tmp_path / f"go-{round_}"
        racers = [subprocess.Popen([sys.executable, "-c", RACER, str(backend.root), "ptr",
                                    version, str(go)], cwd=REPO, stdout=subprocess.PIPE,
                                   text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
                  for _ in range(12)]
        for racer in racers:
            assert racer.stdout.readline().strip() == "ready"
        go.touch()
        results = [racer.communicate(timeout=60)[0].split() for racer in racers]
        winners = [r for r in results if r[0] == "won"]
        assert len(winners) == 1 and sum(r == ["lost"] for r in results) == 11, results
        data, version = backend.get("ptr")
        assert version == winners[0][1] and data.startswith(b"pid ")
