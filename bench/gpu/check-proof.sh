#!/usr/bin/env bash
# `cudabox check` on a real GPU host, as a user would run it: cudabox installed
# from its wheel into its own venv (no network: the wheels travel in .carry/wheels),
# checking the Python environment that holds the frameworks (--python).
#   bash bench/gpu/check-proof.sh OUTDIR [FRAMEWORK_PYTHON]
set -u
out=${1:?OUTDIR}; fwpy=${2:-$(command -v python3)}
mkdir -p "$out"; log="$out/check-proof.log"; : > "$log"
step() { echo "\$ $*" >>"$log"; "$@" >>"$log" 2>&1; echo "exit $?" >>"$log"; echo >>"$log"; }
base=$("$fwpy" -c 'import sys; print(sys.base_prefix)')/bin/python3
step "$base" -m venv /tmp/cudabox-venv
step /tmp/cudabox-venv/bin/pip install -q --no-index --find-links .carry/wheels cudabox
cb=/tmp/cudabox-venv/bin/cudabox
mkdir -p /tmp/cudabox-node && cd /tmp/cudabox-node
step "$cb" --version
step "$cb" check --python "$fwpy" --level 1
"$cb" check --python "$fwpy" --level 3 --json >"$out/check-level3.json" 2>>"$log"; echo "level 3 --json: exit $?" >>"$log"
"$cb" check --python "$fwpy" --level 2 --json >"$out/check-level2.json" 2>>"$log"; echo "level 2 --json: exit $?" >>"$log"
step "$cb" check --python "$fwpy" --level 1 --gpus 2 --no-save
CUDA_VISIBLE_DEVICES= step "$cb" check --python "$fwpy" --level 1 --no-save
step "$cb" check --python "$fwpy" --level 1 --target sm_70 --no-save
step "$cb" doctor
step "$cb" fleet plan --with torch
# the framework Python itself, cudabox from the checkout, none of cudabox's dependencies imported
cd - >/dev/null
step "$fwpy" -c 'import sys; sys.modules.update(typer=None, yaml=None, packaging=None); from cudabox.entry import main; sys.exit(main(["check","--level","2","--no-save"]))'
cp -r ~/.local/state/cudabox/checks "$out/" 2>/dev/null || true
tail -c 6000 "$log"
