"""Assembly: parsed tables -> ``(X, y, label_names, provenance)``, checked against the catalog."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..errors import ParseError
from .entries import CatalogEntry, _check_spec, get_entry
from .lines import iter_lines, read_head
from .sources import locate_sources
from .tables import open_source, read_table


def check_label_types(y, where=None) -> None:
    """Refuse labels that mix numbers and text (``[1, "a", 2]``): they have no common order.
    The ParseError names one label of each kind and how to make them one kind."""
    y = np.asarray(y)
    if y.dtype != object:
        return
    kinds = {}
    for value in y:
        kind = "number" if isinstance(value, (int, float, np.number)) and not isinstance(
            value, bool) else "text" if isinstance(value, str) else type(value).__name__
        kinds.setdefault(kind, value)
    if len(kinds) > 1:
        examples = ", ".join(f"{k} {v!r}" for k, v in kinds.items())
        raise ParseError(
            f"labels mix kinds ({examples}); make them all text or all integers "
            "(label_type 'str' in the parse spec reads every label as text)",
            where,
        )


def _parse_files(sources: list[tuple[Path, str | None]], spec: dict):
    """Parse and concatenate files sharing one spec; returns X, y, row locator, infos, names."""
    try:
        _check_spec(spec)
    except ValueError as exc:
        raise ParseError(f"bad parse spec: {exc}") from None
    tables = []
    for path, member in sources:
        table = read_table(Path(path), spec, member)
        if tables and table.n_columns != tables[0].n_columns:
            raise ParseError(
                f"has {table.n_columns} columns but the previous file(s) have "
                f"{tables[0].n_columns}",
                table.where,
            )
        tables.append(table)
    kinds = {t.y.dtype.kind for t in tables}
    if len(kinds) > 1:  # "auto" typed one file's labels as int and another's as text
        ints = next(t for t in tables if t.y.dtype.kind == "i")
        text = next(t for t in tables if t.y.dtype.kind != "i")
        raise ParseError(
            f"labels mix kinds: integers in {ints.where} (e.g. {ints.y[0]!r}) and text in "
            f"{text.where} (e.g. {str(text.y[0])!r}); set label_type 'str' in the parse spec "
            "to read every label as text"
        )
    X = tables[0].X if len(tables) == 1 else np.vstack([t.X for t in tables])
    y = tables[0].y if len(tables) == 1 else np.concatenate([t.y for t in tables])
    feature_names = next(
        (t.feature_names for t in reversed(tables) if t.feature_names is not None), None
    )
    return X, y, _row_locator(tables), [t.info for t in tables], feature_names


def _row_locator(tables):
    """``locate(row) -> (file, line)`` over concatenated tables (re-reads a file when asked)."""
    starts = np.cumsum([0] + [t.X.shape[0] for t in tables])

    def locate(row: int):
        i = int(np.searchsorted(starts, row, side="right")) - 1
        return tables[i].where, tables[i].line_of_row(row - int(starts[i]))

    return locate


def _check_classes(y: np.ndarray, locate, label_names: dict | None):
    check_label_types(y, locate(0)[0])
    classes, first, counts = np.unique(y, return_index=True, return_counts=True)
    if label_names is not None:
        known = set(label_names)
        for c, i in zip(classes, first):
            if str(c) not in known:
                raise ParseError(
                    f"unknown label {str(c)!r}; the catalog expects one of {sorted(known)}",
                    *locate(i),
                )
    if len(classes) < 2:
        raise ParseError(
            f"only one class ({str(classes[0])!r}) in the data; need at least two", locate(0)[0]
        )
    for c, i, n in zip(classes, first, counts):
        if n < 2:
            raise ParseError(
                f"class {str(c)!r} has only {n} sample(s); every class needs at least 2 (the "
                "method measures each class's spread, and one sample has none)",
                *locate(i),
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
):
    """Parse any delimited text table (a zip archive's ``member``) with a label column.

    Parameters
    ----------
    label_column : int or str
        Column index (negative counts from the end) or header name.
    delimiter : str or None
        None: comma if the first data line has one, else semicolon if it has one, else any
        whitespace (a ``.csv`` whose first line has neither: comma). ``"whitespace"`` or
        ``" "``: any run of spaces/tabs. Any other single character: CSV with that delimiter.
    header : {"infer", True, False}
        "infer": the first line is a header when none of its cells is a number.
    skip_lines, comment
        Lines dropped before anything else (banners); lines starting with ``comment``.
    feature_columns : list of int or str, optional
        Default: every column but the label.
    label_type : {"auto", "int", "str"}
        "auto": int when every label is an integer.
    label_names : dict, optional
        Display name per label (as a string key); labels not listed are refused.
    n_columns : int, optional
        Expected number of columns (default: from the header or the first row).

    Returns ``(X, y, label_names, provenance)``: float64 X, int64 or str labels, the display
    name of each sorted class, and JSON-safe provenance (file name, path, size, sha256, rows,
    the parse spec, feature names). A ParseError names file, line and problem (empty file,
    wrong column count, non-numeric or missing cells, label column not found, duplicate header
    names, a class with one sample).
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
    X, y, locate, infos, feature_names = _parse_files([(path, member)], spec)
    classes, counts, names = _check_classes(y, locate, label_names)
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


def parse_features(path, *, label_column=None, delimiter=None, header="infer",
                   feature_columns=None):
    """Parse a delimited text table of features to predict on (:func:`parse_table`'s rules)."""
    path = Path(path)
    fmt, delim = _format_for(path, delimiter, 0, None)
    spec = {"format": fmt, "delimiter": delim, "skip_lines": 0, "header": header,
            "label_column": label_column, "feature_columns": feature_columns,
            "label_type": "auto"}
    try:  # the same checks as a labelled table's (a placeholder stands in for no label)
        _check_spec({**spec, "label_column": 0 if label_column is None else label_column})
    except ValueError as exc:
        raise ParseError(f"bad parse spec: {exc}") from None
    table = read_table(path, spec)
    return table.X, table.y, table.feature_names


def table_columns(path, *, delimiter=None) -> tuple[list | None, int]:
    """A table's header (None without one) and number of columns, by :func:`parse_table`'s
    rules: what a person choosing the label column needs to see."""
    path = Path(path)
    fmt, delim = _format_for(path, delimiter, 0, None)
    open_stream, _info, where = open_source(path)
    with open_stream() as stream:
        head = read_head(stream, {"format": fmt, "delimiter": delim, "header": "infer"}, where)
    return head.header, head.n_columns


def _format_for(path: Path, delimiter, skip_lines: int, member):
    if delimiter in ("whitespace", " ", r"\s+"):
        return "whitespace", None
    if delimiter is not None:
        if not isinstance(delimiter, str) or len(delimiter) != 1:
            raise ValueError(
                f"delimiter must be one character, 'whitespace' or None, got {delimiter!r}"
            )
        return "csv", delimiter
    # Sniff: the first line after the skipped ones decides. A ".csv" without a comma there is
    # most often semicolon separated (a spreadsheet export with a decimal comma) or tab separated.
    default = ("csv", ",") if path.suffix.lower() == ".csv" else ("whitespace", None)
    open_stream, _info, _where = open_source(path, member)
    with open_stream() as stream:
        for lineno, line in iter_lines(stream):
            if lineno > skip_lines and line.strip():
                if "," in line:
                    return "csv", ","
                if ";" in line:
                    return "csv", ";"
                return ("whitespace", None) if "\t" in line or " " in line.strip() else default
    return default


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


def parse_dataset(entry, paths=None):
    """Parse a catalog data set from its original files and check it against the catalog."""
    entry = get_entry(entry)
    if entry.kind == "sklearn":
        X, y, label_names, provenance = _load_sklearn(entry)
        loader = f"sklearn.datasets.{entry.source['loader']}"

        def locate(row):
            return loader, None

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
        X, y, locate, infos, feature_names = _parse_files(sources, entry.parse)
        for info, f in zip(infos, entry.files):
            info.update(catalog_name=f["name"], url=f["url"], catalog_sha256=f.get("sha256"))
        label_names = entry.parse.get("label_names")
        provenance = {
            "source": "files",
            "files": infos,
            "parse": entry.parse,
            "feature_names": feature_names,
        }
    classes, counts, names = _check_classes(y, locate, label_names)
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
