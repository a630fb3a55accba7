#!/usr/bin/env bash
# Execute a notebook headless into a self-contained HTML report.
#   scripts/render_example.sh NOTEBOOK OUTPUT_DIR [NAME]
# No widget state is stored (the page shows the static tables, which need no
# JavaScript), and no script is loaded from a CDN: nbconvert's template would
# fetch require.js, MathJax and Mermaid from the internet, which an offline
# machine cannot reach.
set -euo pipefail
notebook=$1
outdir=$2
name=${3:-$(basename "$notebook" .ipynb)}
empty_js="data:text/javascript,"
jupyter nbconvert --to html --execute --ExecutePreprocessor.timeout=900 \
  --ExecutePreprocessor.store_widget_state=False \
  --HTMLExporter.require_js_url="$empty_js" --HTMLExporter.mathjax_url="$empty_js" \
  --HTMLExporter.mermaid_js_url="$empty_js" --HTMLExporter.mermaid_layout_elk_js_url="$empty_js" \
  --output-dir "$outdir" --output "$name" "$notebook"
