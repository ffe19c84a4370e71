#!/usr/bin/env python3
"""An MCP resource server (the Python MCP SDK's MCPServer, Streamable HTTP at /mcp) that trusts
moose-test-provider: it is no authorization server itself. Bearer tokens are checked by RFC 7662
introspection at the provider, with a confidential client; a token is accepted only when it is active,
was issued by the provider, and names this server's URL in `aud` (RFC 8707: the provider puts the
`resource` a client asked for there). The SDK serves RFC 9728 protected resource metadata pointing at
the provider, and answers 401 with `resource_metadata` without a valid token. One tool, `whoami`,
returns the verified subject.

    python mcp_resource_server.py ISSUER CLIENT_ID CLIENT_SECRET

Listens on 127.0.0.1, on a port the system picks; prints its MCP URL (http://127.0.0.1:PORT/mcp) on the
first line of stdout, then serves until SIGTERM. Logs go to stderr. Test support only.
"""
import logging
import socket
import sys

import httpx2
import uvicorn
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import MCPServer

TIMEOUT = 10  # seconds, every request to the provider
SCOPE = "mcp:tools"

log = logging.getLogger("mcp-resource-server")


class IntrospectionVerifier:
    """The SDK's TokenVerifier, by RFC 7662 introspection at the provider."""

    def __init__(self, issuer, endpoint, client_id, client_secret, resource):
        self.issuer, self.endpoint, self.resource = issuer, endpoint, resource
        self.credentials = (client_id, client_secret)

    async def verify_token(self, token):
        try:
            async with httpx2.AsyncClient(timeout=TIMEOUT) as http:
                response = await http.post(self.endpoint, data={"token": token, "token_type_hint": "access_token"},
                                           auth=self.credentials)
        except httpx2.HTTPError as error:
            log.warning("introspection failed: %s", error)
            return None
        if response.status_code != 200:
            log.warning("introspection answered %s: %s", response.status_code, response.text[:200])
            return None
        answer = response.json()
        if answer.get("active") is not True:
            log.info("token refused: not active")
            return None
        if answer.get("iss") != self.issuer:
            log.warning("token refused: issuer %r", answer.get("iss"))
            return None
        audience = answer.get("aud")
        audiences = [audience] if isinstance(audience, str) else list(audience or [])
        if self.resource not in audiences:  # RFC 8707: a token for another resource is not ours to accept
            log.warning("token refused: aud %r is not %s", audiences, self.resource)
            return None
        return AccessToken(token=token, client_id=answer.get("client_id", ""),
                           scopes=(answer.get("scope") or "").split(), expires_at=answer.get("exp"),
                           resource=self.resource, subject=answer.get("sub"),
                           claims={"iss": self.issuer, "aud": audiences})


def main(issuer, client_id, client_secret):
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    resource = f"http://127.0.0.1:{listener.getsockname()[1]}/mcp"

    # The introspection endpoint from the provider's RFC 8414 metadata.
    metadata = httpx2.get(issuer + "/.well-known/oauth-authorization-server", timeout=TIMEOUT).raise_for_status().json()
    if metadata.get("issuer") != issuer:
        raise SystemExit(f"the provider's metadata names issuer {metadata.get('issuer')!r}, not {issuer!r}")
    verifier = IntrospectionVerifier(issuer, metadata["introspection_endpoint"], client_id, client_secret, resource)

    # validate_token_resource: the SDK's bearer middleware checks AccessToken.resource too (belt and braces).
    auth = AuthSettings(issuer_url=issuer, resource_server_url=resource, required_scopes=[SCOPE],
                        validate_token_resource=True)
    server = MCPServer("moose-test-provider-resource", version="1.0.0", auth=auth, token_verifier=verifier)

    @server.tool()
    def whoami() -> str:
        """The subject of the verified access token."""
        token = get_access_token()
        return token.subject if token and token.subject else "(nobody)"

    app = server.streamable_http_app(host="127.0.0.1")
    print(resource, flush=True)
    uvicorn.Server(uvicorn.Config(app, log_level="warning")).run(sockets=[listener])


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="mcp_resource_server: %(levelname)s %(message)s")
    logging.getLogger("httpx2").setLevel(logging.WARNING)
    main(*sys.argv[1:])
