#!/usr/bin/env bash
# Execute a notebook headless into a self-contained HTML report.
#   scripts/render_example.sh NOTEBOOK OUTPUT_DIR [NAME]
# No widget state is stored (the page shows the static tables, which need no
# JavaScript), and no script is loaded from a CDN: nbconvert's template would
# fetch require.js and MathJax from the internet, which an offline machine
# cannot reach. (Its Mermaid URL cannot be set from the command line in
# nbconvert 7.17, and is imported only by a page that holds a Mermaid diagram;
# tests/test_examples.py opens the page with the network cut.)
set -euo pipefail
notebook=$1
outdir=$2
name=${3:-$(basename "$notebook" .ipynb)}
empty_js="data:text/javascript,"
jupyter nbconvert --to html --execute --ExecutePreprocessor.timeout=900 \
  --ExecutePreprocessor.store_widget_state=False \
  --HTMLExporter.require_js_url="$empty_js" --HTMLExporter.mathjax_url="$empty_js" \
  --output-dir "$outdir" --output "$name" "$notebook"
