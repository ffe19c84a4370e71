#!/usr/bin/env python3
"""The Python MCP SDK's client against a Swift MCP server protected by Moose (MooseMCP's MCPResourceGate),
for Tests/MooseMCPTests/MCPServerSideTests.swift. Run with tools/mcp's venv (mcp 2.3.0):

    .state/venv/bin/python swift_server_client.py oauth URL          # the SDK's OAuthClientProvider does it all
    .state/venv/bin/python swift_server_client.py token URL TOKEN    # a token obtained elsewhere, as a header
    .state/venv/bin/python swift_server_client.py sessions URL ALICE BOB ALICE2   # MCPSessions, two users

`oauth`: the SDK's own OAuth client starts from the server's 401, reads `resource_metadata` (RFC 9728), the
authorization server's metadata (RFC 8414), and logs in with the authorization code flow (PKCE, state,
RFC 9207 iss, RFC 8707 resource) as the test IdP's user alice (tools/idp), through the IdP's login form
with tools/idp/headless_browser.py. The IdP has no dynamic client registration, so the client information
of its pre-registered public client `moose-cli` is put in the SDK's token storage beforehand — the SDK then
skips registration, as it does for any pre-registered client.

`oauth` and `token` print one JSON object: the tools listed, the text of a `whoami` call, and the OAuth
requests seen.

`sessions`: a Swift server of MooseMCP's `MCPSessions` (a session per `initialize`, bound to its caller).
Alice and bob (tokens ALICE and BOB) each open an SDK session (`initialize`, `tools/list`, the SDK's
standalone GET stream) and, both at once, make 16 concurrent `whoami` calls on it; then bob, with his own
token, presents alice's `Mcp-Session-Id` (a call, a `DELETE`); then alice calls again, switches to ALICE2 (a
refreshed token of hers: same user, same client) and calls again on the same session; both leave (the SDK's
`DELETE`). Every call is bounded (CALL_SECONDS; past it, "hang"). Prints one JSON object, see `sessions`.
Test support only.
"""
import json
import os
import sys
import subprocess
import urllib.parse

import time
from contextlib import AsyncExitStack

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


CALL_SECONDS = 20
# The SDK's own client timeouts (mcp.shared._httpx_utils): 30 s, but 300 s between reads, since a session's
# GET stream may carry nothing for a while. 30 s for reads too ended the GET stream with ReadTimeout once
# (a run's crowded first minute), and the whole client with it.
SDK_TIMEOUT = httpx2.Timeout(30, read=300)
SESSION_HEADER = "mcp-session-id"


async def bounded_whoami(client):
    """The text of one `whoami` call; "hang" past CALL_SECONDS; "error: …" when it fails."""
    try:
        with anyio.fail_after(CALL_SECONDS):
            result = await client.call_tool("whoami", {})
        return " ".join(getattr(item, "text", "") for item in result.content)
    except TimeoutError:
        return "hang"
    except Exception as error:  # noqa: BLE001 - reported to the Swift test as a wrong answer
        return f"error: {type(error).__name__}: {error}"


async def sessions(url, tokens):
    """Two users on MCPSessions through the SDK's client (see the module's doc). Returns the JSON object:
    per user its session id, tools, the 16 concurrent answers, the answers after bob's attempts and after
    the token switch (alice), the session ids its requests carried, its requests (method, session, status);
    bob's attempts on alice's session (status, body); the seconds it all took."""
    started = time.monotonic()
    users = {}
    for name in ("alice", "bob"):
        log, pending = [], {}

        async def record(request, log=log, pending=pending):
            entry = {"method": request.method, "session": request.headers.get(SESSION_HEADER), "status": None}
            log.append(entry)
            pending[id(request)] = entry

        async def record_response(response, pending=pending):
            entry = pending.pop(id(response.request), None)
            if entry is not None:
                entry["status"] = response.status_code
                entry["session"] = entry["session"] or response.headers.get(SESSION_HEADER)

        users[name] = {"log": log, "http": httpx2.AsyncClient(
            headers={"Authorization": f"Bearer {tokens[name]}"}, timeout=SDK_TIMEOUT,
            event_hooks={"request": [record], "response": [record_response]})}
    result = {}
    async with AsyncExitStack() as stack:
        clients = {}
        for name, user in users.items():
            await stack.enter_async_context(user["http"])
            clients[name] = await stack.enter_async_context(
                Client(streamable_http_client(url, http_client=user["http"]), mode="legacy"))
            tools = await clients[name].list_tools()
            result[name] = {"tools": [tool.name for tool in tools.tools], "answers": []}
        for name in users:
            opened = [e["session"] for e in users[name]["log"] if e["method"] == "POST" and e["session"]]
            result[name]["session"] = opened[0] if opened else None

        async with anyio.create_task_group() as group:  # 2 users x 16 calls, all at once
            for name in users:
                for _ in range(16):
                    async def call(name=name):
                        result[name]["answers"].append(await bounded_whoami(clients[name]))
                    group.start_soon(call)

        # Bob, with his own valid token, names alice's session: a call, then a DELETE.
        alice_session = result["alice"]["session"] or ""
        headers = {SESSION_HEADER: alice_session, "MCP-Protocol-Version": "2025-11-25",
                   "Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
        body = '{"jsonrpc":"2.0","id":99,"method":"tools/call","params":{"name":"whoami","arguments":{}}}'
        with anyio.fail_after(CALL_SECONDS):
            stolen = await users["bob"]["http"].post(url, content=body, headers=headers)
            deleted = await users["bob"]["http"].delete(url, headers=headers)
        result["bob_on_alices_session"] = {"call": stolen.status_code, "body": stolen.text,
                                           "delete": deleted.status_code}
        result["alice"]["after_bob"] = await bounded_whoami(clients["alice"])
        # A refreshed token of alice's: the same session goes on.
        users["alice"]["http"].headers["Authorization"] = f"Bearer {tokens['alice2']}"
        mark = len(users["alice"]["log"])
        result["alice"]["after_refresh"] = await bounded_whoami(clients["alice"])
        result["alice"]["sessions_after_refresh"] = sorted(
            {str(e["session"]) for e in users["alice"]["log"][mark:] if e["method"] == "POST"})
    for name, user in users.items():
        own = result[name]["session"]
        result[name]["requests"] = [f'{e["method"]} {"true" if e["session"] == own else "false"} {e["status"]}'
                                    for e in user["log"]]
    result["seconds"] = round(time.monotonic() - started, 3)
    return result


async def main():
    mode, url = sys.argv[1], sys.argv[2]
    if mode == "sessions":
        tokens = dict(zip(("alice", "bob", "alice2"), sys.argv[3:6]))
        print(json.dumps(await sessions(url, tokens)))
        return
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
        http = httpx2.AsyncClient(auth=provider, event_hooks=hooks, timeout=SDK_TIMEOUT)
    elif mode == "token":
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {sys.argv[3]}"}, event_hooks=hooks,
                                  timeout=SDK_TIMEOUT)
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
