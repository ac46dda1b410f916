"""No open reflector (issue 23 item 5, docs/target.md "No amplifier"): on a wildcard address, as the
installed config has them, in a network namespace of the test's own with addresses from two /24s
(non-loopback: what a forged source from the network looks like to the daemon).

- DNS response rate limiting, on by default: 9,000 queries at ~1,800/s from one source are answered
  within the budget ([limits] dns_rrl_responses_per_second x window as a burst, then the rate),
  every second limited answer is a truncated one (TC=1, no records, never longer than the query),
  the rest get nothing; /metrics counts each, the access log has one dns.rrl line a second (not one
  per datagram) and no dns.query line for a limited query; a source in another /24, TCP DNS
  from the flooding source and the machine's own address are answered in full.
- With `dig` as a real client: a limited answer's TC makes dig retry over TCP, and it succeeds.
- The UDP echo: for every datagram size from 1 to 300 bytes (direct) the answer is never longer than
  the datagram (full trailer, short form, or none), counted in the flow line and /metrics; through a
  VLESS session (no reflection: the answer goes back into the session) every size from 1 to 80 is
  answered with the whole trailer, appended when the datagram has no room for it.
On today's main every one of these fails: all 9,000 queries are answered and the echo answers 1
byte with 27. Skipped (77) without root (namespace)."""
import shutil
import socket
import struct
import subprocess
import threading
import time
import urllib.request

from harness import (Daemon, Skip, Suite, TlsClient, check, dns_query, echo_datagram, free_port, new_uuid,
                     read_udp_frame, read_vless_response_header, require_binary, run_in_own_netns, udp_frame,
                     vless_header, wait_ports)

SERVER = "10.77.8.1"   # the VM's address
FLOOD = "10.77.9.10"   # a forged source: the victim a reflection would hit
OTHER = "10.77.10.10"  # another /24
run_in_own_netns(addresses=(SERVER, FLOOD, OTHER))

suite = Suite("test_reflector")
require_binary()

UDP_PORT = free_port()
DNS_PORT = free_port()
ADMIN_PORT = free_port()
RATE = 100  # the default [limits] dns_rrl_responses_per_second
D = Daemon({
    "users": [{"name": "alice", "uuid": new_uuid()}],
    "vless": [{"name": "edge", "listen": f"127.0.0.1:{free_port()}"}],
    "target": [{"name": "http", "listen": f"127.0.0.1:{free_port()}"}],
    "udp_target": [{"name": "udp", "listen": f"0.0.0.0:{UDP_PORT}"}],
    "dns": [{"name": "dns", "listen": f"0.0.0.0:{DNS_PORT}"}],
    "admin": {"listen": f"127.0.0.1:{ADMIN_PORT}"},
}, limits={"udp_idle_timeout_ms": 500})
wait_ports([("127.0.0.1", ADMIN_PORT)], proc=D.proc, what="admin listener")


def metrics() -> dict:
    """name{labels} -> value of the daemon's /metrics."""
    req = urllib.request.Request(f"http://127.0.0.1:{ADMIN_PORT}/metrics")
    with urllib.request.urlopen(req, timeout=5) as r:
        text = r.read().decode()
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.rpartition(" ")
            out[key] = float(value)
    return out


def rrl(m: dict, action: str) -> int:
    return int(m.get(f'vlessbench_dns_rrl_responses_total{{listener="dns",action="{action}"}}', 0))


def flags(msg: bytes) -> tuple[int, int]:
    """(flags, ancount) of a DNS message."""
    f, _, an = struct.unpack(">HHH", msg[2:8])
    return f, an


TC = 0x0200


def flood(source: str, count: int, per_second: float) -> dict:
    """count queries from source at per_second, all answers read meanwhile: what came back."""
    got = {"full": 0, "tc": 0, "bytes_in": 0, "bytes_out": 0, "tc_too_long": 0, "tc_with_records": 0}
    sizes = {}
    done = threading.Event()
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as u:
        u.bind((source, 0))
        u.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
        u.settimeout(0.5)

        def read():
            deadline = time.monotonic() + count / per_second + 10
            while time.monotonic() < deadline:
                try:
                    data = u.recv(65535)
                except socket.timeout:
                    if done.is_set():
                        return
                    continue
                got["bytes_out"] += len(data)
                f, an = flags(data)
                if f & TC:
                    got["tc"] += 1
                    qid = struct.unpack(">H", data[:2])[0]
                    got["tc_too_long"] += len(data) > sizes.get(qid, 0)
                    got["tc_with_records"] += an != 0
                else:
                    got["full"] += 1

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        t0 = time.monotonic()
        for i in range(count):
            q = dns_query(i & 0xffff, f"q{i}.vlessbench.test")
            sizes[i & 0xffff] = len(q)
            got["bytes_in"] += len(q)
            wait = t0 + i / per_second - time.monotonic()
            if wait > 0:
                time.sleep(wait)  # pacing the sender, not synchronisation
            u.sendto(q, (SERVER, DNS_PORT))
        got["seconds"] = time.monotonic() - t0
        done.set()
        reader.join(15)
        check(not reader.is_alive(), "reader ended")
    return got


def tcp_queries(source: str, count: int) -> int:
    """count queries over one TCP connection from source; the NOERROR answers with an A record."""
    ok = 0
    with socket.create_connection((SERVER, DNS_PORT), timeout=5, source_address=(source, 0)) as c:
        f = c.makefile("rb")
        for i in range(count):
            q = dns_query(i, f"t{i}.vlessbench.test")
            c.sendall(struct.pack(">H", len(q)) + q)
            (n,) = struct.unpack(">H", f.read(2))
            resp = f.read(n)
            fl, an = flags(resp)
            ok += (fl & 0x000f) == 0 and an >= 1 and not fl & TC
    return ok


@suite.test
def dns_flood_from_one_source_is_rate_limited():
    before = metrics()
    mark = D.mark()
    count = 9000
    g = flood(FLOOD, count, 1800)
    secs = g["seconds"]
    print(f"FIGURE dns_flood_seconds = {secs:.2f}")
    print(f"FIGURE dns_flood_full_answers = {g['full']} (of {count})")
    print(f"FIGURE dns_flood_tc_answers = {g['tc']}")
    print(f"FIGURE dns_flood_bytes_in = {g['bytes_in']}")
    print(f"FIGURE dns_flood_bytes_out = {g['bytes_out']}")
    # The budget: a burst of RATE (window 1 s), then RATE a second (+1 s of slack for scheduling).
    budget = RATE + RATE * (secs + 1)
    check(0 < g["full"] <= budget, (g, budget))
    limited = count - g["full"]
    # slip 2: every second limited answer is sent truncated, the others dropped.
    check(abs(g["tc"] - limited / 2) <= limited * 0.02 + 2, (g, limited))
    check(g["tc_too_long"] == 0 and g["tc_with_records"] == 0, g)
    check(g["bytes_out"] < g["bytes_in"], g)
    # Counted: /metrics, exactly what came back and what did not.
    m = metrics()
    answered = rrl(m, "answered") - rrl(before, "answered")
    slipped = rrl(m, "slipped") - rrl(before, "slipped")
    dropped = rrl(m, "dropped") - rrl(before, "dropped")
    check((answered, slipped) == (g["full"], g["tc"]), (answered, slipped, dropped, g))
    check(answered + slipped + dropped == count, (answered, slipped, dropped))
    # The access log: a dns.query line for each query answered, none for a limited one, and the
    # limited ones summed up in dns.rrl lines (at most one a second).
    queries = [e for e in D.events("dns.query", since=mark) if e.get("peer", "").startswith(FLOOD + ":")]
    check(len(queries) == answered, (len(queries), answered))

    def summed():
        lines = D.events("dns.rrl", since=mark)
        return lines, sum(e["slipped"] for e in lines), sum(e["dropped"] for e in lines)
    D.wait_event("dns.rrl", since=mark, timeout=5, pred=lambda _e: summed()[1:] == (slipped, dropped))
    lines, s, d = summed()
    check((s, d) == (slipped, dropped), (s, d, slipped, dropped))
    check(len(lines) <= secs + 3, len(lines))
    check(all(e["last_prefix"] == "10.77.9.0/24" and e["prefixes"] == 1 for e in lines), lines[:3])
    print(f"FIGURE dns_rrl_log_lines = {len(lines)}")
    # Right after the flood: another /24 has a budget of its own, and TCP is not limited (more
    # queries than the burst, all answered, from the flooding source itself).
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as u:
        u.bind((OTHER, 0))
        u.settimeout(2)
        other = 0
        for i in range(50):
            u.sendto(dns_query(i, f"o{i}.vlessbench.test"), (SERVER, DNS_PORT))
            fl, an = flags(u.recv(65535))
            other += not fl & TC and an >= 1
    check(other == 50, other)
    check(tcp_queries(FLOOD, 3 * RATE) == 3 * RATE, "TCP DNS from the flooding source")
    # The machine itself (a source equal to the address asked, as a client on the VM uses its own
    # address): not limited, as loopback is not; Linux drops such a source from the network.
    judged = sum(rrl(metrics(), a) for a in ("answered", "slipped", "dropped"))
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as u:
        u.connect((SERVER, DNS_PORT))
        u.settimeout(2)
        own = 0
        for i in range(3 * RATE):
            u.send(dns_query(i, f"s{i}.vlessbench.test"))
            fl, an = flags(u.recv(65535))
            own += not fl & TC and an >= 1
    check(own == 3 * RATE, own)
    check(sum(rrl(metrics(), a) for a in ("answered", "slipped", "dropped")) == judged, "own address not judged")


@suite.test
def dig_retries_over_tcp_after_a_truncated_answer():
    dig = shutil.which("dig")
    if not dig:
        raise Skip("dig not installed (bind9-dnsutils)")
    # One answer a second, every limited one truncated (slip 1): the next UDP query is limited.
    e = D.reload(dict(D.cfg, limits=dict(D.cfg.get("limits", {}), dns_rrl_responses_per_second=1, dns_rrl_slip=1)))
    check(e["ok"], e)
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as u:
            u.bind((OTHER, 0))
            u.settimeout(2)
            for i in range(3):
                u.sendto(dns_query(900 + i, "spent.vlessbench.test"), (SERVER, DNS_PORT))
                u.recv(65535)
        mark = D.mark()
        r = subprocess.run([dig, "-b", OTHER, "-p", str(DNS_PORT), f"@{SERVER}", "Dig.vlessbench.test", "A",
                            "+tries=1", "+time=3"], capture_output=True, text=True, timeout=15)
        out = r.stdout
        check(r.returncode == 0, (r.returncode, out, r.stderr))
        check("Truncated, retrying in TCP mode" in out, out)
        check("status: NOERROR" in out and "dig.vlessbench.test." in out.lower() and "\tA\t" in out, out)
        check(any(e.get("transport") == "tcp" for e in D.events("dns.query", since=mark)), "the retry came over TCP")
    finally:
        check(D.reload(dict(D.cfg, limits={k: v for k, v in D.cfg["limits"].items()
                                          if not k.startswith("dns_rrl_")}))["ok"])


def echo_sizes(send, recv, sizes, want_trailer: bytes) -> dict:
    """Each size's datagram, then a padded sentinel: the answers read before the sentinel's echo are
    the datagram's (one flow keeps its order on loopback), so "no answer" needs no timeout."""
    got = {"in": 0, "out": 0, "full": 0, "short": 0, "none": 0}
    for n in sizes:
        send(b"x" * n)
        sentinel = echo_datagram(b"sentinel-%d" % n)
        send(sentinel)
        got["in"] += n + len(sentinel)
        answers = []
        for _ in range(3):
            data = recv()
            if data.startswith(b"sentinel-%d" % n):
                check(len(data) == len(sentinel) and data.endswith(want_trailer), data[-80:])
                got["out"] += len(data)
                got["full"] += 1
                break
            answers.append(data)
        else:
            check(False, ("no sentinel echo", n, answers))
        check(len(answers) <= 1, (n, answers))
        for data in answers:
            check(len(data) <= n, (n, len(data), data[-60:]))
            got["out"] += len(data)
            if b"\nVLESSBENCH-UDP-SHORT need=" in data:
                check(int(data.rpartition(b"need=")[2]) > n, (n, data))  # names the size it needed
                got["short"] += 1
            else:
                check(data.endswith(want_trailer), (n, data[-60:]))
                got["full"] += 1
        if not answers:
            got["none"] += 1
    return got


@suite.test
def echo_answers_are_never_longer_than_the_datagram():
    before = metrics()
    sizes = list(range(1, 301))
    trailer = b"\nVLESSBENCH-UDP udp direct"
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as u:
        u.bind((FLOOD, 0))
        u.settimeout(5)
        port = u.getsockname()[1]
        mark = D.mark()
        g = echo_sizes(lambda b: u.sendto(b, (SERVER, UDP_PORT)), lambda: u.recv(65535), sizes, trailer)
    print(f"FIGURE echo_direct_bytes_in = {g['in']}")
    print(f"FIGURE echo_direct_bytes_out = {g['out']}")
    print(f"FIGURE echo_direct_answers_full_short_none = {g['full']} {g['short']} {g['none']}")
    # Every sentinel and every datagram of at least the trailer's size: full; shorter ones: none (the
    # direct trailer is shorter than the short form).
    check(g["full"] == len(sizes) + len(sizes) - len(trailer) + 1 and g["none"] == len(trailer) - 1, g)
    check(g["out"] <= g["in"], g)
    f = D.wait_event("udp.packet", since=mark, timeout=6, peer=f"{FLOOD}:{port}")
    check(f["bytes_out"] == g["out"] and f["bytes_in"] == g["in"] and f["packets_in"] == 2 * len(sizes), f)
    check(f.get("short_answers", 0) == g["short"] and f["unanswered"] == g["none"], f)
    m = metrics()

    def delta(key):
        return int(m.get(key, 0) - before.get(key, 0))
    check(delta('vlessbench_udp_echo_bytes_total{listener="udp",direction="in"}') == g["in"], m)
    check(delta('vlessbench_udp_echo_bytes_total{listener="udp",direction="out"}') == g["out"], m)
    check(delta('vlessbench_udp_echo_datagrams_total{listener="udp",answer="none"}') == g["none"], m)


@suite.test
def echo_through_vless_answers_every_size_with_the_whole_trailer():
    """A datagram relayed by a VLESS session cannot be a forged reflection (its answer goes back into
    the authenticated session): every size from 1 to 80 gets the full trailer, appended when the
    datagram has no room for it."""
    mark = D.mark()
    sizes = range(1, 81)
    with TlsClient(D.port("edge")) as c:
        c.handshake()
        c.send(vless_header(D.uuid, UDP_PORT, cmd=2))
        read_header = []
        answers = []
        for n in sizes:
            c.send(udp_frame(b"x" * n))
            if not read_header:  # the response header comes with the first answer
                read_vless_response_header(c.stream)
                read_header.append(True)
            answers.append(read_udp_frame(c.stream))
        c.close_notify()
    s = D.wait_event("vless.session", since=mark, timeout=8, cmd="udp")
    trailer = f"\nVLESSBENCH-UDP udp vless session={s['session']} user=alice".encode()
    want = [b"x" * n + trailer if n < len(trailer) else b"x" * (n - len(trailer)) + trailer for n in sizes]
    bad = [(n, a) for n, a, w in zip(sizes, answers, want) if a != w]
    check(not bad, bad[:3])
    print(f"FIGURE echo_vless_appended = {sum(1 for n in sizes if n < len(trailer))}")
    f = D.wait_event("udp.packet", since=mark, timeout=6, route="vless")
    check(f["packets_out"] == len(sizes) and f.get("short_answers", 0) == 0 and f.get("unanswered", 0) == 0, f)
    check(f["bytes_out"] == sum(len(w) for w in want), f)


@suite.test
def metrics_pass_promtool():
    promtool = shutil.which("promtool")
    if not promtool:
        raise Skip("promtool not installed")
    with urllib.request.urlopen(f"http://127.0.0.1:{ADMIN_PORT}/metrics", timeout=5) as r:
        text = r.read()
    check(b"vlessbench_dns_rrl_responses_total" in text and b"vlessbench_udp_echo_bytes_total" in text, text[-400:])
    p = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, timeout=15)
    check(p.returncode == 0, (p.stdout, p.stderr))


try:
    suite.run()
finally:
    D.stop()
