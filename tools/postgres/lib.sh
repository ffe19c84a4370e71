# shellcheck shell=bash
# Shared helpers for tools/postgres/{start,stop,ctl}. Sourced, not executed.
#
# Layout of the state dir ($MOOSE_PG_STATE, default tools/postgres/.state,
# owned by the `postgres` OS user because PostgreSQL refuses to run as root):
#   data/            PGDATA (initdb output, 0700)
#   data/moose.conf  our settings, included from postgresql.conf (regenerated on start)
#   run/             unix sockets of PostgreSQL and PgBouncer, pgbouncer.pid
#   tls/             ca.pem, ca.key, server.pem, server.key (self-signed, IP SAN 127.0.0.1)
#   pgbouncer/       pgbouncer.ini, userlist.txt
#   postgres.log, pgbouncer.log
#   env              the variables printed by `start` (shell-sourceable)

set -euo pipefail

MOOSE_PG_TOOLS_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

PG_OS_USER=postgres
PG_HOST=127.0.0.1
PG_PORT=${MOOSE_PG_PORT:-55432}
PGB_PORT=${MOOSE_PGBOUNCER_PORT:-56432}
PG_APP_USER=moose
PG_APP_PASSWORD=moose-test-password
PG_APP_DB=moose

log() { printf '[moose-pg] %s\n' "$*" >&2; }
die() { printf '[moose-pg] ERROR: %s\n' "$*" >&2; exit 1; }

# Milliseconds since epoch (for timings).
now_ms() { date +%s%3N; }

as_pg() { runuser -u "$PG_OS_USER" -- "$@"; }

# Like as_pg, but for commands that leave a daemon behind (pg_ctl start,
# pgbouncer -d): close every inherited fd > 2 first, so the daemon does not
# keep our state-dir lock (fd 9) or a caller's pipes open forever.
as_pg_daemon() {
    (
        local fd
        for fd in /proc/$BASHPID/fd/*; do
            fd=${fd##*/}
            if ((fd > 2)); then eval "exec $fd>&-" 2>/dev/null || true; fi
        done
        exec runuser -u "$PG_OS_USER" -- "$@"
    )
}

# Locate the PostgreSQL server binaries (Debian puts them in /usr/lib/postgresql/<v>/bin).
find_pg_bindir() {
    if [[ -n ${MOOSE_PG_BINDIR:-} ]]; then
        echo "$MOOSE_PG_BINDIR"; return 0
    fi
    local d
    for d in /usr/lib/postgresql/15/bin $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
        if [[ -x $d/initdb && -x $d/pg_ctl && -x $d/postgres ]]; then
            echo "$d"; return 0
        fi
    done
    return 1
}

find_pgbouncer() {
    if [[ -x /usr/sbin/pgbouncer ]]; then echo /usr/sbin/pgbouncer; return 0; fi
    command -v pgbouncer 2>/dev/null
}

# Resolve the state dir. The default lives in the repo; if the postgres user
# cannot traverse the repo path (e.g. repo under /root), fall back to a
# per-repo directory under /tmp so that PostgreSQL can reach its data dir.
resolve_state_dir() {
    if [[ -n ${MOOSE_PG_STATE:-} ]]; then
        STATE=$MOOSE_PG_STATE
    else
        STATE=$MOOSE_PG_TOOLS_DIR/.state
        if id -u "$PG_OS_USER" >/dev/null 2>&1 && ! as_pg test -x "$MOOSE_PG_TOOLS_DIR"; then
            local h
            h=$(printf '%s' "$MOOSE_PG_TOOLS_DIR" | cksum | cut -d' ' -f1)
            STATE=/tmp/moose-postgres-$h
            log "postgres user cannot traverse $MOOSE_PG_TOOLS_DIR; using state dir $STATE"
        fi
    fi
    case $STATE in /*) ;; *) STATE=$(pwd)/$STATE ;; esac
    DATA=$STATE/data
    RUN=$STATE/run
    TLS=$STATE/tls
    PGB_DIR=$STATE/pgbouncer
    PG_LOG=$STATE/postgres.log
    PGB_LOG=$STATE/pgbouncer.log
    PGB_INI=$PGB_DIR/pgbouncer.ini
    PGB_PID=$RUN/pgbouncer.pid
    ENV_FILE=$STATE/env
    # unix socket paths are limited to 107 bytes
    if (( ${#RUN} + 20 > 107 )); then
        die "state dir path too long for a unix socket dir: $RUN (set MOOSE_PG_STATE to a shorter path)"
    fi
}

pg_ctl_() { as_pg "$PG_BINDIR/pg_ctl" -D "$DATA" "$@"; }

pg_running() {
    [[ -f $DATA/postmaster.pid ]] || return 1
    # A SIGKILLed postmaster can linger as a zombie (PID 1 in some containers
    # reaps late); pg_ctl status would still call it running.
    local pid
    pid=$(head -n1 "$DATA/postmaster.pid" 2>/dev/null | tr -dc 0-9)
    [[ -n $pid ]] || return 1
    if [[ $(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null) == Z ]]; then return 1; fi
    pg_ctl_ status >/dev/null 2>&1
}

pgbouncer_pid() {
    [[ -f $PGB_PID ]] || return 1
    local pid
    pid=$(head -n1 "$PGB_PID" 2>/dev/null | tr -dc 0-9)
    [[ -n $pid ]] || return 1
    kill -0 "$pid" 2>/dev/null || return 1
    # guard against PID reuse: it must really be a pgbouncer using our ini
    grep -qa pgbouncer "/proc/$pid/cmdline" 2>/dev/null || return 1
    tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF "$PGB_INI" || return 1
    echo "$pid"
}

# Is something listening on 127.0.0.1:$1 ?
port_listening() {
    (exec 3<>"/dev/tcp/$PG_HOST/$1") 2>/dev/null
}

wait_port() { # port timeout_s
    local i
    for ((i = 0; i < $2 * 20; i++)); do
        port_listening "$1" && return 0
        sleep 0.05
    done
    return 1
}

# Start PostgreSQL (data dir must exist) and wait until it accepts connections.
start_postgres() {
    if pg_running; then
        log "PostgreSQL already running (pid $(head -n1 "$DATA/postmaster.pid"))"
        return 0
    fi
    # After a SIGKILL the dead postmaster may still be an unreaped zombie for a
    # second or so (PID 1 of this container reaps by polling); postgres would
    # then refuse to start ("lock file postmaster.pid already exists").
    local zpid i
    zpid=$(head -n1 "$DATA/postmaster.pid" 2>/dev/null | tr -dc 0-9) || true
    if [[ -n $zpid ]]; then
        for ((i = 0; i < 200; i++)); do
            [[ $(awk '{print $3}' "/proc/$zpid/stat" 2>/dev/null) == Z ]] || break
            sleep 0.05
        done
    fi
    if port_listening "$PG_PORT"; then
        die "port $PG_HOST:$PG_PORT is already in use by another process (set MOOSE_PG_PORT)"
    fi
    # -w waits until the server accepts connections (pg_ctl polls PQping).
    if ! as_pg_daemon "$PG_BINDIR/pg_ctl" -D "$DATA" -l "$PG_LOG" -w -t 60 start >/dev/null; then
        tail -n 30 "$PG_LOG" >&2 || true
        die "PostgreSQL failed to start (log: $PG_LOG)"
    fi
    wait_port "$PG_PORT" 10 || die "PostgreSQL started but $PG_HOST:$PG_PORT is not reachable"
    log "PostgreSQL running on $PG_HOST:$PG_PORT (pid $(head -n1 "$DATA/postmaster.pid"))"
}

stop_postgres() { # mode (fast|immediate|smart)
    local mode=${1:-fast}
    if pg_running; then
        pg_ctl_ -m "$mode" -w -t 60 stop >/dev/null || die "pg_ctl stop failed (log: $PG_LOG)"
        log "PostgreSQL stopped (-m $mode)"
    else
        log "PostgreSQL not running"
    fi
}

stop_pgbouncer() {
    local pid i
    if pid=$(pgbouncer_pid); then
        kill -TERM "$pid" 2>/dev/null || true  # SIGTERM = immediate shutdown
        for ((i = 0; i < 100; i++)); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.05
        done
        if kill -0 "$pid" 2>/dev/null; then
            log "PgBouncer pid $pid did not exit on SIGTERM; sending SIGKILL"
            kill -KILL "$pid" 2>/dev/null || true
        fi
        rm -f "$PGB_PID"
        log "PgBouncer stopped (pid $pid)"
    else
        log "PgBouncer not running"
    fi
}

# stop/ctl: take ports from the env file written by start, so they work even
# when MOOSE_PG_PORT / MOOSE_PGBOUNCER_PORT are not exported in their shell.
load_state_env() {
    [[ -f $ENV_FILE ]] || return 1
    local line key val
    while IFS= read -r line; do
        key=${line%%=*}; val=${line#*=}
        case $key in
            MOOSE_PG_PORT) PG_PORT=$val ;;
            MOOSE_PGBOUNCER_PORT) PGB_PORT=$val ;;
        esac
    done <"$ENV_FILE"
}

print_env() {
    local ca=$TLS/ca.pem
    {
        printf 'MOOSE_PG_URL=%q\n' "postgres://$PG_APP_USER:$PG_APP_PASSWORD@$PG_HOST:$PG_PORT/$PG_APP_DB"
        printf 'MOOSE_PGBOUNCER_URL=%q\n' "postgres://$PG_APP_USER:$PG_APP_PASSWORD@$PG_HOST:$PGB_PORT/$PG_APP_DB"
        printf 'MOOSE_PG_CA=%q\n' "$ca"
        printf 'MOOSE_PG_HOST=%q\n' "$PG_HOST"
        printf 'MOOSE_PG_PORT=%q\n' "$PG_PORT"
        printf 'MOOSE_PGBOUNCER_PORT=%q\n' "$PGB_PORT"
        printf 'MOOSE_PG_USER=%q\n' "$PG_APP_USER"
        printf 'MOOSE_PG_PASSWORD=%q\n' "$PG_APP_PASSWORD"
        printf 'MOOSE_PG_DATABASE=%q\n' "$PG_APP_DB"
        printf 'MOOSE_PG_SOCKET_DIR=%q\n' "$RUN"
        printf 'MOOSE_PG_STATE=%q\n' "$STATE"
    }
}
