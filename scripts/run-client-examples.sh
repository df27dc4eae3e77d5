#!/usr/bin/env bash
# run-client-examples.sh PATH — runs Triton's Python client examples, unchanged, against naiad
# serving our own equivalents of the models they expect (scripts/client_examples/models; the
# ONNX models, labels and images are generated at run time, nothing is fetched).
# PATH: a checkout of github.com/triton-inference-server/client, or its src/python/examples.
# Prints one PASS/FAIL/SKIP line per example and a count; exits 1 when any example fails.
# naiad takes the examples' default ports 8000, 8001 and 8002 on 127.0.0.1 (they must be free).
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: $0 PATH-TO-TRITON-CLIENT-CHECKOUT" >&2; exit 2; }
examples=$1
[ -d "$examples/src/python/examples" ] && examples=$examples/src/python/examples
examples=$(cd "$examples" && pwd)
cd "$(dirname "$0")/.."
[ -x .venv/bin/python ] || bash scripts/setup.sh
# What the examples import beyond tritonclient, as Triton's QA installs it: Pillow (the image
# clients and our image-preprocessing model) and attrdict (image_client.py over HTTP).
# (attrdict is looked up, not imported: it imports only after the example's own patch.)
.venv/bin/python -c "import importlib.util as u, sys; sys.exit(not (u.find_spec('PIL') and u.find_spec('attrdict')))" \
  || .venv/bin/python -m pip install -q pillow attrdict
exec .venv/bin/python scripts/client_examples/run_examples.py "$examples" "$PWD/.venv/bin/naiad"
