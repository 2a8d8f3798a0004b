#!/usr/bin/env bash
# ensure-base-image.sh — make sure a Debian base image exists in the local engine.
#
# Why: no container registry is reachable here (`docker pull` fails), yet
# cudabox's images start FROM debian:bookworm-slim. So we build an equivalent
# locally: `debootstrap --variant=minbase` a rootfs over Debian's http mirror,
# shape it like the official slim image (deb822 sources with -updates and
# -security, the docker-* apt/dpkg snippets, doc/man/locale excluded, caches
# and package lists emptied) and `docker import` it with CMD ["bash"] and the
# official PATH. The rootfs tarball is cached under
# ${XDG_CACHE_HOME:-~/.cache}/cudabox/base/ so re-importing on this machine
# takes seconds; set CUDABOX_BASE_REFRESH=1 to debootstrap afresh.
# After importing, a throwaway container runs apt-get update + install to
# prove the image works.
#
# Usage: scripts/ensure-base-image.sh [TAG]     (default debian:bookworm-slim)
# Env:   CUDABOX_BASE_SUITE (bookworm), CUDABOX_DEBIAN_MIRROR
#        (http://deb.debian.org/debian), CUDABOX_DEBIAN_SECURITY_MIRROR
#        (http://deb.debian.org/debian-security), CUDABOX_BASE_REFRESH (0)
set -euo pipefail

TAG="${1:-debian:bookworm-slim}"
SUITE="${CUDABOX_BASE_SUITE:-bookworm}"
MIRROR="${CUDABOX_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
SECURITY_MIRROR="${CUDABOX_DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}"
CACHE_DIR="${XDG_CACHE_HOME:-$HOME/.cache}/cudabox/base"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

log() { echo "[ensure-base-image] $*" >&2; }
die() { echo "[ensure-base-image] ERROR: $*" >&2; exit 1; }

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

# --- engine and fast path -----------------------------------------------------
"$HERE/ensure-docker.sh"
DOCKER=/usr/bin/docker
[[ -x "$DOCKER" ]] || DOCKER="$(command -v docker)" || die "no docker CLI found"

image_exists() { "$DOCKER" image inspect "$TAG" >/dev/null 2>&1; }

if image_exists; then
    exit 0
fi

mkdir -p "$CACHE_DIR"
exec 9>"$CACHE_DIR/.lock"
flock -w 900 9 || die "timed out waiting for the lock $CACHE_DIR/.lock"
if image_exists; then
    exit 0
fi

ARCH="$(dpkg --print-architecture)"
TARBALL="$CACHE_DIR/${SUITE}-minbase-${ARCH}.tar"

# --- build (or reuse) the rootfs tarball ------------------------------------------
# Shape a fresh debootstrap rootfs like the official debian:SUITE-slim image.
shape_rootfs() {
    local root="${1:?}"
    [[ "$root" != / ]] || die "refusing to shape / as a rootfs"

    # Sources as in the official image: deb822, main, with -updates and -security.
    rm -f "$root/etc/apt/sources.list"
    cat >"$root/etc/apt/sources.list.d/debian.sources" <<EOF
Types: deb
URIs: $MIRROR
Suites: $SUITE $SUITE-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: $SECURITY_MIRROR
Suites: $SUITE-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF

    # The apt/dpkg snippets the official Docker images carry.
    cat >"$root/etc/apt/apt.conf.d/docker-clean" <<'EOF'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
EOF
    echo 'Acquire::GzipIndexes "true";' >"$root/etc/apt/apt.conf.d/docker-gzip-indexes"
    echo 'Acquire::Languages "none";' >"$root/etc/apt/apt.conf.d/docker-no-languages"
    echo 'Apt::AutoRemove::SuggestsImportant "false";' >"$root/etc/apt/apt.conf.d/docker-autoremove-suggests"
    echo 'force-unsafe-io' >"$root/etc/dpkg/dpkg.cfg.d/docker-apt-speedup"

    # "slim": keep dpkg from installing docs, man pages and translations, and
    # delete the ones debootstrap already put there.
    cat >"$root/etc/dpkg/dpkg.cfg.d/docker" <<'EOF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/linda/*
path-exclude /usr/share/lintian/overrides/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
path-exclude /usr/share/man/*
EOF
    find "$root/usr/share/doc" -xdev ! -type d ! -name copyright -delete
    find "$root/usr/share/doc" -xdev -mindepth 1 -type d -empty -delete
    rm -rf "${root:?}"/usr/share/{groff,info,linda,man}/* "${root:?}"/usr/share/lintian/overrides/*
    find "$root/usr/share/locale" -mindepth 1 -maxdepth 1 ! -name locale.alias -exec rm -rf {} +

    # Caches, package lists, logs and host-specific files: the engine supplies
    # /dev, /etc/resolv.conf, /etc/hostname and /etc/hosts at run time.
    rm -rf "${root:?}"/var/lib/apt/lists/* "${root:?}"/var/cache/apt/*.bin \
        "${root:?}"/var/cache/apt/archives/*.deb "${root:?}"/var/cache/apt/archives/partial/* \
        "${root:?}"/var/cache/debconf/*-old "${root:?}"/var/lib/dpkg/*-old \
        "${root:?}"/var/log/apt/* "${root:?}"/var/log/{bootstrap,alternatives,dpkg}.log \
        "${root:?}"/dev/*
    mkdir -p "$root/var/lib/apt/lists/partial"
    : >"$root/etc/resolv.conf"
    : >"$root/etc/hostname"
}

if [[ -s "$TARBALL" && "${CUDABOX_BASE_REFRESH:-0}" != 1 ]]; then
    log "using cached rootfs $TARBALL"
else
    [[ "$(id -u)" -eq 0 ]] || die "debootstrap needs root"
    if ! command -v debootstrap >/dev/null 2>&1 || [[ ! -e /usr/share/keyrings/debian-archive-keyring.gpg ]]; then
        log "installing debootstrap ..."
        apt_install debootstrap debian-archive-keyring
    fi
    work="$(mktemp -d /var/tmp/cudabox-rootfs.XXXXXX)"
    trap 'rm -rf "$work"' EXIT
    log "debootstrap --variant=minbase $SUITE from $MIRROR (about 30 s) ..."
    if ! debootstrap --variant=minbase "$SUITE" "$work/rootfs" "$MIRROR" >"$work/debootstrap.log" 2>&1; then
        tail -n 10 "$work/debootstrap.log" >&2
        die "debootstrap failed (last lines above)"
    fi
    shape_rootfs "$work/rootfs"
    tar -C "$work/rootfs" --numeric-owner -cf "$TARBALL.tmp" .
    mv -f "$TARBALL.tmp" "$TARBALL"
    log "cached rootfs $TARBALL ($(du -h "$TARBALL" | cut -f1))"
fi

# --- import ------------------------------------------------------------------------
log "docker import -> $TAG"
"$DOCKER" import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'CMD ["bash"]' \
    --message "cudabox: debootstrap --variant=minbase $SUITE, slimmed" \
    "$TARBALL" "$TAG" >/dev/null || die "docker import of $TARBALL failed"

# --- verify ------------------------------------------------------------------------
log "verifying: apt-get update && apt-get install hello inside $TAG ..."
if ! out="$("$DOCKER" run --rm "$TAG" sh -c \
    'apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends hello >/dev/null && hello' 2>&1)" \
    || [[ "$out" != *"Hello, world!"* ]]; then
    echo "$out" | tail -n 10 >&2
    "$DOCKER" rmi "$TAG" >/dev/null 2>&1 || true
    die "containers from $TAG cannot apt-get install (image removed)"
fi
log "$TAG ready ($("$DOCKER" image inspect --format '{{.Size}}' "$TAG" | awk '{printf "%.0f MB", $1/1e6}'))"
