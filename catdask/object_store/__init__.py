"""Where a store's bytes live: a local folder or an S3 bucket, behind one small seam.

``open_backend(url_or_path)`` turns what a user writes after ``--store`` (or in
``$CATDASK_STORE``) into a :class:`Backend`; everything above (snapshots, pointer, registry,
leases, gc, check) is written once against :mod:`.base`. A URL that catdask cannot open is
refused with one line, never taken for a local folder (``s3:/bucket`` once became a folder
named ``s3:`` in the working directory).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlsplit

from ._zarr_s3 import settle_writes
from .base import Backend, NotFound, ObjectMeta, PreconditionFailed
from .errors import (AccessDeniedError, BucketNotFoundError, ConditionalWritesUnsupportedError,
                     EndpointUnreachableError, NotAnObjectStoreError, ObjectStoreError,
                     ObjectStoreIOError, StoreURLError)
from .local import LocalBackend

if TYPE_CHECKING:  # imported on first use (obstore's import costs ~0.1 s)
    from .s3 import S3Backend

__all__ = [
    "Backend", "ObjectMeta", "NotFound", "PreconditionFailed",
    "LocalBackend", "S3Backend", "open_backend", "is_object_store_url", "url_scheme",
    "ObjectStoreError", "StoreURLError", "BucketNotFoundError", "AccessDeniedError",
    "NotAnObjectStoreError", "EndpointUnreachableError", "ConditionalWritesUnsupportedError",
    "ObjectStoreIOError", "settle_writes",
]

# "scheme:" of two or more characters: one letter is a Windows drive ("C:\\data").
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]+):")
# S3's bucket naming rules (3-63 characters, lower case, digits, '.', '-').
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
_SUPPORTED = "a local folder, file:///path or s3://bucket/prefix"


def url_scheme(text: str) -> str | None:
    """The lower-case scheme of ``text`` (``"s3"``, ``"file"``, ``"gs"``), or None for a path:
    a scheme has two or more characters, so ``C:\\data`` is a path."""
    match = _SCHEME.match(text.strip())
    return match.group(1).lower() if match else None


def is_object_store_url(url_or_path: str | os.PathLike[str]) -> bool:
    """True for a URL that names object storage (``s3://...``), not a local folder."""
    return isinstance(url_or_path, str) and url_or_path[:5].lower() == "s3://"


def open_backend(url_or_path: str | os.PathLike[str]) -> Backend:
    """The backend of a store named by a path, ``file://`` URL or ``s3://bucket/prefix``.

    Nothing is contacted here: a wrong endpoint, bucket or credential is reported by the first
    request, as one line (:mod:`.errors`). Raises :class:`StoreURLError` for an empty name, an
    unknown scheme (``gs://``) or a malformed S3 URL (``s3:/bucket``).
    """
    if isinstance(url_or_path, os.PathLike):
        return LocalBackend(Path(url_or_path))
    if not isinstance(url_or_path, str) or not url_or_path.strip():
        raise StoreURLError(f"The store location is empty ({url_or_path!r}); name "
                            f"{_SUPPORTED}.")
    text = url_or_path.strip()
    scheme = url_scheme(text)
    if scheme is None:
        return LocalBackend(Path(os.path.expanduser(text)))
    if scheme == "file":
        parts = urlsplit(text)
        if parts.netloc not in ("", "localhost") or not parts.path:
            raise StoreURLError(f"Store URL {_redact(text)!r}: a file URL names a local path, as "
                                "file:///absolute/path.")
        return LocalBackend(Path(unquote(parts.path)), url=text)
    if scheme == "s3":
        return _open_s3(text)
    hint = ("" if "//" in text else
            f" (a local folder whose name has a colon: write ./{_redact(text)})")
    raise StoreURLError(f"Store URL {_redact(text)!r}: scheme {scheme + ':'!r} is not "
                        f"supported; name {_SUPPORTED}{hint}.")


def _open_s3(text: str) -> Backend:
    if not text[3:5] == "//":
        raise StoreURLError(f"Store URL {_redact(text)!r} is malformed: write s3://bucket/prefix "
                            "(two slashes after 's3:').")
    parts = urlsplit(text)
    bucket = parts.netloc
    if "@" in bucket or ":" in bucket:
        raise StoreURLError(f"Store URL {_redact(text)!r}: credentials and ports do not belong "
                            "in the URL; set AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and "
                            "AWS_ENDPOINT_URL (or a profile) instead.")
    if not _BUCKET.match(bucket):
        raise StoreURLError(f"Store URL {_redact(text)!r}: {bucket!r} is not a valid bucket name "
                            "(3-63 characters: lower-case letters, digits, '.', '-').")
    if parts.query or parts.fragment:
        raise StoreURLError(f"Store URL {_redact(text)!r}: no '?' or '#' part is understood; write "
                            "s3://bucket/prefix.")
    prefix = parts.path.strip("/")
    if prefix and any(p in ("", ".", "..") for p in prefix.split("/")):
        raise StoreURLError(f"Store URL {_redact(text)!r}: the prefix has an empty, '.' or "
                            "'..' part.")
    from .s3 import S3Backend

    return S3Backend(bucket, prefix)


def _redact(text: str) -> str:
    """``text`` for an error message: without a ``user:secret@`` part or a query or fragment
    (``?token=...``, a presigned URL's signature), which may carry secrets."""
    shown = re.sub(r"^([^/]*/*)[^/@]*@", r"\1***@", text)
    base = re.split(r"[?#]", shown, maxsplit=1)[0]
    return base if base == shown else base + "?***"


def __getattr__(name: str) -> object:
    if name == "S3Backend":  # imports obstore: only when asked for
        from .s3 import S3Backend

        return S3Backend
    raise AttributeError(name)
