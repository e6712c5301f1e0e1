"""Validation of data-set, model and array names."""

from __future__ import annotations

import difflib
import re

from .errors import InvalidNameError

MAX_NAME_LENGTH = 64
NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
_WINDOWS_DEVICES = frozenset(
    ["CON", "PRN", "AUX", "NUL", "CONIN$", "CONOUT$"]
    + [f"COM{i}" for i in range(1, 10)]
    + [f"LPT{i}" for i in range(1, 10)]
)
_RULE = (
    "use 1 to 64 characters from letters, digits, '_', '.', '-', starting with a letter or digit "
    "(e.g. 'vehicle', 'wine-std', 'run_2024.1')"
)


def _problem(name: str) -> str | None:
    """Why ``name`` is not acceptable, or None when it is."""
    if name == "":
        return "it is empty"
    if "\x00" in name:
        return "it contains a NUL character"
    if "/" in name or "\\" in name:
        return "it contains a path separator ('/' or '\\')"
    if len(name) > MAX_NAME_LENGTH:
        return f"it is {len(name)} characters long (at most {MAX_NAME_LENGTH})"
    if name[0] == ".":
        return "it starts with '.' (dot-names are reserved for the store's temporary files)"
    if ".." in name:
        return "it contains '..'"
    bad = sorted({c for c in name if not (c.isascii() and (c.isalnum() or c in "_.-"))})
    if bad:
        return f"it contains the character(s) {''.join(bad)!r}"
    if not NAME_PATTERN.fullmatch(name):
        return "it does not start with a letter or digit"
    if name.endswith("."):
        return "it ends with '.' (Windows would drop it)"
    if name.split(".")[0].upper() in _WINDOWS_DEVICES:
        return "it is a reserved device name on Windows"
    return None


def validate_name(name, kind: str = "data set") -> str:
    """Return ``name`` unchanged if it is a safe store name, else raise.

    Parameters
    ----------
    name : str
        The proposed name.
    kind : str, default "data set"
        What is being named ("data set", "model", "array"), used in the message.

    Returns
    -------
    str
        ``name``.

    Raises
    ------
    InvalidNameError
        Says which rule the name breaks and what a valid name looks like.

    Examples
    --------
    >>> validate_name("vehicle")
    'vehicle'
    >>> validate_name("../etc", kind="model")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    catdask.errors.InvalidNameError: Invalid model name '../etc': it contains a path separator ...
    """
    if not isinstance(name, str):
        raise InvalidNameError(
            f"Invalid {kind} name {name!r}: expected a str, got {type(name).__name__}; {_RULE}."
        )
    problem = _problem(name)
    if problem is not None:
        raise InvalidNameError(f"Invalid {kind} name {name!r}: {problem}; {_RULE}.")
    return name


def is_valid_name(name) -> bool:
    """True when :func:`validate_name` would accept ``name``."""
    return isinstance(name, str) and _problem(name) is None


def did_you_mean(name, known) -> str:
    """``"; did you mean 'iris'?"`` for the closest of ``known`` to a name that is not among
    them (a typo in a data-set or model name), or ``""`` when none is close."""
    close = difflib.get_close_matches(str(name), sorted(map(str, known)), n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""
