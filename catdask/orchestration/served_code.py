"""Imported last by ``catdask serve``'s fork server: pins the hash of the code its runs execute.

A served flow run is forked from the fork server (:mod:`.preloaded_runs`) and runs the catdask
that server imported. The model it registers records ``code_version``, whose sha256 is taken
over catdask's files the first time a process asks (:func:`catdask.versions.source_sha256`).
Asked in the run, after an upgrade under a running serve, it would describe the new files while
the run computes with the old code. Asked here, once, in the fork server right after its
imports, every forked run inherits the hash of the code it runs.
"""

from __future__ import annotations

from ..versions import source_sha256

#: The hash every run forked from this server records (computed at import, ~9 ms).
SERVED_SOURCE_SHA256 = source_sha256()
