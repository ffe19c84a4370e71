#!/usr/bin/env python3
"""End-to-end checks of the Glewlwyd test IdP as configured by tools/glewlwyd/start.

    tools/glewlwyd/verify            (creates a venv with joserfc under the state dir, runs this file)

Needs a running instance (tools/glewlwyd/start) and the loopback ports 53682/53683 free (it listens
there as the "client"). Prints one line per check and the exact response shapes it saw; exits 1 on failure.
"""
import base64
import hashlib
import http.server as httpserver
import json
import os
import secrets
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

from joserfc import jwk, jwt
from joserfc.jwk import KeySet

HERE = os.path.dirname(os.path.abspath(__file__))
PORT = int(os.environ.get("MOOSE_GLEWLWYD_PORT", "4594"))
BASE = f"http://127.0.0.1:{PORT}"
ISS = f"{BASE}/api/oidc"
ISS_PAR = f"{BASE}/api/oidc-par"
REDIRECT = "http://127.0.0.1:53682/callback"
RESOURCE = "https://api.moose.test"
CONF_SECRET = "moose-confidential-secret"

FAILED = []
VERBOSE = "-v" in sys.argv


def check(name, ok, detail=""):
    print(("ok   " if ok else "FAIL ") + name + (f"  [{detail}]" if detail else ""))
    if not ok:
        FAILED.append(name)
    return ok


def seen(label, value):
    print(f"     {label}: {value}")


# --------------------------------------------------------------------------- HTTP

class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *a, **k):
        return None


OPENER = urllib.request.build_opener(NoRedirect())


class Resp:
    def __init__(self, status, headers, body):
        self.status, self.headers, self.body = status, headers, body

    def json(self):
        return json.loads(self.body) if self.body else None

    def __repr__(self):
        return f"{self.status} {self.body[:300]!r}"


def http(method, url, form=None, headers=None, body=None, auth=None):
    headers = dict(headers or {})
    if form is not None:
        body = urllib.parse.urlencode(form).encode()
        headers["Content-Type"] = "application/x-www-form-urlencoded"
    if auth:
        headers["Authorization"] = "Basic " + base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode()
    req = urllib.request.Request(url, data=body, method=method, headers=headers)
    try:
        with OPENER.open(req, timeout=15) as r:
            return Resp(r.status, r.headers, r.read())
    except urllib.error.HTTPError as e:
        return Resp(e.code, e.headers, e.read())


# --------------------------------------------------------------------------- loopback "client"

class Callback(httpserver.BaseHTTPRequestHandler):
    received = []

    def do_GET(self):
        Callback.received.append(self.path)
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.end_headers()
        self.wfile.write(b"moose test client: you may close this window")

    do_POST = do_GET

    def log_message(self, *a):
        pass


def start_listener(port):
    srv = httpserver.ThreadingHTTPServer(("127.0.0.1", port), Callback)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


def b64u(b):
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode()


def pkce():
    verifier = b64u(secrets.token_bytes(32))
    return verifier, b64u(hashlib.sha256(verifier.encode()).digest())


def browse(url, *extra_args):
    Callback.received.clear()
    p = subprocess.run([sys.executable, os.path.join(HERE, "browser.py"), *extra_args, url],
                       capture_output=True, text=True, timeout=60)
    if p.returncode != 0:
        return None, p.stderr.strip()
    if not Callback.received:
        return None, "nothing delivered to the loopback listener; " + p.stderr.strip()
    path = Callback.received[-1]
    return dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(path).query)), p.stdout.strip()


def authorize(client_id, scope="openid profile email offline_access", issuer=ISS, extra=None, par=None):
    """Runs a code+PKCE authorization through browser.py; returns (callback params, verifier, nonce, state)."""
    verifier, challenge = pkce()
    state, nonce = secrets.token_urlsafe(8), secrets.token_urlsafe(8)
    params = {"response_type": "code", "client_id": client_id, "redirect_uri": REDIRECT, "scope": scope,
              "state": state, "nonce": nonce, "code_challenge": challenge, "code_challenge_method": "S256"}
    params.update(extra or {})
    if par is not None:  # par = client auth tuple or () for a public client
        r = http("POST", issuer + "/par", form=params, auth=par or None)
        if r.status != 201:
            return {"error": f"PAR {r}"}, verifier, nonce, state
        url = issuer + "/auth?" + urllib.parse.urlencode({"client_id": client_id, "request_uri": r.json()["request_uri"]})
    else:
        url = issuer + "/auth?" + urllib.parse.urlencode(params)
    cb, info = browse(url)
    if cb is None:
        return {"error": info}, verifier, nonce, state
    return cb, verifier, nonce, state


def redeem(client_id, cb, verifier, issuer=ISS, auth=None, headers=None, extra=None):
    form = {"grant_type": "authorization_code", "code": cb.get("code", ""), "redirect_uri": REDIRECT,
            "code_verifier": verifier}
    if auth is None:
        form["client_id"] = client_id
    form.update(extra or {})
    return http("POST", issuer + "/token", form=form, auth=auth, headers=headers)


# --------------------------------------------------------------------------- JOSE

JWKS = None


def jwks():
    global JWKS
    if JWKS is None:
        JWKS = KeySet.import_key_set(json.loads(http("GET", ISS + "/jwks").body))
    return JWKS


def header_of(token):
    return json.loads(base64.urlsafe_b64decode(token.split(".")[0] + "=="))


def verify_jwt(token):
    h = header_of(token)
    return h, jwt.decode(token, jwks(), algorithms=[h["alg"]]).claims


DPOP_KEY = jwk.ECKey.generate_key("P-256")


def dpop_proof(method, url, nonce=None, access_token=None, key=DPOP_KEY, iat=None):
    claims = {"jti": secrets.token_urlsafe(16), "htm": method, "htu": url, "iat": int(iat or time.time())}
    if nonce:
        claims["nonce"] = nonce
    if access_token:
        claims["ath"] = b64u(hashlib.sha256(access_token.encode()).digest())
    header = {"typ": "dpop+jwt", "alg": "ES256", "jwk": key.as_dict(private=False)}
    return jwt.encode(header, claims, key)


# --------------------------------------------------------------------------- checks

def discovery():
    print("== discovery")
    for iss in (ISS, ISS_PAR):
        d = http("GET", iss + "/.well-known/openid-configuration").json()
        check(f"discovery {iss}", d["issuer"] == iss)
        members = ["pushed_authorization_request_endpoint", "require_pushed_authorization_requests",
                   "dpop_signing_alg_values_supported", "authorization_response_iss_parameter_supported",
                   "registration_endpoint", "device_authorization_endpoint", "code_challenge_methods_supported",
                   "introspection_endpoint", "revocation_endpoint", "end_session_endpoint",
                   "grant_types_supported", "token_endpoint_auth_methods_supported",
                   "revocation_endpoint_auth_methods_supported"]
        for m in members:
            seen(m, json.dumps(d.get(m, "<absent>")))
    d = http("GET", ISS + "/.well-known/openid-configuration").json()
    check("require_pushed_authorization_requests false on /oidc", d.get("require_pushed_authorization_requests") is False)
    d2 = http("GET", ISS_PAR + "/.well-known/openid-configuration").json()
    check("require_pushed_authorization_requests true on /oidc-par", d2.get("require_pushed_authorization_requests") is True)
    kids = sorted((k["kid"], k["alg"]) for k in json.loads(http("GET", ISS + "/jwks").body)["keys"])
    check("jwks has RS256, ES256 and EdDSA keys", [a for _, a in kids] == ["EdDSA", "ES256", "RS256"], str(kids))


def code_flow():
    print("== authorization code + PKCE (moose-public)")
    cb, verifier, nonce, state = authorize("moose-public")
    check("callback has code and state", "code" in cb and cb.get("state") == state, str(cb))
    check("RFC 9207 iss in the authorization response", cb.get("iss") == ISS, f"iss={cb.get('iss')!r}")
    seen("callback query keys", sorted(cb))
    r = redeem("moose-public", cb, verifier)
    tok = r.json() or {}
    check("token 200", r.status == 200, repr(r))
    seen("token response keys", sorted(tok))
    seen("token_type", repr(tok.get("token_type")))
    seen("iat / expires_in", f"{tok.get('iat')} / {tok.get('expires_in')}")
    seen("Cache-Control / Pragma", f"{r.headers.get('Cache-Control')} / {r.headers.get('Pragma')}")
    h, claims = verify_jwt(tok["id_token"])
    check("id_token RS256 by default, signature valid", h["alg"] == "RS256" and h.get("kid") == "moose-rs256", str(h))
    check("id_token nonce/aud/iss", claims.get("nonce") == nonce and claims.get("aud") in ("moose-public", ["moose-public"])
          and claims.get("iss") == ISS, json.dumps(claims))
    seen("id_token claims", json.dumps(claims, sort_keys=True))
    ah, at = verify_jwt(tok["access_token"])
    seen("access token header", json.dumps(ah))
    seen("access token claims", json.dumps(at, sort_keys=True))
    u = http("GET", ISS + "/userinfo", headers={"Authorization": "Bearer " + tok["access_token"]})
    check("userinfo 200 with name/email/preferred_username", u.status == 200 and (u.json() or {}).get("email") == "alice@example.com"
          and u.json().get("name") == "Alice Liddell" and u.json().get("preferred_username") == "alice", repr(u))
    seen("userinfo", u.body.decode())
    seen("userinfo Content-Type", u.headers.get("Content-Type"))

    # code replay
    r2 = redeem("moose-public", cb, verifier)
    seen("code replay", repr(r2))
    check("code replay refused", r2.status in (400, 403))
    u2 = http("GET", ISS + "/userinfo", headers={"Authorization": "Bearer " + tok["access_token"]})
    seen("userinfo with the token of a replayed code", repr(u2))
    return tok


def bad_requests():
    print("== error shapes")
    cb, verifier, _, _ = authorize("moose-public")
    r = redeem("moose-public", cb, "x" * 43)
    seen("wrong code_verifier", repr(r))
    r = redeem("moose-public", {"code": "nope"}, verifier)
    seen("unknown code", repr(r))
    r = http("POST", ISS + "/token", form={"grant_type": "refresh_token", "refresh_token": "nope", "client_id": "moose-public"})
    seen("unknown refresh token", f"{r!r} Content-Type={r.headers.get('Content-Type')} Content-Length={r.headers.get('Content-Length')}")
    r = http("POST", ISS + "/token", form={"grant_type": "client_credentials", "scope": "api.read"}, auth=("moose-service", "wrong"))
    seen("wrong client secret", repr(r))
    r = http("GET", ISS + "/userinfo", headers={"Authorization": "Bearer nope"})
    seen("userinfo with a bad token", f"{r!r} WWW-Authenticate={r.headers.get('WWW-Authenticate')!r}")
    # auth request without nonce
    verifier, challenge = pkce()
    url = ISS + "/auth?" + urllib.parse.urlencode({"response_type": "code", "client_id": "moose-public", "redirect_uri": REDIRECT,
                                                   "scope": "openid", "state": "s", "code_challenge": challenge,
                                                   "code_challenge_method": "S256"})
    cb, info = browse(url)
    seen("authorization without nonce (scope openid)", cb if cb is not None else info)
    url = ISS + "/auth?" + urllib.parse.urlencode({"response_type": "code", "client_id": "moose-public", "redirect_uri": REDIRECT,
                                                   "scope": "openid", "state": "s", "nonce": "n"})
    cb, info = browse(url)
    seen("public client without PKCE", cb if cb is not None else info)
    url = ISS + "/auth?" + urllib.parse.urlencode({"response_type": "code", "client_id": "moose-public",
                                                   "redirect_uri": "http://127.0.0.1:53999/callback", "scope": "openid",
                                                   "state": "s", "nonce": "n", "code_challenge": challenge,
                                                   "code_challenge_method": "S256"})
    r = http("GET", url)
    seen("unregistered redirect port", f"{r.status} Location={r.headers.get('Location')} body={r.body[:200]!r}")
    check("unregistered redirect port is not redirected to", "53999" not in (r.headers.get("Location") or ""))


def refresh(tok):
    print("== refresh rotation (moose-public)")
    cb, verifier, _, _ = authorize("moose-public")
    tok = redeem("moose-public", cb, verifier).json()
    rt1 = tok["refresh_token"]
    r = http("POST", ISS + "/token", form={"grant_type": "refresh_token", "refresh_token": rt1, "client_id": "moose-public"})
    t2 = r.json() or {}
    check("refresh 200", r.status == 200, repr(r))
    seen("refresh response keys", sorted(t2))
    rt2 = t2.get("refresh_token")
    check("refresh token rotated", rt2 is not None and rt2 != rt1)
    r = http("POST", ISS + "/token", form={"grant_type": "refresh_token", "refresh_token": rt1, "client_id": "moose-public"})
    seen("reuse of the rotated-out refresh token", f"{r!r} Content-Length={r.headers.get('Content-Length')}")
    check("reuse refused", r.status == 400)
    r = http("POST", ISS + "/token", form={"grant_type": "refresh_token", "refresh_token": rt2, "client_id": "moose-public"})
    seen("newest refresh token after the reuse", repr(r))
    u = http("GET", ISS + "/userinfo", headers={"Authorization": "Bearer " + t2["access_token"]})
    seen("access token of the chain after the reuse (userinfo)", repr(u))
    # concurrency: two refreshes of one token, a few times (the outcome is a race)
    outcomes = []
    for _ in range(4):
        cb, verifier, _, _ = authorize("moose-public")
        rt = redeem("moose-public", cb, verifier).json()["refresh_token"]
        results = []

        def go():
            results.append(http("POST", ISS + "/token", form={"grant_type": "refresh_token", "refresh_token": rt, "client_id": "moose-public"}))
        threads = [threading.Thread(target=go) for _ in range(2)]
        [t.start() for t in threads]
        [t.join() for t in threads]
        after = [http("POST", ISS + "/token", form={"grant_type": "refresh_token", "refresh_token": x.json()["refresh_token"],
                                                    "client_id": "moose-public"}).status
                 for x in results if x.status == 200]
        outcomes.append(f"{sorted(x.status for x in results)} then new token(s) -> {after}")
    seen("two concurrent refreshes of one token (4 trials)", outcomes)
    # scope down on refresh
    cb, verifier, _, _ = authorize("moose-public")
    rt = redeem("moose-public", cb, verifier).json()["refresh_token"]
    r = http("POST", ISS + "/token", form={"grant_type": "refresh_token", "refresh_token": rt, "client_id": "moose-public", "scope": "openid"})
    seen("refresh with a narrower scope", f"{r.status} scope={(r.json() or {}).get('scope')!r}")


def signing_algs():
    print("== ID token algorithms per client (sign_kid)")
    for client, alg, kid in (("moose-es256", "ES256", "moose-es256"), ("moose-eddsa", "EdDSA", "moose-eddsa")):
        cb, verifier, nonce, _ = authorize(client, scope="openid")
        r = redeem(client, cb, verifier)
        tok = r.json() or {}
        if not check(f"{client} token", r.status == 200, repr(r)):
            continue
        h, claims = verify_jwt(tok["id_token"])
        check(f"{client} id_token {alg}", h["alg"] == alg and h.get("kid") == kid, json.dumps(h))
        ah = header_of(tok["access_token"])
        seen(f"{client} access token header", json.dumps(ah))


def confidential():
    print("== confidential client (client_secret_basic)")
    cb, verifier, _, _ = authorize("moose-confidential")
    r = redeem("moose-confidential", cb, verifier, auth=("moose-confidential", CONF_SECRET))
    check("code redeemed with Basic auth", r.status == 200, repr(r))
    tok = r.json()
    i = http("POST", ISS + "/introspect", form={"token": tok["access_token"]}, auth=("moose-confidential", CONF_SECRET))
    seen("introspection", repr(i))
    check("introspection active", i.status == 200 and i.json().get("active") is True)
    v = http("POST", ISS + "/revoke", form={"token": tok["refresh_token"], "token_type_hint": "refresh_token"},
             auth=("moose-confidential", CONF_SECRET))
    seen("revocation of the refresh token", repr(v))
    r = http("POST", ISS + "/token", form={"grant_type": "refresh_token", "refresh_token": tok["refresh_token"]},
             auth=("moose-confidential", CONF_SECRET))
    check("revoked refresh token refused", r.status == 400, repr(r))
    v = http("POST", ISS + "/revoke", form={"token": tok["access_token"], "token_type_hint": "access_token"},
             auth=("moose-confidential", CONF_SECRET))
    u = http("GET", ISS + "/userinfo", headers={"Authorization": "Bearer " + tok["access_token"]})
    seen("userinfo after access token revocation", f"revoke={v.status} userinfo={u!r}")
    # public client revocation
    cb, verifier, _, _ = authorize("moose-public")
    ptok = redeem("moose-public", cb, verifier).json()
    v = http("POST", ISS + "/revoke", form={"token": ptok["refresh_token"], "client_id": "moose-public"})
    seen("public client revocation, client_id only", repr(v))
    v = http("POST", ISS + "/revoke", form={"token": ptok["refresh_token"]},
             headers={"Authorization": "Bearer " + ptok["access_token"]})
    seen("public client revocation, Bearer own access token", repr(v))
    r = http("POST", ISS + "/token", form={"grant_type": "refresh_token", "refresh_token": ptok["refresh_token"], "client_id": "moose-public"})
    check("refresh token revoked by Bearer revocation", v.status == 200 and r.status == 400, f"revoke={v.status} refresh={r.status}")
    # end session
    cb, verifier, _, _ = authorize("moose-public")
    ptok = redeem("moose-public", cb, verifier).json()
    url = ISS + "/end_session?" + urllib.parse.urlencode({"id_token_hint": ptok["id_token"],
                                                          "post_logout_redirect_uri": "http://127.0.0.1:53682/logout",
                                                          "state": "bye"})
    e = http("GET", url)
    seen("end_session", f"{e.status} Location={e.headers.get('Location')}")
    Callback.received.clear()
    p = subprocess.run([sys.executable, os.path.join(HERE, "browser.py"), url], capture_output=True, text=True, timeout=60)
    check("browser.py END_SESSION_URL reaches post_logout_redirect_uri with state",
          p.returncode == 0 and Callback.received == ["/logout?state=bye"], f"{Callback.received} {p.stderr.strip()}")
    r = http("POST", ISS + "/token", form={"grant_type": "refresh_token", "refresh_token": ptok["refresh_token"], "client_id": "moose-public"})
    seen("refresh token after end_session", repr(r))
    e = http("GET", url)
    seen("end_session again with the same id_token_hint", f"{e.status} Location={e.headers.get('Location')}")


def client_credentials():
    print("== client credentials (moose-service)")
    r = http("POST", ISS + "/token", form={"grant_type": "client_credentials", "scope": "api.read"},
             auth=("moose-service", "moose-service-secret"))
    tok = r.json() or {}
    check("client_credentials 200", r.status == 200, repr(r))
    seen("response", json.dumps({k: (v if k != "access_token" else "...") for k, v in tok.items()}))
    if "access_token" in tok:
        seen("access token claims", json.dumps(verify_jwt(tok["access_token"])[1], sort_keys=True))
    r = http("POST", ISS + "/token", form={"grant_type": "client_credentials", "scope": "api.read", "resource": RESOURCE},
             auth=("moose-service", "moose-service-secret"))
    if check("client_credentials with resource 200", r.status == 200, repr(r)):
        seen("aud with resource", verify_jwt(r.json()["access_token"])[1].get("aud"))
    r = http("POST", ISS + "/token", form={"grant_type": "client_credentials", "scope": "api.read", "resource": "https://elsewhere.test"},
             auth=("moose-service", "moose-service-secret"))
    seen("client_credentials with an unknown resource", repr(r))


def resource():
    print("== RFC 8707 resource (authorization + token)")
    cb, verifier, _, _ = authorize("moose-public", scope="openid api.read", extra={"resource": RESOURCE})
    r = redeem("moose-public", cb, verifier, extra={"resource": RESOURCE})
    if check("code flow with resource", r.status == 200, repr(r)):
        claims = verify_jwt(r.json()["access_token"])[1]
        check("access token aud is the resource", claims.get("aud") in (RESOURCE, [RESOURCE]), str(claims.get("aud")))
    cb, verifier, _, _ = authorize("moose-public", scope="openid api.read", extra={"resource": "https://elsewhere.test"})
    seen("authorization with an unknown resource", cb)


def dpop():
    print("== DPoP (moose-public, nonce mandatory)")
    token_url = ISS + "/token"
    cb, verifier, _, _ = authorize("moose-public", extra={"dpop_jkt": DPOP_KEY.thumbprint()})
    check("authorization with dpop_jkt", "code" in cb, str(cb))
    r = redeem("moose-public", cb, verifier, headers={"DPoP": dpop_proof("POST", token_url)})
    seen("token request, proof without nonce", f"{r!r} DPoP-Nonce={r.headers.get('DPoP-Nonce')!r} "
                                                 f"WWW-Authenticate={r.headers.get('WWW-Authenticate')!r}")
    check("use_dpop_nonce at the token endpoint", r.status == 400 and (r.json() or {}).get("error") == "use_dpop_nonce"
          and r.headers.get("DPoP-Nonce"))
    nonce = r.headers.get("DPoP-Nonce")
    r = redeem("moose-public", cb, verifier, headers={"DPoP": dpop_proof("POST", token_url, nonce=nonce)})
    tok = r.json() or {}
    check("token with nonce 200", r.status == 200, repr(r))
    seen("token_type", repr(tok.get("token_type")))
    seen("DPoP-Nonce on success", repr(r.headers.get("DPoP-Nonce")))
    at = tok.get("access_token", "")
    claims = verify_jwt(at)[1]
    check("access token cnf.jkt is the proof key's thumbprint", (claims.get("cnf") or {}).get("jkt") == DPOP_KEY.thumbprint(),
          json.dumps(claims.get("cnf")))
    ui = ISS + "/userinfo"
    u = http("GET", ui, headers={"Authorization": "DPoP " + at, "DPoP": dpop_proof("GET", ui, access_token=at)})
    seen("userinfo, proof without nonce", f"{u!r} DPoP-Nonce={u.headers.get('DPoP-Nonce')!r} "
                                           f"WWW-Authenticate={u.headers.get('WWW-Authenticate')!r}")
    nonce = u.headers.get("DPoP-Nonce") or nonce
    u = http("GET", ui, headers={"Authorization": "DPoP " + at, "DPoP": dpop_proof("GET", ui, nonce=nonce, access_token=at)})
    check("userinfo with DPoP + ath + nonce 200", u.status == 200, repr(u))
    seen("userinfo DPoP-Nonce on success", repr(u.headers.get("DPoP-Nonce")))
    u = http("GET", ui, headers={"Authorization": "Bearer " + at})
    seen("same token as Bearer", f"{u!r} WWW-Authenticate={u.headers.get('WWW-Authenticate')!r}")
    check("DPoP-bound token refused as Bearer", u.status in (400, 401, 403))
    u = http("GET", ui, headers={"Authorization": "DPoP " + at})
    seen("DPoP scheme without proof", f"{u!r} WWW-Authenticate={u.headers.get('WWW-Authenticate')!r}")
    u = http("GET", ui, headers={"Authorization": "DPoP " + at, "DPoP": dpop_proof("GET", ui, nonce=nonce)})
    seen("proof without ath", repr(u))
    u = http("GET", ui, headers={"Authorization": "DPoP " + at,
                                 "DPoP": dpop_proof("GET", ui, nonce=nonce, access_token=at, key=jwk.ECKey.generate_key("P-256"))})
    seen("proof from another key", repr(u))
    u = http("GET", ui, headers={"Authorization": "DPoP " + at, "DPoP": dpop_proof("GET", ui.replace("127.0.0.1", "localhost"), nonce=nonce, access_token=at)})
    seen("htu with localhost instead of 127.0.0.1", repr(u))
    u = http("GET", ui, headers={"Authorization": "DPoP " + at, "DPoP": dpop_proof("GET", ui + "?x=1", nonce=nonce, access_token=at)})
    seen("htu with a query", repr(u))
    proof = dpop_proof("GET", ui, nonce=nonce, access_token=at)
    http("GET", ui, headers={"Authorization": "DPoP " + at, "DPoP": proof})
    u = http("GET", ui, headers={"Authorization": "DPoP " + at, "DPoP": proof})
    seen("replayed proof (same jti)", repr(u))
    # refresh with DPoP
    rt = tok.get("refresh_token")
    r = http("POST", token_url, form={"grant_type": "refresh_token", "refresh_token": rt, "client_id": "moose-public"})
    seen("refresh of a DPoP-bound token without proof", f"{r!r}")
    r = http("POST", token_url, form={"grant_type": "refresh_token", "refresh_token": rt, "client_id": "moose-public"},
             headers={"DPoP": dpop_proof("POST", token_url, nonce=nonce)})
    if r.status == 400 and (r.json() or {}).get("error") == "use_dpop_nonce":
        nonce = r.headers.get("DPoP-Nonce")
        r = http("POST", token_url, form={"grant_type": "refresh_token", "refresh_token": rt, "client_id": "moose-public"},
                 headers={"DPoP": dpop_proof("POST", token_url, nonce=nonce)})
    check("refresh with DPoP proof", r.status == 200 and (r.json() or {}).get("token_type") == "DPoP", repr(r))
    # nonce rotation: count successful uses until a new DPoP-Nonce appears
    changes, used = [], 0
    for _ in range(25):
        u = http("GET", ui, headers={"Authorization": "DPoP " + at, "DPoP": dpop_proof("GET", ui, nonce=nonce, access_token=at)})
        used += 1
        if u.status != 200:
            if u.headers.get("DPoP-Nonce"):
                changes.append(f"{u.status} after {used}")
                nonce = u.headers["DPoP-Nonce"]
                continue
            break
        if u.headers.get("DPoP-Nonce") and u.headers["DPoP-Nonce"] != nonce:
            changes.append(f"200 with new nonce after {used}")
            nonce = u.headers["DPoP-Nonce"]
    seen("nonce rotation over 25 userinfo calls", changes)
    # a confidential client: code redeemed with DPoP + Basic
    cb, verifier, _, _ = authorize("moose-confidential")
    r = redeem("moose-confidential", cb, verifier, auth=("moose-confidential", CONF_SECRET), headers={"DPoP": dpop_proof("POST", token_url)})
    n2 = r.headers.get("DPoP-Nonce")
    seen("confidential client first proof", f"{r.status} {(r.json() or {}).get('error')} nonce-same-as-public={n2 == nonce}")
    r = redeem("moose-confidential", cb, verifier, auth=("moose-confidential", CONF_SECRET), headers={"DPoP": dpop_proof("POST", token_url, nonce=n2)})
    check("confidential client DPoP token", r.status == 200 and r.json().get("token_type") == "DPoP", repr(r))
    # client credentials with DPoP
    r = http("POST", token_url, form={"grant_type": "client_credentials", "scope": "api.read"},
             auth=("moose-service", "moose-service-secret"), headers={"DPoP": dpop_proof("POST", token_url)})
    seen("client_credentials with DPoP, no nonce", f"{r!r} DPoP-Nonce={r.headers.get('DPoP-Nonce')!r}")


def par():
    print("== PAR")
    cb, verifier, _, state = authorize("moose-public", par=())
    check("PAR (public client) then authorize", "code" in cb and cb.get("state") == state and cb.get("iss") == ISS, str(cb))
    r = redeem("moose-public", cb, verifier)
    check("PAR code redeemed", r.status == 200, repr(r))
    cb, verifier, _, _ = authorize("moose-confidential", par=("moose-confidential", CONF_SECRET))
    check("PAR (client_secret_basic) then authorize", "code" in cb, str(cb))
    r = http("POST", ISS + "/par", form={"response_type": "code", "client_id": "moose-public", "redirect_uri": REDIRECT,
                                         "scope": "openid", "nonce": "n", "code_challenge": pkce()[1], "code_challenge_method": "S256"})
    seen("PAR response", f"{r.status} {r.body.decode()}")
    uri = r.json()["request_uri"]
    url = ISS + "/auth?" + urllib.parse.urlencode({"client_id": "moose-public", "request_uri": uri})
    b1, _ = browse(url)
    b2 = http("GET", url + "&g_continue")
    seen("request_uri reused after a completed authorization", f"{b2.status} Location={b2.headers.get('Location')}")
    proof = dpop_proof("POST", ISS + "/par")
    r = http("POST", ISS + "/par", form={"response_type": "code", "client_id": "moose-public", "redirect_uri": REDIRECT,
                                         "scope": "openid", "nonce": "n", "code_challenge": pkce()[1], "code_challenge_method": "S256"},
             headers={"DPoP": proof})
    seen("PAR with a DPoP header (no nonce)", f"{r!r} DPoP-Nonce={r.headers.get('DPoP-Nonce')!r}")
    # PAR + DPoP: dpop_jkt in the pushed parameters, then the token request learns the nonce as usual
    cb, verifier, _, _ = authorize("moose-public", par=(), extra={"dpop_jkt": DPOP_KEY.thumbprint()})
    r = redeem("moose-public", cb, verifier, headers={"DPoP": dpop_proof("POST", ISS + "/token")})
    nonce = r.headers.get("DPoP-Nonce")
    r = redeem("moose-public", cb, verifier, headers={"DPoP": dpop_proof("POST", ISS + "/token", nonce=nonce)})
    check("PAR with dpop_jkt, then DPoP token (after use_dpop_nonce)", r.status == 200 and r.json().get("token_type") == "DPoP", repr(r))
    other = jwk.ECKey.generate_key("P-256")
    cb, verifier, _, _ = authorize("moose-public", par=(), extra={"dpop_jkt": DPOP_KEY.thumbprint()})
    r = redeem("moose-public", cb, verifier, headers={"DPoP": dpop_proof("POST", ISS + "/token", nonce=nonce, key=other)})
    seen("code bound by dpop_jkt, proof from another key", repr(r))
    # PAR with a DPoP header carrying the current nonce
    r = http("POST", ISS + "/par", form={"response_type": "code", "client_id": "moose-public", "redirect_uri": REDIRECT,
                                         "scope": "openid", "nonce": "n", "code_challenge": pkce()[1], "code_challenge_method": "S256"},
             headers={"DPoP": dpop_proof("POST", ISS + "/par", nonce=nonce)})
    seen("PAR with a DPoP header carrying the current nonce", f"{r!r} DPoP-Nonce={r.headers.get('DPoP-Nonce')!r}")
    print("== PAR required (/api/oidc-par)")
    cb, verifier, _, _ = authorize("moose-public", issuer=ISS_PAR)
    seen("plain authorization request at oidc-par", cb)
    check("plain request refused at oidc-par", "code" not in cb)
    cb, verifier, _, _ = authorize("moose-public", issuer=ISS_PAR, par=())
    check("PAR at oidc-par", "code" in cb and cb.get("iss") == ISS_PAR, str(cb))
    r = redeem("moose-public", cb, verifier, issuer=ISS_PAR)
    check("oidc-par token", r.status == 200, repr(r))


def registration():
    print("== dynamic client registration (RFC 7591)")
    body = {"client_name": "Moose registered", "application_type": "native", "redirect_uris": [REDIRECT],
            "token_endpoint_auth_method": "none", "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"], "scope": "openid profile"}
    variants = [("native, token_endpoint_auth_method none", body, False),
                ("native, none + client_confidential false", dict(body, client_confidential=False), True),
                ("native, no token_endpoint_auth_method", {k: v for k, v in body.items() if k != "token_endpoint_auth_method"}, True)]
    for label, b, expect_ok in variants:
        r = http("POST", ISS + "/register", body=json.dumps(b).encode(), headers={"Content-Type": "application/json"})
        seen(f"register ({label})", f"{r.status} keys={sorted(r.json() or {})}")
        if not check(f"registration ({label})", r.status in (200, 201), repr(r)):
            continue
        reg = r.json()
        cb, verifier, _, _ = authorize(reg["client_id"], scope="openid profile")
        r = redeem(reg["client_id"], cb, verifier)
        seen(f"code redeemed by the registered client ({label})", repr(r)[:120])
        check(f"registered client ({label}) {'works' if expect_ok else 'is stored as confidential: token refused'}",
              (r.status == 200) == expect_ok)
    body2 = dict(body, token_endpoint_auth_method="client_secret_basic", application_type="web")
    r = http("POST", ISS + "/register", body=json.dumps(body2).encode(), headers={"Content-Type": "application/json"})
    seen("register (confidential)", repr(r))
    body3 = dict(body, redirect_uris=["http://127.0.0.1/callback"])
    r = http("POST", ISS + "/register", body=json.dumps(body3).encode(), headers={"Content-Type": "application/json"})
    seen("register with port-less loopback redirect", repr(r))


def device():
    print("== device authorization")
    r = http("POST", ISS + "/device_authorization", form={"client_id": "moose-public", "scope": "openid profile offline_access"})
    d = r.json() or {}
    check("device_authorization", r.status == 200, repr(r))
    seen("device_authorization response", json.dumps(d))
    form = {"grant_type": "urn:ietf:params:oauth:grant-type:device_code", "device_code": d["device_code"], "client_id": "moose-public"}
    r = http("POST", ISS + "/token", form=form)
    seen("poll before approval", repr(r))
    r = http("POST", ISS + "/token", form=form)
    seen("immediate second poll", repr(r))
    p = subprocess.run([sys.executable, os.path.join(HERE, "browser.py"), "--device", d["verification_uri"], d["user_code"]],
                       capture_output=True, text=True, timeout=60)
    check("browser.py --device", p.returncode == 0 and p.stdout.strip() == "deviceComplete", p.stderr.strip())
    time.sleep(d.get("interval", 1))
    r = http("POST", ISS + "/token", form=form)
    check("device token", r.status == 200, repr(r))
    seen("device token response keys", sorted(r.json() or {}))
    time.sleep(d.get("interval", 1))
    r = http("POST", ISS + "/token", form=form)
    seen("device code reused", repr(r))
    r = http("POST", ISS + "/device_authorization", form={"client_id": "moose-public", "scope": "openid"})
    d = r.json()
    p = subprocess.run([sys.executable, os.path.join(HERE, "browser.py"), "--device", d["verification_uri_complete"]],
                       capture_output=True, text=True, timeout=60)
    check("browser.py --device VERIFICATION_URI_COMPLETE", p.returncode == 0, p.stderr.strip())


def main():
    listeners = [start_listener(53682), start_listener(53683)]
    discovery()
    tok = code_flow()
    bad_requests()
    refresh(tok)
    signing_algs()
    confidential()
    client_credentials()
    resource()
    dpop()
    par()
    registration()
    device()
    for s in listeners:
        s.shutdown()
    print(f"{len(FAILED)} failed: {FAILED}" if FAILED else "all checks passed")
    sys.exit(1 if FAILED else 0)


if __name__ == "__main__":
    main()
