"""Benchmark: a repeated ``catdask train`` of the same data set and spec (the train cache,
issue 28 item 4) against the same command with ``--refit`` (the baseline: a fit every time).

Goal: the repeated train takes < 2 s, fits nothing and returns the same version.

The CLI asks the train cache before Prefect or Dask starts, so a repeat runs no flow at all
(the train flow makes the same lookup first, for runs started from Prefect). Two settings, each
``REPEATS`` rounds of (refit, repeat) interleaved, medians of the CLI's wall time:

1. against a running Prefect server (``PREFECT_API_URL``, as under ``catdask serve`` or with
   your own server), where the refit's flow time is also read from the API;
2. the CLI as a user runs it without ``PREFECT_API_URL`` (a refit starts and stops the CLI's
   temporary Prefect server).

    python benchmarks/bench_train_cache.py [--quick] [--json out.json] [--dataset iris]
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import load_average, parse_args, report

REPO = Path(__file__).resolve().parents[1]


def _cli(store, args, env):
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "catdask", "--store", str(store), *args],
                         env=env, cwd=REPO, capture_output=True, text=True, timeout=900)
    wall = time.perf_counter() - t0
    if out.returncode != 0:
        raise SystemExit(f"catdask {' '.join(args)} exited {out.returncode}:\n{out.stderr}")
    return json.loads(out.stdout), wall


def _flow_seconds(api_url):
    """Flow time and id of the newest catdask-train run (end - start, from the API)."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowFilter, FlowFilterName
    from prefect.client.schemas.sorting import FlowRunSort
    from prefect.settings import PREFECT_API_URL, temporary_settings

    with temporary_settings(updates={PREFECT_API_URL: api_url}):
        with get_client(sync_client=True) as client:
            [run] = client.read_flow_runs(
                flow_filter=FlowFilter(name=FlowFilterName(any_=["catdask-train"])),
                sort=FlowRunSort.START_TIME_DESC, limit=1)
    return (run.end_time - run.start_time).total_seconds(), run.state.name, str(run.id)


def _rounds(store, train_args, env, repeats, api_url=None):
    rows = {"refit": [], "repeat": []}
    for _ in range(repeats):
        for kind in ("refit", "repeat"):
            args = train_args + (["--refit"] if kind == "refit" else [])
            summary, wall = _cli(store, args, env)
            row = {"wall_s": wall, "version": summary["version"], "cached": summary["cached"]}
            if api_url:
                flow_s, state, run_id = _flow_seconds(api_url)
                new_run = not rows["refit"] or run_id != rows["refit"][-1].get("run_id")
                if kind == "refit" or new_run:
                    row.update(flow_s=flow_s, state=state, run_id=run_id)
                else:
                    row.update(flow_s=None, state="no flow run (answered from the registry)")
            rows[kind].append(row)
    return rows


def _medians(rows, key):
    return {kind: statistics.median(r[key] for r in rs) for kind, rs in rows.items()}


def main():
    args = parse_args(__doc__.splitlines()[0], extra=lambda ap: ap.add_argument(
        "--dataset", default="iris", help="a catalog data set (default iris)"))
    repeats = 2 if args.quick else 3
    print(f"load average at start: {load_average()}")
    from catdask.orchestration.server import _free_port, start_prefect_server, stop_process
    from catdask.pipeline import ingest_dataset

    with tempfile.TemporaryDirectory(prefix="bench-train-cache-") as tmp:
        store = Path(tmp) / "store"
        ingest_dataset(args.dataset, store)
        env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_API")}
        env.update(PREFECT_HOME=str(Path(tmp) / "prefect-home"),
                   PREFECT_SERVER_ANALYTICS_ENABLED="false", MPLBACKEND="Agg")
        train_args = ["train", args.dataset, "--restarts", "2"]
        first, first_wall = _cli(store, train_args, env)  # v1: the version the repeats return
        server, api_url = start_prefect_server("127.0.0.1", _free_port(),
                                               log_file=Path(tmp) / "server.log")
        try:
            served = _rounds(store, train_args, dict(env, PREFECT_API_URL=api_url), repeats,
                             api_url)
        finally:
            stop_process(server)
        temporary = _rounds(store, train_args, env, repeats)

    repeats_ok = all(r["cached"] and r["version"] == served["refit"][i]["version"]
                     for i, r in enumerate(served["repeat"]))
    results = {
        "dataset": args.dataset, "first_train_wall_s": round(first_wall, 2),
        "first_version": first["version"],
        "with_server_refit_flow_s_median": statistics.median(
            r["flow_s"] for r in served["refit"]),
        "with_server_wall_s_median": _medians(served, "wall_s"),
        "temporary_server_wall_s_median": _medians(temporary, "wall_s"),
        "repeat_states": [r["state"] for r in served["repeat"]],
        "repeat_is_cached_and_same_version_as_the_refit_before": repeats_ok,
        "wall_ratio_repeat_over_refit": {
            "with_server": round(_medians(served, "wall_s")["repeat"]
                                 / _medians(served, "wall_s")["refit"], 3),
            "temporary_server": round(_medians(temporary, "wall_s")["repeat"]
                                      / _medians(temporary, "wall_s")["refit"], 3)},
        "rows": {"with_server": served, "temporary_server": temporary},
    }
    report("train cache: repeated train vs --refit", results, args)


if __name__ == "__main__":
    main()
