#!/usr/bin/env bash
# Checks tools/secretsvc end to end with secret-tool: a store/lookup/clear round trip, a lookup of a
# missing item, persistence across stop+start, and what a client meets when the collection is locked
# (that it fails fast instead of waiting on a prompt). Prints one line per check; exits 1 if any fails.
# It stops, restarts and locks its instance, so by default it uses its own state folder and leaves a
# running tools/test instance alone; it stops the instance at the end unless it was already running.
#   MOOSE_SECRETSVC_STATE (default /tmp/moose-secretsvc-verify)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
export MOOSE_SECRETSVC_STATE="${MOOSE_SECRETSVC_STATE:-/tmp/moose-secretsvc-verify}"
state="$MOOSE_SECRETSVC_STATE"
failures=0
pass() { echo "PASS  $*"; }
fail() { echo "FAIL  $*"; failures=$((failures + 1)); }
note() { echo "NOTE  $*"; }
was_running=0
if [ -f "$state/keyring.pid" ] && kill -0 "$(cat "$state/keyring.pid")" 2>/dev/null; then was_running=1; fi
[ "$was_running" = 1 ] || trap '"$here/stop" >/dev/null 2>&1' EXIT

t0=$(date +%s%N)
if ! bus=$("$here/start" 2>/tmp/secretsvc-verify.$$.err | tail -1) || [[ "$bus" != unix:path=* ]]; then
    cat /tmp/secretsvc-verify.$$.err >&2; rm -f /tmp/secretsvc-verify.$$.err
    echo "FAIL  start"; exit 1
fi
rm -f /tmp/secretsvc-verify.$$.err
pass "start: $bus ($(( ($(date +%s%N) - t0) / 1000000 )) ms)"
export DBUS_SESSION_BUS_ADDRESS="$bus"

st() { timeout 10 secret-tool "$@"; }   # no check may wait on a prompt
value="round-trip-$$-$RANDOM"

printf %s "$value" | st store --label="tools/secretsvc verify" service moose-test account a \
    && pass "store" || fail "store (exit $?)"
got=$(st lookup service moose-test account a) && [ "$got" = "$value" ] \
    && pass "lookup returns what was stored" || fail "lookup: got '$got'"
got=$(st lookup service moose-test account missing-$$); rc=$?
[ $rc -ne 0 ] && [ $rc -ne 124 ] && [ -z "$got" ] \
    && pass "lookup of a missing item: no output, exit $rc" || fail "lookup of a missing item: exit $rc, output '$got'"
st clear service moose-test account a && pass "clear" || fail "clear (exit $?)"
got=$(st lookup service moose-test account a); rc=$?
[ $rc -ne 0 ] && [ -z "$got" ] && pass "lookup after clear: nothing (exit $rc)" || fail "lookup after clear: exit $rc, '$got'"

# Persistence: the keyring file in the state folder survives stop+start (same password unlocks it).
printf %s "$value" | st store --label="tools/secretsvc verify" service moose-test account persist || fail "store before restart"
"$here/stop" && "$here/start" >/dev/null 2>&1 || fail "restart"
got=$(st lookup service moose-test account persist) && [ "$got" = "$value" ] \
    && pass "the item survives stop+start ($state/home/.local/share/keyrings/login.keyring)" \
    || fail "after stop+start the item is gone (got '$got')"
st clear service moose-test account persist

# A locked collection (gdbus: secret-tool lock --collection=login locks, then crashes; 0.20.5).
if ! command -v gdbus >/dev/null; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends libglib2.0-bin >&2
fi
printf %s "$value" | st store --label="tools/secretsvc verify" service moose-test account locked
login=$(gdbus call --session -d org.freedesktop.secrets -o /org/freedesktop/secrets \
    -m org.freedesktop.Secret.Service.ReadAlias default | sed -n "s/.*'\(.*\)'.*/\1/p")
gdbus call --session -d org.freedesktop.secrets -o /org/freedesktop/secrets \
    -m org.freedesktop.Secret.Service.Lock "['$login']" >/dev/null || fail "lock $login"
locked=$(gdbus call --session -d org.freedesktop.secrets -o "$login" \
    -m org.freedesktop.DBus.Properties.Get org.freedesktop.Secret.Collection Locked)
[ "$locked" = "(<true>,)" ] && pass "$login locked" || fail "$login not locked: $locked"
timed() { # LABEL INPUT ARGS…: runs secret-tool, reports exit, stderr and time
    local label=$1 input=$2 t out err rc; shift 2
    t=$(date +%s%N)
    out=$(printf %s "$input" | st "$@" 2>/tmp/secretsvc-verify.$$.err); rc=$?
    err=$(tr '\n' ' ' </tmp/secretsvc-verify.$$.err); rm -f /tmp/secretsvc-verify.$$.err
    t=$(( ($(date +%s%N) - t) / 1000000 ))
    if [ $rc -eq 124 ]; then fail "$label on a locked collection hangs (killed after 10 s)"; return; fi
    [ -z "$out" ] && pass "$label on a locked collection: exit $rc in $t ms, no output, stderr '${err% }'" \
        || fail "$label on a locked collection: exit $rc in $t ms, output '$out'"
}
timed "lookup of an existing item" "" lookup service moose-test account locked
timed "lookup of a missing item" "" lookup service moose-test account missing-$$
timed "store" "x" store --label=locked service moose-test account locked-new
note "a lookup on a locked collection looks like a missing item (exit 1, no message): libsecret returns NULL with no GError"

# start again: a locked collection is not ready, so start restarts the keyring, which unlocks it
"$here/start" >/dev/null 2>&1 || fail "start after lock"
got=$(st lookup service moose-test account locked) && [ "$got" = "$value" ] \
    && pass "start unlocks a locked collection again (by restarting the keyring)" || fail "after start: '$got'"
st clear service moose-test account locked

[ "$failures" -eq 0 ] && echo "all checks passed" || echo "$failures check(s) failed"
[ "$failures" -eq 0 ]
