"""``catdask demo --quick --store s3://...`` end to end, as a user runs it (issue 39).

A fresh process with its own home, cache, temporary and working folders and no Prefect or
Dask settings: the demo starts its own Prefect server and Dask cluster. Afterwards nothing is
left on the local disk but the store's local folder the docs name
(``$XDG_CACHE_HOME/catdask/s3/<bucket>/<prefix>``: plots, the Prefect home), and the secret
in ``AWS_SECRET_ACCESS_KEY`` appears nowhere: not in the output, not in any file the run
wrote (Prefect's database holds the runs' parameters, logs and artifacts), not in any object
of the store (model metadata included).
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from ..helpers.paths import REPO
from ..helpers.s3_server import BUCKET, s3_server  # noqa: F401 - the session fixture


def _files(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if p.is_file()] if folder.exists() else []


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_demo_on_s3_writes_only_the_named_cache_and_never_the_secret(s3_server, tmp_path):
    from catdask.object_store.s3 import S3Backend
    from catdask.store import list_models, load_model_version
    from catdask.store.root import StoreRoot

    secret = s3_server.secret.encode()
    prefix = f"demo-{uuid.uuid4().hex[:12]}"
    store = f"{s3_server.url}/{prefix}"
    folders = {name: tmp_path / name for name in ("home", "cache", "tmp", "work")}
    for folder in folders.values():
        folder.mkdir()
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PREFECT_", "CATDASK_", "DASK_", "AWS_"))}
    env.update(s3_server.env, HOME=str(folders["home"]), XDG_CACHE_HOME=str(folders["cache"]),
               TMPDIR=str(folders["tmp"]), PYTHONPATH=str(REPO))
    run = subprocess.run(
        [sys.executable, "-m", "catdask", "demo", "--quick", "--restarts", "2", "--store", store],
        cwd=folders["work"], env=env, capture_output=True, timeout=840)
    assert run.returncode == 0, run.stderr.decode(errors="replace")[-3000:]
    assert secret not in run.stdout + run.stderr

    # The store: models registered, their metadata and every object free of the secret.
    backend = S3Backend(BUCKET, prefix, environ=s3_server.env)
    versions = list_models(StoreRoot(backend))
    assert sorted(str(v) for v in versions) == [
        "iris-cqs:v1", "iris-kcqs:v1", "wine-cqs:v1", "wine-kcqs:v1"]
    for version in versions:
        _, meta = load_model_version(StoreRoot(backend), version.name)
        assert s3_server.secret not in repr(meta)
    keys = [m.key for m in backend.list("")]
    assert any(k.startswith("models/") for k in keys) and any(
        k.startswith("datasets/") for k in keys), keys
    leaked = [k for k in keys if secret in backend.get(k)[0]]
    assert not leaked, leaked

    # The local disk: only the named cache folder, and no file anywhere holds the secret.
    named = folders["cache"] / "catdask" / "s3" / BUCKET / prefix
    assert os.listdir(folders["work"]) == []
    fonts = folders["cache"] / "matplotlib"  # matplotlib's font cache (docs/operations.md)
    assert [p for p in _files(folders["cache"])
            if not (p.is_relative_to(named) or p.is_relative_to(fonts))] == []
    assert _files(folders["home"]) == []  # (matplotlib makes an empty ~/.config/matplotlib)
    scratch = folders["tmp"] / "dask-scratch-space"  # left: Dask's two empty lock files
    assert [p for p in _files(folders["tmp"])
            if not (p.parent == scratch and p.suffix == ".lock" and not p.stat().st_size)] == []
    written = _files(named)
    assert any(p.suffix == ".png" for p in written), written  # the plots
    prefect_db = [p for p in written if p.suffix == ".db"]
    assert prefect_db and any(store.encode() in p.read_bytes() for p in prefect_db), \
        "no Prefect database recording the runs' parameters: the scan would prove nothing"
    leaked_files = [p for p in written if secret in p.read_bytes()]
    assert not leaked_files, leaked_files
