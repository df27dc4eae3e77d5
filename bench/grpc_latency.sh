#!/usr/bin/env bash
# bench/grpc_latency.sh [NAIAD FLAGS...] — gRPC latency percentiles, which compare.sh cannot
# give (h2load prints only the mean and the max). Serves ../shared/bench/models with the real
# Triton server, then with this checkout's naiad (its defaults, plus any flags), and loads
# each with the same h2load ModelInfer calls as compare.sh (add_sub, client on CPU 1) at 1, 8
# and 64 connections, logging every call (--log-file). Prints per row: calls/s, p50, p99,
# p99.9 and max in microseconds, and naiad/Triton for calls/s and p99.
# GRPC_N calls per row (default 30000, as compare.sh). BENCH_DIR overrides shared/bench.
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
bench=${BENCH_DIR:-$root/../shared/bench}
A=${ANCHORS:-/tmp/anchors}
n=${GRPC_N:-30000}
out=$(mktemp -d)
"$bench/setup_anchors.sh" >/dev/null
export BODY_DIR=$out/bodies
mkdir -p "$BODY_DIR"
python3 "$bench/make_bodies.py" "$BODY_DIR" add_sub

load() {  # NAME GRPC_PORT
  # Warm up first (compare.sh's gRPC rows come after a minute of HTTP load).
  taskset -c 1 h2load -n 10000 -c 8 -m 1 -H 'content-type: application/grpc' -H 'te: trailers' \
    -d "$BODY_DIR/grpc_body.bin" "http://127.0.0.1:$2/inference.GRPCInferenceService/ModelInfer" > /dev/null 2>&1
  for c in 1 8 64; do
    taskset -c 1 h2load -n "$n" -c "$c" -m 1 -H 'content-type: application/grpc' -H 'te: trailers' \
      -d "$BODY_DIR/grpc_body.bin" --log-file="$out/$1-$c.log" \
      "http://127.0.0.1:$2/inference.GRPCInferenceService/ModelInfer" > "$out/$1-$c.out" 2>&1
  done
}

tp=$("$bench/triton.sh" "$bench/models" 18000 18001 18002) || exit 1
"$A/venv/bin/python" "$bench/check.py" 18000 18001 && load triton 18001
kill "$tp"; sleep 1
setsid "$root/.venv/bin/naiad" serve --model-repository "$bench/models" --http-port 19000 --grpc-port 19001 \
  --metrics-port 19002 --http-address 127.0.0.1 --grpc-address 127.0.0.1 --metrics-address 127.0.0.1 "$@" \
  > "$out/naiad.log" 2>&1 &
np=$!
for _ in $(seq 1 120); do curl -sf 127.0.0.1:19000/v2/health/ready >/dev/null && break; sleep 0.5; done
"$A/venv/bin/python" "$bench/check.py" 19000 19001 && load naiad 19001
kill -- -"$np" 2>/dev/null || kill "$np"

python3 - "$out" <<'PY'
import re, sys
from pathlib import Path
out = Path(sys.argv[1])
def row(name, c):
    log, text = out / f"{name}-{c}.log", (out / f"{name}-{c}.out").read_text()
    rate = float(re.search(r"finished in [\d.]+m?s, ([\d.]+) req/s", text).group(1))
    times = sorted(int(line.split("\t")[2]) for line in log.read_text().splitlines()
                   if line.count("\t") >= 2 and line.split("\t")[1] == "200")
    pick = lambda q: times[min(len(times) - 1, int(q * len(times)))]
    return rate, pick(0.5), pick(0.99), pick(0.999), times[-1], len(times)
for c in (1, 8, 64):
    rows = {name: row(name, c) for name in ("triton", "naiad")}
    for name, (rate, p50, p99, p999, top, count) in rows.items():
        print(f"{name} grpc c={c} rps={rate:.0f} p50={p50}us p99={p99}us p99.9={p999}us max={top}us ok={count}")
    t, s = rows["triton"], rows["naiad"]
    print(f"ratio grpc c={c}: naiad/triton rps = {s[0] / t[0]:.2f}, p99 = {s[2] / t[2]:.2f}")
PY
rm -rf "$out"
