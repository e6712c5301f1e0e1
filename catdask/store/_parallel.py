"""Many small requests at once: a listing that reads every version's object, one request each
on object storage, waits for the server far more than it computes."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

#: Requests made at once (small GETs or HEADs).
READ_THREADS = 16


def in_parallel(fn, items: list) -> list:
    """``[fn(item) ...]``, up to :data:`READ_THREADS` at once."""
    if len(items) < 2:
        return [fn(item) for item in items]
    with ThreadPoolExecutor(min(READ_THREADS, len(items))) as pool:
        return list(pool.map(fn, items))
