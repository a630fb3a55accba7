#!/usr/bin/env bash
# Set up (scripts/setup.sh) and run the example notebook.
#
#   scripts/demo.sh           # execute examples/quickstart.ipynb headless into quickstart.html
#   scripts/demo.sh --lab     # open it in JupyterLab instead
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --no-browser
# shellcheck disable=SC1091
. .venv/bin/activate
if [ "${1:-}" = "--lab" ]; then
  exec jupyter lab examples/quickstart.ipynb
fi
scripts/render_example.sh examples/quickstart.ipynb . quickstart
echo "wrote $(pwd)/quickstart.html"
