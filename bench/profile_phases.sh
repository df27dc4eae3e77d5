#!/usr/bin/env bash
# bench/profile_phases.sh [NAIAD FLAGS...] — where a request's time goes, per protocol and
# concurrency: serves shared/bench/models with one naiad, drives HTTP JSON, HTTP binary and
# gRPC at c=1 and c=64 (client pinned to CPU 1), samples the server with py-spy and prints
# the phase split (bench/profile_breakdown.py) with server and model-process CPU per request.
# Needs py-spy (pip install py-spy; PYSPY names the binary when it is not on PATH).
set -u
root=$(cd "$(dirname "$0")/.." && pwd); B=${BENCH_DIR:-$root/../shared/bench}
PYSPY=${PYSPY:-py-spy}; hp=${PORT:-22600}; gp=$((hp+1)); mp=$((hp+2))
out=$(mktemp -d); export BODY_DIR=$out; python3 "$B/make_bodies.py" "$out" add_sub
setsid "$root/.venv/bin/naiad" serve --model-repository "$B/models" --http-port $hp --grpc-port $gp \
  --metrics-port $mp --http-address 127.0.0.1 --grpc-address 127.0.0.1 --metrics-address 127.0.0.1 "$@" \
  > "$out/naiad.log" 2>&1 & np=$!
for i in $(seq 120); do grep -q "naiad is ready" "$out/naiad.log" && break; sleep 0.5; done
ticks() { local t=0; for p in "$@"; do t=$((t + $(awk '{print $14+$15}' /proc/$p/stat))); done; echo $t; }
stubs=$(pgrep -P $np -f naiad_backend_python.model_side.stub | tr '\n' ' ')
hz=$(getconf CLK_TCK)
for proto in json bin grpc; do for c in 1 64; do
  s0=$(ticks $np); m0=$(ticks $stubs)
  if [ $proto = grpc ]; then
    n=$([ $c = 1 ] && echo 6000 || echo 15000)
    taskset -c 1 h2load -n $n -c $c -m 1 -H 'content-type: application/grpc' -H 'te: trailers' \
      -d "$out/grpc_body.bin" "http://127.0.0.1:$gp/inference.GRPCInferenceService/ModelInfer" > "$out/load" 2>&1 &
  else
    taskset -c 1 wrk -t1 -c$c -d7s -s "$B/wrk_$proto.lua" "http://127.0.0.1:$hp/v2/models/add_sub/infer" > "$out/load" 2>&1 &
  fi
  lp=$!; sleep 1
  "$PYSPY" record -p $np -d 4 -r 250 -f raw --threads --nonblocking -o "$out/prof-$proto-$c.txt" >/dev/null 2>&1
  wait $lp
  s1=$(ticks $np); m1=$(ticks $stubs)
  if [ $proto = grpc ]; then reqs=$(awk '/succeeded,/ {print $8}' "$out/load"); rps=$(awk '/finished in/ {print $4}' "$out/load")
  else reqs=$(awk '/requests in/ {print $1}' "$out/load"); rps=$(awk '/Requests\/sec/ {print $2}' "$out/load"); fi
  echo "== $proto c=$c: $rps req/s; server CPU $(( (s1-s0)*1000000/hz/reqs )) us/request, model process CPU $(( (m1-m0)*1000000/hz/reqs )) us/request"
  python3 "$root/bench/profile_breakdown.py" "$out/prof-$proto-$c.txt" "$reqs" "$(echo "($s1-$s0)/$hz" | bc -l)"
done; done
kill -- -$np; wait $np 2>/dev/null; cp "$out"/prof-*.txt /tmp/ 2>/dev/null; rm -rf "$out"
