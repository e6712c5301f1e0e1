"""A served API that cannot be turned against its host (issue 28, item 1).

- Under ``catdask serve`` (its environment names the served store and scheduler), every flow
  refuses a run parameter naming another store or Dask scheduler, or an evaluation folder
  outside ``<store>/evaluations``, before it reads a file or opens a connection: 10/10 tries
  through the flows the served deployments call, against a real Prefect API; nothing appears
  at the other store and the other "scheduler" (a listening socket) gets no connection.
  Unset parameters use serve's store and scheduler. (The real served path, through the
  Prefect API and ``catdask serve``: tests/test_deployment.py.)
- The served deployments freeze the store and scheduler parameters (the API refuses others).
- ``serve --host`` beyond loopback is refused unless Prefect's API authentication is set.
"""

from __future__ import annotations

import os
import socket

import pytest

from catdask.cli.exits import EXIT_INPUT
from catdask.orchestration.served import (
    ENV_SERVED_SCHEDULER,
    ENV_SERVED_STORE,
    ServedParameterError,
    served_output_dir,
    served_store_and_scheduler,
)

from tests.helpers.procs import LOCALHOST
from tests.cli.test_cli import _timed_script


# ----------------------------------------------------------------------------- the rule
def test_outside_serve_the_arguments_are_used_as_given():
    assert served_store_and_scheduler("/a", "tcp://x:1", environ={}) == ("/a", "tcp://x:1")
    assert served_output_dir("/anywhere", "/a", environ={}) == "/anywhere"


def test_under_serve_unset_or_equal_parameters_get_serves_values(tmp_path):
    env = {ENV_SERVED_STORE: str(tmp_path / "s"), ENV_SERVED_SCHEDULER: "tcp://127.0.0.1:1"}
    expected = (str(tmp_path / "s"), "tcp://127.0.0.1:1")
    for store, scheduler in [(None, None), ("", ""), (tmp_path / "s", "tcp://127.0.0.1:1"),
                             (f"{tmp_path}/x/../s", None)]:
        assert served_store_and_scheduler(store, scheduler, environ=env) == expected
    inside = tmp_path / "s" / "evaluations" / "mine"
    assert served_output_dir(inside, tmp_path / "s", environ=env) == str(inside)
    assert served_output_dir(None, tmp_path / "s", environ=env) is None


def test_under_serve_other_values_are_refused_naming_both(tmp_path):
    env = {ENV_SERVED_STORE: str(tmp_path / "s"), ENV_SERVED_SCHEDULER: "tcp://127.0.0.1:1"}
    with pytest.raises(ServedParameterError, match=r"store is .*/s; a run parameter cannot "
                                                   r"choose another store \(got store='/etc'\)"):
        served_store_and_scheduler("/etc", None, environ=env)
    with pytest.raises(ServedParameterError, match=r"scheduler tcp://127.0.0.1:1; a run "
                                                   r"parameter cannot choose another"):
        served_store_and_scheduler(None, "tcp://evil:8786", environ=env)
    for out_dir in ("/tmp", tmp_path / "s", tmp_path / "s" / "evaluations" / ".." / "models"):
        with pytest.raises(ServedParameterError, match="writes its tables inside"):
            served_output_dir(out_dir, tmp_path / "s", environ=env)


# ----------------------------------------------------------------------------- through the flows
@pytest.fixture
def attacker_scheduler():
    """A listening socket standing for a scheduler someone else runs; yields (address, sock)."""
    sock = socket.socket()
    sock.bind((LOCALHOST, 0))
    sock.listen(16)
    sock.setblocking(False)
    try:
        yield f"tcp://{LOCALHOST}:{sock.getsockname()[1]}", sock
    finally:
        sock.close()


@pytest.mark.usefixtures("prefect_api")
@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.slow
def test_served_flows_refuse_another_store_or_scheduler_10_of_10(iris_store, tmp_path,
                                                                  monkeypatch, dask_scheduler,
                                                                  attacker_scheduler):
    from catdask.orchestration.evaluate import evaluate
    from catdask.orchestration.ingest import ingest
    from catdask.orchestration.train import retrain_registered, train
    from catdask.store import list_models

    monkeypatch.setenv(ENV_SERVED_STORE, str(iris_store))
    monkeypatch.setenv(ENV_SERVED_SCHEDULER, dask_scheduler)
    monkeypatch.setenv("CATDASK_SCHEDULER", dask_scheduler)
    elsewhere = tmp_path / "elsewhere"
    evil, listener = attacker_scheduler
    tries = [
        lambda: train(dataset="iris", store=str(elsewhere)),
        lambda: train(dataset="iris", scheduler=evil),
        lambda: train(dataset="iris", store=str(elsewhere), scheduler=evil),
        lambda: train(dataset="iris", store="/"),
        lambda: train(dataset="iris", scheduler=f"tls://{LOCALHOST}:1"),
        lambda: retrain_registered(store=str(elsewhere)),
        lambda: retrain_registered(scheduler=evil),
        lambda: ingest(["iris"], store=str(elsewhere)),
        lambda: evaluate(datasets=["iris"], quick=True, store=str(elsewhere)),
        lambda: evaluate(datasets=["iris"], quick=True, out_dir=str(elsewhere)),
    ]
    refused = 0
    for attempt in tries:
        with pytest.raises(ServedParameterError, match="refused: "):
            attempt()
        refused += 1
    print(f"served flows: {refused}/{len(tries)} redirections refused")
    assert refused == len(tries) == 10
    assert not elsewhere.exists()
    with pytest.raises(BlockingIOError):  # nobody connected to the other "scheduler"
        listener.accept()
    assert list_models(iris_store) == []
    # Unset parameters: serve's store and scheduler.
    summary = train(dataset="iris", n_restarts=1)
    assert summary["version"] == "iris-cqs:v1"
    assert [v.name for v in list_models(iris_store)] == ["iris-cqs"]


def test_served_deployments_freeze_the_store_and_the_scheduler(tmp_path):
    from catdask.serve import served_deployments

    deployments = served_deployments(tmp_path / "s", scheduler="tcp://127.0.0.1:8786")
    assert len(deployments) == 5  # nightly and triggered retrain, evaluation, train, ingest
    for d in deployments:
        schema = d._parameter_openapi_schema.properties
        assert schema["store"]["enum"] == [str(tmp_path / "s")] and schema["store"]["readOnly"]
        assert d.enforce_parameter_schema
        if "scheduler" in schema:
            assert schema["scheduler"]["enum"] == ["tcp://127.0.0.1:8786"]
        assert d.parameters["store"] == str(tmp_path / "s")


# ----------------------------------------------------------------------------- binding
def test_loopback_hosts():
    from catdask.serve import is_loopback

    assert all(map(is_loopback, ["127.0.0.1", "127.1.2.3", "::1", "[::1]", "localhost"]))
    assert not any(map(is_loopback, ["0.0.0.0", "::", "10.0.0.5", "example.org", "myhost"]))


def test_a_public_bind_needs_prefect_api_auth(monkeypatch):
    from prefect.settings import PREFECT_SERVER_API_AUTH_STRING, temporary_settings

    from catdask.serve import UnauthenticatedBindError, api_auth_for_bind

    monkeypatch.delenv("PREFECT_SERVER_API_AUTH_STRING", raising=False)
    assert api_auth_for_bind("127.0.0.1") is None
    with pytest.raises(UnauthenticatedBindError, match="PREFECT_SERVER_API_AUTH_STRING"):
        api_auth_for_bind("0.0.0.0")
    with temporary_settings(updates={PREFECT_SERVER_API_AUTH_STRING: "ops:s3cret"}):
        assert api_auth_for_bind("0.0.0.0") == "ops:s3cret"


def test_serve_generates_a_credential_unless_one_is_configured(monkeypatch):
    """Issue 44: serve's API is never open, as Jupyter's token; a configured one is used."""
    from prefect.settings import PREFECT_SERVER_API_AUTH_STRING, temporary_settings

    from catdask.orchestration.api_auth import serve_api_auth
    from catdask.serve import serving_summary

    monkeypatch.delenv("PREFECT_SERVER_API_AUTH_STRING", raising=False)
    (first, generated), (second, _) = serve_api_auth("127.0.0.1"), serve_api_auth("127.0.0.1")
    user, _, password = first.partition(":")
    assert generated and user == "catdask" and len(password) >= 32 and first != second
    with temporary_settings(updates={PREFECT_SERVER_API_AUTH_STRING: "ops:s3cret"}):
        assert serve_api_auth("0.0.0.0") == ("ops:s3cret", False)
    text = serving_summary("http://127.0.0.1:4311/api", "d", "tcp://s:1", "/s", 1, ["a/b"],
                           auth=first, generated=True)
    assert f"API credential:  {first} (generated" in text
    assert f"export PREFECT_API_AUTH_STRING={first}" in text


@pytest.mark.parametrize("value", [":", "user:", ":password", "nocolon", " : "])
def test_an_auth_string_needs_a_user_and_a_password(monkeypatch, value):
    from prefect.settings import PREFECT_SERVER_API_AUTH_STRING, temporary_settings

    from catdask.orchestration.api_auth import AuthStringError
    from catdask.serve import api_auth_for_bind

    with temporary_settings(updates={PREFECT_SERVER_API_AUTH_STRING: value}):
        for host in ("127.0.0.1", "0.0.0.0"):
            with pytest.raises(AuthStringError, match="non-empty user and password"):
                api_auth_for_bind(host)


def test_serve_with_a_colon_for_credential_exits_3_in_one_line(iris_store, tmp_path):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PREFECT_API", "PREFECT_SERVER_API", "CATDASK_"))}
    env.update(PREFECT_HOME=str(tmp_path / "prefect-home"), PREFECT_SERVER_API_AUTH_STRING=":")
    r, _, _ = _timed_script(["serve", "--host", "0.0.0.0", "--store", iris_store], env,
                            tmp_path, tmp_path)
    assert r.returncode == EXIT_INPUT, r.stderr
    assert r.stderr.splitlines() == [
        "catdask serve: error: PREFECT_SERVER_API_AUTH_STRING must be 'user:password' with a "
        "non-empty user and password (it is the Prefect API's HTTP basic credential); unset "
        "it to let `catdask serve` generate one"], r.stderr
    assert not (tmp_path / "prefect-home" / "server.log").exists()


@pytest.mark.parametrize("host", ["0.0.0.0", "::"])
def test_serve_on_a_public_address_without_auth_exits_3_and_starts_nothing(iris_store, tmp_path,
                                                                           host):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PREFECT_API", "PREFECT_SERVER_API", "CATDASK_"))}
    env["PREFECT_HOME"] = str(tmp_path / "prefect-home")
    r, wall, _ = _timed_script(["serve", "--host", host, "--store", iris_store], env, tmp_path,
                               tmp_path)
    assert r.returncode == EXIT_INPUT, r.stderr
    assert r.stderr.splitlines() == [
        f"catdask serve: error: refusing to serve the Prefect API on {host}: beyond 127.0.0.1 "
        "it needs authentication. Set PREFECT_SERVER_API_AUTH_STRING='user:password' (and "
        "PREFECT_API_AUTH_STRING to the same for clients), or bind 127.0.0.1 and use an SSH "
        "tunnel"], r.stderr
    print(f"serve --host {host} without auth: exit {r.returncode} in {wall:.2f} s")
    assert not (tmp_path / "prefect-home" / "server.log").exists()  # no server was started
