#!/usr/bin/env python3
"""End-to-end check of a running tools/authgent/start pair (standard library + the openssl command).

    python3 tools/authgent/verify.py [--verbose]

Sends every request recorded in README.md (successes and refusals) and checks status, error code and the
shape of each answer; exits 1 on the first surprise. --verbose prints each request and answer, with JWTs
shortened and their claims decoded. Ports follow MOOSE_AUTHGENT_PORT / MOOSE_WORKLOAD_PORT.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import tempfile
import urllib.error
import urllib.parse
import urllib.request

A = "http://127.0.0.1:%s" % os.environ.get("MOOSE_AUTHGENT_PORT", "8782")
W = "http://127.0.0.1:%s" % os.environ.get("MOOSE_WORKLOAD_PORT", "8781")
TOKEN = A + "/token"
EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"
ID_TOKEN = "urn:ietf:params:oauth:token-type:id_token"
ACCESS_TOKEN = "urn:ietf:params:oauth:token-type:access_token"
JWT_TYPE = "urn:ietf:params:oauth:token-type:jwt"
VERBOSE = "--verbose" in sys.argv
passed = 0


def b64d(s: str) -> bytes:
    return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))


def claims(jwt: str) -> dict:
    return json.loads(b64d(jwt.split(".")[1]))


def short(value):
    if isinstance(value, str) and value.count(".") == 2 and value.startswith("eyJ"):
        return value[:12] + "…"
    if isinstance(value, dict):
        return {k: short(v) for k, v in value.items()}
    return value


def get(url: str, headers=None) -> tuple[int, bytes]:
    req = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def mint(**query) -> str:
    status, body = get(W + "/mint?" + urllib.parse.urlencode(query))
    assert status == 200, body
    return body.decode()


def post(title: str, form: dict, expect: int, error: str | None = None, basic: tuple | None = None) -> dict:
    global passed
    headers = {"Content-Type": "application/x-www-form-urlencoded"}
    if basic:
        headers["Authorization"] = "Basic " + base64.b64encode(("%s:%s" % basic).encode()).decode()
    req = urllib.request.Request(TOKEN, data=urllib.parse.urlencode(form).encode(), headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            status, body = r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        status, body = e.code, json.loads(e.read())
    if VERBOSE:
        print("### " + title)
        print("POST /token " + json.dumps(short(form)) + (" (Basic %s:%s)" % basic if basic else ""))
        print("-> %d %s" % (status, json.dumps(short(body))))
        if status == 200:
            print("   access_token claims: " + json.dumps(claims(body["access_token"])))
        print()
    ok = status == expect and (error is None or body.get("error") == error)
    if not ok:
        sys.exit("FAIL %s: expected %d %s, got %d %s" % (title, expect, error, status, body))
    passed += 1
    return body


def check_success_shape(body: dict, issued: str | None, token_type="Bearer") -> None:
    assert set(body) == {"access_token", "token_type", "expires_in", "scope", "refresh_token",
                         "issued_token_type"}, body
    assert body["token_type"] == token_type and isinstance(body["expires_in"], int), body
    assert body["refresh_token"] is None and body["issued_token_type"] == issued, body


def es256_verifies(jwt: str, jwks: dict) -> bool:
    """Checks an ES256 JWT against a JWKS with openssl (JWK -> SPKI PEM, r||s -> DER)."""
    header = json.loads(b64d(jwt.split(".")[0]))
    key = next(k for k in jwks["keys"] if k["kid"] == header["kid"])
    spki = bytes.fromhex("3059301306072a8648ce3d020106082a8648ce3d030107034200") + b"\x04" + b64d(key["x"]) + b64d(key["y"])
    pem = "-----BEGIN PUBLIC KEY-----\n%s\n-----END PUBLIC KEY-----\n" % base64.b64encode(spki).decode()
    sig = b64d(jwt.split(".")[2])

    def der_int(b: bytes) -> bytes:
        b = b.lstrip(b"\x00") or b"\x00"
        if b[0] & 0x80:
            b = b"\x00" + b
        return b"\x02" + bytes([len(b)]) + b
    seq = der_int(sig[:32]) + der_int(sig[32:])
    der = b"\x30" + bytes([len(seq)]) + seq
    with tempfile.TemporaryDirectory() as d:
        open(os.path.join(d, "k.pem"), "w").write(pem)
        open(os.path.join(d, "s.der"), "wb").write(der)
        r = subprocess.run(["openssl", "dgst", "-sha256", "-verify", os.path.join(d, "k.pem"), "-signature",
                            os.path.join(d, "s.der")], input=jwt.rsplit(".", 1)[0].encode(), capture_output=True)
    return r.returncode == 0


def main() -> None:
    # discovery
    for path in ("/.well-known/openid-configuration", "/.well-known/oauth-authorization-server"):
        status, body = get(A + path)
        meta = json.loads(body)
        assert status == 200 and meta["issuer"] == A and meta["token_endpoint"] == TOKEN, meta
        assert EXCHANGE in meta["grant_types_supported"] and JWT_BEARER in meta["grant_types_supported"], meta
    jwks = json.loads(get(A + "/.well-known/jwks.json")[1])

    # the GitHub-shaped request-token endpoint of the stand-in issuer
    status, body = get(W + "/token?api-version=2.0&audience=" + urllib.parse.quote(A, safe=""),
                       {"Authorization": "Bearer " + os.environ.get("MOOSE_WORKLOAD_REQUEST_TOKEN", "ci-request-token")})
    assert status == 200, body
    ci_token = json.loads(body)["value"]
    assert get(W + "/token", {"Authorization": "Bearer wrong"})[0] == 403
    assert get(W + "/token")[0] == 401

    base = {"grant_type": EXCHANGE, "subject_token_type": ID_TOKEN, "client_id": "moose-ci"}

    # (a) RFC 8693 token exchange
    body = post("exchange: CI id_token for an access token (audience)",
                {**base, "subject_token": ci_token, "audience": "https://api.example.test"}, 200)
    check_success_shape(body, ACCESS_TOKEN)
    c = claims(body["access_token"])
    assert c["iss"] == A and c["aud"] == "https://api.example.test" and c["act"] == {"sub": "client:moose-ci"}, c
    assert c["sub"] == "user:" + claims(ci_token)["sub"] and es256_verifies(body["access_token"], jwks), c
    exchanged = body["access_token"]
    body = post("exchange: resource instead of audience, with scope",
                {**base, "subject_token": mint(aud=A), "resource": "https://api.example.test/", "scope": "read write"}, 200)
    check_success_shape(body, ACCESS_TOKEN)
    assert body["scope"] == "read write" and claims(body["access_token"])["aud"] == "https://api.example.test/"
    body = post("exchange: confidential client, client_secret_basic",
                {k: v for k, v in base.items() if k != "client_id"} | {"subject_token": mint(aud=A), "audience": "x"},
                200, basic=("moose-ci-confidential", "moose-ci-secret"))
    check_success_shape(body, ACCESS_TOKEN)
    body = post("exchange: confidential client, client_secret_post",
                {**base, "client_id": "moose-ci-confidential", "client_secret": "moose-ci-secret",
                 "subject_token": mint(aud=A), "audience": "x"}, 200)
    body = post("exchange: an authgent access token again (subject_token_type access_token)",
                {**base, "subject_token_type": ACCESS_TOKEN, "subject_token": exchanged, "audience": "https://next.example.test"}, 200)
    check_success_shape(body, ACCESS_TOKEN)
    assert claims(body["access_token"])["act"] == {"sub": "client:moose-ci", "act": {"sub": "client:moose-ci"}}
    body = post("exchange: requested_token_type jwt (identity-chaining grant)",
                {**base, "subject_token": mint(aud=A), "audience": "https://as-b.example.test",
                 "requested_token_type": JWT_TYPE}, 200)
    check_success_shape(body, JWT_TYPE, token_type="N_A")
    assert isinstance(body["scope"], type(None)), body
    post("exchange: actor_token is ignored",
         {**base, "subject_token": mint(aud=A), "audience": "x", "actor_token": mint(aud=A),
          "actor_token_type": ID_TOKEN}, 200)

    # (c) exchange refusals
    post("exchange refused: expired subject token", {**base, "subject_token": mint(aud=A, lifetime=-30), "audience": "x"},
         400, "invalid_grant")
    post("exchange refused: wrong audience", {**base, "subject_token": mint(aud="https://elsewhere.test"), "audience": "x"},
         400, "invalid_grant")
    post("exchange refused: untrusted issuer", {**base, "subject_token": mint(aud=A, iss="http://127.0.0.1:9"), "audience": "x"},
         400, "invalid_grant")
    post("exchange refused: trusted iss, signed by another key", {**base, "subject_token": mint(aud=A, rogue=1), "audience": "x"},
         400, "invalid_grant")
    post("exchange refused: subject_token_type jwt", {**base, "subject_token_type": JWT_TYPE, "subject_token": mint(aud=A),
                                                     "audience": "x"}, 400, "invalid_request")
    post("exchange refused: neither audience nor resource", {**base, "subject_token": mint(aud=A)}, 400, "invalid_request")
    post("exchange refused: no subject_token", {**base, "audience": "x"}, 400, "invalid_request")
    post("exchange refused: no client_id", {k: v for k, v in base.items() if k != "client_id"} |
         {"subject_token": mint(aud=A), "audience": "x"}, 401, "invalid_client")
    post("exchange refused: unknown client_id", {**base, "client_id": "nobody", "subject_token": mint(aud=A), "audience": "x"},
         401, "invalid_client")
    post("exchange refused: wrong client secret", {**base, "client_id": "moose-ci-confidential", "client_secret": "nope",
                                                  "subject_token": mint(aud=A), "audience": "x"}, 401, "invalid_client")

    # (b) RFC 7523 §2.1 JWT bearer grant
    jb = {"grant_type": JWT_BEARER, "client_id": "moose-ci"}
    assertion = mint(aud=A)
    body = post("jwt-bearer: assertion aud = authgent issuer", {**jb, "assertion": assertion}, 200)
    check_success_shape(body, None)
    c = claims(body["access_token"])
    assert c["sub"] == claims(assertion)["sub"] and c["aud"] == A and c["chained_from"] == W, c
    assert es256_verifies(body["access_token"], jwks)
    body = post("jwt-bearer: assertion aud = token endpoint, with scope and resource",
                {**jb, "assertion": mint(aud=TOKEN), "scope": "deploy", "resource": "https://api.example.test"}, 200)
    assert body["scope"] == "deploy" and claims(body["access_token"])["aud"] == "https://api.example.test", body

    # (c) jwt-bearer refusals
    post("jwt-bearer refused: replayed jti (same assertion again)", {**jb, "assertion": assertion}, 400, "invalid_grant")
    fixed = os.urandom(8).hex()
    post("jwt-bearer: first assertion with a chosen jti", {**jb, "assertion": mint(aud=A, jti=fixed)}, 200)
    post("jwt-bearer refused: another assertion, same jti", {**jb, "assertion": mint(aud=A, jti=fixed)}, 400, "invalid_grant")
    post("jwt-bearer refused: expired", {**jb, "assertion": mint(aud=A, lifetime=-30)}, 400, "invalid_grant")
    post("jwt-bearer refused: wrong audience", {**jb, "assertion": mint(aud="https://elsewhere.test")}, 400, "invalid_grant")
    post("jwt-bearer refused: untrusted issuer", {**jb, "assertion": mint(aud=A, iss="http://127.0.0.1:9")}, 400, "invalid_grant")
    post("jwt-bearer refused: trusted iss, signed by another key", {**jb, "assertion": mint(aud=A, rogue=1)}, 400, "invalid_grant")
    post("jwt-bearer refused: no assertion", jb, 400, "invalid_request")
    post("jwt-bearer refused: no client_id", {"grant_type": JWT_BEARER, "assertion": mint(aud=A)}, 401, "invalid_client")

    print("verify: %d passed, 0 failed" % passed)


if __name__ == "__main__":
    main()
