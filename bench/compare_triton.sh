#!/usr/bin/env bash
# bench/compare_triton.sh [EXTRA NAIAD FLAGS...] — runs /work/shared/bench/compare.sh (the real
# Triton server, then naiad, under the same wrk/h2load load) with this checkout's naiad.
# Example: bench/compare_triton.sh --workers 2
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
bench=${BENCH_DIR:-/work/shared/bench}
extra="$*"
exec "$bench/compare.sh" "$root/.venv/bin/naiad serve --model-repository \$MODEL_REPOSITORY \
 --http-port \$HTTP_PORT --grpc-port \$GRPC_PORT --metrics-port \$METRICS_PORT \
 --http-address 127.0.0.1 --grpc-address 127.0.0.1 --metrics-address 127.0.0.1 $extra"
