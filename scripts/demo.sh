#!/usr/bin/env bash
# Set up (scripts/setup.sh --no-browser) and run the example notebook, writing
# everything into one folder outside the sources (demo-output/, git-ignored):
# the executed notebook as HTML, the exported report with the timeline, the
# Kineto trace and the run store.
#
#   scripts/demo.sh                 # execute examples/quickstart.ipynb headless
#   scripts/demo.sh --lab           # open it in JupyterLab instead
#   scripts/demo.sh --out DIR       # write into DIR instead of demo-output/
#   scripts/demo.sh --no-setup      # .venv is set up already: skip scripts/setup.sh
# Options for the setup (--cpu) are passed on to scripts/setup.sh.
set -euo pipefail
caller=$PWD
cd "$(dirname "$0")/.."

out=demo-output
lab=0
setup=1
setup_args=(--no-browser)
while [ $# -gt 0 ]; do
  case "$1" in
    --lab) lab=1 ;;
    --no-setup) setup=0 ;;
    --cpu) setup_args+=(--cpu) ;;
    --out)
      [ $# -ge 2 ] || { echo "demo.sh: --out needs a folder" >&2; exit 2; }
      case "$2" in /*) out=$2 ;; *) out=$caller/$2 ;; esac
      shift
      ;;
    -h | --help)
      sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'
      exit 0
      ;;
    *)
      echo "demo.sh: unknown option '$1' (options: --lab, --out DIR, --no-setup, --cpu, --help)" >&2
      exit 2
      ;;
  esac
  shift
done

if [ "$setup" = 1 ]; then
  scripts/setup.sh "${setup_args[@]}"
fi
# shellcheck disable=SC1091
. .venv/bin/activate

mkdir -p "$out"
out=$(cd "$out" && pwd)
# The notebook runs from a copy in the output folder, so what it writes
# beside itself (the run store .torchprof/, torchprof-exports/) lands there
# and not in examples/. A copy you edited is kept until the example changes.
if [ ! -e "$out/quickstart.ipynb" ] || [ examples/quickstart.ipynb -nt "$out/quickstart.ipynb" ]; then
  cp examples/quickstart.ipynb "$out/quickstart.ipynb"
fi

if [ "$lab" = 1 ]; then
  printf '\n==> JupyterLab on %s (its runs go to %s/.torchprof/runs)\n' "$out/quickstart.ipynb" "$out"
  cd "$out"
  exec jupyter lab quickstart.ipynb
fi

printf '\n==> Running examples/quickstart.ipynb headless in %s\n' "$out"
printf '    (a profiled training step, then eager vs torch.compile: Inductor compiles C++ with the\n'
printf '     system compiler (g++ or clang++); about 1-3 minutes on a small CPU)\n'
scripts/render_example.sh "$out/quickstart.ipynb" "$out" quickstart

report="$out/torchprof-exports/train-step.html"
[ -f "$report" ] || { echo "demo.sh: the notebook ran but wrote no $report" >&2; exit 1; }
cat <<MSG

demo done; everything is in $out/
  $report
      the report: findings, sortable op/kernel/step tables and the timeline (open it in a browser; works offline)
  $out/quickstart.html
      the executed notebook (static tables)
  $out/torchprof-exports/train-step.json.gz
      the Kineto trace (Perfetto opens it; jupyter_torchprof.load() reads it back)
  $out/.torchprof/runs/
      the run store: one folder per profiled run
Interactive views: scripts/demo.sh --lab
MSG
