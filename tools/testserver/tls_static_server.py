#!/usr/bin/env python3
"""A static HTTPS server on 127.0.0.1 for the CLI's TLS tests (standard library only).

usage: tls_static_server.py CERT_PEM KEY_PEM ROOT_DIR

Serves the files under ROOT_DIR (read at each request, so a test can write them after the port is
known) as application/json, over TLS with the given certificate. Prints "READY https://127.0.0.1:<port>"
once listening; exits when its standard input closes (the test ended or died).
"""
import os
import ssl
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

cert, key, root = sys.argv[1], sys.argv[2], os.path.realpath(sys.argv[3])


class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
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


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
context.load_cert_chain(cert, key)
server.socket = context.wrap_socket(server.socket, server_side=True)
threading.Thread(target=server.serve_forever, daemon=True).start()
print(f"READY https://127.0.0.1:{server.server_address[1]}", flush=True)
sys.stdin.read()
server.shutdown()
