#!/usr/bin/env python3
"""A protected JSON API (tools/resource/openapi.yaml) for Moose's tests; every /v1 call needs a bearer
token that the real test IdP accepts (RFC 7662 introspection, see moose_resource.py).

    python3 tools/resource/api_server.py --port 0 --issuer http://127.0.0.1:8765
    -> READY http://127.0.0.1:PORT        (exits when stdin closes, or on SIGTERM)

GET /v1/me          who the token belongs to: sub (from userinfo, openid tokens only), username,
                    client_id, scope, exp, token_fingerprint (sha256 hex of the token)
POST /v1/echo       answers the JSON request body byte for byte (chunked bodies too); the body is read
                    in full before the token is checked, so a refused call has consumed it
GET /v1/slow?ms=N   sleeps N ms (at most 120000) after accepting the token, then answers {"slept_ms": N}
GET /openapi.yaml   the description (no token needed)
GET /_test/stats, POST /_test/reset

--require-scope S (repeatable) makes every /v1 call need scope S: otherwise 403 insufficient_scope.
"""
import hashlib
import json
import os
import sys
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import moose_resource as mr  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROUTES = {"/v1/me": "GET", "/v1/echo": "POST", "/v1/slow": "GET"}


class ApiApp(mr.App):
    name = "api"


class ApiHandler(mr.Handler):
    def route(self):
        parts = urllib.parse.urlsplit(self.path)
        path, query = parts.path, urllib.parse.parse_qs(parts.query)
        if path == "/openapi.yaml" and self.command in ("GET", "HEAD"):
            with open(os.path.join(HERE, "openapi.yaml"), "rb") as f:
                return self.send(200, f.read(), content_type="application/yaml")
        if path not in ROUTES:
            return self.send(404, {"error": "not_found"})
        if self.command != ROUTES[path]:
            self.read_body()
            return self.send(405, {"error": "method_not_allowed"}, headers=[("Allow", ROUTES[path])])

        body = self.read_body() if self.command == "POST" else None
        info = self.authenticate(required_scopes=self.app.args.require_scope,
                                 body_bytes=None if body is None else len(body))
        if info is None:
            return
        fp_header = [("X-Moose-Token-Fingerprint", info["fingerprint"])]

        if path == "/v1/me":
            scope = info.get("scope")
            return self.send(200, {
                "sub": info.get("sub") or self.app.introspector.subject(info["token"], scope),
                "username": info.get("username"),
                "client_id": info.get("client_id"),
                "scope": scope,
                "exp": info.get("exp"),
                "token_fingerprint": info["fingerprint"],
            }, headers=fp_header)

        if path == "/v1/echo":
            try:
                json.loads(body)
            except ValueError:
                return self.send(400, {"error": "invalid_request", "error_description": "the body is not JSON"},
                                 headers=fp_header)
            return self.send(200, body, headers=fp_header + [
                ("X-Moose-Body-SHA256", hashlib.sha256(body).hexdigest())])

        # /v1/slow
        try:
            ms = int(query.get("ms", ["0"])[0])
            if not 0 <= ms <= 120000:
                raise ValueError
        except ValueError:
            return self.send(400, {"error": "invalid_request", "error_description": "ms must be 0...120000"})
        time.sleep(ms / 1000)
        return self.send(200, {"slept_ms": ms}, headers=fp_header)


def main():
    p = mr.parser(__doc__.splitlines()[0])
    p.add_argument("--require-scope", action="append", default=[], metavar="SCOPE",
                   help="scope every /v1 call needs (repeatable); without it the answer is 403")
    return mr.run(ApiApp, ApiHandler, p.parse_args())


if __name__ == "__main__":
    sys.exit(main())
