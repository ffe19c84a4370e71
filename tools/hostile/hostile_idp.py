#!/usr/bin/env python3
"""A scripted OpenID Connect provider "gone bad", for the moose CLI's end-to-end tests.

Each scenario is its own issuer, http://127.0.0.1:PORT/<scenario>; the baseline `ok` is a correct,
minimal provider (no login page: /authorize redirects at once) and every other scenario deviates from
it in exactly one hostile way (see SCENARIOS below and README.md). Test support only.

    python3 tools/hostile/hostile_idp.py [--port N]      # prints "PORT <n>" once listening

Standard library plus `cryptography` (RS256). Exits by itself when its parent process goes away.
Counters: GET /_stats/<scenario>, POST /_reset/<scenario>.
"""
import argparse
import base64
import hashlib
import json
import os
import secrets
import socket
import sys
import threading
import time
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qsl, unquote_plus, urlencode, urlsplit

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa

KID = "hostile-1"
KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
DEVICE_GRANT = "urn:ietf:params:oauth:grant-type:device_code"
GRANTS = ["authorization_code", "refresh_token", DEVICE_GRANT, "client_credentials"]
DEFAULT_SCOPE = "openid profile email"
USER = {"sub": "user-1", "preferred_username": "alice", "name": "Alice Liddell", "email": "alice@example.com"}


# ---------------------------------------------------------------------------------------------- JSON

class Raw(str):
    """JSON text emitted verbatim (e.g. the number literal 1e300, which Python would print as 1e+300)."""


def dumps(value):
    if isinstance(value, Raw):
        return str(value)
    if isinstance(value, dict):
        return "{" + ",".join(json.dumps(str(k)) + ":" + dumps(v) for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(dumps(v) for v in value) + "]"
    return json.dumps(value)  # ensure_ascii: control characters go out as \u001b etc.


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def b64url_uint(n):
    return b64url(n.to_bytes((n.bit_length() + 7) // 8, "big"))


def random_token():
    return b64url(secrets.token_bytes(32))  # 43 base64url characters


def sign_jwt(claims):
    header = {"alg": "RS256", "kid": KID, "typ": "JWT"}
    signing_input = (b64url(dumps(header).encode()) + "." + b64url(dumps(claims).encode())).encode()
    signature = KEY.sign(signing_input, padding.PKCS1v15(), hashes.SHA256())
    return signing_input.decode() + "." + b64url(signature)


def at_hash(access_token):
    return b64url(hashlib.sha256(access_token.encode("ascii")).digest()[:16])


def jwks():
    numbers = KEY.public_key().public_numbers()
    return {"keys": [{"kty": "RSA", "n": b64url_uint(numbers.n), "e": b64url_uint(numbers.e),
                      "kid": KID, "alg": "RS256", "use": "sig"}]}


# ----------------------------------------------------------------------------------------- scenarios

class Reply:
    def __init__(self, status, body=b"", content_type="application/json", headers=None):
        self.status, self.body, self.content_type = status, body, content_type
        self.headers = dict(headers or {})


class Ctx:
    """What a hook may look at: scenario name, issuer, base URL (http://127.0.0.1:PORT), client_id, grant."""

    def __init__(self, scenario, base, client_id=None, grant=None):
        self.scenario, self.base, self.issuer = scenario, base, f"{base}/{scenario}"
        self.client_id, self.grant = client_id, grant


def set_(**members):
    return lambda doc, ctx: doc.update(members)


def drop(*names):
    return lambda doc, ctx: [doc.pop(name, None) for name in names]


ANSI = "\x1b]0;pwned\x07\x1b[2J\x1b[31mFAKE OUTPUT\x1b[0m"
SHELL = "'; touch /tmp/moose-pwned; echo '"


def ansi_token_reply(ctx):
    error = "access_denied" if ctx.grant == DEVICE_GRANT else "invalid_grant"
    return Reply(400, {"error": error, "error_description": ANSI})


# Hooks (all optional); `doc` hooks mutate the dict they are given:
#   discovery(doc, ctx)      the openid-configuration document
#   as_metadata(doc, ctx)    if present, /.well-known/oauth-authorization-server answers 200 with doc
#   authorize(params, ctx)   the redirect's parameters (ordered dict: code, state, iss)
#   authorize_error          (error, description): redirect with an error instead of a code
#   token_reply(ctx) -> Reply   answers every token request (after counting), no validation at all
#   token(doc, ctx)          a successful token response
#   token_body               bytes replacing every successful (200) token response body
#   token_date               Date header value on every token endpoint response
#   access_token             fixed access token value
#   claims(doc, ctx)         ID token claims
#   device(doc, ctx)         device authorization response
#   userinfo(doc, ctx)       userinfo response
SCENARIOS = {
    "ok": {},
    "huge-expires": {"token": set_(expires_in=Raw("1e300"))},
    "huge-expires-string": {"token": set_(expires_in="1e400")},
    "negative-expires": {"token": set_(expires_in=-5)},
    "huge-exp-claim": {"claims": set_(exp=Raw("1e300"))},
    "huge-iat-claim": {"claims": set_(iat=Raw("-1e300"))},
    "exp-2pow64": {"claims": set_(exp=2 ** 64)},
    "shell-token": {"access_token": "x" + SHELL},
    "shell-token-type": {"token": set_(token_type="Bearer" + SHELL)},
    "ansi-error": {"authorize_error": ("access_denied", ANSI), "token_reply": ansi_token_reply},
    "non-object-json": {"token_body": b'["access_token"]'},
    "null-json": {"token_body": b"null"},
    "secret-in-4xx": {"token_reply": lambda ctx: Reply(400, {
        "access_token": "SECRET-AT-1234567890", "refresh_token": "SECRET-RT-1234567890", "message": "nope"})},
    "missing-members": {"discovery": drop("jwks_uri", "subject_types_supported",
                                          "id_token_signing_alg_values_supported")},
    "plain-http-endpoints": {"discovery": lambda doc, ctx: doc.update(
        token_endpoint=f"http://idp.example.test/{ctx.scenario}/token",
        jwks_uri=f"http://idp.example.test/{ctx.scenario}/jwks")},
    "wrong-iss": {"authorize": lambda params, ctx: params.update(iss=ctx.base + "/evil")},
    "missing-iss": {"authorize": drop("iss")},
    "wrong-state": {"authorize": set_(state="forged")},
    "date-far-future": {"token_date": "Fri, 01 Jan 99999999 00:00:00 GMT"},
    "date-huge-hour": {"token_date": "Fri, 01 Jan 2027 99999999999999999999:00:00 GMT"},
    "retry-after-huge": {"token_reply": lambda ctx: Reply(
        503, {"error": "temporarily_unavailable"}, headers={"Retry-After": "99999999999999999999999"})},
    "interval-huge": {"device": set_(interval=Raw("1e300"))},
    "extra-aud": {"claims": lambda doc, ctx: doc.update(aud=[ctx.client_id, "https://evil.example"],
                                                        azp=ctx.client_id)},
    "bad-at-hash": {"claims": set_(at_hash=b64url(bytes(16)))},
    "userinfo-other-sub": {"userinfo": set_(sub="user-2")},
    "html-error": {"token_reply": lambda ctx: Reply(
        400, b"<html><body><script>alert(1)</script>Oops</body></html>", content_type="text/html")},
    "control-in-username": {"claims": set_(preferred_username="al\x1b[2Jice\u202etxt.exe",
                                           name="Alice\x07 Liddell")},
}
HOOKS = {"discovery", "as_metadata", "authorize", "authorize_error", "token_reply", "token", "token_body",
         "token_date", "access_token", "claims", "device", "userinfo"}
for _name, _hooks in SCENARIOS.items():
    assert set(_hooks) <= HOOKS, f"scenario {_name}: unknown hook(s) {set(_hooks) - HOOKS}"


# ------------------------------------------------------------------------------------------- state

LOCK = threading.Lock()


def zero_stats():
    return {"token": {grant: 0 for grant in GRANTS}, "authorize": 0, "device": 0, "userinfo": 0,
            "discovery": 0, "jwks": 0}


STATS = {name: zero_stats() for name in SCENARIOS}
CODES = {name: {} for name in SCENARIOS}          # code -> {client_id, redirect_uri, nonce, code_challenge, scope}
REFRESH = {name: {} for name in SCENARIOS}        # refresh token -> {client_id, scope}
DEVICE = {name: {} for name in SCENARIOS}         # device_code -> {client_id, scope}
ACCESS = {name: set() for name in SCENARIOS}      # access tokens issued


def count(scenario, key, sub=None):
    with LOCK:
        if sub is None:
            STATS[scenario][key] += 1
        else:
            STATS[scenario][key][sub] += 1


# ----------------------------------------------------------------------------------------- handler

class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    base = "http://127.0.0.1:0"  # set in main()

    def log_message(self, *args):
        pass

    def setup(self):
        super().setup()
        # Headers and body go out in separate writes: without TCP_NODELAY, Nagle's algorithm and the
        # client's delayed ACK add ~40 ms to every small response.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    # -- plumbing

    def read_body(self):
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            data = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                if size == 0:
                    while self.rfile.readline().strip():
                        pass
                    return data
                data += self.rfile.read(size)
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def send(self, reply):
        body = reply.body
        if not isinstance(body, bytes):
            body = dumps(body).encode()
        self.send_response_only(reply.status)
        headers = {"Date": formatdate(usegmt=True)}
        if body:
            headers["Content-Type"] = reply.content_type
        headers.update(reply.headers)
        headers["Content-Length"] = str(len(body))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def handle_any(self):
        self.form = {}
        raw = self.read_body()
        try:
            self.form = dict(parse_qsl(raw.decode("utf-8", "replace"), keep_blank_values=True))
        except ValueError:
            pass
        url = urlsplit(self.path)
        self.query = dict(parse_qsl(url.query, keep_blank_values=True))
        parts = url.path.split("/", 2)  # "", scenario, rest
        not_found = Reply(404, {"error": "not_found"})
        if len(parts) < 2 or not parts[1]:
            return self.send(not_found)
        if parts[1] in ("_stats", "_reset") and len(parts) == 3 and parts[2] in SCENARIOS:
            return self.send(self.stats(parts[1], parts[2]))
        scenario, rest = parts[1], "/" + (parts[2] if len(parts) == 3 else "")
        if scenario not in SCENARIOS:
            return self.send(not_found)
        route = ROUTES.get(rest)
        if route is None:
            return self.send(not_found)
        method, function = route
        if self.command != method:
            return self.send(Reply(405, {"error": "method_not_allowed"}, headers={"Allow": method}))
        self.scenario, self.hooks, self.ctx = scenario, SCENARIOS[scenario], Ctx(scenario, self.base)
        return self.send(function(self))

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_OPTIONS = handle_any

    def stats(self, action, scenario):
        if action == "_stats" and self.command != "GET" or action == "_reset" and self.command != "POST":
            return Reply(405, {"error": "method_not_allowed"},
                         headers={"Allow": "GET" if action == "_stats" else "POST"})
        with LOCK:
            if action == "_reset":
                STATS[scenario] = zero_stats()
            return Reply(200, json.loads(json.dumps(STATS[scenario])))

    def hook(self, name, doc):
        function = self.hooks.get(name)
        if function:
            function(doc, self.ctx)
        return doc

    # -- endpoints

    def discovery(self):
        count(self.scenario, "discovery")
        issuer = self.ctx.issuer
        doc = {
            "issuer": issuer,
            "authorization_endpoint": issuer + "/authorize",
            "token_endpoint": issuer + "/token",
            "jwks_uri": issuer + "/jwks",
            "userinfo_endpoint": issuer + "/userinfo",
            "device_authorization_endpoint": issuer + "/device",
            "revocation_endpoint": issuer + "/revoke",
            "response_types_supported": ["code"],
            "subject_types_supported": ["public"],
            "id_token_signing_alg_values_supported": ["RS256"],
            "code_challenge_methods_supported": ["S256"],
            "grant_types_supported": list(GRANTS),
            "token_endpoint_auth_methods_supported": ["none", "client_secret_basic", "client_secret_post"],
            "authorization_response_iss_parameter_supported": True,
        }
        return Reply(200, self.hook("discovery", doc))

    def as_metadata(self):
        if "as_metadata" not in self.hooks:
            return Reply(404, {"error": "not_found"})
        count(self.scenario, "discovery")
        return Reply(200, self.hook("as_metadata", {"issuer": self.ctx.issuer}))

    def jwks(self):
        count(self.scenario, "jwks")
        return Reply(200, jwks())

    def authorize(self):
        count(self.scenario, "authorize")
        q = self.query
        redirect_uri, client_id = q.get("redirect_uri"), q.get("client_id")
        if not redirect_uri or not client_id:
            return Reply(400, {"error": "invalid_request", "error_description": "client_id and redirect_uri"})
        params = {}
        if "authorize_error" in self.hooks:
            params["error"], params["error_description"] = self.hooks["authorize_error"]
        elif q.get("response_type") != "code":
            params["error"] = "unsupported_response_type"
        elif q.get("code_challenge_method", "S256") != "S256" and q.get("code_challenge"):
            params["error"] = "invalid_request"
        else:
            code = random_token()
            with LOCK:
                CODES[self.scenario][code] = {
                    "client_id": client_id, "redirect_uri": redirect_uri, "nonce": q.get("nonce"),
                    "code_challenge": q.get("code_challenge"), "scope": q.get("scope") or DEFAULT_SCOPE}
            params["code"] = code
        if "state" in q:
            params["state"] = q["state"]
        params["iss"] = self.ctx.issuer
        self.hook("authorize", params)
        target = redirect_uri.split("#", 1)[0]
        target += ("&" if "?" in target else "?") + urlencode(params)
        return Reply(302, b"", headers={"Location": target, "Cache-Control": "no-store"})

    def client_id(self):
        """client_id from HTTP Basic or the form; (client_id, error Reply)."""
        auth = self.headers.get("Authorization", "")
        if auth[:6].lower() == "basic ":
            try:
                user, _, _ = base64.b64decode(auth[6:].strip(), validate=True).decode().partition(":")
                basic = unquote_plus(user)
            except (ValueError, UnicodeDecodeError):
                return None, Reply(401, {"error": "invalid_client"}, headers={"WWW-Authenticate": "Basic"})
            if "client_id" in self.form and self.form["client_id"] != basic:
                return None, Reply(400, {"error": "invalid_request", "error_description": "client_id mismatch"})
            return basic, None
        if self.form.get("client_id"):
            return self.form["client_id"], None
        return None, Reply(401, {"error": "invalid_client"})

    def token(self):
        grant = self.form.get("grant_type")
        if grant in GRANTS:
            count(self.scenario, "token", grant)
        reply = self.token_reply(grant)
        if "token_date" in self.hooks:
            reply.headers["Date"] = self.hooks["token_date"]
        reply.headers["Cache-Control"] = "no-store"
        return reply

    def token_reply(self, grant):
        client_id, error = self.client_id()
        self.ctx.client_id, self.ctx.grant = client_id, grant
        if "token_reply" in self.hooks:
            return self.hooks["token_reply"](self.ctx)
        if error:
            return error
        invalid_grant = Reply(400, {"error": "invalid_grant"})
        form, nonce, id_token = self.form, None, False
        with LOCK:
            if grant == "authorization_code":
                entry = CODES[self.scenario].pop(form.get("code", ""), None)
                verifier = form.get("code_verifier", "")
                if (entry is None or entry["client_id"] != client_id
                        or entry["redirect_uri"] != form.get("redirect_uri")
                        or not entry["code_challenge"]
                        or b64url(hashlib.sha256(verifier.encode()).digest()) != entry["code_challenge"]):
                    return invalid_grant
                scope, nonce, id_token = entry["scope"], entry["nonce"], True
            elif grant == "refresh_token":
                entry = REFRESH[self.scenario].get(form.get("refresh_token", ""))
                if entry is None or entry["client_id"] != client_id:
                    return invalid_grant
                del REFRESH[self.scenario][form["refresh_token"]]  # rotation: each refresh token works once
                scope, id_token = form.get("scope") or entry["scope"], True
            elif grant == DEVICE_GRANT:
                entry = DEVICE[self.scenario].pop(form.get("device_code", ""), None)  # approved at once
                if entry is None or entry["client_id"] != client_id:
                    return invalid_grant
                scope = entry["scope"]
            elif grant == "client_credentials":
                scope = form.get("scope") or DEFAULT_SCOPE
            else:
                return Reply(400, {"error": "unsupported_grant_type"})
            access_token = self.hooks.get("access_token") or random_token()
            ACCESS[self.scenario].add(access_token)
            doc = {"access_token": access_token, "token_type": "Bearer", "expires_in": 3600}
            if grant != "client_credentials":
                doc["refresh_token"] = random_token()
                REFRESH[self.scenario][doc["refresh_token"]] = {"client_id": client_id, "scope": scope}
        doc["scope"] = scope
        if id_token and "openid" in scope.split():
            now = int(time.time())
            claims = {"iss": self.ctx.issuer, "sub": USER["sub"], "aud": client_id, "exp": now + 600, "iat": now}
            if nonce is not None:
                claims["nonce"] = nonce
            claims.update({k: v for k, v in USER.items() if k != "sub"})
            claims["at_hash"] = at_hash(access_token)
            doc["id_token"] = sign_jwt(self.hook("claims", claims))
        self.hook("token", doc)
        return Reply(200, self.hooks.get("token_body", doc))

    def device(self):
        count(self.scenario, "device")
        client_id, error = self.client_id()
        if error:
            return error
        device_code = random_token()
        with LOCK:
            DEVICE[self.scenario][device_code] = {"client_id": client_id,
                                                  "scope": self.form.get("scope") or DEFAULT_SCOPE}
        verification = self.ctx.issuer + "/activate"
        doc = {"device_code": device_code, "user_code": "ABCD-EFGH", "verification_uri": verification,
               "verification_uri_complete": verification + "?user_code=ABCD-EFGH", "expires_in": 600,
               "interval": 1}
        return Reply(200, self.hook("device", doc), headers={"Cache-Control": "no-store"})

    def activate(self):
        return Reply(200, b"<html><body>Device approved.</body></html>", content_type="text/html")

    def userinfo(self):
        count(self.scenario, "userinfo")
        scheme, _, token = self.headers.get("Authorization", "").partition(" ")
        with LOCK:
            known = scheme.lower() == "bearer" and token in ACCESS[self.scenario]
        if not known:
            return Reply(401, {"error": "invalid_token"},
                         headers={"WWW-Authenticate": 'Bearer error="invalid_token"'})
        return Reply(200, self.hook("userinfo", dict(USER)))

    def revoke(self):
        token = self.form.get("token", "")
        with LOCK:
            REFRESH[self.scenario].pop(token, None)
            ACCESS[self.scenario].discard(token)
        return Reply(200, b"", headers={"Cache-Control": "no-store"})


ROUTES = {
    "/.well-known/openid-configuration": ("GET", Handler.discovery),
    "/.well-known/oauth-authorization-server": ("GET", Handler.as_metadata),
    "/jwks": ("GET", Handler.jwks),
    "/authorize": ("GET", Handler.authorize),
    "/token": ("POST", Handler.token),
    "/device": ("POST", Handler.device),
    "/activate": ("GET", Handler.activate),
    "/userinfo": ("GET", Handler.userinfo),
    "/revoke": ("POST", Handler.revoke),
}


def watch_parent(parent):
    while True:
        time.sleep(0.5)
        if os.getppid() != parent:
            os._exit(0)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default 0: ephemeral)")
    args = parser.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    server.daemon_threads = True
    Handler.base = f"http://127.0.0.1:{server.server_address[1]}"
    print(f"PORT {server.server_address[1]}", flush=True)
    threading.Thread(target=watch_parent, args=(os.getppid(),), daemon=True).start()
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
