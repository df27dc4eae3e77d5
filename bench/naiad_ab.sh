#!/usr/bin/env bash
# bench/naiad_ab.sh 'FLAGS A' 'FLAGS B' [ROUNDS] — naiad alone, two configurations alternating
# (A, B, A, B, ...), each served on fresh free ports and loaded with ../shared/bench/load.sh (the
# rows of compare.sh) for DUR seconds per row (default 4). Without Triton's half of compare.sh
# the pair takes a few minutes, and alternating spreads a busy machine's noise over both.
# Example: bench/naiad_ab.sh '--workers 1' ''     # one process against the defaults
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
bench=${BENCH_DIR:-$root/../shared/bench}
first=$1 second=$2 rounds=${3:-2}
cd "$root"
for round in $(seq 1 "$rounds"); do for flags in "$first" "$second"; do
  read -r hp gp mp < <(.venv/bin/python -c "from naiad.testing import free_port; print(free_port(), free_port(), free_port())")
  setsid .venv/bin/naiad serve --model-repository "$bench/models" --http-port "$hp" --grpc-port "$gp" \
    --metrics-port "$mp" --http-address 127.0.0.1 --grpc-address 127.0.0.1 --metrics-address 127.0.0.1 \
    $flags > /dev/null 2>&1 & server=$!
  for _ in $(seq 1 120); do curl -sf "127.0.0.1:$hp/v2/health/ready" >/dev/null && break; sleep 0.5; done
  echo "== round $round flags '${flags:-(defaults)}' $(date -u +%H:%M:%S) load $(cut -d' ' -f1 /proc/loadavg)"
  DUR=${DUR:-4} GRPC_N=${GRPC_N:-12000} bash "$bench/load.sh" naiad "$hp" "$gp"
  kill -- -"$server" 2>/dev/null || kill "$server"; sleep 2
done; done
