"""What the CLI sets up before the heavy imports: Prefect's home and telemetry, the Dask
scheduler and Prefect API checks, the console set-up for flow runs (:func:`flow`), the Dask
client, and the embedded cluster's quiet shutdown.

Nothing here imports Prefect or Dask at module level; the commands that need no flow
(``datasets``, ``models``, ``check``, ``plot``) never load them.
"""

from __future__ import annotations

import logging
import os
import socket
import ssl
import sys
import urllib.error
import urllib.request
from pathlib import Path

from catdask import settings

from .exits import CliError
from .output import note

#: Seconds to wait for the TCP connection to a ``--scheduler`` address.
SCHEDULER_PROBE_TIMEOUT = 3.0
#: Dask's own connect timeout for that address (its default, 30 s, is retried by the flows).
SCHEDULER_CONNECT_TIMEOUT = "10s"
#: Seconds for the first bytes of a Dask scheduler's handshake (sent on accept).
SCHEDULER_GREETING_TIMEOUT = 3.0
#: Seconds for a Dask handshake there (a scheduler answers in milliseconds; an HTTP server
#: never does, and the command must fail within 10 s in all).
SCHEDULER_HANDSHAKE_TIMEOUT = 5.0
DEFAULT_SCHEDULER_PORT = 8786
ENV_SCHEDULER = settings.SCHEDULER.name
#: Seconds to wait for ``$PREFECT_API_URL/health``.
PREFECT_API_PROBE_TIMEOUT = 5.0
ENV_PREFECT_API = settings.PREFECT_API_URL.name


#: Set by ``main`` from ``-v``: whether failed flow and task runs may print tracebacks.
show_tracebacks = False
#: Set by ``serve``: the console script ends the process without the interpreter's teardown
#: once the command has returned (:func:`catdask.cli.main.run`).
exit_without_teardown = False


class _NoRunFailureEchoes(logging.Filter):
    """Drops the run records that repeat a failure on the console: those with a traceback
    (Prefect logs one per failed task and flow run) and the ``Finished in state Failed(...)``
    of every run the error passed through. The CLI reports the error itself, in one line. The
    records still reach the Prefect API (its handler sits on the run loggers, before they
    propagate here)."""

    def filter(self, record):
        if not record.name.startswith(("prefect.flow_runs", "prefect.task_runs")):
            return True
        return not (record.exc_info or str(record.msg).startswith("Finished in state"))


def flow(function):
    """``function`` (a flow, or a function running one, e.g. ``run_train``), once the console
    is set up for flow runs.

    The commands import their flows (and so Prefect) inside their own bodies, after the
    arguments are checked, and pass them through here before running them.
    """
    if not show_tracebacks:  # Prefect has configured its console handlers by now
        for handler in logging.getLogger().handlers:
            if not any(isinstance(f, _NoRunFailureEchoes) for f in handler.filters):
                handler.addFilter(_NoRunFailureEchoes())
    return function


def prefect_server(command: str):
    """Context manager: the Prefect API the flows report to (``PREFECT_API_URL``, or a
    temporary server on 127.0.0.1 that dies with this process, even on ``kill -9``). Starting
    one takes 6-20 s, said in a line first: ``catdask <command>`` would be silent meanwhile."""
    from prefect.settings import PREFECT_API_URL

    from catdask.orchestration.server import temporary_prefect_server

    if not PREFECT_API_URL.value():
        note(f"catdask {command}: starting a Prefect server for this run (PREFECT_API_URL "
             "names yours) ...")
    return temporary_prefect_server()


def close_embedded_cluster() -> None:
    """Close the Dask cluster this process embedded for the flows, once the command's result is
    printed; without ``-v`` the nanny's "still alive ... killing" is not shown.
    """
    cluster = sys.modules.get("catdask.distributed.cluster")
    if cluster is None:  # no flow ran: nothing was started
        return
    if not show_tracebacks:
        logging.getLogger("distributed.nanny").setLevel(logging.ERROR)
    cluster.close_embedded_cluster()


def dask_client(address: str | None):
    """Context manager yielding the Dask client the flows compute on (see
    ``dask_client_context``)."""
    from catdask import operators  # noqa: F401  (adds what the workers import as they start)
    from catdask.distributed import dask_client_context

    return dask_client_context(address)


def prefect_environment(environ, store_root: Path) -> dict[str, str]:
    """The variables (of those not already set in ``environ``) to add before Prefect is imported:
    one Prefect home per store (``<store_root>/.prefect``) unless the user chose one
    (``PREFECT_HOME``) or points ``PREFECT_API_URL`` at a server; Prefect's telemetry and analytics
    off unless set.
    """
    updates = {"DO_NOT_TRACK": "1", "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
               # Quiet on the console only: the API (the UI's run logs, the solver's progress)
               # still gets every INFO record.
               "PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL": "WARNING",
               # The temporary local server needs 6-10 s to start; more on a loaded machine.
               "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "120"}
    if not settings.PREFECT_API_URL.get(environ):
        # A server the user chose in a Prefect profile (`prefect config set PREFECT_API_URL=`)
        # counts as chosen: the store-local home would hide the profile, and the runs would
        # go to a temporary server instead of the user's UI.
        configured = profile_api_url(environ)
        if configured:
            updates["PREFECT_API_URL"] = configured[0]
    if (not settings.PREFECT_HOME.get(environ) and not settings.PREFECT_API_URL.get(environ)
            and "PREFECT_API_URL" not in updates):
        updates["PREFECT_HOME"] = str(Path(store_root).absolute() / ".prefect")
    return {k: v for k, v in updates.items() if k not in environ}


def profile_api_url(environ) -> tuple[str, str] | None:
    """``(url, where)``: ``PREFECT_API_URL`` of the user's active Prefect profile, if any, read as
    Prefect reads it without importing Prefect (``$PREFECT_PROFILES_PATH``, else
    ``$PREFECT_HOME/profiles.toml``, else ``~/.prefect/profiles.toml``; ``$PREFECT_PROFILE``, else
    the file's ``active``). ``where`` names the profile and file. Missing or bad file: None.
    """
    import tomllib

    profiles, prefect_home = (settings.PREFECT_PROFILES_PATH.get(environ),
                              settings.PREFECT_HOME.get(environ))
    if profiles:
        path = Path(profiles).expanduser()
    elif prefect_home:
        path = Path(prefect_home).expanduser() / "profiles.toml"
    else:
        home = settings.HOME.get(environ)
        path = (Path(home) if home else Path.home()) / ".prefect" / "profiles.toml"
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):  # missing, unreadable, not TOML (TOMLDecodeError)
        return None
    name = settings.PREFECT_PROFILE.get(environ) or data.get("active")
    profile = data.get("profiles", {}).get(name) if isinstance(name, str) else None
    url = profile.get("PREFECT_API_URL") if isinstance(profile, dict) else None
    if not isinstance(url, str) or not url:
        return None
    return url, f"Prefect profile {name!r} in {path}"


def prepare_prefect(store) -> None:
    """Apply :func:`prefect_environment` to ``os.environ`` (before any Prefect import), creating the
    Prefect home with its parents (Prefect creates only the last folder, and its SQLite database
    cannot be opened in a folder that does not exist).
    """
    from catdask.store.root import open_store

    updates = prefect_environment(os.environ, open_store(store).local_folder)
    os.environ.update(updates)
    home = settings.PREFECT_HOME.get()
    if home:
        try:
            Path(home).expanduser().mkdir(parents=True, exist_ok=True)
        except OSError as exc:  # was: "[Errno 2] No such file or directory: '/x/store'"
            where = ("in the store: check --store / $CATDASK_STORE"
                     if "PREFECT_HOME" in updates else "chosen by $PREFECT_HOME")
            raise CliError(f"cannot create Prefect's home folder {home} ({where}): "
                           f"{exc.strerror or exc}") from None
        from .writable import unwritable_reason

        reason = unwritable_reason(Path(home).expanduser())
        if reason:  # was: "OSError: [Errno 30] ...: '<home>/temporary-server.log'", exit 1
            raise CliError(f"Prefect's home folder {home} cannot be written ({reason}); "
                           "Prefect keeps its database and logs there: use a writable store, "
                           "or set PREFECT_HOME to a writable folder")


def scheduler_address(given: str | None) -> str | None:
    """The scheduler the flows will use: ``--scheduler``, else ``$CATDASK_SCHEDULER``."""
    return given or settings.SCHEDULER.get()


def _host_port(address: str) -> tuple[str, int] | None:
    """``(host, port)`` of a TCP/TLS scheduler address; None for other transports."""
    scheme, sep, rest = address.partition("://")
    if not sep:
        if "/" in address:  # tcp:/host:port, tcp//host:port
            raise CliError(f"bad Dask scheduler address {address!r}: expected "
                           "SCHEME://HOST:PORT, e.g. tcp://10.0.0.5:8786")
        scheme, rest = "tcp", address
    if scheme not in ("tcp", "tls"):
        # inproc://, ucx:// have nothing to probe over TCP; tpc://, http:// have no transport.
        from catdask.distributed.cluster import address_problem

        problem = address_problem(address)
        if problem:
            raise CliError(f"bad Dask scheduler address {address!r}: {problem}")
        return None
    rest = rest.rstrip("/")
    if rest.startswith("["):  # [IPv6]:port
        host, _, port = rest[1:].partition("]")
        port = port.lstrip(":")
    else:
        host, _, port = rest.rpartition(":") if ":" in rest else (rest, "", "")
    if not host:
        raise CliError(f"bad Dask scheduler address {address!r}: no host "
                       "(expected e.g. tcp://10.0.0.5:8786)")
    try:
        return host, int(port) if port else DEFAULT_SCHEDULER_PORT
    except ValueError:
        raise CliError(f"bad Dask scheduler address {address!r}: port {port!r} is not a number "
                       "(expected e.g. tcp://10.0.0.5:8786)") from None


def _first_bytes(sock, timeout: float) -> bytes | None:
    """What the server at ``sock`` says first, within ``timeout`` s (None: nothing)."""
    sock.settimeout(timeout)
    try:
        return sock.recv(64)
    except (socket.timeout, TimeoutError):
        return None
    except OSError:
        return b""


def _greeting_problem(greeting: bytes | None, target: tuple[str, int]) -> str | None:
    """Why the first bytes of the TCP server at ``target`` are not a Dask scheduler's (None: they
    may be). A Dask server writes its handshake as soon as it accepts; an HTTP server waits for a
    request; SSH, SMTP and the like greet in text.
    """
    if greeting is None:
        from catdask.distributed.probe import web_server_note

        hint = web_server_note(*target)
        return (f"it accepts connections but sends no Dask handshake within "
                f"{SCHEDULER_GREETING_TIMEOUT:g} s"
                + (f": {hint}" if hint else " (a web server or another service?)"))
    if greeting == b"":
        return "it closed the connection without a Dask handshake"
    if greeting[:1].isalpha() and greeting[:4].isascii():  # "HTTP/1.0 400", "SSH-2.0", "220 "
        banner = greeting.split(b"\r")[0].split(b"\n")[0][:40].decode("ascii", "replace")
        return f"it speaks another protocol (it says {banner!r})"
    return None


def check_scheduler(address: str | None, timeout: float = SCHEDULER_PROBE_TIMEOUT) -> dict | None:
    """Fail at once, naming ``address``, when nothing listens there; returns the scheduler's
    ``identity`` reply, or None when none was asked for (no address, TLS, another transport). Also
    shortens Dask's connect timeout for that address (unless configured).
    Raises :class:`CliError`: exit code 3, one line naming the address and the reason.
    """
    if not address:
        return None
    target = _host_port(address)
    if target is None:  # inproc://, ucx://: nothing to probe over TCP
        return None
    tls = address.startswith("tls://")
    try:
        with socket.create_connection(target, timeout=timeout) as sock:
            greeting = None if tls else _first_bytes(sock, SCHEDULER_GREETING_TIMEOUT)
    except socket.timeout:
        raise CliError(f"cannot reach the Dask scheduler at {address}: no answer within "
                       f"{timeout:g} s (check --scheduler / ${ENV_SCHEDULER})") from None
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise CliError(f"cannot reach the Dask scheduler at {address}: {reason} "
                       f"(check --scheduler / ${ENV_SCHEDULER})") from None
    if not tls:
        problem = _greeting_problem(greeting, target)
        if problem:  # before distributed is imported: a few seconds saved on the way out
            raise CliError(f"cannot connect to the Dask scheduler at {address}: {problem}; "
                           f"check --scheduler / ${ENV_SCHEDULER}")
    os.environ.setdefault("DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT", SCHEDULER_CONNECT_TIMEOUT)
    if address.startswith(("tcp://", "tls://")) or "://" not in address:
        # Something answers TCP there; a port that is no Dask scheduler (a web server, another
        # service), or tls:// without TLS settings, must fail here too, in one line, before the
        # Prefect server starts.
        from catdask.distributed.cluster import probe_scheduler
        from catdask.errors import SchedulerConnectionError

        try:
            return probe_scheduler(address, timeout=SCHEDULER_HANDSHAKE_TIMEOUT)
        except SchedulerConnectionError as exc:
            raise CliError(str(exc)) from None
    return None


def _probe_reason(exc: BaseException, timeout: float) -> str | None:
    """Why ``$PREFECT_API_URL/health`` could not be reached, or None when something answered
    there (an HTTP status, a TLS handshake the flows may be set up to accept)."""
    if isinstance(exc, urllib.error.HTTPError):
        if exc.code in (404, 405, 501):  # a Prefect API always has GET /health
            return (f"a web server answers there, but not a Prefect API (GET /health: HTTP "
                    f"{exc.code})")
        return None  # 401/403 (auth), 5xx (a Prefect server in trouble): left to the flows
    reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
    if isinstance(reason, ssl.SSLError):
        return None
    if isinstance(reason, (socket.timeout, TimeoutError)):
        return f"no answer within {timeout:g} s"
    return getattr(reason, "strerror", None) or str(reason)


def check_prefect_api(timeout: float = PREFECT_API_PROBE_TIMEOUT) -> None:
    """Fail at once, naming the URL, when ``$PREFECT_API_URL`` (or the active profile's) is set and
    nothing Prefect-like answers at its ``/health``; other HTTP answers (401, 5xx) are left to the
    flows, which say more about them.
    Raises :class:`CliError`: exit code 3, one line naming the URL and what to do.
    """
    url = settings.PREFECT_API_URL.get()
    source, unset = ENV_PREFECT_API, "unset it"
    if not url:
        configured = profile_api_url(os.environ)
        if configured is None:
            return
        url, where = configured
        source = f"{ENV_PREFECT_API} of the {where}"
        unset = f"`prefect config unset {ENV_PREFECT_API}`"
    if not url.startswith(("http://", "https://")):
        raise CliError(f"{source}={url} is not an http(s) URL (expected e.g. "
                       f"http://127.0.0.1:4200/api, or {unset} to use a temporary local server)")
    try:
        with urllib.request.urlopen(url.rstrip("/") + "/health", timeout=timeout) as answer:
            if not answer.read(64).lstrip().startswith(b"<"):
                return
            reason = "a web server answers there, but not a Prefect API (GET /health: a page)"
    except ValueError as exc:  # e.g. a port that is not a number
        reason = f"not a URL ({exc})"
    except (urllib.error.URLError, OSError) as exc:
        reason = _probe_reason(exc, timeout)
        if reason is None:
            return
    raise CliError(f"cannot reach the Prefect API at {url}: {reason} (check "
                   f"{source}, or {unset} to use a temporary local server)")
