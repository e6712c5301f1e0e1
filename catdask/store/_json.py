"""JSON metadata helpers: make values JSON-safe, hash them, stamp version and time."""

from __future__ import annotations

import datetime as _dt
import hashlib
import json

import numpy as np


def utc_now() -> str:
    """Current UTC time as ISO 8601 with an explicit offset (e.g. ``2024-05-01T12:00:00+00:00``)."""
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


def to_json_safe(value, where: str = "meta"):
    """Convert ``value`` to plain JSON types (dict/list/str/int/float/bool/None).

    numpy scalars and arrays become Python numbers and lists; tuples become lists. Anything
    else (objects, bytes, sets, callables ...) is refused, because metadata is stored as JSON
    and must never need pickle to read back.

    Raises
    ------
    TypeError
        Naming the offending key path, e.g. ``meta['params']['kernel']``.
    """
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, (int, np.integer)) and not isinstance(value, np.bool_):
        return int(value)
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, (float, np.floating)):
        # NaN/inf are kept (Python's json writes NaN/Infinity); e.g. an undefined gap.
        return float(value)
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if isinstance(k, (np.integer, int)) and not isinstance(k, bool):
                k = str(int(k))
            if not isinstance(k, str):
                raise TypeError(f"{where} has a non-string key {k!r}; JSON keys must be strings.")
            out[k] = to_json_safe(v, f"{where}[{k!r}]")
        return out
    if isinstance(value, (list, tuple)):
        return [to_json_safe(v, f"{where}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, np.ndarray):
        if value.dtype.kind not in "biuf" and value.dtype.kind != "U":
            raise TypeError(
                f"{where} is an array of dtype {value.dtype}; only numbers and strings."
            )
        return to_json_safe(value.tolist(), where)
    raise TypeError(
        f"{where} is a {type(value).__name__}, which cannot be stored as JSON; convert it to "
        "numbers, strings, lists or dicts (stores never pickle)."
    )


def _canonical(value) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), allow_nan=True).encode()


def json_sha256(value) -> str:
    """sha256 of a canonical JSON encoding (sorted keys, no spaces) of ``value``."""
    return hashlib.sha256(_canonical(value)).hexdigest()

