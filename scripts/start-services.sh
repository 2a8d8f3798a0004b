#!/usr/bin/env bash
# start-services.sh — bring up everything the test suite needs, in order:
#   1. ensure-docker.sh      Docker engine (Debian docker.io, dockerd in background)
#   2. ensure-base-image.sh  debian:bookworm-slim, built locally (no registry here)
#   3. ensure-slurm.sh       single-node Slurm cluster, verified with srun and an
#                            sbatch job that runs `docker run` (--verify)
# Each step is idempotent and quick when already done, so `make test` calls
# this every time (CI starts from a fresh machine with nothing installed).
# Prints each step's duration to stderr; exits non-zero on the first failure.
#
# Usage: scripts/start-services.sh
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

now() { date +%s%3N; }   # milliseconds
log() { echo "[start-services] $*" >&2; }

total_start=$(now)
for step in "ensure-docker.sh" "ensure-base-image.sh" "ensure-slurm.sh --verify"; do
    t0=$(now)
    # shellcheck disable=SC2086  # step is "script [args]"
    if ! "$HERE"/$step; then
        log "FAILED: $step"
        exit 1
    fi
    ms=$(($(now) - t0))
    log "$(printf '%-22s %4d.%01ds' "${step%% *}" $((ms / 1000)) $((ms % 1000 / 100)))"
done
ms=$(($(now) - total_start))
log "$(printf '%-22s %4d.%01ds' "all services up" $((ms / 1000)) $((ms % 1000 / 100)))"
