#!/usr/bin/env python3
"""A recording reverse proxy on 127.0.0.1 in front of a real authorization server (standard library only).

The upstream is $MOOSE_PROXY_UPSTREAM, else $MOOSE_AUTHGENT_ISSUER, else http://127.0.0.1:8782. Every
request is forwarded as it came; answers come back as they are, except that the upstream's origin is
replaced by the proxy's in JSON bodies (its discovery document then names the proxy as issuer and
token endpoint, so a client keeps talking through it). Each form POST's fields are recorded:
GET /__recorded answers them as a JSON list of {path, fields} (field values as lists).

$MOOSE_PROXY_REFRESH_DELAY (seconds, default 0) holds every refresh grant back that long before it is
forwarded — the provider rotates the token only then, whoever is still waiting for the answer: the
window in which a refresher killed after sending loses the rotation.

Prints "PORT <n>" once listening; exits when its parent process goes away.
"""
import json
import os
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler
from urllib.parse import parse_qs

from http_test_server import serve   # this folder: its PORT line and parent watch

REFRESH_DELAY = min(max(float(os.environ.get("MOOSE_PROXY_REFRESH_DELAY") or 0), 0.0), 30.0)
UPSTREAM = (os.environ.get("MOOSE_PROXY_UPSTREAM") or os.environ.get("MOOSE_AUTHGENT_ISSUER") or "http://127.0.0.1:8782").rstrip("/")
recorded = []
lock = threading.Lock()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def forward(self, method):
        if method == "GET" and self.path == "/__recorded":
            with lock:
                body = json.dumps(recorded).encode()
            return self.answer(200, {"Content-Type": "application/json"}, body)
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        if body is not None and "form-urlencoded" in (self.headers.get("Content-Type") or ""):
            with lock:
                recorded.append({"path": self.path, "fields": parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True)})
        if REFRESH_DELAY and body is not None and b"grant_type=refresh_token" in body:
            time.sleep(REFRESH_DELAY)
        headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "content-length", "connection")}
        request = urllib.request.Request(UPSTREAM + self.path, data=body, method=method, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=30) as r:
                status, answer, reply = r.status, dict(r.headers), r.read()
        except urllib.error.HTTPError as e:
            status, answer, reply = e.code, dict(e.headers), e.read()
        content_type = next((v for k, v in answer.items() if k.lower() == "content-type"), "")
        if "json" in content_type:
            own = f"http://127.0.0.1:{self.server.server_address[1]}"
            reply = reply.replace(UPSTREAM.encode(), own.encode())
        self.answer(status, {k: v for k, v in answer.items()
                             if k.lower() not in ("content-length", "transfer-encoding", "connection")}, reply)

    def answer(self, status, headers, body):
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        self.forward("GET")

    def do_POST(self):
        self.forward("POST")


if __name__ == "__main__":
    serve(Handler)
