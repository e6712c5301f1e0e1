"""The data-set catalog: where each benchmark comes from and how to parse it."""

from .assembly import check_label_types, parse_dataset, parse_features, parse_table
from .entries import DEFAULT_CATALOG, CatalogEntry, get_entry, load_catalog
from .sources import fetch_sources, locate_sources, obtain_sources, source_folders
from .tables import MAX_TABLE_BYTES_ENV

__all__ = ["CatalogEntry", "load_catalog", "get_entry", "locate_sources", "source_folders",
           "fetch_sources", "obtain_sources", "parse_dataset", "parse_table", "parse_features",
           "check_label_types", "DEFAULT_CATALOG", "MAX_TABLE_BYTES_ENV"]
