#!/usr/bin/env python3
"""A static HTTPS server on 127.0.0.1 for the TLS tests (standard library only).

usage: tls_static_server.py CERT_PEM KEY_PEM ROOT_DIR [COUNTS_JSON]

Serves the files under ROOT_DIR (read at each request, so a test can write them after the port is
known) as application/json, over TLS with the given certificate. Prints "READY https://127.0.0.1:<port>"
once listening; exits when its standard input closes (the test ended or died). With COUNTS_JSON, keeps
{"connections": N, "requests": M} there: TCP connections accepted (whether or not their TLS handshake
completed) and HTTP requests answered, so a test can tell a refused connection from a retried one.
"""
import json
import os
import ssl
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

cert, key, root = sys.argv[1], sys.argv[2], os.path.realpath(sys.argv[3])
counts_path = sys.argv[4] if len(sys.argv) > 4 else None
counts = {"connections": 0, "requests": 0}
lock = threading.Lock()


def bump(name):
    with lock:
        counts[name] += 1
        if counts_path:
            with open(counts_path + ".tmp", "w") as f:
                json.dump(counts, f)
            os.replace(counts_path + ".tmp", counts_path)


class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        bump("requests")
        path = os.path.realpath(os.path.join(root, self.path.split("?", 1)[0].lstrip("/")))
        if not path.startswith(root + os.sep) or not os.path.isfile(path):
            self.send_error(404)
            return
        with open(path, "rb") as f:
            body = f.read()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
context.load_cert_chain(cert, key)


class Server(ThreadingHTTPServer):
    def get_request(self):
        connection, address = self.socket.accept()
        bump("connections")
        # The handshake runs in the connection's own thread (on its first read), not in the accept loop.
        return context.wrap_socket(connection, server_side=True, do_handshake_on_connect=False), address

    def handle_error(self, request, client_address):
        pass  # a client that refused the certificate or the key: expected in these tests


server = Server(("127.0.0.1", 0), Handler)
if counts_path:
    with open(counts_path, "w") as f:
        json.dump(counts, f)
threading.Thread(target=server.serve_forever, daemon=True).start()
print(f"READY https://127.0.0.1:{server.server_address[1]}", flush=True)
sys.stdin.read()
server.shutdown()
