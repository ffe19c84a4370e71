#!/usr/bin/env python3
"""The Python MCP SDK's client against a Swift MCP server protected by Moose (MooseMCP's MCPResourceGate),
for Tests/MooseMCPTests/MCPServerSideTests.swift. Run with tools/mcp's venv (mcp 2.3.0):

    .state/venv/bin/python swift_server_client.py oauth URL          # the SDK's OAuthClientProvider does it all
    .state/venv/bin/python swift_server_client.py token URL TOKEN    # a token obtained elsewhere, as a header

`oauth`: the SDK's own OAuth client starts from the server's 401, reads `resource_metadata` (RFC 9728), the
authorization server's metadata (RFC 8414), and logs in with the authorization code flow (PKCE, state,
RFC 9207 iss, RFC 8707 resource) as the test IdP's user alice (tools/idp), through the IdP's login form
with tools/idp/headless_browser.py. The IdP has no dynamic client registration, so the client information
of its pre-registered public client `moose-cli` is put in the SDK's token storage beforehand — the SDK then
skips registration, as it does for any pre-registered client.

Prints one JSON object: the tools listed, the text of a `whoami` call, and the OAuth requests seen.
Test support only.
"""
import json
import os
import sys
import subprocess
import urllib.parse

import anyio
import httpx2
from mcp import Client
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata

BROWSER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "idp", "headless_browser.py")

REDIRECT_URI = "http://127.0.0.1/callback"


class Storage:
    """The SDK's TokenStorage, in memory, holding the pre-registered client from the start."""

    def __init__(self):
        self.tokens = None
        self.client = OAuthClientInformationFull(client_id="moose-cli", redirect_uris=[REDIRECT_URI],
                                                 token_endpoint_auth_method="none",
                                                 grant_types=["authorization_code", "refresh_token"])

    async def get_tokens(self):
        return self.tokens

    async def set_tokens(self, tokens):
        self.tokens = tokens

    async def get_client_info(self):
        return self.client

    async def set_client_info(self, client_info):
        self.client = client_info


def log_in(authorization_url):
    """Signs in as alice with tools/idp/headless_browser.py (the IdP's own scripted login, which prints the
    address the browser ends on) and returns the redirect's query (code, state, iss)."""
    result = subprocess.run([sys.executable, BROWSER, authorization_url], capture_output=True, text=True, timeout=60,
                            env={**os.environ, "MOOSE_BROWSER_PRINT_REDIRECT": "1"})
    lines = result.stdout.strip().splitlines()
    if result.returncode != 0 or not lines:
        raise RuntimeError(f"login: {result.stderr.strip() or 'the headless browser printed no redirect'}")
    return {k: v[0] for k, v in urllib.parse.parse_qs(urllib.parse.urlsplit(lines[-1]).query).items()}


async def main():
    mode, url = sys.argv[1], sys.argv[2]
    seen = []

    async def record(request):
        seen.append(f"{request.method} {request.url.copy_with(query=None)}")

    async def record_response(response):
        seen[-1] += f" -> {response.status_code}"

    hooks = {"request": [record], "response": [record_response]}
    if mode == "oauth":
        answer = {}

        async def redirect_handler(authorization_url):
            answer.update(await anyio.to_thread.run_sync(log_in, authorization_url))

        async def callback_handler():
            return AuthorizationCodeResult(code=answer["code"], state=answer.get("state"), iss=answer.get("iss"))

        provider = OAuthClientProvider(
            server_url=url,
            client_metadata=OAuthClientMetadata(redirect_uris=[REDIRECT_URI], token_endpoint_auth_method="none",
                                                grant_types=["authorization_code", "refresh_token"], client_name="moose-cli"),
            storage=Storage(), redirect_handler=redirect_handler, callback_handler=callback_handler)
        http = httpx2.AsyncClient(auth=provider, event_hooks=hooks, timeout=30)
    elif mode == "token":
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {sys.argv[3]}"}, event_hooks=hooks, timeout=30)
    else:
        raise SystemExit(f"unknown mode {mode}")

    async with http:
        async with Client(streamable_http_client(url, http_client=http), mode="legacy") as client:
            tools = await client.list_tools()
            result = await client.call_tool("whoami", {})
            text = " ".join(getattr(item, "text", "") for item in result.content)
    print(json.dumps({"tools": [tool.name for tool in tools.tools], "whoami": text, "isError": bool(result.is_error),
                      "requests": seen}))


if __name__ == "__main__":
    anyio.run(main)
