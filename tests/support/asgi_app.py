"""A small ASGI app for the HTTP/2 tests, served by hypercorn.

`tests/support/real.rs` (`Hypercorn`) writes this file into the server's
temporary directory and runs `hypercorn asgi_app:app` there, over TLS (ALPN h2
and http/1.1) and cleartext (HTTP/1.1, or HTTP/2 with prior knowledge).

Every response carries `x-http-version` (what the server saw: "1.1" or "2").

Routes (anything else is 404):
  GET  /             200, body "hello from hypercorn\n"
  GET  /bytes/N      200, N bytes: "abcdefghijklmnopqrstuvwxyz" repeated, cut at N
  GET  /delay/MS     200 after MS milliseconds, body "delayed MS ms\n"
  GET  /stall        never answers (no head either) until the client goes away
  POST /echo         200, the request body back (any method works), with the
                     request's content-type
  GET  /stream/N     200, N body messages "chunk I\n" (I from 0), each its own
                     DATA frame / chunk; ?interval_ms=MS waits MS between them
  GET  /headers      200, the request headers, one "name: value" a line
  GET  /status/CODE  CODE, empty body
  GET  /trailers     200, body "with trailers\n", then the trailer
                     `x-checksum: abc123` (hypercorn sends it only to a request
                     with `te: trailers`)
  GET  /not-modified/N  304, declaring `content-length: N` (the length of what
                     it stands for, RFC 9110 §8.6), no body
"""

import asyncio
from urllib.parse import parse_qs

ALPHABET = b"abcdefghijklmnopqrstuvwxyz"


async def app(scope, receive, send):
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    if scope["type"] != "http":
        return
    await route(scope, receive, send)


async def read_body(receive):
    body = bytearray()
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        body.extend(message.get("body", b""))
        if not message.get("more_body", False):
            return bytes(body)


async def start(send, scope, status, content_type=b"text/plain", length=None):
    headers = [
        (b"content-type", content_type),
        (b"x-http-version", scope["http_version"].encode()),
    ]
    if length is not None:
        headers.append((b"content-length", str(length).encode()))
    await send({"type": "http.response.start", "status": status, "headers": headers})


async def whole(send, scope, status, body, content_type=b"text/plain"):
    await start(send, scope, status, content_type, len(body))
    await send({"type": "http.response.body", "body": body})


def number(text):
    try:
        value = int(text)
    except ValueError:
        return None
    return value if value >= 0 else None


async def route(scope, receive, send):
    path = scope["path"]
    parts = path.strip("/").split("/")
    query = parse_qs(scope.get("query_string", b"").decode())

    if path == "/":
        return await whole(send, scope, 200, b"hello from hypercorn\n")

    if len(parts) == 2 and parts[0] == "bytes" and number(parts[1]) is not None:
        n = number(parts[1])
        body = (ALPHABET * (n // len(ALPHABET) + 1))[:n]
        return await whole(send, scope, 200, body, b"application/octet-stream")

    if len(parts) == 2 and parts[0] == "delay" and number(parts[1]) is not None:
        ms = number(parts[1])
        await asyncio.sleep(ms / 1000)
        return await whole(send, scope, 200, b"delayed %d ms\n" % ms)

    if path == "/stall":
        # Wait for the client to go away; send nothing at all.
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return

    if path == "/echo":
        body = await read_body(receive)
        if body is None:
            return
        content_type = dict(scope["headers"]).get(b"content-type", b"application/octet-stream")
        return await whole(send, scope, 200, body, content_type)

    if len(parts) == 2 and parts[0] == "stream" and number(parts[1]) is not None:
        n = number(parts[1])
        interval = number(query.get("interval_ms", ["0"])[0]) or 0
        await start(send, scope, 200)
        for i in range(n):
            if i > 0 and interval:
                await asyncio.sleep(interval / 1000)
            await send({"type": "http.response.body", "body": b"chunk %d\n" % i, "more_body": True})
        await send({"type": "http.response.body", "body": b""})
        return

    if path == "/headers":
        lines = b"".join(name + b": " + value + b"\n" for name, value in scope["headers"])
        return await whole(send, scope, 200, lines)

    if len(parts) == 2 and parts[0] == "status" and number(parts[1]) is not None:
        code = number(parts[1])
        if 200 <= code <= 599:
            return await whole(send, scope, code, b"")

    if path == "/trailers":
        headers = [(b"x-http-version", scope["http_version"].encode())]
        await send(
            {"type": "http.response.start", "status": 200, "headers": headers, "trailers": True}
        )
        await send({"type": "http.response.body", "body": b"with trailers\n"})
        return await send(
            {"type": "http.response.trailers", "headers": [(b"x-checksum", b"abc123")]}
        )

    if len(parts) == 2 and parts[0] == "not-modified" and number(parts[1]) is not None:
        await start(send, scope, 304, length=number(parts[1]))
        return await send({"type": "http.response.body", "body": b""})

    await whole(send, scope, 404, b"not found\n")
