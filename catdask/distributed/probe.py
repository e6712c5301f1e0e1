"""A user-given Dask scheduler: its address checked, probed under a deadline, connected."""

from __future__ import annotations

import json
import re
import socket
import threading

from .. import settings
from ..errors import SchedulerConnectionError
from .batching import reduce_message_batching

ENV_SCHEDULER = settings.SCHEDULER.name

# What a web server's reply may be read up to: a dashboard's identity lists every worker.
_HTTP_REPLY_MAX_BYTES = 1 << 20


def _tcp_target(address):
    """``(host, port)`` of a tcp:// or tls:// address (or host:port); None for others."""
    from distributed.comm.addressing import parse_address, parse_host_port

    try:
        scheme, location = parse_address(address)
        if scheme not in ("tcp", "tls"):
            return None
        host, port = parse_host_port(location)
        return host, int(port)
    except (ValueError, TypeError):
        return None


def _refusal(address, timeout):
    """Why a plain TCP connection to ``address`` fails at once (refused, no route), or None (the
    handshake decides): distributed retries a refused connection until its timeout, then reports
    it as a missing handshake.
    """
    target = _tcp_target(address)
    if target is None:
        return None
    try:
        with socket.create_connection(target, timeout=timeout):
            return None
    except (ValueError, socket.timeout):
        return None
    except OSError as exc:
        return exc.strerror or str(exc)


def web_server_note(host, port, timeout=2.0):
    """What answers HTTP at ``host:port``, for an address that sent no Dask handshake (None when
    nothing does). The commonest mistake is the dashboard's port (8787) for the scheduler's: a
    scheduler's HTTP server answers ``GET /json/identity.json`` with its address, which the message
    then names. Plain HTTP only.
    """
    request = f"GET /json/identity.json HTTP/1.0\r\nHost: {host}\r\n\r\n".encode()
    data = b""
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.settimeout(timeout)
            sock.sendall(request)
            while len(data) < _HTTP_REPLY_MAX_BYTES:
                chunk = sock.recv(65536)
                if not chunk:
                    break
                data += chunk
    except OSError:  # socket.timeout included: judge what came
        pass
    head, _, body = data.partition(b"\r\n\r\n")
    status = head.split(b"\r\n", 1)[0].decode("ascii", "replace")
    if not status.startswith("HTTP/"):
        return None
    scheduler = None
    try:
        identity = json.loads(body)
        if isinstance(identity, dict) and identity.get("type") == "Scheduler":
            scheduler = identity.get("address")
    except ValueError:  # not JSON, or cut at the limit: its opening still names the address
        if re.match(rb'\s*\{"type":\s*"Scheduler"', body):
            found = re.search(rb'"address":\s*"([^"]{1,200})"', body[:4096])
            scheduler = found.group(1).decode("utf-8", "replace") if found else None
    if isinstance(scheduler, str) and scheduler:
        return (f"it is the dashboard (HTTP) of the Dask scheduler at {scheduler}; give that "
                "address instead")
    return f"a web server answers there ({status[:60]}), not a Dask scheduler"


def _identity(address, security, timeout):
    """The ``identity`` reply of the Dask server at ``address``, within ``timeout`` seconds
    (in an event loop of its own, on a thread of its own: callable from any thread)."""
    import asyncio

    from distributed.comm import connect
    from distributed.security import Security

    connection_args = (security or Security()).get_connection_args("client")

    async def ask():
        # distributed's connect() waits for the peer's handshake without any timeout: a port
        # that accepts TCP and waits for a request (an HTTP server) hung the client for 724 s.
        comm = await connect(address, timeout=timeout, **connection_args)
        try:
            await comm.write({"op": "identity"})
            return await comm.read()
        finally:
            comm.abort()

    outcome = {}

    def run():
        try:
            outcome["reply"] = asyncio.run(asyncio.wait_for(ask(), timeout))
        except BaseException as exc:  # noqa: BLE001 - handed to the caller
            outcome["error"] = exc

    thread = threading.Thread(target=run, name="catdask-scheduler-probe", daemon=True)
    thread.start()
    thread.join(timeout + 2.0)
    if "error" in outcome:
        raise outcome["error"]
    if "reply" not in outcome:
        raise TimeoutError
    return outcome["reply"]


def probe_scheduler(address, *, security=None, timeout=10.0):
    """Check, within ``timeout`` seconds, that a Dask scheduler answers at ``address``; returns its
    ``identity`` reply, which lists its workers with their resources (what the CLI needs before a
    run, without a second query). Raises :class:`catdask.errors.SchedulerConnectionError`, one line
    naming the address and what answered instead.
    """
    problem = address_problem(address, security)
    refused = _refusal(address, timeout) if problem is None else None
    if refused:
        problem = f"nothing listens there ({refused})"
    if problem is None:
        try:
            reply = _identity(address, security, timeout)
        except TimeoutError:  # asyncio's too, since Python 3.11
            problem = f"no Dask handshake within {timeout:g} s"
            target = _tcp_target(address) if not str(address).startswith("tls://") else None
            note = web_server_note(*target) if target else None
            if note:
                problem = f"{problem}: {note}"
        except (OSError, MemoryError, ValueError, TypeError, EOFError) as exc:
            problem = ("the reply is not the Dask protocol"
                       if isinstance(exc, (MemoryError, ValueError, TypeError, EOFError))
                       or type(exc).__name__ == "CommClosedError"
                       else f"{type(exc).__name__}: {exc}")
        except Exception as exc:  # noqa: BLE001 - e.g. a msgpack error on foreign bytes
            problem = f"the reply is not the Dask protocol ({type(exc).__name__})"
        else:
            kind = reply.get("type") if isinstance(reply, dict) else None
            if kind != "Scheduler":
                problem = (f"a Dask {kind.lower()} answers there, not the scheduler"
                           if isinstance(kind, str) else "the reply is not the Dask protocol")
    if problem:
        raise SchedulerConnectionError(
            f"cannot connect to the Dask scheduler at {address}: {problem} (is a Dask "
            f"scheduler listening there? check --scheduler / ${ENV_SCHEDULER})")
    return reply


#: Seconds to wait for a user-given scheduler's handshake (Dask's default is 30 s).
SCHEDULER_CONNECT_TIMEOUT = 10.0


def address_problem(address, security=None) -> str | None:
    """What makes ``address`` unusable before any connection is tried, or None: a scheme Dask has no
    transport for (``tpc://``, ``http://``), or ``tls://`` without TLS settings; Dask reports both
    misleadingly.
    """
    from distributed.comm.registry import backends

    scheme, sep, _ = str(address).partition("://")
    if not sep:
        return None  # host:port, which Dask reads as tcp://
    if scheme not in backends:
        known = ", ".join(f"{name}://" for name in sorted(backends))
        return (f"unknown scheme {scheme!r} (Dask knows {known}; a scheduler started by "
                "`dask scheduler` listens on tcp://, or tls:// with --protocol tls)")
    if scheme == "tls":
        from distributed.security import Security

        if (security or Security()).get_connection_args("client").get("ssl_context") is None:
            return ("tls:// needs TLS settings: pass security=Security(tls_ca_file=..., "
                    "tls_client_cert=..., tls_client_key=...) or set distributed.comm.tls "
                    "(ca-file, client.cert, client.key) in Dask's configuration, e.g. "
                    "deploy/dask/dask-tls.yaml in ~/.config/dask/")
    return None


def connect_scheduler(address, *, security=None, timeout=SCHEDULER_CONNECT_TIMEOUT):
    """A :class:`distributed.Client` connected to the scheduler at ``address``. Raises
    :class:`catdask.errors.SchedulerConnectionError` naming the address when no Dask scheduler
    answers within ``timeout`` seconds (the half-opened client is closed at once; the flows do not
    retry this error).
    """
    from distributed import Client

    problem = address_problem(address, security)
    if problem:
        raise SchedulerConnectionError(
            f"cannot connect to the Dask scheduler at {address}: {problem} "
            f"(check --scheduler / ${ENV_SCHEDULER})")

    class _ClosingClient(Client):
        # Client.__init__ ends with start(); a failed start otherwise leaves a client whose
        # __del__ times out at exit with a traceback.
        def start(self, **kwargs):
            try:
                super().start(**kwargs)
            except BaseException:
                self.close(timeout=2)
                raise

    probe_scheduler(address, security=security, timeout=timeout)
    kwargs = {"security": security} if security is not None else {}
    try:
        client = _ClosingClient(address, set_as_default=False, timeout=timeout, **kwargs)
    except (OSError, TimeoutError, MemoryError, ValueError, TypeError) as exc:
        reason = ("no Dask handshake within %g s" % timeout
                  if isinstance(exc, TimeoutError) else
                  "the reply is not the Dask protocol" if isinstance(exc, (MemoryError, ValueError,
                                                                            TypeError))
                  else f"{type(exc).__name__}: {exc}")
        raise SchedulerConnectionError(
            f"cannot connect to the Dask scheduler at {address}: {reason} (is a Dask scheduler "
            f"listening there? check --scheduler / ${ENV_SCHEDULER})") from None
    reduce_message_batching(client)  # our side only: the scheduler is someone else's
    return client
