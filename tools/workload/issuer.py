#!/usr/bin/env python3
"""A stand-in CI platform OIDC issuer (GitHub-Actions-shaped) for workload identity tests.

Standard library only; RSA keys are made and used through the `openssl` command.

    python3 tools/workload/issuer.py [PORT] [--detached]

PORT comes from the argument, else MOOSE_WORKLOAD_PORT, else 8781 (0 picks a free port).
It binds 127.0.0.1, prints `READY http://127.0.0.1:PORT` on stdout once listening and
exits when its standard input closes, so a test harness can own it through a pipe.
With --detached (used by tools/authgent/start) standard input is ignored: stop it by
its PID (SIGTERM or SIGINT).

Endpoints (issuer = http://127.0.0.1:PORT):
  GET /.well-known/openid-configuration   discovery; jwks_uri below
  GET /.well-known/jwks.json              one RS256 key (kid = RFC 7638 thumbprint)
  GET /token?audience=AUD                 like GitHub's ACTIONS_ID_TOKEN_REQUEST_URL:
        needs `Authorization: Bearer $MOOSE_WORKLOAD_REQUEST_TOKEN` (default
        `ci-request-token`); answers {"value": "<JWT>"}; other query items (api-version=2.0)
        are ignored; no audience -> MOOSE_WORKLOAD_AUDIENCE (default `moose`);
        a missing bearer -> 401, a wrong one -> 403, both {"message": "..."}
  GET /mint?aud=AUD&sub=SUB&lifetime=SECONDS   test only, no authentication; answers the
        bare JWT as text/plain. Optional: jti=, iss= (claim only), rogue=1 (sign with a key
        that is not in the JWKS but under the published kid), aud may repeat (array).
        lifetime may be negative (an expired token); then iat = nbf = exp - 60.

Claims: iss, sub (default MOOSE_WORKLOAD_SUB or repo:moose/moose:ref:refs/heads/main), aud,
iat, nbf, exp (default lifetime MOOSE_WORKLOAD_LIFETIME or 300 s), jti (random).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

DEFAULT_SUB = "repo:moose/moose:ref:refs/heads/main"


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def int_bytes(n: int) -> bytes:
    return n.to_bytes((n.bit_length() + 7) // 8 or 1, "big")


class RSAKey:
    """An RSA key held in a private temporary folder, used through the openssl command."""

    def __init__(self, folder: str, name: str):
        self.path = os.path.join(folder, name + ".pem")
        subprocess.run(
            ["openssl", "genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", self.path],
            check=True, capture_output=True,
        )
        text = subprocess.run(
            ["openssl", "rsa", "-in", self.path, "-noout", "-text"],
            check=True, capture_output=True, text=True,
        ).stdout
        modulus = subprocess.run(
            ["openssl", "rsa", "-in", self.path, "-noout", "-modulus"],
            check=True, capture_output=True, text=True,
        ).stdout.strip()
        n = int(modulus.split("=", 1)[1], 16)
        e = int(re.search(r"publicExponent:\s*(\d+)", text).group(1))
        self.n, self.e = b64url(int_bytes(n)), b64url(int_bytes(e))
        canonical = json.dumps({"e": self.e, "kty": "RSA", "n": self.n}, separators=(",", ":"))
        self.thumbprint = b64url(hashlib.sha256(canonical.encode()).digest())

    def sign(self, data: bytes) -> bytes:
        return subprocess.run(
            ["openssl", "dgst", "-sha256", "-sign", self.path],
            input=data, check=True, capture_output=True,
        ).stdout


class Issuer:
    def __init__(self, folder: str):
        self.key = RSAKey(folder, "signing")
        self.rogue = RSAKey(folder, "rogue")  # never published
        self.kid = self.key.thumbprint
        self.base = ""  # set once the port is known
        self.request_token = os.environ.get("MOOSE_WORKLOAD_REQUEST_TOKEN", "ci-request-token")
        self.default_audience = os.environ.get("MOOSE_WORKLOAD_AUDIENCE", "moose")
        self.default_sub = os.environ.get("MOOSE_WORKLOAD_SUB", DEFAULT_SUB)
        self.default_lifetime = int(os.environ.get("MOOSE_WORKLOAD_LIFETIME", "300"))

    def jwks(self) -> dict:
        return {"keys": [{"kty": "RSA", "use": "sig", "alg": "RS256", "kid": self.kid,
                          "n": self.key.n, "e": self.key.e}]}

    def discovery(self) -> dict:
        return {
            "issuer": self.base,
            "jwks_uri": self.base + "/.well-known/jwks.json",
            "token_endpoint": self.base + "/token",
            "response_types_supported": ["id_token"],
            "subject_types_supported": ["public", "pairwise"],
            "id_token_signing_alg_values_supported": ["RS256"],
            "claims_supported": ["sub", "aud", "exp", "iat", "iss", "jti", "nbf"],
            "scopes_supported": ["openid"],
        }

    def mint(self, aud, sub=None, lifetime=None, jti=None, iss=None, rogue=False) -> str:
        now = int(time.time())
        lifetime = self.default_lifetime if lifetime is None else lifetime
        exp = now + lifetime
        start = now if lifetime > 0 else exp - 60
        claims = {
            "iss": iss or self.base,
            "sub": sub or self.default_sub,
            "aud": aud,
            "iat": start,
            "nbf": start,
            "exp": exp,
            "jti": jti or secrets.token_hex(16),
        }
        header = {"alg": "RS256", "typ": "JWT", "kid": self.kid}
        signing_input = (b64url(json.dumps(header, separators=(",", ":")).encode()) + "."
                         + b64url(json.dumps(claims, separators=(",", ":")).encode()))
        signer = self.rogue if rogue else self.key
        return signing_input + "." + b64url(signer.sign(signing_input.encode()))


class Handler(BaseHTTPRequestHandler):
    server_version = "moose-workload-issuer/1"
    issuer: Issuer  # set on the class before serving

    def log_message(self, fmt, *args):  # to stderr, one line each
        sys.stderr.write("%s %s\n" % (self.log_date_time_string(), fmt % args))

    def send(self, status: int, body, content_type="application/json", headers=None):
        data = (json.dumps(body) if content_type == "application/json" else body).encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-store")
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        url = urlsplit(self.path)
        query = parse_qs(url.query)
        one = lambda name: (query.get(name) or [None])[0]  # noqa: E731
        iss = self.issuer
        if url.path == "/.well-known/openid-configuration":
            return self.send(200, iss.discovery())
        if url.path == "/.well-known/jwks.json":
            return self.send(200, iss.jwks())
        if url.path == "/token":
            auth = self.headers.get("Authorization", "")
            if not auth.lower().startswith("bearer "):
                return self.send(401, {"message": "Bearer token required"},
                                 headers={"WWW-Authenticate": "Bearer"})
            if not secrets.compare_digest(auth[7:].strip().encode(), iss.request_token.encode()):
                return self.send(403, {"message": "Bad request token"})
            return self.send(200, {"value": iss.mint(one("audience") or iss.default_audience)})
        if url.path == "/mint":
            try:
                lifetime = int(one("lifetime")) if one("lifetime") is not None else None
            except ValueError:
                return self.send(400, {"message": "lifetime must be an integer"})
            auds = query.get("aud") or [iss.default_audience]
            token = iss.mint(auds[0] if len(auds) == 1 else auds, sub=one("sub"), lifetime=lifetime,
                             jti=one("jti"), iss=one("iss"), rogue=one("rogue") in ("1", "true"))
            return self.send(200, token, content_type="text/plain")
        return self.send(404, {"message": "Not Found"})


def main() -> int:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    detached = "--detached" in sys.argv[1:]
    port = int(args[0] if args else os.environ.get("MOOSE_WORKLOAD_PORT", "8781"))
    folder = tempfile.mkdtemp(prefix="moose-workload-")
    try:
        os.chmod(folder, 0o700)
        Handler.issuer = Issuer(folder)
        server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        server.daemon_threads = True
        Handler.issuer.base = "http://127.0.0.1:%d" % server.server_address[1]

        def stop(*_):
            threading.Thread(target=server.shutdown, daemon=True).start()

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        if not detached:
            def watch_stdin():
                try:
                    while sys.stdin.buffer.read1(4096):
                        pass
                except Exception:
                    pass
                stop()
            threading.Thread(target=watch_stdin, daemon=True).start()
        print("READY " + Handler.issuer.base, flush=True)
        server.serve_forever()
        server.server_close()
        return 0
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
