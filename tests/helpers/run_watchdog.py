"""Ends every process of a pytest run once pytest is gone: ``python run_watchdog.py PID MARKER``.

Started by tests/conftest.py at the start of the run (its own session, so a Ctrl-C to pytest's
terminal does not reach it). It waits until its parent, pytest (``PID``), is gone, however it
ended (SIGKILL too), then sends SIGTERM to every process of this user whose environment carries
``CATDASK_PYTEST_RUN=MARKER`` (conftest sets it, so everything the run started inherits it and
nothing else has it), and SIGKILL 2 s later to whatever is left.

Why, besides the guards of the servers (:mod:`catdask.orchestration.parent_death`): a test also
runs commands that are not servers and have no guard (``catdask train`` through
``subprocess.run``, ``prefect server database upgrade``), which ran on after a killed run
(issue 44: no process of a test run alive 10 s after SIGKILL). Run by path; imports nothing
of catdask or the tests.
"""

from __future__ import annotations

import os
import signal
import sys
import time

VARIABLE = "CATDASK_PYTEST_RUN"
POLL_SECONDS = 0.5
TERM_GRACE_SECONDS = 2.0


def marked_processes(marker: str) -> list[int]:
    """Processes (other than this one) whose environment holds ``VARIABLE=marker``."""
    wanted, me, found = f"{VARIABLE}={marker}".encode(), os.getpid(), []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        try:  # another user's process, or one that just ended: not readable, not ours
            with open(f"/proc/{entry}/environ", "rb") as environ:
                if wanted in environ.read().split(b"\0"):
                    found.append(int(entry))
        except OSError:
            continue
    return found


def _signal_all(marker: str, sig: int) -> None:
    for pid in marked_processes(marker):
        try:
            os.kill(pid, sig)
        except OSError:
            continue


def main(argv: list[str]) -> int:
    parent, marker = int(argv[0]), argv[1]
    if not os.path.isdir("/proc"):
        return 0  # Linux only; elsewhere the servers' own guards are all there is
    while os.getppid() == parent:
        time.sleep(POLL_SECONDS)
    _signal_all(marker, signal.SIGTERM)
    time.sleep(TERM_GRACE_SECONDS)
    for _ in range(2):  # twice: a process may have started one while it stopped
        _signal_all(marker, signal.SIGKILL)
        time.sleep(0.5)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
