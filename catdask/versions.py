"""Which catdask this is: the installed version and a sha256 of the package's sources.

Standard library only, at the bottom of the layers, because three layers need the same
answer: the store stamps the version on what it writes, the train cache keys on both
(``pipeline.model_cache.code_version``), and the Dask side compares both with a user-given
cluster's workers (``distributed.worker_check``).
"""

from __future__ import annotations

import functools
import hashlib
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

__all__ = ["installed_version", "source_sha256"]


def installed_version() -> str:
    """Installed catdask version, or ``"0+unknown"`` when running from a bare source tree."""
    try:
        return version("catdask")
    except PackageNotFoundError:
        return "0+unknown"


@functools.lru_cache(maxsize=1)
def source_sha256() -> str:
    """sha256 over every ``*.py`` file of the imported catdask package (path and bytes).

    Measured 9 ms for the package's 124 modules; computed once per process.
    """
    package = Path(__file__).resolve().parent
    digest = hashlib.sha256()
    for path in sorted(package.rglob("*.py")):
        digest.update(path.relative_to(package).as_posix().encode())
        digest.update(b"\0")
        digest.update(path.read_bytes())
        digest.update(b"\0")
    return digest.hexdigest()
