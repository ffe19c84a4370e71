"""Creates authgent's tables and the two fixed test clients (run by tools/authgent/start, before the server).

authgent's own /register endpoint only hands out random client ids (agnt_...), so the clients are
written straight into its database through its own models, with fixed ids the tests can name:
  moose-ci               public: send client_id only, no secret (a secret sent for it is refused)
  moose-ci-confidential  secret MOOSE_AUTHGENT_CLIENT_SECRET (default moose-ci-secret), as
                         client_secret_basic or client_secret_post
Both may use the token-exchange, jwt-bearer and client_credentials grants. Reads AUTHGENT_* from the environment.
"""

import asyncio
import os

import bcrypt
from authgent_server.config import get_settings
from authgent_server.db import get_engine, get_session_factory
from authgent_server.models.base import Base
from authgent_server.models.oauth_client import OAuthClient

GRANTS = [
    "urn:ietf:params:oauth:grant-type:token-exchange",
    "urn:ietf:params:oauth:grant-type:jwt-bearer",
    "client_credentials",
]


def hashed(secret: str) -> str:
    # low cost on purpose: authgent checks the secret with bcrypt on every token request
    return bcrypt.hashpw(secret.encode(), bcrypt.gensalt(rounds=4)).decode()


async def main() -> None:
    settings = get_settings()
    engine = get_engine(settings)
    async with engine.begin() as conn:
        await conn.run_sync(Base.metadata.create_all)
    clients = [
        ("moose-ci", hashed(os.urandom(24).hex()), "none"),
        ("moose-ci-confidential", hashed(os.environ.get("MOOSE_AUTHGENT_CLIENT_SECRET", "moose-ci-secret")),
         "client_secret_basic"),
    ]
    async with get_session_factory(settings)() as db:
        for client_id, secret_hash, method in clients:
            await db.merge(OAuthClient(
                client_id=client_id,
                client_secret_hash=secret_hash,
                client_name=client_id,
                grant_types=GRANTS,
                redirect_uris=[],
                scope=None,
                allowed_resources=None,
                token_endpoint_auth_method=method,
            ))
        await db.commit()
    await engine.dispose()


asyncio.run(main())
