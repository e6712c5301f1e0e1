"""What ``catdask models show`` and ``models compare`` print for a person: a few labelled
lines from a model version's metadata (``--json`` prints the metadata itself)."""

from __future__ import annotations

_CERTIFICATE_METHODS = {"sdp-dual": "SDP dual", "rapcsak": "Rapcsak's condition",
                        "moment": "moment relaxation"}


def _num(value, digits=6) -> str:
    if isinstance(value, bool) or value is None:
        return "-" if value is None else str(value).lower()
    if isinstance(value, float):
        return f"{value:.{digits}g}"
    return str(value)


def _status_line(meta: dict) -> str:
    """The registration status in words, with the certificate's level and verified gap."""
    status = meta.get("registration_status")
    cert = meta.get("certificate") if isinstance(meta.get("certificate"), dict) else {}
    gap = meta.get("gap", cert.get("verified_gap", cert.get("gap")))
    level = _CERTIFICATE_METHODS.get(cert.get("method"), cert.get("method"))
    if status == "certified" or (status is None and cert.get("certified")):
        how = f"{level}; " if level else ""
        return f"certified globally optimal ({how}verified gap {_num(gap, 2)})"
    if status == "certificate-not-applicable" or cert.get("applicable") is False:
        return "registered; no global-optimality test exists for this objective (CAS)"
    if status == "gap-within-tolerance":
        policy = meta.get("registration_policy") if isinstance(
            meta.get("registration_policy"), dict) else {}
        limit = policy.get("max_gap")
        within = f" <= --max-gap {_num(limit, 3)}" if limit is not None else ""
        return (f"NOT certified, optimality gap at most {_num(gap, 3)}{within} "
                "(registered by --max-gap)")
    if status == "uncertified-allowed" or (status is None and cert):
        bound = f", optimality gap at most {_num(gap, 3)}" if gap is not None else ""
        allowed = " (allowed by --allow-uncertified)" if status else ""
        return f"NOT certified{bound}{allowed}"
    return f"registration status: {status or 'not recorded'}"


def _method_line(meta: dict) -> str:
    spec = meta.get("spec") if isinstance(meta.get("spec"), dict) else {}
    params = meta.get("params") if isinstance(meta.get("params"), dict) else {}
    parts = [spec.get("method") or meta.get("class") or "?"]
    origin = spec.get("origin") or params.get("origin")
    if origin:
        parts.append(f"origin {origin}")
    for key, label in (("kernel", "kernel"), ("gamma", "gamma"), ("n_landmarks", "landmarks")):
        value = params.get(key, spec.get(key))
        if value is not None and not (key == "kernel" and value == "rbf" and "gamma" not in params):
            parts.append(f"{label} {_num(value, 4)}")
    restarts = spec.get("n_restarts", params.get("n_restarts"))
    if restarts is not None:
        parts.append(f"{restarts} restarts")
    if spec.get("device") is not None:
        placement = meta.get("device_placement")
        parts.append(f"device {spec['device']}" + (f" ({placement})" if placement else ""))
    if meta.get("preprocessing"):
        parts.append(f"preprocessing: {meta['preprocessing']}")
    return ", ".join(parts)


def _restart_rows(meta: dict) -> list[str]:
    restarts = [r for r in meta.get("restarts") or [] if isinstance(r, dict)]
    if not restarts:
        return []
    best = meta.get("best_restart")
    lines = ["  restarts:    #  start              objective      iterations  stopped  "
             "test                  gap"]
    for r in restarts:
        mark = "*" if r.get("restart") == best else " "
        lines.append(f"             {mark}{_num(r.get('restart')):>2}  {str(r.get('start', '')):<17}"
                     f"  {_num(r.get('objective'), 12):<13}  {_num(r.get('n_iter')):>10}  "
                     f"{str(r.get('stopping_reason', '')):<7}  {_verdict(r, best, meta):<20}  "
                     f"{_num(r.get('gap'), 2) if r.get('gap') is not None else ''}".rstrip())
    lines.append("             (* the registered restart: the one tested; the others' gaps "
                 "are against its bound)")
    return lines


def _verdict(restart: dict, best, meta: dict) -> str:
    """The restart table's test column (reports.restart_verdict, from the stored record)."""
    from catdask.core.engine import ties_with

    if "certified" not in restart:  # no test (CAS, or certify=False)
        return ""
    if restart.get("restart") == best:
        return "certified" if restart["certified"] else "not certified"
    top = meta.get("objective")
    if top is None or restart.get("objective") is None:
        return ""
    return f"{'tied with' if ties_with(restart['objective'], top) else 'beaten by'} #{best}"


def _top_level_clauses(reason: str) -> list[str]:
    """``reason`` split at each "; " outside parentheses ("certified (a; b): c; d" gives
    "certified (a; b): c" and "d")."""
    clauses, depth, start = [], 0, 0
    for i, char in enumerate(reason):
        depth += (char == "(") - (char == ")")
        if char == ";" and depth == 0:
            clauses.append(reason[start:i])
            start = i + 1
    clauses.append(reason[start:])
    return [c.strip() for c in clauses if c.strip()]


def model_summary(meta: dict, label: str) -> str:
    """``catdask models show``: one version of a model (its ``meta`` as ``load_model_version``
    returns it), for a person, headed by ``label`` (``NAME:vN``)."""
    data = meta.get("dataset")
    if meta.get("dataset_snapshot"):
        data = f"{data} (snapshot {meta['dataset_snapshot']})"
    lines = [f"{label}  {_status_line(meta)}",
             f"  data set:    {data}",
             f"  method:      {_method_line(meta)}",
             f"  objective:   {_num(meta.get('objective'), 12)} after {_num(meta.get('n_iter'))} "
             f"iterations (stopped: {meta.get('stopping_reason') or 'not recorded'})"]
    cert = meta.get("certificate") if isinstance(meta.get("certificate"), dict) else {}
    if cert.get("reason"):
        # One clause a line: a certificate that tried several levels says what each found.
        clauses = _top_level_clauses(str(cert["reason"]))
        lines += [f"  {'certificate:' if i == 0 else '':<12} {c}" for i, c in enumerate(clauses)]
    lines += _restart_rows(meta)
    metrics = meta.get("metrics") if isinstance(meta.get("metrics"), dict) else {}
    for i, (key, value) in enumerate(metrics.items()):
        lines.append(f"  {'metrics:' if i == 0 else '':<12} {key} {_num(value, 4)}")
    created = meta.get("created")
    if created:
        run = f" by {meta['run_key']}" if meta.get("run_key") else ""
        lines.append(f"  created:     {created}{run}")
    name = label.split(":")[0]
    lines.append(f"Everything recorded: catdask models show {label} --json "
                 f"(and `catdask plot {name}` for the category space)")
    return "\n".join(lines)


def comparison_summary(cmp: dict) -> str:
    """``catdask models compare``: the fields that differ between two versions."""
    a, b = cmp["versions"]
    name = cmp["name"]
    head = f"{name}: v{a} -> v{b}"
    changed = [k for k in cmp.get("changed", []) if k not in ("params", "metrics", "certificate")]
    rows = [(k, *cmp[k]) for k in changed]
    rows += [(f"param {k}", *v) for k, v in cmp.get("params_diff", {}).items()]
    rows += [(f"metric {k}", *v) for k, v in cmp.get("metrics_diff", {}).items()]
    if not rows:
        return f"{head}: no difference in the compared fields"
    width = max(len(r[0]) for r in rows)
    # Floats in full: a change can sit in the last digits (the same optimum, re-fitted).
    lines = [head] + [f"  {k:<{width}}  {_num(x, 17)}  ->  {_num(y, 17)}" for k, x, y in rows]
    lines.append(f"Everything compared: catdask models compare {name} {a} {b} --json")
    return "\n".join(lines)
