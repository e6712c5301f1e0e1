"""What a run publishes: restart tables, summaries and category-space plots (as data)."""

from __future__ import annotations

import base64
import math
from pathlib import Path

import numpy as np

__all__ = ["reported_gap", "restart_rows", "certificate_summary", "save_category_space_plot",
           "png_markdown", "summary_markdown"]


def _fmt(v):
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return None
    return v


def reported_gap(cert):
    """The optimality gap to report: the verified margin when certified, else the bound's gap.

    ``Certificate.gap`` is 0 for a certified fit, which hides the tolerance of the test;
    ``verified_gap`` is what the verification proved. None when unknown (CAS, not tested).
    """
    if cert is None:
        return None
    return _fmt(float(cert.verified_gap if cert.certified else cert.gap))


def restart_rows(outcome):
    """One row per restart: objective, iterations, convergence, certificate verdict and gap."""
    rows = []
    for r in outcome.estimator.restarts_:
        c = r.certificate
        rows.append({
            "restart": r.index,
            "start": r.start,
            "objective": float(r.objective),
            "iterations": int(r.n_iter),
            "converged": bool(r.converged),
            "stopping_reason": r.stopping_reason,
            "certified": None if c is None or not c.applicable else bool(c.certified),
            "gap": reported_gap(c),
            "certificate": "" if c is None else c.reason,
        })
    return rows


def certificate_summary(cert):
    """Readable one-line verdict of a certificate."""
    if not cert.applicable:
        return f"not applicable ({cert.reason})"
    if cert.certified:
        margin = cert.verified_gap
        margin = f"; verified gap <= {margin:.1e}" if math.isfinite(margin) else ""
        return f"certified global optimum ({cert.method}{margin})"
    gap = "unknown" if not math.isfinite(cert.gap) else f"{cert.gap:.2e}"
    return f"not certified; optimality gap <= {gap} ({cert.bound_method} bound)"


def save_category_space_plot(model, X, y, path, *, title=None):
    """Write a PNG scatter of the training data in category space; returns the path."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    from ..plotting import plot_category_space

    steps = getattr(model, "steps", None)
    est = model[-1] if steps else model
    Xt = model[:-1].transform(X) if steps and len(steps) > 1 else X
    out = plot_category_space(est, Xt, y, title=title)
    fig = (out.flat[0] if isinstance(out, np.ndarray) else out).figure
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    fig.savefig(tmp, dpi=90, bbox_inches="tight", format="png")
    plt.close(fig)
    tmp.replace(path)  # atomic: a reader never sees half a PNG
    return path


def png_markdown(path, alt="category space"):
    """Markdown embedding a PNG inline (data URI), so the Prefect UI shows it offline."""
    data = base64.b64encode(Path(path).read_bytes()).decode()
    return f"![{alt}](data:image/png;base64,{data})"


def summary_markdown(outcome, version=None, status=None):
    """Markdown summary of a train run for the Prefect UI."""
    est, cert = outcome.estimator, outcome.certificate
    lines = [
        f"## {outcome.spec.method.upper()} on `{outcome.dataset}`" + (f" -> `{version}`" if version else ""),
        "",
        f"- objective: {est.objective_:.10g} (best of {len(est.restarts_)} restarts, "
        f"{est.n_iter_} iterations, converged={est.converged_})",
        f"- certificate: {certificate_summary(cert)}",
        f"- registration: {status or 'n/a'}",
        f"- fit time: {outcome.seconds:.2f} s",
        f"- metrics: {outcome.metrics}",
    ]
    return "\n".join(lines)
