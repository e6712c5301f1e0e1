"""Pieces of ``catdask serve`` that need no server: the 503-replaying ASGI wrapper of its Prefect
server and the environment of a preloaded run process (the whole path runs in
tests/test_deployment.py, slow)."""

from __future__ import annotations

import asyncio
import uuid
from types import SimpleNamespace

import pytest

from catdask.orchestration import prefect_server
from catdask.orchestration.prefect_server import RetryBusyDatabase


class _FlakyApp:
    """An ASGI app answering 503 ``busy`` times (re-raising afterwards, as Starlette does after
    its error handler's response), then 201; records what each attempt saw."""

    def __init__(self, busy):
        self.busy, self.seen = busy, []

    async def __call__(self, scope, receive, send):
        message = await receive()
        self.seen.append((scope["path"], scope.get("root_path", ""), message["body"]))
        scope["root_path"] = "/api"  # as a mount rewrites the scope it is given
        scope["path"] = "/rewritten"
        if len(self.seen) <= self.busy:
            await send({"type": "http.response.start", "status": 503, "headers": []})
            await send({"type": "http.response.body", "body": b"busy"})
            raise RuntimeError("database is locked")
        await send({"type": "http.response.start", "status": 201, "headers": []})
        await send({"type": "http.response.body", "body": b"created"})


def _call(app, body=b'{"parameters": {}}', chunks=1):
    """One HTTP request through ``app``; returns the messages sent to the client."""
    scope = {"type": "http", "method": "POST", "path": "/deployments/x/create_flow_run",
             "root_path": "", "headers": []}
    parts = [body[i::chunks] for i in range(chunks)] if chunks > 1 else [body]
    incoming = [{"type": "http.request", "body": p, "more_body": i < len(parts) - 1}
                for i, p in enumerate(parts)]
    sent = []

    async def receive():
        return incoming.pop(0)

    async def send(message):
        sent.append(message)

    asyncio.run(app(scope, receive, send))
    return sent


@pytest.fixture
def no_pauses(monkeypatch):
    monkeypatch.setattr(prefect_server, "BASE_PAUSE_SECONDS", 0.0)


def test_busy_answers_are_replayed_with_the_same_request(no_pauses):
    app = _FlakyApp(busy=3)
    sent = _call(RetryBusyDatabase(app, attempts=5))
    assert [m.get("status") for m in sent if m["type"] == "http.response.start"] == [201]
    assert b"".join(m.get("body", b"") for m in sent) == b"created"
    # Every attempt saw the request as the server received it, body included.
    assert app.seen == [("/deployments/x/create_flow_run", "", b'{"parameters": {}}')] * 4


def test_a_body_in_several_messages_is_replayed_whole(no_pauses):
    body = b'{"parameters": {"dataset": "iris"}}'
    app = _FlakyApp(busy=1)
    _call(RetryBusyDatabase(app, attempts=3), body=body, chunks=3)
    joined = b"".join(body[i::3] for i in range(3))
    assert [seen[2] for seen in app.seen] == [joined, joined]


def test_the_last_busy_answer_reaches_the_caller(no_pauses):
    app, sent = _FlakyApp(busy=10), []

    async def send(message):
        sent.append(message)

    async def receive():
        return {"type": "http.request", "body": b"", "more_body": False}

    with pytest.raises(RuntimeError, match="locked"):  # the server logs it, as without us
        asyncio.run(RetryBusyDatabase(app, attempts=4)({"type": "http", "path": "/x"},
                                                       receive, send))
    assert len(app.seen) == 4
    assert [m["status"] for m in sent if m["type"] == "http.response.start"] == [503]


def test_other_answers_and_other_scopes_pass_once(no_pauses):
    app = _FlakyApp(busy=0)
    _call(RetryBusyDatabase(app))
    assert len(app.seen) == 1
    calls = []

    async def lifespan_app(scope, receive, send):
        calls.append(scope["type"])

    for kind in ("lifespan", "websocket"):
        asyncio.run(RetryBusyDatabase(lifespan_app)({"type": kind}, None, None))
    assert calls == ["lifespan", "websocket"]


def test_requests_beyond_the_bound_wait_outside_the_app(no_pauses):
    """50 requests at once (the CI burst whose 500s were pool timeouts): at most the bound are
    inside the app at a time, and every one is answered."""
    inside, most = 0, 0

    async def slow_app(scope, receive, send):
        nonlocal inside, most
        await receive()
        inside += 1
        most = max(most, inside)
        await asyncio.sleep(0.01)
        inside -= 1
        await send({"type": "http.response.start", "status": 201, "headers": []})
        await send({"type": "http.response.body", "body": b"created"})

    bounded, statuses = RetryBusyDatabase(slow_app, requests_in_app=3), []

    async def one():
        async def receive():
            return {"type": "http.request", "body": b"{}", "more_body": False}

        async def send(message):
            if message["type"] == "http.response.start":
                statuses.append(message["status"])

        await bounded({"type": "http", "path": "/x"}, receive, send)

    async def burst():
        await asyncio.gather(*(one() for _ in range(50)))

    asyncio.run(burst())
    assert statuses == [201] * 50
    assert most == 3


def test_preloaded_run_environment_names_the_run(monkeypatch):
    pytest.importorskip("prefect")
    from catdask.orchestration.preloaded_runs import PreloadedRunStarter

    monkeypatch.setenv("CATDASK_SCHEDULER", "tcp://127.0.0.1:1")
    run = SimpleNamespace(id=uuid.uuid4())
    env = PreloadedRunStarter(None, deployment_name="train").environment(
        run, {"PREFECT__CONTROL_PORT": "5", "PREFECT__CONTROL_TOKEN": "t"})
    assert env["PREFECT__FLOW_RUN_ID"] == str(run.id)
    assert env["PREFECT__DEPLOYMENT_NAME"] == "train"
    assert env["PREFECT__CONTROL_PORT"] == "5" and env["PREFECT__CONTROL_TOKEN"] == "t"
    assert env["CATDASK_SCHEDULER"] == "tcp://127.0.0.1:1"  # the shared cluster
    assert all(isinstance(v, str) for v in env.values())


def _record(exc_info=None):
    import logging

    return logging.LogRecord("prefect.runner", logging.WARNING, __file__, 1,
                             "websocket failed", None, exc_info)


def test_console_mute_drops_a_traceback_that_races_the_server_exit():
    """The killed server's websocket traceback can arrive before its exit is reapable
    (seen in CI: a page of websockets tracebacks before serve's one-line error). A record
    with a traceback waits briefly for the exit; one without, or a server that stays up,
    is shown."""
    import subprocess
    import sys

    from catdask.serve import _MutedOnceServerGone

    try:
        raise ConnectionError("stream ends after 0 bytes")
    except ConnectionError:
        exc_info = sys.exc_info()
    exiting = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.3)"])
    staying = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert _MutedOnceServerGone(exiting).filter(_record()) is True  # still running
        assert _MutedOnceServerGone(exiting).filter(_record(exc_info)) is False  # waited
        assert _MutedOnceServerGone(exiting).filter(_record()) is False  # gone
        up = _MutedOnceServerGone(staying)
        up.EXIT_GRACE_SECONDS = 0.2
        assert up.filter(_record(exc_info)) is True  # a real error while the server is up
    finally:
        staying.kill()
        staying.wait()


def test_a_foreseen_catdask_error_is_one_line_on_the_run_console():
    """Issue 28: a rejected or refused served run printed a 38-line traceback on serve's
    console; the console filter of the run processes says it in one line, once."""
    import io
    import logging

    from catdask.orchestration.preloaded_runs import OneLineCatdaskErrors
    from catdask.orchestration.served import ServedParameterError
    from catdask.orchestration.train import ModelRejectedError

    def record(name, error, **extra):
        try:
            raise error
        except Exception:
            import sys

            rec = logging.LogRecord(name, logging.ERROR, __file__, 1, "Encountered exception",
                                    None, sys.exc_info())
        rec.__dict__.update(extra)
        return rec

    out = io.StringIO()
    one_line = OneLineCatdaskErrors(stream=out)
    refused = ServedParameterError("refused: another store")
    assert not one_line.filter(record("prefect.flow_runs", refused, flow_run_name="iris-cqs"))
    assert not one_line.filter(record("prefect.engine", refused))  # the same error again
    assert not one_line.filter(record("prefect.engine", ModelRejectedError("rejected: x")))
    assert one_line.filter(record("prefect.engine", RuntimeError("a bug")))  # shown in full
    plain = logging.LogRecord("prefect.flow_runs", logging.WARNING, __file__, 1, "rejected: x",
                              None, None)
    assert one_line.filter(plain)
    assert out.getvalue().splitlines() == [
        "catdask serve: flow run 'iris-cqs': ServedParameterError: refused: another store"]


def test_serve_says_once_that_catdask_changed_under_it(monkeypatch, caplog):
    """Files rewritten after serve imported catdask: one warning naming the fix, then quiet."""
    from catdask import versions
    from catdask.orchestration import preloaded_runs

    monkeypatch.setattr(preloaded_runs, "_UPGRADE_WARNED", __import__("threading").Event())
    monkeypatch.setattr(versions, "sources_changed_since_import", lambda: False)
    assert preloaded_runs.warn_if_upgraded_under_serve() is False
    monkeypatch.setattr(versions, "sources_changed_since_import", lambda: True)
    with caplog.at_level("WARNING", logger="catdask.serve"):
        assert preloaded_runs.warn_if_upgraded_under_serve() is True
        assert preloaded_runs.warn_if_upgraded_under_serve() is False
    warned = [r.getMessage() for r in caplog.records if "changed on disk" in r.getMessage()]
    assert len(warned) == 1 and "restart `catdask serve`" in warned[0]


def test_the_fork_server_pins_the_code_hash_its_runs_record():
    """The fork server imports served_code last, which computes the sources' hash there, so a
    run forked from it records the hash of the code it runs, not of files changed later."""
    import subprocess
    import sys

    from catdask.orchestration.preloaded_runs import PRELOADED_MODULES

    assert PRELOADED_MODULES[-1] == "catdask.orchestration.served_code"
    code = ("import catdask.versions as v; assert v.source_sha256.cache_info().currsize == 0;"
            "import catdask.orchestration.served_code as s;"
            "assert v.source_sha256.cache_info().currsize == 1;"
            "assert s.SERVED_SOURCE_SHA256 == v.source_sha256(); print('ok')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert out.stdout.strip() == "ok", out.stderr


def test_a_run_process_imports_the_entry_point_serve_registered(monkeypatch):
    """Issue 44: the engine loads the flow from ``PREFECT__FLOW_ENTRYPOINT`` (serve's), never
    from the deployment an API user can PATCH; an inherited value does not win."""
    pytest.importorskip("prefect")
    from catdask.orchestration.preloaded_runs import PreloadedRunStarter

    monkeypatch.setenv("PREFECT__FLOW_ENTRYPOINT", "/tmp/evil.py:evil")
    run = SimpleNamespace(id=uuid.uuid4())
    env = PreloadedRunStarter(None, entrypoint="catdask.orchestration.train.train",
                              deployment_name="train").environment(run)
    assert env["PREFECT__FLOW_ENTRYPOINT"] == "catdask.orchestration.train.train"


def test_unknown_parameter_names_are_refused_in_one_line():
    pytest.importorskip("prefect")
    from catdask.orchestration.served import unknown_parameters_message
    from catdask.orchestration.train import train

    assert unknown_parameters_message(train, {"dataset": "iris", "store": "/s"}) is None
    message = unknown_parameters_message(train, {"dataset": "iris", "Store": 1, "store_": 2})
    assert message.startswith("refused: flow catdask-train takes no parameter 'Store', "
                              "'store_' (its parameters: dataset, method,")
    assert "\n" not in message


@pytest.mark.slow
def test_serve_stops_within_seconds_once_an_api_it_did_not_start_is_gone():
    """Issue 44: serve against ``PREFECT_API_URL`` kept retrying a dead API for 75-80 s."""
    import time

    from catdask.errors import ServiceLostError
    from catdask.serve import API_LOST_SECONDS, _serve_while_server_runs

    from .helpers.procs import free_port

    class Runner:
        pause_on_shutdown = True

        async def start(self):
            await asyncio.sleep(3600)

    runner, started = Runner(), time.monotonic()
    dead_api = f"http://127.0.0.1:{free_port()}/api"  # nothing listens there
    with pytest.raises(ServiceLostError, match=f"has refused connections for {API_LOST_SECONDS:g} s"):
        asyncio.run(_serve_while_server_runs(runner, None, api_url=dead_api))
    assert time.monotonic() - started < API_LOST_SECONDS + 5
    assert runner.pause_on_shutdown is False  # pausing would need the dead API


def test_a_sigterm_whose_keyboard_interrupt_was_lost_still_stops_serve(monkeypatch):
    """Distributed's gc callback swallowed the KeyboardInterrupt of serve's SIGTERM handler
    ("Exception ignored in ... _gc_callback"): serve served on, 60 s and more. The watch sees
    the signal within a second and stops the runner as Ctrl-C does (serve catches it)."""
    import threading
    import time

    import catdask.serve as serve_mod

    from .helpers.procs import free_port

    class Runner:
        pause_on_shutdown = True

        async def start(self):
            await asyncio.sleep(3600)

    seen = threading.Event()
    seen.set()  # what the handler did before its exception was lost
    monkeypatch.setattr(serve_mod, "_SIGTERM_SEEN", seen)
    started = time.monotonic()
    with pytest.raises(asyncio.CancelledError):
        asyncio.run(serve_mod._serve_while_server_runs(
            Runner(), None, api_url=f"http://127.0.0.1:{free_port()}/api"))
    assert time.monotonic() - started < serve_mod.API_LOST_SECONDS  # not the lost-API stop
