"""What a user sees when an S3 store cannot be used: one line naming the store and the fix,
within 10 s, never a secret. Against SeaweedFS (missing bucket, wrong credentials), a web
server that is not S3, a closed port, and a fake S3 that ignores conditional writes."""

from __future__ import annotations

import contextlib
import http.server
import re
import threading
import time

import pytest

from catdask.errors import CatdaskError
from catdask.object_store import (AccessDeniedError, BucketNotFoundError,
                                  ConditionalWritesUnsupportedError, EndpointUnreachableError,
                                  NotAnObjectStoreError, StoreURLError, open_backend)

from ..helpers.procs import LOCALHOST, free_port
from ..helpers.s3_server import BUCKET

LIMIT_S = 10.0


def _one_line_error(backend, operation, expected, secret):
    start = time.monotonic()
    with pytest.raises(expected) as info:
        operation(backend)
    elapsed = time.monotonic() - start
    message = str(info.value)
    assert isinstance(info.value, CatdaskError)  # the CLI: one line, exit 3
    assert elapsed < LIMIT_S, f"{elapsed:.1f} s: {message}"
    assert "\n" not in message and backend.url in message, message
    assert secret not in message and secret not in repr(backend)
    error = info.value  # raised without a chained trace of obstore's (which names the URL)
    assert error.__cause__ is None and (error.__context__ is None or error.__suppress_context__)
    return message


def _s3(env, bucket=BUCKET, **changes):
    from catdask.object_store.s3 import S3Backend

    return S3Backend(bucket, "errors", environ={**env, **changes})


OPERATIONS = {"get": lambda b: b.get("k"), "put_new": lambda b: b.put_new("k", b"x"),
              "list": lambda b: list(b.list(""))}


@pytest.mark.parametrize("operation", sorted(OPERATIONS))
def test_missing_bucket(s3_server, operation):
    backend = _s3(s3_server.env, bucket="no-such-bucket")
    message = _one_line_error(backend, OPERATIONS[operation], BucketNotFoundError,
                              s3_server.secret)
    assert "'no-such-bucket' does not exist" in message


@pytest.mark.parametrize("variable", ["AWS_SECRET_ACCESS_KEY", "AWS_ACCESS_KEY_ID"])
def test_wrong_credentials(s3_server, variable):
    wrong = "wrong-" + s3_server.secret[:8]
    backend = _s3(s3_server.env, **{variable: wrong})
    message = _one_line_error(backend, OPERATIONS["put_new"], AccessDeniedError, wrong)
    assert "refused the credentials" in message
    assert s3_server.secret not in message


class _Handler(http.server.BaseHTTPRequestHandler):
    """Answers every request as the handler's ``respond`` says."""

    def _answer(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        reply(self, *self.server.respond(self.command, self.path, body))

    do_GET = do_PUT = do_HEAD = do_DELETE = do_POST = _answer

    def log_message(self, *args):
        pass


def reply(handler, status, headers, payload):
    """Answer ``handler``'s request (headers: name -> value; hop-by-hop ones are left out)."""
    handler.send_response(status)
    for name, value in dict(headers).items():
        if name.lower() not in ("transfer-encoding", "connection", "content-length"):
            handler.send_header(name, value)
    handler.send_header("Content-Length", str(len(payload)))
    handler.end_headers()
    handler.wfile.write(payload)


@contextlib.contextmanager
def http_server(handler, **attributes):
    """(server, its URL): ``handler`` serving on 127.0.0.1 in a thread; ``attributes`` are set
    on the server, for the handler to read."""
    server = http.server.ThreadingHTTPServer((LOCALHOST, 0), handler)
    for name, value in attributes.items():
        setattr(server, name, value)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server, f"http://{LOCALHOST}:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_endpoint_that_is_not_s3(s3_server):
    def not_found_page(method, path, body):
        return 404, {"Content-Type": "text/html"}, b"<html><body>Not Found</body></html>"

    with http_server(_Handler, respond=not_found_page) as (_, url):
        message = _endpoint_error(s3_server, url, NotAnObjectStoreError)
    assert "not an S3 server" in message


def _endpoint_error(s3_server, url, expected):
    """The one line of a first request to the endpoint ``url`` (which it names)."""
    backend = _s3(s3_server.env, AWS_ENDPOINT_URL=url)
    message = _one_line_error(backend, OPERATIONS["get"], expected, s3_server.secret)
    assert url in message
    return message


def test_closed_port(s3_server):
    _endpoint_error(s3_server, f"http://{LOCALHOST}:{free_port()}", EndpointUnreachableError)


@pytest.mark.slow
def test_endpoint_that_accepts_and_never_answers(s3_server):
    import socket

    with socket.socket() as silent:
        silent.bind((LOCALHOST, 0))
        silent.listen(16)  # the kernel accepts connections; nothing ever answers them
        _endpoint_error(s3_server, f"http://{LOCALHOST}:{silent.getsockname()[1]}",
                        EndpointUnreachableError)


def test_server_that_ignores_conditional_writes(s3_server):
    """A fake S3 that lists an empty bucket and accepts every PUT, If-None-Match or not."""
    objects: dict[str, bytes] = {}

    def careless_s3(method, path, body):
        if method == "GET" and "list-type=2" in path:
            return 200, {"Content-Type": "application/xml"}, (
                b'<?xml version="1.0" encoding="UTF-8"?><ListBucketResult>'
                b"<IsTruncated>false</IsTruncated><KeyCount>0</KeyCount></ListBucketResult>")
        if method == "PUT":
            objects[path] = body
            return 200, {"ETag": f'"{len(objects)}"'}, b""
        if method == "POST" and path.endswith("?delete"):  # DeleteObjects, as obstore sends
            for key in re.findall(rb"<Key>([^<]*)</Key>", body):
                objects.pop(f"{path.split('?')[0]}/{key.decode()}", None)
            return 200, {"Content-Type": "application/xml"}, b"<DeleteResult></DeleteResult>"
        return 404, {}, b""

    with http_server(_Handler, respond=careless_s3) as (_, url):
        backend = _s3(s3_server.env, AWS_ENDPOINT_URL=url)
        message = _one_line_error(backend, OPERATIONS["put_new"],
                                  ConditionalWritesUnsupportedError, s3_server.secret)
    assert "ignores If-None-Match" in message
    assert objects == {}  # the probe cleaned up; the user's object was never written


def test_plain_http_endpoint_needs_allow_http(s3_server):
    env = {k: v for k, v in s3_server.env.items() if k != "AWS_ALLOW_HTTP"}
    with pytest.raises(StoreURLError, match="AWS_ALLOW_HTTP=true"):
        _s3(env)


@pytest.mark.parametrize("url", ["", "  ", "gs://bucket/x", "s3:/bucket/x", "s3:bucket",
                                 "s3://Bad_Bucket/x", "s3://key:secret@bucket/x",
                                 "s3://bucket/a/../b", "file://host/x", "foo:bar",
                                 "gs://h/x?sig=secret", "s3:/b/x?token=secret",
                                 "s3://bucket/x?token=secret", "s3://bucket/x#secret",
                                 "file://host/x?secret", "foo:bar?secret"])
def test_urls_that_cannot_be_opened(url):
    with pytest.raises(StoreURLError) as info:
        open_backend(url)
    message = str(info.value)
    assert "\n" not in message and "secret" not in message


def test_url_scheme():
    from catdask.object_store import url_scheme

    assert [url_scheme(u) for u in ("S3://b", "file:///x", "gs://b", "C:\\data", "rel/p",
                                    "/abs", "foo:bar")] == ["s3", "file", "gs", None, None,
                                                            None, "foo"]


def test_urls_that_open():
    from catdask.object_store import LocalBackend
    from catdask.object_store.s3 import S3Backend

    assert isinstance(open_backend("relative/store"), LocalBackend)
    assert open_backend("file:///tmp/x").root.as_posix() == "/tmp/x"
    s3 = open_backend("s3://my-bucket/some/prefix/")
    assert isinstance(s3, S3Backend) and s3.url == "s3://my-bucket/some/prefix"
    assert (s3.bucket, s3.prefix) == ("my-bucket", "some/prefix")
