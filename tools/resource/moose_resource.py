"""Shared core of Moose's test resource servers (api_server.py, kube_api.py, git_server.py).

A token is valid only if the real test IdP (tools/idp) says so: RFC 7662 introspection at its
`introspection_endpoint`, authenticated with HTTP Basic as the confidential client
`moose-resource-server` (tools/idp/setup_data.py). There is no other check and no fallback: no JWT
decoding, no accept-on-error. An IdP that cannot be asked gives 503, never an accepted request.

Answers are cached per token for a few seconds (--cache-seconds, never past the token's `exp`) and
concurrent look-ups of one token share a single IdP call, so 200 concurrent requests cost one.

Every request that needs a token is recorded: counters and the last requests with the token's
SHA-256 fingerprint (hex of sha256(token), the same value django-oauth-toolkit stores as
`token_checksum`), never the token itself. `GET /_test/stats` shows them, `POST /_test/reset`
clears them and the cache. Both are unauthenticated.

Standard library only.
"""
import argparse
import base64
import collections
import concurrent.futures
import hashlib
import json
import os
import signal
import ssl
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

DEFAULT_ISSUER = os.environ.get("MOOSE_IDP_ISSUER", "http://127.0.0.1:8765")
DEFAULT_INTROSPECTION_CLIENT = os.environ.get(
    "MOOSE_INTROSPECTION_CLIENT", "moose-resource-server:moose-resource-server-secret")
RECENT = 100          # requests kept in /_test/stats "recent"
MAX_BODY = 64 << 20   # largest request body read


def fingerprint(token):
    return hashlib.sha256(token.encode("utf-8", "surrogateescape")).hexdigest()


class IdPUnavailable(Exception):
    """The IdP could not answer the introspection request (network error, non-200, bad JSON)."""


# ------------------------------------------------------------------------------------- introspection

class Introspector:
    def __init__(self, issuer, client_id, client_secret, cache_seconds=3.0, max_parallel=8, timeout=10.0):
        self.issuer = issuer.rstrip("/")
        self.cache_seconds = cache_seconds
        self.timeout = timeout
        basic = base64.b64encode(f"{client_id}:{client_secret}".encode()).decode()
        self.auth_header = f"Basic {basic}"
        self.client_id = client_id
        self.introspection_endpoint = None
        self.userinfo_endpoint = None
        self.lock = threading.Lock()
        self.cache = {}      # fingerprint -> (monotonic deadline, introspection dict)
        self.inflight = {}   # fingerprint -> Future
        self.userinfo = {}   # fingerprint -> userinfo dict (immutable for a token)
        self.idp_slots = threading.BoundedSemaphore(max_parallel)
        self.counters = collections.Counter()

    # Discovery: RFC 8414 metadata carries introspection_endpoint (OIDC discovery does not, here).
    def discover(self):
        def get(path):
            try:
                with urllib.request.urlopen(self.issuer + path, timeout=self.timeout) as r:
                    return json.load(r)
            except (OSError, ValueError):
                return {}
        as_meta = get("/.well-known/oauth-authorization-server")
        oidc = get("/.well-known/openid-configuration")
        if not as_meta and not oidc:
            raise IdPUnavailable(f"no discovery document at {self.issuer}")
        self.introspection_endpoint = (as_meta.get("introspection_endpoint")
                                       or oidc.get("introspection_endpoint") or self.issuer + "/introspect/")
        self.userinfo_endpoint = oidc.get("userinfo_endpoint") or as_meta.get("userinfo_endpoint")

    def probe(self):
        """Checks that the IdP accepts our client credentials (a made-up token must come back inactive)."""
        result = self._call_idp("moose-resource-probe-" + os.urandom(8).hex())
        if result.get("active") is not False:
            raise IdPUnavailable(f"unexpected probe answer {result!r}")

    def _call_idp(self, token):
        data = urllib.parse.urlencode({"token": token, "token_type_hint": "access_token"}).encode()
        req = urllib.request.Request(self.introspection_endpoint, data=data, method="POST", headers={
            "Authorization": self.auth_header, "Accept": "application/json",
            "Content-Type": "application/x-www-form-urlencoded"})
        with self.idp_slots:
            with self.lock:
                self.counters["introspection_calls"] += 1
            try:
                with urllib.request.urlopen(req, timeout=self.timeout) as r:
                    body = r.read()
            except urllib.error.HTTPError as e:
                if e.code in (401, 403):
                    raise IdPUnavailable(
                        f"the IdP refused the introspection client {self.client_id!r} ({e.code}); is it in "
                        "tools/idp/setup_data.py and was the IdP restarted since? (tools/idp/stop; tools/idp/start)")
                raise IdPUnavailable(f"introspection answered {e.code}")
            except OSError as e:
                raise IdPUnavailable(f"introspection failed: {e}")
        try:
            result = json.loads(body)
        except ValueError:
            raise IdPUnavailable("introspection answer is not JSON")
        if not isinstance(result, dict) or not isinstance(result.get("active"), bool):
            raise IdPUnavailable("introspection answer has no boolean 'active'")
        return result

    def introspect(self, token):
        """The IdP's introspection answer for token (cached, coalesced). Raises IdPUnavailable."""
        fp = fingerprint(token)
        with self.lock:
            entry = self.cache.get(fp)
            if entry and entry[0] > time.monotonic():
                self.counters["cache_hits"] += 1
                return entry[1]
            fut = self.inflight.get(fp)
            leader = fut is None
            if leader:
                fut = concurrent.futures.Future()
                self.inflight[fp] = fut
            else:
                self.counters["coalesced"] += 1
        if not leader:
            return fut.result()
        try:
            result = self._call_idp(token)
        except BaseException as e:
            with self.lock:
                self.inflight.pop(fp, None)
            fut.set_exception(e)
            raise
        ttl = self.cache_seconds
        if result.get("active") and isinstance(result.get("exp"), (int, float)):
            ttl = min(ttl, result["exp"] - time.time())
        with self.lock:
            if ttl > 0:
                if len(self.cache) > 10000:
                    now = time.monotonic()
                    self.cache = {k: v for k, v in self.cache.items() if v[0] > now}
                self.cache[fp] = (time.monotonic() + ttl, result)
            self.inflight.pop(fp, None)
        fut.set_result(result)
        return result

    def subject(self, token, scope):
        """`sub` from the IdP's userinfo (introspection here has none); None without the openid scope."""
        if "openid" not in (scope or "").split() or not self.userinfo_endpoint:
            return None
        fp = fingerprint(token)
        with self.lock:
            if fp in self.userinfo:
                return self.userinfo[fp].get("sub")
        req = urllib.request.Request(self.userinfo_endpoint, headers={"Authorization": f"Bearer {token}"})
        with self.idp_slots:
            with self.lock:
                self.counters["userinfo_calls"] += 1
            try:
                with urllib.request.urlopen(req, timeout=self.timeout) as r:
                    info = json.load(r)
            except (OSError, ValueError):
                return None
        with self.lock:
            if len(self.userinfo) > 10000:
                self.userinfo.clear()
            self.userinfo[fp] = info if isinstance(info, dict) else {}
        return self.userinfo[fp].get("sub")

    def reset(self):
        with self.lock:
            self.cache.clear()
            self.userinfo.clear()
            self.counters.clear()


# ------------------------------------------------------------------------------------------ stats

class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.reset()

    def reset(self):
        with self.lock:
            self.counts = collections.Counter()
            self.by_fingerprint = {}
            self.recent = collections.deque(maxlen=RECENT)
            self.in_flight = 0
            self.max_in_flight = 0
            self.seq = 0

    def enter(self):
        with self.lock:
            self.counts["requests"] += 1
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)

    def leave(self):
        with self.lock:
            self.in_flight -= 1

    def record(self, outcome, fp, method, path, scheme=None, reason=None, body_bytes=None):
        """outcome: accepted | refused | missing | insufficient_scope | idp_error."""
        with self.lock:
            self.seq += 1
            self.counts[outcome] += 1
            if fp:
                per = self.by_fingerprint.setdefault(fp, collections.Counter())
                per[outcome] += 1
            event = {"seq": self.seq, "time": round(time.time(), 3), "outcome": outcome,
                     "fingerprint": fp, "scheme": scheme, "method": method, "path": path}
            if reason:
                event["reason"] = reason
            if body_bytes is not None:
                event["body_bytes"] = body_bytes
            self.recent.append(event)

    def snapshot(self):
        with self.lock:
            return {
                "requests": self.counts["requests"],
                "accepted": self.counts["accepted"],
                "refused": self.counts["refused"],
                "missing": self.counts["missing"],
                "insufficient_scope": self.counts["insufficient_scope"],
                "idp_errors": self.counts["idp_error"],
                "in_flight": self.in_flight,
                "max_in_flight": self.max_in_flight,
                "by_fingerprint": {k: dict(v) for k, v in self.by_fingerprint.items()},
                "recent": list(self.recent),
            }


# ---------------------------------------------------------------------------------------- server

class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024      # listen backlog: 200 simultaneous connects must not overflow it
    allow_reuse_address = True

    def __init__(self, address, handler, app):
        self.app = app
        super().__init__(address, handler)

    def handle_error(self, request, client_address):
        if self.app.args.verbose:   # quiet by default: a stderr pipe nobody reads must not fill up
            super().handle_error(request, client_address)


class App:
    """What a handler reaches as self.app: the token checker, the stats and the options."""

    name = "resource"

    def __init__(self, args):
        self.args = args
        client_id, _, secret = args.introspection_client.partition(":")
        self.introspector = Introspector(args.issuer, client_id, secret, cache_seconds=args.cache_seconds)
        self.stats = Stats()
        self.base_url = None
        self.ssl_context = None   # set by start() to serve HTTPS

    def start(self):
        """Called once before READY (after the port is known); raise to refuse to start."""

    def stop(self):
        """Called once on exit."""

    def stats_extra(self):
        return {}

    def reset(self):
        """Called by POST /_test/reset, after the stats and the introspection cache are cleared."""


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "MooseResource/1"
    timeout = 120   # idle keep-alive connections and stuck TLS handshakes end after this

    def setup(self):
        super().setup()
        if isinstance(self.connection, ssl.SSLSocket):
            self.connection.do_handshake()   # here, in the request's thread, not in the accept loop

    @property
    def app(self):
        return self.server.app

    def log_message(self, fmt, *args):
        if self.app.args.verbose:
            sys.stderr.write(f"[{self.app.name}] {self.address_string()} {fmt % args}\n")

    # ---- request plumbing

    def read_body(self):
        """The request body (Content-Length or chunked), read in full before any answer."""
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            chunks = []
            total = 0
            while True:
                line = self.rfile.readline(65537)
                if not line:
                    raise ValueError("truncated chunked body")
                size = int(line.split(b";", 1)[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline(65537) not in (b"\r\n", b"\n", b""):
                        pass   # trailers
                    break
                total += size
                if total > MAX_BODY:
                    raise ValueError("body too large")
                chunks.append(self.rfile.read(size))
                self.rfile.readline(3)
            return b"".join(chunks)
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            raise ValueError("body too large")
        return self.rfile.read(length) if length else b""

    def send(self, status, body=b"", content_type="application/json", headers=()):
        if isinstance(body, (dict, list)):
            body = (json.dumps(body, indent=1) + "\n").encode()
        elif isinstance(body, str):
            body = body.encode()
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        if body or status not in (204, 304):
            self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    # ---- authentication

    def bearer_challenges(self, error=None, description=None, scope=None):
        value = 'Bearer realm="moose"' if error is None else f'Bearer error="{error}"'
        if description:
            value += f', error_description="{description}"'
        if scope:
            value += f', scope="{scope}"'
        return [("WWW-Authenticate", value)]

    def extract_token(self, allow_basic=False):
        """(scheme, token) from Authorization; token None when absent/unusable."""
        header = self.headers.get("Authorization")
        if not header:
            return None, None
        scheme, _, rest = header.strip().partition(" ")
        rest = rest.strip()
        if scheme.lower() == "bearer" and rest:
            return "bearer", rest
        if allow_basic and scheme.lower() == "basic" and rest:
            try:
                user_pass = base64.b64decode(rest, validate=True).decode("utf-8")
            except (ValueError, UnicodeDecodeError):
                return "basic", None
            _, sep, password = user_pass.partition(":")
            return "basic", (password if sep and password else None)
        return scheme.lower(), None

    def authenticate(self, allow_basic=False, required_scopes=(), challenges=None, body_bytes=None):
        """The introspection answer (dict, with 'token' added) of an accepted request, or None after
        answering 401/403/503 itself. challenges(error) -> header list overrides the Bearer ones."""
        challenges = challenges or (lambda error, **kw: self.bearer_challenges(error, **kw))
        path = self.path.split("?", 1)[0]
        record = lambda outcome, fp=None, scheme=None, reason=None: self.app.stats.record(
            outcome, fp, self.command, path, scheme=scheme, reason=reason, body_bytes=body_bytes)
        scheme, token = self.extract_token(allow_basic)
        if token is None:
            record("missing", scheme=scheme, reason="no usable credentials")
            self.send(401, {"error": "unauthorized", "error_description": "a bearer token is required"},
                      headers=challenges(None))
            return None
        fp = fingerprint(token)
        try:
            info = self.app.introspector.introspect(token)
        except IdPUnavailable as e:
            record("idp_error", fp, scheme, str(e))
            self.send(503, {"error": "temporarily_unavailable", "error_description": str(e)},
                      headers=[("Retry-After", "1")])
            return None
        if not info.get("active"):
            record("refused", fp, scheme, "inactive")
            self.send(401, {"error": "invalid_token", "error_description": "the token is not active"},
                      headers=challenges("invalid_token"))
            return None
        granted = set((info.get("scope") or "").split())
        missing = [s for s in required_scopes if s not in granted]
        if missing:
            need = " ".join(required_scopes)
            record("insufficient_scope", fp, scheme, f"missing scope {' '.join(missing)}")
            self.send(403, {"error": "insufficient_scope", "error_description": f"requires scope {need}"},
                      headers=self.bearer_challenges("insufficient_scope", scope=need))
            return None
        record("accepted", fp, scheme)
        return dict(info, token=token, fingerprint=fp, scheme=scheme)

    # ---- /_test

    def handle_test_endpoints(self):
        path = self.path.split("?", 1)[0]
        if path == "/_test/stats" and self.command == "GET":
            snap = self.app.stats.snapshot()
            with self.app.introspector.lock:
                snap["introspection"] = {
                    "endpoint": self.app.introspector.introspection_endpoint,
                    "client_id": self.app.introspector.client_id,
                    "cache_seconds": self.app.introspector.cache_seconds,
                    "calls": self.app.introspector.counters["introspection_calls"],
                    "cache_hits": self.app.introspector.counters["cache_hits"],
                    "coalesced": self.app.introspector.counters["coalesced"],
                    "userinfo_calls": self.app.introspector.counters["userinfo_calls"],
                }
            snap["server"] = self.app.name
            snap["issuer"] = self.app.introspector.issuer
            snap.update(self.app.stats_extra())
            self.send(200, snap)
            return True
        if path == "/_test/reset" and self.command == "POST":
            self.read_body()
            self.app.stats.reset()
            self.app.introspector.reset()
            self.app.reset()
            self.send(204)
            return True
        if path in ("/_test/stats", "/_test/reset"):
            self.send(405, {"error": "method_not_allowed"})
            return True
        return False

    def dispatch(self):
        """Subclasses implement route(); this wraps it with stats and the /_test endpoints."""
        self.app.stats.enter()
        try:
            if not self.handle_test_endpoints():
                self.route()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        except ValueError as e:
            self.close_connection = True
            try:
                self.send(400, {"error": "invalid_request", "error_description": str(e)})
            except OSError:
                pass
        except Exception as e:   # a bug here: say so (500 and a traceback on stderr) rather than drop the line
            import traceback
            traceback.print_exc(file=sys.stderr)
            self.close_connection = True
            try:
                self.send(500, {"error": "server_error", "error_description": repr(e)})
            except OSError:
                pass
        finally:
            self.app.stats.leave()

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = dispatch

    def route(self):
        self.send(404, {"error": "not_found"})


# ----------------------------------------------------------------------------------------- main

def parser(description):
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0: a free one)")
    p.add_argument("--issuer", default=DEFAULT_ISSUER, help="the test IdP (default %(default)s, env MOOSE_IDP_ISSUER)")
    p.add_argument("--introspection-client", default=DEFAULT_INTROSPECTION_CLIENT, metavar="ID:SECRET",
                   help="client that authenticates at the introspection endpoint (env MOOSE_INTROSPECTION_CLIENT)")
    p.add_argument("--cache-seconds", type=float, default=3.0,
                   help="how long an introspection answer is reused (0: ask the IdP every time)")
    p.add_argument("--no-stdin-watch", action="store_true",
                   help="do not exit when stdin closes (for running it by hand in the background)")
    p.add_argument("--verbose", action="store_true", help="log requests to stderr")
    return p


def run(app_class, handler_class, args):
    """Starts the server, prints READY, and serves until stdin closes or SIGTERM/SIGINT."""
    app = app_class(args)
    try:
        app.introspector.discover()
        app.introspector.probe()
    except IdPUnavailable as e:
        sys.stderr.write(f"{app.name}: cannot use the IdP at {args.issuer}: {e}\n")
        return 2
    server = Server(("127.0.0.1", args.port), handler_class, app)
    port = server.server_address[1]
    app.base_url = f"http://127.0.0.1:{port}"
    try:
        app.start()
    except Exception as e:
        sys.stderr.write(f"{app.name}: {e}\n")
        server.server_close()
        app.stop()
        return 2
    if app.ssl_context is not None:
        server.socket = app.ssl_context.wrap_socket(server.socket, server_side=True, do_handshake_on_connect=False)
        app.base_url = f"https://127.0.0.1:{port}"

    # A plain flag, polled: Event.set() in a signal handler can deadlock on the Event's own lock.
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append("SIGTERM"))
    signal.signal(signal.SIGINT, lambda *_: stop.append("SIGINT"))
    if not args.no_stdin_watch:
        def watch_stdin():
            try:
                while os.read(sys.stdin.fileno(), 4096):
                    pass
            except OSError:
                pass
            stop.append("stdin closed")
        threading.Thread(target=watch_stdin, daemon=True).start()
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True).start()
    print(f"READY {app.base_url}", flush=True)
    while not stop:
        time.sleep(0.1)
    server.shutdown()
    server.server_close()
    app.stop()
    return 0
