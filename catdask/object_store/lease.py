"""Leases: "one holder at a time" on any backend, where ``flock`` does not exist (S3).

A lock that the OS drops when its holder dies has no equivalent on object storage, so the
store's exclusions (a model's training, gc's exclusion of writers, readers' holds) become
leases: a small object at a key naming its holder, valid for ``ttl_s`` after the server last
wrote it, kept alive by a heartbeat. Everything is built on the backend's two conditional
writes (S3: ``If-None-Match: *`` and ``If-Match: <ETag>``, both answered 412 when they lose):

* **acquire**: create-only write of the lease; if one exists and has expired (or was
  released), compare-and-swap over exactly the version that was judged expired. Of any number
  of contenders exactly one write succeeds.
* **heartbeat**: a daemon thread renews by compare-and-swap every ``ttl_s / 3``. A renewal that
  loses (412: someone took the lease over) or cannot reach the server until the lease would
  have expired marks the lease lost: the holder learns it from :attr:`Lease.lost` /
  :meth:`Lease.check` before it commits anything.
* **release**: compare-and-swap to a *released* record, which the next acquirer takes over
  like an expired one. Not a delete: the seam has no conditional delete, and a plain delete
  after checking "still ours" could remove a successor's lease taken in between.

Expiry is judged by the server's clock only: the lease object's ``last_modified`` against the
``last_modified`` of a probe object written just then (S3's dates have whole seconds, hence
``margin_s``). Each renewal writes a new sequence number, so a lease's version never repeats
(S3's ETag is the MD5 of the bytes).
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from ._fs import TMP_PREFIX
from .base import Backend, NotFound, PreconditionFailed
from .errors import ObjectStoreError

#: Seconds added to a lease's ttl before another may take it over (clock resolution, skew).
MARGIN_S = 2.0


class LeaseHeldError(ObjectStoreError, TimeoutError):
    """The lease is held by someone else (named in the message) and has not expired."""

    def __init__(self, key: str, record: dict[str, Any], expires_in_s: float):
        self.key, self.record, self.expires_in_s = key, record, expires_in_s
        super().__init__(f"{key} is held by {record.get('holder', 'an unknown holder')} "
                         f"(pid {record.get('pid', '?')} on {record.get('host', '?')}); it "
                         f"expires in {max(expires_in_s, 0):.0f} s unless renewed.")


class LeaseLostError(ObjectStoreError, RuntimeError):
    """Our lease was taken over or could not be renewed in time: stop before committing."""


def server_now(backend: Backend) -> float:
    """The backend's clock: the ``last_modified`` of a probe object written now (deleted
    after; a ``.tmp-`` key, so no listing shows it if that delete is lost)."""
    probe = f"{TMP_PREFIX}clock-{uuid.uuid4().hex}"
    backend.put(probe, b"")
    try:
        meta = backend.head(probe)
    finally:
        backend.delete(probe)
    if meta is None:  # pragma: no cover - a store that loses a write at once
        raise ObjectStoreError(f"{backend.url}: a probe object vanished right after writing")
    return meta.last_modified


def lease_record(backend: Backend, key: str) -> dict[str, Any] | None:
    """What the lease at ``key`` says (holder, pid, host, ttl_s, released), or None."""
    try:
        data, _ = backend.get(key)
    except NotFound:
        return None
    return _decode(data)


def _decode(data: bytes) -> dict[str, Any]:
    try:
        record = json.loads(data)
    except ValueError:
        record = None
    # A damaged record holds nothing: treated as released (and said so in the holder).
    return record if isinstance(record, dict) else {"holder": "a damaged lease record",
                                                    "released": True}


class Lease:
    """A held lease; renewed by a heartbeat thread until :meth:`release`. Use as a context
    manager, and call :meth:`check` before each step that must happen under the lease."""

    def __init__(self, backend: Backend, key: str, holder: str, ttl_s: float, version: str,
                 token: str, on_lost: Callable[[Lease], None] | None = None,
                 taken_at: float | None = None):
        self.backend, self.key, self.holder, self.ttl_s = backend, key, holder, ttl_s
        self.version, self.token, self.on_lost = version, token, on_lost
        self.lost = threading.Event()
        self._seq = 0
        # When the request of the last write that landed was sent (time.monotonic()): the
        # server stamped it later, so others judge it expired no sooner than ttl_s after this.
        self._last_renewal = time.monotonic() if taken_at is None else taken_at
        self._stop = threading.Event()
        self._lock = threading.Lock()  # renewals and release do not interleave
        self._thread: threading.Thread | None = None

    def __enter__(self) -> Lease:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def start_heartbeat(self) -> None:
        self._thread = threading.Thread(target=self._beat, name=f"lease {self.key}",
                                        daemon=True)
        self._thread.start()

    def check(self) -> None:
        """Raise :class:`LeaseLostError` if the lease is no longer ours: taken over, or not
        renewed for ``ttl_s`` (a renewal that hangs: others may take it over from then on)."""
        if time.monotonic() - self._last_renewal > self.ttl_s:
            self._mark_lost()
        if self.lost.is_set():
            raise LeaseLostError(f"{self.key}: the lease of {self.holder} was lost (taken over "
                                 "after it expired, or not renewed in time)")

    def renew(self) -> None:
        """Renew now (compare-and-swap); marks the lease lost and raises if it was taken."""
        with self._lock:
            self.check()
            self._seq += 1
            sent = time.monotonic()
            try:
                self.version = self.backend.put_if_match(
                    self.key, _encode(self.holder, self.token, self.ttl_s, self._seq),
                    self.version)
            except PreconditionFailed:
                self._mark_lost()
                self.check()
            self._last_renewal = sent

    def release(self) -> None:
        """Stop renewing and mark the lease released, if it is still ours."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=self.ttl_s)
        with self._lock:
            if self.lost.is_set():
                return
            try:
                self.backend.put_if_match(
                    self.key, _encode(self.holder, self.token, self.ttl_s, self._seq + 1,
                                      released=True), self.version)
            except PreconditionFailed:
                pass  # already taken over: nothing of ours to release
            self.lost.set()  # no longer held, by us

    def _mark_lost(self) -> None:
        if not self.lost.is_set():
            self.lost.set()
            if self.on_lost is not None:
                self.on_lost(self)

    def _beat(self) -> None:
        interval = self.ttl_s / 3
        while not self._stop.wait(interval):
            try:
                self.renew()
            except LeaseLostError:
                return
            except Exception:  # noqa: BLE001 - server away: retry until the lease would expire
                if time.monotonic() - self._last_renewal > self.ttl_s:
                    self._mark_lost()
                    return


def _encode(holder: str, token: str, ttl_s: float, seq: int, released: bool = False) -> bytes:
    return json.dumps({"holder": holder, "pid": os.getpid(), "host": socket.gethostname(),
                       "token": token, "seq": seq, "ttl_s": ttl_s,
                       "released": released}).encode()


def acquire(backend: Backend, key: str, holder: str, ttl_s: float, *, wait_s: float = 0.0,
            heartbeat: bool = True, margin_s: float = MARGIN_S,
            on_lost: Callable[[Lease], None] | None = None) -> Lease:
    """Take the lease at ``key`` for ``holder`` (a description for others' messages).

    Waits up to ``wait_s`` (polling) while another holds it, then raises
    :class:`LeaseHeldError`. With ``heartbeat`` (the default) a daemon thread renews it until
    :meth:`Lease.release`; ``on_lost`` is called (from that thread) if it is lost.
    """
    if ttl_s <= 0:
        raise ValueError(f"ttl_s must be positive, got {ttl_s}")
    token = uuid.uuid4().hex
    payload = _encode(holder, token, ttl_s, 0)
    deadline = time.monotonic() + wait_s
    while True:
        sent = time.monotonic()
        version = _try_take(backend, key, payload, margin_s)
        if isinstance(version, str):
            lease = Lease(backend, key, holder, ttl_s, version, token, on_lost, taken_at=sent)
            if heartbeat:
                lease.start_heartbeat()
            return lease
        record, expires_in = version
        if time.monotonic() >= deadline:
            raise LeaseHeldError(key, record, expires_in)
        time.sleep(min(max(expires_in, 0.05), 1.0, max(deadline - time.monotonic(), 0.05)))


def _try_take(backend: Backend, key: str, payload: bytes,
              margin_s: float) -> str | tuple[dict[str, Any], float]:
    """Our new version, or (the holder's record, seconds until it may expire)."""
    while True:
        try:
            return backend.put_new(key, payload)
        except PreconditionFailed:
            pass
        try:
            data, version = backend.get(key)
        except NotFound:
            continue  # removed meanwhile: try creating again
        record = _decode(data)
        meta = backend.head(key)
        if meta is None or meta.version != version:
            continue  # moved meanwhile: judge the new one
        expires_in = 0.0
        if not record.get("released"):
            ttl = float(record.get("ttl_s", 0) or 0)
            expires_in = meta.last_modified + ttl + margin_s - server_now(backend)
        if expires_in > 0:
            return record, expires_in
        try:  # expired or released: take over exactly the version judged
            return backend.put_if_match(key, payload, version)
        except PreconditionFailed:
            continue  # someone else took it or renewed it: judge again
