"""Served flow runs in processes forked from a preloaded server: Prefect's engine, minus start-up.

A Prefect runner starts every served flow run as ``python -m prefect.engine``, a new
interpreter that imports Prefect, numpy, scipy, scikit-learn, zarr and catdask first: more CPU
than an iris fit. :class:`ServeRunner` keeps that process-per-run isolation but forks each run
from a :mod:`multiprocessing` fork server that imported :data:`PRELOADED_MODULES` once; the
child then executes ``prefect.engine`` as ``__main__``, exactly what the runner's command runs.

- A run process watches ``catdask serve`` and terminates itself when serve is gone.
- A run process imports the entry point serve registered, not the deployment's (which an API
  user can edit): :func:`.served.served_entrypoint_env`; so do the hooks of a cancelled or
  crashed run (:meth:`ServeRunner.add_preloaded_deployment`). Serve refuses to start when the
  installed Prefect lacks the runner internals this relies on.
- The flows' code is what the fork server imported: restart ``catdask serve`` after upgrading
  (a warning says so, :func:`warn_if_upgraded_under_serve`); runs record the hash of the code
  they run (:mod:`.served_code`).
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import multiprocessing
import os
import signal
import sys
import threading

__all__ = ["PRELOADED_MODULES", "OneLineCatdaskErrors", "PreloadedRunStarter", "ServeRunner", "start_fork_server",
           "stop_fork_server", "stop_run_processes"]

logger = logging.getLogger("catdask.serve")

#: What every served flow run needs before its first line. Importing them starts no thread, so
#: forking afterwards is safe. A module that fails to import is skipped (imported by the run).
PRELOADED_MODULES = (
    "prefect.engine",
    "prefect.flow_engine",
    "catdask.orchestration.train",
    "catdask.orchestration.ingest",
    "catdask.orchestration.evaluate",
    "distributed",
    "matplotlib.pyplot",
    "catdask.plotting",
    "catdask.orchestration.served_code",  # last: the code hash the forked runs record
)
#: Seconds a run process gets to report its crash after ``catdask serve`` died (SIGTERM),
#: before it kills itself.
PARENT_GONE_GRACE_SECONDS = 30.0
#: Seconds a run process gets to report its crash after SIGTERM when ``catdask serve`` stops.
RUN_STOP_GRACE_SECONDS = 10.0
#: How often a run's starter looks whether its run process has ended.
RUN_POLL_SECONDS = 0.25
#: Name prefix of the run processes (:class:`PreloadedRunStarter`).
RUN_PROCESS_PREFIX = "flow-run-"


def start_fork_server(modules=PRELOADED_MODULES):
    """Start (once per process) the fork server that has imported ``modules``; returns the
    :mod:`multiprocessing` context whose processes it forks.

    Call it after the environment the runs need is in place (``PREFECT_API_URL``,
    ``CATDASK_SCHEDULER``): the server keeps the environment it started with (each run
    replaces it with the runner's anyway).
    """
    from multiprocessing import forkserver

    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(list(modules))
    with _interrupts_ignored_by_children():
        forkserver.ensure_running()
    return context


@contextlib.contextmanager
def _interrupts_ignored_by_children():
    """Within the block, processes started here ignore SIGINT (kept across ``exec``): a terminal's
    Ctrl-C reaches the whole process group and would kill the fork server mid-import; its runs are
    stopped through serve's runner instead. Does nothing off the main thread.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _exit_with_parent():
    """Terminate this run process when the process that started it (``catdask serve``) dies.

    The multiprocessing parent sentinel reaches end-of-file when the parent is gone, however it
    died. SIGTERM lets Prefect's engine mark the run Crashed; SIGKILL follows after a grace.
    """
    parent = multiprocessing.parent_process()
    if parent is None:
        return

    def watch():
        parent.join()
        os.kill(os.getpid(), signal.SIGTERM)
        threading.Event().wait(PARENT_GONE_GRACE_SECONDS)
        os.kill(os.getpid(), signal.SIGKILL)

    threading.Thread(target=watch, name="catdask-serve-watch", daemon=True).start()


class OneLineCatdaskErrors(logging.Filter):
    """On a run process's console: a foreseen catdask error in one line, not a traceback.

    The first of Prefect's records of the error becomes ``catdask serve: flow run NAME: Error:
    message`` and the others are dropped (for ``ModelRejectedError`` the flow has already logged its
    line). Only console handlers get this filter; it is the fallback for an error raised outside a
    flow's body (:mod:`.input_errors` handles the rest).
    """

    def __init__(self, stream=None):
        super().__init__()
        self._stream = stream
        self._said = set()

    def filter(self, record):
        from ..errors import CatdaskError

        error = record.exc_info[1] if record.exc_info else None
        if not isinstance(error, CatdaskError):
            return True
        text = f"{type(error).__name__}: {error}"
        if text in self._said or type(error).__name__ == "ModelRejectedError":
            return False
        self._said.add(text)
        run = getattr(record, "flow_run_name", None)
        where = f"flow run {run!r}" if run else "flow run"
        print(f"catdask serve: {where}: {text}", file=self._stream or sys.stderr, flush=True)
        return False


def _one_line_catdask_errors():
    """Put :class:`OneLineCatdaskErrors` on the console handlers (the root logger's; Prefect's
    API handlers sit on the run loggers, so the UI keeps the tracebacks)."""
    from prefect.logging.handlers import APILogHandler

    console = [h for h in logging.getLogger().handlers if not isinstance(h, APILogHandler)]
    one_line = OneLineCatdaskErrors()
    for handler in console:
        handler.addFilter(one_line)


def _run_flow_run(env):
    """In the forked child: run ``prefect.engine`` as ``__main__`` with the runner's ``env``."""
    import runpy
    import warnings

    # runpy warns that prefect.engine is already imported (the fork server preloaded it); the
    # engine's code runs again as __main__, as in `python -m prefect.engine`, so it is harmless.
    warnings.filterwarnings("ignore", "'prefect.engine' found in sys.modules", RuntimeWarning)
    os.environ.clear()
    os.environ.update(env)
    _exit_with_parent()
    sys.argv = ["prefect.engine"]  # the engine reads the flow run id from the environment
    _one_line_catdask_errors()
    from prefect.context import SettingsContext, get_settings_context
    from prefect.settings import Settings

    try:
        # Settings were read when the fork server imported Prefect: read them again from the
        # runner's environment, as Prefect's own subprocess runs do.
        with SettingsContext(profile=get_settings_context().profile, settings=Settings()):
            if not _refused_unknown_parameters(env):
                runpy.run_module("prefect.engine", run_name="__main__", alter_sys=True)
    finally:
        # A forked multiprocessing child ends with os._exit, which skips atexit: run it, so that
        # Prefect sends its last logs and events and the Dask client closes, as at a normal exit.
        atexit._run_exitfuncs()


def _refused_unknown_parameters(env):
    """Whether the run was refused (ended Failed, one line) for a parameter name its flow does
    not take: a request or an edited deployment can bypass the API's schema."""
    from uuid import UUID

    from prefect.client.orchestration import get_client
    from prefect.flow_engine import load_flow_run
    from prefect.flows import load_flow_from_entrypoint
    from prefect.states import Failed

    from .served import unknown_parameters_message

    run_id = UUID(env["PREFECT__FLOW_RUN_ID"])
    flow_run = load_flow_run(run_id)
    flow = load_flow_from_entrypoint(env["PREFECT__FLOW_ENTRYPOINT"])
    message = unknown_parameters_message(flow, flow_run.parameters)
    if message is None:
        return False
    with get_client(sync_client=True) as client:
        client.set_flow_run_state(run_id, Failed(message=message), force=True)
    print(f"catdask serve: flow run {flow_run.name!r}: {message}", file=sys.stderr, flush=True)
    return True


def stop_run_processes(grace=RUN_STOP_GRACE_SECONDS, worth_waiting=lambda: True):
    """Stop the run processes this process started that are still running: SIGTERM (the run is
    marked Crashed), SIGKILL after ``grace`` seconds or once ``worth_waiting()`` is false. Returns
    how many there were. Call it while the Prefect API still answers: the runner does not stop its
    runs on Ctrl-C, and the interpreter's exit would otherwise wait for them.
    """
    import time

    runs = [p for p in multiprocessing.active_children()
            if p.name.startswith(RUN_PROCESS_PREFIX)]
    for process in runs:
        process.terminate()
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and any(p.is_alive() for p in runs) and worth_waiting():
        time.sleep(0.2)
    for process in runs:
        process.kill()  # those still running (a no-op for the others)
        process.join(5)
    return len(runs)


def stop_fork_server(grace=2.0):
    """Stop the fork server of :func:`start_fork_server`, if it runs: SIGTERM, SIGKILL after
    ``grace`` seconds (it would otherwise outlive an early-interrupted serve by its preload
    imports). Returns whether there was one.
    """
    import time
    from multiprocessing import forkserver

    server = forkserver._forkserver
    pid = getattr(server, "_forkserver_pid", None)
    if pid is None:
        return False
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while True:
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            break
        if done:
            break
        if time.monotonic() > deadline:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
            break
        time.sleep(0.05)
    with contextlib.suppress(OSError, TypeError):
        os.close(server._forkserver_alive_fd)
    server._forkserver_pid = server._forkserver_alive_fd = None
    return True


_UPGRADE_WARNED = threading.Event()


def warn_if_upgraded_under_serve():
    """Log once (per ``catdask serve``) that catdask's sources changed on disk after serve
    imported them: the runs keep using the code the fork server imported (and record its hash,
    :mod:`.served_code`) until serve restarts (``versions.sources_changed_since_import``: stat
    only, ~1 ms)."""
    from ..versions import sources_changed_since_import

    if _UPGRADE_WARNED.is_set() or not sources_changed_since_import():
        return False
    _UPGRADE_WARNED.set()
    logger.warning("catdask's files changed on disk after `catdask serve` started (an upgrade "
                   "or an edit): its flow runs still use the code it imported; restart "
                   "`catdask serve` to run the new code")
    return True


class PreloadedRunStarter:
    """Start one flow run in a process forked from the preloaded fork server (``context``, from
    :func:`start_fork_server`).

    Follows Prefect's process-starter contract (``prefect.runner._flow_run_executor``): signal the
    process handle, then block until the process exits; the run's environment is the one
    ``python -m prefect.engine`` would get. ``control_channel`` is the runner's channel for
    cancellation intents (without one, cancellation kills).
    """

    def __init__(self, context, *, entrypoint=None, deployment_name=None,
                 control_channel=None):
        self._context = context
        self._entrypoint = entrypoint
        self._deployment_name = deployment_name
        self._control_channel = control_channel

    def environment(self, flow_run, control_env=()):
        """The run process's environment: this process's, Prefect's settings, the run's ids."""
        from prefect.settings import get_current_settings
        from prefect.utilities.processutils import sanitize_subprocess_env

        from .served import served_entrypoint_env

        env = dict(os.environ)
        env.update(get_current_settings().to_environment_variables(exclude_unset=True))
        env.update({
            "PREFECT__FLOW_RUN_ID": str(flow_run.id),
            # As the runner's own processes: the runner, not the run, runs these hooks.
            "PREFECT__ENABLE_CANCELLATION_AND_CRASHED_HOOKS": "false",
            "PREFECT__DEPLOYMENT_NAME": self._deployment_name,
            **dict(control_env),
            **(served_entrypoint_env(self._entrypoint) if self._entrypoint else {}),
        })
        return sanitize_subprocess_env(env)

    async def start(self, flow_run, task_status=None):
        import anyio
        from prefect.runner._process_manager import ProcessHandle

        warn_if_upgraded_under_serve()
        control_env = {}
        if self._control_channel is not None:
            try:
                port, token = self._control_channel.register(flow_run.id)
                control_env = {"PREFECT__CONTROL_PORT": str(port),
                               "PREFECT__CONTROL_TOKEN": token}
            except RuntimeError:  # channel not running: cancellation falls back to killing
                pass
        handed_off = False
        try:
            process = self._context.Process(
                target=_run_flow_run, args=(self.environment(flow_run, control_env),),
                name=f"{RUN_PROCESS_PREFIX}{flow_run.id}",
            )
            # Off the runner's event loop: the first start waits for the fork server's imports.
            await anyio.to_thread.run_sync(process.start)
            if task_status is not None:
                task_status.started(ProcessHandle(process))
            handed_off = True
            # Polled, not joined in a worker thread: a join cannot be cancelled, so Ctrl-C would
            # wait for every run to finish. Once cancelled, serve stops the run.
            while process.is_alive():
                await anyio.sleep(RUN_POLL_SECONDS)
            process.join()
        except BaseException:
            if control_env and not handed_off:
                self._control_channel.unregister(flow_run.id)
            raise


def _runner_base():
    from prefect.runner import Runner

    return Runner


class ServeRunner(_runner_base()):
    """A Prefect :class:`~prefect.runner.Runner` whose served catdask runs start from the
    preloaded fork server (:class:`PreloadedRunStarter`); same arguments as ``Runner``."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._preloaded_entrypoints = {}  # deployment id -> the entry point serve registered
        self._fork_context = None
        self.preloaded = False  # True once runs start from the fork server

    def handle_sigterm(self, signum=signal.SIGTERM, frame=None):
        """SIGTERM (``systemctl stop``, ``docker stop``, Kubernetes) stops serve as Ctrl-C does:
        Prefect's own handler leaves an un-awaited coroutine and asyncio tracebacks.
        """
        handler = signal.getsignal(signal.SIGINT)
        if callable(handler):
            handler(signum, frame)
        else:  # SIGINT ignored or default: stop as an uncaught Ctrl-C would
            raise KeyboardInterrupt(f"signal {signum}")

    def add_preloaded_deployment(self, deployment):
        """Register ``deployment`` (as :meth:`add_deployment`); its runs start preloaded.

        The runner also gets serve's flow object for it: to run the hooks of a cancelled or
        crashed run, Prefect's runner otherwise loads the flow from the deployment, in serve's
        own process, running the pull steps an API user can PATCH.
        """
        from prefect.flows import load_flow_from_entrypoint

        deployment_id = self.add_deployment(deployment)
        self._preloaded_entrypoints[deployment_id] = deployment.entrypoint
        self._deployment_registry.register_flow(
            deployment_id, load_flow_from_entrypoint(deployment.entrypoint,
                                                     use_placeholder_flow=False))
        return deployment_id

    async def __aenter__(self):
        await super().__aenter__()
        poller = getattr(self, "_scheduled_run_poller", None)
        default = getattr(poller, "_resolve_starter", None)
        if default is None:
            from ..errors import ServiceStartError

            raise ServiceStartError(
                "this Prefect version offers no process-starter hook (Prefect 3.8 does): its "
                "served runs would load code from deployments that any API user can edit")
        self._fork_context = start_fork_server()

        def resolve_starter(flow_run):
            if flow_run.deployment_id not in self._preloaded_entrypoints:
                return default(flow_run)
            registry = self._deployment_registry
            return PreloadedRunStarter(
                self._fork_context,
                entrypoint=self._preloaded_entrypoints[flow_run.deployment_id],
                deployment_name=registry.get_deployment_name(flow_run.deployment_id),
                control_channel=getattr(self, "_control_channel", None),
            )

        poller._resolve_starter = resolve_starter
        self.preloaded = True
        return self
