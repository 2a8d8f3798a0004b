#!/usr/bin/env bash
# Create the project venv and install cudabox with its dev extras.
# On a bare Debian python3 without ensurepip, install python3-venv first.
set -euo pipefail
python=${1:-python3}
venv=${2:-.venv}
if ! "$python" -m venv --help >/dev/null 2>&1 || ! "$python" -c "import ensurepip" >/dev/null 2>&1; then
  echo "bootstrap: installing python3-venv" >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null
fi
[ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
"$venv/bin/python" -m pip install -q --disable-pip-version-check -e '.[dev]'
echo "bootstrap: $("$venv/bin/cudabox" --version) in $venv" >&2
