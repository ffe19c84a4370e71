#!/usr/bin/env python3
"""End-to-end check of the test MCP server, doing what an MCP client does given only the server URL.

    tools/mcp/selftest.py [http://127.0.0.1:8931/mcp]     (stdlib only; start the server first)

Discovery (401 -> RFC 9728 -> RFC 8414), RFC 7591 registration, authorization code + PKCE + RFC 8707
resource + state + RFC 9207 iss through a loopback listener (RFC 8252), token, MCP initialize /
tools/list / tools/call, refresh rotation and reuse detection, the 403 insufficient_scope step-up,
revocation, expiry, every hostile mode, and the /_test/stats counters. Resets the server's state.
Ends with 'N passed, N failed'; exits 1 on any failure.
"""
import base64
import hashlib
import http.server as httpserver
import json
import os
import re
import secrets
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

URL = (sys.argv[1] if len(sys.argv) > 1 else os.environ.get("MOOSE_MCP_URL")) or "http://127.0.0.1:8931/mcp"
BASE = "{0.scheme}://{0.netloc}".format(urllib.parse.urlsplit(URL))
PROTOCOL = "2025-11-25"
passed, failed = 0, 0


def check(name, ok, detail=""):
    global passed, failed
    if ok:
        passed += 1
        print(f"ok   {name}")
    else:
        failed += 1
        print(f"FAIL {name} {detail}")
    return ok


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


OPENER = urllib.request.build_opener(NoRedirect)


def http(method, url, body=None, headers=None, form=None, js=None):
    headers = dict(headers or {})
    if form is not None:
        body = urllib.parse.urlencode(form).encode()
        headers["Content-Type"] = "application/x-www-form-urlencoded"
    if js is not None:
        body = json.dumps(js).encode()
        headers["Content-Type"] = "application/json"
    request = urllib.request.Request(url, data=body, headers=headers, method=method)
    try:
        with OPENER.open(request, timeout=10) as response:
            return response.status, response.headers, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.headers, error.read()


def jget(url):
    status, _, body = http("GET", url)
    return status, (json.loads(body) if body and status == 200 else None)


def auth_params(header):
    """Parse `Bearer k="v", k2="v2"` (quoted values only, as this server sends)."""
    scheme, _, rest = (header or "").partition(" ")
    return scheme, dict(re.findall(r'(\w+)="([^"]*)"', rest))


def control(path, obj=None):
    status, _, body = http("POST" if obj is not None else "GET", BASE + "/_test/" + path,
                           js=obj if obj is not None else None)
    assert status == 200, (path, status, body)
    return json.loads(body)


# ---- the loopback redirect listener (RFC 8252 §7.3) ---------------------------------------------

class Callback(httpserver.BaseHTTPRequestHandler):
    received = []

    def do_GET(self):
        Callback.received.append(dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(self.path).query)))
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"You can close this window.")

    def log_message(self, *args):
        pass


listener = httpserver.HTTPServer(("127.0.0.1", 0), Callback)
threading.Thread(target=listener.serve_forever, daemon=True).start()
REDIRECT = f"http://127.0.0.1:{listener.server_port}/callback"


# ---- OAuth client steps -------------------------------------------------------------------------

def pkce():
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")
    return verifier, challenge


def authorize(meta, client_id, scope=None, resource=URL, redirect=REDIRECT):
    """Returns (callback params as the 'browser' delivered them, the raw Location, verifier)."""
    verifier, challenge = pkce()
    state = secrets.token_urlsafe(16)
    query = {"response_type": "code", "client_id": client_id, "redirect_uri": redirect,
             "code_challenge": challenge, "code_challenge_method": "S256", "state": state}
    if scope:
        query["scope"] = scope
    if resource:
        query["resource"] = resource
    status, headers, body = http("GET", meta["authorization_endpoint"] + "?" + urllib.parse.urlencode(query))
    if status != 302:
        return {"_status": status, "_body": body.decode()}, None, verifier
    location = headers["Location"]
    Callback.received.clear()
    with urllib.request.urlopen(location, timeout=10) as response:  # the browser follows the redirect
        response.read()
    params = Callback.received[-1]
    params["_state_ok"] = params.get("state") == state
    return params, location, verifier


def token(meta, form):
    status, _, body = http("POST", meta["token_endpoint"], form=form)
    return status, json.loads(body) if body else {}


def code_grant(meta, client_id, code, verifier, resource=URL, redirect=REDIRECT):
    form = {"grant_type": "authorization_code", "code": code, "redirect_uri": redirect, "client_id": client_id,
            "code_verifier": verifier}
    if resource:
        form["resource"] = resource
    return token(meta, form)


def refresh_grant(meta, client_id, refresh_token, resource=URL):
    form = {"grant_type": "refresh_token", "refresh_token": refresh_token, "client_id": client_id}
    if resource:
        form["resource"] = resource
    return token(meta, form)


def login(meta, client_id, scope=None):
    params, _, verifier = authorize(meta, client_id, scope)
    status, tokens = code_grant(meta, client_id, params["code"], verifier)
    assert status == 200, tokens
    return tokens


# ---- MCP over Streamable HTTP -------------------------------------------------------------------

class Session:
    def __init__(self, access_token):
        self.access_token, self.session_id, self.next_id = access_token, None, 1

    def post(self, message):
        headers = {"Accept": "application/json, text/event-stream", "Authorization": f"Bearer {self.access_token}"}
        if self.session_id:
            headers["Mcp-Session-Id"] = self.session_id
            headers["MCP-Protocol-Version"] = PROTOCOL
        status, response_headers, body = http("POST", URL, js=message, headers=headers)
        result = None
        if status == 200:
            if response_headers.get("Content-Type", "").startswith("text/event-stream"):
                data = [line[5:].strip() for line in body.decode().splitlines() if line.startswith("data:")]
                results = [json.loads(d) for d in data if d]
                result = next((r for r in results if r.get("id") == message.get("id")), None)
            else:
                result = json.loads(body)
        return status, response_headers, result

    def request(self, method, params=None):
        message = {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params or {}}
        self.next_id += 1
        return self.post(message)

    def initialize(self):
        status, headers, result = self.request("initialize", {
            "protocolVersion": PROTOCOL, "capabilities": {},
            "clientInfo": {"name": "moose-selftest", "version": "1"}})
        if status == 200:
            self.session_id = headers.get("Mcp-Session-Id")
            self.post({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return status, headers, result

    def call(self, tool, text):
        return self.request("tools/call", {"name": tool, "arguments": {"text": text}})


def tool_text(result):
    try:
        return result["result"]["content"][0]["text"]
    except (TypeError, KeyError, IndexError):
        return None


def main():
    started = time.monotonic()
    control("reset", {})

    # 1. Unauthenticated request -> 401 + WWW-Authenticate with resource_metadata.
    status, headers, _ = http("POST", URL, js={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}},
                              headers={"Accept": "application/json, text/event-stream"})
    scheme, challenge = auth_params(headers.get("WWW-Authenticate"))
    check("POST /mcp without a token -> 401", status == 401, status)
    check("401 WWW-Authenticate: Bearer ... resource_metadata=", scheme == "Bearer" and "resource_metadata" in challenge,
          headers.get("WWW-Authenticate"))
    print("     ", headers.get("WWW-Authenticate"))

    # 2. RFC 9728 protected resource metadata.
    status, prm = jget(challenge["resource_metadata"])
    check("protected resource metadata (RFC 9728)", status == 200 and prm["resource"] == URL, prm)
    issuer = prm["authorization_servers"][0]

    # 3. RFC 8414 / OIDC discovery, every URL form a client may try.
    parsed = urllib.parse.urlsplit(issuer)
    origin, path = f"{parsed.scheme}://{parsed.netloc}", parsed.path.rstrip("/")
    forms = [f"{origin}/.well-known/oauth-authorization-server{path}",
             f"{origin}/.well-known/openid-configuration{path}",
             f"{origin}{path}/.well-known/openid-configuration",
             f"{origin}/.well-known/oauth-authorization-server/mcp",
             f"{origin}/.well-known/openid-configuration/mcp",
             f"{origin}/mcp/.well-known/openid-configuration",
             f"{origin}/.well-known/oauth-protected-resource"]
    meta = None
    for form in dict.fromkeys(forms):
        status, document = jget(form)
        print(f"      {status} {form}")
        if status == 200 and meta is None and "issuer" in document:
            meta = document
    check("authorization server metadata found", meta is not None)
    check("metadata issuer == PRM authorization server (exact string)", meta["issuer"] == issuer,
          (meta["issuer"], issuer))
    check("metadata advertises S256 and RFC 9207 iss",
          "S256" in meta["code_challenge_methods_supported"] and meta["authorization_response_iss_parameter_supported"])

    # 4. RFC 7591 dynamic registration: native app, loopback redirect without a port.
    status, _, body = http("POST", meta["registration_endpoint"], js={
        "client_name": "moose-selftest", "application_type": "native", "token_endpoint_auth_method": "none",
        "redirect_uris": ["http://127.0.0.1/callback"], "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"]})
    client = json.loads(body)
    check("register (RFC 7591) -> 201", status == 201 and "client_id" in client, body)
    cid = client["client_id"]
    print(f"      registered scope={client.get('scope')!r} auth_method={client.get('token_endpoint_auth_method')}")

    # 5. Authorization request: PKCE S256, state, resource, loopback redirect on another port.
    params, location, verifier = authorize(meta, cid)
    check("authorize -> 302 straight to the loopback redirect with a code", "code" in params, params)
    check("authorization response: state echoed", params.get("_state_ok"))
    check("authorization response: iss == issuer (RFC 9207)", params.get("iss") == issuer, params.get("iss"))
    print("      Location:", re.sub(r"code=[^&]+", "code=…", location))

    status, body = code_grant(meta, cid, params["code"], verifier)
    check("token (authorization_code) -> 200", status == 200 and body.get("refresh_token"), body)
    check("tokens: expires_in and scope mcp:tools", body.get("expires_in") == 60 and body.get("scope") == "mcp:tools",
          body)
    tokens = body

    # 6. MCP: initialize, tools/list, tools/call echo.
    mcp = Session(tokens["access_token"])
    status, headers, result = mcp.initialize()
    check("initialize -> 200 with Mcp-Session-Id", status == 200 and mcp.session_id, (status, result))
    print(f"      protocolVersion={result['result']['protocolVersion']} content-type={headers.get('Content-Type')}"
          f" Mcp-Session-Id={mcp.session_id}")
    status, _, result = mcp.request("tools/list")
    names = sorted(t["name"] for t in result["result"]["tools"]) if result else []
    check("tools/list -> echo, admin_echo, chatty_echo", names == ["admin_echo", "chatty_echo", "echo"], names)
    status, _, result = mcp.call("echo", "hello moose")
    check("tools/call echo", status == 200 and tool_text(result) == "hello moose", result)

    # 7. Per-tool scope: admin_echo -> 403 insufficient_scope -> step-up.
    status, headers, _ = mcp.call("admin_echo", "hi")
    scheme, challenge = auth_params(headers.get("WWW-Authenticate"))
    check("tools/call admin_echo without mcp:admin -> 403", status == 403, status)
    check("403 WWW-Authenticate insufficient_scope, scope=, resource_metadata=",
          challenge.get("error") == "insufficient_scope" and challenge.get("scope") == "mcp:tools mcp:admin"
          and challenge.get("resource_metadata") == f"{BASE}/.well-known/oauth-protected-resource/mcp",
          headers.get("WWW-Authenticate"))
    print("     ", headers.get("WWW-Authenticate"))
    stepped = login(meta, cid, scope=challenge["scope"])
    check("step-up token has both scopes", stepped.get("scope") == "mcp:tools mcp:admin", stepped)
    mcp.access_token = stepped["access_token"]
    status, _, result = mcp.call("admin_echo", "hi")
    check("admin_echo after step-up, same MCP session", status == 200 and tool_text(result) == "admin: hi",
          (status, result))
    mcp.access_token = tokens["access_token"]
    admin_only = login(meta, cid, scope="mcp:admin")
    status, headers, _ = Session(admin_only["access_token"]).initialize()
    check("token without mcp:tools -> the SDK's own 403 (no scope= in it)", status == 403
          and auth_params(headers.get("WWW-Authenticate"))[1].get("error") == "insufficient_scope", status)
    print("     ", headers.get("WWW-Authenticate"))

    # 7b. A confidential client (the SDK's default auth method, client_secret_post).
    status, _, body = http("POST", meta["registration_endpoint"], js={
        "redirect_uris": [REDIRECT], "application_type": "native"})
    secret_client = json.loads(body)
    params, _, verifier = authorize(meta, secret_client["client_id"])
    form = {"grant_type": "authorization_code", "code": params["code"], "redirect_uri": REDIRECT, "resource": URL,
            "client_id": secret_client["client_id"], "code_verifier": verifier}
    status, body = token(meta, form)
    check("confidential client: token without its secret -> 401 invalid_client", status == 401, body)
    status, body = token(meta, {**form, "client_secret": secret_client["client_secret"]})
    check("confidential client (client_secret_post): token -> 200", status == 200, body)

    # 8. Refresh: rotation, then reuse detection revokes the family.
    status, refreshed = refresh_grant(meta, cid, tokens["refresh_token"])
    check("refresh -> 200, rotated refresh token", status == 200 and refreshed.get("refresh_token")
          and refreshed["refresh_token"] != tokens["refresh_token"], refreshed)
    mcp.access_token = refreshed["access_token"]
    status, _, result = mcp.call("echo", "after refresh")
    check("tools/call with the refreshed access token", status == 200 and tool_text(result) == "after refresh")
    status, body = refresh_grant(meta, cid, tokens["refresh_token"])
    check("replayed (rotated) refresh token -> 400 invalid_grant", status == 400 and body.get("error") == "invalid_grant",
          body)
    status, body = refresh_grant(meta, cid, refreshed["refresh_token"])
    check("after reuse, the newest refresh token is revoked too", status == 400 and body.get("error") == "invalid_grant",
          body)
    status, _, _ = mcp.call("echo", "x")
    check("after reuse, the family's access token -> 401", status == 401, status)

    # 9. Two concurrent refreshes with one refresh token: the client breaks.
    fresh = login(meta, cid)
    answers = []
    threads = [threading.Thread(target=lambda: answers.append(refresh_grant(meta, cid, fresh["refresh_token"])))
               for _ in range(2)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    codes = sorted(s for s, _ in answers)
    check("concurrent refresh: one 200, one invalid_grant", codes == [200, 400], answers)
    winner = next((b for s, b in answers if s == 200), {})
    status, body = refresh_grant(meta, cid, winner.get("refresh_token", "x"))
    check("concurrent refresh: the winner's refresh token is revoked as well", status == 400, body)

    # 10. Resource indicator (RFC 8707) enforcement.
    params, _, _ = authorize(meta, cid, resource=None)
    check("authorize without resource -> error=invalid_target", params.get("error") == "invalid_target", params)
    params, _, _ = authorize(meta, cid, resource="http://127.0.0.1:1/other")
    check("authorize with a foreign resource -> error=invalid_target", params.get("error") == "invalid_target", params)
    params, _, verifier = authorize(meta, cid)
    status, body = code_grant(meta, cid, params["code"], verifier, resource=None)
    check("token request without resource -> 400 invalid_target", status == 400 and body.get("error") == "invalid_target",
          body)
    params, _, verifier = authorize(meta, cid)
    status, body = code_grant(meta, cid, params["code"], verifier, resource=BASE + "/elsewhere")
    check("token request with another resource -> 400 invalid_target",
          status == 400 and body.get("error") == "invalid_target", body)
    params, _, verifier = authorize(meta, cid)
    status, body = code_grant(meta, cid, params["code"], "wrong-" + verifier)
    check("wrong PKCE verifier -> invalid_grant", status == 400 and body.get("error") == "invalid_grant", body)
    status, body = code_grant(meta, cid, params["code"], verifier)
    check("right verifier afterwards -> 200", status == 200, body)
    status, again = code_grant(meta, cid, params["code"], verifier)
    check("code replay -> invalid_grant", status == 400 and again.get("error") == "invalid_grant", again)
    check("code replay revoked the tokens it produced", Session(body["access_token"]).initialize()[0] == 401)
    params, _, _ = authorize(meta, cid, redirect="http://127.0.0.1:9/elsewhere")
    check("unregistered redirect path -> 400, no redirect", params.get("_status") == 400, params)

    # 11. Revocation (RFC 7009).
    revocable = login(meta, cid)
    status, _, body = http("POST", meta["revocation_endpoint"], form={"token": revocable["access_token"],
                                                                     "client_id": cid})
    check("SDK quirk: revoke without a client_secret field -> 400 invalid_request", status == 400, (status, body))
    status, _, _ = http("POST", meta["revocation_endpoint"], form={"token": revocable["access_token"],
                                                                  "client_id": cid, "client_secret": ""})
    check("revoke with client_secret= (empty) -> 200", status == 200, status)
    check("revoked access token -> 401", Session(revocable["access_token"]).initialize()[0] == 401)
    status, body = refresh_grant(meta, cid, revocable["refresh_token"])
    check("revoking the access token revoked its refresh token", status == 400, body)

    # 12. Hostile modes.
    control("mode", {"iss": "omit"})
    params, location, _ = authorize(meta, cid)
    _, still = jget(f"{origin}/.well-known/oauth-authorization-server{path}")
    check("iss=omit: no iss in the response, metadata still claims support",
          "iss" not in params and "code" in params and still["authorization_response_iss_parameter_supported"], params)
    control("mode", {"iss": "forge"})
    params, location, _ = authorize(meta, cid)
    check("iss=forge: iss is a wrong issuer", params.get("iss") not in (None, issuer), params)
    print("      forged Location:", re.sub(r"code=[^&]+", "code=…", location))
    control("mode", {"iss": "normal"})

    control("mode", {"pkce_methods": []})
    _, hostile = jget(f"{origin}/.well-known/oauth-authorization-server{path}")
    check("pkce_methods=[]: metadata has no S256", "S256" not in (hostile.get("code_challenge_methods_supported") or []),
          hostile.get("code_challenge_methods_supported"))
    control("mode", {"pkce_methods": None})
    _, hostile = jget(f"{origin}/.well-known/oauth-authorization-server{path}")
    check("pkce_methods=null: code_challenge_methods_supported absent", "code_challenge_methods_supported" not in hostile)
    control("mode", {"pkce_methods": ["S256"]})

    live = login(meta, cid)
    mcp = Session(live["access_token"])
    check("before expire_all: initialize -> 200", mcp.initialize()[0] == 200)
    control("mode", {"expire_all": True})
    status, headers, _ = mcp.call("echo", "x")
    check("expire_all: access token -> 401 invalid_token", status == 401
          and auth_params(headers.get("WWW-Authenticate"))[1].get("error") == "invalid_token", status)
    status, renewed = refresh_grant(meta, cid, live["refresh_token"])
    mcp.access_token = renewed.get("access_token")
    status, _, result = mcp.call("echo", "renewed")
    check("expire_all: refresh, then the same session works", status == 200 and tool_text(result) == "renewed",
          (status, result))

    control("mode", {"access_token_seconds": 1})
    short = login(meta, cid)
    check("access_token_seconds=1: expires_in 1", short.get("expires_in") == 1, short)
    time.sleep(2.1)
    check("a 1 s access token is refused after 2 s", Session(short["access_token"]).initialize()[0] == 401)
    control("mode", {"access_token_seconds": 60})

    # 13. Counters.
    stats = control("stats")
    by_grant = stats["token_requests_by_grant"]
    check("stats: token requests by grant", by_grant == {"authorization_code": 14, "refresh_token": 8}, by_grant)
    check("stats: refreshes (successful)", stats["refreshes"] == 3, stats["refreshes"])
    check("stats: invalid_grant answers", stats["invalid_grant"] == 7, stats["invalid_grant"])
    check("stats: registrations, authorize requests", stats["registrations"] == 2
          and stats["authorize_requests"] == 16, (stats["registrations"], stats["authorize_requests"]))
    check("stats: tool calls", stats["tool_calls_by_name"] == {"echo": 3, "admin_echo": 1}, stats["tool_calls_by_name"])
    check("stats: reuse detections", stats["refresh_reuse_detected"] == 2 and stats["code_reuse_detected"] == 1,
          (stats["refresh_reuse_detected"], stats["code_reuse_detected"]))
    check("stats: insufficient_scope 403s", stats["insufficient_scope_403"] == 1)
    control("reset", {})
    check("reset zeroes the counters", control("stats")["token_requests"] == 0)

    print(f"      ({time.monotonic() - started:.1f} s)")


if __name__ == "__main__":
    try:
        main()
    except Exception as error:  # an unexpected answer is a failure, not a traceback only
        import traceback
        traceback.print_exc()
        check("selftest ran to the end", False, repr(error))
    finally:
        listener.shutdown()
    print(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)
