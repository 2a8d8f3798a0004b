#!/usr/bin/env bash
# ensure-docker.sh — make sure a Docker engine answers on this machine.
#
# Why: cudabox's docker-marked tests and CI need a real engine, but a fresh
# machine (no systemd, nothing running) has none. This script:
#   1. exits 0 at once if `docker info` already answers (honours DOCKER_HOST);
#   2. otherwise installs Debian's docker.io if `dockerd` is missing
#      (apt-get update only when the package lists can't provide it);
#   3. starts `dockerd` detached in the background, logging to
#      /var/log/cudabox-dockerd.log, and waits (up to CUDABOX_DOCKER_TIMEOUT,
#      default 90 s) for /var/run/docker.sock and `docker info`.
# A flock makes concurrent calls safe: the second one waits, then sees the
# engine up. On this sandbox dockerd's defaults work (overlay2 storage driver,
# iptables via nf_tables), so no extra flags are passed; extra flags can be
# given in CUDABOX_DOCKERD_ARGS (e.g. "--storage-driver=vfs --iptables=false").
#
# Usage: scripts/ensure-docker.sh
set -euo pipefail

LOG_FILE=/var/log/cudabox-dockerd.log
LOCK_FILE=/run/lock/cudabox-ensure-docker.lock
SOCKET=/var/run/docker.sock
TIMEOUT="${CUDABOX_DOCKER_TIMEOUT:-90}"

log() { echo "[ensure-docker] $*" >&2; }
die() { echo "[ensure-docker] ERROR: $*" >&2; exit 1; }

# Any docker CLI will do for `docker info`; Debian's (20.10) first, then the
# /usr/local one (28.x), then whatever is on PATH.
docker_clis() {
    local c
    for c in /usr/bin/docker /usr/local/bin/docker "$(command -v docker 2>/dev/null || true)"; do
        [[ -n "$c" && -x "$c" ]] && echo "$c"
    done
}

engine_up() {
    local cli
    while read -r cli; do
        timeout 15 "$cli" info >/dev/null 2>&1 && return 0
    done < <(docker_clis)
    return 1
}

# Install Debian packages, running `apt-get update` only if the first try
# can't find them (fresh machine with empty or stale lists).
apt_install() {
    local apt=(apt-get -y -q --no-install-recommends -o DPkg::Lock::Timeout=300 install)
    local apt_log=/var/log/cudabox-apt.log
    export DEBIAN_FRONTEND=noninteractive
    if ! "${apt[@]}" "$@" >>"$apt_log" 2>&1; then
        log "apt-get update"
        apt-get -q -o DPkg::Lock::Timeout=300 update >>"$apt_log" 2>&1 \
            || { tail -n 5 "$apt_log" >&2; die "apt-get update failed (see $apt_log)"; }
        "${apt[@]}" "$@" >>"$apt_log" 2>&1 \
            || { tail -n 5 "$apt_log" >&2; die "apt-get install $* failed (see $apt_log)"; }
    fi
}

# --- fast path ---------------------------------------------------------------
if engine_up; then
    exit 0
fi

# A non-default DOCKER_HOST points at an engine we can't start ourselves.
if [[ -n "${DOCKER_HOST:-}" && "${DOCKER_HOST}" != "unix://${SOCKET}" ]]; then
    die "DOCKER_HOST=${DOCKER_HOST} does not answer (not starting a local engine for a non-default host)"
fi

[[ "$(id -u)" -eq 0 ]] || die "no Docker engine answers and starting one needs root"

exec 9>"$LOCK_FILE"
flock -w "$((TIMEOUT + 300))" 9 || die "timed out waiting for the lock $LOCK_FILE"
# Someone else may have started it while we waited for the lock.
if engine_up; then
    exit 0
fi

# --- install -----------------------------------------------------------------
# Also wanted: Debian's /usr/bin/docker (20.10), the CLI that builds with
# BuildKit here (the /usr/local one has no buildx plugin).
if ! command -v dockerd >/dev/null 2>&1 || [[ ! -x /usr/bin/docker ]]; then
    log "installing docker.io (Debian) ..."
    apt_install docker.io
    command -v dockerd >/dev/null 2>&1 || die "docker.io installed but dockerd not found"
fi

# --- start -------------------------------------------------------------------
start=$(date +%s)
if pgrep -x dockerd >/dev/null 2>&1; then
    log "dockerd is running but not answering yet; waiting"
else
    log "starting dockerd (log: $LOG_FILE)"
    # Stale pid/socket from a previous run whose dockerd died would make the
    # new one refuse to start or make us think it's up.
    rm -f /var/run/docker.pid "$SOCKET"
    # shellcheck disable=SC2086  # CUDABOX_DOCKERD_ARGS is a list of flags
    # 9>&-: the daemon must not inherit (and so hold forever) our lock.
    setsid -f dockerd ${CUDABOX_DOCKERD_ARGS:-} </dev/null >>"$LOG_FILE" 2>&1 9>&-
fi

# --- wait --------------------------------------------------------------------
deadline=$((start + TIMEOUT))
until [[ -S "$SOCKET" ]] && engine_up; do
    if ! pgrep -x dockerd >/dev/null 2>&1; then
        tail -n 15 "$LOG_FILE" >&2 || true
        die "dockerd exited during startup (see $LOG_FILE)"
    fi
    if (($(date +%s) >= deadline)); then
        tail -n 15 "$LOG_FILE" >&2 || true
        die "Docker engine did not answer within ${TIMEOUT}s (see $LOG_FILE)"
    fi
    sleep 0.5
done
log "engine up after $(($(date +%s) - start))s: $(/usr/bin/docker version --format '{{.Server.Version}}' 2>/dev/null || echo '?')"
