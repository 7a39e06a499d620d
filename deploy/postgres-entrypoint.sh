#!/bin/sh
# The stand-in's entrypoint: for `postgres`, make the cluster on first start from POSTGRES_USER,
# POSTGRES_PASSWORD and POSTGRES_DB (as the official image does) and run the server as the postgres
# account; any other command runs as it is.
set -eu
if [ "${1:-}" = postgres ]; then
    data=${PGDATA:-/var/lib/postgresql/data}
    mkdir -p "$data" && chown -R postgres:postgres "$data" && chmod 0700 "$data"
    if [ ! -s "$data/PG_VERSION" ]; then
        printf '%s\n' "${POSTGRES_PASSWORD:?POSTGRES_PASSWORD is not set}" > /tmp/pwfile
        chown postgres /tmp/pwfile
        su postgres -s /bin/sh -c "initdb -D '$data' -U '${POSTGRES_USER:-postgres}' --pwfile=/tmp/pwfile --auth-local=trust --auth-host=scram-sha-256 -E UTF8" >/dev/null
        rm -f /tmp/pwfile
        echo "host all all all scram-sha-256" >> "$data/pg_hba.conf"
        su postgres -s /bin/sh -c "postgres -D '$data' -c listen_addresses='' -k /var/run/postgresql" &
        until su postgres -s /bin/sh -c "pg_isready -q -h /var/run/postgresql"; do sleep 0.2; done
        if [ -n "${POSTGRES_DB:-}" ] && [ "${POSTGRES_DB}" != postgres ]; then
            su postgres -s /bin/sh -c "createdb -h /var/run/postgresql -U '${POSTGRES_USER:-postgres}' '$POSTGRES_DB'"
        fi
        su postgres -s /bin/sh -c "pg_ctl -D '$data' -m fast -w stop" >/dev/null
    fi
    shift
    exec su postgres -s /bin/sh -c "exec postgres -D '$data' -c listen_addresses='*' -k /var/run/postgresql $*"
fi
exec "$@"
