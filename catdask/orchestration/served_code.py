"""Imported last by ``catdask serve``'s fork server: pins the hash of the code its runs execute.

A forked run computes with the code the fork server imported; hashing catdask's files here,
once, right after those imports (:func:`catdask.versions.source_sha256`) makes every run record
that code's hash, not that of files upgraded on disk since.
"""

from __future__ import annotations

from ..versions import source_sha256

#: The hash every run forked from this server records (computed at import, ~9 ms).
SERVED_SOURCE_SHA256 = source_sha256()
