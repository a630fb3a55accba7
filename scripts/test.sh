#!/usr/bin/env bash
# Set up (scripts/setup.sh) and run every test: Python unit and integration
# tests, the TypeScript tests, and the browser tests in a real JupyterLab.
# Setup installs Debian's Chromium with apt when no `chromium` is on PATH
# (TORCHPROF_NO_BROWSER=1 skips that, and the browser tests are skipped).
# Extra arguments go to pytest (e.g. scripts/test.sh -k magic).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
# shellcheck disable=SC1091
. .venv/bin/activate
if [ -d labextension/src/__tests__ ] || ls labextension/src/*.test.ts >/dev/null 2>&1; then
  printf '\n==> TypeScript tests (jest; seconds)\n'
  npm test --silent
fi
printf '\n==> Python tests: python -m pytest %s\n' "$*"
# pytest exits 5 when it collected no test: that is a failure here too.
python -m pytest "$@"
