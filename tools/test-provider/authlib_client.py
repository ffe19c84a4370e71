#!/usr/bin/env python3
"""Authlib's OAuth 2 client (its requests `OAuth2Session`) against moose-test-provider, through the protocol
only. Run by tools/test-provider/check with the venv of tools/test-provider/setup:

    python authlib_client.py make-keys DIR      # writes the private_key_jwt clients' keys into DIR
    python authlib_client.py ISSUER KEYDIR      # the checks; one PASS/FAIL line each

The provider must know the clients of CLIENTS below (check starts it so). Every check is an assertion that
can fail: a FAIL line says what was expected and what came. Exits 1 when any check failed.
"""
import base64
import contextlib
import json
import os
import secrets
import sys
import time
import urllib.parse

import requests
from authlib.integrations.requests_client import OAuth2Session, OAuthError
from authlib.oauth2.rfc7523 import PrivateKeyJWT
from authlib.oidc.core import CodeIDToken
from authlib.oidc.discovery import OpenIDProviderMetadata
from joserfc import jwt
from joserfc.jwk import ECKey, KeySet, RSAKey
from joserfc.jws import JWSRegistry

TIMEOUT = 10  # seconds, every request
REDIRECT_URI = "http://127.0.0.1:53999/callback"  # any port matches the registered http://127.0.0.1/callback
# The clients check registers with moose-test-provider (--client …): ids, secrets and key files.
PUBLIC = "test-app"
CONFIDENTIAL, CONFIDENTIAL_SECRET = "test-confidential", "test-secret"
SERVICE, SERVICE_SECRET = "test-service", "service-secret"
JWT_ES256 = "jwt-es256"  # private_key_jwt, its public key given as PEM (es256.pub.pem)
JWT_RS256 = "jwt-rs256"  # private_key_jwt, its public key given as a JWK (rs256.pub.jwk)
USER = "alice"

passed = failed = 0


@contextlib.contextmanager
def check(what):
    """One check: PASS when the block ends normally, FAIL with the reason when it raises."""
    global passed, failed
    try:
        yield
    except Exception as error:  # an assertion, an OAuth error, a transport error: all are failures
        failed += 1
        reason = str(error) or type(error).__name__
        print(f"FAIL {what}: {reason}", flush=True)
    else:
        passed += 1
        print(f"PASS {what}", flush=True)


def expect(condition, message):
    if not condition:
        raise AssertionError(message)


def oauth_error(call):
    """The OAuth error code `call` raised (it must raise one)."""
    try:
        call()
    except OAuthError as error:
        return error.error
    raise AssertionError("no OAuth error: the request succeeded")


def make_keys(directory):
    """An ES256 key (the public part as PEM) and an RS256 key (the public part as a JWK with alg) for the
    two private_key_jwt clients, and an unregistered EC key for the negative check."""
    os.makedirs(directory, exist_ok=True)
    es = ECKey.generate_key("P-256")
    rs = RSAKey.generate_key(2048, parameters={"alg": "RS256", "kid": "rs256-client"})
    stranger = ECKey.generate_key("P-256")
    files = {
        "es256.key.pem": es.as_pem(private=True),
        "es256.pub.pem": es.as_pem(private=False),
        "rs256.key.jwk": json.dumps(rs.as_dict(private=True)).encode(),
        "rs256.pub.jwk": json.dumps(rs.as_dict(private=False)).encode(),
        "stranger.key.pem": stranger.as_pem(private=True),
    }
    for name, data in files.items():
        with open(os.path.join(directory, name), "wb") as handle:
            handle.write(data)


def query_of(url):
    return {k: v[0] for k, v in urllib.parse.parse_qs(urllib.parse.urlsplit(url).query).items()}


class Recorder:
    """Keeps the last request a session sent (a requests response hook), to check how Authlib authenticated."""

    def __init__(self, session):
        self.last = None
        session.hooks["response"].append(self.keep)

    def keep(self, response, *args, **kwargs):
        self.last = response.request

    def form(self):
        body = self.last.body or ""
        return dict(urllib.parse.parse_qsl(body if isinstance(body, str) else body.decode()))


def main(issuer, keydir):
    os.environ["AUTHLIB_INSECURE_TRANSPORT"] = "1"  # http://127.0.0.1: Authlib's metadata checks want HTTPS
    browser = requests.Session()  # the user's browser: GETs /authorize and reads the redirect, follows nothing
    metadata = {}

    with check("discovery: /.well-known/openid-configuration validates as Authlib's OpenIDProviderMetadata"):
        response = browser.get(issuer + "/.well-known/openid-configuration", timeout=TIMEOUT)
        expect(response.status_code == 200, f"status {response.status_code}")
        metadata = response.json()
        OpenIDProviderMetadata(metadata).validate()
        expect(metadata["issuer"] == issuer, f"issuer {metadata['issuer']!r} != {issuer!r}")
        expect("S256" in metadata.get("code_challenge_methods_supported", []), "S256 not offered")
        for method in ("client_secret_basic", "client_secret_post", "private_key_jwt"):
            expect(method in metadata.get("token_endpoint_auth_methods_supported", []), f"{method} not offered")
    if not metadata:
        return
    token_endpoint = metadata["token_endpoint"]
    jwks = {}
    with check("jwks: the provider's JWKS imports as a joserfc KeySet"):
        response = browser.get(metadata["jwks_uri"], timeout=TIMEOUT)
        expect(response.status_code == 200, f"status {response.status_code}")
        jwks = response.json()
        expect(len(KeySet.import_key_set(jwks).keys) >= 1, "no keys")
    id_token_algorithms = metadata.get("id_token_signing_alg_values_supported")

    def authorize(session, **extra):
        """The authorization request as Authlib builds it, answered at once for alice: (query, state, verifier)."""
        verifier = secrets.token_urlsafe(48)
        url, state = session.create_authorization_url(metadata["authorization_endpoint"], code_verifier=verifier,
                                                      **extra)
        asked = query_of(url)
        expect(asked.get("code_challenge_method") == "S256",
               f"Authlib sent code_challenge_method {asked.get('code_challenge_method')!r}")
        response = browser.get(url, allow_redirects=False, timeout=TIMEOUT)
        expect(response.status_code == 302, f"/authorize answered {response.status_code}: {response.text[:200]}")
        location = response.headers["Location"]
        expect(location.startswith(REDIRECT_URI + "?"), f"redirected to {location}")
        return location, query_of(location), state, verifier

    def verify_id_token(id_token, client_id, nonce, access_token):
        """Authlib's own ID token validation (as its OpenIDMixin.parse_id_token does it): the signature against
        the provider's JWKS with joserfc, then CodeIDToken's claims: iss, aud, exp, iat, nonce, azp, at_hash."""
        decoded = jwt.decode(id_token, KeySet.import_key_set(jwks),
                             registry=JWSRegistry(algorithms=id_token_algorithms))
        options = {"iss": {"essential": True, "values": [issuer]}, "aud": {"essential": True, "values": [client_id]}}
        claims = CodeIDToken(decoded.claims, decoded.header, options,
                             {"nonce": nonce, "client_id": client_id, "access_token": access_token})
        claims.validate(leeway=5)
        return claims

    # --- authorization code + PKCE (public client) ------------------------------------------------------
    public = OAuth2Session(PUBLIC, redirect_uri=REDIRECT_URI, scope="openid profile email offline_access",
                           code_challenge_method="S256", token_endpoint_auth_method="none",
                           default_timeout=TIMEOUT)
    public.metadata["token_endpoint"] = token_endpoint
    nonce = secrets.token_urlsafe(16)
    token = {}
    with check("authorize: 302 at once to the redirect URI with code, state and iss (RFC 9207) = the issuer"):
        location, answer, state, verifier = authorize(public, nonce=nonce)
        expect(answer.get("code"), f"no code in {location}")
        expect(answer.get("state") == state, f"state {answer.get('state')!r} != {state!r}")
        expect(answer.get("iss") == issuer, f"iss {answer.get('iss')!r} != {issuer!r}")
    with check("token: the code with its PKCE verifier (Authlib checks state) gives access, refresh and ID tokens"):
        recorder = Recorder(public)
        token = public.fetch_token(token_endpoint, authorization_response=location, code_verifier=verifier,
                                   state=state)
        sent = recorder.form()
        expect(sent.get("code_verifier") == verifier and sent.get("client_id") == PUBLIC, f"sent {sorted(sent)}")
        expect("Authorization" not in recorder.last.headers, "a public client sent an Authorization header")
        expect(token.get("token_type", "").lower() == "bearer", f"token_type {token.get('token_type')!r}")
        for name in ("access_token", "refresh_token", "id_token"):
            expect(token.get(name), f"no {name} in {sorted(token)}")
        expect(token.get("expires_in", 0) > 0, f"expires_in {token.get('expires_in')!r}")
    # --- the ID token, verified by Authlib + joserfc against the JWKS ----------------------------------
    with check("id_token: signature (JWKS), iss, aud, exp, iat, azp, nonce and at_hash verify; sub is alice"):
        claims = verify_id_token(token["id_token"], PUBLIC, nonce, token["access_token"])
        expect(claims["sub"] == USER, f"sub {claims['sub']!r}")
        expect(claims.get("nonce") == nonce and claims.get("at_hash"), "nonce or at_hash missing")
        expect(claims.get("email") == "alice@example.com", f"email {claims.get('email')!r}")
    with check("id_token: the same token is refused for another nonce (the nonce check is live)"):
        try:
            verify_id_token(token["id_token"], PUBLIC, nonce + "x", token["access_token"])
        except Exception as error:
            expect("nonce" in str(error), f"refused for another reason: {error}")
        else:
            raise AssertionError("accepted")
    with check("id_token: the same token is refused for another access token (the at_hash check is live)"):
        try:
            verify_id_token(token["id_token"], PUBLIC, nonce, token["access_token"] + "x")
        except Exception as error:
            expect("at_hash" in str(error), f"refused for another reason: {error}")
        else:
            raise AssertionError("accepted")

    # --- UserInfo --------------------------------------------------------------------------------------
    with check("userinfo: the access token (Authlib's bearer auth) gets alice's claims, sub = the ID token's"):
        response = public.get(metadata["userinfo_endpoint"])
        expect(response.status_code == 200, f"status {response.status_code}")
        info = response.json()
        expect(info.get("sub") == USER and info.get("name") == "Alice Liddell", f"claims {info}")
        expect(response.request.headers.get("Authorization") == "Bearer " + token["access_token"], "no bearer header")
    with check("userinfo: no token or a bogus one is 401 with a Bearer challenge"):
        bare = browser.get(metadata["userinfo_endpoint"], timeout=TIMEOUT)
        bogus = browser.get(metadata["userinfo_endpoint"], headers={"Authorization": "Bearer bogus"}, timeout=TIMEOUT)
        for response in (bare, bogus):
            expect(response.status_code == 401, f"status {response.status_code}")
            expect(response.headers.get("WWW-Authenticate", "").startswith("Bearer"),
                   f"WWW-Authenticate {response.headers.get('WWW-Authenticate')!r}")

    # --- refresh: rotation and reuse detection -------------------------------------------------------
    old = dict(token)
    new = {}
    with check("refresh: a new access token and a rotated refresh token; the new access token works"):
        new = dict(public.refresh_token(token_endpoint, refresh_token=old["refresh_token"]))
        expect(new["access_token"] != old["access_token"], "same access token")
        expect(new.get("refresh_token") and new["refresh_token"] != old["refresh_token"],
               "the refresh token did not rotate")
        response = public.get(metadata["userinfo_endpoint"])
        expect(response.status_code == 200, f"userinfo with the new access token: {response.status_code}")
    with check("refresh: the new ID token verifies (at_hash of the new access token) with the same sub and auth_time"):
        expect(new.get("id_token"), f"no id_token in {sorted(new)}")
        first = verify_id_token(old["id_token"], PUBLIC, nonce, old["access_token"])
        again = verify_id_token(new["id_token"], PUBLIC, None, new["access_token"])  # OIDC Core §12.2
        expect(again["sub"] == first["sub"] and again.get("auth_time") == first.get("auth_time"),
               f"sub {again['sub']!r}, auth_time {again.get('auth_time')!r} (first: {first.get('auth_time')!r})")
    with check("refresh: the old (spent) refresh token again is refused with invalid_grant (reuse)"):
        error = oauth_error(lambda: public.refresh_token(token_endpoint, refresh_token=old["refresh_token"]))
        expect(error == "invalid_grant", f"error {error!r}")
    with check("refresh: after that reuse the new refresh token is revoked too (invalid_grant)"):
        error = oauth_error(lambda: public.refresh_token(token_endpoint, refresh_token=new["refresh_token"]))
        expect(error == "invalid_grant", f"error {error!r}")
    with check("refresh: after that reuse the family's access token is refused at userinfo (401)"):
        response = browser.get(metadata["userinfo_endpoint"], timeout=TIMEOUT,
                               headers={"Authorization": "Bearer " + new["access_token"]})
        expect(response.status_code == 401, f"status {response.status_code}")

    # --- the code is single-use, and bound to its PKCE verifier --------------------------------------
    with check("token: a code redeemed with the wrong PKCE verifier is refused with invalid_grant"):
        location, _, state, _ = authorize(public)
        error = oauth_error(lambda: public.fetch_token(token_endpoint, authorization_response=location,
                                                       code_verifier=secrets.token_urlsafe(48), state=state))
        expect(error == "invalid_grant", f"error {error!r}")
    with check("token: a code used twice is invalid_grant, and what it gave is revoked (RFC 6749 §4.1.2)"):
        location, _, state, verifier = authorize(public)
        first = dict(public.fetch_token(token_endpoint, authorization_response=location, code_verifier=verifier,
                                        state=state))
        error = oauth_error(lambda: public.fetch_token(token_endpoint, authorization_response=location,
                                                       code_verifier=verifier, state=state))
        expect(error == "invalid_grant", f"error {error!r}")
        response = browser.get(metadata["userinfo_endpoint"], timeout=TIMEOUT,
                               headers={"Authorization": "Bearer " + first["access_token"]})
        expect(response.status_code == 401, f"userinfo with the first access token: {response.status_code}")
        error = oauth_error(lambda: public.refresh_token(token_endpoint, refresh_token=first["refresh_token"]))
        expect(error == "invalid_grant", f"refresh with the first refresh token: {error!r}")

    # --- client credentials: client_secret_basic and client_secret_post --------------------------------
    for method in ("client_secret_basic", "client_secret_post"):
        service = OAuth2Session(SERVICE, SERVICE_SECRET, token_endpoint_auth_method=method, scope="api:read",
                                default_timeout=TIMEOUT)
        with check(f"client_credentials ({method}): an access token, no refresh token, credentials sent as {method}"):
            recorder = Recorder(service)
            issued = service.fetch_token(token_endpoint, grant_type="client_credentials")
            sent, headers = recorder.form(), recorder.last.headers
            if method == "client_secret_basic":
                expect(headers.get("Authorization", "").startswith("Basic "), "no Basic header")
                expect("client_secret" not in sent, "the secret was in the body too")
            else:
                expect(sent.get("client_id") == SERVICE and sent.get("client_secret") == SERVICE_SECRET,
                       f"sent {sorted(sent)}")
                expect("Authorization" not in headers, "an Authorization header was sent too")
            expect(issued.get("access_token") and "refresh_token" not in issued, f"token {sorted(issued)}")
            expect(issued.get("scope") == "api:read", f"scope {issued.get('scope')!r}")
        with check(f"client_credentials ({method}): a wrong secret is refused with invalid_client"):
            wrong = OAuth2Session(SERVICE, "not-the-secret", token_endpoint_auth_method=method, default_timeout=TIMEOUT)
            error = oauth_error(lambda: wrong.fetch_token(token_endpoint, grant_type="client_credentials"))
            expect(error == "invalid_client", f"error {error!r}")
    with check("client_credentials: the access token is an RFC 9068 JWT (typ at+jwt) with the resource as aud"):
        service = OAuth2Session(SERVICE, SERVICE_SECRET, default_timeout=TIMEOUT)
        issued = service.fetch_token(token_endpoint, grant_type="client_credentials", resource="https://api.example/")
        decoded = jwt.decode(issued["access_token"], KeySet.import_key_set(jwks),
                             registry=JWSRegistry(algorithms=id_token_algorithms))
        expect(decoded.header.get("typ") == "at+jwt", f"typ {decoded.header.get('typ')!r}")
        jwt.JWTClaimsRegistry(iss={"essential": True, "value": issuer},
                              aud={"essential": True, "value": "https://api.example/"},
                              sub={"essential": True, "value": SERVICE}).validate(decoded.claims)
        expect(decoded.claims.get("client_id") == SERVICE, f"client_id {decoded.claims.get('client_id')!r}")

    # --- private_key_jwt (RFC 7523 §2.2) -----------------------------------------------------------------
    def read(name):
        with open(os.path.join(keydir, name), "rb") as handle:
            return handle.read()

    keys = {JWT_ES256: (ECKey.import_key(read("es256.key.pem")), "ES256", "a PEM public key"),
            JWT_RS256: (RSAKey.import_key(json.loads(read("rs256.key.jwk"))), "RS256", "a JWK public key")}
    for client_id, (key, algorithm, registered) in keys.items():
        with check(f"private_key_jwt ({algorithm}, registered with {registered}): Authlib's assertion gets a token"):
            session = OAuth2Session(client_id, key, token_endpoint_auth_method="private_key_jwt",
                                    default_timeout=TIMEOUT)
            session.register_client_auth_method(PrivateKeyJWT(token_endpoint, alg=algorithm))
            recorder = Recorder(session)
            issued = session.fetch_token(token_endpoint, grant_type="client_credentials")
            sent = recorder.form()
            expect(sent.get("client_assertion_type") == "urn:ietf:params:oauth:client-assertion-type:jwt-bearer",
                   f"sent {sorted(sent)}")
            header = json.loads(base64.urlsafe_b64decode(sent["client_assertion"].split(".")[0] + "=="))
            expect(header.get("alg") == algorithm, f"assertion alg {header.get('alg')!r}")
            expect(issued.get("access_token"), f"token {sorted(issued)}")
    with check("private_key_jwt: an assertion signed with a key the client did not register is invalid_client"):
        stranger = ECKey.import_key(read("stranger.key.pem"))
        session = OAuth2Session(JWT_ES256, stranger, token_endpoint_auth_method="private_key_jwt",
                                default_timeout=TIMEOUT)
        session.register_client_auth_method(PrivateKeyJWT(token_endpoint, alg="ES256"))
        error = oauth_error(lambda: session.fetch_token(token_endpoint, grant_type="client_credentials"))
        expect(error == "invalid_client", f"error {error!r}")
    with check("private_key_jwt: an assertion replayed (same jti) is invalid_client"):
        key = keys[JWT_ES256][0]
        session = OAuth2Session(JWT_ES256, key, token_endpoint_auth_method="private_key_jwt", default_timeout=TIMEOUT)
        session.register_client_auth_method(PrivateKeyJWT(token_endpoint, alg="ES256",
                                                          claims={"jti": secrets.token_urlsafe(16)}))
        expect(session.fetch_token(token_endpoint, grant_type="client_credentials").get("access_token"),
               "first use refused")
        error = oauth_error(lambda: session.fetch_token(token_endpoint, grant_type="client_credentials"))
        expect(error == "invalid_client", f"error {error!r}")

    # --- introspection (RFC 7662) and revocation (RFC 7009), a confidential client ---------------------
    confidential = OAuth2Session(CONFIDENTIAL, CONFIDENTIAL_SECRET, redirect_uri=REDIRECT_URI,
                                 scope="openid offline_access", code_challenge_method="S256", default_timeout=TIMEOUT)
    confidential.metadata["token_endpoint"] = token_endpoint
    mine = {}

    def introspect(value, hint):
        response = confidential.introspect_token(metadata["introspection_endpoint"], token=value, token_type_hint=hint)
        expect(response.status_code == 200, f"introspection status {response.status_code}: {response.text[:200]}")
        return response.json()

    with check("code + PKCE (confidential, client_secret_basic): tokens for alice"):
        location, answer, state, verifier = authorize(confidential)
        expect(answer.get("iss") == issuer and answer.get("state") == state, f"redirect {location}")
        recorder = Recorder(confidential)
        mine = dict(confidential.fetch_token(token_endpoint, authorization_response=location,
                                             code_verifier=verifier, state=state))
        expect(recorder.last.headers.get("Authorization", "").startswith("Basic "), "no Basic header")
        expect(mine.get("access_token") and mine.get("refresh_token"), f"token {sorted(mine)}")
    with check("introspection: the access token is active, for alice, client test-confidential, with exp and scope"):
        answer = introspect(mine["access_token"], "access_token")
        expect(answer.get("active") is True, f"answer {answer}")
        expect(answer.get("sub") == USER and answer.get("client_id") == CONFIDENTIAL, f"answer {answer}")
        expect(answer.get("iss") == issuer and answer.get("exp", 0) > time.time(), f"answer {answer}")
        expect(answer.get("scope") == "openid offline_access", f"scope {answer.get('scope')!r}")
    with check("introspection: the refresh token is active"):
        answer = introspect(mine["refresh_token"], "refresh_token")
        expect(answer.get("active") is True, f"answer {answer}")
    with check("introspection: a public client is refused (401 invalid_client)"):
        response = public.introspect_token(metadata["introspection_endpoint"], token=mine["access_token"],
                                           auth=public.client_auth("none"))
        expect(response.status_code == 401 and response.json().get("error") == "invalid_client",
               f"{response.status_code} {response.text[:200]}")
    with check("introspection by a private_key_jwt client (Authlib's PrivateKeyJWT(), aud = the endpoint's URL)"):
        key, algorithm, _ = keys[JWT_RS256]
        session = OAuth2Session(JWT_RS256, key, token_endpoint_auth_method="private_key_jwt", default_timeout=TIMEOUT)
        session.register_client_auth_method(PrivateKeyJWT(alg=algorithm))
        response = session.introspect_token(metadata["introspection_endpoint"], token=mine["access_token"])
        expect(response.status_code == 200, f"status {response.status_code}: {response.text[:200]}")
        expect(response.json().get("active") is True, f"answer {response.text[:200]}")
    with check("revocation (RFC 7009): the access token is revoked (200), then introspection says active false"):
        response = confidential.revoke_token(metadata["revocation_endpoint"], token=mine["access_token"],
                                             token_type_hint="access_token")
        expect(response.status_code == 200, f"status {response.status_code}")
        answer = introspect(mine["access_token"], "access_token")
        expect(answer == {"active": False}, f"answer {answer}")
        response = browser.get(metadata["userinfo_endpoint"], timeout=TIMEOUT,
                               headers={"Authorization": "Bearer " + mine["access_token"]})
        expect(response.status_code == 401, f"userinfo still answers {response.status_code}")
    with check("revocation: the refresh token is revoked (200), then it is inactive and a refresh is invalid_grant"):
        response = confidential.revoke_token(metadata["revocation_endpoint"], token=mine["refresh_token"],
                                             token_type_hint="refresh_token")
        expect(response.status_code == 200, f"status {response.status_code}")
        answer = introspect(mine["refresh_token"], "refresh_token")
        expect(answer == {"active": False}, f"answer {answer}")
        error = oauth_error(lambda: confidential.refresh_token(token_endpoint, refresh_token=mine["refresh_token"]))
        expect(error == "invalid_grant", f"error {error!r}")
    with check("revocation: an unknown token is answered 200 (RFC 7009 §2.2)"):
        response = confidential.revoke_token(metadata["revocation_endpoint"], token="no-such-token")
        expect(response.status_code == 200, f"status {response.status_code}")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "make-keys":
        make_keys(sys.argv[2])
        sys.exit(0)
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    try:
        main(sys.argv[1], sys.argv[2])
    except Exception as error:  # outside any check: counts as one failure
        failed += 1
        print(f"FAIL authlib_client stopped: {type(error).__name__}: {error}", flush=True)
    print(f"authlib_client.py: {passed} PASS, {failed} FAIL", flush=True)
    sys.exit(1 if failed or not passed else 0)
