"""The seed's finding, reproduced: a Nagle-prone client (no TCP_NODELAY, TLS 1.3, VLESS header + GET
sent after the handshake) stalls ~40 ms on a delayed ACK against quickack = "kernel", not against
quickack = "on"; a TCP_NODELAY client never does. v2ray 4.34 as the server is the reference.

Asserts the ordering of medians with generous margins; it is not a benchmark."""
import random
import statistics

from harness import (ANY_PORT, SANITIZED, Daemon, Suite, V2ray, check, free_port, make_cert, policy, require_binary, skip_file,
                     route_session, tempdir, v2ray_server_config, vless_get)

suite = Suite("test_stall")
require_binary()
if SANITIZED:
    skip_file("under a sanitizer (timings are not meaningful there)")

ROUNDS = 15
WARMUP = 2
STALL_MS = 30.0
FAST_MS = 15.0

D = Daemon()  # the harness's default: a "kernel" and a "quick" VLESS listener and an HTTP target
TP = D.target_port
# BoringSSL holds TLS 1.3 tickets until its first application-data write, so turning them on must
# not hide the stall (docs/configuration.md); a second daemon, as [tls] is global.
DT = Daemon({
    "users": [{"name": D.user, "uuid": D.uuid}],
    "tls": {"session_tickets": True},
    "vless": [{"name": "kernel-tickets", "listen": ANY_PORT, "tcp": policy(True, "kernel")}],
    "target": [{"name": "http", "listen": ANY_PORT}],
})
CERT, KEY = make_cert(tempdir())
V2_PORT = free_port()
V = V2ray(v2ray_server_config(V2_PORT, D.uuid, CERT, KEY), V2_PORT)

PATHS = {
    # name: (port, nodelay)
    "kernel/nagle": (D.port("kernel"), False),
    "on/nagle": (D.port("quick"), False),
    "kernel/nodelay": (D.port("kernel"), True),
    "on/nodelay": (D.port("quick"), True),
    "v2ray/nagle": (V2_PORT, False),
    "tickets/nagle": (DT.port("kernel-tickets"), False),
}


def server_timing_ms(header: str, name: str) -> float | None:
    for part in header.split(","):
        metric, _, params = part.strip().partition(";")
        if metric == name and params.startswith("dur="):
            return float(params[4:])
    return None


def measure():
    """Interleaved rounds; returns {path: [(seconds, response)]} without the warm-ups."""
    samples = {name: [] for name in PATHS}
    rng = random.Random(4242)
    for rnd in range(WARMUP + ROUNDS):
        order = list(PATHS)
        rng.shuffle(order)
        for name in order:
            port, nodelay = PATHS[name]
            # Every path ends at D's target, so its log shows the route of each sample.
            resp, secs = vless_get(port, D.uuid, TP, "/generate_204", nodelay=nodelay,
                                   headers={"X-Vlessbench-Path": name, "X-Vlessbench-Seq": str(rnd),
                                            "X-Vlessbench-Run": "stall"})
            check(resp.status == 204, (name, resp))
            if rnd >= WARMUP:
                samples[name].append((secs, resp))
    return samples


RESULTS = {}


@suite.test
def medians_show_the_stall_and_its_cure():
    samples = measure()
    RESULTS.update(samples)
    med = {name: statistics.median(s for s, _ in v) * 1000 for name, v in samples.items()}
    worst = {name: max(s for s, _ in v) * 1000 for name, v in samples.items()}
    print("new connection + GET /generate_204, median (max) over %d samples:" % ROUNDS)
    for name in PATHS:
        print(f"  {name:16s} {med[name]:7.2f} ms  ({worst[name]:.2f})")
    check(med["kernel/nagle"] >= STALL_MS, f"no stall against quickack=kernel: {med}")
    check(med["on/nagle"] < FAST_MS, f"quickack=on did not cure the stall: {med}")
    check(med["kernel/nodelay"] < FAST_MS and med["on/nodelay"] < FAST_MS, f"TCP_NODELAY client slow: {med}")
    check(med["v2ray/nagle"] >= STALL_MS, f"v2ray reference shows no stall: {med}")
    check(med["tickets/nagle"] >= STALL_MS, f"session_tickets = true hides the stall: {med}")
    slow_on = sum(1 for s, _ in samples["on/nagle"] if s * 1000 > STALL_MS)
    check(slow_on <= ROUNDS // 5, f"{slow_on} of {ROUNDS} quickack=on samples over {STALL_MS} ms")
    for name in ("kernel/nagle", "on/nagle", "kernel/nodelay", "on/nodelay"):
        for _, resp in samples[name]:
            check(resp.headers["x-vlessbench-route"].startswith("vless session="), resp.headers)
    for name in ("v2ray/nagle", "tickets/nagle"):  # other servers dial D's target: direct for it
        for _, resp in samples[name]:
            check(resp.headers["x-vlessbench-route"] == "direct", resp.headers)


@suite.test
def server_timing_and_log_flag_the_stall():
    check(RESULTS, "no samples")

    def vless_phase(name):
        return [server_timing_ms(r.headers.get("server-timing", ""), "vless") for _, r in RESULTS[name]]

    kernel_vless = vless_phase("kernel/nagle")
    on_vless = vless_phase("on/nagle")
    check(None not in kernel_vless + on_vless, "responses without a vless Server-Timing phase")
    print(f"  Server-Timing vless phase median: kernel/nagle {statistics.median(kernel_vless):.2f} ms, "
          f"on/nagle {statistics.median(on_vless):.2f} ms")
    check(statistics.median(kernel_vless) >= STALL_MS, kernel_vless)
    check(statistics.median(on_vless) < FAST_MS, on_vless)

    def sessions(name):
        out = []
        for _, r in RESULTS[name]:
            sid = route_session(r.headers["x-vlessbench-route"])
            out.append(D.wait_event("vless.session", session=sid))
        return out

    k = sessions("kernel/nagle")
    flagged = sum(1 for s in k if s["stall_suspected"])
    check(all(s["listener"] == "kernel" and s["policy"]["quickack"] == "kernel" for s in k), k[0])
    check(flagged >= (ROUNDS * 2) // 3, f"only {flagged} of {ROUNDS} kernel/nagle sessions flagged")
    for name in ("on/nagle", "kernel/nodelay", "on/nodelay"):
        s = sessions(name)
        n = sum(1 for x in s if x["stall_suspected"])
        check(n <= ROUNDS // 5, f"{n} of {ROUNDS} {name} sessions flagged as stalled")
    print(f"  stall_suspected: kernel/nagle {flagged}/{ROUNDS}")
    D.wait_stderr("suspected Nagle/delayed-ACK stall")


if __name__ == "__main__":
    try:
        suite.run()
    finally:
        V.stop()
        DT.stop()
        D.stop()
