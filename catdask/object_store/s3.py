"""The store's primitives on S3 (or any S3-compatible server), through obstore.

obstore is the Rust ``object_store`` crate; its ``put(mode=...)`` sends exactly the two
conditional writes an atomic commit needs on object storage (RFC 9110 section 13.1; S3 since
2024): ``mode="create"`` is ``If-None-Match: *`` (create-only: 412 if the key exists) and
``mode={"e_tag": v}`` is ``If-Match: v`` (compare-and-swap: 412 if the object changed). S3
evaluates the condition and the write as one step, so of concurrent writers exactly one wins.

Two things the protocol leaves to the client, handled here:

* **A lost response is not a lost race.** A timeout or dropped connection after the request
  was sent leaves the write's fate unknown, and a retried request may find its own first
  attempt and answer 412. Every conditional write therefore stamps a fresh write id in the
  object's user metadata (``x-amz-meta-catdask-write-id``); on a 412 or an ambiguous error the
  key is read back: our write id means our write landed; the old version still there means it
  did not (and an ambiguous one is retried); anything else means we lost.
* **Not every server that speaks S3 honours the conditions.** The first write of a process to a
  bucket probes it: create-only twice on a private key must fail the second time. A server that
  lets both through is refused (:class:`ConditionalWritesUnsupportedError`): commits there
  would not be atomic.

Every failure of a request is turned into one line naming the store and what to fix
(:mod:`.errors`), within about 10 s (short connect/read timeouts, few retries). Credentials come
from the environment (``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``,
``AWS_ENDPOINT_URL``, ``AWS_REGION``, ``AWS_ALLOW_HTTP``; ``AWS_PROFILE`` through boto3 where
installed) and never appear in ``url``, ``repr``, an error or a log line.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import os
import re
import threading
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from ._fs import TMP_PREFIX, is_temporary_name
from ._keys import check_key, check_prefix
from ._zarr_s3 import single_put_store_class
from .base import NotFound, ObjectMeta, PreconditionFailed
from .errors import (AccessDeniedError, BucketNotFoundError, ConditionalWritesUnsupportedError,
                     EndpointUnreachableError, NotAnObjectStoreError, ObjectStoreError,
                     ObjectStoreIOError, StoreURLError)

#: User metadata naming the write that produced an object (lost response vs lost race).
WRITE_ID_ATTRIBUTE = "catdask-write-id"

#: How long a conditional write keeps resolving ambiguous failures before giving up.
AMBIGUITY_DEADLINE_S = 10.0

# Data requests: no short limit, a busy server may take many seconds to take a 32 MiB chunk
# (uploads failed at a 5 s read timeout on a loaded machine); a dead connection ends at 120 s.
_CLIENT_OPTIONS = {"connect_timeout": "2s", "timeout": "120s"}
_BACKOFF = {"init_backoff": _dt.timedelta(milliseconds=100),
            "max_backoff": _dt.timedelta(seconds=1), "base": 2}
_RETRY: Any = {"max_retries": 2, "retry_timeout": _dt.timedelta(seconds=30), "backoff": _BACKOFF}
# The first request (the access check, one small listing) decides within 10 s: a closed port
# is refused at once, a silent host or a server that accepts and never answers fails in 2 x 4 s.
_CHECK_OPTIONS = {"connect_timeout": "2s", "timeout": "4s"}
_CHECK_RETRY: Any = {"max_retries": 1, "retry_timeout": _dt.timedelta(seconds=5),
                     "backoff": _BACKOFF}
_TRUE = {"1", "true", "yes", "on"}

# Checks already passed in this process: (endpoint, bucket, credential digest) -> True.
_access_checked: set[tuple[str, ...]] = set()
_conditional_checked: set[tuple[str, ...]] = set()
_checks_lock = threading.Lock()


def _s3_settings(environ: Mapping[str, str]) -> tuple[dict[str, Any], dict[str, Any], str]:
    """(S3 config, client options, endpoint as shown to users) from the AWS variables."""
    config: dict[str, Any] = {}
    for env_key, key in (("AWS_ACCESS_KEY_ID", "access_key_id"),
                         ("AWS_SECRET_ACCESS_KEY", "secret_access_key"),
                         ("AWS_SESSION_TOKEN", "token"),
                         ("AWS_DEFAULT_REGION", "region"), ("AWS_REGION", "region"),
                         ("AWS_ENDPOINT", "endpoint"), ("AWS_ENDPOINT_URL", "endpoint"),
                         ("AWS_ENDPOINT_URL_S3", "endpoint")):  # later ones take precedence
        if environ.get(env_key):
            config[key] = environ[env_key]
    client: dict[str, Any] = dict(_CLIENT_OPTIONS)
    endpoint = config.get("endpoint", "")
    if environ.get("AWS_ALLOW_HTTP", "").strip().lower() in _TRUE:
        client["allow_http"] = True
    elif endpoint.lower().startswith("http://"):
        raise StoreURLError(f"The S3 endpoint {_redact(endpoint)} is plain http; set "
                            "AWS_ALLOW_HTTP=true to allow unencrypted connections.")
    shown = _redact(endpoint) if endpoint else f"AWS S3 ({config.get('region', 'us-east-1')})"
    return config, client, shown


def _redact(url: str) -> str:
    return re.sub(r"//[^/@]*@", "//***@", url)


def _credential_provider(environ: Mapping[str, str], config: Mapping[str, Any]) -> Any:
    """A boto3 credential provider for ``AWS_PROFILE`` when no key is set; else None."""
    if config.get("access_key_id") or not environ.get("AWS_PROFILE"):
        return None
    try:
        import boto3
        from obstore.auth.boto3 import Boto3CredentialProvider
    except ImportError:
        raise AccessDeniedError("AWS_PROFILE is set but boto3 is not installed (pip install "
                                "boto3), and no AWS_ACCESS_KEY_ID is set.") from None
    return Boto3CredentialProvider(boto3.Session(profile_name=environ["AWS_PROFILE"]))


class S3Backend:
    """A store's root at ``s3://bucket/prefix``. ``environ`` (default ``os.environ``) supplies
    the AWS variables; tests pass their server's."""

    # Smaller than a folder's: zarr PUTs a data set's chunks at once, and one 32 MiB PUT is
    # the ingest's floor (200,000 x 30 on SeaweedFS: ingest 1.03 s with 32 MiB chunks, 0.80 s
    # with 8 MiB, 0.89 s with 4 MiB; a folder's 0.52-0.57 s whatever the size).
    chunk_bytes = 8 * 2**20

    def __init__(self, bucket: str, prefix: str = "", *,
                 environ: Mapping[str, str] | None = None):
        self.bucket = bucket
        self.prefix = prefix.strip("/")
        self.url = f"s3://{bucket}/{self.prefix}" if self.prefix else f"s3://{bucket}"
        environ = os.environ if environ is None else environ
        self._config, self._client_options, self.endpoint = _s3_settings(environ)
        self._provider = _credential_provider(environ, self._config)
        who = hashlib.sha256(repr(sorted(self._config.items())).encode()).hexdigest()
        self._check_key = (self.endpoint, bucket, who)
        self._store_obj: Any = None
        self._zarr_reader: Any = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"S3Backend({self.url!r})"

    def __getstate__(self) -> dict[str, Any]:
        raise TypeError("an S3Backend is not pickled (it would carry credentials); send its "
                        "url and open it where it is used")

    # -- the client and its one-time checks -------------------------------------------------

    def _make_store(self, prefix: str, *, check: bool = False) -> Any:
        from obstore.store import S3Store

        client = {**self._client_options, **(_CHECK_OPTIONS if check else {})}
        options: Any = {"config": self._config, "client_options": client,
                        "retry_config": _CHECK_RETRY if check else _RETRY,
                        "credential_provider": self._provider}
        return S3Store(self.bucket, prefix=prefix or None, **options)

    def _store(self) -> Any:
        """The client, after one listing has shown the bucket exists and the credentials work
        (once per process and store: a bare GET of a missing key cannot tell a missing bucket,
        a refused credential or a web server that is not S3 from an absent object)."""
        if self._store_obj is None:
            with self._lock:
                if self._store_obj is None:
                    try:
                        store = self._make_store(self.prefix)
                    except ObjectStoreError:
                        raise
                    except Exception as exc:  # noqa: BLE001 - bad configuration value
                        raise StoreURLError(f"{self.url}: the S3 settings were refused: "
                                            f"{_first_line(exc)}") from None
                    if self._check_key not in _access_checked:
                        import obstore

                        try:
                            check = self._make_store(self.prefix, check=True)
                            obstore.list(check, None, chunk_size=1).__next__()
                        except StopIteration:
                            pass
                        except Exception as exc:  # noqa: BLE001 - classified below
                            raise self._error(exc, "list") from None
                        with _checks_lock:
                            _access_checked.add(self._check_key)
                    self._store_obj = store
        return self._store_obj

    def _check_conditional_writes(self) -> None:
        """Once per process and bucket before the first write: ``If-None-Match: *`` twice on
        a private key must fail the second time."""
        if self._check_key in _conditional_checked:
            return
        import obstore
        import obstore.exceptions

        store = self._store()
        probe = f"{TMP_PREFIX}probe-{uuid.uuid4().hex}"
        try:
            obstore.put(store, probe, b"probe", mode="create")
            try:
                obstore.put(store, probe, b"probe again", mode="create")
            except obstore.exceptions.AlreadyExistsError:
                pass
            except obstore.exceptions.PreconditionError:
                pass
            else:
                raise ConditionalWritesUnsupportedError(
                    f"{self.url}: the server at {self.endpoint} ignores If-None-Match "
                    "(a create-only write replaced an existing object); catdask needs S3's "
                    "conditional writes for atomic commits and will not write there.")
        except ObjectStoreError:
            raise
        except Exception as exc:  # noqa: BLE001 - classified
            raise self._error(exc, "put") from None
        finally:
            try:
                obstore.delete(store, probe)
            except Exception:  # noqa: BLE001 - a leftover probe is a .tmp- key: listed by no one
                pass
        with _checks_lock:
            _conditional_checked.add(self._check_key)

    # -- reads ------------------------------------------------------------------------------

    def get(self, key: str) -> tuple[bytes, str]:
        import obstore

        check_key(key)
        store = self._store()
        try:
            result = obstore.get(store, key)
            data = bytes(result.bytes())
        except FileNotFoundError as exc:
            raise self._missing(exc, key, NotFound(key)) from None
        except ObjectStoreError:
            raise
        except Exception as exc:  # noqa: BLE001 - classified
            raise self._error(exc, "get", key) from None
        return data, str(result.meta["e_tag"])

    def head(self, key: str) -> ObjectMeta | None:
        import obstore

        check_key(key)
        store = self._store()
        try:
            return _meta(obstore.head(store, key))
        except FileNotFoundError as exc:
            self._missing(exc, key, None)
            return None
        except ObjectStoreError:
            raise
        except Exception as exc:  # noqa: BLE001 - classified
            raise self._error(exc, "head", key) from None

    def list(self, prefix: str) -> Iterator[ObjectMeta]:
        import obstore

        check_prefix(prefix)
        # object_store lists whole path segments ("a/b" lists "a/b/..."): list the folder the
        # prefix ends in, keep the keys that start with the prefix.
        folder = prefix.rpartition("/")[0] or None
        store = self._store()
        try:
            for chunk in obstore.list(store, folder, chunk_size=1000):
                for raw in chunk:
                    key = raw["path"]
                    if key.startswith(prefix) and not any(
                            is_temporary_name(part) for part in key.split("/")):
                        yield _meta(raw)
        except ObjectStoreError:
            raise
        except Exception as exc:  # noqa: BLE001 - classified
            raise self._error(exc, "list", prefix) from None

    def list_folders(self, prefix: str) -> Sequence[str]:
        from ._folders import s3_list_folders  # one delimited listing (S3's common prefixes)

        return s3_list_folders(self, prefix)

    # -- writes -----------------------------------------------------------------------------

    def put(self, key: str, data: bytes) -> str:
        import obstore

        check_key(key)
        self._check_conditional_writes()
        store = self._store()
        try:
            return str(obstore.put(store, key, data, mode="overwrite")["e_tag"])
        except ObjectStoreError:
            raise
        except Exception as exc:  # noqa: BLE001 - classified
            raise self._error(exc, "put", key) from None

    def put_new(self, key: str, data: bytes) -> str:
        return self._conditional_put(key, data, None)

    def put_if_match(self, key: str, data: bytes, version: str) -> str:
        return self._conditional_put(key, data, version)

    def delete(self, key: str) -> None:
        import obstore

        check_key(key)
        store = self._store()
        try:
            obstore.delete(store, key)
        except FileNotFoundError as exc:
            self._missing(exc, key, None)
        except ObjectStoreError:
            raise
        except Exception as exc:  # noqa: BLE001 - classified
            raise self._error(exc, "delete", key) from None

    def zarr_store(self, prefix: str, *, read_only: bool) -> Any:
        check_prefix(prefix)
        self._store()  # the access check: a wrong bucket or secret fails here, in one line
        if not read_only:
            self._check_conditional_writes()
            # Rooted at the array's prefix: below a store's root, zarr would write a group
            # document at every level above a new array.
            return self._zarr_store_at(prefix, read_only=False, check_now=True)
        from zarr.storage import StorePath

        # Readers share one store on the root: each obstore client costs its own set-up and
        # connection pool (29 of them, one per array read, took 3.5 s of an 11.6 s `check`
        # beside writers).
        with self._lock:
            if self._zarr_reader is None:
                self._zarr_reader = self._zarr_store_at("", read_only=True, check_now=True)
        return StorePath(self._zarr_reader, prefix.strip("/"))

    def _zarr_store_at(self, prefix: str, *, read_only: bool, check_now: bool) -> Any:
        """A zarr store rooted at ``prefix``, pickled as the store's URL and ``prefix``
        (``check_now`` False: the access check runs on its first read instead)."""
        full = "/".join(p for p in (self.prefix, prefix.strip("/")) if p)
        return single_put_store_class()(self._make_store(full), read_only=read_only,
                                        reopen=(_reopen_zarr_store, (self.url, prefix)),
                                        first_use=None if check_now else self._store,
                                        errors=self._error)

    # -- conditional writes -----------------------------------------------------------------

    def _conditional_put(self, key: str, data: bytes, version: str | None) -> str:
        """Create-only (``version`` None) or compare-and-swap, with a lost response told
        apart from a lost race by the write id read back (module docstring)."""
        import obstore
        import obstore.exceptions

        check_key(key)
        self._check_conditional_writes()
        store = self._store()
        write_id = uuid.uuid4().hex
        mode: Any = "create" if version is None else {"e_tag": version}
        deadline = time.monotonic() + AMBIGUITY_DEADLINE_S
        while True:
            try:
                result = obstore.put(store, key, data, mode=mode,
                                     attributes={WRITE_ID_ATTRIBUTE: write_id})
                return str(result["e_tag"])
            except (obstore.exceptions.AlreadyExistsError,
                    obstore.exceptions.PreconditionError):
                ambiguous = False  # a definite 412: but it may answer our own retried request
            except Exception as exc:  # noqa: BLE001 - ambiguous unless the server said no
                if not _is_ambiguous(exc):
                    raise self._error(exc, "put", key) from None
                ambiguous = True
            current = self._read_write_id(key)
            if current is not None and current[0] == write_id:
                return current[1]  # our write landed; its response was lost or retried
            unchanged = (current is None) if version is None else (
                current is not None and current[1] == version)
            if not ambiguous or not unchanged:
                raise PreconditionFailed(
                    f"{key} exists" if version is None else f"{key} changed")
            if time.monotonic() > deadline:  # the server keeps failing: nothing was written
                raise ObjectStoreIOError(f"{self.url}: writing {key} kept failing for "
                                         f"{AMBIGUITY_DEADLINE_S:.0f} s; nothing was written.")
            time.sleep(0.2)

    def _read_write_id(self, key: str) -> tuple[str, str] | None:
        """(write id, version) of the object now at ``key``, or None if absent."""
        import obstore

        store = self._store()
        deadline = time.monotonic() + AMBIGUITY_DEADLINE_S
        while True:
            try:
                result = obstore.get(store, key, options={"head": True})
                return (str(result.attributes.get(WRITE_ID_ATTRIBUTE, "")),
                        str(result.meta["e_tag"]))
            except FileNotFoundError as exc:
                self._missing(exc, key, None)
                return None
            except Exception as exc:  # noqa: BLE001 - retried while the server is away
                if not _is_ambiguous(exc) or time.monotonic() > deadline:
                    raise self._error(exc, "head", key) from None
                time.sleep(0.2)

    # -- errors -----------------------------------------------------------------------------

    def _missing(self, exc: BaseException, key: str, absent: Any) -> Any:
        """``absent`` for a 404 of the key; raises for a 404 of the bucket (removed while in
        use: the access check passed earlier)."""
        if "NoSuchBucket" in str(exc):
            raise self._error(exc, "get", key) from None
        return absent

    def _error(self, exc: BaseException, op: str, key: str = "") -> ObjectStoreError:
        """One line for a failed request (never a secret: only the status and the S3 code)."""
        text = str(exc)
        status = _status(exc)
        code_match = re.search(r"<Code>(\w+)</Code>", text)
        code = code_match.group(1) if code_match else None
        where = f"{self.url} at {self.endpoint}"
        if code == "NoSuchBucket":
            return BucketNotFoundError(f"{where}: bucket {self.bucket!r} does not exist; create "
                                       "it or correct the store URL.")
        denied = {"InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied",
                  "InvalidToken", "ExpiredToken", "AccountProblem"}
        if code in denied or status in (401, 403) or type(exc).__name__ in (
                "PermissionDeniedError", "UnauthenticatedError"):
            return AccessDeniedError(f"{where}: the server refused the credentials "
                                     f"({code or status}); check AWS_ACCESS_KEY_ID and "
                                     "AWS_SECRET_ACCESS_KEY (or AWS_PROFILE).")
        if status is not None and code is None and status < 500:
            return NotAnObjectStoreError(f"{where}: the endpoint answered HTTP {status} without "
                                         "an S3 error document: it is not an S3 server; check "
                                         "AWS_ENDPOINT_URL.")
        if status is None and re.search(r"error sending request|connect|timed out|timeout|dns",
                                        text, re.I):
            return EndpointUnreachableError(f"{where}: no S3 server answered ({op} "
                                            f"{key or self.bucket}); check AWS_ENDPOINT_URL and "
                                            "that the server is running.")
        detail = f"HTTP {status} {code or ''}".strip() if status else _first_line(exc)
        return ObjectStoreIOError(f"{where}: {op} {key or self.bucket} failed ({detail}).")


def _reopen_zarr_store(url: str, prefix: str, read_only: bool) -> Any:
    """The zarr store of ``prefix`` in the S3 store ``url`` (``s3://bucket/base``, as
    :attr:`S3Backend.url` writes it), opened here with this process's credentials (the
    unpickling side of :func:`~catdask.object_store._zarr_s3.single_put_store_class`)."""
    bucket, _, base = url.removeprefix("s3://").partition("/")
    return S3Backend(bucket, base)._zarr_store_at(prefix, read_only=read_only, check_now=False)


def _status(exc: BaseException) -> int | None:
    """The HTTP status of a failed request, or None if no response came."""
    match = re.search(r"status code: (\d{3})", str(exc))
    return int(match.group(1)) if match else None


def _is_ambiguous(exc: BaseException) -> bool:
    """Whether a failed write may still have happened: no response (a timeout, a dropped
    connection) or a server error; a 4xx is the server's definite no."""
    status = _status(exc)
    return status is None or status >= 500


def _meta(raw: Mapping[str, Any]) -> ObjectMeta:
    return ObjectMeta(key=str(raw["path"]), size=int(raw["size"]), version=str(raw["e_tag"]),
                      last_modified=raw["last_modified"].timestamp())


def _first_line(exc: BaseException) -> str:
    line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return line[:200]
