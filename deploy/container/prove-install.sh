#!/usr/bin/env bash
# Proves the container recipe without a container engine: the same steps as the Dockerfile's
# two stages, in a clean virtual environment under a temporary directory.
#   1. build:   scripts/build-wheels.sh
#   2. runtime: install.sh with the Dockerfile's default VARIANT, BACKENDS and EXTRAS
#               (read from the Dockerfile; override with the same names in the environment)
#   3. the image's entrypoint serves a copy of examples/models' Python model on free loopback
#      ports, and the image's HEALTHCHECK command must pass against it.
# Usage: bash deploy/container/prove-install.sh        (PYTHON selects the interpreter)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
dockerfile=$here/Dockerfile
arg_default() { sed -n "s/^ARG $1=\"\{0,1\}\([^\"]*\)\"\{0,1\}$/\1/p" "$dockerfile" | head -1; }
VARIANT=${VARIANT:-$(arg_default VARIANT)}
BACKENDS=${BACKENDS:-$(arg_default BACKENDS)}
EXTRAS=${EXTRAS-$(arg_default EXTRAS)}
work=$(mktemp -d)
server=
cleanup() { [ -z "$server" ] || kill "$server" 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

start=$SECONDS
bash "$root/scripts/build-wheels.sh" "$work/wheels" > /dev/null
EXTRAS=$EXTRAS sh "$here/install.sh" "$work/wheels" "$work/naiad" "$VARIANT" $BACKENDS
echo "installed in $((SECONDS - start)) s: $(du -sh "$work/naiad" | cut -f1)"

mkdir "$work/models"
cp -r "$root/examples/models/add_sub" "$work/models/"
port=$("$work/naiad/bin/python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
# The image's ENTRYPOINT, with loopback addresses and a free HTTP port instead of 0.0.0.0:8000.
"$work/naiad/bin/naiad" serve --model-repository "$work/models" --http-address 127.0.0.1 \
  --http-port "$port" --grpc-address 127.0.0.1 --grpc-port 0 --metrics-address 127.0.0.1 \
  --metrics-port 0 > "$work/server.log" 2>&1 &
server=$!
# The image's HEALTHCHECK command, pointed at that port.
check=$(sed -n 's/.*CMD \["python", "-c", "\(.*\)"\]$/\1/p' "$dockerfile" | sed "s/:8000/:$port/")
[ -n "$check" ] || { echo "no HEALTHCHECK command found in $dockerfile" >&2; exit 1; }
for _ in $(seq 120); do
  if "$work/naiad/bin/python" -c "$check" 2> /dev/null; then
    echo "HEALTHCHECK passed: naiad from the recipe's install steps is ready"
    exit 0
  fi
  kill -0 "$server" 2> /dev/null || break
  sleep 0.5
done
echo "HEALTHCHECK failed; server log:" >&2
cat "$work/server.log" >&2
exit 1
