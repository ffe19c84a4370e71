#!/usr/bin/env python3
"""End-to-end check of the private_key_jwt client `moose-pkjwt` (RFC 7523 §2.2 client authentication,
client_credentials grant) against the Glewlwyd test IdP started by tools/glewlwyd/start.

    tools/glewlwyd/verify_pkjwt.py [-v] [ISSUER]     (default http://127.0.0.1:$MOOSE_GLEWLWYD_PORT/api/oidc)

Standard library only; signatures are made (and the access token's checked) with the `openssl` CLI.
Key: Fixtures/glewlwyd/pkjwt-es256.pem (ES256, kid moose-pkjwt-1). Prints the exact request of the
successful exchange, the response, and one line per negative case; exits 1 when any status differs from
what is expected.
"""
import base64
import json
import os
import secrets
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.normpath(os.path.join(HERE, "..", "..", "Fixtures", "glewlwyd"))
KEY = os.path.join(FIXTURES, "pkjwt-es256.pem")
KID = "moose-pkjwt-1"
CLIENT_ID = "moose-pkjwt"
SCOPE = "api.read"
RESOURCE = "https://api.moose.test"
ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"

VERBOSE = "-v" in sys.argv
ARGS = [a for a in sys.argv[1:] if not a.startswith("-")]
ISSUER = ARGS[0] if ARGS else f"http://127.0.0.1:{os.environ.get('MOOSE_GLEWLWYD_PORT', '4594')}/api/oidc"
FAILED = []


# --------------------------------------------------------------------------- helpers

def b64u(b):
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode()


def b64u_decode(s):
    return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))


def http(method, url, form=None):
    body = urllib.parse.urlencode(form).encode() if form is not None else None
    req = urllib.request.Request(url, data=body, method=method)
    if body is not None:
        req.add_header("Content-Type", "application/x-www-form-urlencoded")
    try:
        with urllib.request.urlopen(req, timeout=15) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


def der_ecdsa_to_raw(der, size=32):
    """ECDSA-Sig-Value ::= SEQUENCE { r INTEGER, s INTEGER } (DER, as openssl writes it) -> r||s (JWS)."""
    def length(buf, i):
        n = buf[i]
        if n < 0x80:
            return n, i + 1
        k = n & 0x7F
        return int.from_bytes(buf[i + 1:i + 1 + k], "big"), i + 1 + k

    assert der[0] == 0x30, "not a DER SEQUENCE"
    _, i = length(der, 1)
    out = b""
    for _ in range(2):
        assert der[i] == 0x02, "not a DER INTEGER"
        n, i = length(der, i + 1)
        v = der[i:i + n].lstrip(b"\0")
        assert len(v) <= size
        out += v.rjust(size, b"\0")
        i += n
    return out


def es256_sign(data, key=KEY):
    der = subprocess.run(["openssl", "dgst", "-sha256", "-sign", key], input=data,
                         capture_output=True, check=True).stdout
    return der_ecdsa_to_raw(der), der


def assertion(aud, *, iss=CLIENT_ID, sub=CLIENT_ID, exp_in=60, key=KEY, der_signature=False, header=None, **extra):
    now = int(time.time())
    h = header or {"alg": "ES256", "kid": KID, "typ": "JWT"}
    claims = {"iss": iss, "sub": sub, "aud": aud, "jti": secrets.token_urlsafe(16), "iat": now, "exp": now + exp_in}
    claims.update(extra)
    signing_input = b64u(json.dumps(h, separators=(",", ":")).encode()) + "." + \
        b64u(json.dumps(claims, separators=(",", ":")).encode())
    raw, der = es256_sign(signing_input.encode(), key)
    return signing_input + "." + b64u(der if der_signature else raw), h, claims


def token_request(token_endpoint, client_assertion, *, client_id=CLIENT_ID, scope=SCOPE, **extra):
    form = {"grant_type": "client_credentials"}
    if client_id is not None:
        form["client_id"] = client_id
    form.update({"client_assertion_type": ASSERTION_TYPE, "client_assertion": client_assertion})
    if scope is not None:
        form["scope"] = scope
    form.update(extra)
    return form, http("POST", token_endpoint, form)


def show(status, headers, body):
    ct = headers.get("Content-Type")
    return f"{status} Content-Type={ct!r} body={body.decode(errors='replace')[:300]!r}"


def check(name, ok, detail=""):
    print(("ok   " if ok else "FAIL ") + name + (f"  [{detail}]" if detail else ""))
    if not ok:
        FAILED.append(name)
    return ok


# -- verifying Glewlwyd's RS256 access token with openssl: RSA JWK -> SubjectPublicKeyInfo PEM

def der_len(n):
    if n < 0x80:
        return bytes([n])
    b = n.to_bytes((n.bit_length() + 7) // 8, "big")
    return bytes([0x80 | len(b)]) + b


def der(tag, content):
    return bytes([tag]) + der_len(len(content)) + content


def der_int(b):
    b = b.lstrip(b"\0") or b"\0"
    return der(0x02, (b"\0" + b) if b[0] & 0x80 else b)


def rsa_jwk_to_pem(jwk):
    rsa_key = der(0x30, der_int(b64u_decode(jwk["n"])) + der_int(b64u_decode(jwk["e"])))
    alg_id = der(0x30, der(0x06, bytes.fromhex("2a864886f70d010101")) + b"\x05\x00")  # rsaEncryption, NULL
    spki = der(0x30, alg_id + der(0x03, b"\0" + rsa_key))
    return "-----BEGIN PUBLIC KEY-----\n" + base64.encodebytes(spki).decode() + "-----END PUBLIC KEY-----\n"


def verify_rs256(token, jwks):
    h64, p64, s64 = token.split(".")
    header = json.loads(b64u_decode(h64))
    jwk = next(k for k in jwks["keys"] if k.get("kid") == header.get("kid"))
    if header.get("alg") != "RS256" or jwk.get("kty") != "RSA":
        return None
    with tempfile.TemporaryDirectory() as d:
        pem, sig = os.path.join(d, "pub.pem"), os.path.join(d, "sig")
        open(pem, "w").write(rsa_jwk_to_pem(jwk))
        open(sig, "wb").write(b64u_decode(s64))
        p = subprocess.run(["openssl", "dgst", "-sha256", "-verify", pem, "-signature", sig],
                           input=f"{h64}.{p64}".encode(), capture_output=True)
    return p.returncode == 0


# --------------------------------------------------------------------------- checks

def main():
    status, _, body = http("GET", ISSUER + "/.well-known/openid-configuration")
    if status != 200:
        sys.exit(f"no discovery document at {ISSUER} ({status}); start the IdP with tools/glewlwyd/start")
    disco = json.loads(body)
    token_endpoint = disco["token_endpoint"]
    print("== discovery", ISSUER)
    print("     token_endpoint:", token_endpoint)
    print("     token_endpoint_auth_methods_supported:", json.dumps(disco.get("token_endpoint_auth_methods_supported")))
    print("     token_endpoint_auth_signing_alg_values_supported:",
          json.dumps(disco.get("token_endpoint_auth_signing_alg_values_supported")))
    check("private_key_jwt advertised", "private_key_jwt" in disco.get("token_endpoint_auth_methods_supported", []))
    check("ES256 advertised for client assertions",
          "ES256" in disco.get("token_endpoint_auth_signing_alg_values_supported", []))

    print("== client_credentials with a private_key_jwt client assertion")
    jwt, header, claims = assertion(token_endpoint)
    form, (status, headers, body) = token_request(token_endpoint, jwt)
    print(f"     request: POST {token_endpoint}")
    print("              Content-Type: application/x-www-form-urlencoded")
    print("              " + urllib.parse.urlencode(form))
    print("     assertion header:", json.dumps(header))
    print("     assertion claims:", json.dumps(claims))
    print("     response:", status, "Content-Type:", headers.get("Content-Type"), "Cache-Control:", headers.get("Cache-Control"))
    print("              " + body.decode(errors="replace"))
    if check("token 200", status == 200, show(status, headers, body)):
        tok = json.loads(body)
        check("token_type bearer, scope api.read, no refresh/id token",
              tok.get("token_type", "").lower() == "bearer" and tok.get("scope") == SCOPE
              and "refresh_token" not in tok and "id_token" not in tok, json.dumps(sorted(tok)))
        at = tok["access_token"]
        ah = json.loads(b64u_decode(at.split(".")[0]))
        ac = json.loads(b64u_decode(at.split(".")[1]))
        print("     access token header:", json.dumps(ah))
        print("     access token claims:", json.dumps(ac, sort_keys=True))
        jwks = json.loads(http("GET", disco["jwks_uri"])[2])
        check("access token signature valid (issuer JWKS, openssl)", verify_rs256(at, jwks) is True)
        check("access token client_id/sub = moose-pkjwt, iss = issuer",
              ac.get("client_id") == CLIENT_ID and ac.get("sub") == CLIENT_ID and ac.get("iss") == ISSUER)

    print("== the same assertion again (replayed jti)")
    _, r = token_request(token_endpoint, jwt)
    print("    ", show(*r))
    check("replay refused with 403", r[0] == 403)

    cases = [
        # name, assertion kwargs, request kwargs, expected status
        ("aud = issuer (not the token endpoint)", {"aud": ISSUER}, {}, 403),
        ("aud = token endpoint with a trailing slash", {"aud": token_endpoint + "/"}, {}, 403),
        ("aud = token endpoint via localhost", {"aud": token_endpoint.replace("127.0.0.1", "localhost")}, {}, 403),
        ("aud = [token endpoint] (array)", {"aud": [token_endpoint]}, {}, None),
        ("aud = [token endpoint, other] (array)", {"aud": [token_endpoint, "https://other.example"]}, {}, None),
        ("no client_id in the form", {}, {"client_id": None}, 200),
        ("client_id in the form names another client (moose-service)", {}, {"client_id": "moose-service"}, None),
        ("expired assertion (exp = now - 5)", {"exp_in": -5}, {}, 403),
        ("exp more than 3600 s ahead (request-maximum-exp)", {"exp_in": 3700}, {}, 403),
        ("sub differs from iss", {"sub": "someone-else"}, {}, 403),
        ("DER signature instead of raw r||s", {"der_signature": True}, {}, 403),
        ("signed by another P-256 key", {"key": "OTHER"}, {}, 403),
        ("unknown kid", {"header": {"alg": "ES256", "kid": "nope", "typ": "JWT"}}, {}, 403),
        ("no typ header", {"header": {"alg": "ES256", "kid": KID}}, {}, None),
        ("no scope", {}, {"scope": None}, None),
        ("scope the client does not have (openid)", {}, {"scope": "openid"}, None),
        ("scope api.read + resource https://api.moose.test", {}, {"resource": RESOURCE}, 200),
        ("no jti", {"jti": None}, {}, 403),
    ]
    with tempfile.TemporaryDirectory() as d:
        other = os.path.join(d, "other.pem")
        subprocess.run(["openssl", "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", other],
                       check=True, capture_output=True)
        for name, akw, rkw, expected in cases:
            akw = dict(akw)
            if akw.get("key") == "OTHER":
                akw["key"] = other
            aud = akw.pop("aud", token_endpoint)
            drop_jti = "jti" in akw and akw.pop("jti") is None
            jwt, _, claims = assertion(aud, **akw)
            if drop_jti:  # rebuild without jti
                h = akw.get("header") or {"alg": "ES256", "kid": KID, "typ": "JWT"}
                del claims["jti"]
                si = b64u(json.dumps(h, separators=(",", ":")).encode()) + "." + \
                    b64u(json.dumps(claims, separators=(",", ":")).encode())
                jwt = si + "." + b64u(es256_sign(si.encode())[0])
            _, r = token_request(token_endpoint, jwt, **rkw)
            line = show(*r)
            if r[0] == 200 and VERBOSE:
                line += " claims=" + json.dumps(json.loads(b64u_decode(json.loads(r[2])["access_token"].split(".")[1])))
            elif r[0] == 200:
                tok = json.loads(r[2])
                c = json.loads(b64u_decode(tok["access_token"].split(".")[1]))
                line = f"200 scope={tok.get('scope')!r} token client_id={c.get('client_id')!r} aud={c.get('aud')!r}"
            if expected is None:
                print(f"seen {name}: {line}")
            else:
                check(f"{name} -> {expected}", r[0] == expected, line)

    print("== when a jti is spent")
    jti = secrets.token_urlsafe(16)
    _, r = token_request(token_endpoint, assertion(ISSUER, jti=jti)[0])
    _, r2 = token_request(token_endpoint, assertion(token_endpoint, jti=jti)[0])
    check("a jti first sent with a wrong aud (403) is still usable (200)", (r[0], r2[0]) == (403, 200), f"{r[0]}, {r2[0]}")
    jwt, _, _ = assertion(token_endpoint)
    _, r = token_request(token_endpoint, jwt, scope="openid")
    _, r2 = token_request(token_endpoint, jwt)
    check("an assertion whose grant failed (scope_invalid, 400) is spent (403)", (r[0], r2[0]) == (400, 403), f"{r[0]}, {r2[0]}")

    # The assertion's aud is per plugin instance: /api/oidc-par has its own token endpoint (client is shared).
    par_issuer = ISSUER.rsplit("/", 1)[0] + "/oidc-par"
    s, _, b = http("GET", par_issuer + "/.well-known/openid-configuration")
    if s == 200:
        par_token = json.loads(b)["token_endpoint"]
        jwt, _, _ = assertion(token_endpoint)
        _, r = token_request(par_token, jwt)
        check("assertion for /api/oidc/token sent to /api/oidc-par/token -> 403", r[0] == 403, show(*r))
        jwt, _, _ = assertion(par_token)
        _, r = token_request(par_token, jwt)
        check("assertion with aud /api/oidc-par/token at /api/oidc-par/token -> 200", r[0] == 200, show(*r)[:80])

    print("FAILED: " + ", ".join(FAILED) if FAILED else "all checks passed")
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
