"""Catalog entries: the schema of ``catalog.json``, its validation and lookup by name."""

from __future__ import annotations

import dataclasses
import json
import re
import urllib.parse
from importlib import resources
from pathlib import Path

from ..errors import CatalogError, DatasetNotFoundError
from .. import settings
from ..names import did_you_mean, validate_name

#: The catalog shipped with the package (a real file for a regular or wheel install).
DEFAULT_CATALOG = Path(str(resources.files(__package__).joinpath("catalog.json")))
CATALOG_ENV = settings.CATALOG.name

# Only these scikit-learn loaders may be named by a catalog (no arbitrary attribute calls).
_SKLEARN_LOADERS = frozenset(["load_iris", "load_wine", "load_breast_cancer", "load_digits"])
_FORMATS = ("whitespace", "csv")
_LABEL_TYPES = ("int", "str", "auto")
_SHA256 = re.compile(r"[0-9a-f]{64}")


def _check_https(url: str) -> None:
    """Refuse anything but an ``https://host/...`` address (ValueError)."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme.lower() != "https" or not parts.netloc:
        raise ValueError(f"Refusing to download {url!r}: only https:// URLs are allowed.")


@dataclasses.dataclass(frozen=True)
class CatalogEntry:
    """One data set of the catalog (fields: see the :mod:`catdask.catalog` docstring)."""

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


def load_catalog(path=None) -> dict[str, CatalogEntry]:
    """Read and validate the catalog file ``path`` (default: ``$CATDASK_CATALOG``, else the one
    shipped with the package): name -> CatalogEntry in catalog order. A malformed entry raises
    :class:`CatalogError` naming the entry and field."""
    path = Path(path or settings.CATALOG.get() or DEFAULT_CATALOG)
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
    """The entry called ``name`` (an entry is returned unchanged) in ``catalog``, a loaded
    catalog or a catalog file (default :func:`load_catalog`); :class:`DatasetNotFoundError`
    lists the known names."""
    if isinstance(name, CatalogEntry):
        return name
    entries = catalog if isinstance(catalog, dict) else load_catalog(catalog)
    try:
        return entries[name]
    except (KeyError, TypeError):
        raise DatasetNotFoundError(
            f"No data set {name!r} in the catalog{did_you_mean(name, entries)} (known: "
            f"{', '.join(entries)}). For your own file use parse_table (CLI: `catdask ingest "
            "--file data.csv --name NAME --label-column COLUMN`)."
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
    aliases = f.get("aliases", [])
    if not isinstance(aliases, list) or not all(isinstance(a, str) and a for a in aliases):
        raise CatalogError(f"{where}: 'aliases' must be a list of file names")
    for value in [f.get("name"), f.get("archive"), *aliases]:
        if value is not None and (Path(value).name != value or value.startswith(".")):
            raise CatalogError(f"{where}: file names must be plain file names, got {value!r}")
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
