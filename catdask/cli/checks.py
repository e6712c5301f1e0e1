"""Argument checks that run before Prefect or Dask is imported, so a mistake is reported in
well under a second: data-set names against the catalog and the store (with a "did you
mean"), model names, and the values argparse cannot range-check by type alone.
"""

from __future__ import annotations

import difflib
from pathlib import Path

from .exits import CliError, usage_error


def did_you_mean(name: str, known) -> str:
    """``"; did you mean 'iris'?"`` for the closest of ``known``, or ``""``."""
    close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.6)
    if not close and name.lower() in {k.lower() for k in known}:
        close = [k for k in known if k.lower() == name.lower()]
    return f"; did you mean {close[0]!r}?" if close else ""


def catalog_names() -> list[str]:
    """Names in the data-set catalog."""
    from catdask.catalog import load_catalog

    return sorted(load_catalog())


def stored_names(store) -> list[str]:
    """Names of the data sets in the store (none when the store does not exist yet)."""
    from catdask.store import list_datasets

    return sorted(d.name for d in list_datasets(store))


def check_catalog_names(names) -> None:
    """Every name must be a catalog entry (``ingest``)."""
    known = catalog_names()
    for name in names:
        if name not in known:
            raise CliError(f"No data set {name!r} in the catalog{did_you_mean(name, known)} "
                           f"(known: {', '.join(known)}; for your own table use "
                           "`catdask ingest --file FILE --name NAME --label-column COLUMN`)")


def check_stored_dataset(store, name: str) -> None:
    """``name`` must be a safe name and a data set in the store (``train``)."""
    from catdask.names import validate_name
    from catdask.store import resolve_store

    validate_name(name, kind="data set")
    stored = stored_names(store)
    if name in stored:
        return
    hint = did_you_mean(name, stored)
    if not hint and name in catalog_names():
        hint = f"; it is in the catalog: `catdask ingest {name}` first"
    elif not hint:
        close = difflib.get_close_matches(name, catalog_names(), n=1, cutoff=0.6)
        if close:
            hint = f"; did you mean {close[0]!r}? (`catdask ingest {close[0]}` first)"
    raise CliError(f"No data set {name!r} in store {resolve_store(store)} "
                   f"(stored: {', '.join(stored) or 'none'}){hint}")


def check_known_datasets(store, names) -> None:
    """Every name must be in the catalog or the store (``evaluate``)."""
    known = set(catalog_names()) | set(stored_names(store))
    for name in names:
        if name not in known:
            raise CliError(f"No data set {name!r} in the catalog or the store"
                           f"{did_you_mean(name, known)} (see `catdask datasets`)")


def check_model_name(name: str | None) -> None:
    """An explicit ``--name`` must be non-empty and safe as a directory name."""
    if name is None:
        return
    if not name.strip():
        raise usage_error("argument --name: the model name is empty (leave --name out for "
                          "the default DATASET-METHOD)")
    from catdask.names import validate_name

    validate_name(name, kind="model")


def check_table_file(path, name: str) -> None:
    """``ingest --file``: a safe data-set name and a regular, readable file, checked before
    the ingest pipeline (pandas, scikit-learn, zarr: seconds of imports) is loaded.

    Raises the same errors as the ingest itself (:class:`catdask.errors.ParseError`,
    :class:`catdask.errors.InvalidNameError`), one line each.
    """
    from catdask.catalog.tables import _open_regular  # the ingest's own refusal, word for word
    from catdask.names import validate_name

    validate_name(name, kind="data set")
    _open_regular(Path(path)).close()


# ----------------------------------------------------------------------------- argparse types
def _number(kind, text, minimum, strict):
    try:
        value = kind(text)
    except ValueError:
        raise ValueError(f"invalid {kind.__name__} value: {text!r}") from None
    if value != value or (value <= minimum if strict else value < minimum):
        bound = f"> {minimum:g}" if strict else f">= {minimum:g}"
        raise ValueError(f"must be {bound}, got {text}")
    return value


def _argtype(kind, minimum, strict=False):
    import argparse

    def parse(text):
        try:
            return _number(kind, text, minimum, strict)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    parse.__name__ = kind.__name__
    return parse


#: An integer >= 1 (restarts, data-set counts).
positive_int = _argtype(int, 1)
#: An integer >= 0 (random seeds, seconds).
non_negative_int = _argtype(int, 0)
#: A float > 0 (kernel gamma).
positive_float = _argtype(float, 0.0, strict=True)
#: A float >= 0 (ages in seconds).
non_negative_float = _argtype(float, 0.0)
#: Cross-validation splits: an integer >= 2.
split_count = _argtype(int, 2)
#: A TCP port.
port_number = _argtype(int, 0)
