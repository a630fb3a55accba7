#!/usr/bin/env bash
# Set up everything jupyter_torchprof needs on a fresh machine, idempotently:
# a virtual environment in .venv with the CPU build of torch (unless a torch is
# already there), the package with its test extras (this builds the
# labextension with npm), and Debian's Chromium for the browser tests.
#
#   scripts/setup.sh            # package + tests
#   scripts/setup.sh --no-browser
set -euo pipefail
cd "$(dirname "$0")/.."

want_browser=1
for arg in "$@"; do
  case "$arg" in
    --no-browser) want_browser=0 ;;
  esac
done

PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
# shellcheck disable=SC1091
. .venv/bin/activate
python -m pip install -q --upgrade pip

# torch: a plain `torch` requirement would pull a multi-GB CUDA build; the CPU
# build is pinned here unless the user already installed the build they want.
if ! python -c "import torch" 2>/dev/null; then
  python -m pip install -q "torch==${TORCH_VERSION:-2.13.0}"
fi

command -v npm >/dev/null || { echo "npm (Node.js >= 18) is needed to build the JupyterLab extension" >&2; exit 1; }
python -m pip install -q ".[test]"

if [ "$want_browser" = 1 ] && ! command -v chromium >/dev/null; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -q >/dev/null && apt-get install -y -q chromium >/dev/null
  else
    sudo apt-get update -q >/dev/null && sudo apt-get install -y -q chromium >/dev/null
  fi
fi
echo "setup done: $(python -c 'import jupyter_torchprof, torch; print("jupyter_torchprof", jupyter_torchprof.__version__, "· torch", torch.__version__)')"
