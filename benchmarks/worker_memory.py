"""Peak memory of a Dask kernel fit: the driver and every worker, this code against a baseline.

    python benchmarks/worker_memory.py [--quick] [--layouts 2x1,16x1] [--n 50000]
                                       [--max-iter 3] [--baseline-ref main] [--passes]
                                       [--nvml-compare] [--repeats 1] [--json PATH]

Issue 27 asks the peak RSS of driver + workers at N = 50,000 (D = 20, K = 5, RBF) to stay
<= 3 GiB with 16 workers. Each measurement runs in a fresh interpreter: a LocalCluster of the
layout (``WORKERSxTHREADS``, made like the embedded one: ``start_local_cluster``), then
``KernelCategorySpace(certify=False, max_iter=...)`` on a Dask array, the RSS of the driver
and of every worker process sampled every 50 ms (the sum's peak, each process's peak). A
child not yet exec'd (a worker being spawned, still a (v)fork whose RSS reads as the driver's)
is left out (``_common.PeakRSS`` says why); the peak counting it, the former measure, is
printed beside. What a worker holds is read on the worker after the start and after the fit
(``/proc/self/status``: anonymous and file-backed; ``smaps``: THP-mapped regions, the largest
mappings) with the heavy packages it has imported, so a run on another host shows where its
per-worker memory sits; for the largest worker after the fit also the Dask data it still holds
(bytes, keys, task groups), which tells data from memory the process kept. The iterations are capped: memory, not convergence, is measured.

The baseline is the code at ``--baseline-ref`` (default ``main``), exported from git into a
temporary directory and measured by the same child script in the same run, interleaved with
the working tree's code layout by layout (``--baseline-ref ''`` skips it). ``--passes`` also
times one float32 ``G Z`` pass on 2 single-thread workers for both codes (alternating
children, medians), so a memory change is seen not to slow the pass.

``--nvml-compare`` measures this code twice per layout, interleaved ``--repeats`` times: its
workers as made (``distributed.diagnostics.nvml`` off, ``catdask.distributed.cluster.
WORKER_CONFIG``) and with NVML on, Dask's default, which initialises NVML in every worker on a
host with a GPU (what the embedded cluster did before; no difference is expected on a host
without one). Medians of the peaks and of the workers' RSS after start are printed.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (PeakRSS, blobs, codes_to_compare, load_average,  # noqa: E402
                     parse_args, quiet_warnings, rbf_gamma, report, run_child_json)

D, K = 20, 5
REPO_ROOT = Path(__file__).resolve().parent.parent
MiB = 1024**2
GiB = 1024**3
#: Packages a Gram tile task does not need; listed when a worker has imported them.
HEAVY = ("scipy", "scipy.linalg", "scipy.sparse", "sklearn", "pandas", "pyarrow", "torch",
         "jax", "cupy", "numba", "zarr", "prefect", "matplotlib", "dask.array", "pynvml")


def _options(ap):
    ap.add_argument("--layouts", default=None,
                    help="comma-separated WORKERSxTHREADS (default 2x1,16x1; quick 2x1; "
                         "'none': only --passes)")
    ap.add_argument("--n", type=int, default=None, help="samples (default 50,000; quick 4,000)")
    ap.add_argument("--max-iter", type=int, default=3)
    ap.add_argument("--baseline-ref", default="main",
                    help="git ref of the baseline code ('' for none)")
    ap.add_argument("--passes", action="store_true",
                    help="also time a float32 pass on 2 workers, baseline against this code")
    ap.add_argument("--rounds", type=int, default=2, help="pass-timing rounds per code")
    ap.add_argument("--nvml-compare", action="store_true",
                    help="also measure this code with the workers' NVML diagnostics on")
    ap.add_argument("--repeats", type=int, default=1, help="children per code and layout")
    ap.add_argument("--worker-nvml", default="off", help="(internal) on: Dask's default")
    ap.add_argument("--child", default=None, help="(internal) fit or pass")
    ap.add_argument("--root", default=None, help="(internal) the code to import")


# ------------------------------------------------------------------ measured in a worker
def worker_memory_state():
    """This process's memory (MiB, /proc/self/status and smaps), its threads, the heavy
    packages it has imported, and its largest mappings by resident size."""
    import threading as _threading

    status, roll = {}, {}
    # Resident sizes from the kernel's counters (/proc/self/status, what psutil's RSS reads):
    # smaps' own Rss also counts the shared huge zero page under a read-only THP region (seen
    # here: a 61 MiB region "resident" while the process's RSS was 88 MiB in all).
    with open("/proc/self/status") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 3 and parts[-1] == "kB":
                status[parts[0].rstrip(":")] = int(parts[1]) / 1024
    with open("/proc/self/smaps_rollup") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 3 and parts[-1] == "kB":
                roll[parts[0].rstrip(":")] = int(parts[1]) / 1024
    by_name: dict = {}
    with open("/proc/self/smaps") as f:
        name = None
        for line in f:
            parts = line.split()
            if parts and "-" in parts[0] and not parts[0].endswith(":"):
                name = os.path.basename(parts[5]) if len(parts) > 5 else "[anonymous]"
            elif parts and parts[0] == "Rss:":
                by_name[name] = by_name.get(name, 0) + int(parts[1]) / 1024
    top = sorted(by_name.items(), key=lambda kv: -kv[1])[:8]
    nvml = sys.modules.get("distributed.diagnostics.nvml")
    return {"rss": status.get("VmRSS", 0), "anonymous": status.get("RssAnon", 0),
            "anon_huge_pages": roll.get("AnonHugePages", 0),
            "file_backed": status.get("RssFile", 0) + status.get("RssShmem", 0),
            "threads": _threading.active_count(), "modules": len(sys.modules),
            "heavy_imported": [m for m in HEAVY if m in sys.modules],
            "nvml_initialised": bool(nvml and getattr(nvml, "is_initialized", lambda: 0)()),
            "largest_mappings_MiB": {k: round(v, 1) for k, v in top},
            "catdask": sys.modules["catdask"].__file__ if "catdask" in sys.modules else None}


def worker_data_held(dask_worker):
    """What a worker's data store holds (Dask's own count of result sizes): bytes in all and
    the largest key groups (task-name prefixes), so that a worker far above the others can
    be told holding data from holding freed memory its allocator kept."""
    from dask.utils import key_split

    tasks = dask_worker.state.tasks
    sizes = {k: tasks[k].get_nbytes() for k in list(dask_worker.data) if k in tasks}
    groups: dict = {}
    for key, n in sizes.items():
        groups[key_split(key)] = groups.get(key_split(key), 0) + n
    top = sorted(groups.items(), key=lambda kv: -kv[1])[:4]
    return {"MiB held": round(sum(groups.values()) / MiB, 1), "keys": len(dask_worker.data),
            "largest groups MiB": {k: round(v / MiB, 1) for k, v in top}}


class Sampler(PeakRSS):
    """:class:`_common.PeakRSS` with the samples by process (``now``) and, beside the peak,
    the former measure that counted children not yet exec'd (``peak_counting_unexeced``)."""

    def __init__(self, interval=0.05):
        super().__init__(interval)
        self._unexeced_rss = 0
        self.peak_counting_unexeced = 0

    def now(self):
        import psutil

        out = {"driver": self._proc.memory_info().rss}
        for p in self._proc.children(recursive=True):
            try:
                cmdline = p.cmdline()
                rss = p.memory_info().rss
            except psutil.Error:
                continue
            if "resource_tracker" in " ".join(cmdline):
                continue  # multiprocessing's helper, 13 MB, not a worker
            if cmdline == self._cmdline:
                # Not exec'd yet: a worker being spawned shares this process's pages until
                # then, and its RSS reads as this process's (see _common.PeakRSS).
                self.unexeced_seen += 1
                self._unexeced_rss += rss
                continue
            out[p.pid] = rss
        return out

    def _sample(self):
        self._unexeced_rss = 0
        now = self.now()
        self.peak = max(self.peak, sum(now.values()))
        self.peak_counting_unexeced = max(self.peak_counting_unexeced,
                                          sum(now.values()) + self._unexeced_rss)
        for k, v in now.items():
            self.peaks[k] = max(self.peaks.get(k, 0), v)


def _start(layout, worker_nvml="off"):
    from catdask import operators  # noqa: F401  (what the workers import as they start)
    from catdask.distributed import cluster as cluster_module
    from catdask.distributed.cluster import start_local_cluster

    if worker_nvml == "on":  # Dask's default: NVML initialised in workers on a GPU host
        cluster_module.WORKER_CONFIG = {"distributed.diagnostics.nvml": True}

    workers, threads = (int(v) for v in layout.split("x"))
    return start_local_cluster(workers, threads_per_worker=threads, set_as_default=True)


def _summary(states):
    rss = [s["rss"] for s in states]
    return {"median MiB": round(statistics.median(rss), 1), "max MiB": round(max(rss), 1),
            "anonymous median MiB": round(statistics.median(s["anonymous"] for s in states), 1),
            "file-backed median MiB": round(statistics.median(s["file_backed"] for s in states),
                                            1),
            "THP-mapped (smaps) median MiB": round(statistics.median(s["anon_huge_pages"]
                                                             for s in states), 1)}


def child_fit(args):
    """One fit on a fresh cluster of ``--layout``: the figures, as one JSON line."""
    import dask.array as da

    from catdask import KernelCategorySpace

    X, y = blobs(args.n, D, K, seed=3)
    with Sampler() as mem:
        cluster, client = _start(args.layout, args.worker_nvml)
        try:
            time.sleep(1.0)  # the workers' start settles
            started = list(client.run(worker_memory_state).values())
            at_start = mem.now()
            t0 = time.perf_counter()
            est = KernelCategorySpace(gamma=rbf_gamma(D), max_iter=args.max_iter, certify=False,
                                      random_state=0).fit(da.from_array(X, chunks=(10_000, D)), y)
            fit_s = time.perf_counter() - t0
            after_by = client.run(worker_memory_state)
            after = list(after_by.values())
            held = client.run(worker_data_held)
        finally:
            client.close()
            cluster.close()
    workers = [v for k, v in mem.peaks.items() if k != "driver"]
    big = max(after_by, key=lambda a: after_by[a]["rss"])
    return {
        # Dask data it holds (none after a fit: the estimator keeps no Dask array) against
        # its memory: anonymous memory beyond the data is what the process kept.
        "largest worker after fit": {
            "rss MiB": round(after_by[big]["rss"], 1),
            "anonymous MiB": round(after_by[big]["anonymous"], 1), **held.get(big, {}),
            "largest_mappings_MiB": after_by[big]["largest_mappings_MiB"]},
        "median worker data held MiB": round(statistics.median(h["MiB held"]
                                                               for h in held.values()), 1),
        "catdask imported from": after[0]["catdask"],
        "peak RSS driver + workers GiB": round(mem.peak / GiB, 3),
        "driver peak MiB": round(mem.peaks["driver"] / MiB, 1),
        "worker peak MiB (median, max)": (round(statistics.median(workers) / MiB, 1),
                                          round(max(workers) / MiB, 1)),
        "driver + workers after start GiB": round(sum(at_start.values()) / GiB, 3),
        "workers after start": _summary(started),
        "workers after fit": _summary(after),
        "a worker after fit": {k: after[0][k] for k in ("threads", "modules", "heavy_imported",
                                                         "nvml_initialised",
                                                         "largest_mappings_MiB")},
        "fit s": round(fit_s, 1), "objective": est.objective_,
        "samples of children not yet exec'd (left out)": mem.unexeced_seen,
        "peak GiB counting them (the former measure)": round(mem.peak_counting_unexeced / GiB, 3),
    }


def child_pass(args):
    """Median seconds of a float32 ``G Z`` pass on 2 single-thread workers."""
    import numpy as np

    from catdask.core.classes import ClassIndex
    from catdask.kernels import make_kernel
    from catdask.operators import DaskGramOperator

    X, y = blobs(args.n, D, K, seed=3)
    order = np.argsort(y, kind="stable")
    cluster, client = _start("2x1")
    try:
        op = DaskGramOperator(X[order], ClassIndex(y[order], K),
                              make_kernel("rbf", n_features=D, gamma=rbf_gamma(D)),
                              cache="recompute", precision="float32")
        z = np.random.default_rng(2).normal(size=(5, args.n))
        op.class_matmul(z)  # warm-up
        times = []
        for _ in range(3):
            t0 = time.perf_counter()
            op.class_matmul(z)
            times.append(time.perf_counter() - t0)
        op.close()
    finally:
        client.close()
        cluster.close()
    return {"pass s": times}


# ------------------------------------------------------------------ the parent

def _run_child(kind, root, args, layout="2x1", worker_nvml="off"):
    return run_child_json(__file__, root, ["--child", kind, "--n", args.n, "--max-iter",
                                           args.max_iter, "--layouts", layout,
                                           "--worker-nvml", worker_nvml])


def _median_of(runs, key, index=None):
    values = [r[key] if index is None else r[key][index] for r in runs if key in r]
    return round(statistics.median(values), 3) if values else None


def nvml_comparison(layout, args):
    """This code's fit on ``layout`` with the workers' NVML off (as made) and on, interleaved
    ``args.repeats`` times: every run and the medians."""
    runs: dict = {"nvml off (as made)": [], "nvml on (Dask's default)": []}
    for _ in range(args.repeats):
        for name, flag in (("nvml off (as made)", "off"), ("nvml on (Dask's default)", "on")):
            out = _run_child("fit", REPO_ROOT, args, layout, flag)
            print(f"  {layout} {name}: {out}", flush=True)
            runs[name].append(out)
    medians = {name: {
        "peak RSS GiB": _median_of(rs, "peak RSS driver + workers GiB"),
        "worker peak median MiB": _median_of(rs, "worker peak MiB (median, max)", 0),
        "worker peak max MiB": _median_of(rs, "worker peak MiB (median, max)", 1),
        "driver + workers after start GiB": _median_of(rs, "driver + workers after start GiB"),
        "nvml initialised in a worker": [r.get("a worker after fit", {}).get("nvml_initialised")
                                         for r in rs],
        "fit s": _median_of(rs, "fit s")} for name, rs in runs.items()}
    return {"runs": runs, "medians": medians}


def main():
    args = parse_args(__doc__, _options)
    quiet_warnings()
    args.n = args.n or (4_000 if args.quick else 50_000)
    if args.child:
        # The code under test first on the path (ahead of this tree, which _common added).
        sys.path.insert(0, args.root)
        args.layout = args.layouts
        out = child_fit(args) if args.child == "fit" else child_pass(args)
        print(json.dumps(out, default=str))
        return
    layouts = (args.layouts or ("2x1" if args.quick else "2x1,16x1")).split(",")
    if args.layouts == "none":  # --passes alone
        layouts = []
    results: dict = {"N": args.n, "D": D, "K": K, "max_iter": args.max_iter,
                     "load average start": load_average()}
    try:
        thp = Path("/sys/kernel/mm/transparent_hugepage/enabled").read_text().strip()
    except OSError:
        thp = "unknown"
    results["transparent huge pages"] = thp
    with tempfile.TemporaryDirectory(prefix="catdask-baseline-") as tmp:
        codes = codes_to_compare(args.baseline_ref, tmp, results)
        for layout in layouts:
            row = {}
            for name, root in codes.items():  # baseline then this code, layout by layout
                row[name] = _run_child("fit", root, args, layout)
                print(f"  {layout} {name}: {row[name]}", flush=True)
            base = row.get(f"baseline ({args.baseline_ref})", {})
            this = row["this code"]
            key = "peak RSS driver + workers GiB"
            if key in base and key in this:
                row["peak ratio this / baseline"] = round(this[key] / base[key], 3)
                row["worker peak median ratio"] = round(
                    this["worker peak MiB (median, max)"][0]
                    / base["worker peak MiB (median, max)"][0], 3)
            results[f"{layout} workers x threads"] = row
            if args.nvml_compare:
                results[f"{layout} NVML off against on"] = nvml_comparison(layout, args)
        if args.passes:
            times: dict = {name: [] for name in codes}
            for _ in range(args.rounds):  # alternating children, medians
                for name, root in codes.items():
                    out = _run_child("pass", root, args)
                    times[name] += out.get("pass s", [])
            results["float32 pass on 2x1, every pass s"] = {
                name: [round(v, 3) for v in t] for name, t in times.items()}
            results["float32 pass on 2x1, median s"] = {
                name: round(statistics.median(t), 3) if t else None
                for name, t in times.items()}
            meds = list(results["float32 pass on 2x1, median s"].values())
            if len(meds) == 2 and all(meds):
                results["pass time ratio this / baseline"] = round(meds[1] / meds[0], 3)
    results["load average end"] = load_average()
    report("peak RSS of a Dask kernel fit, per worker (issue 27)", results, args)


if __name__ == "__main__":
    main()
