#!/usr/bin/env bash
# Sets up .venv with only what serving needs (scripts/setup.sh serve), generates the example
# repository's model files, and serves examples/models on 127.0.0.1 (HTTP 8000, gRPC 8001,
# metrics 8002). Extra arguments go to `naiad serve`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh serve
.venv/bin/python examples/build_models.py
exec .venv/bin/naiad serve --model-repository examples/models \
  --http-address 127.0.0.1 --grpc-address 127.0.0.1 --metrics-address 127.0.0.1 "$@"
