"""The simulated-host harness itself (tests/helpers/hosts.py), before anything relies on it:
a host does not see the driver's files and cannot write the installed environment; a Dask
scheduler host and two worker hosts on their own loopback addresses form a cluster the driver
reaches; stopping a host ends its whole process tree. Skipped, saying why, where ``unshare
--mount`` is not permitted.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import pytest

from .helpers.hosts import Host, dask_cluster_hosts, host_address, require_hosts
from .helpers.paths import REPO

pytest.importorskip("distributed")


@pytest.fixture(autouse=True)
def _hosts_possible():
    require_hosts()


def _idle_host(name, index, tmp_path, **kwargs) -> Host:
    return Host(name, host_address(index), ["sleep", "600"], log=tmp_path / f"{name}.log",
                **kwargs)


def test_a_host_sees_none_of_the_drivers_files(tmp_path):
    driver_file = tmp_path / "written-by-the-driver.txt"
    driver_file.write_text("driver")
    # A driver folder outside /tmp (as a working folder under /work or /home would be).
    outside = Path(tempfile.mkdtemp(prefix="catdask-driver-", dir="/var/tmp"))
    try:
        (outside / "also-written.txt").write_text("driver")
        with _idle_host("shell", 1, tmp_path, hide=[outside]) as host:
            assert host.run(["test", "-e", driver_file]).returncode == 1
            assert host.run(["test", "-e", outside / "also-written.txt"]).returncode == 1
            assert host.run(["ls", "-A", "/tmp"]).stdout.split() == ["home", "work"]
            # The installed environment is there, read-only.
            imported = host.run([sys.executable, "-c", "import catdask; print(catdask.__file__)"])
            assert imported.returncode == 0, imported.stderr
            written = host.run(["touch", os.path.join(sys.prefix, "written-by-a-host")])
            assert written.returncode != 0 and "Read-only" in written.stderr
            # What the host writes in its /tmp stays there.
            assert host.run(["sh", "-c", "echo host > /tmp/work/mine"]).returncode == 0
            assert host.run(["cat", "/tmp/work/mine"]).stdout == "host\n"
        assert driver_file.read_text() == "driver"
    finally:
        shutil.rmtree(outside, ignore_errors=True)


@pytest.mark.slow
def test_scheduler_and_two_worker_hosts_form_a_cluster_the_driver_reaches(tmp_path):
    from distributed import Client

    driver_file = tmp_path / "driver.txt"
    driver_file.write_text("x")
    with dask_cluster_hosts(tmp_path) as (address, _), Client(address, timeout=60) as client:
        assert address.startswith(f"tcp://{host_address(1)}:")
        client.wait_for_workers(2, timeout=120)
        workers = client.scheduler_info()["workers"]
        assert sorted(w.split(":")[1] for w in workers) == [
            f"//{host_address(2)}", f"//{host_address(3)}"]
        seen = client.run(os.path.exists, str(driver_file))
        assert seen and not any(seen.values()), seen
        assert client.submit(sum, [1, 2, 3], pure=False).result(timeout=60) == 6


def _group(pgid: int) -> list[psutil.Process]:
    """Every process of process group ``pgid`` (orphans reparented away from the tree too)."""
    found = []
    for proc in psutil.process_iter():
        try:
            if os.getpgid(proc.pid) == pgid:
                found.append(proc)
        except (ProcessLookupError, psutil.Error):
            pass
    return found


def _wait_for_group(pgid: int, size: int) -> list[psutil.Process]:
    deadline = time.monotonic() + 30
    while len(_group(pgid)) < size and time.monotonic() < deadline:
        time.sleep(0.2)
    group = _group(pgid)
    assert len(group) >= size, group
    return group


# Two children and a grandchild that its parent abandons (reparented out of the tree).
TREE = "sleep 600 & sleep 600 & (sleep 600 &) ; wait"


def test_stopping_a_host_ends_its_whole_tree(tmp_path):
    host = Host("tree", host_address(4), ["sh", "-c", TREE], log=tmp_path / "tree.log")
    try:
        group = _wait_for_group(host.pid, 4)
        started = time.monotonic()
        host.stop(timeout=10)
        _, alive = psutil.wait_procs(group, timeout=5)
        assert not alive, alive
        assert time.monotonic() - started < 20
    finally:
        host.proc.kill()


def test_a_host_dies_with_the_driver_even_by_sigkill(tmp_path):
    """A driver killed with SIGKILL cleans nothing up: the parent-death signal ends the host."""
    driver_code = (
        "import sys, time\n"
        "from pathlib import Path\n"
        "from tests.helpers.hosts import Host\n"
        f"host = Host('orphan', '127.0.0.6', ['sh', '-c', {TREE!r}],\n"
        f"            log=Path({str(tmp_path / 'h.log')!r}))\n"
        "print(host.pid, flush=True)\n"
        "time.sleep(600)\n"
    )
    driver = subprocess.Popen([sys.executable, "-c", driver_code], cwd=REPO, text=True,
                              stdout=subprocess.PIPE, env=dict(os.environ, PYTHONPATH=str(REPO)))
    try:
        host_pid = int(driver.stdout.readline())
        group = _wait_for_group(host_pid, 4)
        driver.send_signal(signal.SIGKILL)
        driver.wait(timeout=10)
        # SIGTERM reaches the host's first process; sh passes nothing on, so the test checks
        # the first process, and the harness's group kill (above) covers the rest.
        _, alive = psutil.wait_procs([p for p in group if p.pid == host_pid], timeout=10)
        assert not alive, alive
    finally:
        driver.kill()
        for proc in _group(host_pid) if "host_pid" in locals() else []:
            proc.kill()
