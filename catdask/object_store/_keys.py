"""Checks of the keys handed to a backend: the same rules on every medium, so a key that works
on a local folder works on S3 and cannot escape the store's root (``..``) on either."""

from __future__ import annotations


def check_key(key: str) -> str:
    """``key`` if it is a valid object key (``a/b/c``: no leading, trailing or doubled ``/``,
    no ``.`` or ``..`` component, no backslash); ValueError otherwise (a caller's bug)."""
    if not isinstance(key, str) or not key:
        raise ValueError(f"object key must be a non-empty string, got {key!r}")
    parts = key.split("/")
    if any(p in ("", ".", "..") for p in parts) or "\\" in key or "\0" in key:
        raise ValueError(f"invalid object key {key!r}: '/'-separated names, no '.', '..' or "
                         "empty component, no backslash")
    return key


def check_prefix(prefix: str) -> str:
    """``prefix`` if it is "" or a valid key, optionally ending with ``/``."""
    if prefix:
        check_key(prefix[:-1] if prefix.endswith("/") else prefix)
    return prefix
