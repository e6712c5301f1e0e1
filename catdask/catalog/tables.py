"""Table reading at library speed: one text file (or zip member) -> float64 features + labels."""

from __future__ import annotations

import codecs
import contextlib
import dataclasses
import hashlib
import io
import os
import stat
import zipfile
from pathlib import Path

import numpy as np

from .. import settings
from ..errors import ParseError
from .lines import (INT_PATTERN, MISSING_CELLS, Head, line_of_row, locate_problem, read_head,
                    resolve_column)

#: Largest text file parsed (bytes); ``$CATDASK_MAX_TABLE_BYTES`` overrides it.
MAX_TABLE_BYTES = 16 * 2**30
MAX_TABLE_BYTES_ENV = settings.MAX_TABLE_BYTES.name
#: Rows per pandas chunk: bounds the parser's working memory (~ CHUNK_ROWS x columns x 8 bytes).
CHUNK_ROWS = 50_000
#: Text files up to this size are parsed by one threaded ``pandas.read_csv`` of the path; larger
#: ones, and zip members, stream in ``CHUNK_ROWS`` chunks, which bounds the parser's memory.
WHOLE_READ_MAX_BYTES = 256 * 2**20
_MAX_ARCHIVE_MEMBER = 2 * 2**30
_READ_BLOCK = 2**20


@dataclasses.dataclass
class Table:
    """One parsed file: ``X`` (float64, rows x features), ``y`` (int64 or str; None when the spec
    names no label column), ``n_columns``, ``header`` and ``feature_names`` (or None), ``info``
    (JSON-safe provenance: name, path, bytes, sha256, rows, and the member's for a zip member) and
    ``where`` (``path`` or ``path[member]``, for error messages).
    """

    X: np.ndarray
    y: np.ndarray | None
    n_columns: int
    header: list | None
    feature_names: list | None
    info: dict
    where: str
    _open: object = dataclasses.field(repr=False)
    _spec: dict = dataclasses.field(repr=False)
    _head: Head = dataclasses.field(repr=False)

    def line_of_row(self, row: int) -> int | None:
        """1-based line number of data row ``row`` (re-reads the file; for error messages)."""
        return line_of_row(self._open, self._spec, self._head, row, self.where)


def _max_bytes() -> int:
    value = settings.MAX_TABLE_BYTES.get()
    return int(value) if value else MAX_TABLE_BYTES


def _open_regular(path: Path):
    """Open ``path`` for binary reading, refusing anything but a regular file."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise ParseError("file not found", path) from None
    except OSError as exc:
        raise ParseError(f"cannot read file: {exc}", path) from exc
    if not stat.S_ISREG(st.st_mode):
        kind = (
            "a folder" if stat.S_ISDIR(st.st_mode)
            else "a FIFO (named pipe)" if stat.S_ISFIFO(st.st_mode)
            else "a device" if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode)
            else "a socket" if stat.S_ISSOCK(st.st_mode)
            else "not a regular file"
        )
        raise ParseError(f"is {kind}, not a regular file; give the path of a text table", path)
    limit = _max_bytes()
    if st.st_size > limit:
        raise ParseError(
            f"is {st.st_size / 2**30:.1f} GiB, over the {limit / 2**30:.1f} GiB limit for a text "
            f"table (raise it with {MAX_TABLE_BYTES_ENV}=BYTES)",
            path,
        )
    try:
        return open(path, "rb")
    except OSError as exc:
        raise ParseError(f"cannot read file: {exc}", path) from exc


def _scan(stream, where, *, text: bool = True, count_lines: bool = True) -> dict:
    """One streaming pass: sha256, size, line count; refuse empty, binary or non-UTF-8 text."""
    sha, size, newlines, has_text = hashlib.sha256(), 0, 0, False
    decoder = codecs.getincrementaldecoder("utf-8")()
    for block in iter(lambda: stream.read(_READ_BLOCK), b""):
        sha.update(block)
        if not text:
            size += len(block)
            continue
        if b"\x00" in block:
            line = _line_of(stream, size + block.index(b"\x00"))
            raise ParseError("contains NUL bytes: a binary file, not a text table", where, line)
        try:
            if not (block.isascii() and not decoder.getstate()[0]):  # ASCII: valid UTF-8 as is
                decoder.decode(block)
        except UnicodeDecodeError as exc:
            line = _line_of(stream, size + exc.start)
            byte = block[exc.start] if exc.start < len(block) else 0
            raise ParseError(f"not UTF-8 text (byte 0x{byte:02x})", where, line) from None
        has_text = has_text or bool(block.strip())
        if count_lines:
            newlines += block.count(b"\n")
        size += len(block)
    if not text:
        return {"bytes": size, "sha256": sha.hexdigest()}
    try:
        decoder.decode(b"", final=True)
    except UnicodeDecodeError:
        raise ParseError(
            "not UTF-8 text (truncated character at the end)", where, _line_of(stream, size)
        ) from None
    if not has_text:
        raise ParseError("the file is empty", where)
    out = {"bytes": size, "sha256": sha.hexdigest()}
    if count_lines:
        out["lines"] = newlines + 1
    return out


def _line_of(stream, offset: int) -> int:
    """The 1-based line of byte ``offset`` of a seekable ``stream`` (read again from the start:
    only an error needs it)."""
    stream.seek(0)
    newlines, left = 0, offset
    while left > 0:
        block = stream.read(min(_READ_BLOCK, left))
        if not block:
            break
        newlines += block.count(b"\n")
        left -= len(block)
    return newlines + 1


def _read_member(path: Path, member: str) -> bytes:
    try:
        with zipfile.ZipFile(path) as zf:
            names = zf.namelist()
            # Archives sometimes put files in a folder; match on the base name as well.
            match = member if member in names else next(
                (n for n in names if n.rsplit("/", 1)[-1] == member), None
            )
            if match is None:
                raise ParseError(
                    f"archive has no member {member!r} (members: {', '.join(names)})", path
                )
            if zf.getinfo(match).file_size > min(_MAX_ARCHIVE_MEMBER, _max_bytes()):
                raise ParseError(f"archive member {member!r} is implausibly large", path)
            return zf.read(match)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError) as exc:
        raise ParseError(f"damaged zip archive: {exc}", path) from exc


#: What other data files start with (their "magic" bytes), and the pandas reader that can turn
#: one into a CSV: the error on such a file says how, instead of "NUL bytes" or "no data rows".
_OTHER_FORMATS = {b"PAR1": ("a Parquet file", "read_parquet"),
                  b"ARROW1": ("an Arrow / Feather file", "read_feather"),
                  b"\x89HDF": ("an HDF5 file", "read_hdf"),
                  b"\xd0\xcf\x11\xe0": ("an Excel workbook", "read_excel"),
                  b"\x93NUMPY": ("a NumPy array file", None)}


def _refuse_other_formats(fh, path: Path, is_zip: bool) -> None:
    """Refuse a Parquet, Arrow, HDF5, Excel, NumPy or JSON file in one line saying how to make
    a CSV of it."""
    start = fh.read(8)
    fh.seek(0)
    kind, reader = next((v for magic, v in _OTHER_FORMATS.items() if start.startswith(magic)),
                        (None, None))
    if is_zip and kind is None:
        with zipfile.ZipFile(fh) as zf:
            if "xl/workbook.xml" in zf.namelist():
                kind, reader = "an Excel workbook", "read_excel"
        fh.seek(0)
    if kind is None and path.suffix.lower() in (".json", ".jsonl", ".ndjson") \
            and start.lstrip()[:1] in (b"{", b"["):
        kind, reader = "a JSON file", "read_json"
    if kind is None:
        return
    how = (f"e.g. pandas.{reader}({str(path)!r}).to_csv({path.stem + '.csv'!r}, index=False)"
           if reader else "e.g. with numpy.savetxt")
    raise ParseError(f"is {kind}, not a text table: catdask reads CSV and whitespace tables; "
                     f"write it as CSV first ({how})", path)


def open_source(path, member: str | None = None):
    """Check a source and return ``(open_stream, info, where)``."""
    path = Path(path)
    with _open_regular(path) as fh:
        is_zip = zipfile.is_zipfile(fh)
        fh.seek(0)
        _refuse_other_formats(fh, path, is_zip)
        # A file small enough for one read needs no line count (_parse_rows preallocates
        # only for the chunked parse).
        whole = not is_zip and os.fstat(fh.fileno()).st_size <= WHOLE_READ_MAX_BYTES
        fh.seek(0)
        info = {"name": path.name, "path": str(path),
                **_scan(fh, path, text=not is_zip, count_lines=not whole)}
    if not is_zip:
        return (lambda: open(path, "rb")), info, str(path)
    if member is None:
        raise ParseError("is a zip archive; say which member to read (member=...)", path)
    raw = _read_member(path, member)
    where = f"{path}[{member}]"
    scanned = _scan(io.BytesIO(raw), where)
    info.update(member=member, member_bytes=scanned["bytes"], member_sha256=scanned["sha256"],
                lines=scanned["lines"])
    return (lambda: contextlib.closing(io.BytesIO(raw))), info, where


def _check_memory(n_rows_max: int, n_features: int, where) -> None:
    """Refuse, with the figures, a table whose float64 array cannot fit in memory."""
    import psutil

    need = n_rows_max * n_features * 8
    available = psutil.virtual_memory().available
    if need > available:
        raise ParseError(
            f"up to {n_rows_max} rows x {n_features} features need {need / 2**30:.1f} GiB as "
            f"float64, more than the {available / 2**30:.1f} GiB of memory available",
            where,
        )


def _csv_options(spec: dict, head: Head, label: int | None) -> dict:
    fmt = spec.get("format", "whitespace")
    options = {
        "sep": r"\s+" if fmt != "csv" else spec["delimiter"],
        "header": None,
        "skiprows": head.first_data_line - 1,
        "names": list(range(head.n_columns)),
        "index_col": False,
        "skip_blank_lines": True,
        "na_filter": False,  # "?", "NA", "" stay text: reported as missing by the line layer
        # Labels as text; the other columns typed by the C parser (checked after each chunk):
        # naming float64 for the features makes pandas take a ~1.5x slower path.
        "dtype": {} if label is None else {label: object},
        "chunksize": CHUNK_ROWS,
        "engine": "c",
        "encoding": "utf-8-sig",
    }
    if fmt == "csv":
        options["skipinitialspace"] = True
    if spec.get("comment"):
        # pandas also cuts a comment that starts mid-line; the line layer skips whole lines
        # starting with it. Same result for tables whose cells never contain the character.
        options["comment"] = spec["comment"]
    return options


def _chunks(open_stream, spec: dict, head: Head, label: int | None, whole_file=None):
    """Yield the pandas chunks; pandas' errors (too many fields, a non-number) surface as is."""
    import pandas as pd

    options = _csv_options(spec, head, label)
    if whole_file is not None:
        del options["chunksize"]
        yield pd.read_csv(whole_file, **options)
        return
    with open_stream() as stream:
        yield from pd.read_csv(stream, **options)


def read_table(path, spec: dict, member: str | None = None, *, feature_columns=None) -> Table:
    """Parse one file with a parse spec (see :mod:`catdask.catalog`) into a :class:`Table` (features
    only when the spec's ``label_column`` is None). Raises :class:`ParseError` naming file, line
    and column: a non-regular, oversized, empty, binary or non-UTF-8 file, wrong field counts,
    missing/non-numeric/non-finite cells, missing or non-integer labels.
    """
    open_stream, info, where = open_source(path, member)
    with open_stream() as stream:
        head = read_head(stream, spec, where)
    n = head.n_columns
    label = (None if spec.get("label_column") is None
             else resolve_column(spec["label_column"], n, head.header, where, "label column"))
    fc = spec.get("feature_columns") if feature_columns is None else feature_columns
    cols = (
        [c for c in range(n) if c != label]
        if fc is None
        else [resolve_column(c, n, head.header, where, "feature column") for c in fc]
    )

    def named(c):
        return f"column {c}" + (f" ({head.header[c]!r})" if head.header else "")

    if label in cols:
        raise ParseError(f"{named(label)} is both the label and a feature", where)
    twice = next((c for i, c in enumerate(cols) if c in cols[:i]), None)
    if twice is not None:
        raise ParseError(f"the feature columns list {named(twice)} twice", where)
    try:
        X, labels = _parse_rows(open_stream, spec, head, cols, label, info, where)
    except _NeedsLocating as exc:
        locate_problem(open_stream, spec, head, cols, label, where)
        raise ParseError(f"could not parse the table: {exc}", where) from None
    y = None
    if labels is not None:
        try:
            y = _type_labels(labels, spec.get("label_type", "auto"),
                             spec.get("format", "whitespace"))
        except _NeedsLocating:
            pass
        if y is None:  # a missing label, or a non-integer one with label_type "int"
            locate_problem(open_stream, spec, head, cols, label, where)
            raise ParseError("a label is missing or not an integer", where)
    info.pop("lines", None)  # a working figure (preallocation), not provenance
    info["rows"] = int(X.shape[0])
    names = [head.header[c] for c in cols] if head.header is not None else None
    return Table(X, y, n, head.header, names, info, where, open_stream, spec, head)


class _NeedsLocating(Exception):
    """pandas or a check found a problem; the line layer names it."""


def _parse_rows(open_stream, spec, head, cols, label, info, where):
    import pandas as pd

    # Upper bound on the rows from the line count: preallocate instead of stacking chunks
    # (a whole-file read has one chunk, whose array is kept as it is). A whole file is not
    # line-counted: a row takes at least two bytes per column (a cell and a separator or the
    # newline), which bounds the rows for the memory check.
    whole_file = (info["path"] if "member" not in info and info["bytes"] <= WHOLE_READ_MAX_BYTES
                  else None)
    n_rows_max = info.get("lines") or max(1, info["bytes"] // (2 * head.n_columns) + 1)
    _check_memory(n_rows_max, len(cols), where)
    X = None if whole_file else np.empty((n_rows_max, len(cols)), dtype=np.float64)
    labels, filled = [], 0
    last = head.n_columns - 1
    try:
        for chunk in _chunks(open_stream, spec, head, label, whole_file):
            rows = len(chunk)
            if X is not None and filled + rows > n_rows_max:  # a lone CR: a line break to pandas
                X = np.concatenate([X[:filled], np.empty((rows + filled, len(cols)))])
                n_rows_max = X.shape[0]
            # A short row leaves its last cells empty (na_filter=False): the label check or
            # the finiteness check sees it, unless the last column is unused.
            if last not in cols and last != label:
                tail = chunk[last]
                if tail.isna().any() or (tail == "").any():
                    raise _NeedsLocating("a row has too few fields")
            features = chunk[cols]
            if any(dtype.kind not in "fiu" for dtype in features.dtypes):
                raise _NeedsLocating("a feature cell is not a number")
            block = features.to_numpy(dtype=np.float64)
            if not np.isfinite(block).all():
                raise _NeedsLocating("a feature cell is missing or not finite")
            if X is None:  # C order, as the chunked path fills it: the store reads row blocks
                X, n_rows_max = np.ascontiguousarray(block), rows
            else:
                X[filled:filled + rows] = block
            if label is not None:
                labels.append(chunk[label].to_numpy(dtype=object))
            filled += rows
    except (pd.errors.ParserError, ValueError, TypeError) as exc:
        raise _NeedsLocating(str(exc)) from None
    if filled == 0 or X is None:
        raise ParseError("no data rows", where)  # pragma: no cover (read_head found one)
    # Keep the preallocated buffer when it is nearly full; copy only if it is much larger.
    X = X[:filled] if filled * 5 >= n_rows_max * 4 else X[:filled].copy()
    return X, (None if label is None else np.concatenate(labels))


def _type_labels(labels: np.ndarray, label_type: str, fmt: str):
    """Labels as int64 or str; None when ``label_type`` is "int" and one is not an integer. Checked
    on the distinct labels only, then mapped back by code; a missing label ("", "?", "NA", ...)
    raises ``_NeedsLocating``.
    """
    import pandas as pd

    codes, uniques = pd.factorize(labels)
    text = [str(u) for u in uniques]
    if fmt == "csv":
        text = [t.strip() for t in text]
    if any(t.lower() in MISSING_CELLS for t in text) or (codes < 0).any():
        raise _NeedsLocating("a label is missing")
    if label_type == "str":
        return np.array(text, dtype=str)[codes]
    is_int = all(INT_PATTERN.fullmatch(t) for t in text)
    if label_type == "int" and not is_int:
        return None
    if is_int:
        try:
            return np.array([int(t) for t in text], dtype=np.int64)[codes]
        except OverflowError:  # beyond int64: keep the text
            if label_type == "int":
                return None
    return np.array(text, dtype=str)[codes]
