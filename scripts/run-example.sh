#!/usr/bin/env bash
# Sets everything up, starts the Jumpgate service on loopback, runs an example job end to end
# (generated data -> JSON scan NCA -> NTF over TCP -> the Python client) and prints the result.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
data=.jumpgate/example-data
mkdir -p "$data"
port=${JUMPGATE_PORT:-8470}
.venv/bin/jumpgate serve --port "$port" --data-root "$data" > .jumpgate/server.log 2>&1 &
server=$!
trap 'kill $server 2>/dev/null; wait $server 2>/dev/null || true' EXIT
.venv/bin/jumpgate example --url "http://127.0.0.1:$port" --data-root "$data"
