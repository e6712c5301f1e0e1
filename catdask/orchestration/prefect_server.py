"""The Prefect server of ``catdask serve``: ``prefect server start``, plus retries of SQLite lock
conflicts inside the server, so that no caller sees them as 503s, and a bound on the requests
inside the app at once, so that none waits out the database connection pool (a 500).

Run as ``python -m catdask.orchestration.prefect_server start --host H --port P``: the same app
as ``prefect server start`` in the foreground (API, UI and services in one process,
``prefect.server.api.server.create_app(final=True)``), wrapped in :class:`RetryBusyDatabase`.

Why: Prefect's SQLite database lets one writer in at a time, and a request that read before
writing (``create_flow_run`` reads the deployment, then inserts) fails at once with "database
is locked" when another request wrote meanwhile; Prefect answers 503 ("retryable"). Prefect's
Python client retries those silently, but the UI does not: 4 concurrent "Run" clicks gave three
503s, 10 gave eight (measured against ``prefect server start``, Prefect 3.8.8). The middleware
replays such a request after a short random pause, one replay at a time, up to
:data:`ATTEMPTS` times, as Prefect's client would retry it; the failed attempt's transaction
was rolled back, so the replay is as safe as the client's retry.

Why the bound: Prefect's SQLite engine has SQLAlchemy's default pool (5 connections plus 10
overflow) and gives up on a connection after 30 s with a 500 ("QueuePool limit ... reached").
50 "Run" clicks at once while served runs were writing their states got 34 such 500s on a
loaded 2-core CI machine (the requests all held or awaited connections behind SQLite's one
writer). Requests beyond :data:`REQUESTS_IN_APP` now wait their turn outside the app, where no
timeout but the caller's runs, and Prefect's own services keep the rest of the pool.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys

__all__ = ["RetryBusyDatabase", "main"]

#: Attempts of one request when the app answers 503, and the pause before attempt k
#: (uniform in [0, BASE * 2**k], at most MAX_PAUSE): a lock conflict clears in milliseconds,
#: but with 3 served runs writing their states beside 50 creations at once, one creation met
#: a conflict on 10 attempts in a row (CI, 2 cores); 40 wait up to about half a minute.
ATTEMPTS = 40
BASE_PAUSE_SECONDS = 0.02
MAX_PAUSE_SECONDS = 1.0
# Requests larger than this are passed through once (never buffered for a replay).
MAX_REPLAY_BYTES = 4 * 2**20
#: Seconds a stopping server (SIGTERM: serve ending, or its parent_death signal) lets the
#: requests in flight finish before cancelling them. Uvicorn's default waits for them however
#: long they take: a server busy with a backlog of run requests outlived its killed parent by
#: more than 22 s (issue 44).
STOP_GRACE_SECONDS = 3
#: HTTP requests inside the app at once: below the pool's 15 connections, leaving the rest to
#: Prefect's services (scheduler, late runs, event persister) running in the same process.
REQUESTS_IN_APP = 8


class RetryBusyDatabase:
    """ASGI middleware: replay an HTTP request that the app answered with 503.

    The request body is buffered (up to :data:`MAX_REPLAY_BYTES`) and the app's response is
    held back until its status is known; a 503 is dropped and the request replayed (replays
    one at a time), up to :data:`ATTEMPTS` attempts, after which the last 503 goes to the
    caller. Websockets, lifespan
    and other responses pass through unchanged.
    """

    def __init__(self, app, attempts=ATTEMPTS, requests_in_app=REQUESTS_IN_APP):
        self.app = app
        self.attempts = attempts
        self.requests_in_app = requests_in_app
        # Made in the server's event loop, on first use.
        self._replays: asyncio.Lock | None = None
        self._admission: asyncio.Semaphore | None = None

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        body, more = [], True
        size = 0
        while more:
            message = await receive()
            if message["type"] != "http.request":  # client went away
                return
            body.append(message.get("body", b""))
            size += len(body[-1])
            more = message.get("more_body", False)
            if size > MAX_REPLAY_BYTES and more:
                return await self._pass_through(scope, body, receive, send)
        if self._admission is None:
            self._admission = asyncio.Semaphore(self.requests_in_app)
        async with self._admission:
            await self._attempts(scope, b"".join(body), send)

    async def _attempts(self, scope, payload, send):
        if await self._attempt(scope, payload, send, forward_503=self.attempts == 1):
            return
        if self._replays is None:
            self._replays = asyncio.Lock()
        for attempt in range(1, self.attempts):
            await asyncio.sleep(min(MAX_PAUSE_SECONDS,
                                    random.uniform(0, BASE_PAUSE_SECONDS * 2**attempt)))
            # Replays go one at a time: they no longer collide with each other, only with
            # first attempts and Prefect's services.
            async with self._replays:
                last = attempt == self.attempts - 1
                if await self._attempt(scope, payload, send, forward_503=last):
                    return

    async def _pass_through(self, scope, head, receive, send):
        pending = [{"type": "http.request", "body": b"".join(head), "more_body": True}]

        async def replay_then_receive():
            return pending.pop() if pending else await receive()

        await self.app(scope, replay_then_receive, send)

    async def _attempt(self, scope, payload, send, *, forward_503):
        """Run the app once; True when its response went to the caller."""
        delivered = {"body": False}
        state = {"forward": None}

        async def receive():
            if delivered["body"]:
                await asyncio.Event().wait()  # no more body: wait for the app to finish
            delivered["body"] = True
            return {"type": "http.request", "body": payload, "more_body": False}

        async def hold_back_503(message):
            if message["type"] == "http.response.start":
                state["forward"] = message["status"] != 503 or forward_503
            if state["forward"]:
                await send(message)

        # Routing rewrites the scope it is given (a mount moves the path into root_path):
        # every attempt gets the scope as the server made it.
        fresh = dict(scope)
        if "state" in scope:
            fresh["state"] = dict(scope["state"])
        try:
            await self.app(fresh, receive, hold_back_503)
        except Exception:
            # Starlette re-raises the error behind a 503 after sending the response (for the
            # server's log): a held-back 503 is a failed attempt, anything else propagates.
            if state["forward"] is not False:
                raise
        return bool(state["forward"])


def main(argv=None):
    """``start --host H --port P``: serve Prefect's API, UI and services until stopped."""
    parser = argparse.ArgumentParser(prog="python -m catdask.orchestration.prefect_server")
    parser.add_argument("command", choices=["start"])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=4200)
    args = parser.parse_args(argv)

    import uvicorn
    from prefect.server.api.server import create_app
    from prefect.settings import get_current_settings

    server = get_current_settings().server
    uvicorn.run(RetryBusyDatabase(create_app(final=True)), host=args.host, port=args.port,
                timeout_keep_alive=server.api.keepalive_timeout,
                timeout_graceful_shutdown=STOP_GRACE_SECONDS,
                log_level=server.logging_level.lower())
    return 0


if __name__ == "__main__":
    sys.exit(main())
