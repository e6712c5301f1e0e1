"""``S3Backend.list_folders``: one delimited listing (S3's common prefixes) instead of a
recursive one, which takes a request per 1,000 keys (a model of 1,000 versions has ~15,000)."""

from __future__ import annotations

from typing import Any

from ._fs import is_temporary_name
from ._keys import check_prefix
from .errors import ObjectStoreError


def s3_list_folders(backend: Any, prefix: str) -> list[str]:
    """The names one level below ``prefix`` with keys below them, without temporaries."""
    import obstore

    check_prefix(prefix)
    store = backend._store()
    try:
        found = obstore.list_with_delimiter(store, prefix.rstrip("/") or None)
    except ObjectStoreError:
        raise
    except Exception as exc:  # noqa: BLE001 - classified by the backend
        raise backend._error(exc, "list", prefix) from None
    names = (str(p).rstrip("/").rpartition("/")[2] for p in found["common_prefixes"])
    return [n for n in names if n and not is_temporary_name(n)]
