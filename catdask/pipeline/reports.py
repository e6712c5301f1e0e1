"""What a run publishes: restart tables, summaries and category-space plots (as data)."""

from __future__ import annotations

import base64
import math
from pathlib import Path

import numpy as np

# 150 dpi: a 3-D plot is about 740 x 710 px, readable in the Prefect UI (it was 370 x 361).
PLOT_DPI = 150
METRIC_DIGITS = 4


def _format(value, spec):
    """``value`` formatted with ``spec``; "" when it is None or not finite."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return ""
    return format(value, spec)


def _fmt(v):
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return None
    return v


def reported_gap(cert):
    """The optimality gap to report: the verified margin when certified, else the bound's gap."""
    if cert is None:
        return None
    return _fmt(float(cert.verified_gap if cert.certified else cert.gap))


def restart_rows(outcome):
    """One row per restart, formatted for the restart-table artifact: objectives to 6 significant
    digits, gaps to 2 (``""`` when unknown), and the short verdict of :func:`restart_verdict` (the
    summary artifact has the full reason).
    """
    est = outcome.estimator
    tested = getattr(est, "best_restart_", None)
    best_objective = float(est.objective_)
    rows = []
    for r in est.restarts_:
        c = r.certificate
        rows.append({
            "restart": r.index,
            "start": r.start,
            "objective": _format(float(r.objective), ".6g"),
            "iterations": int(r.n_iter),
            "converged": bool(r.converged),
            "stopping_reason": r.stopping_reason,
            "certified": None if c is None or not c.applicable else bool(c.certified),
            "gap": _format(reported_gap(c), ".2e"),
            "certificate": restart_verdict(r, tested, best_objective),
        })
    return rows


def restart_verdict(restart, tested_index, best_objective):
    """A few words on one restart's certificate, for the restart table: ``"certified (sdp-dual)"`` /
    ``"not certified (reduced bound)"`` for the tested restart (``tested_index``), ``"tied with
    restart 0"`` or ``"beaten by restart 0"`` for the others, ``"not applicable"`` without a test
    (CAS), "" without a certificate.
    """
    from ..core.engine import ties_with

    c = restart.certificate
    if c is None:
        return ""
    if not c.applicable:
        return "not applicable"
    if restart.index == tested_index or tested_index is None:
        if c.certified:
            return f"certified ({c.method})"
        return f"not certified ({c.bound_method} bound)" if c.bound_method else "not certified"
    if ties_with(restart.objective, best_objective):
        return f"tied with restart {tested_index}"
    return f"beaten by restart {tested_index}"


def certificate_summary(cert):
    """Readable one-line verdict of a certificate."""
    if not cert.applicable:
        # The reason of a certificate that does not apply starts with "not applicable" itself.
        return f"not applicable ({cert.reason.removeprefix('not applicable: ')})"
    if cert.certified:
        margin = cert.verified_gap
        margin = f"; verified gap <= {margin:.1e}" if math.isfinite(margin) else ""
        return f"certified global optimum ({cert.method}{margin})"
    gap = "unknown" if not math.isfinite(cert.gap) else f"{cert.gap:.2e}"
    return f"not certified; optimality gap <= {gap} ({cert.bound_method} bound)"


def metrics_table_rows(metrics):
    """``[{"metric": name, "value": "0.9831"}, ...]``: values to 4 significant digits."""
    rows = []
    for name, value in metrics.items():
        shown = _format(float(value), f".{METRIC_DIGITS}g") if isinstance(value, float) else value
        rows.append({"metric": name, "value": "n/a" if shown == "" else shown})
    return rows


def metrics_markdown(metrics):
    """The metrics as a two-column markdown table (:func:`metrics_table_rows`)."""
    lines = ["| metric | value |", "|---|---|"]
    lines += [f"| {r['metric']} | {r['value']} |" for r in metrics_table_rows(metrics)]
    return "\n".join(lines)


def save_category_space_plot(model, X, y, path, *, title=None, class_names=None,
                             dpi=PLOT_DPI):
    """Write a scatter of ``X`` in category space under ``model`` (coloured by ``y``; ``title``,
    ``class_names`` as :func:`catdask.plotting.plot_category_space` takes them) to ``path``, whose
    extension names the format (:data:`catdask.plotting.PLOT_FORMATS`; any other is refused before
    anything is drawn); returns the path.
    """
    from ..plotting import plot_format

    fmt = plot_format(path)
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    from ..plotting import plot_category_space

    steps = getattr(model, "steps", None)
    est = model[-1] if steps else model
    Xt = model[:-1].transform(X) if steps and len(steps) > 1 else X
    out = plot_category_space(est, Xt, y, title=title, class_names=class_names)
    fig = (out.flat[0] if isinstance(out, np.ndarray) else out).figure
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        fig.savefig(tmp, dpi=dpi, bbox_inches="tight", format=fmt)
    finally:
        plt.close(fig)
    tmp.replace(path)  # atomic: a reader never sees half a file
    return path


def check_feature_count(model, n_features, *, model_label, data):
    """Refuse data whose feature count differs from the model's, naming both (scikit-learn's message
    names neither); ``data`` says what the data is (``"file new.csv"``)."""
    expected = getattr(model, "n_features_in_", None)
    if expected is not None and int(expected) != int(n_features):
        raise ValueError(f"model {model_label} was trained on {int(expected)} features; "
                         f"{data} has {int(n_features)}")


def rejection_note(certificate):
    """Why a model was not registered, in a few words for a plot title: ``"rejected: not certified,
    gap <= 4.1e-03"``, or ``"rejected: no optimality test (CAS)"``.
    """
    if not certificate.applicable:
        # CAS has no test; a K-CQS fit whose Gram rank was too large was not tested.
        return ("rejected: no optimality test (CAS)" if certificate.status == "not_applicable"
                else "rejected: optimality not tested")
    gap = reported_gap(certificate)
    return "rejected: not certified" + (f", gap <= {gap:.1e}" if gap is not None else "")


def plot_title(method, dataset, *, version=None, certificate=None, status=None):
    """The title of a category-space plot: the paper's method name, the data set, the version."""
    from ..methods import METHODS

    name = METHODS[method].paper_name if method in METHODS else (method.upper() or "model")
    title = f"{name} on {dataset}" + (f" ({version})" if version else "")
    if status and status.startswith("rejected") and certificate is not None:
        title += f"\n{rejection_note(certificate)}"
    return title


def class_names_of(dataset):
    """``{class label: display name}`` of a stored data set (iris: ``{0: "setosa", ...}``)."""
    return dict(zip(dataset.classes.tolist(), dataset.label_names))


def write_model_plot(store, outcome, *, version=None, status=None, run_id=None):
    """The train run's category-space plot, in ``<store>/plots/``; returns its path."""
    from ..store import read_dataset
    from ..store.root import open_store

    ds = read_dataset(store, outcome.dataset, snapshot=outcome.dataset_snapshot)
    method = outcome.spec.method
    name = plot_file_name(outcome.dataset, method, version=version, run_id=run_id)
    title = plot_title(method, outcome.dataset, version=version,
                       certificate=outcome.certificate, status=status)
    return save_category_space_plot(outcome.model, ds.X, ds.y,
                                    open_store(store).local_folder / "plots" / name, title=title,
                                    class_names=class_names_of(ds))


def plot_file_name(dataset, method, *, version=None, run_id=None, suffix="png"):
    """The file name of a train run's plot: one per model version, or per run when rejected."""
    if version:
        stem = str(version).replace(":", "-")
    elif run_id:
        stem = f"{dataset}-{method}-rejected-run-{str(run_id)[:8]}"
    else:
        raise ValueError("a plot file name needs the registered version or the flow run id")
    return f"{stem}.{suffix}"


def png_markdown(path, alt="category space"):
    """Markdown embedding a PNG inline (data URI), so the Prefect UI shows it offline."""
    data = base64.b64encode(Path(path).read_bytes()).decode()
    return f"![{alt}](data:image/png;base64,{data})"


def _registration_line(cert, status, max_gap):
    """The registration outcome and the policy that decided it."""
    if status == "gap-within-tolerance":
        return (f"{status} (not certified; proved gap {cert.gap:.3g} <= max_gap {max_gap:.3g})")
    if status == "rejected-uncertified" and max_gap is not None and cert.applicable:
        return f"{status} (proved gap {cert.gap:.3g} > max_gap {max_gap:.3g})"
    return status or "n/a"


def summary_markdown(outcome, version=None, status=None, max_gap=None):
    """Markdown summary of a train run for the Prefect UI: verdict, reason, registration
    outcome (with the ``max_gap`` policy when one was set), metrics table."""
    from ..methods import METHODS

    est, cert = outcome.estimator, outcome.certificate
    method = METHODS[outcome.spec.method].paper_name
    lines = [
        f"## {method} on `{outcome.dataset}`" + (f" -> `{version}`" if version else ""),
        "",
        f"- objective: {est.objective_:.10g} (best of {len(est.restarts_)} restarts, "
        f"{est.n_iter_} iterations, converged={est.converged_})",
        f"- certificate: {certificate_summary(cert)}",
        *([f"- why: {cert.reason}"] if cert.applicable else []),
        f"- registration: {_registration_line(cert, status, max_gap)}",
        f"- fit time: {outcome.seconds:.2f} s",
        *([f"- device: {outcome.spec.device} ({outcome.device_placement})"]
          if outcome.spec.device is not None else []),
        "",
        "### Metrics",
        "",
        metrics_markdown(outcome.metrics),
    ]
    return "\n".join(lines)
