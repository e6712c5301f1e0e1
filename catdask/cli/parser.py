"""The ``catdask`` argument parser: commands, options, help texts and their defaults."""

from __future__ import annotations

import argparse
import sys

from .argtypes import (
    non_negative_float,
    non_negative_int,
    port_number,
    positive_float,
    restart_count,
    split_count,
)
from .checks import did_you_mean
from catdask.method_names import (
    CERTIFY_LEVELS,
    KERNEL_METHODS,
    MAX_RESTARTS,
    METHOD_NAMES,
    QUADRATIC_METHODS,
)

from .exits import EXIT_CODES_HELP, EXIT_USAGE

#: The ``--method`` choices: the method registry's names (:mod:`catdask.method_names`).
METHODS = list(METHOD_NAMES)
_PAPER_NAMES = ", ".join(e.paper_name for e in METHOD_NAMES.values())
DESCRIPTION = (f"catdask: category-space supervised dimensionality reduction ({_PAPER_NAMES}) "
               "with certified fits, a zarr store and Prefect flows.")
STORE_HELP = "a folder or s3://bucket/prefix (default: $CATDASK_STORE, else ./catdask-store)"
SOURCE_DIR_HELP = ("folder with the original UCI files, flat or one subfolder per data set "
                   "(default: $CATDASK_SOURCE_DIR; in a checkout, also ../shared/data/uci "
                   "beside it)")


class _HelpFormatter(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    """Shows each option's default, except where it is None or a flag's False, or where the
    help text says it already, and keeps the exit-code table's line breaks."""

    def _get_help_string(self, action):
        if (action.default is None or action.default is False
                or action.default is argparse.SUPPRESS or "(default:" in (action.help or "")):
            return action.help
        return super()._get_help_string(action)


class _Parser(argparse.ArgumentParser):
    """Errors as one line, ``catdask train: error: ...``, without the usage block; options
    only by their full names (``--restart 3`` is an error, not ``--restarts 3``: a typo must
    not pick an option silently)."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message):
        print(f"{self.prog}: error: {message} (see `{self.prog} --help`)", file=sys.stderr)
        raise SystemExit(EXIT_USAGE)

    def parse_args(self, args=None, namespace=None):
        """As argparse, but an unknown option is reported by the command it was given to
        (``catdask train: error: unrecognized arguments: --restart 3``), whose ``--help``
        lists the right ones; argparse reports it as the top-level parser's."""
        args = sys.argv[1:] if args is None else [str(a) for a in args]
        self._check_leading_options(args)
        namespace, extras = self.parse_known_args(args, namespace)
        if extras:
            command = self._innermost_command(namespace)
            options = [o for a in command._actions for o in a.option_strings if o.startswith("--")]
            hints = [did_you_mean(e.split("=", 1)[0], options) for e in extras
                     if e.startswith("--")]
            command.error("unrecognized arguments: " + " ".join(extras)
                          + next((h for h in hints if h), ""))
        return namespace

    def _check_leading_options(self, args):
        """Options before the command must be this parser's own (``catdask --stroe x models
        list`` must not take ``x`` for the command)."""
        known = {o: a for a in self._actions for o in a.option_strings}
        i = 0
        while i < len(args) and args[i].startswith("-") and args[i] != "--":
            name = args[i].split("=", 1)[0]
            action = known.get(name)
            if action is None:
                options = [o for o in known if o.startswith("--")]
                self.error(f"unrecognized arguments: {args[i]}"
                           + (did_you_mean(name, options) if name.startswith("--") else ""))
            else:
                i += 1 if "=" in args[i] or action.nargs == 0 else 2

    def _check_value(self, action, value):
        """As argparse, plus the closest choice for a misspelt one (``catdask trian``: "did
        you mean 'train'?"; argparse suggests only from Python 3.14, and only when asked)."""
        try:
            super()._check_value(action, value)
        except argparse.ArgumentError as exc:
            hint = did_you_mean(str(value), [str(c) for c in action.choices or ()])
            if not hint or "did you mean" in str(exc):
                raise
            raise argparse.ArgumentError(action, exc.message + hint) from None

    def _innermost_command(self, namespace):
        parser = self
        while True:
            chosen = [a.choices.get(getattr(namespace, a.dest, None))
                      for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
            chosen = [c for c in chosen if c is not None]
            if not chosen:
                return parser
            parser = chosen[0]


def _common(s, verbose_default=argparse.SUPPRESS):
    # Accepted before and after the command; SUPPRESS keeps a value given before the command
    # when it is not repeated after it.
    s.add_argument("--store", default=argparse.SUPPRESS if verbose_default is argparse.SUPPRESS
                   else None, help=STORE_HELP)
    s.add_argument("-v", "--verbose", "--debug", dest="verbose", action="store_true",
                   default=verbose_default,
                   help="log details (Prefect, Dask) and show tracebacks of errors")


def _add(sub, name, help, **kwargs):
    return sub.add_parser(name, help=help, description=help[:1].upper() + help[1:] + ".",
                          formatter_class=_HelpFormatter, **kwargs)


def _ingest(sub):
    s = _add(sub, "ingest", "ingest catalog data sets (or your own table) into the store")
    s.add_argument("names", nargs="*", help="catalog data sets (see `catdask datasets`)")
    s.add_argument("--all", action="store_true", help="ingest every catalog data set")
    s.add_argument("--source-dir", help=SOURCE_DIR_HELP)
    s.add_argument("--download", action="store_true",
                   help="download the original files over HTTPS when they are not found "
                        "locally (kept in <store>/.downloads)")
    s.add_argument("--replace", action="store_true",
                   help="replace a stored data set of the same name whose content differs")
    s.add_argument("--file", help="a CSV or whitespace table to ingest instead of a catalog set")
    s.add_argument("--name", help="data-set name for --file (default: the file's name "
                                  "without its extension)")
    s.add_argument("--label-column", help="label column (name or 0-based index) for --file")
    s.add_argument("--feature-columns", metavar="COLUMNS",
                   help="with --file: the feature columns, comma-separated names or 0-based "
                        "indices (default: every column but the label)")
    s.add_argument("--delimiter", help="column delimiter for --file (default: detected)")
    return s


def _method_help() -> str:
    """``"CQS/CAS (linear) or their kernel versions K-CQS/K-CAS"``, from the registry."""
    linear = "/".join(e.paper_name for e in METHOD_NAMES.values() if not e.kernel)
    kernel = "/".join(e.paper_name for e in METHOD_NAMES.values() if e.kernel)
    return f"{linear} (linear) or their kernel versions {kernel}"


_METHOD_HELP = _method_help()


def _train(sub):
    s = _add(sub, "train", "fit with certified restarts and register the best model")
    s.add_argument("dataset", help="a data set in the store (see `catdask datasets`)")
    s.add_argument("--method", default=METHODS[0], choices=METHODS,
                   help=_METHOD_HELP)
    s.add_argument("--origin", choices=["global", "class"],
                   help="origin of the category space (default: the library's, global)")
    s.add_argument("--restarts", type=restart_count,
                   help=f"random restarts, 1 to {MAX_RESTARTS}, run as one batch (default: the "
                        "library's, 5)")
    s.add_argument("--gamma", type=positive_float,
                   help=f"RBF kernel gamma > 0; {'/'.join(KERNEL_METHODS)} only (default: the library's, "
                        "0.05 / n_features)")
    s.add_argument("--no-standardise", "--no-standardize", action="store_true",
                   help="fit on the raw features instead of standardised ones")
    s.add_argument("--seed", type=non_negative_int, default=0, help="random seed of the restarts")
    s.add_argument("--name", help="model name in the registry (default: DATASET-METHOD, and "
                                  "DATASET-METHOD-class for --origin class)")
    s.add_argument("--scheduler", help="Dask scheduler address, e.g. tcp://10.0.0.5:8786 "
                                       "(default: $CATDASK_SCHEDULER, else a local cluster)")
    s.add_argument("--device",
                   help=f"run the Gram products with PyTorch on this device, e.g. cuda, cuda:1 "
                        f"or cpu; {'/'.join(KERNEL_METHODS)} only, needs the gpu extra: on the "
                        "Dask cluster's GPU workers (--resources GPU=1) when it has some, else "
                        "in this process on the data set read into memory (default: no "
                        "PyTorch, the CPU or the Dask workers)")
    s.add_argument("--certify", choices=CERTIFY_LEVELS, default=CERTIFY_LEVELS[0],
                   help=f"strongest global-optimality test; {'/'.join(QUADRATIC_METHODS)} only "
                        "(CAS has none): the "
                        "SDP dual, or also the level-2 moment relaxation when the dual is not "
                        "tight (slower; needs the sdp extra)")
    s.add_argument("--max-gap", type=non_negative_float, metavar="GAP",
                   help="also register a CQS / K-CQS model that is not certified when its proved "
                        "relative optimality gap (upper bound - f) / f is at most GAP, e.g. 1e-4 "
                        "(recorded as gap-within-tolerance; default: certified models only)")
    s.add_argument("--allow-uncertified", action="store_true",
                   help="register a CQS / K-CQS model even if it cannot be certified (marked so); "
                        "CAS / K-CAS have no optimality test and are registered marked so")
    s.add_argument("--run-key", help="idempotency key for the registration "
                                     "(default: the flow run's id)")
    s.add_argument("--refit", action="store_true",
                   help="fit even when a version (or a rejected fit) of this data, spec and "
                        "catdask is stored (default: reuse it, no fit)")
    s.add_argument("--replace-spec", action="store_true",
                   help="register under --name although the model's latest version has another "
                        "spec (method, origin, gamma, ...); `predict NAME` then uses the new "
                        "one (default: refused, naming both specs)")
    return s


def _evaluate(sub):
    s = _add(sub, "evaluate", "the paper's protocol on stored data sets")
    s.add_argument("datasets", nargs="*", help="data sets in the store (`catdask ingest` them "
                                               "first; default: every stored paper data set)")
    s.add_argument("--splits", type=split_count, default=10, help="cross-validation splits")
    s.add_argument("--quick", action="store_true", help="two data sets, two splits")
    s.add_argument("--out", help="folder for the result tables (default: "
                                 "<store>/evaluations/<UTC time>)")
    return s


def _store_commands(sub):
    s = _add(sub, "datasets", "catalog and stored data sets")
    s = _add(sub, "check", "report every problem of the store: checksums, pointers, crash "
                           "leftovers, stray files, models that do not load, stale lineage; "
                           "exit 3 if the store is not whole")
    s.add_argument("--cleanup", action="store_true",
                   help="first remove temporaries of crashed writers and redundant snapshots, "
                        "and re-point a name whose current snapshot is damaged at the newest "
                        "snapshot that verifies (never deletes unverified data)")
    s.add_argument("--older-than", type=non_negative_float, default=0.0, metavar="SECONDS",
                   help="with --cleanup: only temporaries at least this old (running writers "
                        "are protected by their locks anyway)")
    s = _add(sub, "gc", "remove data-set snapshots no model version and no reader refers to")
    s.add_argument("--dry-run", action="store_true", help="only list what would be removed")
    s.add_argument("--keep-last", type=non_negative_int, default=0, metavar="N",
                   help="also keep the N snapshots before the current one")
    s = _add(sub, "models", "list, show or compare registered models (alone: list)")
    # Alone, `catdask models` lists, as `catdask datasets` does.
    msub = s.add_subparsers(dest="models_cmd", required=False, metavar="{list,show,compare}")
    s.set_defaults(name=None)  # what `models list` without NAME has
    m = _add(msub, "list", "registered model versions")
    m.add_argument("name", nargs="?", help="only this model (default: every model)")
    m = _add(msub, "show", "one model version: status, certificate, restarts, metrics")
    m.add_argument("model", help="NAME or NAME:VERSION (default version: the latest)")
    m.add_argument("--json", action="store_true", help="print the whole metadata as JSON")
    m = _add(msub, "compare", "two versions of one model side by side")
    m.add_argument("versions", nargs="+", metavar="MODEL",
                   help="NAME:V1 NAME:V2, or NAME V1 V2")
    m.add_argument("--json", action="store_true", help="print the comparison as JSON")
    s = _add(sub, "plot", "category-space plot of a registered model")
    s.add_argument("model", help="NAME or NAME:VERSION (default version: the latest)")
    s.add_argument("--dataset", help="data set to plot (default: the one it was trained on)")
    s.add_argument("--out", help="image file, .png, .pdf or .svg (default: NAME-vVERSION.png)")
    s = _add(sub, "predict", "predicted classes and category-space coordinates of a "
                             "registered model on data, as CSV")
    s.add_argument("model", help="NAME or NAME:VERSION (default version: the latest)")
    s.add_argument("data", nargs="?", help="a table file or a stored data set: the same as "
                                           "--file FILE or --dataset NAME")
    s.add_argument("--dataset", help="stored data set to predict on (default: the snapshot the "
                                     "model was trained on)")
    s.add_argument("--file", help="a CSV or whitespace table of features to predict on, "
                                  "instead of a stored data set")
    s.add_argument("--label-column", help="with --file: a column of known labels (name or "
                                          "0-based index), not a feature; the accuracy is "
                                          "reported")
    s.add_argument("--delimiter", help="column delimiter for --file (default: detected)")
    s.add_argument("--out", help="CSV file to write (default: standard output)")
    s = _add(sub, "export", "a registered model to MLflow (a models-from-code pyfunc, no "
                            "pickle; needs the mlflow extra)")
    s.add_argument("model", help="NAME or NAME:VERSION (default version: the latest)")
    s.add_argument("--mlflow", required=True, metavar="URI",
                   help="MLflow tracking URI, e.g. http://127.0.0.1:5000")
    s.add_argument("--experiment", default="catdask", help="MLflow experiment (default: catdask)")
    s.add_argument("--registered-name", help="name in MLflow's model registry (default: NAME)")
    s.add_argument("--json", action="store_true", help="print what was exported as JSON")
    return msub


def _services(sub):
    s = _add(sub, "serve", "Prefect server + served deployments + local Dask cluster")
    s.add_argument("--host", default="127.0.0.1",
                   help="address the Prefect server (UI and API) binds to; beyond loopback "
                        "it needs PREFECT_SERVER_API_AUTH_STRING; the local Dask cluster always "
                        "binds 127.0.0.1")
    s.add_argument("--port", type=port_number, default=4200, help="Prefect UI/API port")
    s.add_argument("--dask-dashboard-port", type=port_number, default=8787,
                   help="the local Dask cluster's dashboard port (unused with --scheduler)")
    s.add_argument("--scheduler", help="Dask scheduler the served runs compute on (default: "
                                       "$CATDASK_SCHEDULER, else a local cluster started here)")
    s = _add(sub, "demo", "the main job end to end on the embedded defaults")
    s.add_argument("--source-dir", help=SOURCE_DIR_HELP)
    s.add_argument("--restarts", type=restart_count,
                   help=f"random restarts per fit, 1 to {MAX_RESTARTS} (default: the library's, 5)")
    s.add_argument("--scheduler", help="Dask scheduler address (default: $CATDASK_SCHEDULER, "
                                       "else a local cluster)")
    s.add_argument("--quick", action="store_true", help="iris and wine only")


def _version() -> str:
    """The installed package's version (read from its metadata: importing catdask would
    load the estimators)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("catdask")
    except PackageNotFoundError:
        return "0+unknown"


def build_parser() -> argparse.ArgumentParser:
    """The parser of ``catdask``; each subcommand's name is in ``args.command``."""
    p = _Parser(prog="catdask", description=DESCRIPTION, epilog=EXIT_CODES_HELP,
                formatter_class=_HelpFormatter)
    _common(p, verbose_default=False)
    p.add_argument("--version", action="version", version=f"catdask {_version()}",
                   help="print the installed version and exit")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)
    _ingest(sub)
    _train(sub)
    _evaluate(sub)
    msub = _store_commands(sub)
    _services(sub)
    for s in [*sub.choices.values(), *msub.choices.values()]:
        _common(s)
    return p
