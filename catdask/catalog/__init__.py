"""The data-set catalog: where each benchmark comes from and how to parse it.

``catalog.json`` (shipped in this package) lists every data set by name with its ``source``
(a scikit-learn loader, or the original files with URL, sha256 and, inside a zip archive,
``archive`` and ``member``; several files are concatenated in order), its ``parse`` spec
(``format``, ``delimiter``, ``skip_lines``, ``header``, ``label_column``, ``feature_columns``,
``n_columns``, ``label_type``, ``label_names``) and the ``expected`` counts a parse must match
(:class:`~catdask.errors.ParseError` otherwise). The schema is validated in :mod:`.entries`.

:mod:`.sources` finds files locally first and downloads only on request (HTTPS, sha256 checked);
:mod:`.tables` parses one file with pandas' C parser, refusing what is not a text table;
:mod:`.lines` names the line and column of any problem; :mod:`.assembly` assembles and checks a
data set (:func:`parse_dataset`, :func:`parse_table`).
"""

from .assembly import check_label_types, parse_dataset, parse_features, parse_table
from .entries import DEFAULT_CATALOG, CatalogEntry, get_entry, load_catalog
from .sources import fetch_sources, locate_sources, obtain_sources, source_folders
from .tables import MAX_TABLE_BYTES_ENV

__all__ = ["CatalogEntry", "load_catalog", "get_entry", "locate_sources", "source_folders",
           "fetch_sources", "obtain_sources", "parse_dataset", "parse_table", "parse_features",
           "check_label_types", "DEFAULT_CATALOG", "MAX_TABLE_BYTES_ENV"]
