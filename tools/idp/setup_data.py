"""Creates the test user and the clients (idempotent). Run through manage.py shell."""
from django.contrib.auth import get_user_model
from oauth2_provider.models import get_application_model

User = get_user_model()
Application = get_application_model()

if not User.objects.filter(username="alice").exists():
    User.objects.create_user("alice", email="alice@example.com", password="wonderland-42",
                             first_name="Alice", last_name="Liddell")

CLIENTS = [
    # client_id, type, grant, secret, redirect URIs
    ("moose-cli", Application.CLIENT_PUBLIC, Application.GRANT_AUTHORIZATION_CODE, "",
     "http://127.0.0.1/callback http://localhost/callback"),
    ("moose-confidential", Application.CLIENT_CONFIDENTIAL, Application.GRANT_AUTHORIZATION_CODE, "moose-confidential-secret",
     "http://127.0.0.1/callback"),
    ("moose-device", Application.CLIENT_PUBLIC, Application.GRANT_DEVICE_CODE, "", ""),
    ("moose-service", Application.CLIENT_CONFIDENTIAL, Application.GRANT_CLIENT_CREDENTIALS, "moose-service-secret", ""),
]
for client_id, client_type, grant, secret, redirects in CLIENTS:
    if Application.objects.filter(client_id=client_id).exists():
        continue
    Application.objects.create(
        name=client_id, client_id=client_id, client_secret=secret, client_type=client_type,
        authorization_grant_type=grant, redirect_uris=redirects,
        post_logout_redirect_uris="http://127.0.0.1/logged-out", algorithm=Application.RS256_ALGORITHM,
        skip_authorization=True,
    )
# moose-browser: like moose-cli, but the consent page is shown (tools/browser drives a real browser through it).
if not Application.objects.filter(client_id="moose-browser").exists():
    Application.objects.create(
        name="moose-browser", client_id="moose-browser", client_secret="", client_type=Application.CLIENT_PUBLIC,
        authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE, redirect_uris="http://127.0.0.1/callback",
        post_logout_redirect_uris="http://127.0.0.1/logged-out", algorithm=Application.RS256_ALGORITHM,
        skip_authorization=False,
    )
# moose-resource-server: tools/resource's servers authenticate with it (HTTP Basic) at /introspect/ (RFC 7662).
# Its secret is stored unhashed: a hashed one costs a PBKDF2 check (~0.3 s of CPU) on every introspection.
_rs = Application.objects.filter(client_id="moose-resource-server").first()
if _rs is None:
    Application.objects.create(
        name="moose-resource-server", client_id="moose-resource-server", client_secret="moose-resource-server-secret",
        hash_client_secret=False, client_type=Application.CLIENT_CONFIDENTIAL,
        authorization_grant_type=Application.GRANT_CLIENT_CREDENTIALS, redirect_uris="",
        algorithm=Application.RS256_ALGORITHM, skip_authorization=True,
    )
elif _rs.hash_client_secret:
    _rs.hash_client_secret = False
    _rs.client_secret = "moose-resource-server-secret"
    _rs.save()
print("setup done")
