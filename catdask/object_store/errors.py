"""What can go wrong when a store is opened on a medium, each as one line for the user.

Every class is a :class:`catdask.errors.CatdaskError` (the CLI answers those with one line and
exit 3) and also the built-in exception a caller would naturally catch, which also tells
:func:`catdask.errors.is_transient` whether a retry may help: a closed port may open, a missing
bucket or a wrong secret will not appear by retrying.

Messages name the store's URL (never a secret: credentials come from the environment and are
never part of a URL catdask accepts) and say what to do.
"""

from __future__ import annotations

from catdask.errors import CatdaskError


class ObjectStoreError(CatdaskError):
    """Base of every error of opening or using a store's medium (a folder, a bucket)."""


class StoreURLError(ObjectStoreError, ValueError):
    """The store's URL or path is not one catdask can open (empty, unknown scheme, malformed)."""


class BucketNotFoundError(ObjectStoreError, FileNotFoundError):
    """The bucket named in ``s3://bucket/...`` does not exist on the endpoint."""


class AccessDeniedError(ObjectStoreError, PermissionError):
    """The endpoint refused the credentials (unknown key, wrong secret, no permission)."""


class NotAnObjectStoreError(ObjectStoreError, ValueError):
    """Something answers at the endpoint, but not as an S3 server does."""


class EndpointUnreachableError(ObjectStoreError, ConnectionError):
    """Nothing answers at the endpoint (closed port, unknown host, timeout); may be retried."""


class ConditionalWritesUnsupportedError(ObjectStoreError, ValueError):
    """The server accepts writes but ignores ``If-None-Match: *``: the store's commits would
    not be atomic there, so catdask refuses to write to it."""


class ObjectStoreIOError(ObjectStoreError, OSError):
    """Any other failure of a request to the medium (a 5xx, a dropped connection mid-body)."""
