"""Predictions of a registered model on new data, as a table (``catdask predict``)."""

from __future__ import annotations

import csv
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np


@dataclass
class Predictions:
    """What :func:`predict_table` computed: the ``header``, one array per column (``columns``, each
    of length ``n_samples``) and the ``accuracy`` against known labels (None without them).
    """

    header: list
    columns: list
    n_samples: int
    accuracy: float | None


def feature_names_of(dataset):
    """The feature names a stored data set recorded (a table's header, scikit-learn's
    ``feature_names``), or None."""
    names = (dataset.attrs.get("provenance") or {}).get("feature_names")
    return [str(n) for n in names] if names else None


def _listed(names, most=6):
    shown = ", ".join(map(str, names[:most]))
    return shown + (f", ... ({len(names)} in all)" if len(names) > most else "")


def align_features(X, names, expected, *, model_label, data):
    """``X``'s columns in the order of the model's training features (``expected``), matched by the
    names ``names`` (a file's header; either None: taken by position), so a header with the training
    features in another order is not predicted on mixed-up columns.
    Returns ``(X, note)``: ``X`` reordered where needed, and what was done, for the user (or None).
    Raises ``ValueError``, naming ``model_label`` and ``data``, when the header names some training
    features but not all, or others beside them."""
    if not names or not expected or list(names) == list(expected):
        return X, None
    names, expected = [str(n) for n in names], [str(n) for n in expected]
    known = set(expected)
    if not known & set(names):
        if len(names) != len(expected):  # the feature count's own error says it better
            return X, None
        return X, (f"the header of {data} ({_listed(names)}) names none of the features "
                   f"{model_label} was trained on ({_listed(expected)}): its columns are "
                   "taken in order")
    missing = [n for n in expected if n not in names]
    unknown = [n for n in names if n not in known]
    if missing or unknown or len(names) != len(expected):
        problems = ([f"missing {_listed(missing)}"] if missing else []) + (
            [f"not a training feature: {_listed(unknown)}"] if unknown else [])
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            problems.append(f"repeated: {_listed(repeated)}")
        raise ValueError(f"the header of {data} does not match the features {model_label} was "
                         f"trained on ({'; '.join(problems)}); give the columns "
                         f"{_listed(expected, most=len(expected))} (in any order with a header, "
                         "in this order without one)")
    order = [names.index(n) for n in expected]
    return (np.asarray(X)[:, order],
            f"the columns of {data} were taken by name, in the order {model_label} was trained "
            "on (the header lists them in another order)")


def _matches(predicted, names, truth):
    """Rows whose known label equals the predicted class, or its display name."""
    truth = np.asarray(truth).astype(str)
    hit = np.asarray(predicted).astype(str) == truth
    if names is not None:
        hit |= np.asarray(names).astype(str) == truth
    return hit


def predict_table(model, X, *, class_names=None, y=None):
    """Predicted classes and category-space coordinates of ``model`` on ``X``, as
    :class:`Predictions`. ``class_names`` (a stored data set's ``label_names``, e.g. ``{0:
    "setosa"}``) adds a ``class_name`` column and names the axes; known labels ``y`` (classes or
    display names) add a ``label`` column and the accuracy.
    """
    X = np.asarray(X, dtype=float)
    n_samples = X.shape[0]
    names_in = getattr(model, "feature_names_in_", None)
    if names_in is not None:  # fitted on a DataFrame: its names, else a warning per call
        import pandas as pd

        X = pd.DataFrame(X, columns=names_in)
    predicted = np.asarray(model.predict(X))
    coords = np.asarray(model.transform(X))
    classes = list(model.classes_)
    names = None
    if class_names:
        names = np.array([str(class_names.get(c, c)) for c in classes], dtype=object)
        axis_names = list(names)
        codes = np.searchsorted(np.asarray(classes), predicted)
        predicted_names = names[codes]
    else:
        axis_names = [str(c) for c in classes]
        predicted_names = None
    header, columns = ["prediction"], [predicted]
    if predicted_names is not None:
        header.append("class_name")
        columns.append(predicted_names)
    accuracy = None
    if y is not None:
        y = np.asarray(y)
        header.append("label")
        columns.append(y)
        accuracy = float(np.mean(_matches(predicted, predicted_names, y))) if len(y) else None
    header += [f"axis_{name}" for name in axis_names]
    columns += [coords[:, k] for k in range(coords.shape[1])]
    return Predictions(header, columns, int(n_samples), accuracy)


def _write_rows(stream, table: Predictions):
    writer = csv.writer(stream, lineterminator="\n")
    writer.writerow(table.header)
    # Floats as their shortest exact text (numpy's repr: reads back to the same value).
    formatted = [c.astype(str) if c.dtype.kind == "f" else c
                 for c in map(np.asarray, table.columns)]
    writer.writerows(zip(*formatted))


def write_predictions(table: Predictions, out=None):
    """Write ``table`` as CSV to ``out`` (a path; missing folders are made), or to standard
    output when ``out`` is None or ``"-"``. A file is written beside its final name and
    renamed into place."""
    if out is None or str(out) == "-":
        _write_rows(sys.stdout, table)
        sys.stdout.flush()
        return None
    out = Path(out)
    if out.is_dir():  # os.replace would name the temporary file in its error
        raise IsADirectoryError(f"{out} is a folder; give the file to write, e.g. "
                                f"{out / 'predictions.csv'}")
    out.parent.mkdir(parents=True, exist_ok=True)  # as the plots do
    fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent)
    try:
        # mkstemp makes the file 0600; a CSV of predictions gets what any new file gets here
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(fd, 0o666 & ~umask)
        with os.fdopen(fd, "w", newline="", encoding="utf-8") as stream:
            _write_rows(stream, table)
        os.replace(tmp, out)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return out
