#!/usr/bin/env bash
# The demo: start vlessbenchd on its embedded defaults (loopback only), measure direct vs the
# built-in VLESS client (TCP_NODELAY on, and a Nagle-prone one) against the default-ACK and the
# QUICKACK listener, and v2ray's client when installed. The seed's ~40 ms stall appears on the
# default-ACK listener with the Nagle-prone client, and disappears with QUICKACK. Then the other
# targets, direct vs built-in vs v2ray: HTTPS (:8081, the inner TLS handshake as its own phase),
# the server-first banner (:8082, time to the first server byte), a bulk run (64 MiB each way), and
# UDP: one datagram's round trip to the UDP echo (:8083) and an A query to the DNS responder
# (:8053), direct vs the built-in client's UDP command (TLS and WebSocket) vs v2ray's SOCKS5 UDP.
# Usage: tools/demo.sh [--vm] [--full] [--keep]   (--full: the seed's counts instead of short ones;
#   --vm: the seed's layout, host -> VM: the daemon in a qemu guest booted by tools/vm.sh, the
#   runner in the host-side network namespace, through the guest's virtual NIC; every run verified
#   against the guest daemon's log fetched from its admin listener; root only, tools/deps.sh --vm;
#   --keep: the daemon stays up at the end, its dashboard on http://127.0.0.1:9090/ showing the
#   demo's sessions; verifying the UDP runs then waits about a minute for their flows' lines)
#   --rtt MS (with --vm): the paths users have, across an emulated MS ms round trip: the guest's config
#   is the package's plus a far twin of the VLESS listeners (ports 8460-8464, `emulate = { delay_ms =
#   MS }`), the seed's comparison and the transports batch run near and far (the runner fits each
#   client's and transport's new request as fixed + k x RTT), and the real cores (`vlessbench clients`
#   with the cores of ../shared/peers or PATH) near and far; the closing table: per client and
#   transport, k, fixed and the new-request time at MS ms (tools/demo_summary.py --rtt)
# It ends with what it found, in five lines, and where to go next (tools/demo_summary.py).
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${VLESSBENCH_BIN:-build/bin}
vm=0 full=0 keep=0 rtt=0
while (($#)); do
  case "$1" in
    --vm) vm=1 ;;
    --full) full=1 ;;
    --keep) keep=1 ;;
    --rtt) [[ $# -ge 2 ]] || { echo "tools/demo.sh: --rtt needs a value in ms (e.g. --rtt 50)" >&2; exit 2; }
      rtt=$2; shift ;;
    --rtt=*) rtt=${1#--rtt=} ;;
    *) echo "tools/demo.sh: unknown argument '$1' (--vm, --full, --keep, --rtt MS)" >&2; exit 2 ;;
  esac
  shift
done
if [[ ! $rtt =~ ^[0-9]+$ ]] || ((rtt > 10000)); then
  echo "tools/demo.sh: --rtt '$rtt': a whole number of milliseconds, 0..10000" >&2; exit 2
fi
if ((rtt && !vm)); then
  echo "tools/demo.sh: --rtt needs --vm (netem: this machine's kernel may have no qdiscs; the guest's Debian kernel has)" >&2
  exit 2
fi
work=$(mktemp -d /tmp/vlessbench-demo.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  # Only these: with --keep the daemon is not among them and stays up.
  if ((${#pids[@]})); then wait "${pids[@]}" 2>/dev/null || true; fi
  if ((vm)); then tools/vm.sh stop; fi
}
trap cleanup EXIT

far_listener() {  # far_listener NAME PORT KEY-LINES...: NAME's twin NAME-far, emulated $rtt ms away
  local name=$1 port=$2
  shift 2
  printf '\n[[vless]]\nname = "%s-far"\nlisten = "0.0.0.0:%s"\n' "$name" "$port"
  printf '%s\n' "$@"
  printf 'emulate = { delay_ms = %s }\n' "$rtt"
}

host=127.0.0.1
client=()   # the client side's prefix: the host-side namespace with --vm
if ((vm)); then
  if ((rtt)); then
    # The package's config (a UUID of its own) plus a far twin of each VLESS listener.
    sed "s/00000000-0000-4000-8000-000000000000/$(cat /proc/sys/kernel/random/uuid)/" config/vlessbenchd.toml \
      > "$work/guest.toml"
    {
      far_listener default-ack 8460 'tcp = { nodelay = true, quickack = "kernel" }' \
        'upstream_tcp = { nodelay = true, quickack = "kernel" }'
      far_listener quickack 8461 'tcp = { nodelay = true, quickack = "on" }' \
        'upstream_tcp = { nodelay = true, quickack = "on" }'
      far_listener ws 8462 'transport = "ws"' 'path = "/ws"' 'max_early_data = 2048'
      far_listener httpupgrade 8463 'transport = "httpupgrade"' 'path = "/up"'
      far_listener grpc 8464 'transport = "grpc"'
    } >> "$work/guest.toml"
    VLESSBENCH_VM_CONFIG=$work/guest.toml tools/vm.sh start
  else
    tools/vm.sh start
  fi
  host=10.77.0.2
  client=(tools/vm.sh exec)
  link_kernel=$(tools/vm.sh links | grep '#default-ack-default$')
  link_quick=$(tools/vm.sh links | grep '#quickack-default$')
  link_ws=$(tools/vm.sh links | grep '#ws-default$')
  link_up=$(tools/vm.sh links | grep '#httpupgrade-default$')
  link_grpc=$(tools/vm.sh links | grep '#grpc-default$')
  if ((rtt)); then
    link_kernel_far=$(tools/vm.sh links | grep '#default-ack-far-default$')
    link_quick_far=$(tools/vm.sh links | grep '#quickack-far-default$')
    link_ws_far=$(tools/vm.sh links | grep '#ws-far-default$')
    link_up_far=$(tools/vm.sh links | grep '#httpupgrade-far-default$')
    link_grpc_far=$(tools/vm.sh links | grep '#grpc-far-default$')
    echo "far twins of the VLESS listeners on :8460-8464, $rtt ms of emulated round trip (netem in the guest)"
  fi
  echo "vlessbenchd is up in the guest: VLESS+TLS on $host:8443 (default ACK) and :8444 (QUICKACK), targets on :8080 (HTTP), :8081 (HTTPS), :8082 (banner)"
else
  "$bin/vlessbenchd" >"$work/access.jsonl" 2>"$work/daemon.log" &
  daemon=$!
  pids+=("$daemon")
  # Its own line, "vlessbenchd ready (config ...": a bare "ready" also matches "Address already in use".
  for _ in $(seq 100); do
    grep -q "vlessbenchd ready (" "$work/daemon.log" 2>/dev/null && break
    kill -0 "$daemon" 2>/dev/null || break
    sleep 0.1
  done
  if ! grep -q "vlessbenchd ready (" "$work/daemon.log"; then
    echo "tools/demo.sh: vlessbenchd did not start; its own words ($work/daemon.log):" >&2
    cat "$work/daemon.log" >&2
    echo "tools/demo.sh: the demo needs the default ports free: TCP 8080-8082, 8053, 8443-8448 and 9090, UDP 8053 and 8083 (ss -ltnup shows who holds them)" >&2
    exit 1
  fi
  link_kernel=$(grep -o 'vless://[^ ]*#default-ack-default' "$work/daemon.log")
  link_quick=$(grep -o 'vless://[^ ]*#quickack-default' "$work/daemon.log")
  link_ws=$(grep -o 'vless://[^ ]*#ws-default' "$work/daemon.log")
  link_up=$(grep -o 'vless://[^ ]*#httpupgrade-default' "$work/daemon.log")
  link_grpc=$(grep -o 'vless://[^ ]*#grpc-default' "$work/daemon.log")
  echo "vlessbenchd is up: VLESS+TLS on 127.0.0.1:8443 (default ACK) and :8444 (QUICKACK), targets on :8080 (HTTP), :8081 (HTTPS), :8082 (banner)"
fi
uuid=${link_kernel#vless://}; uuid=${uuid%%@*}

other_paths=()  # the HTTPS, banner and bulk runs: direct, built-in (default ACK), v2ray
udp_paths=()    # the UDP and DNS runs: direct, built-in over TLS and WebSocket, v2ray's SOCKS5 UDP
paths=(--path "vless-kernel=$link_kernel" --path "vless-quickack=$link_quick"
       --path "nagle-kernel=$link_kernel" --path "nagle-quickack=$link_quick")
if command -v v2ray >/dev/null; then
  cat >"$work/v2ray-client.json" <<JSON
{"log":{"loglevel":"warning"},
 "inbounds":[{"listen":"127.0.0.1","port":18080,"protocol":"http","settings":{}},
   {"listen":"127.0.0.1","port":18081,"protocol":"socks","settings":{"auth":"noauth","udp":true,"ip":"127.0.0.1"}}],
 "outbounds":[{"protocol":"vless","settings":{"vnext":[{"address":"$host","port":8443,
   "users":[{"id":"$uuid","encryption":"none"}]}]},
   "streamSettings":{"network":"tcp","security":"tls","tlsSettings":{"serverName":"localhost","allowInsecure":true}}}]}
JSON
  "${client[@]}" v2ray -config "$work/v2ray-client.json" >"$work/v2ray.log" 2>&1 &
  pids+=($!)
  sleep 0.5
  paths+=(--path "v2ray-http=http://127.0.0.1:18080")
  other_paths=(--path "v2ray-http=http://127.0.0.1:18080")
  udp_paths=(--path "v2ray-socks=socks5://127.0.0.1:18081")
fi
counts=(--new 40 --reuse 60 --warmup 5)
((full)) && counts=()
nagle=nagle-kernel,nagle-quickack
if ((rtt)); then
  paths+=(--path "vless-kernel-far=$link_kernel_far" --path "vless-quickack-far=$link_quick_far"
          --path "nagle-kernel-far=$link_kernel_far" --path "nagle-quickack-far=$link_quick_far")
  nagle+=,nagle-kernel-far,nagle-quickack-far
fi

"${client[@]}" "$bin/vlessbench" run --target "http://$host:8080/" "${paths[@]}" "${counts[@]}" \
  --nagle-paths "$nagle" --out "$work/run"
if ((rtt)); then
  # Across the emulated path: the transports batch near and far (k and fixed per transport), and
  # the real cores on the raw TLS and ws nodes near and far.
  echo
  "${client[@]}" "$bin/vlessbench" run --target "http://$host:8080/" "${counts[@]}" --out "$work/transports" \
    --path "tls=$link_kernel" --path "ws=${link_ws/&ed=2048/}" --path "ws-ed=$link_ws" --path "httpupgrade=$link_up" \
    --path "grpc=$link_grpc" --path "mux=${link_kernel%%#*}&mux=on#mux" \
    --path "tls-far=$link_kernel_far" --path "ws-far=${link_ws_far/&ed=2048/}" --path "ws-ed-far=$link_ws_far" \
    --path "httpupgrade-far=$link_up_far" --path "grpc-far=$link_grpc_far" --path "mux-far=${link_kernel_far%%#*}&mux=on#mux-far"
  cores=()
  for core in xray sing-box mihomo; do
    [[ -x ../shared/peers/$core ]] && cores+=(--core "$core=$(realpath "../shared/peers/$core")")
  done
  echo
  "${client[@]}" "$bin/vlessbench" clients --target "http://$host:8080/" --link "$link_kernel" --link "$link_kernel_far" --link "$link_ws" \
    --link "$link_ws_far" "${cores[@]}" "${counts[@]}" --out "$work/clients" || echo "(vlessbench clients: exit $?)"
  echo
  tools/demo_summary.py "$work/run"
  echo
  tools/demo_summary.py --rtt "$rtt" "$work/run" "$work/transports" "$work/clients"
  exit 0
fi
other_paths=(--path "vless-kernel=$link_kernel" "${other_paths[@]}")
for target in "https://$host:8081/" "banner://$host:8082"; do
  name=${target%%:*}
  echo
  "${client[@]}" "$bin/vlessbench" run --target "$target" "${other_paths[@]}" "${counts[@]}" --out "$work/$name"
done
# Transports: raw TLS, WebSocket without and with early data, HTTPUpgrade, gRPC, and a Mux.Cool sub of one
# shared TLS connection, one interleaved batch (the built-in client; samples.csv has each sample's
# transport and the server's upgrade phase).
echo
"${client[@]}" "$bin/vlessbench" run --target "http://$host:8080/" "${counts[@]}" --out "$work/transports" \
  --path "tls=$link_kernel" --path "ws=${link_ws/&ed=2048/}" --path "ws-ed=$link_ws" --path "httpupgrade=$link_up" \
  --path "grpc=$link_grpc" --path "mux=${link_kernel%%#*}&mux=on#mux"
echo
"${client[@]}" "$bin/vlessbench" run --target "http://$host:8080/" --bulk 64M "${other_paths[@]}" --out "$work/bulk"
echo
udp_paths=(--path "vless-kernel=$link_kernel" --path "vless-ws=$link_ws"
           --path "vless-xudp=${link_kernel%%#*}&mux=on&packetEncoding=xudp#xudp" "${udp_paths[@]}")
for target in "udp://$host:8083" "dns://$host:8053/host.vlessbench.test"; do
  name=${target%%:*}
  echo
  "${client[@]}" "$bin/vlessbench" run --target "$target" "${udp_paths[@]}" "${counts[@]}" --out "$work/$name"
done
echo
runs="$work/run $work/https $work/banner $work/transports $work/bulk $work/udp $work/dns"
if ((vm)); then
  # The guest's access log stays in the guest: each run's lines come from its admin listener
  # (GET /api/log); --wait covers the UDP flows' lines, written 5 s after their last datagram there.
  admin=$(tools/vm.sh admin | sed -n 1p)
  VLESSBENCH_ADMIN_TOKEN=$(tools/vm.sh admin | sed -n 2p)
  export VLESSBENCH_ADMIN_TOKEN
  echo "Files: $runs (samples.csv, summary.json, report.svg, and daemon-log.jsonl: the run's lines from $admin)"
  status=0
  for run in $runs; do "${client[@]}" "$bin/vlessbench" verify "$run" --daemon "$admin" --wait 30 || status=1; done
  echo
  tools/demo_summary.py "$work/run"
  exit "$status"
fi
echo "Files: $runs (samples.csv, summary.json, report.svg); daemon access log: $work/access.jsonl"
sleep 3  # banner.connection lines are written at close: v2ray closes its upstream a moment later
if ((keep)); then
  # The daemon stays up: its access log (its stdout, in this file) gets a UDP flow's line at the
  # flow's idle timeout (60 s by default), so each run is verified again every 5 s until it
  # passes, for up to 80 s; the last report is shown.
  for run in $runs; do
    for _ in $(seq 16); do
      if report=$("$bin/vlessbench" verify "$run" --log "$work/access.jsonl" 2>&1); then break; fi
      sleep 5
    done
    echo "$report"
  done
  pids=("${pids[@]:1}")
  echo
  tools/demo_summary.py "$work/run" --kept http://127.0.0.1:9090
  echo "vlessbenchd stays up (pid $daemon, links and log: $work/daemon.log); stop it: kill $daemon"
  exit 0
fi
# udp.packet lines are written when a flow idles (60 s by default) or when the daemon stops.
kill -TERM "$daemon" && wait "$daemon" 2>/dev/null || true
for run in $runs; do "$bin/vlessbench" verify "$run" --log "$work/access.jsonl"; done
echo
tools/demo_summary.py "$work/run"
echo "(the demo's daemon has stopped: tools/demo.sh --keep leaves one up)"
