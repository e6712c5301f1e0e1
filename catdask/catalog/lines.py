"""Line-level table reading: the header, and the exact line and column of a problem."""

from __future__ import annotations

import csv
import dataclasses
import re

import numpy as np

from ..errors import ParseError
from ..names import did_you_mean

INT_PATTERN = re.compile(r"[+-]?[0-9]+")
#: A number written with a decimal comma ("0,942", "-1,5e3").
DECIMAL_COMMA = re.compile(r"[+-]?[0-9]*,[0-9]+([eE][+-]?[0-9]+)?")
#: Longest line read (bytes): bounds the memory of one line's cells (~25x its length).
MAX_LINE_BYTES = 16 * 2**20
#: Most columns in a table: pandas' parser needs ~5 s for 5 rows of 100,000 columns and grows
#: with the columns; a file with millions is one long line, not a table.
MAX_COLUMNS = 100_000
# Cells that mean "no value" in common exports; reported as missing rather than non-numeric.
MISSING_CELLS = frozenset(["", "?", "na", "n/a", "nan", "null", "none", "-", "."])


def is_missing(cell: str) -> bool:
    """True for the cells common exports use for "no value" ("", "?", "NA", "nan", ...)."""
    return cell.lower() in MISSING_CELLS


@dataclasses.dataclass(frozen=True)
class Head:
    """What the lines before the first data row say about a table: its ``header`` (None without a
    header line), ``n_columns`` (from the spec, the header or the first data row) and the 1-based
    ``first_data_line``.
    """

    header: list | None
    n_columns: int
    first_data_line: int


def iter_lines(stream, where=None):
    """Yield ``(line number, text)`` of a binary stream (already checked UTF-8), split on ``b"\\n"``
    only; a byte-order mark on the first line is dropped. A line longer than
    :data:`MAX_LINE_BYTES` is a ParseError."""
    lineno = 0
    while True:
        raw = stream.readline(MAX_LINE_BYTES + 1)
        if not raw:
            return
        lineno += 1
        if len(raw) > MAX_LINE_BYTES:
            raise ParseError(
                f"a line longer than {MAX_LINE_BYTES // 2**20} MiB: a table has one sample per "
                "line (is the file one long line, or are its line breaks missing?)", where, lineno)
        text = raw.decode("utf-8")
        if lineno == 1:
            text = text.removeprefix("\ufeff")
        yield lineno, text.rstrip("\n")


def split_cells(line: str, fmt: str, delimiter: str | None, comment: str | None):
    """Cells of one line: a list, None for a blank/comment line, or the :class:`csv.Error`."""
    if not line.strip() or (comment and line.lstrip().startswith(comment)):
        return None
    if fmt != "csv":
        return line.split()  # any run of spaces/tabs (seeds' doubled tabs), CR too
    try:
        cells = next(csv.reader([line.rstrip("\r")], delimiter=delimiter, strict=True))
    except csv.Error as exc:
        return exc
    return [c.strip() for c in cells]


def _too_many_columns(n: int) -> str:
    return (f"{n:,} columns; catdask reads at most {MAX_COLUMNS:,} (a table has one sample "
            "per line: is the file one long line?)")


def _data_lines(stream, spec: dict, where):
    """Yield ``(line number, cells)`` of the non-blank lines after ``skip_lines``."""
    fmt = spec.get("format", "whitespace")
    delim, comment = spec.get("delimiter"), spec.get("comment")
    skip = spec.get("skip_lines", 0)
    for lineno, line in iter_lines(stream, where):
        if lineno <= skip:
            continue
        if fmt == "csv" and line.count(delim) >= MAX_COLUMNS:  # before millions of cells
            raise ParseError(_too_many_columns(line.count(delim) + 1), where, lineno)
        cells = split_cells(line, fmt, delim, comment)
        if isinstance(cells, csv.Error):
            raise ParseError(f"malformed CSV: {cells}", where, lineno)
        if cells is not None:
            yield lineno, cells


def _looks_numeric(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return False
    return True


def _looks_like_header(cells: list) -> bool:
    """A first line of names: most cells neither numbers nor missing-value marks (a header may
    hold a numeric-looking name such as '1.0'; a data row with a text label has one such
    cell)."""
    numeric = [_looks_numeric(c) for c in cells]
    names = sum(not n and not is_missing(c) for c, n in zip(cells, numeric))
    return not any(numeric) or 2 * names > len(cells)


def _check_header(header: list, where, lineno: int) -> None:
    seen = {}
    for i, name in enumerate(header):
        if name == "":
            # Column 0 unnamed: most often the index pandas' to_csv writes by default.
            hint = (" (the index column pandas' to_csv writes? write the file with index=False, "
                    "or name the column)" if i == 0 else "")
            raise ParseError(f"header column {i} has an empty name{hint}", where, lineno)
        if name in seen:
            raise ParseError(f"duplicate column name {name!r} in the header (columns "
                             f"{seen[name]} and {i})", where, lineno)
        seen[name] = i


def read_head(stream, spec: dict, where) -> Head:
    """Read up to the first data row: the header (if any) and the number of columns. A
    ParseError for no data rows, a bad header (empty or duplicate names, wrong count) or one
    column only."""
    header_mode = spec.get("header", False)
    n_columns = spec.get("n_columns")
    header = None
    for lineno, cells in _data_lines(stream, spec, where):
        if header is None and header_mode is not False:
            if header_mode is True or _looks_like_header(cells):
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
            if n_columns < 2 and spec.get("label_column") is not None:
                raise ParseError(
                    "only one column: need features and a label (wrong delimiter?)", where, lineno
                )
        if n_columns > MAX_COLUMNS:
            raise ParseError(_too_many_columns(n_columns), where, lineno)
        return Head(header, n_columns, lineno)
    skip = spec.get("skip_lines", 0)
    raise ParseError(
        "no data rows" + (f" after skipping {skip} header line(s)" if skip else ""), where
    )


def _one_column_hint(header: list) -> str:
    """A header read as one column that holds another delimiter: the likely cause."""
    if len(header) == 1:
        for mark, name in ((",", "','"), (";", "';'"), ("\t", "a tab"), ("|", "'|'")):
            if mark in header[0]:
                return f" (one column: the file looks delimited by {name}; check --delimiter)"
    return ""


def resolve_column(col, n_columns: int, header: list | None, where, what: str) -> int:
    """0-based index of a column given by index (negative from the end) or header name."""
    if isinstance(col, str):
        if header is not None and col in header:
            return header.index(col)
        if INT_PATTERN.fullmatch(col.strip()):
            col = int(col)
        elif header is None:
            raise ParseError(
                f"{what} {col!r} is a name but the file has no header line; give a "
                f"column index (0..{n_columns - 1} or -1 for the last)",
                where,
            )
        else:
            raise ParseError(f"{what} {col!r} not found in the header; columns are {header}"
                             f"{_one_column_hint(header) or did_you_mean(col, header)}", where)
    if not -n_columns <= col < n_columns:
        raise ParseError(f"{what} index {col} is out of range for {n_columns} columns", where)
    return col % n_columns


def _rows(stream, spec: dict, head: Head, where):
    """Yield ``(line number, cells)`` of the data rows (after the header)."""
    for lineno, cells in _data_lines(stream, spec, where):
        if lineno >= head.first_data_line:
            yield lineno, cells


def _check_field_counts(open_stream, spec, head: Head, where) -> None:
    n = head.n_columns
    with open_stream() as stream:
        rows = _rows(stream, spec, head, where)
        for lineno, cells in rows:
            if len(cells) == n:
                continue
            last = next(rows, None) is None
            why = ("the file looks truncated" if last and len(cells) < n
                   else "wrong delimiter, a missing value or an extra field?")
            raise ParseError(f"expected {n} fields, found {len(cells)} ({why})", where, lineno)


def _check_cell(cell: str, name: str, where, lineno: int, column: int) -> None:
    if is_missing(cell):
        raise ParseError(f"missing value {cell!r} in {name}; impute or drop it first", where,
                         lineno)
    try:
        value = float(cell)
    except ValueError:
        # "0,942": a decimal comma (a spreadsheet's export in a comma-decimal locale).
        hint = ("; numbers need a decimal point, not a decimal comma"
                if DECIMAL_COMMA.fullmatch(cell.strip()) else "")
        raise ParseError(f"non-numeric value {cell!r} in feature {name}{hint}", where,
                         lineno, non_numeric=True, column=column) from None
    if not np.isfinite(value):
        raise ParseError(f"non-finite value {cell!r} in {name}", where, lineno)


def locate_problem(open_stream, spec: dict, head: Head, cols, label: int | None,
                   where) -> None:
    """Raise the :class:`ParseError` of the first problem of a table, in the order checked: field
    counts of every row (a short or long row explains any later cell), then every feature cell
    (missing, non-numeric, non-finite: naming line and column), then the labels (missing; not an
    integer when ``label_type`` is ``"int"``). Returns None when the file has none of these.
    ``open_stream()`` gives a fresh binary stream of the file (a context manager).
    """
    _check_field_counts(open_stream, spec, head, where)
    names = {c: f"column {c}" + (f" ({head.header[c]!r})" if head.header else "") for c in cols}
    label_type = spec.get("label_type", "auto")
    with open_stream() as stream:
        for lineno, cells in _rows(stream, spec, head, where):
            for c in cols:
                _check_cell(cells[c], names[c], where, lineno, c)
    if label is None:  # a table of features only
        return
    with open_stream() as stream:
        for lineno, cells in _rows(stream, spec, head, where):
            cell = cells[label]
            if is_missing(cell):
                raise ParseError(f"missing label {cell!r}", where, lineno)
            if label_type == "int" and not INT_PATTERN.fullmatch(cell):
                raise ParseError(f"label {cell!r} is not an integer", where, lineno)


def line_of_row(open_stream, spec: dict, head: Head, row: int, where) -> int | None:
    """1-based line number of data row ``row`` (0-based), or None past the end."""
    with open_stream() as stream:
        for i, (lineno, _cells) in enumerate(_rows(stream, spec, head, where)):
            if i == row:
                return lineno
    return None
