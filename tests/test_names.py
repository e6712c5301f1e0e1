"""Name validation: accepted names are safe directory names that cannot leave the store."""

from __future__ import annotations

import os
import string

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from catdask.errors import CatdaskError
from catdask.names import InvalidNameError, is_valid_name, validate_name


@pytest.mark.parametrize(
    "name",
    [
        "vehicle",
        "wine-std",
        "run_2024.1",
        "a",
        "A1",
        "x" * 64,
        "v1",
        "9lives",
        "a.b.c",
        "data-set_1.zarr",
    ],
)
def test_accepts_safe_names(name):
    assert validate_name(name) == name
    assert is_valid_name(name)


@pytest.mark.parametrize(
    "name, says",
    [
        ("", "empty"),
        ("..", "starts with '.'"),
        (".hidden", "starts with '.'"),
        (".tmp-vehicle-123", "starts with '.'"),
        ("a..b", "'..'"),
        ("../etc", "path separator"),
        ("a/b", "path separator"),
        ("a\\b", "path separator"),
        ("/abs", "path separator"),
        ("nul\x00byte", "NUL"),
        ("x" * 65, "65 characters"),
        ("-flag", "start with a letter or digit"),
        ("_private", "start with a letter or digit"),
        ("has space", "' '"),
        ("tab\tname", "'\\t'"),
        ("new\nline", "'\\n'"),
        ("émile", "'é'"),
        ("semi;colon", "';'"),
        ("star*", "'*'"),
        ("dollar$HOME", "'$'"),
        ("trailing.", "ends with '.'"),
        ("CON", "reserved device"),
        ("nul.txt", "reserved device"),
        ("com1", "reserved device"),
        ("LPT9.zarr", "reserved device"),
    ],
)
def test_rejects_unsafe_names_and_says_why(name, says):
    with pytest.raises(InvalidNameError) as info:
        validate_name(name, kind="model")
    msg = str(info.value)
    assert "model name" in msg
    assert says in msg, msg
    assert "letters, digits" in msg  # says what a valid name looks like
    assert not is_valid_name(name)


@pytest.mark.parametrize("bad", [None, 3, b"vehicle", ["a"], 1.5])
def test_rejects_non_strings(bad):
    with pytest.raises(InvalidNameError, match="expected a str"):
        validate_name(bad)


def test_error_types():
    with pytest.raises(ValueError):  # callers can catch ValueError
        validate_name("../x")
    with pytest.raises(CatdaskError):
        validate_name("../x")


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=string.printable + "é/\\.\x00", max_size=70))
def test_accepted_names_stay_inside_the_store(tmp_path_factory, name):
    """Property: no accepted name can resolve to a path outside the store root."""
    if not is_valid_name(name):
        with pytest.raises(InvalidNameError):
            validate_name(name)
        return
    root = tmp_path_factory.getbasetemp() / "store"
    path = (root / "datasets" / validate_name(name)).resolve()
    assert path.parent == (root / "datasets").resolve()
    assert os.path.commonpath([path, root.resolve()]) == str(root.resolve())
    assert path.name == name and not name.startswith(".")


@settings(max_examples=150, deadline=None)
@given(st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}", fullmatch=True))
def test_pattern_names_without_dots_are_accepted(name):
    # Windows device names are the only exception inside this alphabet.
    if name.upper() in {"CON", "PRN", "AUX", "NUL"} | {f"COM{i}" for i in range(1, 10)} | {
        f"LPT{i}" for i in range(1, 10)
    }:
        return
    assert validate_name(name) == name
