"""What a Dask Gram pass costs outside the tile arithmetic: driver, scheduler, bytes, stragglers.

    python benchmarks/pass_overhead.py [--quick] [--layouts 2x1,16x1] [--n N] [--passes 3]
                                       [--rounds 2] [--baseline-ref main] [--json PATH]

Issue 27: one float32 ``G Z`` pass at N = 50,000 on 16 single-thread workers measured 4.17x the
2-worker pass on a 16-core host whose cores allow 5.47x without Dask (benchmarks/cores_ceiling.py).
This script measures, per pass (``DaskGramOperator.class_matmul``, float32, the default tile;
D = 20, K = 5, R = 5), the figures that carry over from this machine to a many-core host:

- **driver CPU**: ``time.process_time`` of the driver process (the LocalCluster's scheduler
  and nannies run in it), split into the main thread's (``time.thread_time``: graph,
  submission, adding the results; ``add`` is timed on its own) and the other threads' (the
  event loop: scheduler, comms, deserialising results, the nannies' polling);
- **tasks and bytes**: tasks per pass, bytes of results the driver receives (the task
  stream's ``nbytes``), bytes of the graph the driver sends (its pickled size), worker-to-worker
  transfers;
- **timeline**: from the call to the graph's submission, submission to the first task's
  start, the first to the last task end, the last task end to the result in the driver's
  hands (task stream times: the workers' clocks corrected by distributed's estimate of their
  offset from the scheduler's, so a few ms off; a tail below zero is that error);
- **idle**: the driver's and a worker's CPU while no task runs (the nannies of a LocalCluster
  live in the driver and poll their workers: this grows with the workers), and the driver's
  CPU per pass net of it;
- **loss vs even split**: the wall time minus the tasks' summed compute over the workers;
- **stragglers**: each worker's busy time (compute, task stream); max / mean (mean over all
  workers, idle ones included), i.e. how much longer the pass is than a perfectly even split;
- **worker CPU**: the workers' process CPU per pass, and their event loops' share (comms,
  (de)serialising, bookkeeping), against the tasks' summed compute time.

On a 2-core machine 16 workers share 2 cores: wall times, the timeline, the tasks' compute
times (so the straggler share) and the driver's idle polling over them stretch; task counts,
bytes, the idle rates and the empty-task figures do not.

The same passes with **empty tasks** (each returns a result of its real shape at once,
:func:`empty_tasks`) give the driver's, scheduler's and comms' fixed cost per pass at any
number of workers on any machine: the wall time is then short, so the idle polling adds
little. The same once more with results of no rows (this code's format only): what is
left is the cost per task.

Each (code, layout) runs in a fresh interpreter (a cluster of its own) with one warm-up pass,
then ``--passes`` measured ones; the baseline is the code at ``--baseline-ref`` (git archive
into a temporary directory; ``''`` for none), interleaved with this tree's code child by child,
``--rounds`` times; medians over all passes.
"""

from __future__ import annotations

import contextlib
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import numpy as np  # noqa: E402
from _common import (class_sorted_blobs, codes_to_compare, default_rbf,  # noqa: E402
                     load_average, parse_args, report, run_child_json)

D, K, R = 20, 5, 5


def _options(ap):
    ap.add_argument("--layouts", default=None,
                    help="comma-separated WORKERSxTHREADS (default 2x1,16x1; quick 2x1,4x1)")
    ap.add_argument("--n", type=int, default=None, help="samples (default 50,000; quick 6,000)")
    ap.add_argument("--passes", type=int, default=3, help="measured passes per child")
    ap.add_argument("--rounds", type=int, default=2, help="children per code and layout")
    ap.add_argument("--baseline-ref", default="main",
                    help="git ref of the baseline code ('' for none)")
    ap.add_argument("--child", default=None, help="(internal) WORKERSxTHREADS to measure")
    ap.add_argument("--root", default=None, help="(internal) the code to import")


# ------------------------------------------------------------------ measured in a child
def _thread_cpu():
    """CPU seconds of this (the main) thread and of the whole process."""
    return {"main": time.thread_time(), "process": time.process_time()}


def _worker_cpu():
    """A worker's CPU seconds: its process, and its event loop (``Client.run`` calls a plain
    function on the worker's event loop thread: comms, (de)serialising, bookkeeping)."""
    return (time.process_time(), time.thread_time())


class PassProbe:
    """Wraps an operator's runner and ``_add_results`` to time the driver's pieces of a pass:
    when the graph was handed to the client, the graph itself (for its size), the time spent
    in ``add`` (adding each result into the sum)."""

    def __init__(self, op):
        self.op = op
        self.graphs = []
        self.submitted = None
        self.add_seconds = 0.0
        self.adds = 0
        runner = op._runner
        get = runner._get

        def timed_get(dsk, keys, *a, **kw):
            self.graphs.append(dsk)
            out = get(dsk, keys, *a, **kw)
            self.submitted = time.time()
            return out

        runner._get = timed_get
        add_results = op._add_results

        def timed_add_results(tasks, name, add, extra=None):
            def add_timed(part):
                t0 = time.perf_counter()
                add(part)
                self.add_seconds += time.perf_counter() - t0
                self.adds += 1

            return add_results(tasks, name, add_timed, extra)

        op._add_results = timed_add_results

    def reset(self):
        self.graphs, self.submitted, self.add_seconds, self.adds = [], None, 0.0, 0


def _graph_bytes(graphs):
    """Pickled size of the pass's own graph entries (not the persisted inputs)."""
    import pickle

    return sum(len(pickle.dumps(v, protocol=5)) for g in graphs for v in g.values())


def idle_rates(client, seconds=2.0):
    """CPU cores the driver (the scheduler and, on a LocalCluster, every worker's nanny run in
    it) and each worker use while no task runs: what a pass pays per second of wall time."""
    d0 = time.process_time()
    w0 = client.run(_worker_cpu)
    time.sleep(seconds)
    w1 = client.run(_worker_cpu)
    driver = (time.process_time() - d0) / seconds
    workers = [(w1[w][0] - w0[w][0]) / seconds for w in w0]
    return {"driver idle CPU (cores)": driver,
            "worker idle CPU (cores, median)": statistics.median(workers)}


def measure_pass(op, z, client, n_threads, probe=None, idle=None):
    """One ``op.class_matmul(z)`` with the figures of this module's docstring (``probe``: a
    :class:`PassProbe` on ``op`` for the submission time, graph size and ``add``; ``idle``:
    :func:`idle_rates`, to subtract the driver's idle CPU over the pass's wall time)."""
    from distributed import get_task_stream

    if probe is not None:
        probe.reset()
    wcpu0 = client.run(_worker_cpu)
    thr0 = _thread_cpu()
    with get_task_stream(client) as ts:
        t0 = time.time()
        p0 = time.perf_counter()
        op.class_matmul(z)
        wall = time.perf_counter() - p0
        t_end = time.time()
    thr1 = _thread_cpu()
    wcpu1 = client.run(_worker_cpu)
    comp, per_worker, nbytes, transfers, transfer_s = [], {}, 0, 0, 0.0
    for t in ts.data:
        for s in t.get("startstops", ()):
            if s.get("action") == "compute":
                comp.append((s["start"], s["stop"]))
                per_worker[t["worker"]] = per_worker.get(t["worker"], 0.0) + s["stop"] - s["start"]
            elif s.get("action") == "transfer":
                transfers += 1
                transfer_s += s["stop"] - s["start"]
        if str(t["key"]).startswith(("catdask-z-", "catdask-V-")):
            continue  # a per-pass input held on the workers (its bytes are the graph's)
        nb = t.get("nbytes") or 0
        nbytes += sum(nb.values()) if isinstance(nb, dict) else nb
    busy = [per_worker.get(w, 0.0) for w in wcpu0]
    mean_busy = sum(busy) / n_threads
    starts = sorted(a for a, _ in comp)
    stops = sorted(b for _, b in comp)
    durations = [b - a for a, b in comp]
    submitted = probe.submitted if probe is not None and probe.submitted else t0
    driver_cpu = thr1["process"] - thr0["process"]
    out = {
        "wall s": wall,
        "driver CPU s": driver_cpu,
        "driver main-thread CPU s": thr1["main"] - thr0["main"],
        "driver other-threads CPU s (scheduler, comms, nannies)": (
            driver_cpu - thr1["main"] + thr0["main"]),
        "tasks": len(comp),
        "results to driver MB": nbytes / 1e6,
        "worker-to-worker transfers": transfers,
        "transfer s (summed)": transfer_s,
        "submitted to first task start s": starts[0] - submitted,
        "spread of task starts s": starts[-1] - starts[0],
        "spread of task ends s": stops[-1] - stops[0],
        "last task end to result s": t_end - stops[-1],
        "compute summed s": sum(durations),
        "even split of the compute s": sum(durations) / n_threads,
        "loss vs even split s": wall - sum(durations) / n_threads,
        "task max / median": max(durations) / statistics.median(durations),
        "straggler share (max worker busy / mean)": max(busy) / mean_busy,
        "tasks per worker (min, max)": (min(sum(1 for t in ts.data if t["worker"] == w)
                                            for w in wcpu0),
                                        max(sum(1 for t in ts.data if t["worker"] == w)
                                            for w in wcpu0)),
        "worker CPU s (summed)": sum(wcpu1[w][0] - wcpu0[w][0] for w in wcpu0),
        "worker event-loop CPU s (summed)": sum(wcpu1[w][1] - wcpu0[w][1] for w in wcpu0),
    }
    if probe is not None:
        out.update({"call to submitted s": submitted - t0,
                    "driver add s": probe.add_seconds,
                    "graph sent MB": _graph_bytes(probe.graphs) / 1e6})
    if idle is not None:
        out["driver CPU net of idle s"] = driver_cpu - idle["driver idle CPU (cores)"] * wall
    return out


def _empty_band(left, right, pairs, offsets, zt, kernel):
    """The former task's result, ``(lo, band)``, of the right shape, with no tile computed."""
    N, R = zt.shape
    lo = int(pairs[:, 0].min())
    return lo, np.zeros((len(offsets) - 1, N - lo, R), dtype=zt.dtype)


def _empty_part(left, right, pairs, offsets, zt, kernel):
    """The current task's result, ``(lo, hi, head, k0, tail)``, of the right shape, with no
    tile computed."""
    N, R = zt.shape
    lo, hi = int(pairs[:, 0].min()), int(pairs[:, 1].max())
    own = [k for k in range(len(offsets) - 1)
           if min(hi, offsets[k + 1]) > max(lo, offsets[k])]
    return (lo, hi, np.zeros((len(offsets) - 1, hi - lo, R), dtype=zt.dtype), own[0],
            np.zeros((len(own), N - hi, R), dtype=zt.dtype))


def _no_part(left, right, pairs, offsets, zt, kernel):
    """A current task's result with no rows at all (nothing to send or add)."""
    R = zt.shape[1]
    lo = int(pairs[:, 0].min())
    return (lo, lo, np.zeros((len(offsets) - 1, 0, R), dtype=zt.dtype), 0,
            np.zeros((0, 0, R), dtype=zt.dtype))


@contextlib.contextmanager
def empty_tasks(results="real shapes"):
    """The tile pass with every task returning a result of its real shape at once: what a pass
    costs the driver, the scheduler and the comms with (almost) no wall time for the
    driver's idle polling to add to it. ``results="none"``: results with no rows (the current
    code's format), so that what is left is the per-task cost."""
    import cloudpickle

    from catdask.operators import gram_tiles

    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    real = gram_tiles.gram_symmetric_class_product
    current = hasattr(gram_tiles, "add_class_product_part")
    if results == "none" and not current:
        raise ValueError("results='none' needs the current part format")
    gram_tiles.gram_symmetric_class_product = (
        _no_part if results == "none" else _empty_part if current else _empty_band)
    try:
        yield
    finally:
        gram_tiles.gram_symmetric_class_product = real


def child(args):
    """One cluster of ``args.child``, a warm-up pass, ``args.passes`` measured passes; then
    as many with empty tasks (:func:`empty_tasks`)."""
    from catdask.core.classes import ClassIndex
    from catdask.distributed.cluster import start_local_cluster
    from catdask.operators import DaskGramOperator

    n_workers, threads = (int(v) for v in args.child.split("x"))
    X, y = class_sorted_blobs(args.n, D, K)
    cluster, client = start_local_cluster(n_workers, threads_per_worker=threads,
                                          set_as_default=True)
    try:
        op = DaskGramOperator(X, ClassIndex(y, K), default_rbf(D), cache="recompute",
                              precision="float32")
        probe = PassProbe(op)
        z = np.random.default_rng(2).normal(size=(R, args.n))
        first = op.class_matmul(z)  # warm-up
        idle = idle_rates(client)
        rows = [{**measure_pass(op, z, client, n_workers * threads, probe, idle), **idle}
                for _ in range(args.passes)]
        again = op.class_matmul(z)
        with empty_tasks():
            op.class_matmul(z)  # warm-up
            empty = [measure_pass(op, z, client, n_workers * threads, probe, idle)
                     for _ in range(args.passes)]
        none = []
        from catdask.operators import gram_tiles

        if hasattr(gram_tiles, "add_class_product_part"):
            with empty_tasks("none"):
                op.class_matmul(z)
                none = [measure_pass(op, z, client, n_workers * threads, probe, idle)
                        for _ in range(args.passes)]
        op.close()
    finally:
        client.close()
        cluster.close()
    import catdask

    return {"catdask": catdask.__file__, "passes": rows, "empty passes": empty,
            "empty passes, no rows": none,
            "G Z checksum": float(np.abs(first).sum()),
            "repeat max rel diff": float(np.abs(first - again).max() / np.abs(first).max()),
            "G Z sample": first[:, :3, :].ravel().tolist()}


# ------------------------------------------------------------------ the parent

def _run_child(root, layout, args):
    return run_child_json(__file__, root, ["--child", layout, "--n", args.n,
                                           "--passes", args.passes], settle_seconds=3)


#: What the passes with empty tasks (:func:`empty_tasks`) report.
EMPTY_FIGURES = ("wall s", "driver CPU s", "driver main-thread CPU s",
                 "driver other-threads CPU s (scheduler, comms, nannies)", "driver add s",
                 "driver CPU net of idle s", "tasks", "results to driver MB",
                 "submitted to first task start s", "spread of task starts s",
                 "last task end to result s", "worker event-loop CPU s (summed)")


def _medians(rows):
    out = {}
    for k in rows[0]:
        vals = [r[k] for r in rows]
        if isinstance(vals[0], (list, tuple)):
            out[k] = [min(v[0] for v in vals), max(v[1] for v in vals)]
        else:
            out[k] = round(statistics.median(vals), 4)
    return out


def main():
    args = parse_args(__doc__, _options)
    args.n = args.n or (6_000 if args.quick else 50_000)
    if args.child:
        sys.path.insert(0, args.root)  # the code under test ahead of this tree
        import warnings

        warnings.filterwarnings("ignore")
        import logging

        logging.getLogger("distributed").setLevel(logging.ERROR)
        print(json.dumps(child(args), default=str))
        return
    layouts = (args.layouts or ("2x1,4x1" if args.quick else "2x1,16x1")).split(",")
    results: dict = {"N": args.n, "D": D, "K": K, "R": R, "load average start": load_average(),
                     "cpus": os.cpu_count()}
    with tempfile.TemporaryDirectory(prefix="catdask-baseline-") as tmp:
        codes = codes_to_compare(args.baseline_ref, tmp, results)
        for layout in layouts:
            passes: dict = {name: [] for name in codes}
            empty: dict = {name: [] for name in codes}
            none: dict = {name: [] for name in codes}
            checks: dict = {name: [] for name in codes}
            for _ in range(args.rounds):
                for name, root in codes.items():
                    out = _run_child(root, layout, args)
                    if "failed" in out:
                        results[f"{layout} {name} failed"] = out["failed"]
                        print(f"  {layout} {name} failed: {out['failed']}", flush=True)
                        continue
                    passes[name] += out["passes"]
                    empty[name] += out["empty passes"]
                    none[name] += out.get("empty passes, no rows", [])
                    checks[name].append(out)
                    walls = [round(p["wall s"], 3) for p in out["passes"]]
                    print(f"  {layout} {name}: wall {walls}"
                          f" load {load_average()}", flush=True)
            row: dict = {}
            for name in codes:
                if passes[name]:
                    row[name] = _medians(passes[name])
                    row[name + ", empty tasks"] = {
                        k: v for k, v in _medians(empty[name]).items() if k in EMPTY_FIGURES}
                if none[name]:
                    row[name + ", empty tasks with no rows"] = {
                        k: v for k, v in _medians(none[name]).items() if k in EMPTY_FIGURES}
            if len(codes) == 2 and all(passes.values()):
                a, b = codes
                ra, rb = row[a], row[b]
                for key in ("wall s", "driver CPU s", "driver CPU net of idle s",
                            "driver main-thread CPU s", "driver add s",
                            "results to driver MB", "last task end to result s",
                            "loss vs even split s"):
                    if ra.get(key):
                        row[f"{key}: this / baseline"] = round(rb[key] / ra[key], 3)
                ea, eb = row[a + ", empty tasks"], row[b + ", empty tasks"]
                for key in ("wall s", "driver CPU s", "driver main-thread CPU s"):
                    if ea.get(key):
                        row[f"empty tasks, {key}: this / baseline"] = round(eb[key] / ea[key], 3)
                sa = [c["G Z sample"] for c in checks[a]]
                sb = [c["G Z sample"] for c in checks[b]]
                if sa and sb:
                    x, y = np.asarray(sa[0]), np.asarray(sb[0])
                    row["G Z sample max rel diff this vs baseline"] = float(
                        np.abs(x - y).max() / np.abs(x).max())
            row["load"] = load_average()
            results[f"{layout} workers x threads"] = row
            print(f"  {layout}: {json.dumps(row, default=str)}", flush=True)
    results["load average end"] = load_average()
    report("what a Gram pass costs outside the tile arithmetic (issue 27)", results, args)


if __name__ == "__main__":
    main()
