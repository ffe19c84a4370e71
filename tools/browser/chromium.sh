#!/usr/bin/env bash
# $BROWSER for Moose: BROWSER="tools/browser/chromium.sh" moose login …
# Runs tools/browser/setup (a no-op once installed), then chromium_login.py with the same arguments.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
python=$("$here/setup")
exec "$python" "$here/chromium_login.py" "$@"
