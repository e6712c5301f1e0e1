"""Numbers that are never given twice: a counter object moved by compare-and-swap.

A model's version numbers (``models/<name>/.newest-version``) and a data set's snapshot
numbers (``datasets/<name>/.newest-snapshot``) come from here. The counter holds
``"<N> <uuid4>"``: the highest number ever given, and a fresh uuid so that every write has new
bytes (on S3 the version tag is the MD5 of the bytes, and a compare-and-swap must never win
against an "A, B, A" history). Counters written by earlier versions hold ``"N\\n"``: readers
take the first token.

A number is taken by one compare-and-swap that moves the counter from what was read to the
new number; of concurrent takers exactly one wins each number, the others read again. The new
number is one above the counter and above every id the caller sees present (a store written
before the counter existed, or one whose counter was lost), so an id is never reused, even
after the entry that had it was removed.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable

from ..object_store import Backend, NotFound, PreconditionFailed

#: Compare-and-swaps lost in a row before giving up (each loss is another writer's win).
_MAX_ATTEMPTS = 10_000


def _parse(data: bytes) -> int:
    token = data.decode("utf-8", "replace").split(maxsplit=1)[:1]
    return int(token[0]) if token and token[0].isdigit() else 0


def _trusted(data: bytes) -> bool:
    """Whether the counter was written by this protocol (``"<N> <uuid>"``), which takes every
    number before its entry is written: then no id present can exceed it."""
    tokens = data.decode("utf-8", "replace").split()
    return len(tokens) == 2 and tokens[0].isdigit()


def read_counter(backend: Backend, key: str) -> int:
    """The highest number the counter at ``key`` has given (0 when absent or unreadable)."""
    try:
        return _parse(backend.get(key)[0])
    except NotFound:
        return 0


def take_next_id(backend: Backend, key: str,
                 present: Callable[[], Iterable[int]]) -> tuple[int, str]:
    """Take the next number of the counter at ``key``: one above the counter and, unless it
    was written by this protocol, above every id ``present()`` returns. Returns the number and the
    counter's new version (for :func:`give_back`)."""
    for _ in range(_MAX_ATTEMPTS):
        try:
            data, version = backend.get(key)
            given: int | None = _parse(data)
            trusted = _trusted(data)
        except NotFound:
            given, version, trusted = None, "", False
        # Ids present are looked at only where the counter may lag them (absent, damaged, or
        # written by an earlier catdask after its entry): a listing costs on a large store.
        number = max(given or 0, 0 if trusted else max(present(), default=0)) + 1
        payload = f"{number} {uuid.uuid4().hex}\n".encode()
        try:
            if given is None:
                tag = backend.put_new(key, payload)
            else:
                tag = backend.put_if_match(key, payload, version)
        except PreconditionFailed:
            continue  # another writer took a number meanwhile: read again
        return number, tag
    raise OSError(f"{backend.url}: could not take a number from {key}: too many concurrent "
                  "writers")


def give_back(backend: Backend, key: str, number: int, tag: str) -> None:
    """Return ``number`` to the counter after a write under it failed and removed what it had
    written, if nobody took a number since (the counter is still at ``tag``): the number was
    never visible, so the next writer may have it. Best effort: otherwise it stays given."""
    try:
        backend.put_if_match(key, f"{number - 1} {uuid.uuid4().hex}\n".encode(), tag)
    except (PreconditionFailed, OSError):
        pass
