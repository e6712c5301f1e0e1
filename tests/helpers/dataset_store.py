"""A data-set store under test on one backend (a local folder or a SeaweedFS prefix), with
the few by-key looks and damages the store tests make (what they did with ``Path`` before)."""

from __future__ import annotations

import dataclasses
import uuid
from pathlib import Path

from catdask.dataset_pointer import read_pointer
from catdask.object_store import LocalBackend


def pointer_of(folder: Path):
    """The pointer of a local data-set folder (``<store>/datasets/<name>``)."""
    return read_pointer(LocalBackend(folder.parent), folder.name)


@dataclasses.dataclass
class StoreUnderTest:
    """``store`` is what the public functions take (a path, or a StoreRoot on S3); ``url``
    names it to a child process, which needs ``env`` too (S3 credentials); ``backend`` reads
    and damages it by key."""

    kind: str
    store: object
    url: str
    backend: object
    env: dict

    def contents(self, name: str) -> list[str]:
        """The snapshots (committed or not) and the pointer of a data set: its top-level
        names, without the store's dot records (leases, the id counter)."""
        prefix = f"datasets/{name}/"
        return sorted({m.key[len(prefix):].split("/")[0] for m in self.backend.list(prefix)
                       if not m.key[len(prefix):].startswith(".")})

    def pointer(self, name: str):
        return read_pointer(self.backend, f"datasets/{name}")

    def write(self, key: str, data: bytes) -> None:
        self.backend.put(key, data)

    def read(self, key: str) -> bytes:
        return self.backend.get(key)[0]

    def remove(self, prefix: str) -> None:
        """Delete every object under ``prefix`` (a snapshot deleted by hand)."""
        for meta in list(self.backend.list(prefix.rstrip("/") + "/")):
            self.backend.delete(meta.key)

    def keys(self, prefix: str) -> list[str]:
        return sorted(m.key for m in self.backend.list(prefix))


def make_store(kind: str, tmp_path: Path, request) -> StoreUnderTest:
    """A fresh, empty store on ``kind`` ("local" or "s3"; s3 needs the ``s3_server``
    fixture, skipped with its reason where SeaweedFS is not installed)."""
    if kind == "local":
        root = tmp_path / "store"
        return StoreUnderTest("local", root, str(root), LocalBackend(root), {})
    from catdask.object_store.s3 import S3Backend
    from catdask.store.root import StoreRoot

    from .s3_server import BUCKET

    server = request.getfixturevalue("s3_server")
    prefix = f"t-{uuid.uuid4().hex[:12]}"
    backend = S3Backend(BUCKET, prefix, environ=server.env)
    return StoreUnderTest("s3", StoreRoot(backend), f"{server.url}/{prefix}", backend,
                          dict(server.env))
