"""A lost response is not a lost race (issue 39 item 2): a proxy in front of SeaweedFS passes a
conditional PUT on to the server and then drops the connection instead of the answer. The
write happened; the client's retry (or its own read-back) meets its own object. The backend
must report success for it, and still report a loss when the object is someone else's."""

from __future__ import annotations

import http.client
import http.server
import threading
from urllib.parse import urlsplit

import pytest

from catdask.object_store import PreconditionFailed

from ..helpers.s3_server import BUCKET
from .test_s3_errors import http_server, reply


class _DroppingProxy(http.server.BaseHTTPRequestHandler):
    """Forwards every request; swallows the answer to the first ``drops`` conditional PUTs."""

    protocol_version = "HTTP/1.1"

    def _forward(self):
        server = self.server
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        upstream = http.client.HTTPConnection(*server.upstream, timeout=30)
        upstream.putrequest(self.command, self.path, skip_host=True, skip_accept_encoding=True)
        for name, value in self.headers.items():
            upstream.putheader(name, value)
        upstream.endheaders(body)
        response = upstream.getresponse()
        payload = response.read()
        conditional = self.command == "PUT" and (
            "If-None-Match" in self.headers or "If-Match" in self.headers)
        with server.lock:
            server.log.append((self.command, self.path, response.status, conditional))
            drop = conditional and server.drops > 0
            if drop:
                server.drops -= 1
        upstream.close()
        if drop:  # the write is done; its answer is lost
            self.close_connection = True
            self.connection.shutdown(2)
            return
        reply(self, response.status, response.getheaders(), payload)

    do_GET = do_PUT = do_HEAD = do_DELETE = do_POST = _forward

    def log_message(self, *args):
        pass


@pytest.fixture
def proxied(s3_server):
    from catdask.object_store.s3 import S3Backend

    parts = urlsplit(s3_server.endpoint)
    with http_server(_DroppingProxy, upstream=(parts.hostname, parts.port), drops=0, log=[],
                     lock=threading.Lock()) as (server, url):
        backend = S3Backend(BUCKET, "lost-response", environ={**s3_server.env,
                                                              "AWS_ENDPOINT_URL": url})
        backend.put("warm-up", b"")  # access and conditional-write checks, answered normally
        server.log.clear()
        yield backend, server


def _conditional_puts(server):
    return [entry for entry in server.log if entry[3]]


def test_create_whose_answer_was_lost_succeeds(proxied):
    backend, server = proxied
    backend.delete("k")
    server.drops = 1
    version = backend.put_new("k", b"ours")
    assert backend.get("k") == (b"ours", version)
    assert _conditional_puts(server)[0][2] == 200  # the server did write it, first time


def test_compare_and_swap_whose_answer_was_lost_succeeds(proxied):
    backend, server = proxied
    old = backend.put("p", b"old")
    server.drops = 1
    version = backend.put_if_match("p", b"new", old)
    assert backend.get("p") == (b"new", version)
    assert _conditional_puts(server)[0][2] == 200


def test_lost_answer_of_a_losing_create_is_still_a_loss(proxied):
    backend, server = proxied
    theirs = backend.put("q", b"theirs")
    server.drops = 1
    with pytest.raises(PreconditionFailed):
        backend.put_new("q", b"ours")
    assert backend.get("q") == (b"theirs", theirs)
    assert _conditional_puts(server)[0][2] == 412
