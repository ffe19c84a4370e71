"""Settings of Moose's test identity provider: django-oauth-toolkit as a real OAuth 2.0 / OpenID
Connect provider on 127.0.0.1. Test-only: a fixed secret key, no HTTPS, SQLite."""
import os
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent
STATE = Path(os.environ.get("MOOSE_IDP_STATE", BASE_DIR.parent / ".state"))
PORT = int(os.environ.get("MOOSE_IDP_PORT", "8765"))
ISSUER = f"http://127.0.0.1:{PORT}"

SECRET_KEY = "moose-test-idp-only-never-in-production"
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]

INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "oauth2_provider",
]
MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
]
ROOT_URLCONF = "idp.urls"
TEMPLATES = [{
    "BACKEND": "django.template.backends.django.DjangoTemplates",
    "DIRS": [BASE_DIR / "templates"],
    "APP_DIRS": True,
    "OPTIONS": {"context_processors": [
        "django.template.context_processors.request",
        "django.contrib.auth.context_processors.auth",
        "django.contrib.messages.context_processors.messages",
    ]},
}]
# Test-only: a cheap password hasher first. Django's default (PBKDF2, 1,000,000 iterations) costs ~0.6 s
# of CPU for every sign-in and every confidential client's token request (client secrets are hashed
# too); the parallel suites make hundreds of those on 2 cores, and the IdP then answered past the tests'
# 20 s timeouts (CI, 2026-11-24). Hashes made earlier with PBKDF2 still verify.
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher", "django.contrib.auth.hashers.PBKDF2PasswordHasher"]

# Concurrent requests under the threaded dev server need a busy timeout, IMMEDIATE writes and WAL,
# or SQLite answers "database is locked" (500).
DATABASES = {"default": {
    "ENGINE": "django.db.backends.sqlite3",
    "NAME": STATE / "db.sqlite3",
    "OPTIONS": {"timeout": 30, "transaction_mode": "IMMEDIATE", "init_command": "PRAGMA journal_mode=WAL;"},
}}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
STATIC_URL = "/static/"
LOGIN_URL = "/accounts/login/"
USE_TZ = True

_key_file = STATE / "oidc.key"
OAUTH2_PROVIDER = {
    "OAUTH2_VALIDATOR_CLASS": "idp.validators.MooseValidator",
    "OIDC_ENABLED": True,
    "OIDC_RSA_PRIVATE_KEY": _key_file.read_text() if _key_file.exists() else "",
    "OIDC_ISS_ENDPOINT": ISSUER,
    # RFC 9207: `iss` in every authorization response, promised in both discovery documents
    # (authorization_response_iss_parameter_supported), as RFC 9700 §4.4 recommends.
    "COMPLIANT_BCP_RFC9700_AUTHZ_RESPONSE_ISS": True,
    "PKCE_REQUIRED": True,
    "ROTATE_REFRESH_TOKEN": True,
    "REFRESH_TOKEN_REUSE_PROTECTION": False,
    "OIDC_RP_INITIATED_LOGOUT_ENABLED": True,
    "OIDC_RP_INITIATED_LOGOUT_ALWAYS_PROMPT": False,
    "DEVICE_FLOW_INTERVAL": 1,
    "OAUTH_DEVICE_VERIFICATION_URI": f"{ISSUER}/device/",
    "ACCESS_TOKEN_EXPIRE_SECONDS": int(os.environ.get("MOOSE_IDP_ACCESS_TOKEN_SECONDS", "60")),
    "REFRESH_TOKEN_EXPIRE_SECONDS": 24 * 3600,
    "ID_TOKEN_EXPIRE_SECONDS": int(os.environ.get("MOOSE_IDP_ID_TOKEN_SECONDS", "36000")),
    "SCOPES": {"openid": "OpenID Connect", "profile": "Profile", "email": "Email", "read": "Read", "write": "Write"},
    "DEFAULT_SCOPES": ["openid"],
}
LOGGING = {
    "version": 1,
    "handlers": {"file": {"class": "logging.FileHandler", "filename": str(STATE / "requests.log")}},
    "loggers": {"django.server": {"handlers": ["file"], "level": "INFO"}},
}
