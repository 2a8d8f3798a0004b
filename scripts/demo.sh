#!/usr/bin/env bash
# demo.sh — `make demo`: from the bundled example to a job's output, the way a user would.
#
# Copies examples/saxpy/saxpy.py (not its hand-written cudabox.yaml: init writes one) into
# .demo/saxpy (git-ignored, recreated each time), then:
#   cudabox init --yes ...  detects the project and the host, resolves, writes the commented files
#   cudabox resolve         the chosen stack and why
#   cudabox build           the image (progress; --ca-cert with the host CA bundle when it exists;
#                           --no-validate: validation is its own step below)
#   cudabox run -- python saxpy.py sm_120   NVRTC compiles SAXPY for Blackwell (runs it when a GPU is there)
#   cudabox validate        the smoke test (exit 4 = passed without a GPU: fine on a machine without one)
#   cudabox doctor          what this machine has and lacks for GPU jobs
# The engine and base image come from scripts/ensure-docker.sh and ensure-base-image.sh (as root).
# Without an engine it does what it can (init, resolve, the Dockerfile) and says what is missing.
#
# Usage: scripts/demo.sh
# Environment: CUDABOX (the CLI; default .venv/bin/cudabox), CUDABOX_DEMO_SERVICES=0 (as root too, only
# check for an engine: don't install or start one).
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CUDABOX="${CUDABOX:-$ROOT/.venv/bin/cudabox}"
DEMO="$ROOT/.demo/saxpy"
CA=/etc/ssl/certs/ca-certificates.crt

if [[ -t 1 ]]; then B=$'\e[1m'; R=$'\e[0m'; else B=""; R=""; fi
step() { printf '\n%s$ %s%s\n' "$B" "$*" "$R"; }
say() { printf '%s[demo]%s %s\n' "$B" "$R" "$*"; }
run() { step "$*"; "$@"; }

missing=()
engine=1
if [[ $EUID -eq 0 && ${CUDABOX_DEMO_SERVICES:-1} != 0 ]]; then
    "$ROOT/scripts/ensure-docker.sh" || { engine=0; missing+=("a Docker engine (scripts/ensure-docker.sh failed)"); }
    if ((engine)) && ! "$ROOT/scripts/ensure-base-image.sh"; then
        missing+=("the debian:bookworm-slim base image (scripts/ensure-base-image.sh failed; the build may pull it)")
    fi
elif ! docker info >/dev/null 2>&1; then
    engine=0
    missing+=("a Docker engine that answers (start dockerd or set DOCKER_HOST; as root, \`make demo\` starts one)")
fi

rm -rf "$DEMO" && mkdir -p "$DEMO" && cp "$ROOT/examples/saxpy/saxpy.py" "$DEMO/"
cd "$DEMO" || exit 1
say "project: $DEMO (saxpy.py from examples/saxpy; no dependency files, so the stack comes from the flags)"

# A plain CUDA 12.8 stack (NVIDIA's runtime + NVRTC wheels) on the base image's Python 3.11,
# for the GPUs examples/saxpy/cudabox.yaml names.
run "$CUDABOX" init --yes --python 3.11 --cuda 12.8 --gpu A100 --gpu "RTX 4090" --gpu "RTX 5090" || exit 1
step "sed -n '/^[a-z]/p' cudabox.yaml   # the keys init wrote (the file explains each one)"
sed -n '/^[a-z]/p' cudabox.yaml
run "$CUDABOX" resolve || exit 1

if ((!engine)); then
    run "$CUDABOX" dockerfile -o .cudabox/build/Dockerfile && sed -n '1,12p' .cudabox/build/Dockerfile
    say "rendered .cudabox/build/Dockerfile; stopping before the build."
    say "missing: ${missing[*]}"
    exit 0
fi

build=("$CUDABOX" build --no-validate)
[[ -f $CA ]] && build+=(--ca-cert "$CA")
run "${build[@]}" || { say "the build failed (see above)${missing:+; missing: ${missing[*]}}"; exit 1; }
run "$CUDABOX" run -- python saxpy.py sm_120 || { say "the job failed (see above)"; exit 1; }
run "$CUDABOX" validate
code=$?
case $code in
    0) say "validated on a GPU" ;;
    4) say "validated without a GPU (exit 4: everything that needs no GPU passed)" ;;
    *) say "validation failed (exit $code)"; exit 1 ;;
esac
run "$CUDABOX" doctor
((${#missing[@]})) && say "missing: ${missing[*]}"
say "done: the project is in $DEMO; try \`cd $DEMO && $CUDABOX shell\`"
exit 0
