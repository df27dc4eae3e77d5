#!/usr/bin/env bash
# bench/compare_triton.sh [NAIAD FLAGS...] — runs ../shared/bench/compare.sh (the real Triton
# server, then naiad, under the same wrk/h2load load; prints naiad/Triton per row) with this
# checkout's naiad. Without flags naiad runs with its defaults (`naiad serve` with the ports and
# the repository only: what a user gets). Pass flags to measure another configuration, e.g.
# `bench/compare_triton.sh --workers 1` or `bench/compare_triton.sh --backend-config python,execution-mode=inline`.
# BENCH_DIR overrides the location of shared/bench.
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
bench=${BENCH_DIR:-$root/../shared/bench}
extra="$*"
exec "$bench/compare.sh" "$root/.venv/bin/naiad serve --model-repository \$MODEL_REPOSITORY \
 --http-port \$HTTP_PORT --grpc-port \$GRPC_PORT --metrics-port \$METRICS_PORT \
 --http-address 127.0.0.1 --grpc-address 127.0.0.1 --metrics-address 127.0.0.1 $extra"
