#!/usr/bin/env python3
"""The Python MCP SDK's OAuth client (`OAuthClientProvider`) against mcp_resource_server.py, whose tokens
come from moose-test-provider. Run by tools/test-provider/check with the venv of tools/test-provider/setup:

    python mcp_client.py MCP_URL ISSUER RS_CLIENT_ID RS_CLIENT_SECRET

From nothing but the MCP URL, the SDK goes: 401 -> RFC 9728 protected resource metadata -> the provider's
RFC 8414 metadata -> RFC 7591 registration at the provider -> authorization code + PKCE with the RFC 8707
`resource` (the redirect handler below GETs the authorization URL without following the redirect; the
callback handler hands the SDK the code, state and iss of its Location) -> the token -> the MCP call of
`whoami`, which answers the subject the resource server verified. Then the resource server's audience
check is tried with client-credentials tokens of the provider's `test-service` (secret service-secret),
and revocation. RS_CLIENT_ID/SECRET: the confidential client the resource server introspects with (used
here to read what the provider says about the SDK's token). One PASS/FAIL line per check; exits 1 on any FAIL.
"""
import contextlib
import sys
import urllib.parse

import anyio
import httpx2
from mcp import Client
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientMetadata

TIMEOUT = 10  # seconds, every HTTP request
FLOW_TIMEOUT = 60  # seconds, the whole SDK session
REDIRECT_URI = "http://127.0.0.1/callback"  # registered by the SDK; never listened on (the redirect is only read)
SERVICE, SERVICE_SECRET = "test-service", "service-secret"
USER = "alice"
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                         "clientInfo": {"name": "mcp_client.py", "version": "1"}}}
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}

passed = failed = 0


@contextlib.contextmanager
def check(what):
    """One check: PASS when the block ends normally, FAIL with the reason when it raises."""
    global passed, failed
    try:
        yield
    except Exception as error:
        failed += 1
        print(f"FAIL {what}: {str(error) or type(error).__name__}", flush=True)
    else:
        passed += 1
        print(f"PASS {what}", flush=True)


def expect(condition, message):
    if not condition:
        raise AssertionError(message)


def query_of(url):
    return {k: v[0] for k, v in urllib.parse.parse_qs(urllib.parse.urlsplit(url).query).items()}


class Storage:
    """The SDK's TokenStorage, in memory and empty at first: the SDK must register its client."""

    def __init__(self):
        self.tokens = self.client = None

    async def get_tokens(self):
        return self.tokens

    async def set_tokens(self, tokens):
        self.tokens = tokens

    async def get_client_info(self):
        return self.client

    async def set_client_info(self, client_info):
        self.client = client_info


async def main(url, issuer, rs_client, rs_secret):
    origin = url.rsplit("/mcp", 1)[0]
    prm_url = origin + "/.well-known/oauth-protected-resource/mcp"
    plain = httpx2.AsyncClient(timeout=TIMEOUT)

    async def mcp_status(token):
        """The status of an MCP initialize sent with `token` as the bearer token."""
        response = await plain.post(url, json=INITIALIZE, headers={**MCP_HEADERS, "Authorization": f"Bearer {token}"})
        return response.status_code

    async def service_token(**form):
        """A client-credentials access token of test-service, with `form` (resource…)."""
        response = await plain.post(issuer + "/token", data={"grant_type": "client_credentials", **form},
                                    auth=(SERVICE, SERVICE_SECRET))
        expect(response.status_code == 200, f"token endpoint {response.status_code}: {response.text[:200]}")
        return response.json()["access_token"]

    async def introspect(token):
        response = await plain.post(issuer + "/introspect", data={"token": token}, auth=(rs_client, rs_secret))
        expect(response.status_code == 200, f"introspection {response.status_code}: {response.text[:200]}")
        return response.json()

    with check("mcp: without a token the MCP endpoint answers 401 naming its resource metadata (RFC 9728 §5.1)"):
        response = await plain.post(url, json=INITIALIZE, headers=MCP_HEADERS)
        expect(response.status_code == 401, f"status {response.status_code}")
        challenge = response.headers.get("www-authenticate", "")
        expect(challenge.startswith("Bearer") and f'resource_metadata="{prm_url}"' in challenge,
               f"WWW-Authenticate {challenge!r}")
    with check("mcp: the protected resource metadata names this URL and the provider as its authorization server"):
        response = await plain.get(prm_url)
        expect(response.status_code == 200, f"status {response.status_code}")
        prm = response.json()
        expect(prm.get("resource") == url, f"resource {prm.get('resource')!r}")
        expect(prm.get("authorization_servers") == [issuer],
               f"authorization_servers {prm.get('authorization_servers')!r}")

    # --- the SDK's own OAuth flow, from the 401 to the tool call -------------------------------------
    seen, authorization = [], {}

    async def record(request):
        seen.append(f"{request.method} {request.url.copy_with(query=None)}")
        if str(request.url) == issuer + "/token":
            authorization["token_request"] = dict(urllib.parse.parse_qsl(request.content.decode()))
            authorization["token_authorization"] = request.headers.get("authorization", "")

    async def record_response(response):
        seen[-1] += f" {response.status_code}"

    async def redirect_handler(authorization_url):
        """The user's browser: GET the authorization URL, read the redirect, follow nothing."""
        authorization["request"] = query_of(authorization_url)
        response = await plain.get(authorization_url, follow_redirects=False)
        authorization["status"] = response.status_code
        authorization["location"] = response.headers.get("location", "")
        authorization["answer"] = query_of(authorization["location"])

    async def callback_handler():
        answer = authorization.get("answer", {})
        if "code" not in answer:
            raise RuntimeError(f"no code: /authorize answered {authorization.get('status')} "
                               f"{authorization.get('location')}")
        return AuthorizationCodeResult(code=answer["code"], state=answer.get("state"), iss=answer.get("iss"))

    storage = Storage()
    provider = OAuthClientProvider(
        server_url=url,
        client_metadata=OAuthClientMetadata(redirect_uris=[REDIRECT_URI], client_name="mcp_client.py",
                                            grant_types=["authorization_code", "refresh_token"]),
        storage=storage, redirect_handler=redirect_handler, callback_handler=callback_handler)
    whoami, tools = None, []
    with check("mcp: the SDK client (OAuthClientProvider) logs in by itself and calls whoami -> alice"):
        with anyio.fail_after(FLOW_TIMEOUT):
            async with httpx2.AsyncClient(auth=provider, timeout=TIMEOUT,
                                          event_hooks={"request": [record], "response": [record_response]}) as http:
                async with Client(streamable_http_client(url, http_client=http), mode="legacy") as client:
                    tools = [tool.name for tool in (await client.list_tools()).tools]
                    result = await client.call_tool("whoami", {})
                    expect(not result.is_error, f"the tool call failed: {result.content}")
                    whoami = " ".join(getattr(item, "text", "") for item in result.content)
        expect(tools == ["whoami"], f"tools {tools}")
        expect(whoami == USER, f"whoami answered {whoami!r}")
    with check("mcp: the requests went 401 -> resource metadata -> provider metadata -> /register -> /token -> MCP"):
        wanted = [f"POST {url} 401", f"GET {prm_url} 200", f"GET {issuer}/.well-known/oauth-authorization-server 200",
                  f"POST {issuer}/register 201", f"POST {issuer}/token 200", f"POST {url} 200"]
        expect(seen[:len(wanted)] == wanted, f"requests {seen}")
    with check("mcp: RFC 7591 registration at the provider gave the SDK a client id and secret (client_secret_basic)"):
        expect(storage.client is not None, "nothing registered")
        expect(storage.client.client_id.startswith("registered-"), f"client_id {storage.client.client_id!r}")
        expect(storage.client.token_endpoint_auth_method == "client_secret_basic" and storage.client.client_secret,
               f"method {storage.client.token_endpoint_auth_method!r}")
    # The scope: the resource metadata's scopes_supported, plus offline_access because the provider offers it
    # and the client registered for refresh tokens (the SDK's SEP-2207 rule).
    with check("mcp: the authorization request had PKCE S256, the RFC 8707 resource, scope mcp:tools offline_access"):
        asked = authorization.get("request", {})
        expect(asked.get("code_challenge_method") == "S256" and asked.get("code_challenge"), f"request {asked}")
        expect(asked.get("resource") == url, f"resource {asked.get('resource')!r}")
        expect(asked.get("scope") == "mcp:tools offline_access", f"scope {asked.get('scope')!r}")
        expect(asked.get("client_id") == (storage.client.client_id if storage.client else None), "another client id")
    with check("mcp: /authorize answered 302 at once with the code, the state sent and iss = the issuer (RFC 9207)"):
        answer = authorization.get("answer", {})
        expect(authorization.get("status") == 302, f"status {authorization.get('status')}")
        expect(authorization.get("location", "").startswith(REDIRECT_URI + "?"),
               f"Location {authorization.get('location')}")
        expect(answer.get("code") and answer.get("state") == authorization["request"].get("state"), f"answer {answer}")
        expect(answer.get("iss") == issuer, f"iss {answer.get('iss')!r}")
    with check("mcp: the token request had the code, the PKCE verifier, the resource and Basic credentials"):
        sent = authorization.get("token_request", {})
        expect(sent.get("grant_type") == "authorization_code"
               and sent.get("code") == authorization["answer"].get("code"), f"sent {sorted(sent)}")
        expect(sent.get("code_verifier") and sent.get("resource") == url, f"sent {sorted(sent)}")
        expect(authorization.get("token_authorization", "").startswith("Basic "), "no Basic credentials")
    access_token = storage.tokens.access_token if storage.tokens else None
    with check("mcp: the provider's introspection of the SDK's token: active, alice, its client, aud = this MCP URL"):
        expect(access_token, "the SDK holds no token")
        answer = await introspect(access_token)
        expect(answer.get("active") is True and answer.get("sub") == USER, f"answer {answer}")
        expect(answer.get("client_id") == storage.client.client_id, f"client_id {answer.get('client_id')!r}")
        expect(answer.get("aud") == [url], f"aud {answer.get('aud')!r}")
        expect(answer.get("scope") == "mcp:tools offline_access", f"scope {answer.get('scope')!r}")

    # --- the resource server's audience check (RFC 8707) ----------------------------------------------
    with check("audience: a provider token whose aud is this MCP URL is accepted (200)"):
        status = await mcp_status(await service_token(resource=url, scope="mcp:tools"))
        expect(status == 200, f"status {status}")
    with check("audience: a provider token for another resource is refused (401)"):
        status = await mcp_status(await service_token(resource=origin + "/other", scope="mcp:tools"))
        expect(status == 401, f"status {status}")
    with check("audience: a provider token with no resource (aud = the client id) is refused (401)"):
        status = await mcp_status(await service_token(scope="mcp:tools"))
        expect(status == 401, f"status {status}")
    with check("scope: a provider token for this MCP URL without mcp:tools is refused (403 insufficient_scope)"):
        status = await mcp_status(await service_token(resource=url, scope="other"))
        expect(status == 403, f"status {status}")

    # --- revocation reaches the resource server through introspection ----------------------------------
    with check("revocation: the SDK's access token, revoked at the provider by its client, is then refused (401)"):
        expect(await mcp_status(access_token) == 200, "the token was not accepted before its revocation")
        client = storage.client
        response = await plain.post(issuer + "/revoke", data={"token": access_token, "token_type_hint": "access_token"},
                                    auth=(client.client_id, client.client_secret))
        expect(response.status_code == 200, f"revocation {response.status_code}: {response.text[:200]}")
        status = await mcp_status(access_token)
        expect(status == 401, f"status {status}")
    await plain.aclose()


if __name__ == "__main__":
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    try:
        anyio.run(main, *sys.argv[1:])
    except Exception as error:  # outside any check: counts as one failure
        failed += 1
        print(f"FAIL mcp_client stopped: {type(error).__name__}: {error}", flush=True)
    print(f"mcp_client.py: {passed} PASS, {failed} FAIL", flush=True)
    sys.exit(1 if failed or not passed else 0)
