"""Simulated failures of the zarr store's writes: an exception in this process, or a child
process that dies (``os._exit``) in the middle of writing an array."""

from __future__ import annotations

from catdask.store import _zarr_io

from .paths import REPO

#: Start of a child script that imports only ``catdask.store`` (not ``catdask/__init__`` and
#: scikit-learn, which take seconds to import): ``catdask`` becomes a bare namespace module.
STORE_ONLY_CHILD_PRELUDE = f"""
import sys, types
pkg = types.ModuleType("catdask")
pkg.__path__ = [{str(REPO / "catdask")!r}]
sys.modules["catdask"] = pkg
"""


def fail_writing(name, exc):
    """A stand-in for ``_zarr_io.write_array`` that raises ``exc`` when asked to write the array
    ``name`` and writes every other array for real (install it with ``monkeypatch.setattr``)."""
    real = _zarr_io.write_array

    def fake(group, arr_name, *a, **k):
        if arr_name == name:
            raise exc
        return real(group, arr_name, *a, **k)

    return fake


def exit_when_writing_code(name, exit_code):
    """Child-script lines that make the process exit at once with ``exit_code`` (no cleanup,
    as a killed process) when the store starts writing the array ``name``."""
    return f"""
import os
from catdask.store import _zarr_io
real = _zarr_io.write_array
def dying(group, name, *a, **k):
    if name == {name!r}:
        os._exit({exit_code})
    return real(group, name, *a, **k)
_zarr_io.write_array = dying
"""
