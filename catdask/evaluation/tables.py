"""Tables of our accuracies beside the paper's: CSV, Markdown and JSON."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import math
import os
import re
from pathlib import Path

import numpy as np

from .compared_methods import paper_methods
from .paper_tables import PAPER_TABLES

DEFAULT_RESULTS_DIR = Path("docs") / "results"

#: Columns of the CSV tables, in order.
CSV_COLUMNS = ("table", "dataset", "n_classes", "method", "paper_column", "ours_mean", "ours_std",
               "n_splits", "paper", "diff", "preprocessing", "classifier", "n_samples",
               "n_features", "seconds_per_split", "convergence_warnings", "selected", "note")


def _pct(x):
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else round(100 * x, 2)


def _selected(res):
    """Compact summary of the hyper-parameters chosen across splits."""
    parts = []
    Cs = [s["C"] for s in res.splits if s.get("C") is not None]
    if Cs:
        vals, counts = np.unique(Cs, return_counts=True)
        parts.append("C: " + ", ".join(f"{v:g}x{c}" for v, c in zip(vals, counts)))
    gammas = [s["params"]["gamma"] for s in res.splits if "gamma" in s.get("params", {})]
    if gammas:
        parts.append(
            f"gamma: median {np.median(gammas):.3g} [{min(gammas):.3g}, {max(gammas):.3g}]"
        )
    return "; ".join(parts)


def result_rows(exp_result, paper_table=None):
    """One dict per (data set, method), keys :data:`CSV_COLUMNS`: ours, the paper's number (from
    ``paper_table``, default the published table of the experiment's key) and the difference.
    Skipped paper data sets get one row per method with the reason in ``note``.
    """
    exp = exp_result.experiment
    paper = PAPER_TABLES.get(exp.key) if paper_table is None else paper_table
    rows = []
    for res in exp_result.results:
        published = paper.value(res.dataset, res.paper_column) if paper else None
        mean, std = _pct(res.mean), _pct(res.std)
        note = res.note if not res.error else f"failed: {res.error}"
        if res.n_warnings:
            msgs = sorted({m for s in res.splits for m in s["warnings"]})
            note = (note + "; " if note else "") + f"warnings: {msgs[0]}" + (
                f" (+{len(msgs) - 1} more kinds)" if len(msgs) > 1 else "")
        rows.append(
            {
                "table": exp.key,
                "dataset": res.dataset,
                "n_classes": res.n_classes or (paper.n_classes.get(res.dataset) if paper else None),
                "method": res.method,
                "paper_column": res.paper_column,
                "ours_mean": mean,
                "ours_std": std,
                "n_splits": len(res.accuracies),
                "paper": published,
                "diff": None if mean is None or published is None else round(mean - published, 2),
                "preprocessing": res.preprocessing,
                "classifier": res.classifier,
                "n_samples": res.n_samples,
                "n_features": res.n_features,
                "seconds_per_split": None if math.isnan(res.seconds) else round(res.seconds, 3),
                "convergence_warnings": res.n_warnings,
                "selected": _selected(res),
                "note": note,
            }
        )
    methods = list(dict.fromkeys(r.method for r in exp_result.results)) or list(exp.methods)
    columns = {n: m.paper_column for n, m in paper_methods().items()}
    for dataset, reason in exp_result.skipped.items():
        for name in methods:
            col = columns.get(name)
            rows.append(
                {
                    **dict.fromkeys(CSV_COLUMNS),
                    "table": exp.key,
                    "dataset": dataset,
                    "n_classes": paper.n_classes.get(dataset) if paper else None,
                    "method": name,
                    "paper_column": col,
                    "n_splits": 0,
                    "paper": paper.value(dataset, col) if paper else None,
                    "preprocessing": exp.preprocessing,
                    "note": f"skipped: {reason}",
                }
            )
    return rows


def _fmt(x):
    return "—" if x is None else f"{x:.2f}"


def markdown_table(exp_result, paper_table=None):
    """The experiment as a Markdown section: settings line, then one row per data set x method."""
    exp = exp_result.experiment
    rows = result_rows(exp_result, paper_table)
    s = exp_result.settings
    lines = [
        f"### {exp.key.replace('table', 'Table ')}: {exp.title}",
        "",
        f"Preprocessing: **{exp.preprocessing}** (fitted on each training part). "
        f"Splits: {s.get('n_splits', '?')} stratified 2/3 train - 1/3 test (seed "
        f"{s.get('random_state', '?')}); hyper-parameters by {s.get('inner_folds', '?')}-fold "
        "stratified CV on the training part only. Accuracy in %, mean ± sample std over splits; "
        "Δ = ours − paper.",
        "",
    ]
    if exp.max_samples:
        lines += [f"Data sets larger than {exp.max_samples} rows are subsampled (stratified, "
                  "seeded) before splitting; see Note.", ""]
    extra = []
    if "tol" in s:
        extra.append(f"category-space tol {s['tol']:g}")
    if "n_restarts" in s:
        extra.append(f"restarts {s['n_restarts']} in the final refit"
                     + (f", {s['select_restarts']} inside the inner CV"
                        if s.get("select_restarts") not in (None, s["n_restarts"]) else ""))
    runs = s.get("runs") or []
    if len(runs) > 1:
        extra.append(f"wall time {s['seconds'] / 60:.1f} min in {len(runs)} runs of one process ("
                     + "; ".join(f"{', '.join(r['datasets'])}: {r['seconds'] / 60:.1f} min"
                                 for r in runs) + ")")
    elif "seconds" in s:
        extra.append(f"wall time {s['seconds'] / 60:.1f} min (one process)")
    if extra:
        lines += ["Settings: " + "; ".join(extra) + ".", ""]
    lines += [
        "| Data set (K) | Method | Paper column | Ours | Paper | Δ | Classifier | s/split | Note |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        ours = "—" if r["ours_mean"] is None else (
            f"{r['ours_mean']:.2f} ± {r['ours_std']:.2f}" if r["ours_std"] is not None
            else f"{r['ours_mean']:.2f}")
        diff = "—" if r["diff"] is None else f"{r['diff']:+.2f}"
        note = (r["note"] or "").replace("|", "/").replace("\n", " ")
        if note.startswith("skipped:"):
            # The full reason (where the files were looked for) is listed once under the table
            # and kept in the CSV/JSON; repeating it on every method's row buries the table.
            note = "skipped (reason below the table)"
        lines.append(
            f"| {r['dataset']} ({r['n_classes'] or '?'}) | {r['method']} | "
            f"{r['paper_column'] or '—'} | {ours} | {_fmt(r['paper'])} | {diff} | "
            f"{r['classifier'] or '—'} | {_fmt(r['seconds_per_split'])} | {note} |"
        )
    if exp_result.skipped:
        lines += ["", "Not run:"]
        lines += [f"- **{name}**: skipped: {reason}" for name, reason in exp_result.skipped.items()]
    return "\n".join(lines) + "\n"


def _jsonable(exp_result):
    return {
        "experiment": exp_result.experiment.key,
        "title": exp_result.experiment.title,
        "settings": exp_result.settings,
        "skipped": exp_result.skipped,
        "results": [_result_record(r) for r in exp_result.results],
    }


def _result_record(result):
    """A :class:`MethodResult` as JSON data, its long per-split list last."""
    record = dataclasses.asdict(result)
    record["accuracies"] = [float(a) for a in result.accuracies]
    record["splits"] = record.pop("splits")
    return record


def _repository_root():
    """The source checkout's root when running from one, else the working directory."""
    here = Path(__file__).resolve().parents[2]
    return here if (here / "pyproject.toml").exists() else Path.cwd()


# An absolute path: "/" + name characters, not preceded by a name character (so "1/3" is not).
_ABSOLUTE_PATH = re.compile(r"(?<![\w.~/-])/(?:[\w.+-]+/)*[\w.+-]*")


def repository_relative(text, root=None):
    """``text`` with every absolute path made relative to ``root`` (default: the source checkout's
    root, the working directory when installed): committed results must not name the machine they
    were made on. Paths inside ``root`` become ``docs/results/...``; paths beside it
    ``../shared/...``.
    """
    root = Path(root) if root is not None else _repository_root()

    def relative(match):
        path = match.group(0)
        if path == "/":
            return path
        return os.path.relpath(path, root).replace(os.sep, "/")

    return _ABSOLUTE_PATH.sub(relative, text)


def write_experiment(exp_result, out_dir=DEFAULT_RESULTS_DIR, paper_table=None):
    """Write ``<key>.csv``, ``<key>.md`` and ``<key>.json`` under ``out_dir``, absolute paths made
    relative to the repository (:func:`repository_relative`); returns ``{"csv": ..., "md": ...,
    "json": ...}``.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    key = exp_result.experiment.key
    paths = {"csv": out / f"{key}.csv", "md": out / f"{key}.md", "json": out / f"{key}.json"}
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=CSV_COLUMNS)
    writer.writeheader()
    for row in result_rows(exp_result, paper_table):
        writer.writerow({k: "" if v is None else v for k, v in row.items()})
    with open(paths["csv"], "w", newline="") as fh:
        fh.write(repository_relative(buffer.getvalue()))
    paths["md"].write_text(repository_relative(markdown_table(exp_result, paper_table)))
    text = json.dumps(_jsonable(exp_result), indent=1, default=_json_default)
    paths["json"].write_text(repository_relative(text))
    return paths


def _json_default(o):
    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    return str(o)
