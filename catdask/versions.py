"""Which catdask this is: the installed version and a sha256 of the package's sources."""

from __future__ import annotations

import functools
import os
import time
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

#: Wall-clock time (ns) at which this process imported catdask: ``catdask/__init__.py``
#: imports this module before anything else of the package.
IMPORTED_AT_NS = time.time_ns()

#: How much later than :data:`IMPORTED_AT_NS` a source file's time must be to count as changed
#: after the import: covers a writer whose clock is ahead of this host's (NFS, NTP-kept skew).
CHANGED_AFTER_IMPORT_TOLERANCE_NS = 2_000_000_000

#: The imported package's directory (a module global so tests can point it at a copy).
_PACKAGE = Path(__file__).resolve().parent


def installed_version() -> str:
    """Installed catdask version, or ``"0+unknown"`` when running from a bare source tree."""
    try:
        return version("catdask")
    except PackageNotFoundError:
        return "0+unknown"


@functools.lru_cache(maxsize=1)
def source_sha256() -> str:
    """sha256 over every ``*.py`` file of the imported catdask package (path and bytes)."""
    import hashlib  # here: ``import catdask`` imports this module and need not pay for it

    package = _PACKAGE
    digest = hashlib.sha256()
    for path in sorted(package.rglob("*.py")):
        digest.update(path.relative_to(package).as_posix().encode())
        digest.update(b"\0")
        digest.update(path.read_bytes())
        digest.update(b"\0")
    return digest.hexdigest()


def sources_changed_since_import() -> bool:
    """Whether any ``*.py`` file of the package was written after this process imported it (stat
    only). Both the change time (which also catches copies that keep old modification times) and
    the modification time are compared; a file removed by an upgrade is not seen, one vanishing
    while listed counts as a change.
    """
    after = IMPORTED_AT_NS + CHANGED_AFTER_IMPORT_TOLERANCE_NS
    try:
        for path in _PACKAGE.rglob("*.py"):
            stat = os.stat(path)
            if max(stat.st_mtime_ns, stat.st_ctime_ns) > after:
                return True
    except FileNotFoundError:  # the tree is being rewritten right now
        return True
    return False
