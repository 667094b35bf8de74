#!/usr/bin/env bash
# A throw-away PostgreSQL cluster for the tests, from Debian's packages.
#
#   scripts/pg-cluster.sh start DIR   # prints the URL to export as AGENT_TEST_POSTGRES_URL
#   scripts/pg-cluster.sh stop DIR
#   scripts/pg-cluster.sh halt DIR fast|immediate   # stops the server, keeps the cluster
#   scripts/pg-cluster.sh restart DIR               # starts a halted server again
#
# The cluster lives in DIR, listens on 127.0.0.1 only on a free high port, and
# trusts local connections, except for the role `agent_pw` (password
# `agent-pw-secret`), which needs its password so tests can check wrong ones.
# initdb refuses to run as root, so as root the cluster runs as `postgres`.
# PG_MAX_CONNECTIONS sets max_connections (default 300; PostgreSQL's own
# default, 100, for the fleet-size test).
set -euo pipefail

action=${1:?usage: pg-cluster.sh start|stop|halt|restart DIR}
dir=${2:?usage: pg-cluster.sh start|stop|halt|restart DIR}

bindir() {
    local found
    found=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
    if [[ -z "$found" ]]; then
        echo "PostgreSQL is not installed; installing it from Debian's packages" >&2
        apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >&2
        found=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
    fi
    echo "$found"
}

as_owner() {
    if [[ $(id -u) == 0 ]]; then
        runuser -u postgres -- "$@"
    else
        "$@"
    fi
}

case "$action" in
start)
    bin=$(bindir)
    rm -rf "$dir" && mkdir -p "$dir"
    [[ $(id -u) == 0 ]] && chown postgres "$dir"
    port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    as_owner "$bin/initdb" -D "$dir/data" -U postgres -A trust --no-sync >"$dir/initdb.log" 2>&1 \
        || { cat "$dir/initdb.log" >&2; exit 1; }
    { echo "host all agent_pw 127.0.0.1/32 scram-sha-256"; cat "$dir/data/pg_hba.conf"; } >"$dir/hba"
    cat "$dir/hba" >"$dir/data/pg_hba.conf"
    echo "-c listen_addresses=127.0.0.1 -p $port -k $dir -c max_connections=${PG_MAX_CONNECTIONS:-300}" >"$dir/options"
    as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 -o "$(cat "$dir/options")" start >/dev/null \
        || { cat "$dir/server.log" >&2; exit 1; }
    as_owner "$bin/psql" -q -h 127.0.0.1 -p "$port" -U postgres -d postgres \
        -c "CREATE DATABASE agent_test" \
        -c "CREATE ROLE agent_pw LOGIN SUPERUSER PASSWORD 'agent-pw-secret'" >/dev/null
    echo "postgres://postgres@127.0.0.1:$port/agent_test"
    ;;
halt)
    mode=${3:?usage: pg-cluster.sh halt DIR fast|immediate}
    as_owner "$(bindir)/pg_ctl" -D "$dir/data" -m "$mode" -w stop >/dev/null
    ;;
restart)
    as_owner "$(bindir)/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 -o "$(cat "$dir/options")" start >/dev/null \
        || { cat "$dir/server.log" >&2; exit 1; }
    ;;
stop)
    if [[ -d "$dir/data" ]]; then
        as_owner "$(bindir)/pg_ctl" -D "$dir/data" -m immediate stop >/dev/null 2>&1 || true
    fi
    rm -rf "$dir"
    ;;
*)
    echo "usage: pg-cluster.sh start|stop|halt|restart DIR" >&2
    exit 2
    ;;
esac
