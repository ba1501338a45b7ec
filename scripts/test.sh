#!/usr/bin/env bash
# Everything the test suite needs on a fresh machine, then the suite itself:
#   - Debian's postgresql package (the tests start a private cluster from its
#     binaries and stop it afterwards), installed only when missing;
#   - Debian's chromium and chromium-driver (the UI's browser tests drive
#     them through selenium), installed only when missing;
#   - a virtual environment in .venv with partita and its dev extras.
# Extra arguments go to pytest. Exit code 5 (no tests collected) is a failure.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null; then
    echo "== installing PostgreSQL (Debian package postgresql)"
    if [ "$(id -u)" -eq 0 ]; then SUDO=""; else SUDO="sudo"; fi
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq postgresql >/dev/null
fi

if [ ! -x /usr/bin/chromium ] || [ ! -x /usr/bin/chromedriver ]; then
    echo "== installing Chromium (Debian packages chromium, chromium-driver)"
    if [ "$(id -u)" -eq 0 ]; then SUDO=""; else SUDO="sudo"; fi
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium chromium-driver >/dev/null
fi

if [ ! -x .venv/bin/python ]; then
    python3 -m venv .venv
fi
.venv/bin/pip install -q --disable-pip-version-check -e '.[dev]'

set +e
.venv/bin/python -m pytest -q "$@"
status=$?
set -e
if [ "$status" -eq 5 ]; then
    echo "pytest collected no tests: failing" >&2
    exit 1
fi
exit "$status"
