"""Tie a child process's life to its parent: ``python parent_death.py PID [SIGNUM] -- COMMAND ...``.

Run by path (nothing of catdask is imported), it asks Linux to send the child SIGTERM (or
``SIGNUM``: SIGKILL for a throw-away server whose orderly stop may take long, as a test's Prefect
server) when its parent dies (``prctl(PR_SET_PDEATHSIG)``), checks the parent is still ``PID``,
then replaces itself with ``COMMAND``, so a server started by a CLI command stops even when the
command is SIGKILLed. Elsewhere it runs ``COMMAND`` as its own child and polls the parent instead.

Linux delivers the signal when the *thread* that started the child exits: start guarded
processes from the main thread.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
POLL_SECONDS = 0.5


def _request_parent_death_signal(sig: int) -> None:
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"prctl(PR_SET_PDEATHSIG) failed: {os.strerror(err)}")


def _watch_and_run(parent: int, command: list[str], sig: int) -> int:
    child = subprocess.Popen(command)
    while child.poll() is None:
        if os.getppid() != parent:
            child.send_signal(sig)
            try:
                return child.wait(timeout=30)
            except subprocess.TimeoutExpired:
                child.kill()
                return child.wait()
        time.sleep(POLL_SECONDS)
    return child.returncode


def main(argv: list[str]) -> int:
    sig = int(signal.SIGTERM)
    if len(argv) > 1 and argv[1].isdigit():
        sig, argv = int(argv[1]), [argv[0], *argv[2:]]
    if len(argv) < 3 or argv[1] != "--":
        print("usage: parent_death.py PARENT_PID [SIGNUM] -- COMMAND [ARGS...]", file=sys.stderr)
        return 2
    parent, command = int(argv[0]), argv[2:]
    if sys.platform.startswith("linux"):
        _request_parent_death_signal(sig)
        if os.getppid() != parent:  # the parent died before the request: do not start
            return 1
        os.execvp(command[0], command)  # does not return
    if os.getppid() != parent:
        return 1
    return _watch_and_run(parent, command, sig)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
