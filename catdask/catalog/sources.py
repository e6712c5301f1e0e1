"""Source files of catalog data sets: find them locally, download them, verify their sha256."""

from __future__ import annotations

import hashlib
import os
import urllib.error
import urllib.request
import uuid
from pathlib import Path

from .. import settings
from ..errors import ChecksumMismatchError, SourceNotFoundError
from .entries import _check_https, get_entry

SOURCE_ENV = settings.SOURCE_DIR.name
#: The download cache's folder under the store root (``<store>/.downloads/<name>/``).
DOWNLOAD_CACHE_DIR = ".downloads"


def _shared_uci_dir() -> Path:
    """The team's shared raw copies (read-only), beside a checkout: ../shared/data/uci/<name>/."""
    beside_package = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "uci"
    beside_cwd = Path.cwd().resolve().parent / "shared" / "data" / "uci"
    return beside_package if beside_package.is_dir() or not beside_cwd.is_dir() else beside_cwd


# One attribute, so tests (and users) that point it elsewhere switch off every shared lookup.
SHARED_UCI_DIR = _shared_uci_dir()


def file_sha256(path) -> str:
    """Hex sha256 of a file, read in chunks."""
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def _local_names(f: dict) -> list[str]:
    """File names under which a record may exist locally: the file itself, another name its
    copies are known under (``aliases``, e.g. ``new-thyroid.csv``), or its archive."""
    return [f["name"], *f.get("aliases", [])] + ([f["archive"]] if f.get("archive") else [])


def source_folders(name: str, source_dir=None) -> list[Path]:
    """The folders :func:`locate_sources` searches for data set ``name``, in order, without
    repeats: ``source_dir`` and ``$CATDASK_SOURCE_DIR`` (each flat, then its subfolder
    ``name``), then :data:`SHARED_UCI_DIR`/``name`` when that folder exists."""
    dirs = []
    for base in (source_dir, settings.SOURCE_DIR.get()):
        if base:
            base = Path(base).expanduser()
            dirs += [base, base / name]  # flat, or one subfolder per data set
    if SHARED_UCI_DIR.is_dir():
        # Only beside a checkout; an installed catdask's would be a made-up path under the
        # environment (".venv/lib/python3.11/shared/..."), listed as searched in the error.
        dirs.append(SHARED_UCI_DIR / name)
    return list(dict.fromkeys(dirs))


def _verify_file(path: Path, f: dict, hint: str) -> None:
    expected = f.get("sha256")
    # The catalog's sha256 is of the downloaded file: the archive when there is one.
    if expected is None or (f.get("archive") and path.name != f["archive"]):
        return
    got = file_sha256(path)
    if got != expected:
        raise ChecksumMismatchError(path, expected, got, hint)


def locate_sources(entry, source_dir=None, *, verify: bool = True) -> list[Path]:
    """Local paths of a catalog data set's original files (no download).
    Returns one path per file record, in catalog order (none for scikit-learn data sets).
    Raises :class:`SourceNotFoundError` (listing the folders searched and how to provide the
    files) or :class:`ChecksumMismatchError` (a local file differs from the original)."""
    entry = get_entry(entry)
    if entry.kind == "sklearn":
        return []
    searched, partial = [], []
    for d in source_folders(entry.name, source_dir):
        searched.append(d)
        if not d.is_dir():
            continue
        found = []
        for f in entry.files:
            hit = next((d / n for n in _local_names(f) if (d / n).is_file()), None)
            if hit is None:
                break
            found.append(hit)
        if len(found) == len(entry.files):
            if verify:
                for path, f in zip(found, entry.files):
                    _verify_file(
                        path,
                        f,
                        "The local copy differs from the catalogued original; "
                        "replace it, or pass verify=False to accept it.",
                    )
            return found
        if found:
            partial.append(f"{d} has {len(found)} of {len(entry.files)} files")
    missing = ", ".join(f["name"] for f in entry.files)
    raise SourceNotFoundError(
        f"Original files of {entry.name!r} ({missing}) not found"
        + (f" in: {', '.join(str(s) for s in searched)}" if searched else
           " (no folder to look in)")
        + (f" ({'; '.join(partial)})" if partial else "")
        + f". Pass source_dir=..., set {SOURCE_ENV}, or download them with "
        f"fetch_sources(entry, cache_dir) (CLI: `catdask ingest {entry.name} --download`)."
    )


class _HTTPSOnlyRedirects(urllib.request.HTTPRedirectHandler):
    """Follow redirects only to other HTTPS addresses (never downgrade to http/ftp/file)."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        _check_https(newurl)
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def _open_url(url: str, timeout: float):
    """Open ``url`` for reading (HTTPS only, redirects included). Tests replace this."""
    _check_https(url)
    opener = urllib.request.build_opener(_HTTPSOnlyRedirects)
    return opener.open(
        urllib.request.Request(url, headers={"User-Agent": "catdask"}), timeout=timeout
    )


def _download(url: str, dest: Path, expected: str | None, timeout: float) -> None:
    """Stream ``url`` into a temporary file beside ``dest``, check sha256, rename into place."""
    _check_https(url)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".tmp-{dest.name}-{uuid.uuid4().hex}")
    h = hashlib.sha256()
    try:
        with _open_url(url, timeout) as resp, open(tmp, "wb") as out:
            for block in iter(lambda: resp.read(2**20), b""):
                h.update(block)
                out.write(block)
            out.flush()
            os.fsync(out.fileno())
        got = h.hexdigest()
        if expected is not None and got != expected:
            raise ChecksumMismatchError(
                f"{url} (downloading {dest.name})",
                expected,
                got,
                "The download was discarded; the server copy differs from the catalogued original.",
            )
        os.replace(tmp, dest)
    except urllib.error.URLError as exc:  # includes HTTPError (404 ...) and DNS failures
        raise SourceNotFoundError(
            f"Could not download {url}: {exc.reason if hasattr(exc, 'reason') else exc}. Check the "
            f"network, or put {dest.name} in a folder given as source_dir or {SOURCE_ENV}."
        ) from exc
    finally:
        if tmp.exists():
            tmp.unlink()


def fetch_sources(
    entry, cache_dir, allow_download: bool = True, *, timeout: float = 60.0
) -> list[Path]:
    """Paths of a data set's files in ``cache_dir/<name>/``, downloading what is missing."""
    entry = get_entry(entry)
    if entry.kind == "sklearn":
        return []
    folder = Path(cache_dir).expanduser() / entry.name
    paths = []
    for f in entry.files:
        dest = folder / (f.get("archive") or f["name"])
        expected = f.get("sha256")
        if dest.is_file() and (expected is None or file_sha256(dest) == expected):
            paths.append(dest)
            continue
        if not allow_download:
            state = "differs from the catalogued sha256" if dest.is_file() else "is not cached"
            raise SourceNotFoundError(
                f"{dest} {state} and downloading is disabled; allow downloads or provide the "
                f"file (source_dir / {SOURCE_ENV})."
            )
        _download(f["url"], dest, expected, timeout)
        paths.append(dest)
    return paths


def obtain_sources(
    entry, source_dir=None, cache_dir=None, allow_download: bool = False, *, verify: bool = True
) -> list[Path]:
    """Local files if present (:func:`locate_sources`), else the download cache
    (:func:`fetch_sources`, downloading only if ``allow_download``)."""
    entry = get_entry(entry)
    try:
        return locate_sources(entry, source_dir, verify=verify)
    except SourceNotFoundError:
        if cache_dir is None:
            raise
    return fetch_sources(entry, cache_dir, allow_download=allow_download)
