"""The ``catdask`` option types that check a value's range as argparse parses it, so that
``--restarts 0`` or ``--port 99999`` is a usage error naming the bound (exit 2), not a failure
after Prefect or Dask started."""

from __future__ import annotations

import argparse

from catdask.method_names import MAX_RESTARTS


def _number(kind, text, minimum, strict, maximum=None):
    try:
        value = kind(text)
    except ValueError:
        raise ValueError(f"invalid {kind.__name__} value: {text!r}") from None
    if value != value or (value <= minimum if strict else value < minimum):
        bound = f"> {minimum:g}" if strict else f">= {minimum:g}"
        raise ValueError(f"must be {bound}, got {text}")
    if value == float("inf"):  # --max-gap inf failed after the whole fit (JSON has no inf)
        raise ValueError(f"must be a finite number, got {text}")
    if maximum is not None and value > maximum:
        raise ValueError(f"must be at most {maximum:g}, got {text}")
    return value


def _argtype(kind, minimum, strict=False, maximum=None):
    def parse(text):
        try:
            return _number(kind, text, minimum, strict, maximum)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    parse.__name__ = kind.__name__
    return parse


#: Restarts of one fit: 1 to MAX_RESTARTS, as the estimators' ``n_restarts``.
restart_count = _argtype(int, 1, maximum=MAX_RESTARTS)
#: An integer >= 0 (random seeds, seconds).
non_negative_int = _argtype(int, 0)
#: A float > 0 (kernel gamma).
positive_float = _argtype(float, 0.0, strict=True)
#: A float >= 0 (ages in seconds).
non_negative_float = _argtype(float, 0.0)
#: Cross-validation splits: an integer >= 2.
split_count = _argtype(int, 2)
#: A TCP port: 0 (any free one) to 65535.
port_number = _argtype(int, 0, maximum=65535)
