#!/usr/bin/env python3
"""A small HTTP server on 127.0.0.1 for MooseHTTP's tests (standard library only).

Prints "PORT <n>" once listening. Exits by itself when its parent process goes away, so a test run
that is killed never leaves it behind.

Routes (any method unless noted):
  /echo...              JSON: method, path (raw), query (raw), headers, body (base64), body_sha256, body_size
  /status/<code>        that status, JSON error body {"code": "E<code>", "message": "..."}
  /flaky/<key>?fail=N&retry_after=S   first N calls answer 503 (with Retry-After: S), then 200
  /count/<key>          how many calls /flaky/<key> has had (GET)
  /slow?seconds=S       answers after S seconds
  /with-headers?h=Name:Value (repeatable)   200 with those response headers added
  /bytes?n=N&pause=S    N bytes of a repeating pattern, streamed in 64 KiB chunks (pausing S s between chunks)
  /redirect?to=URL&status=S   S (default 302) with Location: URL (transports must not follow it)
"""
import base64
import hashlib
import json
import os
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

counts = {}
lock = threading.Lock()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def setup(self):
        super().setup()
        # Headers and body go out in separate writes: without TCP_NODELAY, Nagle's algorithm and the
        # client's delayed ACK add ~40 ms to every small response.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def body(self):
        length = int(self.headers.get("Content-Length") or 0)
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            data = b""
            while True:
                size = int(self.rfile.readline().strip(), 16)
                if size == 0:
                    self.rfile.readline()
                    break
                data += self.rfile.read(size)
                self.rfile.readline()
            return data
        return self.rfile.read(length) if length else b""

    def send(self, status, payload, content_type="application/json", extra=None):
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        for name, value in (extra or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def handle_any(self):
        url = urlsplit(self.path)
        query = parse_qs(url.query)
        body = self.body()
        if url.path.startswith("/echo"):
            return self.send(200, {
                "method": self.command, "path": url.path, "query": url.query,
                "headers": {k.lower(): v for k, v in self.headers.items()},
                "body": base64.b64encode(body).decode(), "body_sha256": hashlib.sha256(body).hexdigest(),
                "body_size": len(body),
            })
        if url.path.startswith("/status/"):
            code = int(url.path.split("/")[2])
            return self.send(code, {"code": f"E{code}", "message": f"status {code} as asked"})
        if url.path.startswith("/flaky/"):
            key = url.path.split("/")[2]
            with lock:
                counts[key] = counts.get(key, 0) + 1
                n = counts[key]
            if n <= int(query.get("fail", ["0"])[0]):
                return self.send(503, {"code": "busy"}, extra={"Retry-After": query.get("retry_after", ["0"])[0]})
            return self.send(200, {"attempt": n})
        if url.path == "/with-headers":
            extra = {}
            for item in query.get("h", []):
                name, _, value = item.partition(":")
                extra[name] = value
            return self.send(200, {"ok": True}, extra=extra)
        if url.path.startswith("/count/"):
            return self.send(200, {"count": counts.get(url.path.split("/")[2], 0)})
        if url.path == "/slow":
            time.sleep(float(query.get("seconds", ["1"])[0]))
            return self.send(200, {"slept": True})
        if url.path == "/redirect":
            status = int(query.get("status", ["302"])[0])
            return self.send(status, {"redirect": True}, extra={"Location": query.get("to", ["/echo/redirected"])[0]})
        if url.path == "/bytes":
            n = int(query.get("n", ["0"])[0])
            pause = float(query.get("pause", ["0"])[0])
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(n))
            self.end_headers()
            chunk = bytes(range(256)) * 256
            sent = 0
            try:
                while sent < n:
                    piece = chunk[: min(len(chunk), n - sent)]
                    self.wfile.write(piece)
                    sent += len(piece)
                    if pause:
                        time.sleep(pause)
            except (BrokenPipeError, ConnectionResetError):
                pass
            return
        return self.send(404, {"code": "not_found", "message": url.path})

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = handle_any


def watch_parent(server, parent):
    while True:
        time.sleep(0.5)
        if os.getppid() != parent:
            server.shutdown()
            return


def serve(handler):
    """Serves `handler` on a free loopback port: prints "PORT <n>", stops when the parent process goes."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    print(f"PORT {server.server_address[1]}", flush=True)
    threading.Thread(target=watch_parent, args=(server, os.getppid()), daemon=True).start()
    server.serve_forever()


if __name__ == "__main__":
    serve(Handler)
