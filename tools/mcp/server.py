#!/usr/bin/env python3
"""Moose's test MCP server: a real MCP server (official Python SDK, `mcp` on PyPI) with OAuth.

One process is both the OAuth authorization server and the MCP resource server, built from the SDK's
own `mcp.server.auth` (RFC 8414 metadata, RFC 7591 registration, /authorize with PKCE, /token,
/revoke, bearer middleware, RFC 9728 protected resource metadata). Written here, and nothing more:

* an in-memory `OAuthAuthorizationServerProvider` (auto-approves "alice": /authorize redirects
  straight back with the code; RFC 9207 `iss`; RFC 8707 resource binding; refresh rotation with
  reuse detection);
* RFC 8252 §7.3 loopback redirect URIs with any port (the SDK compares redirect URIs exactly);
* per-tool scopes (the SDK has none): `admin_echo` needs `mcp:admin` -> HTTP 403 insufficient_scope;
* the token request's `resource` (the SDK parses but does not hand it to the provider);
* the AS metadata route, re-served from the SDK's `build_metadata` with
  `authorization_response_iss_parameter_supported` and the hostile modes;
* test-control endpoints under /_test/ (stats, reset, hostile modes).

Test support only: in-memory, loopback only. See README.md.
"""
import contextvars
import json
import logging
import os
import secrets
import time
import urllib.parse
from collections import Counter

import uvicorn
from pydantic import AnyHttpUrl, AnyUrl, ValidationError
from starlette.requests import Request
from starlette.routing import Route

from mcp.server.auth.json_response import PydanticJSONResponse
from mcp.server.auth.middleware.bearer_auth import RequireAuthMiddleware
from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    AuthorizeError,
    RefreshToken,
    TokenError,
    construct_redirect_uri,
)
from mcp.server.auth.routes import build_metadata, cors_middleware
from mcp.server.auth.settings import AuthSettings, ClientRegistrationOptions, RevocationOptions
from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

HOST = "127.0.0.1"
PORT = int(os.environ.get("MOOSE_MCP_PORT", "8931"))
ISSUER = f"http://{HOST}:{PORT}"
RESOURCE = f"{ISSUER}/mcp"
FORGED_ISSUER = "https://forged-issuer.invalid"
ACCESS_SECONDS = int(os.environ.get("MOOSE_MCP_ACCESS_TOKEN_SECONDS", "60"))
REFRESH_SECONDS = int(os.environ.get("MOOSE_MCP_REFRESH_TOKEN_SECONDS", "86400"))
JSON_RESPONSE = os.environ.get("MOOSE_MCP_JSON_RESPONSE", "0") == "1"  # default: SSE responses
SUBJECT = "alice"
TOOLS, ADMIN = "mcp:tools", "mcp:admin"
TOOL_SCOPES = {"echo": [TOOLS], "admin_echo": [TOOLS, ADMIN], "chatty_echo": [TOOLS]}

log = logging.getLogger("moose-mcp")

# Set by the /token wrapper for the provider: the token request's grant_type and RFC 8707 resource.
TOKEN_GRANT = contextvars.ContextVar("token_grant", default=None)
TOKEN_RESOURCE = contextvars.ContextVar("token_resource", default=None)


def same_resource(a, b):
    """Compare as the SDK's bearer middleware does: as URLs, a trailing slash aside."""
    try:
        return str(AnyHttpUrl(a)).removesuffix("/") == str(AnyHttpUrl(b)).removesuffix("/")
    except (ValidationError, TypeError):
        return False


class FamilyAccessToken(AccessToken):
    family: str


class FamilyRefreshToken(RefreshToken):
    family: str
    used: bool = False


def _is_loopback(url):
    return url.scheme == "http" and url.host in ("127.0.0.1", "[::1]", "::1", "localhost")


class LoopbackClient(OAuthClientInformationFull):
    """RFC 8252 §7.3: a registered loopback redirect URI matches on any port."""

    def validate_redirect_uri(self, redirect_uri):
        if redirect_uri is not None and _is_loopback(redirect_uri) and redirect_uri not in (self.redirect_uris or []):
            for registered in self.redirect_uris or []:
                if _is_loopback(registered) and (registered.host, registered.path, registered.query) == (
                    redirect_uri.host,
                    redirect_uri.path,
                    redirect_uri.query,
                ):
                    return redirect_uri
        return super().validate_redirect_uri(redirect_uri)


DEFAULT_MODES = {"iss": "normal", "pkce_methods": ["S256"], "reject_tokens": False}


class State:
    def __init__(self):
        self.reset()

    def reset(self, stats_only=False):
        if not stats_only:
            self.clients, self.codes, self.used_codes = {}, {}, {}
            self.access, self.refresh, self.revoked_families = {}, {}, set()
            self.modes = json.loads(json.dumps(DEFAULT_MODES))
            self.access_seconds = ACCESS_SECONDS
        self.stats = Counter()
        self.token_requests = Counter()
        self.tool_calls = Counter()
        self.mcp_methods = Counter()
        self.responses = Counter()
        self.response_types = Counter()
        self.protocol_versions = Counter()
        self.authorize_log = []
        self.token_log = []

    def snapshot(self):
        return {
            "authorize_requests": self.stats["authorize_requests"],
            "authorize_redirects": self.stats["authorize_redirects"],
            "token_requests": sum(self.token_requests.values()),
            "token_requests_by_grant": dict(self.token_requests),
            "refreshes": self.stats["refreshes"],
            "registrations": self.stats["registrations"],
            "invalid_grant": self.stats["invalid_grant"],
            "refresh_reuse_detected": self.stats["refresh_reuse_detected"],
            "code_reuse_detected": self.stats["code_reuse_detected"],
            "revocations": self.stats["revocations"],
            "tool_calls": sum(self.tool_calls.values()),
            "tool_calls_by_name": dict(self.tool_calls),
            "insufficient_scope_403": self.stats["insufficient_scope_403"],
            "rejected_tokens": self.stats["rejected_tokens"],
            "mcp_methods": dict(self.mcp_methods),
            "responses": dict(self.responses),
            "response_types": dict(self.response_types),
            "protocol_versions": dict(self.protocol_versions),
            "authorize_log": self.authorize_log[-20:],
            "token_log": self.token_log[-20:],
            "modes": self.modes,
            "access_token_seconds": self.access_seconds,
            "issuer": ISSUER,
            "resource": RESOURCE,
        }


S = State()


class Provider:
    """The in-memory OAuthAuthorizationServerProvider the SDK asks for."""

    async def get_client(self, client_id):
        return S.clients.get(client_id)

    async def register_client(self, client_info):
        S.clients[client_info.client_id] = LoopbackClient.model_validate(client_info.model_dump())
        S.stats["registrations"] += 1

    async def authorize(self, client, params: AuthorizationParams):
        S.authorize_log.append(
            {
                "client_id": client.client_id,
                "redirect_uri": str(params.redirect_uri),
                "state": params.state,
                "scopes": params.scopes,
                "resource": params.resource,
            }
        )
        if params.resource is None:
            raise AuthorizeError("invalid_target", "the RFC 8707 resource parameter is required")
        if not same_resource(params.resource, RESOURCE):
            raise AuthorizeError("invalid_target", f"unknown resource; this server is {RESOURCE}")
        code = AuthorizationCode(
            code=secrets.token_urlsafe(32),
            scopes=params.scopes or [TOOLS],
            expires_at=time.time() + 300,
            client_id=client.client_id,
            code_challenge=params.code_challenge,
            redirect_uri=params.redirect_uri,
            redirect_uri_provided_explicitly=params.redirect_uri_provided_explicitly,
            resource=params.resource,
            subject=SUBJECT,
        )
        S.codes[code.code] = code
        S.stats["authorize_redirects"] += 1
        iss = {"normal": ISSUER, "omit": None, "forge": FORGED_ISSUER}[S.modes["iss"]]
        # The user is "alice" by definition: no login page, straight back with the code.
        return construct_redirect_uri(str(params.redirect_uri), code=code.code, state=params.state, iss=iss)

    async def load_authorization_code(self, client, authorization_code):
        if authorization_code in S.used_codes:  # replayed code: revoke what it produced (RFC 6749 §4.1.2)
            S.revoked_families.add(S.used_codes[authorization_code])
            S.stats["code_reuse_detected"] += 1
            return None
        code = S.codes.get(authorization_code)
        return code if code and code.client_id == client.client_id else None

    async def exchange_authorization_code(self, client, authorization_code):
        S.codes.pop(authorization_code.code, None)
        family = secrets.token_hex(8)
        S.used_codes[authorization_code.code] = family
        requested = TOKEN_RESOURCE.get()
        if requested is None:
            raise TokenError("invalid_target", "the RFC 8707 resource parameter is required in the token request")
        if not same_resource(requested, authorization_code.resource):
            raise TokenError("invalid_target", "resource does not match the authorization request")
        return self._issue(client.client_id, authorization_code.scopes, authorization_code.scopes,
                           authorization_code.resource, family)

    async def load_refresh_token(self, client, refresh_token):
        token = S.refresh.get(refresh_token)
        if token is None or token.client_id != client.client_id or token.family in S.revoked_families:
            return None
        if token.used and TOKEN_GRANT.get() == "refresh_token":
            self._reuse(token)
            return None
        return token

    async def exchange_refresh_token(self, client, refresh_token, scopes):
        if refresh_token.used or refresh_token.family in S.revoked_families:
            self._reuse(refresh_token)
            raise TokenError("invalid_grant", "refresh token already used; token family revoked")
        requested = TOKEN_RESOURCE.get()
        if requested is not None and not same_resource(requested, refresh_token.resource):
            raise TokenError("invalid_target", "resource does not match the refresh token's resource")
        refresh_token.used = True
        S.stats["refreshes"] += 1
        return self._issue(client.client_id, scopes, refresh_token.scopes, refresh_token.resource,
                           refresh_token.family)

    async def load_access_token(self, token):
        access = S.access.get(token)
        if S.modes["reject_tokens"]:
            S.stats["rejected_tokens"] += 1
            return None
        if access is None or access.family in S.revoked_families or access.expires_at <= time.time():
            return None
        return access

    async def revoke_token(self, token):
        S.revoked_families.add(token.family)
        S.stats["revocations"] += 1

    def _reuse(self, token):
        log.warning("refresh token reuse detected: revoking family %s", token.family)
        S.revoked_families.add(token.family)
        S.stats["refresh_reuse_detected"] += 1

    def _issue(self, client_id, scopes, refresh_scopes, resource, family):
        now = int(time.time())
        access = FamilyAccessToken(
            token="mat_" + secrets.token_urlsafe(24), client_id=client_id, scopes=scopes,
            expires_at=now + S.access_seconds, resource=resource, subject=SUBJECT, family=family,
        )
        refresh = FamilyRefreshToken(
            token="mrt_" + secrets.token_urlsafe(24), client_id=client_id, scopes=refresh_scopes,
            expires_at=now + REFRESH_SECONDS, resource=resource, subject=SUBJECT, family=family,
        )
        S.access[access.token], S.refresh[refresh.token] = access, refresh
        return OAuthToken(access_token=access.token, expires_in=S.access_seconds, scope=" ".join(scopes),
                          refresh_token=refresh.token)


AUTH = AuthSettings(
    issuer_url=ISSUER,
    resource_server_url=RESOURCE,
    validate_token_resource=True,
    required_scopes=[TOOLS],
    client_registration_options=ClientRegistrationOptions(
        enabled=True, valid_scopes=[TOOLS, ADMIN], default_scopes=[TOOLS, ADMIN]
    ),
    revocation_options=RevocationOptions(enabled=True),
)
mcp = MCPServer("moose-test-mcp", version="1.0.0", auth_server_provider=Provider(), auth=AUTH)


@mcp.tool()
def echo(text: str) -> str:
    """Echo the text back (scope mcp:tools)."""
    S.tool_calls["echo"] += 1
    return text


@mcp.tool()
def admin_echo(text: str) -> str:
    """Echo the text back (scopes mcp:tools and mcp:admin)."""
    S.tool_calls["admin_echo"] += 1
    return f"admin: {text}"


@mcp.tool()
async def chatty_echo(text: str, ctx: Context) -> str:
    """Echo the text back after two log notifications on the request's own stream (scope mcp:tools)."""
    S.tool_calls["chatty_echo"] += 1
    await ctx.info(f"chatty_echo: {len(text)} characters")
    await ctx.info("chatty_echo: echoing")
    return text


# ---- small ASGI helpers -------------------------------------------------------------------------

async def read_body(receive):
    body, more = b"", True
    while more:
        message = await receive()
        if message["type"] != "http.request":
            break
        body += message.get("body", b"")
        more = message.get("more_body", False)
    sent = False

    async def replay():
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return body, replay


async def send_json(send, status, obj, headers=()):
    data = json.dumps(obj).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode()),
                            *headers]})
    await send({"type": "http.response.body", "body": data})


class ToolScopeGate:
    """Per-tool scopes, inside the SDK's RequireAuthMiddleware (so the token is valid and has mcp:tools).

    A `tools/call` for a tool needing a scope the token lacks gets the MCP step-up answer: HTTP 403,
    `WWW-Authenticate: Bearer error="insufficient_scope", scope="<all scopes needed>", resource_metadata=...`.
    """

    def __init__(self, app, resource_metadata_url):
        self.app, self.resource_metadata_url = app, resource_metadata_url

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and scope["method"] == "POST":
            body, receive = await read_body(receive)
            try:
                message = json.loads(body)
            except ValueError:
                message = None
            needed = []
            for m in message if isinstance(message, list) else [message]:
                if isinstance(m, dict) and isinstance(m.get("method"), str):
                    S.mcp_methods[m["method"]] += 1
                    if m["method"] == "tools/call" and isinstance(m.get("params"), dict):
                        needed += [s for s in TOOL_SCOPES.get(m["params"].get("name"), []) if s not in needed]
            have = scope["auth"].scopes if scope.get("auth") else []
            if any(s not in have for s in needed):
                S.stats["insufficient_scope_403"] += 1
                header = (f'Bearer error="insufficient_scope", scope="{" ".join(needed)}", '
                          f'resource_metadata="{self.resource_metadata_url}", '
                          f'error_description="This tool requires scopes: {" ".join(needed)}"')
                await send_json(send, 403, {"error": "insufficient_scope",
                                            "error_description": f"This tool requires scopes: {' '.join(needed)}"},
                                [(b"www-authenticate", header.encode())])
                return
        await self.app(scope, receive, send)


async def as_metadata(request: Request):
    """RFC 8414 metadata from the SDK's own build_metadata, plus RFC 9207 support and the hostile modes."""
    metadata = build_metadata(AUTH.issuer_url, AUTH.service_documentation_url, AUTH.client_registration_options,
                              AUTH.revocation_options)
    metadata.authorization_response_iss_parameter_supported = True
    metadata.code_challenge_methods_supported = S.modes["pkce_methods"]
    return PydanticJSONResponse(content=metadata, headers={"Cache-Control": "no-store"})


class Harness:
    """Outermost ASGI layer: /_test/ control endpoints, counters, and the /token request's resource."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        method, path = scope["method"], scope["path"]
        if path.startswith("/_test/"):
            return await self.control(method, path, receive, send)
        if path == "/authorize":
            S.stats["authorize_requests"] += 1
        status = {}

        if path == "/mcp":
            version = dict(scope.get("headers", [])).get(b"mcp-protocol-version", b"(none)").decode("latin-1")
            S.protocol_versions[f"{method} {version}"] += 1

        async def counting_send(message):
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
                S.responses[f"{method} {path} {message['status']}"] += 1
                if path == "/mcp":
                    ctype = dict(message.get("headers", [])).get(b"content-type", b"(none)").decode("latin-1")
                    S.response_types[f"{method} {message['status']} {ctype.split(';')[0].strip()}"] += 1
            elif message["type"] == "http.response.body" and path == "/token" and status.get("code") == 400:
                if b'"invalid_grant"' in message.get("body", b""):
                    S.stats["invalid_grant"] += 1
            await send(message)

        if path == "/token" and method == "POST":
            body, receive = await read_body(receive)
            form = urllib.parse.parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True)
            grant = form.get("grant_type", ["(none)"])[0]
            resource = form.get("resource", [None])[0]
            S.token_requests[grant] += 1
            S.token_log.append({"grant_type": grant, "resource": resource, "scope": form.get("scope", [None])[0]})
            TOKEN_GRANT.set(grant)
            TOKEN_RESOURCE.set(resource)
        await self.app(scope, receive, counting_send)

    async def control(self, method, path, receive, send):
        body, _ = await read_body(receive)
        try:
            request = json.loads(body) if body.strip() else {}
        except ValueError:
            return await send_json(send, 400, {"error": "body must be JSON"})
        if method == "GET" and path == "/_test/stats":
            return await send_json(send, 200, S.snapshot())
        if method == "POST" and path == "/_test/reset":
            S.reset(stats_only=bool(request.get("stats_only")))
            return await send_json(send, 200, S.snapshot())
        if method == "POST" and path == "/_test/mode":
            if not isinstance(request, dict):
                return await send_json(send, 400, {"error": "body must be a JSON object"})
            valid = {"iss": lambda v: v in ("normal", "omit", "forge"),
                     "pkce_methods": lambda v: v is None or isinstance(v, list),
                     "expire_all": lambda v: v is True,
                     "reject_tokens": lambda v: isinstance(v, bool),
                     "access_token_seconds": lambda v: isinstance(v, int) and v > 0}
            for key, value in request.items():
                if key not in valid or not valid[key](value):
                    return await send_json(send, 400, {"error": f"bad mode {key}={value!r}"})
            for key, value in request.items():
                if key in ("iss", "pkce_methods", "reject_tokens"):
                    S.modes[key] = value
                elif key == "expire_all":
                    now = int(time.time())
                    for access in S.access.values():
                        access.expires_at = min(access.expires_at, now - 1)
                else:
                    S.access_seconds = value
            return await send_json(send, 200, {"modes": S.modes, "access_token_seconds": S.access_seconds})
        return await send_json(send, 404, {"error": "unknown test endpoint"})


def build_app():
    app = mcp.streamable_http_app(json_response=JSON_RESPONSE, host=HOST)
    app.router.routes.insert(0, Route("/.well-known/oauth-authorization-server",
                                      endpoint=cors_middleware(as_metadata, ["GET", "OPTIONS"]),
                                      methods=["GET", "OPTIONS"]))
    for route in app.router.routes:
        node = getattr(route, "app", None)
        while node is not None and not isinstance(node, RequireAuthMiddleware):
            node = getattr(node, "app", None)
        if isinstance(node, RequireAuthMiddleware):
            node.app = ToolScopeGate(node.app, node.resource_metadata_url)
            break
    else:
        raise SystemExit("could not find the SDK's RequireAuthMiddleware on /mcp")
    return Harness(app)


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    log.info("issuer %s, resource %s, access tokens %ss", ISSUER, RESOURCE, ACCESS_SECONDS)
    uvicorn.run(build_app(), host=HOST, port=PORT, log_level="info")
