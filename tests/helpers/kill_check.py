"""Kill a pytest run with SIGKILL and count the processes of that run still alive afterwards.

Usage (from the checkout; prints one line per kill)::

    python -m tests.helpers.kill_check tests/test_deployment.py 20 60 95

runs ``pytest FILE`` once per N, SIGKILLs the pytest process (only it: its children are left to
their own guards, as after ``kill -9``) N seconds after its start, and counts the processes of
that run 0, 5 and 10 s later. The processes of a run are found by a marker in their environment
(:data:`MARKER`, a fresh value per run, inherited by everything the run starts), so nothing else
on the machine is looked at; whatever is left at the end is killed. Used by
tests/test_killed_run_leaves_no_server.py (issue 44: no server outlives its test run).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field

import psutil

from .paths import REPO

MARKER = "CATDASK_TEST_RUN_MARKER"
#: Seconds after the kill at which the run's processes are counted.
CHECKPOINTS = (0, 5, 10)


def processes_with(marker: str) -> list[psutil.Process]:
    """This user's processes whose environment carries ``MARKER=marker``."""
    found = []
    for process in psutil.process_iter(["pid", "uids"]):
        try:
            if process.uids().real == os.getuid() and process.environ().get(MARKER) == marker:
                found.append(process)
        except psutil.Error:
            continue
    return found


def describe(processes) -> list[str]:
    out = []
    for p in processes:
        try:
            out.append(f"{p.pid} {' '.join(p.cmdline()[:6])}"[:160])
        except psutil.Error:
            continue
    return out


def kill_all(marker: str) -> None:
    """SIGKILL every process of the run (only those: they carry its marker)."""
    for process in processes_with(marker):
        try:
            process.kill()
        except psutil.Error:
            continue


@dataclass
class KillResult:
    path: str
    kill_at: float
    before: list[str]  # the run's processes just before the kill
    running: str = ""  # pytest's last output line then (-v: the test running, or set up)
    alive: dict[int, list[str]] = field(default_factory=dict)  # checkpoint -> survivors
    ended_early: int | None = None  # pytest's exit code, when it ended before the kill

    def line(self) -> str:
        if self.ended_early is not None:
            return (f"{self.path}: pytest ended ({self.ended_early}) before {self.kill_at:g} s; "
                    "nothing killed")
        counts = ", ".join(f"{len(v)} at {t} s" for t, v in self.alive.items())
        last = self.alive[max(self.alive)]
        return (f"{self.path} killed at {self.kill_at:g} s ({len(self.before)} processes; "
                f"pytest at {self.running[:70]!r}): "
                f"alive {counts}; load {os.getloadavg()[0]:.1f}"
                + (f"; left: {last}" if last else ""))


def kill_run(path: str, kill_at: float, *, extra_env=None, ready=None,
             ready_timeout=420.0) -> KillResult:
    """Run ``pytest path``, SIGKILL it at ``kill_at`` s (or, with ``ready``, once that file
    exists), count its processes at :data:`CHECKPOINTS`, then kill what is left."""
    marker = uuid.uuid4().hex
    env = dict(os.environ, **{MARKER: marker}, **(extra_env or {}))
    started = time.monotonic()
    output = tempfile.TemporaryFile()
    run = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider", path], cwd=REPO,
        env=env, stdout=output, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        while (not ready.exists()) if ready is not None else \
                time.monotonic() - started < kill_at:
            if run.poll() is not None:
                return KillResult(path, kill_at, [], ended_early=run.returncode)
            if ready is not None and time.monotonic() - started > ready_timeout:
                raise TimeoutError(f"{ready} did not appear in {ready_timeout:.0f} s")
            time.sleep(0.2)
        result = KillResult(path, round(time.monotonic() - started, 1),
                            describe(processes_with(marker)), _last_line(output))
        run.send_signal(signal.SIGKILL)
        run.wait()
        killed = time.monotonic()
        for checkpoint in CHECKPOINTS:
            time.sleep(max(0.0, killed + checkpoint - time.monotonic()))
            result.alive[checkpoint] = describe(processes_with(marker))
        return result
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
        kill_all(marker)
        output.close()


def _last_line(output) -> str:
    fd = output.fileno()  # pread: the offset pytest writes at stays where it is
    lines = os.pread(fd, os.fstat(fd).st_size, 0).decode(errors="replace").strip().splitlines()
    return lines[-1].strip() if lines else ""


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print("usage: python -m tests.helpers.kill_check PYTEST_FILE SECONDS [SECONDS...]",
              file=sys.stderr)
        return 2
    path, moments = argv[0], [float(a) for a in argv[1:]]
    worst = 0
    for kill_at in moments:
        result = kill_run(path, kill_at)
        print(result.line(), flush=True)
        if result.alive:
            worst = max(worst, len(result.alive[max(result.alive)]))
    return 1 if worst else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
