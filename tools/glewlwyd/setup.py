#!/usr/bin/env python3
"""Prepares and configures the Glewlwyd test identity provider (stdlib only).

    setup.py conf STATE PORT       write STATE/glewlwyd.conf from the packaged /etc/glewlwyd/glewlwyd.conf
    setup.py keys STATE            create STATE/keys/{rs256,es256,eddsa}.pem (openssl) and STATE/jwks-private.json
    setup.py configure STATE PORT  configure scopes, user, clients and the OIDC plugin instances via the admin REST API
    setup.py pkjwt-key [--new]     write Fixtures/glewlwyd/pkjwt-es256.jwks.json (public JWKS of moose-pkjwt) from
                                   Fixtures/glewlwyd/pkjwt-es256.pem; --new first makes a new P-256 key (openssl)
    setup.py rotate STATE PORT [--restart] [--renew KID]... [--add KID:ALG]... [--withdraw KID]... [--sign KID]
                                   change the signing keys (STATE/keys/manifest.json) and apply them: to the running
                                   instance through the admin REST API, or with --restart by stopping it, writing
                                   the new keys into its database and starting it again; prints the public JWKS

Everything is upserted, so `configure` can run against a fresh or an already configured database.
Environment: MOOSE_GLEWLWYD_ACCESS_TOKEN_SECONDS (default 60), MOOSE_GLEWLWYD_DPOP_NONCE_COUNTER (default 10),
MOOSE_GLEWLWYD_LOG_LEVEL (default INFO).
"""
import http.client
import http.cookiejar
import json
import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

PACKAGED_CONF = "/etc/glewlwyd/glewlwyd.conf"
ADMIN_USER, ADMIN_PASSWORD = "admin", "password"  # the packaged schema's admin user

REDIRECTS = ["http://127.0.0.1:53682/callback", "http://127.0.0.1:53683/callback"]
POST_LOGOUT = ["http://127.0.0.1:53682/logout", "http://127.0.0.1:53683/logout"]
RESOURCE = "https://api.moose.test"
USER_SCOPES = ["openid", "profile", "email", "offline_access", "api.read"]
KIDS = {"RS256": "moose-rs256", "ES256": "moose-es256", "EdDSA": "moose-eddsa"}

# moose-pkjwt: confidential client authenticating with private_key_jwt (RFC 7523 §2.2), client_credentials only.
# Its key pair is a committed test fixture; Glewlwyd gets the public JWKS as the client property `jwks`.
FIXTURES = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "Fixtures", "glewlwyd"))
PKJWT_CLIENT = "moose-pkjwt"
PKJWT_KID = "moose-pkjwt-1"
PKJWT_PEM = os.path.join(FIXTURES, "pkjwt-es256.pem")
PKJWT_JWKS = os.path.join(FIXTURES, "pkjwt-es256.jwks.json")


def log(*a):
    print(*a, file=sys.stderr)


# --------------------------------------------------------------------------- glewlwyd.conf

def write_conf(state, port):
    text = open(PACKAGED_CONF).read()
    level = os.environ.get("MOOSE_GLEWLWYD_LOG_LEVEL", "INFO")

    def setting(key, value):
        nonlocal text
        line = f"{key}={value}"
        pattern = re.compile(rf"^\s*#?\s*{re.escape(key)}\s*=.*$", re.M)
        if pattern.search(text):
            text = pattern.sub(lambda _m: line, text, count=1)
        else:
            text += "\n" + line + "\n"

    setting("port", port)
    setting("bind_address", '"127.0.0.1"')
    setting("external_url", f'"http://127.0.0.1:{port}"')  # no trailing slash: plugin URLs are external_url/api/name
    setting("log_mode", '"file"')
    setting("log_level", f'"{level}"')
    setting("log_file", f'"{state}/glewlwyd.log"')
    setting("cookie_secure", "0")
    db = f'database =\n{{\n  type = "sqlite3"\n  path = "{state}/glewlwyd.db"\n}};\n'
    text, n = re.subn(r'^@include\s+"[^"]*glewlwyd-db\.conf"\s*$', lambda _m: db, text, flags=re.M)
    if n != 1:
        text += "\n" + db
    with open(os.path.join(state, "glewlwyd.conf"), "w") as f:
        f.write(text)


# --------------------------------------------------------------------------- keys

def b64u(n_or_bytes):
    import base64
    if isinstance(n_or_bytes, int):
        n = n_or_bytes
        n_or_bytes = n.to_bytes(max(1, (n.bit_length() + 7) // 8), "big")
    return base64.urlsafe_b64encode(n_or_bytes).rstrip(b"=").decode()


def openssl_fields(pem):
    """Parses `openssl pkey -text -noout` into {field: bytes}."""
    out = subprocess.run(["openssl", "pkey", "-in", pem, "-text", "-noout"], check=True,
                         capture_output=True, text=True).stdout
    fields, current = {}, None
    for line in out.splitlines():
        m = re.match(r"^(\w[\w ]*?):\s*(\S.*)?$", line)
        if m and not line.startswith(" "):
            current = m.group(1).strip()
            fields[current] = ""
            rest = m.group(2) or ""
            m2 = re.match(r"^(\d+) \(0x[0-9a-f]+\)$", rest)  # publicExponent: 65537 (0x10001)
            if m2:
                fields[current] = format(int(m2.group(1)), "x")
                current = None
            continue
        if current is not None and line.startswith(" "):
            fields[current] += line.strip().replace(":", "")
    return {k: bytes.fromhex(v if len(v) % 2 == 0 else "0" + v) for k, v in fields.items() if v}


def rsa_jwk(pem):
    f = openssl_fields(pem)
    i = lambda k: int.from_bytes(f[k], "big")
    return {"kty": "RSA", "n": b64u(i("modulus")), "e": b64u(i("publicExponent")), "d": b64u(i("privateExponent")),
            "p": b64u(i("prime1")), "q": b64u(i("prime2")), "dp": b64u(i("exponent1")), "dq": b64u(i("exponent2")),
            "qi": b64u(i("coefficient"))}


def ec_jwk(pem):
    f = openssl_fields(pem)
    priv, pub = f["priv"], f["pub"]
    assert pub[0] == 4 and len(pub) == 65, "expected an uncompressed P-256 point"
    return {"kty": "EC", "crv": "P-256", "x": b64u(pub[1:33]), "y": b64u(pub[33:]), "d": b64u(priv.rjust(32, b"\0"))}


def okp_jwk(pem):
    f = openssl_fields(pem)
    priv = next(v for k, v in f.items() if k.startswith("priv"))
    pub = next(v for k, v in f.items() if k.startswith("pub"))
    return {"kty": "OKP", "crv": "Ed25519", "x": b64u(pub), "d": b64u(priv)}


KEY_SPECS = {
    "RS256": (["-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048"], rsa_jwk),
    "ES256": (["-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256"], ec_jwk),
    "EdDSA": (["-algorithm", "ED25519"], okp_jwk),
}
DEFAULT_MANIFEST = {"signing": KIDS["RS256"], "keys": [
    {"kid": KIDS["RS256"], "alg": "RS256", "file": "rs256.pem"},
    {"kid": KIDS["ES256"], "alg": "ES256", "file": "es256.pem"},
    {"kid": KIDS["EdDSA"], "alg": "EdDSA", "file": "eddsa.pem"},
]}
# kids a client's sign_kid names (configure): never withdrawn, or that client could not get tokens
CLIENT_SIGN_KIDS = {KIDS["ES256"], KIDS["EdDSA"]}


def manifest_path(state):
    return os.path.join(state, "keys", "manifest.json")


def load_manifest(state):
    """STATE/keys/manifest.json: the signing kid (the plugins' default-kid) and every key, {kid, alg, file}
    (a PEM under STATE/keys); absent, the three keys `keys` makes, signing with moose-rs256."""
    try:
        with open(manifest_path(state)) as f:
            return json.load(f)
    except FileNotFoundError:
        return json.loads(json.dumps(DEFAULT_MANIFEST))


def new_pem(path, alg):
    if os.path.exists(path):
        os.remove(path)
    subprocess.run(["openssl", "genpkey", *KEY_SPECS[alg][0], "-out", path], check=True, capture_output=True)
    os.chmod(path, 0o600)


def write_jwks(state, manifest):
    """STATE/jwks-private.json from the manifest's PEMs (the manifest saved beside them), the signing key first:
    Glewlwyd 2.7.5 signs for a client without `sign_kid` with the first key of `jwks-private` (its `default-kid`
    only picks the key of encrypted request objects)."""
    kdir = os.path.join(state, "keys")
    keys = []
    for entry in sorted(manifest["keys"], key=lambda entry: entry["kid"] != manifest["signing"]):
        jwk = KEY_SPECS[entry["alg"]][1](os.path.join(kdir, entry["file"]))
        jwk.update({"kid": entry["kid"], "alg": entry["alg"], "use": "sig"})
        keys.append(jwk)
    path = os.path.join(state, "jwks-private.json")
    with open(path + ".new", "w") as f:
        json.dump({"keys": keys}, f)
    os.chmod(path + ".new", 0o600)
    os.replace(path + ".new", path)
    with open(manifest_path(state), "w") as f:
        json.dump(manifest, f, indent=2)
    return {"keys": keys}


def make_keys(state):
    kdir = os.path.join(state, "keys")
    os.makedirs(kdir, exist_ok=True)
    manifest = load_manifest(state)
    for entry in manifest["keys"]:
        path = os.path.join(kdir, entry["file"])
        if not os.path.exists(path):
            new_pem(path, entry["alg"])
    write_jwks(state, manifest)


def pkjwt_public_jwks():
    """The public JWKS of moose-pkjwt derived from its PEM (kid moose-pkjwt-1, alg ES256, use sig)."""
    jwk = ec_jwk(PKJWT_PEM)
    del jwk["d"]
    jwk.update({"kid": PKJWT_KID, "alg": "ES256", "use": "sig"})
    return {"keys": [jwk]}


def pkjwt_key(new):
    if new or not os.path.exists(PKJWT_PEM):
        os.makedirs(FIXTURES, exist_ok=True)
        subprocess.run(["openssl", "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256",
                        "-out", PKJWT_PEM], check=True, capture_output=True)
        os.chmod(PKJWT_PEM, 0o644)  # a test fixture, read by the Swift tests
    with open(PKJWT_JWKS, "w") as f:
        json.dump(pkjwt_public_jwks(), f, indent=2)
        f.write("\n")
    log(f"wrote {PKJWT_JWKS}")


def load_pkjwt_jwks():
    """The committed public JWKS; refuses one that does not match the committed private key."""
    with open(PKJWT_JWKS) as f:
        jwks = json.load(f)
    if jwks != pkjwt_public_jwks():
        raise SystemExit(f"{PKJWT_JWKS} does not match {PKJWT_PEM}; run `tools/glewlwyd/setup.py pkjwt-key`")
    return jwks


# --------------------------------------------------------------------------- admin REST API

class Admin:
    def __init__(self, base):
        self.base = base.rstrip("/")
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))

    def call(self, method, path, body=None, ok=(200,)):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data=data, method=method)
        if data is not None:
            req.add_header("Content-Type", "application/json")
        # Glewlwyd sometimes drops a connection without an answer while it resets a plugin (seen once in
        # CI, seconds after a restart, on PUT …/reset): an idempotent call is tried again, up to 3 times.
        tries = 3 if method in ("GET", "PUT", "DELETE") else 1
        for attempt in range(tries):
            try:
                with self.opener.open(req, timeout=15) as r:
                    status, raw = r.status, r.read()
                break
            except urllib.error.HTTPError as e:
                status, raw = e.code, e.read()
                break
            except (http.client.RemoteDisconnected, ConnectionResetError, urllib.error.URLError):
                if attempt == tries - 1:
                    raise
                time.sleep(0.5 * (attempt + 1))
        if status not in ok:
            raise RuntimeError(f"{method} {path} -> {status} {raw[:2000]!r}")
        try:
            return status, json.loads(raw) if raw else None
        except ValueError:
            return status, raw

    def login(self):
        self.call("POST", "/api/auth/", {"username": ADMIN_USER, "password": ADMIN_PASSWORD})

    def upsert(self, collection, key, body):
        """collection is e.g. 'scope', 'user', 'client', 'mod/plugin', 'mod/client'."""
        status, _ = self.call("GET", f"/api/{collection}/{urllib.parse.quote(key)}", ok=(200, 404))
        if status == 200:
            self.call("PUT", f"/api/{collection}/{urllib.parse.quote(key)}", body)
            return "updated"
        self.call("POST", f"/api/{collection}/", body)
        return "created"


def oidc_parameters(issuer, jwks, *, par_required, default_kid=KIDS["RS256"]):
    at_seconds = int(os.environ.get("MOOSE_GLEWLWYD_ACCESS_TOKEN_SECONDS", "60"))
    nonce_counter = int(os.environ.get("MOOSE_GLEWLWYD_DPOP_NONCE_COUNTER", "10"))
    return {
        "iss": issuer,
        "jwks-private": json.dumps(jwks),
        "default-kid": default_kid,
        "client-sign_kid-parameter": "sign_kid",
        # client properties holding a client's public keys (private_key_jwt client assertions, request objects);
        # setting any of them adds private_key_jwt to the discovery's token_endpoint_auth_methods_supported
        "client-jwks-parameter": "jwks",
        "client-pubkey-parameter": "pubkey",
        "jwks-show": True,
        "jwt-type": "rsa",
        "jwt-key-size": "256",
        "subject-type": "public",
        "access-token-duration": at_seconds,
        "refresh-token-duration": 1209600,
        "code-duration": 600,
        "refresh-token-rolling": True,
        "refresh-token-one-use": "always",
        "client-refresh-token-one-use-parameter": "refresh-token-one-use",
        "allow-non-oidc": True,
        "auth-type-code-enabled": True,
        "auth-type-code-revoke-replayed": True,
        "auth-type-token-enabled": False,
        "auth-type-id-token-enabled": True,
        "auth-type-none-enabled": False,
        "auth-type-password-enabled": False,
        "auth-type-client-enabled": True,
        "auth-type-device-enabled": True,
        "auth-type-refresh-enabled": True,
        "device-authorization-expiration": 600,
        "device-authorization-interval": 1,
        "oauth-as-iss-id": True,
        "pkce-allowed": True,
        "pkce-method-plain-allowed": False,
        "pkce-required": False,
        "pkce-required-public-client": True,
        "introspection-revocation-allowed": True,
        "introspection-revocation-allow-target-client": True,
        # any access token with scope openid may also introspect/revoke (Bearer): the only way for a public client
        "introspection-revocation-auth-scope": ["openid"],
        "register-client-allowed": True,
        "register-client-auth-scope": [],
        "register-client-credentials-scope": [],
        "register-client-management-allowed": True,
        "register-default-properties": [],
        "session-management-allowed": True,
        "session-cookie-name": "GLEWLWYD2_OIDC_SID",
        "session-cookie-expiration": 2419200,
        "front-channel-logout-allowed": False,
        "back-channel-logout-allowed": False,
        "oauth-dpop-allowed": True,
        "oauth-dpop-iat-duration": 60,
        "oauth-dpop-iat-gap-duration": 5,
        "oauth-dpop-nonce-mandatory": True,
        "oauth-dpop-nonce-counter": nonce_counter,
        "oauth-dpop-dpop_bound_access_tokens-property": "dpop_bound_access_tokens",
        "oauth-par-allowed": True,
        "oauth-par-required": par_required,
        "oauth-par-request_uri-prefix": "urn:ietf:params:oauth:request_uri:",
        "oauth-par-duration": 90,
        "resource-allowed": True,
        "resource-scope": {"api.read": [RESOURCE]},
        "resource-client-property": "resource",
        "resource-scope-and-client-property": False,
        "request-parameter-allow": True,
        "request-uri-allow-https-non-secure": False,
        "request-parameter-allow-encrypted": False,
        "encrypt-out-token-allow": False,
        "name-claim": "on-demand",
        "name-claim-scope": ["profile"],
        "email-claim": "on-demand",
        "email-claim-scope": ["email"],
        "scope-claim": "no",
        "claims": [
            {"name": "preferred_username", "user-property": "username", "type": "string",
             "mandatory": False, "on-demand": True, "scope": ["profile"]},
        ],
        "allowed-scope": ["openid", "profile", "email", "offline_access", "api.read"],
        "oauth-rar-allowed": False,
        "oauth-ciba-allowed": False,
        "oauth-fapi-allow-jarm": False,
    }


PLUGINS = (("oidc", False), ("oidc-par", True))


def plugin_body(base, name, par_required, jwks, default_kid):
    return {"module": "oidc", "name": name,
            "display_name": "Moose OIDC" + (" (PAR required)" if par_required else ""),
            "parameters": oidc_parameters(f"{base}/api/{name}", jwks, par_required=par_required,
                                          default_kid=default_kid),
            "order_rank": 0, "readonly": False}


def configure_plugins(admin, base, jwks, default_kid):
    for name, par_required in PLUGINS:
        done = admin.upsert("mod/plugin", name, plugin_body(base, name, par_required, jwks, default_kid))
        if done == "updated":
            # PUT only stores the parameters; the running instance keeps its old ones until reset
            admin.call("PUT", f"/api/mod/plugin/{name}/reset")


def configure(state, port):
    base = f"http://127.0.0.1:{port}"
    jwks = json.load(open(os.path.join(state, "jwks-private.json")))
    admin = Admin(base)
    admin.login()

    # Let the database client backend store the extra client properties used below.
    _, mod = admin.call("GET", "/api/mod/client/database")
    fmt = mod["parameters"].setdefault("data-format", {})
    changed = False
    # sign_kid: ID token key per client; post_logout_redirect_uris (plural, a list) is what end_session reads,
    # while the packaged data-format only knows the singular post_logout_redirect_uri.
    for prop, multiple in (("sign_kid", False), ("dpop_bound_access_tokens", False), ("refresh-token-one-use", False),
                           ("post_logout_redirect_uris", True)):
        if prop not in fmt:
            fmt[prop] = {"multiple": multiple, "read": True, "write": True}
            changed = True
    if changed:
        admin.call("PUT", "/api/mod/client/database", {k: mod[k] for k in ("module", "name", "display_name", "parameters", "order_rank", "readonly") if k in mod})
    # The running backend keeps its old data-format (and silently drops unknown properties) until reset.
    admin.call("PUT", "/api/mod/client/database/reset")

    for name, desc in (("openid", "OpenID Connect"), ("profile", "Profile (name, preferred_username)"),
                       ("email", "E-mail address"), ("offline_access", "Refresh tokens"), ("api.read", "Moose test API, read")):
        admin.upsert("scope", name, {"name": name, "display_name": name, "description": desc,
                                     "password_required": False, "scheme": {}})

    user = os.environ.get("MOOSE_GLEWLWYD_USER", "alice")
    password = os.environ.get("MOOSE_GLEWLWYD_PASSWORD", "wonderland-42")
    admin.upsert("user", user, {"username": user, "name": "Alice Liddell", "email": "alice@example.com",
                                "password": password, "enabled": True, "scope": USER_SCOPES})

    code_types = ["code", "refresh_token", "device_authorization"]
    common = {"enabled": True, "redirect_uri": REDIRECTS, "post_logout_redirect_uris": POST_LOGOUT,
              "scope": USER_SCOPES, "resource": [RESOURCE]}
    clients = [
        dict(common, client_id="moose-public", name="Moose public client", confidential=False,
             authorization_type=code_types, token_endpoint_auth_method=["none"]),
        dict(common, client_id="moose-confidential", name="Moose confidential client", confidential=True,
             client_secret="moose-confidential-secret", authorization_type=code_types + ["client_credentials"],
             token_endpoint_auth_method=["client_secret_basic", "client_secret_post"]),
        dict(common, client_id="moose-es256", name="Moose public client, ES256 ID tokens", confidential=False,
             authorization_type=code_types, token_endpoint_auth_method=["none"], sign_kid=KIDS["ES256"]),
        dict(common, client_id="moose-eddsa", name="Moose public client, EdDSA ID tokens", confidential=False,
             authorization_type=code_types, token_endpoint_auth_method=["none"], sign_kid=KIDS["EdDSA"]),
        {"client_id": "moose-service", "name": "Moose service client", "enabled": True, "confidential": True,
         "client_secret": "moose-service-secret", "authorization_type": ["client_credentials"],
         "token_endpoint_auth_method": ["client_secret_basic", "client_secret_post"],
         "scope": ["api.read"], "redirect_uri": [], "resource": [RESOURCE]},
        # no client_secret: it can only authenticate with a client assertion signed by its key (ES256, kid
        # moose-pkjwt-1); `jwks` is stored as JSON (data-format "convert": "jwks" in the packaged schema)
        {"client_id": PKJWT_CLIENT, "name": "Moose service client, private_key_jwt", "enabled": True,
         "confidential": True, "authorization_type": ["client_credentials"],
         "token_endpoint_auth_method": ["private_key_jwt"], "token_endpoint_signing_alg": "ES256",
         "jwks": load_pkjwt_jwks(), "scope": ["api.read"], "redirect_uri": [], "resource": [RESOURCE]},
    ]
    for c in clients:
        admin.upsert("client", c["client_id"], c)

    configure_plugins(admin, base, jwks, load_manifest(state)["signing"])
    log("glewlwyd configured")


# --------------------------------------------------------------------------- rotation

def rotate_manifest(state, renew, add, withdraw, sign):
    """Applies the steps to STATE's keys: new material under kept kids, new kids, kids withdrawn, the signing kid."""
    kdir = os.path.join(state, "keys")
    manifest = load_manifest(state)
    by_kid = {entry["kid"]: entry for entry in manifest["keys"]}
    for kid in renew:
        if kid not in by_kid:
            raise SystemExit(f"rotate: --renew {kid}: no such kid ({', '.join(by_kid)})")
        new_pem(os.path.join(kdir, by_kid[kid]["file"]), by_kid[kid]["alg"])
    for spec in add:
        kid, _, alg = spec.partition(":")
        if alg not in KEY_SPECS or not re.fullmatch(r"[A-Za-z0-9._-]+", kid) or kid in by_kid:
            raise SystemExit(f"rotate: --add {spec}: want a new KID:ALG, ALG one of {', '.join(KEY_SPECS)}")
        entry = {"kid": kid, "alg": alg, "file": f"{kid}.pem"}
        new_pem(os.path.join(kdir, entry["file"]), alg)
        manifest["keys"].append(entry)
        by_kid[kid] = entry
    if sign is not None:
        if sign not in by_kid:
            raise SystemExit(f"rotate: --sign {sign}: no such kid")
        manifest["signing"] = sign
    for kid in withdraw:
        if kid not in by_kid or kid == manifest["signing"] or kid in CLIENT_SIGN_KIDS:
            raise SystemExit(f"rotate: --withdraw {kid}: not a kid, or the signing kid, or a client's sign_kid")
        manifest["keys"] = [entry for entry in manifest["keys"] if entry["kid"] != kid]
        os.remove(os.path.join(kdir, by_kid.pop(kid)["file"]))
    return write_jwks(state, manifest), manifest["signing"]


def store_plugins(state, port, jwks, default_kid):
    """Writes the plugins' parameters into the database of a stopped instance: it starts with these keys."""
    import sqlite3
    base = f"http://127.0.0.1:{port}"
    db = sqlite3.connect(os.path.join(state, "glewlwyd.db"))
    with db:
        for name, par_required in PLUGINS:
            parameters = json.dumps(plugin_body(base, name, par_required, jwks, default_kid)["parameters"])
            db.execute("UPDATE g_plugin_module_instance SET gpmi_parameters = ? WHERE gpmi_name = ?",
                       (parameters, name))
    db.close()


def rotate(argv):
    import argparse
    parser = argparse.ArgumentParser(prog="setup.py rotate")
    parser.add_argument("state")
    parser.add_argument("port", type=int)
    parser.add_argument("--restart", action="store_true",
                        help="stop the instance, write the keys into its database, start it (tools/glewlwyd/start)")
    parser.add_argument("--renew", action="append", default=[], metavar="KID", help="new key material, same kid")
    parser.add_argument("--add", action="append", default=[], metavar="KID:ALG", help="a new kid (RS256 ES256 EdDSA)")
    parser.add_argument("--withdraw", action="append", default=[], metavar="KID", help="a kid no longer published")
    parser.add_argument("--sign", metavar="KID", help="the kid tokens are signed with (default-kid)")
    args = parser.parse_args(argv)
    state = os.path.abspath(args.state)
    env = dict(os.environ, MOOSE_GLEWLWYD_STATE=state, MOOSE_GLEWLWYD_PORT=str(args.port))
    here = os.path.dirname(os.path.abspath(__file__))
    if args.restart:
        subprocess.run([os.path.join(here, "stop"), "--keep"], env=env, check=True)
    jwks, signing = rotate_manifest(state, args.renew, args.add, args.withdraw, args.sign)
    if args.restart:
        store_plugins(state, args.port, jwks, signing)
        subprocess.run([os.path.join(here, "start")], env=env, check=True, stdout=subprocess.DEVNULL)
    else:
        admin = Admin(f"http://127.0.0.1:{args.port}")
        try:
            admin.login()
            configure_plugins(admin, f"http://127.0.0.1:{args.port}", jwks, signing)
        except (urllib.error.URLError, ConnectionError, http.client.HTTPException) as error:
            # Glewlwyd itself went down resetting a plugin (seen twice in CI, ~20 s after a restart, under
            # the rotation load): the same keys by a restart, said on stderr, rather than no rotation.
            log(f"rotate: the live plugin reset failed ({error}); restarting the instance with the new keys")
            subprocess.run([os.path.join(here, "stop"), "--keep"], env=env, check=False)
            store_plugins(state, args.port, jwks, signing)
            subprocess.run([os.path.join(here, "start")], env=env, check=True, stdout=subprocess.DEVNULL)
    public = [{k: v for k, v in key.items() if k in ("kid", "alg", "use", "kty", "crv", "n", "e", "x", "y")}
              for key in jwks["keys"]]
    print(json.dumps({"signing": signing, "keys": public}))
    log(f"rotated: signing {signing}, kids {', '.join(key['kid'] for key in public)}")


def main(argv):
    cmd = argv[1] if len(argv) > 1 else ""
    if cmd == "conf":
        write_conf(argv[2], int(argv[3]))
    elif cmd == "keys":
        make_keys(argv[2])
    elif cmd == "configure":
        configure(argv[2], int(argv[3]))
    elif cmd == "rotate":
        rotate(argv[2:])
    elif cmd == "pkjwt-key":
        pkjwt_key(new="--new" in argv[2:])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
