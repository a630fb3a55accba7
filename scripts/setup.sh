#!/usr/bin/env bash
# Set up everything jupyter_torchprof needs on a fresh machine, idempotently,
# saying what each step does and roughly how long it takes:
#   1. a virtual environment in .venv
#   2. torch, unless a torch is already in .venv: `pip install torch==2.13.0`,
#      which on Linux x86-64 from PyPI is the CUDA build (several GB with its
#      nvidia-* wheels); with --cpu (or TORCH_CPU=1) the CPU-only build from
#      PyTorch's CPU wheel index instead (a few hundred MB)
#   3. the package with its test extras, `pip install ".[test]"`: this builds
#      the JupyterLab extension with npm (node_modules, about 0.5 GB)
#   4. Debian's Chromium for the browser tests, with apt (skipped with
#      --no-browser, TORCHPROF_NO_BROWSER=1, or when `chromium` is on PATH)
#
#   scripts/setup.sh                 # all four
#   scripts/setup.sh --cpu           # torch's CPU-only build
#   scripts/setup.sh --no-browser    # no Chromium (what scripts/demo.sh uses)
#   scripts/setup.sh --dry-run       # print the steps and their commands, run nothing
set -euo pipefail
cd "$(dirname "$0")/.."

CPU_INDEX=https://download.pytorch.org/whl/cpu
TORCH_SPEC="torch==${TORCH_VERSION:-2.13.0}"
want_browser=1
want_cpu=0
dry_run=0
case "${TORCH_CPU:-0}" in 1 | yes | true) want_cpu=1 ;; esac
case "${TORCHPROF_NO_BROWSER:-0}" in 1 | yes | true) want_browser=0 ;; esac

usage() { sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; }
for arg in "$@"; do
  case "$arg" in
    --cpu) want_cpu=1 ;;
    --no-browser) want_browser=0 ;;
    --dry-run) dry_run=1 ;;
    -h | --help)
      usage
      exit 0
      ;;
    *)
      echo "setup.sh: unknown option '$arg' (options: --cpu, --no-browser, --dry-run, --help)" >&2
      exit 2
      ;;
  esac
done

total=3
[ "$want_browser" = 1 ] && total=5
n=0
# took: how long the step before took (printed when the next one starts).
took() { [ "$n" = 0 ] || [ "$dry_run" = 1 ] || printf '    (took %dm%02ds)\n' $((SECONDS / 60)) $((SECONDS % 60)); }
step() {
  took
  SECONDS=0
  n=$((n + 1))
  printf '\n==> [%d/%d] %s\n' "$n" "$total" "$1"
  [ -n "${2:-}" ] && printf '    %s\n' "$2"
  return 0
}
# run CMD...: run it, or only show it with --dry-run.
run() {
  printf '    $ %s\n' "$*"
  [ "$dry_run" = 1 ] || "$@"
}

PYTHON=${PYTHON:-python3}
step "Python virtual environment in .venv" "(seconds)"
if [ -x .venv/bin/python ]; then
  echo "    .venv exists: kept"
else
  run "$PYTHON" -m venv .venv
fi
if [ "$dry_run" = 0 ]; then
  # shellcheck disable=SC1091
  . .venv/bin/activate
fi
# pip's own upgrade: a fresh venv's pip may be too old for the build backend.
run python -m pip install -q --upgrade pip

have_torch=""
if [ -x .venv/bin/python ]; then
  have_torch=$(.venv/bin/python -c "import torch; print(torch.__version__)" 2>/dev/null || true)
fi
if [ -n "$have_torch" ]; then
  [ "$want_cpu" = 1 ] && cpu_note=" (--cpu applies only when .venv has no torch)" || cpu_note=""
  step "torch: already in .venv ($have_torch), kept$cpu_note" \
    "(to switch to the CPU-only build: .venv/bin/pip install --force-reinstall $TORCH_SPEC --index-url $CPU_INDEX)"
elif [ "$want_cpu" = 1 ]; then
  step "torch, the CPU-only build, from PyTorch's CPU wheel index" \
    "(a few hundred MB; 1-3 minutes)"
  run python -m pip install "$TORCH_SPEC" --index-url "$CPU_INDEX"
else
  step "torch from PyPI: on Linux x86-64 this is the CUDA build" \
    "(several GB with its nvidia-* wheels; 3-10 minutes. For the CPU-only build instead: scripts/setup.sh --cpu)"
  run python -m pip install "$TORCH_SPEC"
fi

step "jupyter_torchprof with its test extras: pip install \".[test]\"" \
  "(about 140 packages, then the JupyterLab extension is built with npm: npm install fills node_modules (~0.5 GB) and webpack bundles it; 3-8 minutes the first time, pip shows a spinner while npm runs)"
if ! command -v npm >/dev/null; then
  echo "setup.sh: npm (Node.js >= 18) is needed to build the JupyterLab extension" >&2
  [ "$dry_run" = 1 ] || exit 1
fi
run python -m pip install --progress-bar on ".[test]"

if [ "$want_browser" = 1 ]; then
  found=$(command -v chromium || command -v chromium-browser || true)
  if [ -n "$found" ]; then
    step "Chromium for the browser tests: $found is there, kept"
  else
    step "Chromium for the browser tests, from Debian with apt (sudo unless root)" \
      "(the browser tests drive JupyterLab in it; apt installs chromium and about 130 packages it needs, ~300 MB, 1-3 minutes. Skip with --no-browser or TORCHPROF_NO_BROWSER=1: the browser tests are then skipped)"
    sudo=()
    [ "$(id -u)" = 0 ] || sudo=(sudo)
    run "${sudo[@]}" apt-get update -q
    run "${sudo[@]}" apt-get install -y -q chromium
  fi
  # The terminal test runs a real ipython in an 80-column tmux pane.
  if command -v tmux >/dev/null; then
    step "tmux for the terminal test: $(command -v tmux) is there, kept"
  else
    step "tmux for the terminal test (an 80-column ipython), from Debian with apt" "(one small package, seconds)"
    sudo=()
    [ "$(id -u)" = 0 ] || sudo=(sudo)
    run "${sudo[@]}" apt-get install -y -q tmux || { run "${sudo[@]}" apt-get update -q && run "${sudo[@]}" apt-get install -y -q tmux; }
  fi
fi

if [ "$dry_run" = 1 ]; then
  echo
  echo "dry run: nothing was changed"
  exit 0
fi
took
echo
echo "setup done: $(python -c 'import jupyter_torchprof, torch; print("jupyter_torchprof", jupyter_torchprof.__version__, "· torch", torch.__version__)')"
