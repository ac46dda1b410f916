#!/usr/bin/env bash
# The demo: start vlessbenchd on its embedded defaults (loopback only), measure direct vs the
# built-in VLESS client (TCP_NODELAY on, and a Nagle-prone one) against the default-ACK and the
# QUICKACK listener, and v2ray's client when installed. The seed's ~40 ms stall appears on the
# default-ACK listener with the Nagle-prone client, and disappears with QUICKACK.
# Usage: tools/demo.sh [--full]   (--full: the seed's counts instead of short ones)
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${VLESSBENCH_BIN:-build/bin}
work=$(mktemp -d /tmp/vlessbench-demo.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup EXIT

"$bin/vlessbenchd" >"$work/access.jsonl" 2>"$work/daemon.log" &
pids+=($!)
for _ in $(seq 50); do
  grep -q "ready" "$work/daemon.log" 2>/dev/null && break
  sleep 0.1
done
grep -q "ready" "$work/daemon.log" || { cat "$work/daemon.log" >&2; exit 1; }
link_kernel=$(grep -o 'vless://[^ ]*#default-ack-default' "$work/daemon.log")
link_quick=$(grep -o 'vless://[^ ]*#quickack-default' "$work/daemon.log")
uuid=${link_kernel#vless://}; uuid=${uuid%%@*}
echo "vlessbenchd is up: VLESS+TLS on 127.0.0.1:8443 (default ACK) and :8444 (QUICKACK), target on :8080"

paths=(--path "vless-kernel=$link_kernel" --path "vless-quickack=$link_quick"
       --path "nagle-kernel=$link_kernel" --path "nagle-quickack=$link_quick")
if command -v v2ray >/dev/null; then
  cat >"$work/v2ray-client.json" <<JSON
{"log":{"loglevel":"warning"},
 "inbounds":[{"listen":"127.0.0.1","port":18080,"protocol":"http","settings":{}}],
 "outbounds":[{"protocol":"vless","settings":{"vnext":[{"address":"127.0.0.1","port":8443,
   "users":[{"id":"$uuid","encryption":"none"}]}]},
   "streamSettings":{"network":"tcp","security":"tls","tlsSettings":{"serverName":"localhost","allowInsecure":true}}}]}
JSON
  v2ray -config "$work/v2ray-client.json" >"$work/v2ray.log" 2>&1 &
  pids+=($!)
  sleep 0.5
  paths+=(--path "v2ray-http=http://127.0.0.1:18080")
fi
counts=(--new 40 --reuse 60 --warmup 5)
[[ "${1:-}" == "--full" ]] && counts=()

"$bin/vlessbench" run --target http://127.0.0.1:8080/ "${paths[@]}" "${counts[@]}" \
  --nagle-paths nagle-kernel,nagle-quickack --out "$work/run"
echo
echo "Files: $work/run (samples.csv, summary.json, report.svg); daemon access log: $work/access.jsonl"
"$bin/vlessbench" verify "$work/run" --log "$work/access.jsonl"
