#!/usr/bin/env bash
# Control-plane throughput over HTTP: a release `confab serve` on SQLite with AGENTS agents (default 1,000)
# created through the API, then wrk (16 connections, sharing the machine with the server) on the agent
# list, a search, the template list and one agent. Figures: docs/performance.md ("Throughput over HTTP").
# Needs wrk (apt install wrk). Usage: benches/scripts/wrk_list.sh [AGENTS] [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/../.."
agents="${1:-1000}"
seconds="${2:-10}"
cargo build --release --quiet --bin confab
bin="${CARGO_TARGET_DIR:-target}/release/confab"
data="$(mktemp -d)"
port=18181
key="$("$bin" keys create --data "$data" 2>/dev/null | tail -1)"
"$bin" serve --data "$data" --addr "127.0.0.1:$port" --no-preload >"$data/serve.log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null; rm -rf "$data"' EXIT
for _ in $(seq 100); do curl -sf "127.0.0.1:$port/" >/dev/null && break; sleep 0.1; done
for i in $(seq "$agents"); do
  curl -sf -o /dev/null -X POST -H "x-api-key: $key" -H "content-type: application/json" \
    -d "{\"agent_name\":\"agent $i\",\"agent_system_prompt\":\"You are agent $i.\",\"callback_url\":\"https://example.com/hook\"}" \
    "127.0.0.1:$port/v1/ext/agent"
done
id="$(curl -sf -H "x-api-key: $key" "127.0.0.1:$port/v1/ext/agent?perpage=1" | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["id"])')"
for path in "v1/ext/agent?perpage=20" "v1/ext/agent?perpage=100" "v1/ext/agent?perpage=20&search=agent%2099" \
  "v1/ext/template?perpage=20" "v1/ext/agent/$id"; do
  echo "== GET /$path"
  wrk -t2 -c16 -d"${seconds}s" --latency -H "x-api-key: $key" "http://127.0.0.1:$port/$path" | grep -E "Requests/sec|  50%|  99%"
done
