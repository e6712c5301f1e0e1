"""A TCP proxy on 127.0.0.1 that drops connections mid-upload (a network that fails).

Every connection is forwarded to ``127.0.0.1:target_port``. While ``cut_after`` is set, a
connection that has carried more than that many bytes in the ``direction`` watched ("up":
towards the server, a truncated request body; "down": a truncated reply) is dropped after
forwarding only the first ``cut_after`` of them (both ends closed with a reset, as a dropped
link or a dead middlebox shows it). ``cuts_left`` limits how many connections are cut (None:
every one); ``cuts`` counts those cut so far.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading

from .procs import LOCALHOST

_BUFFER = 16384


class CuttingProxy:
    def __init__(self, target_port: int, cut_after: int | None = None,
                 cuts_left: int | None = None, direction: str = "up"):
        self.target_port, self.direction = target_port, direction
        self.cut_after, self.cuts_left, self.cuts = cut_after, cuts_left, 0
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        self._listener = socket.create_server((LOCALHOST, 0))
        self.port = self._listener.getsockname()[1]
        self.endpoint = f"http://{LOCALHOST}:{self.port}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return  # closed
            try:
                server = socket.create_connection((LOCALHOST, self.target_port), timeout=5)
            except OSError:
                client.close()
                continue
            server.settimeout(None)
            with self._lock:
                self._open |= {client, server}
            threading.Thread(target=self._pump, args=(client, server, "up"), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, "down"),
                             daemon=True).start()

    def _take_cut(self, direction: str, sent: int, incoming: int) -> int | None:
        """How many of ``incoming`` bytes to forward before cutting, or None: no cut."""
        with self._lock:
            if (self.cut_after is None or direction != self.direction
                    or sent + incoming <= self.cut_after):
                return None
            if self.cuts_left is not None:
                if self.cuts_left <= 0:
                    return None
                self.cuts_left -= 1
            self.cuts += 1
            return max(0, self.cut_after - sent)

    def _pump(self, source: socket.socket, sink: socket.socket, direction: str) -> None:
        sent = 0
        while True:
            try:
                data = source.recv(_BUFFER)
            except OSError:
                break
            if not data:
                break
            keep = self._take_cut(direction, sent, len(data))
            try:
                sink.sendall(data if keep is None else data[:keep])
            except OSError:
                break
            sent += len(data)
            if keep is not None:
                self._reset(source, sink)
                return
        self._close(source, sink)

    def _reset(self, *socks: socket.socket) -> None:
        for sock in socks:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self._close(*socks)

    def _close(self, *socks: socket.socket) -> None:
        for sock in socks:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)  # wakes the other pump blocked in recv
            with contextlib.suppress(OSError):
                sock.close()
            with self._lock:
                self._open.discard(sock)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._listener.close()
        with self._lock:
            socks = list(self._open)
        self._close(*socks)

    def __enter__(self) -> CuttingProxy:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
