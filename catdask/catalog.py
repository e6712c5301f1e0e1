"""The data-set catalog: where each benchmark comes from and how to parse it.

``data/catalog.json`` lists every data set by name with

- ``source``: ``{"kind": "sklearn", "loader": "load_iris"}`` for the sets that ship with
  scikit-learn, or ``{"kind": "files", "files": [...]}`` with one record per original file:
  ``name`` (the file that is parsed), ``url`` (canonical HTTPS address on the UCI archive),
  ``sha256`` (of the downloaded file; ``null`` if not known) and, for files inside a zip
  archive, ``archive`` (the downloaded file's name) and ``member`` (the file inside it).
  Several files are concatenated in the listed order (vehicle ``xaa``..``xai``; satellite
  train + test; segmentation data + test).
- ``parse``: ``format`` (``"whitespace"``: split on any run of spaces/tabs; ``"csv"``: split on
  ``delimiter``), ``skip_lines`` (per file), ``header``, ``label_column`` (index, negative
  from the end, or header name), ``feature_columns`` (null: all others), ``n_columns``,
  ``label_type`` (``"int"``, ``"str"``, ``"auto"``) and ``label_names`` (label -> display name;
  labels not listed are refused).
- ``expected``: ``n_samples``, ``n_features``, ``n_classes``, ``class_counts`` and
  ``rows_per_file``; a parse that disagrees raises :class:`~catdask.errors.ParseError`.

Files are found locally first (:func:`locate_sources`) and downloaded only on request
(:func:`fetch_sources`, HTTPS only, sha256 checked when known). Parsing
(:func:`parse_dataset`, :func:`parse_table`) handles the quirks recorded in
``../shared/data/uci/*/SOURCE.md``: CRLF, trailing spaces, doubled tabs, header lines, a
missing final newline; everything else wrong is a ParseError naming file, line and problem.
"""

from __future__ import annotations

import csv
import dataclasses
import hashlib
import io
import json
import os
import re
import urllib.error
import urllib.parse
import urllib.request
import uuid
import zipfile
from pathlib import Path

import numpy as np

from .errors import (
    CatalogError,
    ChecksumMismatchError,
    DatasetNotFoundError,
    ParseError,
    SourceNotFoundError,
)
from .names import validate_name

__all__ = [
    "CatalogEntry",
    "load_catalog",
    "get_entry",
    "locate_sources",
    "fetch_sources",
    "obtain_sources",
    "parse_dataset",
    "parse_table",
    "file_sha256",
    "DEFAULT_CATALOG",
    "SHARED_UCI_DIR",
]

_REPO = Path(__file__).resolve().parents[1]
DEFAULT_CATALOG = _REPO / "data" / "catalog.json"
CATALOG_ENV = "CATDASK_CATALOG"
SOURCE_ENV = "CATDASK_SOURCE_DIR"
# The team's shared raw copies (read-only), beside the checkout: ../shared/data/uci/<name>/.
SHARED_UCI_DIR = _REPO.parent / "shared" / "data" / "uci"

# Only these scikit-learn loaders may be named by a catalog (no arbitrary attribute calls).
_SKLEARN_LOADERS = frozenset(["load_iris", "load_wine", "load_breast_cancer", "load_digits"])
_FORMATS = ("whitespace", "csv")
_LABEL_TYPES = ("int", "str", "auto")
_SHA256 = re.compile(r"[0-9a-f]{64}")
_INT = re.compile(r"[+-]?[0-9]+")
# Cells that mean "no value" in common exports; reported as missing rather than non-numeric.
_MISSING = frozenset(["", "?", "na", "n/a", "nan", "null", "none", "-", "."])
_MAX_ARCHIVE_MEMBER = 2 * 2**30


# =========================================================================== catalog


@dataclasses.dataclass(frozen=True)
class CatalogEntry:
    """One data set of the catalog (see the module docstring for the fields)."""

    name: str
    description: str
    source: dict
    parse: dict | None
    expected: dict

    @property
    def kind(self) -> str:
        """``"sklearn"`` or ``"files"``."""
        return self.source["kind"]

    @property
    def files(self) -> list[dict]:
        """File records (empty for scikit-learn data sets)."""
        return list(self.source.get("files", []))

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def load_catalog(path=None) -> dict[str, CatalogEntry]:
    """Read and validate the catalog.

    Parameters
    ----------
    path : path, optional
        Catalog file. Default: ``$CATDASK_CATALOG``, else ``data/catalog.json`` of the checkout.

    Returns
    -------
    dict of str -> CatalogEntry
        In catalog order.

    Raises
    ------
    CatalogError
        Naming the entry and field that is malformed.
    """
    path = Path(path or os.environ.get(CATALOG_ENV) or DEFAULT_CATALOG)
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CatalogError(
            f"Catalog {path} not found; pass its path or set {CATALOG_ENV}."
        ) from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CatalogError(f"Catalog {path} cannot be read as JSON: {exc}") from exc
    if not isinstance(raw, dict) or not isinstance(raw.get("datasets"), list):
        raise CatalogError(f"Catalog {path}: expected an object with a 'datasets' list.")
    entries: dict[str, CatalogEntry] = {}
    for i, item in enumerate(raw["datasets"]):
        entry = _check_entry(item, f"{path}: datasets[{i}]")
        if entry.name in entries:
            raise CatalogError(f"{path}: data set {entry.name!r} is listed twice.")
        entries[entry.name] = entry
    return entries


def get_entry(name, catalog=None) -> CatalogEntry:
    """The catalog entry called ``name``.

    Parameters
    ----------
    name : str or CatalogEntry
        A name (an entry is returned unchanged).
    catalog : dict or path, optional
        A loaded catalog or a catalog file; default :func:`load_catalog`.

    Raises
    ------
    DatasetNotFoundError
        Listing the known names.
    """
    if isinstance(name, CatalogEntry):
        return name
    entries = catalog if isinstance(catalog, dict) else load_catalog(catalog)
    try:
        return entries[name]
    except (KeyError, TypeError):
        raise DatasetNotFoundError(
            f"No data set {name!r} in the catalog; known: {', '.join(entries)}. For your own "
            "file use parse_table (CLI: `catdask ingest --file data.csv --label-column NAME`)."
        ) from None


def _check_entry(item, where: str) -> CatalogEntry:
    def fail(msg):
        raise CatalogError(f"{where}: {msg}")

    if not isinstance(item, dict):
        fail("each entry must be an object")
    try:
        name = validate_name(item.get("name"), kind="data set")
    except ValueError as exc:
        fail(str(exc))
    where = f"{where} ({name})"
    source = item.get("source")
    if not isinstance(source, dict) or source.get("kind") not in ("sklearn", "files"):
        fail("'source' must be an object with kind 'sklearn' or 'files'")
    if source["kind"] == "sklearn":
        if source.get("loader") not in _SKLEARN_LOADERS:
            loaders = sorted(_SKLEARN_LOADERS)
            fail(f"sklearn loader must be one of {loaders}, got {source.get('loader')!r}")
    else:
        files = source.get("files")
        if not isinstance(files, list) or not files:
            fail("'source.files' must be a non-empty list")
        for j, f in enumerate(files):
            _check_file_record(f, f"{where}: source.files[{j}]")
    parse = item.get("parse")
    if source["kind"] == "files":
        if not isinstance(parse, dict):
            fail("'parse' is required for file sources")
        try:
            _check_spec(parse)
        except ValueError as exc:
            fail(f"parse: {exc}")
    expected = item.get("expected", {}) or {}
    if not isinstance(expected, dict):
        fail("'expected' must be an object")
    for key in ("n_samples", "n_features", "n_classes"):
        if key in expected and (not isinstance(expected[key], int) or expected[key] < 1):
            fail(f"expected.{key} must be a positive integer")
    return CatalogEntry(name, str(item.get("description", "")), source, parse, expected)


def _check_file_record(f, where: str) -> None:
    if not isinstance(f, dict):
        raise CatalogError(f"{where}: must be an object")
    for key in ("name", "url"):
        if not isinstance(f.get(key), str) or not f[key]:
            raise CatalogError(f"{where}: '{key}' must be a non-empty string")
    for key in ("name", "archive"):
        if f.get(key) is not None and (Path(f[key]).name != f[key] or f[key].startswith(".")):
            raise CatalogError(f"{where}: '{key}' must be a plain file name, got {f[key]!r}")
    try:
        _check_https(f["url"])
    except ValueError as exc:
        raise CatalogError(f"{where}: {exc}") from None
    sha = f.get("sha256")
    if sha is not None and not (isinstance(sha, str) and _SHA256.fullmatch(sha)):
        raise CatalogError(f"{where}: sha256 must be null or 64 lower-case hex digits, got {sha!r}")
    if (f.get("member") is None) != (f.get("archive") is None):
        raise CatalogError(f"{where}: 'archive' and 'member' go together")


def _check_spec(spec: dict) -> None:
    """Validate a parse spec; raises ValueError saying which field is wrong."""
    fmt = spec.get("format", "whitespace")
    if fmt not in _FORMATS:
        raise ValueError(f"format must be one of {_FORMATS}, got {fmt!r}")
    delim = spec.get("delimiter")
    if fmt == "csv" and not (isinstance(delim, str) and len(delim) == 1 and delim not in "\r\n\"'"):
        raise ValueError(f"csv format needs a one-character delimiter, got {delim!r}")
    skip = spec.get("skip_lines", 0)
    if not isinstance(skip, int) or isinstance(skip, bool) or skip < 0:
        raise ValueError(f"skip_lines must be an integer >= 0, got {skip!r}")
    header = spec.get("header", False)
    if header not in (True, False, "infer"):
        raise ValueError(f"header must be true, false or 'infer', got {header!r}")
    label = spec.get("label_column")
    if isinstance(label, bool) or not isinstance(label, (int, str)):
        raise ValueError(f"label_column must be an index or a column name, got {label!r}")
    fc = spec.get("feature_columns")
    if fc is not None and (
        not isinstance(fc, list)
        or not fc
        or not all(isinstance(c, (int, str)) and not isinstance(c, bool) for c in fc)
    ):
        raise ValueError(
            f"feature_columns must be null or a non-empty list of indices/names, got {fc!r}"
        )
    n = spec.get("n_columns")
    if n is not None and (not isinstance(n, int) or isinstance(n, bool) or n < 2):
        raise ValueError(f"n_columns must be null or an integer >= 2, got {n!r}")
    if spec.get("label_type", "auto") not in _LABEL_TYPES:
        raise ValueError(
            f"label_type must be one of {_LABEL_TYPES}, got {spec.get('label_type')!r}"
        )
    names = spec.get("label_names")
    if names is not None and not (
        isinstance(names, dict) and all(isinstance(v, str) for v in names.values())
    ):
        raise ValueError("label_names must be null or an object mapping label -> display name")


# =========================================================================== locating files


def file_sha256(path, chunk: int = 2**20) -> str:
    """Hex sha256 of a file, read in chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(chunk), b""):
            h.update(block)
    return h.hexdigest()


def _local_names(f: dict) -> list[str]:
    """File names under which a record may exist locally: the file itself, or its archive."""
    return [f["name"]] + ([f["archive"]] if f.get("archive") else [])


def _candidate_dirs(name: str, source_dir) -> list[Path]:
    dirs = []
    for base in (source_dir, os.environ.get(SOURCE_ENV)):
        if base:
            base = Path(base).expanduser()
            dirs += [base, base / name]  # flat, or one subfolder per data set
    dirs.append(SHARED_UCI_DIR / name)
    return dirs


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

    Looks, in order, in ``source_dir``, in ``$CATDASK_SOURCE_DIR`` (each flat or with a
    subfolder named after the data set) and in ``../shared/data/uci/<name>/`` beside the
    checkout; the first folder holding every file wins. For a file shipped in a zip archive,
    either the extracted file or the archive is accepted.

    Parameters
    ----------
    entry : CatalogEntry or str
    source_dir : path, optional
    verify : bool, default True
        Check sha256 where the catalog records one.

    Returns
    -------
    list of Path
        One per file record, in catalog order (empty for scikit-learn data sets).

    Raises
    ------
    SourceNotFoundError
        Listing the folders searched and how to provide the files.
    ChecksumMismatchError
        A local file differs from the catalogued original.
    """
    entry = get_entry(entry)
    if entry.kind == "sklearn":
        return []
    searched, partial = [], []
    for d in _candidate_dirs(entry.name, source_dir):
        if d in searched:
            continue
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
        f"Original files of {entry.name!r} ({missing}) not found in: "
        f"{', '.join(str(s) for s in searched)}"
        + (f" ({'; '.join(partial)})" if partial else "")
        + f". Pass source_dir=..., set {SOURCE_ENV}, or download them with "
        f"fetch_sources(entry, cache_dir) (CLI: `catdask ingest {entry.name} --download`)."
    )


def _check_https(url: str) -> None:
    parts = urllib.parse.urlsplit(url)
    if parts.scheme.lower() != "https" or not parts.netloc:
        raise ValueError(f"Refusing to download {url!r}: only https:// URLs are allowed.")


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
    """Paths of a data set's files in ``cache_dir/<name>/``, downloading what is missing.

    Downloads use HTTPS only (other schemes and redirects to them are refused), go to a
    temporary file that is renamed into place only after its sha256 matched the catalog
    (when the catalog has one). Cached files are re-checked and re-downloaded if they differ.

    Raises
    ------
    SourceNotFoundError
        A file is not cached and ``allow_download`` is False.
    ChecksumMismatchError
        Naming the file, the expected and the actual sha256.
    ValueError
        A non-HTTPS URL.
    """
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


# =========================================================================== parsing


def _read_text(path: Path, member: str | None) -> tuple[str, dict]:
    """Decoded text of ``path`` (or of ``member`` inside a zip) plus a provenance record."""
    path = Path(path)
    try:
        raw_file = path.read_bytes()
    except FileNotFoundError:
        raise ParseError("file not found", path) from None
    except OSError as exc:
        raise ParseError(f"cannot read file: {exc}", path) from exc
    info = {
        "name": path.name,
        "path": str(path),
        "bytes": len(raw_file),
        "sha256": hashlib.sha256(raw_file).hexdigest(),
    }
    raw = raw_file
    is_zip = zipfile.is_zipfile(io.BytesIO(raw_file))
    if is_zip and member is None:
        raise ParseError("is a zip archive; say which member to read (member=...)", path)
    if is_zip:
        raw = _read_member(path, raw_file, member)
        info.update(
            member=member, member_bytes=len(raw), member_sha256=hashlib.sha256(raw).hexdigest()
        )
    where = f"{path}[{member}]" if "member" in info else path
    if not raw.strip():
        raise ParseError("the file is empty", where)
    if b"\x00" in raw:
        line = raw[: raw.index(b"\x00")].count(b"\n") + 1
        raise ParseError("contains NUL bytes: a binary file, not a text table", where, line)
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise ParseError(f"not UTF-8 text (byte 0x{raw[exc.start]:02x})", where, line) from None
    return text, info


def _read_member(path: Path, raw: bytes, member: str) -> bytes:
    try:
        return _read_member_unchecked(path, raw, member)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError) as exc:
        raise ParseError(f"damaged zip archive: {exc}", path) from exc


def _read_member_unchecked(path: Path, raw: bytes, member: str) -> bytes:
    with zipfile.ZipFile(io.BytesIO(raw)) as zf:
        names = zf.namelist()
        # Archives sometimes put files in a folder; match on the base name as well.
        match = (
            member
            if member in names
            else next((n for n in names if n.rsplit("/", 1)[-1] == member), None)
        )
        if match is None:
            raise ParseError(
                f"archive has no member {member!r} (members: {', '.join(names)})", path
            )
        if zf.getinfo(match).file_size > _MAX_ARCHIVE_MEMBER:
            raise ParseError(f"archive member {member!r} is implausibly large", path)
        return zf.read(match)


def _split_lines(text: str, fmt: str, delimiter: str | None, comment: str | None):
    """Yield (line number, cells) of the non-blank lines; CR, trailing blanks removed."""
    # Split on "\n" only: str.splitlines would also split on form feeds and other separators.
    for lineno, line in enumerate(text.split("\n"), start=1):
        if not line.strip() or (comment and line.lstrip().startswith(comment)):
            yield lineno, None
        elif fmt == "csv":
            # One reader per line: a stray quote must not swallow the following lines.
            try:
                cells = next(csv.reader([line.rstrip("\r")], delimiter=delimiter, strict=True))
            except csv.Error as exc:
                yield lineno, exc
                continue
            yield lineno, [c.strip() for c in cells]
        else:
            yield lineno, line.split()  # any run of spaces/tabs (seeds' doubled tabs), CR too


def _looks_numeric(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return False
    return True


def _resolve_column(col, n_columns: int, header: list | None, path, what: str) -> int:
    """0-based index of a column given by index (negative from the end) or header name."""
    if isinstance(col, str):
        if header is not None and col in header:
            return header.index(col)
        if _INT.fullmatch(col.strip()):
            col = int(col)
        elif header is None:
            raise ParseError(
                f"{what} {col!r} is a name but the file has no header line; give a "
                f"column index (0..{n_columns - 1} or -1 for the last)",
                path,
            )
        else:
            raise ParseError(f"{what} {col!r} not found in the header; columns are {header}", path)
    if not -n_columns <= col < n_columns:
        raise ParseError(f"{what} index {col} is out of range for {n_columns} columns", path)
    return col % n_columns


def _read_rows(path: Path, spec: dict, member: str | None):
    """Cells of every data row of one file.

    Returns
    -------
    rows, lines, header, n_columns, info, where
    """
    text, info = _read_text(path, member)
    where = f"{path}[{member}]" if "member" in info else path
    fmt = spec.get("format", "whitespace")
    skip = spec.get("skip_lines", 0)
    header_mode = spec.get("header", False)
    n_columns = spec.get("n_columns")
    header = None
    rows, lines = [], []
    for lineno, cells in _split_lines(text, fmt, spec.get("delimiter"), spec.get("comment")):
        if lineno <= skip or cells is None:
            continue
        if isinstance(cells, csv.Error):
            raise ParseError(f"malformed CSV: {cells}", where, lineno)
        if header is None and not rows and header_mode is not False:
            is_header = header_mode is True or not any(_looks_numeric(c) for c in cells)
            if is_header:
                header = cells
                _check_header(header, where, lineno)
                n_columns = n_columns or len(header)
                if len(header) != n_columns:
                    raise ParseError(
                        f"header has {len(header)} names, expected {n_columns}", where, lineno
                    )
                continue
        if n_columns is None:
            n_columns = len(cells)
            if n_columns < 2:
                raise ParseError(
                    "only one column: need features and a label (wrong delimiter?)", where, lineno
                )
        if len(cells) != n_columns:
            last = lineno == _last_data_line(text)
            raise ParseError(
                f"expected {n_columns} fields, found {len(cells)}"
                + (
                    " (the file looks truncated)"
                    if last and len(cells) < n_columns
                    else " (wrong delimiter, a missing value or an extra field?)"
                ),
                where,
                lineno,
            )
        rows.append(cells)
        lines.append(lineno)
    if not rows:
        raise ParseError(
            "no data rows" + (f" after skipping {skip} header line(s)" if skip else ""), where
        )
    info["rows"] = len(rows)
    return rows, lines, header, n_columns, info, where


def _last_data_line(text: str) -> int:
    lines = text.split("\n")
    for i in range(len(lines), 0, -1):
        if lines[i - 1].strip():
            return i
    return 0


def _check_header(header: list, where, lineno: int) -> None:
    seen = {}
    for i, name in enumerate(header):
        if name == "":
            raise ParseError(f"header column {i} has an empty name", where, lineno)
        if name in seen:
            raise ParseError(
                f"duplicate column name {name!r} in the header (columns {seen[name]} and {i})",
                where,
                lineno,
            )
        seen[name] = i


def _to_float(cells_rows: list, cols: list[int], lines: list[int], where, header) -> np.ndarray:
    """Feature block as float64; on failure find and report the first bad cell."""
    block = [[r[c] for c in cols] for r in cells_rows]
    try:
        X = np.array(block, dtype=np.float64).reshape(len(block), len(cols))
        if np.all(np.isfinite(X)):
            return X
    except ValueError:
        pass
    for r, row in enumerate(block):
        for j, cell in enumerate(row):
            col = cols[j]
            name = f"column {col}" + (f" ({header[col]!r})" if header else "")
            if cell.lower() in _MISSING:
                raise ParseError(
                    f"missing value {cell!r} in {name}; impute or drop it first", where, lines[r]
                )
            try:
                v = float(cell)
            except ValueError:
                raise ParseError(
                    f"non-numeric value {cell!r} in feature {name}", where, lines[r]
                ) from None
            if not np.isfinite(v):
                raise ParseError(f"non-finite value {cell!r} in {name}", where, lines[r])
    raise ParseError("could not convert the features to numbers", where)  # pragma: no cover


def _labels(cells: list[str], label_type: str, lines: list[int], where):
    for r, c in enumerate(cells):
        if c.lower() in _MISSING:
            raise ParseError(f"missing label {c!r}", where, lines[r])
    if label_type == "auto":
        label_type = "int" if all(_INT.fullmatch(c) for c in cells) else "str"
    if label_type == "int":
        for r, c in enumerate(cells):
            if not _INT.fullmatch(c):
                raise ParseError(f"label {c!r} is not an integer", where, lines[r])
        return np.array([int(c) for c in cells], dtype=np.int64)
    return np.array(cells, dtype=str)


def _parse_files(sources: list[tuple[Path, str | None]], spec: dict):
    """Parse and concatenate files sharing one spec; returns X, y, per-row (file, line), infos."""
    try:
        _check_spec(spec)
    except ValueError as exc:
        raise ParseError(f"bad parse spec: {exc}") from None
    Xs, ys, where_rows, infos, ncols0 = [], [], [], [], None
    feature_names = None
    for path, member in sources:
        rows, lines, header, ncols, info, where = _read_rows(Path(path), spec, member)
        if ncols0 is not None and ncols != ncols0:
            raise ParseError(f"has {ncols} columns but the previous file(s) have {ncols0}", where)
        ncols0 = ncols
        label = _resolve_column(spec["label_column"], ncols, header, where, "label column")
        fc = spec.get("feature_columns")
        cols = (
            [c for c in range(ncols) if c != label]
            if fc is None
            else [_resolve_column(c, ncols, header, where, "feature column") for c in fc]
        )
        if label in cols:
            raise ParseError(f"column {label} is both the label and a feature", where)
        if len(set(cols)) != len(cols):
            raise ParseError("feature_columns lists a column twice", where)
        Xs.append(_to_float(rows, cols, lines, where, header))
        ys.append(_labels([r[label] for r in rows], spec.get("label_type", "auto"), lines, where))
        where_rows += [(str(where), ln) for ln in lines]
        infos.append(info)
        if header is not None:
            feature_names = [header[c] for c in cols]
    kinds = {y.dtype.kind for y in ys}
    if len(kinds) > 1:  # "auto" typed one file's labels as int and another's as str
        ys = [y.astype(str) for y in ys]
    return np.vstack(Xs), np.concatenate(ys), where_rows, infos, feature_names


def _check_classes(y: np.ndarray, where_rows: list, min_class_size: int, label_names: dict | None):
    classes, first, counts = np.unique(y, return_index=True, return_counts=True)
    if label_names is not None:
        known = set(label_names)
        for c, i in zip(classes, first):
            if str(c) not in known:
                f, ln = where_rows[i]
                raise ParseError(
                    f"unknown label {str(c)!r}; the catalog expects one of {sorted(known)}", f, ln
                )
    if len(classes) < 2:
        raise ParseError(
            f"only one class ({str(classes[0])!r}) in the data; need at least two", where_rows[0][0]
        )
    for c, i, n in zip(classes, first, counts):
        if n < min_class_size:
            f, ln = where_rows[i]
            raise ParseError(
                f"class {str(c)!r} has only {n} sample(s); every class needs at least "
                f"{min_class_size} (DESIGN.md section 1)",
                f,
                ln,
            )
    names = [str(label_names[str(c)]) if label_names else str(c) for c in classes]
    return classes, counts, names


def parse_table(
    path,
    label_column,
    delimiter=None,
    header="infer",
    *,
    skip_lines: int = 0,
    feature_columns=None,
    label_type: str = "auto",
    label_names: dict | None = None,
    n_columns: int | None = None,
    comment: str | None = None,
    member: str | None = None,
    min_class_size: int = 2,
):
    """Parse any delimited text table with a label column.

    Parameters
    ----------
    path : path
        A text file (or a zip archive, with ``member``).
    label_column : int or str
        Column index (negative counts from the end) or header name.
    delimiter : str or None
        None: comma if the first data line has one, else any whitespace. ``"whitespace"`` or
        ``" "``: any run of spaces/tabs. Any other single character: CSV with that delimiter.
    header : {"infer", True, False}
        "infer": the first line is a header when none of its cells is a number.
    skip_lines : int
        Lines to drop before anything else (comments, banners).
    feature_columns : list of int or str, optional
        Default: every column but the label.
    label_type : {"auto", "int", "str"}
        "auto": int when every label is an integer.
    label_names : dict, optional
        Display name per label (as a string key); labels not listed are refused.
    n_columns : int, optional
        Expected number of columns (default: from the header or the first row).
    comment : str, optional
        Lines starting with this are skipped.
    min_class_size : int, default 2
        Smallest class accepted (the method needs two samples per class).

    Returns
    -------
    X : ndarray of float64, shape (n_samples, n_features)
    y : ndarray of int64 or str, shape (n_samples,)
    label_names : list of str
        Display name of each sorted class.
    provenance : dict
        JSON-safe: file name, path, size, sha256, rows, the parse spec, feature names.

    Raises
    ------
    ParseError
        Naming file, line and problem: empty file, wrong column count, non-numeric or missing
        cells, label column not found, duplicate header names, a class with one sample.
    """
    path = Path(path)
    fmt, delim = _format_for(path, delimiter, skip_lines, member)
    spec = {
        "format": fmt,
        "delimiter": delim,
        "skip_lines": skip_lines,
        "header": header,
        "label_column": label_column,
        "feature_columns": feature_columns,
        "n_columns": n_columns,
        "label_type": label_type,
        "label_names": label_names,
        "comment": comment,
    }
    X, y, where_rows, infos, feature_names = _parse_files([(path, member)], spec)
    classes, counts, names = _check_classes(y, where_rows, min_class_size, label_names)
    provenance = {
        "source": "table",
        "files": infos,
        "parse": spec,
        "feature_names": feature_names,
        "n_samples": int(X.shape[0]),
        "n_features": int(X.shape[1]),
        "class_counts": {str(c): int(n) for c, n in zip(classes, counts)},
    }
    return X, y, names, provenance


def _format_for(path: Path, delimiter, skip_lines: int, member):
    if delimiter in ("whitespace", " ", r"\s+"):
        return "whitespace", None
    if delimiter is not None:
        if not isinstance(delimiter, str) or len(delimiter) != 1:
            raise ValueError(
                f"delimiter must be one character, 'whitespace' or None, got {delimiter!r}"
            )
        return "csv", delimiter
    if path.suffix.lower() == ".csv":
        return "csv", ","
    # Sniff: the first line after the skipped ones decides.
    text, _info = _read_text(path, member)
    for lineno, line in enumerate(text.split("\n"), start=1):
        if lineno > skip_lines and line.strip():
            return ("csv", ",") if "," in line else ("whitespace", None)
    return "whitespace", None


def _load_sklearn(entry: CatalogEntry):
    import sklearn
    import sklearn.datasets

    loader = entry.source["loader"]
    bunch = getattr(sklearn.datasets, loader)()
    X = np.asarray(bunch.data, dtype=np.float64)
    y = np.asarray(bunch.target, dtype=np.int64)
    names = [str(n) for n in bunch.target_names]
    provenance = {
        "source": "sklearn",
        "loader": f"sklearn.datasets.{loader}",
        "sklearn_version": sklearn.__version__,
        "feature_names": [str(f) for f in getattr(bunch, "feature_names", [])] or None,
        "files": [],
    }
    return X, y, {str(i): n for i, n in enumerate(names)}, provenance


def parse_dataset(entry, paths=None, *, min_class_size: int = 2):
    """Parse a catalog data set from its original files and check it against the catalog.

    Parameters
    ----------
    entry : CatalogEntry or str
    paths : list of path, optional
        One per file record (as returned by :func:`locate_sources` / :func:`fetch_sources`);
        default: :func:`locate_sources`. Ignored for scikit-learn data sets.

    Returns
    -------
    X : ndarray of float64, shape (n_samples, n_features)
    y : ndarray of int64 or str, shape (n_samples,)
        Labels as in the files (seeds: 1, 2, 3; vehicle: "bus", ...).
    label_names : list of str
        Display name of each sorted class (seeds: Kama, Rosa, Canadian).
    provenance : dict
        JSON-safe: data set, source URLs, per-file path, size, sha256 and row count, the parse
        spec, feature names.

    Raises
    ------
    ParseError
        A file is malformed (file, line, problem) or the result disagrees with the catalog's
        expected counts.
    """
    entry = get_entry(entry)
    if entry.kind == "sklearn":
        X, y, label_names, provenance = _load_sklearn(entry)
        where_rows = [(f"sklearn.datasets.{entry.source['loader']}", None)] * len(y)
    else:
        if paths is None:
            paths = locate_sources(entry)
        paths = [Path(p) for p in paths]
        if len(paths) != len(entry.files):
            raise ParseError(
                f"{entry.name}: got {len(paths)} path(s) for {len(entry.files)} "
                f"catalogued file(s) ({', '.join(f['name'] for f in entry.files)})"
            )
        sources = [(p, f.get("member")) for p, f in zip(paths, entry.files)]
        X, y, where_rows, infos, feature_names = _parse_files(sources, entry.parse)
        for info, f in zip(infos, entry.files):
            info.update(catalog_name=f["name"], url=f["url"], catalog_sha256=f.get("sha256"))
        label_names = entry.parse.get("label_names")
        provenance = {
            "source": "files",
            "files": infos,
            "parse": entry.parse,
            "feature_names": feature_names,
        }
    classes, counts, names = _check_classes(y, where_rows, min_class_size, label_names)
    _check_expected(entry, X, classes, counts, provenance)
    provenance.update(
        dataset=entry.name,
        description=entry.description,
        n_samples=int(X.shape[0]),
        n_features=int(X.shape[1]),
        class_counts={str(c): int(n) for c, n in zip(classes, counts)},
    )
    return X, y, names, provenance


def _check_expected(entry: CatalogEntry, X, classes, counts, provenance) -> None:
    exp = entry.expected

    def fail(what, got, want):
        raise ParseError(
            f"{entry.name}: parsed {what} {got}, but the catalog expects {want} "
            "(a truncated file or a different version of the data?)"
        )

    if "n_samples" in exp and X.shape[0] != exp["n_samples"]:
        fail("n_samples =", X.shape[0], exp["n_samples"])
    if "n_features" in exp and X.shape[1] != exp["n_features"]:
        fail("n_features =", X.shape[1], exp["n_features"])
    if "n_classes" in exp and len(classes) != exp["n_classes"]:
        fail("n_classes =", len(classes), exp["n_classes"])
    if "class_counts" in exp:
        got = {str(c): int(n) for c, n in zip(classes, counts)}
        if got != {str(k): int(v) for k, v in exp["class_counts"].items()}:
            fail("class counts", got, exp["class_counts"])
    if "rows_per_file" in exp:
        got = [f["rows"] for f in provenance.get("files", [])]
        if got != exp["rows_per_file"]:
            fail("rows per file", got, exp["rows_per_file"])
