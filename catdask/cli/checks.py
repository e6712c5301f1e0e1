"""Argument checks that run before Prefect or Dask is imported, so a mistake is reported in
well under a second: data-set names against the catalog and the store (with a "did you
mean"), model names against the registry, the store folder the user named, options that do
not apply to the chosen method or mode, and whether a catalog set's source files can be found.
The range checks of single values are argparse types, in :mod:`.argtypes`.
"""

from __future__ import annotations

import difflib
from pathlib import Path

from catdask import settings
from catdask.method_names import CERTIFY_LEVELS, KERNEL_METHODS, QUADRATIC_METHODS

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


# ----------------------------------------------------------------------------- the store
def store_choice(store):
    """The store (:class:`~catdask.store.root.StoreRoot`) and who chose it: ``"--store"``,
    ``"$CATDASK_STORE"``, or None for the default ``./catdask-store``."""
    from catdask.store.root import open_store

    chosen_by = ("--store" if store is not None
                 else f"${settings.STORE}" if settings.STORE.get() else None)
    return open_store(store), chosen_by


def require_store(store):
    """The store (a :class:`~catdask.store.root.StoreRoot`); it must exist when the user named it
    (a typo would otherwise show an empty store). The default folder may be missing: the commands
    say so (:func:`missing_store_note`). Raises :class:`CliError`: exit code 3, naming the store
    and the option or variable that chose it.
    """
    root, chosen_by = store_choice(store)
    if chosen_by and not root.exists():
        raise CliError(f"store {root} does not exist (chosen by {chosen_by}; check the "
                       f"{'path' if root.path else 'URL'}, or run `catdask ingest` there first "
                       "to create it)")
    return root


def check_store_creatable(store):
    """The store of a command that writes it (``ingest``): a folder that exists, or whose nearest
    existing parent is a folder this process may write in; an object store answers a probe write
    (checked before Prefect starts). Raises :class:`CliError`: exit code 3, naming the store, the
    path in the way and who chose the store.
    """
    import os

    store_root, chosen_by = store_choice(store)  # a file: open_store says so
    root = store_root.path
    if root is None:  # an object store: a request now says what is wrong, in one line
        store_root.check_writable()
        return store_root
    if root.exists():
        return store_root
    check = f"check {chosen_by}" if chosen_by else "the default ./catdask-store; pass --store"
    parent = root.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise CliError(f"cannot create the store {root}: {parent} is a file, not a folder "
                       f"({check})")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise CliError(f"cannot create the store {root}: no permission to write in {parent} "
                       f"({check})")
    return store_root


def missing_store_note(root) -> str:
    """``" (it does not exist yet; ...)"`` when ``root`` is missing, a note when it is a folder
    that holds no store (a mistyped ``--store`` that names an existing folder: was only "no
    models in /home/me"), else ``""``."""
    if not root.exists():
        return " (it does not exist yet; `catdask ingest` creates it)"
    folder = root.path
    if folder is not None and not (folder / "datasets").is_dir() and not (folder / "models").is_dir():
        return (" (no catdask store there yet: the folder holds no datasets/ or models/; check "
                "--store / $CATDASK_STORE, or `catdask ingest` creates one)")
    return ""


def _refuse_a_file_for_a_name(name: str, kind: str, fix: str) -> None:
    """A path to an existing file given where a stored name goes (``train data.csv``,
    ``predict new.csv MODEL``): say what the name is and how to get one, not only that a name
    holds no '/'."""
    if ("/" in name or "\\" in name or "." in name) and Path(name).is_file():
        raise CliError(f"Invalid {kind} name {name!r}: it is a file, not a name; {fix}")


def check_registered_model(store, name: str) -> None:
    """``name`` must be a safe name and a registered model (``models``, ``plot``)."""
    from catdask.names import validate_name
    from catdask.store import registered_model_names

    _refuse_a_file_for_a_name(name, "model", "give a registered model's name (`catdask models "
                              "list`); a file to predict on comes after it (`catdask predict "
                              "MODEL FILE`)")
    validate_name(name, kind="model")
    known = registered_model_names(store)
    if name in known:
        return
    root = store_choice(store)[0]
    if not root.exists():
        raise CliError(f"No model {name!r}: the store {root} does not exist yet (`catdask "
                       "ingest` creates it, `catdask train` registers models in it)")
    from catdask.store.lease import models_in_training

    training = [t for t in models_in_training(store) if t["model"] == name]
    if training:  # its first version is on its way
        raise CliError(f"No model {name!r} in the registry at {root} yet: "
                       f"{training[0].get('holder') or 'a run'} is training it now (since "
                       f"{training[0].get('since')})")
    raise CliError(f"No model {name!r} in the registry at {root}{did_you_mean(name, known)} "
                   f"(registered: {', '.join(known) or 'none'})")


# ----------------------------------------------------------------------------- data sets
def check_catalog_names(names) -> None:
    """Every name must be a catalog entry (``ingest``)."""
    known = catalog_names()
    for name in names:
        if name not in known:
            raise CliError(f"No data set {name!r} in the catalog{did_you_mean(name, known)} "
                           f"(known: {', '.join(known)}; for your own table use "
                           "`catdask ingest --file FILE --name NAME --label-column COLUMN`)")


def check_stored_dataset(store, name: str) -> None:
    """``name`` must be a safe name and a data set in the store (``train``, ``plot``,
    ``predict``)."""
    from catdask.names import validate_name
    from catdask.store.root import open_store

    stored = stored_names(store)
    stem = Path(name).stem
    _refuse_a_file_for_a_name(name, "data set", (
        f"the store holds a data set {stem!r} (ingested from a file of that name?): use "
        f"{stem!r}" if stem in stored else f"ingest it first (`catdask ingest {name} "
        f"--label-column COLUMN`), then use its name ({stem!r})"))
    validate_name(name, kind="data set")
    if name in stored:
        return
    hint = did_you_mean(name, stored)
    if not hint and name in catalog_names():
        hint = f"; it is in the catalog: `catdask ingest {name}` first"
    elif not hint:
        close = difflib.get_close_matches(name, catalog_names(), n=1, cutoff=0.6)
        if close:
            hint = f"; did you mean {close[0]!r}? (`catdask ingest {close[0]}` first)"
    raise CliError(f"No data set {name!r} in store {open_store(store).url} "
                   f"(stored: {', '.join(stored) or 'none'}){hint}")


def check_method_fits_dataset(store, name: str, method: str) -> None:
    """``train``: a linear method needs K <= D, a kernel method memory for K x K per class, checked
    on the stored data set's metadata before Prefect or Dask starts (the flow checks the same,
    :meth:`catdask.pipeline.ModelSpec.check_data_shape`).
    Raises :class:`CliError`: exit code 3, naming both numbers and the kernel methods.
    """
    from catdask.store import list_datasets

    info = next((d for d in list_datasets(store) if d.name == name), None)
    if info is None or info.n_features is None or info.n_classes is None:
        return  # a damaged entry: reading it reports that
    if method in KERNEL_METHODS:
        _check_kernel_fit_memory(name, method, info)
    elif info.n_classes > info.n_features:
        raise CliError(f"--method {method} needs at most as many classes as features, and data "
                       f"set {name!r} has {info.n_classes} classes and {info.n_features} "
                       f"feature{'s' * (info.n_features != 1)} (K orthonormal axes do not fit "
                       f"in D dimensions); use --method {' or '.join(KERNEL_METHODS)}")


def _check_kernel_fit_memory(name: str, method: str, info) -> None:
    """A kernel fit holds a K x K covariance per class: refused here, from the metadata, when
    that exceeds memory (10,000 classes: terabytes), rather than after the cluster started."""
    if info.n_samples is None:
        return
    from catdask.estimators.classify import check_class_count_memory

    try:
        check_class_count_memory(info.n_samples, info.n_classes)
    except ValueError as exc:
        raise CliError(f"--method {method} on data set {name!r}: {exc}") from None


def check_evaluation_datasets(store, names) -> None:
    """``evaluate`` reads its data sets from the store: a named store must exist, every name given
    must be stored (a set not ingested would be skipped and the run succeed with empty tables), and
    without names the store must hold a data set.
    Raises :class:`CliError`: exit code 3, naming the store and the data set, and the ``ingest`` to
    run.
    """
    root = require_store(store)
    for name in names:
        check_stored_dataset(store, name)
    if not names and not stored_names(store):
        state = "holds no data set" if root.exists() else "does not exist yet"
        raise CliError(f"nothing to evaluate: store {root} {state}; `catdask ingest iris wine` "
                       "(or `catdask ingest --all`) first")


def check_source_dir(source_dir) -> None:
    """A ``--source-dir`` given must be a folder (a typo would look like missing files)."""
    if source_dir and not Path(source_dir).expanduser().is_dir():
        raise CliError(f"argument --source-dir: {source_dir} is not a folder")


def check_sources_available(names, source_dir, store, download: bool) -> None:
    """The original files of every catalog set in ``names`` must be found locally (or in the store's
    download cache), unless ``--download`` allows fetching them; phrased with the CLI's flags.
    Raises :class:`CliError`: exit code 3, naming the files, the folders searched and the ways to
    provide them.
    """
    check_source_dir(source_dir)
    if download:
        return
    for name in names:
        missing = _missing_sources(name, source_dir, store)
        if missing:
            raise CliError(missing)


def _missing_sources(name: str, source_dir, store) -> str:
    """``""`` when the files of catalog set ``name`` are available, else what to do."""
    from catdask.catalog import fetch_sources, get_entry, locate_sources, source_folders
    from catdask.catalog.sources import DOWNLOAD_CACHE_DIR, SOURCE_ENV
    from catdask.errors import SourceNotFoundError

    entry = get_entry(name)
    if entry.kind == "sklearn":
        return ""
    cache = store_choice(store)[0].local_folder / DOWNLOAD_CACHE_DIR
    try:  # checksums are the ingest's to check (it says which file differs)
        locate_sources(entry, source_dir, verify=False)
        return ""
    except SourceNotFoundError:
        pass
    try:
        fetch_sources(entry, cache, allow_download=False)
        return ""
    except SourceNotFoundError:
        pass
    files = ", ".join(f["name"] for f in entry.files)
    searched = ", ".join(str(d) for d in [*source_folders(name, source_dir), cache / name])
    return (f"the original files of {name!r} ({files}) were not found in: {searched}; put them "
            f"in a folder given as --source-dir DIR or ${SOURCE_ENV}, or pass --download to "
            "fetch them over HTTPS")


# ----------------------------------------------------------------------------- options
#: ``catdask train`` options that only some methods use; the others would silently ignore them.


def _given_method_options(args) -> list[tuple[str, tuple[str, ...], str]]:
    """``(option as typed, methods it applies to, why)`` for each method-specific option the
    user gave."""
    given = []
    if args.gamma is not None:
        given.append(("--gamma", KERNEL_METHODS, "the RBF kernel's width"))
    if args.certify != CERTIFY_LEVELS[0]:  # the default applies to every method (CAS: not applicable)
        given.append((f"--certify {args.certify}", QUADRATIC_METHODS,
                      "CAS has no global-optimality test"))
    if getattr(args, "max_gap", None) is not None:
        given.append(("--max-gap", QUADRATIC_METHODS, "CAS has no optimality gap"))
    if getattr(args, "device", None) is not None:
        given.append(("--device", KERNEL_METHODS, "the linear methods have no Gram products "
                                                  "to run on a device"))
    return given


def check_method_options(args) -> None:
    """Every method-specific ``train`` option given must apply to ``--method``.
    Raises :class:`CliError`: exit code 2, naming the option and the methods it applies to.
    """
    for option, methods, why in _given_method_options(args):
        if args.method not in methods:
            raise usage_error(f"argument {option}: applies only to --method "
                              f"{' or '.join(methods)} ({why}), not to {args.method}")


def check_certify_level(certify: str) -> None:
    """``train --certify moment`` needs SCS (the ``sdp`` extra); without it the model would be
    rejected on its SDP-dual gap alone.
    Raises :class:`CliError`: exit code 3, with the install command.
    """
    import importlib.util

    if certify == "moment" and importlib.util.find_spec("scs") is None:
        raise CliError("argument --certify moment: the moment relaxation needs SCS, which is not "
                       "installed here: pip install 'catdask[sdp]'")


#: ``catdask ingest`` options by mode: a table (``--file``) or catalog sets (names, ``--all``).
FILE_ONLY_OPTIONS = {"name": "--name", "label_column": "--label-column",
                     "feature_columns": "--feature-columns", "delimiter": "--delimiter"}
CATALOG_ONLY_OPTIONS = {"source_dir": "--source-dir", "download": "--download"}


def check_ingest_mode(args) -> None:
    """``ingest`` takes catalog names (or ``--all``) or one ``--file``, each with its own
    options; a name beside ``--file`` would be silently ignored. One name that is a file, not a
    catalog set, is taken as ``--file``.
    Raises :class:`CliError`: exit code 2.
    """
    if not args.file and not args.all and len(args.names) == 1:
        _file_named_as_a_set(args)
    if args.file and (args.names or args.all):
        raise usage_error("give catalog names (or --all) or --file, not both")
    wrong = CATALOG_ONLY_OPTIONS if args.file else FILE_ONLY_OPTIONS
    for dest, option in wrong.items():
        if getattr(args, dest) not in (None, False):
            raise usage_error(f"argument {option}: applies only to "
                              f"{'catalog data sets, not to --file' if args.file else '--file'}")


#: What a table file's name ends with: such a name is a file even where none exists, so that a
#: mistyped file name is reported as one (a data-set name may hold dots too).
TABLE_SUFFIXES = (".csv", ".tsv", ".txt", ".data", ".dat")


def names_a_file(text: str) -> bool:
    """Whether a command's data argument names a table file rather than a data set."""
    return (Path(text).is_file() or "/" in text
            or Path(text).suffix.lower() in TABLE_SUFFIXES)


def _file_named_as_a_set(args) -> None:
    """``catdask ingest my.csv`` means ``--file my.csv``; a name with a folder or an extension
    that is no file is a mistyped path, not a catalog set."""
    name = args.names[0]
    if name in catalog_names():
        return
    path = Path(name)
    if path.is_file():
        args.file, args.names = name, []
    elif names_a_file(name):
        folder = path.parent
        files = [p.name for p in folder.iterdir() if p.is_file()] if folder.is_dir() else []
        raise CliError(f"{name}: no such file{did_you_mean(path.name, files)} (and no catalog "
                       "data set of that name)")


def check_model_name(name: str | None) -> None:
    """An explicit ``--name`` must be non-empty and safe as a directory name."""
    if name is None:
        return
    if not name.strip():
        raise usage_error("argument --name: the model name is empty (leave --name out for "
                          "the default DATASET-METHOD)")
    from catdask.names import validate_name

    validate_name(name, kind="model")


def file_dataset_name(path, name: str | None) -> str:
    """The data-set name of ``ingest --file``: ``--name``, else the file's name without its
    extension when that is a valid name. A catalog data set's name is refused (the table would pass
    for it).
    Raises :class:`CliError`: exit code 2.
    """
    from catdask.names import is_valid_name

    given = name is not None
    if not given:
        name = Path(path).stem
        if not is_valid_name(name):
            raise usage_error(f"--file {path}: {name!r} is not a data-set name; pass --name NAME")
    if name in catalog_names():
        whose = f"--name {name}" if given else f"--file {path}: its name {name!r}"
        raise usage_error(f"{whose} is a catalog data set's name; give your table another "
                          f"--name (the catalog's {name}: `catdask ingest {name}`)")
    return name


def check_table_file(path, name: str) -> None:
    """``ingest --file``: a safe data-set name and a regular, readable file, checked before
    the ingest pipeline (pandas, scikit-learn, zarr: seconds of imports) is loaded.
    Raises the same errors as the ingest itself (:class:`catdask.errors.ParseError`,
    :class:`catdask.errors.InvalidNameError`), one line each."""
    from catdask.names import validate_name

    validate_name(name, kind="data set")
    check_readable_file(path)


def check_readable_file(path) -> None:
    """A regular, readable file (``ingest --file``, ``predict --file``), with the table
    reader's own refusal, word for word, before its imports."""
    from catdask.catalog.tables import _open_regular

    _open_regular(Path(path)).close()
