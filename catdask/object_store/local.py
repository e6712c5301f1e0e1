"""The store's primitives on a local (or shared POSIX) folder: one file per key.

Why these constructions: a reader must never see a half-written object, and the two
conditional writes must be atomic against every other process, as S3's are
(``If-None-Match: *`` and ``If-Match: <ETag>``, RFC 9110 section 13.1; S3 answers a lost
condition with 412 Precondition Failed):

* every write goes to a private temporary (``.tmp-put-<uuid>`` beside the key), is fsync'd, and
  only then becomes visible by one atomic step;
* create-only is ``link(2)`` of the temporary to the key, which fails if the key exists: there
  is no window between "is it there?" and "write it";
* compare-and-swap locks the key's current file (``flock``), checks it is still the file at the
  key's path and that its version is the expected one, then ``rename(2)``s the temporary over
  it. Deletes and unconditional writes of an existing key take the same lock, so every change
  of a key is serialised with the compare-and-swaps on it.

The version is the file's (mtime in ns, inode, size). Each write sets its temporary's mtime to
the current time in ns, and a compare-and-swap to at least one ns after the version it
replaces, so a key's version never repeats even when the file system reuses the inode. It is
read from the open file (``fstat``), so ``get`` returns the version of the bytes it read.
"""

from __future__ import annotations

import os
import stat
import time
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from ._fs import TMP_PREFIX, flock_fd, fsync_dir, is_temporary_name
from ._keys import check_key, check_prefix
from .base import NotFound, ObjectMeta, PreconditionFailed

_ANY = object()  # "replace whatever is there" (an unconditional put)


def _version(st: os.stat_result) -> str:
    return f"{st.st_mtime_ns:x}-{st.st_ino:x}-{st.st_size:x}"


def _meta(key: str, st: os.stat_result) -> ObjectMeta:
    return ObjectMeta(key=key, size=st.st_size, version=_version(st),
                      last_modified=st.st_mtime_ns / 1e9)


class LocalBackend:
    """A store's root on a local folder (created on the first write)."""

    # Few large row blocks suit the Dask engine (docs/design.md section 5).
    chunk_bytes = 32 * 2**20

    def __init__(self, root: str | os.PathLike[str], url: str | None = None):
        self.root = Path(root).absolute()
        self.url = url if url is not None else str(self.root)

    def __repr__(self) -> str:
        return f"LocalBackend({self.url!r})"

    def _path(self, key: str) -> Path:
        return self.root / check_key(key)

    # -- reads ------------------------------------------------------------------------------

    def get(self, key: str) -> tuple[bytes, str]:
        path = self._path(key)
        try:
            with open(path, "rb") as fh:
                st = os.fstat(fh.fileno())
                return fh.read(), _version(st)
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            raise NotFound(key) from None

    def head(self, key: str) -> ObjectMeta | None:
        try:
            st = os.stat(self._path(key))
        except (FileNotFoundError, NotADirectoryError):
            return None
        return _meta(key, st) if stat.S_ISREG(st.st_mode) else None

    def list(self, prefix: str) -> Iterator[ObjectMeta]:
        check_prefix(prefix)
        start_dir = prefix.rpartition("/")[0]
        for dirpath, dirnames, filenames in os.walk(self.root / start_dir if start_dir
                                                    else self.root):
            rel = os.path.relpath(dirpath, self.root)
            rel = "" if rel == "." else rel.replace(os.sep, "/") + "/"
            # Skip temporaries, and folders that cannot hold a key under the prefix.
            dirnames[:] = [d for d in dirnames if not is_temporary_name(d)
                           and (rel + d + "/").startswith(prefix[:len(rel + d) + 1])]
            for name in filenames:
                key = rel + name
                if is_temporary_name(name) or not key.startswith(prefix):
                    continue
                try:
                    st = os.stat(os.path.join(dirpath, name))
                except FileNotFoundError:  # deleted meanwhile
                    continue
                yield _meta(key, st)

    def list_folders(self, prefix: str) -> Sequence[str]:
        check_prefix(prefix)
        try:
            with os.scandir(self.root / prefix if prefix else self.root) as entries:
                return [e.name for e in entries
                        if e.is_dir(follow_symlinks=False) and not is_temporary_name(e.name)]
        except (FileNotFoundError, NotADirectoryError):
            return []

    # -- writes -----------------------------------------------------------------------------

    def put(self, key: str, data: bytes) -> str:
        return self._replace(key, data, _ANY)

    def put_new(self, key: str, data: bytes) -> str:
        path = self._path(key)
        tmp = self._write_temp(path, data)
        try:
            try:
                os.link(tmp, path)  # fails if the key exists: create-only, atomically
            except FileExistsError:
                raise PreconditionFailed(f"{key} exists") from None
            fsync_dir(path.parent)
            return _version(os.stat(tmp))
        finally:
            _unlink(tmp)

    def put_if_match(self, key: str, data: bytes, version: str) -> str:
        return self._replace(key, data, version)

    def delete(self, key: str) -> None:
        path = self._path(key)
        with _locked_current(path) as st:
            if st is not None:
                _unlink(path)
                fsync_dir(path.parent)
        self._remove_empty_parents(path.parent)

    def zarr_store(self, prefix: str, *, read_only: bool) -> Any:
        from zarr.storage import LocalStore

        check_prefix(prefix)
        return LocalStore(self.root / prefix if prefix else self.root, read_only=read_only)

    # -- helpers ----------------------------------------------------------------------------

    def _replace(self, key: str, data: bytes, expected: object) -> str:
        path = self._path(key)
        tmp = self._write_temp(path, data)
        try:
            with _locked_current(path) as st:
                if st is None and expected is not _ANY:
                    raise PreconditionFailed(f"{key} does not exist")
                if st is not None and expected is not _ANY and _version(st) != expected:
                    raise PreconditionFailed(f"{key} changed")
                if st is not None:  # the new version must differ from the one replaced
                    stamp = max(time.time_ns(), st.st_mtime_ns + 1)
                    os.utime(tmp, ns=(stamp, stamp))
                new_version = _version(os.stat(tmp))
                os.replace(tmp, path)
            fsync_dir(path.parent)
            return new_version
        finally:
            _unlink(tmp)

    def _write_temp(self, path: Path, data: bytes) -> Path:
        """``data`` in a fsync'd temporary beside ``path``, its mtime now (in ns)."""
        for _ in range(10):  # a concurrent delete may remove the (empty) folder meanwhile
            tmp = path.parent / f"{TMP_PREFIX}put-{uuid.uuid4().hex}"
            try:  # (mkdir too: a folder may be removed while it is made or checked)
                path.parent.mkdir(parents=True, exist_ok=True)
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
            except (FileNotFoundError, FileExistsError):
                continue
            try:
                with os.fdopen(fd, "wb") as fh:
                    fh.write(data)
                    fh.flush()
                    os.fsync(fh.fileno())
                stamp = time.time_ns()
                os.utime(tmp, ns=(stamp, stamp))
            except BaseException:
                _unlink(tmp)
                raise
            return tmp
        raise FileNotFoundError(f"could not create a file in {path.parent}")

    def _remove_empty_parents(self, folder: Path) -> None:
        # S3 has no folders; keep the local tree as sparse as the key set (listing stays fast).
        while folder != self.root and self.root in folder.parents:
            try:
                folder.rmdir()
            except OSError:  # not empty, or gone
                return
            folder = folder.parent


class _locked_current:
    """Context manager: lock the file now at ``path`` (exclusive ``flock``) and yield its stat,
    or None if there is none. Retries when the locked file was replaced or removed before the
    lock was granted (its holder renamed another file over it), so the yielded stat is the
    file at ``path`` for as long as the block runs."""

    def __init__(self, path: Path):
        self.path = path
        self.fd: int | None = None

    def __enter__(self) -> os.stat_result | None:
        while True:
            try:
                fd = os.open(self.path, os.O_RDONLY)
            except (FileNotFoundError, NotADirectoryError):
                return None
            flock_fd(fd)
            st = os.fstat(fd)
            try:
                current = os.stat(self.path)
            except FileNotFoundError:
                current = None
            if current is not None and os.path.samestat(st, current):
                self.fd = fd
                return st
            os.close(fd)

    def __exit__(self, *exc: object) -> None:
        if self.fd is not None:
            os.close(self.fd)  # releases the lock
            self.fd = None


def _unlink(path: Path) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
