#!/usr/bin/env bash
# run-python-backend-examples.sh PATH
#
# Runs the examples of a checkout of Triton's python_backend repository
# (github.com/triton-inference-server/python_backend) that need no GPU and no downloaded
# weights, unchanged, model and client, against naiad. The models are laid out as each
# example's README lays them out; the clients are written for localhost:8000 (HTTP),
# 8001 (gRPC) and 8002 (metrics), so naiad listens there, on 127.0.0.1 only.
# Prints one line per example and the count; exits non-zero if any failed.
#
# Left out: instance_kind (downloads ResNet-50 weights), preprocessing (TensorRT on a GPU),
# jax (needs JAX with CUDA, which naiad's environment does not install).
#
# PYTHON selects the interpreter (default: the checkout's .venv), which needs naiad, its
# Python backend, torch and tritonclient[all] (scripts/setup.sh installs them).
set -u
if [ $# -ne 1 ] || [ ! -d "$1/examples" ]; then
  echo "usage: $0 PYTHON_BACKEND_CHECKOUT (a directory with examples/)" >&2
  exit 2
fi
examples=$(cd "$1/examples" && pwd)
root=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON:-$root/.venv/bin/python}
for port in 8000 8001 8002; do
  if ! "$python" -c "import socket,sys; s=socket.socket(); s.bind(('127.0.0.1', int(sys.argv[1])))" "$port" 2>/dev/null; then
    echo "port $port is in use; the examples' clients need 8000-8002" >&2
    exit 2
  fi
done

work=$(mktemp -d)
repo=$work/models
server=""
cleanup() {
  if [ -n "$server" ]; then kill "$server" 2>/dev/null; wait "$server" 2>/dev/null; fi
  rm -rf "$work"
}
trap cleanup EXIT

# place MODEL SOURCE_MODEL [SOURCE_CONFIG]: as the examples' READMEs copy them.
place() {
  mkdir -p "$repo/$1/1"
  cp "$examples/$2" "$repo/$1/1/model.py"
  if [ $# -eq 3 ]; then cp "$examples/$3" "$repo/$1/config.pbtxt"; fi
}
place add_sub add_sub/model.py add_sub/config.pbtxt
place pytorch pytorch/model.py pytorch/config.pbtxt
place nobatch_auto_complete auto_complete/nobatch_model.py
place batch_auto_complete auto_complete/batch_model.py
place bls_sync bls/sync_model.py bls/sync_config.pbtxt
place bls_async bls/async_model.py bls/async_config.pbtxt
place bls_decoupled_sync bls_decoupled/sync_model.py bls_decoupled/sync_config.pbtxt
place bls_decoupled_async bls_decoupled/async_model.py bls_decoupled/async_config.pbtxt
place repeat_int32 decoupled/repeat_model.py decoupled/repeat_config.pbtxt
place square_int32 decoupled/square_model.py decoupled/square_config.pbtxt
place custom_metrics custom_metrics/model.py custom_metrics/config.pbtxt

"$python" -m naiad.cli serve --model-repository "$repo" --http-address 127.0.0.1 --grpc-address 127.0.0.1 \
  --metrics-address 127.0.0.1 > "$work/server.log" 2>&1 &
server=$!
for _ in $(seq 1 240); do
  if "$python" -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/v2/health/ready', timeout=1)" 2>/dev/null; then
    break
  fi
  if ! kill -0 "$server" 2>/dev/null; then
    echo "naiad exited before it was ready:" >&2; tail -30 "$work/server.log" >&2; exit 1
  fi
  sleep 0.5
done

passed=0
total=0
# example name, then its client
while read -r name client; do
  total=$((total + 1))
  if output=$(cd "$examples/.." && timeout 120 "$python" "examples/$client" 2>&1); then
    passed=$((passed + 1))
    echo "PASS $name"
  else
    echo "FAIL $name (exit $?): $(printf '%s\n' "$output" | tail -1)"
  fi
done <<'EOF'
add_sub add_sub/client.py
auto_complete auto_complete/client.py
bls_sync bls/sync_client.py
bls_async bls/async_client.py
bls_decoupled_sync bls_decoupled/sync_client.py
bls_decoupled_async bls_decoupled/async_client.py
custom_metrics custom_metrics/client.py
decoupled_repeat decoupled/repeat_client.py
decoupled_square decoupled/square_client.py
pytorch pytorch/client.py
EOF
echo "$passed of $total examples passed"
[ "$passed" -eq "$total" ]
