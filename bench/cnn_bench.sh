#!/usr/bin/env bash
# bench/cnn_bench.sh [FLAGS...] — bench/cnn_bench.py with this checkout's venv, after making sure
# the anchors of ../shared/bench exist (the real Triton server, wrk, h2load). Flags pass through,
# e.g. `bench/cnn_bench.sh --naiad-flags '--workers 1' --json /tmp/cnn.json`.
# BENCH_DIR overrides the location of shared/bench; ANCHORS that of its environments.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
export BENCH_DIR=${BENCH_DIR:-$root/../shared/bench}
"$BENCH_DIR/setup_anchors.sh" >/dev/null
exec "$root/.venv/bin/python" "$root/bench/cnn_bench.py" "$@"
