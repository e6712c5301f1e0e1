"""A served run executes only what ``catdask serve`` registered (issue 44, item 1). Slow.

The real ``catdask serve`` (its own Prefect server, no credential configured) on a store
holding iris; then, as an API user would:

- without the credential serve printed, the API refuses to PATCH a deployment (401);
- with it, four PATCHes of the ingest deployment (a pull step that writes a file, an entry
  point and path naming a script that writes a file, both, job variables that name another
  store): every run completes with serve's own ingest flow and nothing is written;
- a parameter the flow does not take (``Store``, ``store_``) is refused by the API (409), and
  a request that turns the schema off is refused by the run process: Failed, one line.
"""

from __future__ import annotations

import base64
import json
import re
import signal
import time
import urllib.error
import urllib.request
from types import SimpleNamespace

import pytest

pytest.importorskip("prefect")
pytest.importorskip("distributed")

from catdask.pipeline import ingest_dataset  # noqa: E402

from .helpers.procs import BIN, Managed, child_env, free_port, seeded_prefect_home  # noqa: E402

pytestmark = [pytest.mark.slow]

INGEST = "catdask-ingest/ingest"


class _Api:
    """Plain HTTP calls to the served API, with or without the basic credential."""

    def __init__(self, url, auth=None):
        self.url, self.auth = url, auth

    def call(self, method, path, body=None):
        request = urllib.request.Request(
            f"{self.url}{path}", method=method,
            data=None if body is None else json.dumps(body).encode(),
            headers={"Content-Type": "application/json"})
        if self.auth:
            token = base64.b64encode(self.auth.encode()).decode()
            request.add_header("Authorization", f"Basic {token}")
        try:
            with urllib.request.urlopen(request, timeout=30) as answer:
                text = answer.read()
                return answer.status, json.loads(text) if text else None
        except urllib.error.HTTPError as error:
            return error.code, error.read().decode(errors="replace")

    def deployment(self, name):
        status, body = self.call("GET", f"/deployments/name/{name}")
        assert status == 200, body
        return body

    def run(self, deployment_id, parameters, **extra):
        return self.call("POST", f"/deployments/{deployment_id}/create_flow_run",
                         {"parameters": parameters, **extra})

    def logs(self, run_id):
        status, logs = self.call("POST", "/logs/filter",
                                 {"logs": {"flow_run_id": {"any_": [run_id]}}})
        assert status == 200, logs
        return logs

    def final_state(self, run_id, timeout=240):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            status, run = self.call("GET", f"/flow_runs/{run_id}")
            assert status == 200, run
            state = run.get("state") or {}
            if state.get("type") in ("COMPLETED", "FAILED", "CRASHED", "CANCELLED"):
                return state
            time.sleep(1.0)
        raise AssertionError(f"run {run_id} not final after {timeout} s: {state}")


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    base = tmp_path_factory.mktemp("served-code")
    store = base / "store"
    ingest_dataset("iris", store)
    env = child_env(seeded_prefect_home(base / "prefect-home"), PREFECT_RUNNER_POLL_FREQUENCY=1)
    for key in ("PREFECT_SERVER_API_AUTH_STRING", "PREFECT_API_AUTH_STRING"):
        env.pop(key, None)  # serve must protect its API by itself
    proc = Managed([BIN / "catdask", "--store", store, "serve", "--port", free_port(),
                    "--dask-dashboard-port", free_port()], log=base / "serve.log", env=env)
    try:
        proc.wait_for(r"being served", timeout=300)
        text = proc.text()
        api = re.search(r"^Prefect UI:\s+(\S+)", text, re.M).group(1) + "/api"
        auth = re.search(r"^API credential:\s+(\S+) \(generated", text, re.M).group(1)
        yield SimpleNamespace(proc=proc, api=_Api(api, auth), anonymous=_Api(api), base=base,
                              store=store)
    finally:
        clean = proc.stop(signal.SIGTERM, timeout=60, group=False)
        assert clean, f"processes left after SIGTERM:\n{proc.tail()}"


def test_the_served_api_refuses_callers_without_the_credential(served):
    deployment = served.api.deployment(INGEST)
    status, _ = served.anonymous.call("PATCH", f"/deployments/{deployment['id']}",
                                      {"pull_steps": []})
    assert status == 401
    status, _ = served.anonymous.call("GET", f"/deployments/{deployment['id']}")
    assert status == 401
    assert served.anonymous.call("GET", "/health")[0] == 200  # liveness stays open


def _evil_script(folder, marker):
    script = folder / "evil_flow.py"
    script.write_text(
        "from pathlib import Path\nfrom prefect import flow\n\n\n@flow(name='catdask-ingest')\n"
        f"def evil(names=None, store=None, source_dir=None, allow_download=False, replace=False):\n    Path({str(marker)!r}).touch()\n")
    return script


@pytest.mark.parametrize("attack", ["pull_step", "entrypoint", "both", "job_variables"])
def test_a_patched_deployment_runs_only_serves_code(served, tmp_path, attack):
    marker = tmp_path / "ran"
    other_store = tmp_path / "other-store"
    script = _evil_script(tmp_path, marker)
    pull = {"pull_steps": [{"prefect.deployments.steps.run_shell_script": {
        "script": f"touch {marker}"}}]}
    code = {"entrypoint": f"{script.name}:evil", "path": str(tmp_path)}
    patch = {"pull_step": pull, "entrypoint": code, "both": {**pull, **code},
             "job_variables": {"job_variables": {"env": {
                 "CATDASK_SERVED_STORE": str(other_store), "PREFECT__FLOW_ENTRYPOINT":
                     f"{script}:evil"}}}}[attack]
    deployment = served.api.deployment(INGEST)
    status, body = served.api.call("PATCH", f"/deployments/{deployment['id']}", patch)
    assert status == 204, body
    status, run = served.api.run(deployment["id"], {"names": ["iris"]})
    assert status == 201, run
    state = served.api.final_state(run["id"])
    assert not marker.exists(), f"{attack}: the patched code ran"
    assert state["type"] == "COMPLETED", state  # serve's ingest flow ran
    assert not other_store.exists()


@pytest.mark.parametrize("name", ["Store", "store_"])
def test_a_parameter_the_flow_does_not_take_is_answered_409(served, name):
    deployment = served.api.deployment("catdask-train/train")
    status, body = served.api.run(deployment["id"], {"dataset": "iris", name: "/tmp"})
    assert status == 409, body
    assert name in body


def test_a_run_that_bypasses_the_schema_fails_in_one_line(served):
    deployment = served.api.deployment("catdask-train/train")
    status, run = served.api.run(deployment["id"], {"dataset": "iris", "store_": "/tmp"},
                                 enforce_parameter_schema=False)
    assert status == 201, run
    state = served.api.final_state(run["id"])
    assert state["type"] == "FAILED", state
    assert state["message"].startswith(
        "refused: flow catdask-train takes no parameter 'store_' (its parameters: dataset,"), state
    assert "\n" not in state["message"]
    lines = [line for line in served.proc.text().splitlines() if "store_" in line]
    assert lines and all(line.startswith("catdask serve: flow run") for line in lines), lines


def test_cancelling_a_run_of_a_patched_deployment_runs_only_serves_code(served, tmp_path):
    """Serve's runner resolves the flow of a cancelled (or crashed) run to run its hooks: from
    the deployment, pull steps included, in serve's own process, unless it has serve's flow."""
    from catdask.store import training_lease

    marker = tmp_path / "ran"
    deployment = served.api.deployment("catdask-train/train")
    status, body = served.api.call("PATCH", f"/deployments/{deployment['id']}", {
        "pull_steps": [{"prefect.deployments.steps.run_shell_script": {
            "script": f"touch {marker}"}}]})
    assert status == 204, body
    # Held here, the model's training lease keeps the run waiting (running) until cancelled.
    with training_lease(served.store, "iris-cqs", holder="this test"):
        status, run = served.api.run(deployment["id"], {"dataset": "iris"})
        assert status == 201, run
        deadline = time.monotonic() + 120
        while not any("is being trained by this test" in log["message"]
                      for log in served.api.logs(run["id"])):
            assert time.monotonic() < deadline, served.proc.tail()
            time.sleep(0.5)
        status, body = served.api.call("POST", f"/flow_runs/{run['id']}/set_state", {
            "state": {"type": "CANCELLING", "name": "Cancelling"}, "force": True})
        assert status in (200, 201), body
        state = served.api.final_state(run["id"])
    assert state["type"] == "CANCELLED", state
    assert not marker.exists(), "the patched pull step ran"
