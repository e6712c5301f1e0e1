"""A model's listing index: the metadata of its committed versions in a few objects, so that
listing a model of 1,000 versions reads a handful of objects instead of 1,000 ``zarr.json``.

::

    models/<name>/.index/<P>     page P: versions P*PAGE_SIZE+1 .. (P+1)*PAGE_SIZE
                                 {"format": 1, "versions": {"<N>": <meta>}, "removed": [N...]}

The index is a cache of the versions' group documents, never the truth: a version exists
exactly when its ``zarr.json`` does (:mod:`.model_entries`). It is kept consistent with that
by three rules, all compare-and-swaps on the page (retried when another writer moved it):

* a registration adds its version after its commit (:func:`record_versions`); a writer killed
  in between leaves a committed version the index lacks, which a reader reads from its
  ``zarr.json`` and adds (the same call, best effort);
* a removal first drops the version from its page and marks its number removed
  (:func:`forget_version`), only then deletes its ``zarr.json``: so an entry always names a
  version whose ``zarr.json`` existed when the entry was read, and a registration or a reader
  that read the version before the removal cannot add it back (numbers are never reused, so a
  removed number stays removed);
* a reader lists a version from the index only when its prefix is still there (an entry
  whose prefix is gone was removed by an older catdask, which knew no index).

Pages bound what a registration rewrites (one page, at most :data:`PAGE_SIZE` entries). A page
that cannot be read or parsed counts as empty: its versions are read one by one and the page
is written again by the next reader.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterable

from ..object_store import NotFound, ObjectStoreError, PreconditionFailed
from ._parallel import in_parallel
from .root import StoreRoot

#: The index's pages, inside a model's prefix.
INDEX = ".index"
#: Versions per page.
PAGE_SIZE = 256
_FORMAT = 1
#: Compare-and-swaps lost in a row before an index update gives up (it is only a cache).
_MAX_ATTEMPTS = 1000


def page_of(version: int) -> int:
    return (version - 1) // PAGE_SIZE


def page_key(name: str, page: int) -> str:
    return StoreRoot.model_key(name, INDEX, str(page))


def _parsed(data: bytes, page: int) -> tuple[dict[int, dict], set[int]]:
    """(version -> meta, removed numbers) of a page's bytes; both empty when damaged. An entry
    counts only where its meta names its own version, in this page."""
    try:
        doc = json.loads(data)
        if not isinstance(doc, dict) or doc.get("format") != _FORMAT:
            return {}, set()
        removed = {int(v) for v in doc.get("removed", [])}
        entries = {int(v): meta for v, meta in doc.get("versions", {}).items()}
    except (ValueError, TypeError, AttributeError):
        return {}, set()
    return ({v: meta for v, meta in entries.items() if isinstance(meta, dict)
             and meta.get("version") == v and page_of(v) == page and v not in removed},
            removed)


def _read_page(root: StoreRoot, name: str, page: int) -> tuple[dict[int, dict], set[int], str]:
    """(entries, removed, version tag) of a page; ``""`` as the tag when it is absent."""
    try:
        data, tag = root.backend.get(page_key(name, page))
    except NotFound:
        return {}, set(), ""
    return (*_parsed(data, page), tag)


def indexed_meta(root: StoreRoot, name: str, versions: Iterable[int]) -> dict[int, dict]:
    """The metadata the index holds for those of ``versions`` it lists (the pages they fall
    in are read, many at once)."""
    wanted = set(versions)
    found: dict[int, dict] = {}
    for entries, _, _ in in_parallel(lambda p: _read_page(root, name, p),
                                     sorted({page_of(v) for v in wanted})):
        found.update((v, meta) for v, meta in entries.items() if v in wanted)
    return found


def entries_without_version(root: StoreRoot, name: str, versions: Iterable[int],
                            committed: Iterable[int]) -> list[int]:
    """Those of ``versions`` (prefixes present) that the index lists although their
    ``zarr.json`` is absent: deleted behind the store's back. Sure beside writers: a version
    the index lists but ``committed`` (an earlier listing) lacks is looked at again, its
    ``zarr.json`` first, then the index (a removal drops the entry before the zarr.json)."""
    listed = set(indexed_meta(root, name, versions)) - set(committed)
    absent = [v for v in sorted(listed) if root.backend.head(
        StoreRoot.model_key(name, f"v{v}", "zarr.json")) is None]
    return sorted(set(absent) & set(indexed_meta(root, name, absent)))


def _update_page(root: StoreRoot, name: str, page: int, change) -> None:
    """Apply ``change(entries, removed) -> bool`` (whether anything changed) to a page by
    compare-and-swap, reading it again after a lost race."""
    backend = root.backend
    for _ in range(_MAX_ATTEMPTS):
        entries, removed, tag = _read_page(root, name, page)
        if not change(entries, removed):
            return
        data = json.dumps({"format": _FORMAT, "removed": sorted(removed),
                           "versions": {str(v): entries[v] for v in sorted(entries)}},
                          allow_nan=True).encode()
        try:
            if tag:
                backend.put_if_match(page_key(name, page), data, tag)
            else:
                backend.put_new(page_key(name, page), data)
            return
        except PreconditionFailed:
            continue
    raise OSError(f"{backend.url}: could not update the index of model {name!r}: too many "
                  "concurrent writers")


def record_versions(root: StoreRoot, name: str, metas: dict[int, dict]) -> None:
    """Add committed versions (number -> meta) to the index, except numbers removed since.
    Best effort: the index is a cache, and a version it lacks is still listed (read from its
    ``zarr.json``); a store that cannot be written (a reader's credentials) is left as it is."""
    by_page: dict[int, dict[int, dict]] = {}
    for version, meta in metas.items():
        by_page.setdefault(page_of(version), {})[version] = meta

    for page, adding in sorted(by_page.items()):
        def add(entries: dict, removed: set, adding=adding) -> bool:
            new = {v: m for v, m in adding.items() if v not in removed and v not in entries}
            entries.update(new)
            return bool(new)

        with contextlib.suppress(ObjectStoreError, OSError):
            _update_page(root, name, page, add)


def forget_version(root: StoreRoot, name: str, version: int) -> None:
    """Drop a version from the index and mark its number removed, before the version's
    ``zarr.json`` is deleted (errors propagate: the version must not be removed while an
    entry may still name it)."""
    def drop(entries: dict, removed: set) -> bool:
        if version in removed and version not in entries:
            return False
        entries.pop(version, None)
        removed.add(version)
        return True

    _update_page(root, name, page_of(version), drop)
