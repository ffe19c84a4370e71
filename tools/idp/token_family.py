#!/usr/bin/env python3
"""Prints how many refresh tokens the test IdP has issued in the family of the refresh token on
stdin (1 after login, +1 per refresh). Reads the provider's SQLite database read-only."""
import hashlib
import os
import sqlite3
import sys

state = os.environ.get("MOOSE_IDP_STATE", os.path.join(os.path.dirname(os.path.abspath(__file__)), ".state"))
db = sqlite3.connect(f"file:{os.path.join(state, 'db.sqlite3')}?mode=ro", uri=True, timeout=30)
checksum = hashlib.sha256(sys.stdin.read().strip().encode()).hexdigest()
row = db.execute("SELECT token_family FROM oauth2_provider_refreshtoken WHERE token_checksum = ?", (checksum,)).fetchone()
print(db.execute("SELECT COUNT(*) FROM oauth2_provider_refreshtoken WHERE token_family = ?", (row[0],)).fetchone()[0] if row else 0)
