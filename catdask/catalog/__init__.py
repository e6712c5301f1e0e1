"""The data-set catalog: where each benchmark comes from and how to parse it.

``catalog.json`` (shipped in this package; ``data/catalog.json`` of the repository links to it)
lists every data set by name with

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

Modules, one job each:

- :mod:`~catdask.catalog.entries`: the schema, :func:`load_catalog`, :func:`get_entry`;
- :mod:`~catdask.catalog.sources`: find files locally first (:func:`locate_sources`), download
  only on request (:func:`fetch_sources`, HTTPS only, sha256 checked when known);
- :mod:`~catdask.catalog.tables`: one file -> float64 features and labels with pandas' C parser
  (one threaded read up to 256 MiB, bounded chunks beyond); refuses non-regular, oversized,
  binary and non-UTF-8 files;
- :mod:`~catdask.catalog.lines`: the line-level layer that reads the header and names the line
  and column of any problem;
- :mod:`~catdask.catalog.assembly`: files -> ``(X, y, label_names, provenance)``
  (:func:`parse_dataset`, :func:`parse_table`), checked against the catalog.

Parsing handles the quirks recorded in ``../shared/data/uci/*/SOURCE.md``: CRLF, trailing
spaces, doubled tabs, header lines, a missing final newline; everything else wrong is a
:class:`~catdask.errors.ParseError` naming file, line and problem.
"""

from .assembly import check_label_types, parse_dataset, parse_features, parse_table
from .entries import DEFAULT_CATALOG, CatalogEntry, get_entry, load_catalog
from .sources import fetch_sources, locate_sources, obtain_sources, source_folders
from .tables import MAX_TABLE_BYTES_ENV

__all__ = [
    "CatalogEntry",
    "load_catalog",
    "get_entry",
    "locate_sources",
    "source_folders",
    "fetch_sources",
    "obtain_sources",
    "parse_dataset",
    "parse_table",
    "parse_features",
    "check_label_types",
    "DEFAULT_CATALOG",
    "MAX_TABLE_BYTES_ENV",
]
