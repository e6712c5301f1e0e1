"""What the host's cores allow a Gram pass, and where a Dask pass loses against it.

    python benchmarks/cores_ceiling.py [--quick] [--parts topology,ceiling,timeline] [--json PATH]

Issue 27 asks one float32 ``G Z`` pass at N = 50,000 on 16 single-thread Dask workers to be
>= 5x the same host's 2-worker pass. This script separates the two things that ratio mixes:

- ``topology``: logical CPUs, physical cores (``/proc/cpuinfo``), the affinity mask and the
  cgroup's CPU quota: 16 logical CPUs may be 8 cores with two hardware threads each.
- ``ceiling``: the same pass with no Dask at all: the tile groups a 16-worker pass would run
  (``gram_tiles.gram_symmetric_class_product``, the task function itself) split over P forked
  processes with one BLAS thread each, started together; the wall time until the last one
  ends. P = 2 against P = 16 is the most any scheduler could get from these cores. The same
  for the pass's two ingredients alone (the tiles' BLAS product, and ``exp`` over a tile), to
  show which one scales worst. Interleaved rounds, medians.
- ``timeline``: one Dask pass (``DaskGramOperator.class_matmul``, float32, the default tile)
  on 2 and on ``cpus`` single-thread workers, cut into phases from the task stream: the
  driver's submit to the first task start, the spread of task starts, the tile tasks'
  durations, the tree reduction after the last tile task, and the return to the driver. The
  current pass (bands to the driver as tasks finish, tasks of >= 100 kernel entries per
  entry of their band) beside
  the former one (a tree of combine tasks on the workers, 10**8 entries per task),
  interleaved on one cluster.
- ``pass200k``: the same comparison at N = 200,000 on the embedded cluster's default shape.

D = 20, K = 5, R = 5 restarts, RBF with the default gamma, blobs from ``_common``.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (class_sorted_blobs, default_rbf, load_average,  # noqa: E402
                     local_cluster, parse_args, quiet_warnings, report)

D, K, R = 20, 5, 5


def _options(ap):
    ap.add_argument("--parts", default="topology,ceiling,timeline,pass200k")
    ap.add_argument("--rounds", type=int, default=3)


# ------------------------------------------------------------------------------ topology
def part_topology(args):
    """Logical CPUs, physical cores and what this process may use."""
    out: dict = {"os.cpu_count": os.cpu_count(),
                 "affinity CPUs": len(os.sched_getaffinity(0)), "load": load_average()}
    try:
        text = Path("/proc/cpuinfo").read_text()
        blocks = [b for b in text.split("\n\n") if b.strip()]
        cores, model = set(), ""
        for b in blocks:
            f = dict(line.split(":", 1) for line in b.splitlines() if ":" in line)
            f = {k.strip(): v.strip() for k, v in f.items()}
            cores.add((f.get("physical id", "0"), f.get("core id", f.get("processor"))))
            model = f.get("model name", model)
        out.update({"logical CPUs (cpuinfo)": len(blocks), "physical cores (cpuinfo)": len(cores),
                    "model": model})
    except OSError as exc:
        out["cpuinfo"] = str(exc)
    for path in ("/sys/fs/cgroup/cpu.max", "/sys/fs/cgroup/cpu/cpu.cfs_quota_us"):
        if os.path.exists(path):
            out[path] = Path(path).read_text().strip()
    try:
        lscpu = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout
        keep = ("Thread(s) per core", "Core(s) per socket", "Socket(s)", "L2", "L3",
                "Model name", "CPU max MHz", "Hypervisor")
        out["lscpu"] = {line.split(":", 1)[0].strip(): line.split(":", 1)[1].strip()
                        for line in lscpu.splitlines()
                        if ":" in line and line.split(":", 1)[0].strip().startswith(keep)}
    except (OSError, subprocess.SubprocessError) as exc:
        out["lscpu"] = str(exc)
    return out


# ------------------------------------------------------------------------------ ceiling
def _problem(N):
    """Sorted blobs, the kernel's float32 tile factors, z and class offsets, and the tile
    pairs cut into equal-work groups as ``DaskGramOperator._tile_tasks`` cuts them for 16
    threads."""
    from catdask.operators.gram_tiles import symmetric_tile_pairs
    from catdask.operators.gram_base import GRAM_TILE

    X, y = class_sorted_blobs(N, D, K)
    counts = np.bincount(y, minlength=K)
    offsets = np.concatenate([[0], np.cumsum(counts)]).tolist()
    kernel = default_rbf(D)
    left, right = kernel.tile_factors(X, np.float32)
    zt = np.random.default_rng(2).normal(size=(N, R)).astype(np.float32)
    pairs = symmetric_tile_pairs(N, GRAM_TILE)
    return left, right, zt, offsets, kernel, pairs


def _groups(pairs, n):
    work = np.cumsum((pairs[:, 1] - pairs[:, 0]) * (pairs[:, 3] - pairs[:, 2]))
    cuts = np.searchsorted(work, work[-1] * np.arange(1, n) / n, side="right")
    return [g for g in np.split(pairs, cuts) if len(g)]


_SHARED: dict = {}  # the problem, inherited by the forked processes


def _work(kind, groups):
    from catdask.operators.gram_tiles import gram_symmetric_class_product

    left, right, zt, offsets, kernel = (_SHARED[k] for k in
                                        ("left", "right", "zt", "offsets", "kernel"))
    for g in groups:
        if kind == "tile pass":
            gram_symmetric_class_product(left, right, g, offsets, zt, kernel)
        else:
            rows, cols = int((g[:, 1] - g[:, 0]).max()), int((g[:, 3] - g[:, 2]).max())
            buf = np.empty((rows, cols), dtype=left.dtype)
            # exp's argument: a real tile's exponents (an uninitialised buffer may hold NaNs
            # and denormals, which take exp's slow path)
            exponents = left[:rows] @ right[-cols:].T
            for a, b, c, d in g.tolist():
                T = buf[: b - a, : d - c]
                if kind == "BLAS product only":
                    np.matmul(left[a:b], right[c:d].T, out=T)
                else:  # exp only, over a tile of the same shape
                    np.exp(exponents[: b - a, : d - c], out=T)


def _child(kind, groups, barrier, conn):
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1):
        _work(kind, groups[:1])  # warm the caches and the allocator, untimed
        barrier.wait()
        t0 = time.perf_counter()
        _work(kind, groups)
        conn.send(time.perf_counter() - t0)


def _parallel_wall(kind, groups, P):
    """Seconds until the last of P processes has run its share of ``groups``."""
    ctx = mp.get_context("fork")
    barrier = ctx.Barrier(P + 1)
    shares = [groups[i::P] for i in range(P)]
    pipes = [ctx.Pipe(duplex=False) for _ in range(P)]
    procs = [ctx.Process(target=_child, args=(kind, shares[i], barrier, pipes[i][1]))
             for i in range(P)]
    for p in procs:
        p.start()
    barrier.wait()
    t0 = time.perf_counter()
    for recv, _ in pipes:
        recv.recv()
    wall = time.perf_counter() - t0
    for p in procs:
        p.join()
    return wall


def part_ceiling(args):
    N = 6_000 if args.quick else 50_000
    cpus = len(os.sched_getaffinity(0))
    left, right, zt, offsets, kernel, pairs = _problem(N)
    _SHARED.update(left=left, right=right, zt=zt, offsets=offsets, kernel=kernel)
    n_groups = max(16, cpus)  # the tasks of a pass on max(16, cpus) worker threads
    groups = _groups(pairs, n_groups)
    counts = sorted({P for P in (2, 4, 8, cpus) if P <= cpus})
    kinds = ("tile pass", "BLAS product only", "exp only")
    times: dict = {(k, P): [] for k in kinds for P in counts}
    for _ in range(args.rounds):
        for kind in kinds:
            for P in counts:
                times[(kind, P)].append(_parallel_wall(kind, groups, P))
    out: dict = {"N": N, "groups": len(groups), "processes": counts, "load": load_average()}
    for kind in kinds:
        row = {f"P={P} s": round(statistics.median(times[(kind, P)]), 3) for P in counts}
        base = statistics.median(times[(kind, counts[0])])
        row.update({f"P={P} speed-up vs P={counts[0]}":
                    round(base / statistics.median(times[(kind, P)]), 2) for P in counts[1:]})
        out[kind] = row
    entries = float(((pairs[:, 1] - pairs[:, 0]) * (pairs[:, 3] - pairs[:, 2])).sum())
    P0 = counts[0]
    out["tile pass ns per entry and process, P=%d" % P0] = round(
        statistics.median(times[("tile pass", P0)]) * P0 / entries * 1e9, 3)
    out["tile pass ns per entry and process, P=%d" % counts[-1]] = round(
        statistics.median(times[("tile pass", counts[-1])]) * counts[-1] / entries * 1e9, 3)
    return out


# ------------------------------------------------------------------------------ timeline
def _phases(ts, t_submit, t_return):
    """A pass's task stream cut into phases (seconds)."""
    tiles, combines = [], []
    for t in ts:
        comp = [s for s in t.get("startstops", ()) if s.get("action") == "compute"]
        if not comp:
            continue
        (tiles if "combine" not in str(t["key"]) else combines).append(
            (comp[0]["start"], comp[-1]["stop"]))
    transfer = sum(s["stop"] - s["start"] for t in ts for s in t.get("startstops", ())
                   if s.get("action") == "transfer")
    starts = sorted(a for a, _ in tiles)
    stops = sorted(b for _, b in tiles)
    durations = sorted(b - a for a, b in tiles)
    last = max([b for _, b in tiles + combines])
    return {"wall": t_return - t_submit,
            "submit to first tile start": starts[0] - t_submit,
            "spread of tile starts": starts[-1] - starts[0],
            "tile task min": durations[0], "tile task median": statistics.median(durations),
            "tile task max": durations[-1],
            "first to last tile end": stops[-1] - stops[0],
            "last tile end to last combine end": last - stops[-1],
            "last combine end to the driver": t_return - last,
            "transfer seconds (summed)": transfer, "tile tasks": len(tiles),
            "combine tasks": len(combines)}


def _sum_row_bands(*parts):
    """The former tree's combine: partial sums (``gram_symmetric_class_product``'s parts)
    added in float64 into the band ``lo:`` of the smallest ``lo``, returned as one part in the
    parts' dtype (the former tasks returned that whole band)."""
    from catdask.operators import gram_tiles

    lo = min(p[0] for p in parts)
    head = parts[0][2]
    K, R = head.shape[0], head.shape[2]
    N = parts[0][1] + parts[0][4].shape[1]
    out = np.zeros((K, N, R))
    for p in parts:
        gram_tiles.add_class_product_part(out, p)
    return lo, N, out[:, lo:].astype(head.dtype), 0, np.zeros((0, 0, R), head.dtype)


def _former(op):
    """``op`` as the tile pass ran before 2026-11-26's last session (the baseline): 10**8
    kernel entries per task, the row bands added in a tree on the workers (fan-in 8)."""
    op.tile_task_entries, op.tile_entries_per_band_entry = 10**8, 0

    def add_results(tasks, name, add, extra=None):
        add(op._runner.reduce(tasks, _sum_row_bands, name, extra=extra))

    op._add_results = add_results
    return op


def _operators(X, y):
    from catdask.core.classes import ClassIndex
    from catdask.operators import DaskGramOperator

    def make():
        return DaskGramOperator(X, ClassIndex(y, K), default_rbf(D), cache="recompute",
                                precision="float32")

    return {"former (tree, 1e8 per task)": _former(make()),
            "current (to the driver, >= 100 per band entry)": make()}


def _timeline(X, y, n_workers, threads, rounds, warm=True):
    """Former and current pass on one cluster, interleaved; each pass cut into phases."""
    from distributed import get_task_stream

    cluster, client = local_cluster(n_workers, threads_per_worker=threads)
    try:
        ops = _operators(X, y)
        z = np.random.default_rng(2).normal(size=(R, X.shape[0]))
        passes: dict = {name: [] for name in ops}
        results = {}
        for name, op in ops.items():
            results[name] = op.class_matmul(z) if warm else None
        for _ in range(rounds):
            for name, op in ops.items():
                with get_task_stream(client) as ts:
                    t0 = time.time()
                    results[name] = op.class_matmul(z)
                    t1 = time.time()
                passes[name].append(_phases(ts.data, t0, t1))
        a, b = results.values()
        for op in ops.values():
            op.close()
    finally:
        client.close()
        cluster.close()
    out: dict = {name: {k: round(statistics.median(p[k] for p in rows), 4) for k in rows[0]}
                 for name, rows in passes.items()}
    former, current = (out[name]["wall"] for name in ops)
    out["former / current wall"] = round(former / current, 3)
    out["max rel diff of G Z"] = float(np.abs(a - b).max() / np.abs(b).max())
    return out


def part_timeline(args):
    """One float32 pass at N = 50,000 on 2 and on ``cpus`` single-thread workers."""
    N = 6_000 if args.quick else 50_000
    X, y = class_sorted_blobs(N, D, K)
    cpus = len(os.sched_getaffinity(0))
    out: dict = {"N": N}
    for n in sorted({2, cpus}):
        out[f"{n} workers x 1 thread"] = row = _timeline(X, y, n, 1, args.rounds)
        print(f"  timeline {n} workers: {row}", flush=True)
    name = "current (to the driver, >= 100 per band entry)"
    if cpus != 2:
        out[f"current: {cpus} workers vs 2 workers"] = round(
            out["2 workers x 1 thread"][name]["wall"]
            / out[f"{cpus} workers x 1 thread"][name]["wall"], 2)
    return out


def part_pass200k(args):
    """One float32 pass at N = 200,000 on the embedded default's shape and on single-thread
    workers, former and current, two interleaved rounds, no warm-up (a pass is ~7 s)."""
    from catdask.distributed.cluster import default_threads_per_worker

    N = 12_000 if args.quick else 200_000
    X, y = class_sorted_blobs(N, D, K)
    cpus = len(os.sched_getaffinity(0))
    threads = default_threads_per_worker(cpus)
    out: dict = {"N": N}
    for n_workers, t in dict.fromkeys([(max(1, cpus // threads), threads), (cpus, 1)]):
        key = f"{n_workers} workers x {t} threads"
        out[key] = _timeline(X, y, n_workers, t, 2, warm=False)
        print(f"  pass200k {key}: {out[key]}", flush=True)
    return out


PARTS = {"topology": part_topology, "ceiling": part_ceiling, "timeline": part_timeline,
         "pass200k": part_pass200k}


def main():
    args = parse_args(__doc__, _options)
    quiet_warnings()
    results: dict = {}
    for name in args.parts.split(","):
        t0 = time.perf_counter()
        results[name] = PARTS[name](args)
        results[name + " seconds"] = round(time.perf_counter() - t0, 1)
        print(f"  {name}: {results[name]}", flush=True)
    report("the cores' ceiling for a Gram pass (issue 27)", results, args)


if __name__ == "__main__":
    main()
