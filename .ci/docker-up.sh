#!/usr/bin/env bash
# Bring up a Docker engine for CI and local use. Idempotent: safe to run again and again.
#
#  1. installs docker.io and mmdebstrap from the Debian mirror if they are missing
#     (non-interactive, no recommends: that keeps needrestart/apparmor/git out);
#  2. starts dockerd in the background (log: $DOCKERD_LOG, default /tmp/dockerd.log)
#     unless an engine already answers or a dockerd is already starting;
#  3. waits until `docker info` works (timeout: $DOCKER_UP_TIMEOUT, default 60 s) and fails
#     loudly with the tail of the log otherwise.
#
# Needs root for steps 1 and 2. No registry is used: the grading image is built locally
# by grader/sandbox/image.py (mmdebstrap + docker import).
set -euo pipefail

LOG="${DOCKERD_LOG:-/tmp/dockerd.log}"
TIMEOUT="${DOCKER_UP_TIMEOUT:-60}"
PIDFILE="${DOCKERD_PIDFILE:-/var/run/docker.pid}"

say() { printf 'docker-up: %s\n' "$*" >&2; }
die() { say "ERROR: $*"; exit 1; }

as_root() {
    if [ "$(id -u)" -eq 0 ]; then "$@"
    elif command -v sudo >/dev/null 2>&1; then sudo -n "$@"
    else die "need root to run: $*"
    fi
}

# --- 1. packages ---------------------------------------------------------------------------------
missing=()
command -v dockerd >/dev/null 2>&1 || missing+=(docker.io)
command -v mmdebstrap >/dev/null 2>&1 || missing+=(mmdebstrap)
if [ "${#missing[@]}" -gt 0 ]; then
    say "installing ${missing[*]} ..."
    export DEBIAN_FRONTEND=noninteractive NEEDRESTART_MODE=a
    apt_install() {
        as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
            -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold \
            "${missing[@]}" >/tmp/docker-up-apt.log 2>&1
    }
    if ! apt_install; then
        # Stale or missing package lists: refresh (third-party sources may fail; that is fine
        # as long as the Debian mirror answers) and try once more.
        say "install failed, running apt-get update and retrying"
        as_root apt-get update -qq >>/tmp/docker-up-apt.log 2>&1 || true
        apt_install || { tail -n 30 /tmp/docker-up-apt.log >&2; die "apt-get install ${missing[*]} failed"; }
    fi
    command -v dockerd >/dev/null 2>&1 || die "dockerd still missing after installing docker.io"
    command -v mmdebstrap >/dev/null 2>&1 || die "mmdebstrap still missing after installing it"
fi

# --- 2. engine -----------------------------------------------------------------------------------
engine_ok() { timeout 10 docker info >/dev/null 2>&1; }

dockerd_alive() {
    [ -s "$PIDFILE" ] || return 1
    local pid
    pid="$(cat "$PIDFILE" 2>/dev/null)" || return 1
    [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = dockerd ]
}

if engine_ok; then
    say "engine already up"
    exit 0
fi

if [ -n "${DOCKER_HOST:-}" ] && [[ "$DOCKER_HOST" != unix://* ]]; then
    die "DOCKER_HOST=$DOCKER_HOST does not answer and is not a local socket; not starting dockerd"
fi

started=""
if dockerd_alive; then
    say "dockerd (pid $(cat "$PIDFILE")) is running but not answering yet; waiting"
else
    say "starting dockerd (log: $LOG)"
    # setsid + nohup: the daemon outlives this script and the CI step that ran it.
    # Extra daemon flags, if a machine needs them: DOCKERD_FLAGS="--iptables=false ...".
    # shellcheck disable=SC2086
    host_flag=()
    case "${DOCKER_HOST:-}" in
        ""|unix:///var/run/docker.sock|unix:///run/docker.sock) ;;
        unix://*) host_flag=(-H "$DOCKER_HOST") ;;  # a non-default socket the caller will talk to
    esac
    as_root setsid nohup dockerd --pidfile "$PIDFILE" "${host_flag[@]}" ${DOCKERD_FLAGS:-} </dev/null >>"$LOG" 2>&1 &
    started=$!
fi

# --- 3. wait -------------------------------------------------------------------------------------
deadline=$(( SECONDS + TIMEOUT ))
until engine_ok; do
    if [ "$SECONDS" -ge "$deadline" ]; then
        say "engine did not answer within ${TIMEOUT}s; last lines of $LOG:"
        tail -n 40 "$LOG" >&2 2>/dev/null || true
        die "docker engine is not up"
    fi
    # The daemon we started (or the one we found starting) died: no point in waiting.
    if { [ -n "$started" ] && ! kill -0 "$started" 2>/dev/null; } \
        || { [ -z "$started" ] && ! dockerd_alive; }; then
        say "dockerd exited; last lines of $LOG:"
        tail -n 40 "$LOG" >&2 2>/dev/null || true
        die "dockerd failed to start"
    fi
    sleep 0.5
done
say "engine up: $(docker version --format '{{.Server.Version}}' 2>/dev/null || echo '?') ($(docker info --format '{{.Driver}}' 2>/dev/null || echo '?'))"
