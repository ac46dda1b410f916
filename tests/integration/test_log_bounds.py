"""issue 23 item 10: one connection pipelining tiny HTTP requests to the target cannot make the
access log grow without bound: [log] max_lines_per_second drops the excess, counted in a
log.dropped event with reason "rate". Bounded: 4000 requests, 20 s at most.

issue 38 item 17: that bound is no one's to spend on someone else's route proof. Three direct
clients pipelining /generate_204 beside a VLESS run: the run's lines come out of the
authenticated sessions' budget ([log] max_session_lines_per_second), so verify finds every
sample while the direct flood's lines are dropped."""
import csv
import re
import shutil
import subprocess
import threading
import time
import urllib.request

import harness as h
from harness import ANY_PORT, LOOPBACK, Daemon, Suite, check, peers, require_binary, tcp_connect

suite = Suite("test_log_bounds")
require_binary()

RATE = 200
N = 4000


@suite.test
def flood_one_connection_is_rate_bounded():
    d = Daemon({"users": [], "target": [{"name": "http", "listen": ANY_PORT}],
                "log": {"max_lines_per_second": RATE}})
    before = len(d.events())
    t0 = time.monotonic()
    s = tcp_connect(d.target_port)
    s.settimeout(20)
    s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n" * N)
    got, data = 0, b""
    deadline = time.monotonic() + 20
    while got < N and time.monotonic() < deadline:
        chunk = s.recv(1 << 16)
        if not chunk:
            break
        data += chunk
        got += data.count(b"HTTP/1.1 ")
        data = data[-8:]
    s.close()
    elapsed = time.monotonic() - t0
    dropped = d.wait_event("log.dropped", timeout=10, reason="rate")
    check(dropped["max_lines_per_second"] == RATE, f"log.dropped names the rate: {dropped}")
    check(dropped["lines"] > 0, f"log.dropped counts lines: {dropped}")
    written = len(d.events()) - before
    bound = RATE * (elapsed + 3) + 50
    check(written < bound, f"{written} lines in {elapsed:.1f}s, bound {bound:.0f}")
    print(f"{written} lines written for {N} requests in {elapsed:.2f}s; {dropped}")
    check(written < N / 2, f"{written} lines for {N} requests: the flood was not bounded")
    d.stop()


FLOODERS = 3
FLOOD_BATCH = 200  # pipelined requests per write
FLOOD_SECONDS = 60  # the most a flooder runs (it stops when the run is over)


def flood(port: int, stop: threading.Event, served: list[int]) -> None:
    """One direct client pipelining /generate_204 in batches until stop (or FLOOD_SECONDS)."""
    batch = b"GET /generate_204 HTTP/1.1\r\nHost: x\r\n\r\n" * FLOOD_BATCH
    deadline = time.monotonic() + FLOOD_SECONDS
    n = 0
    try:
        with tcp_connect(port) as s:
            s.settimeout(10)
            while not stop.is_set() and time.monotonic() < deadline:
                s.sendall(batch)
                got, tail = 0, b""
                while got < FLOOD_BATCH:
                    chunk = s.recv(1 << 16)
                    if not chunk:
                        return
                    data = tail + chunk
                    got += data.count(b"HTTP/1.1 204")
                    tail = data[-12:]
                n += FLOOD_BATCH
    except OSError:
        pass
    finally:
        served.append(n)


@suite.test
def direct_flood_keeps_the_route_proof():
    port = h.free_port
    d = Daemon({"users": [{"name": "tester", "uuid": h.new_uuid()}],
                "vless": [{"name": "tls", "listen": f"{LOOPBACK}:{port()}"}],
                "target": [{"name": "http", "listen": f"{LOOPBACK}:{port()}"}],
                "admin": {"listen": f"{LOOPBACK}:{port()}"},
                "log": {"max_lines_per_second": RATE}})
    link = peers.share_links(peers.links_text(d))["tls-tester"]
    mark = d.mark()
    stop, served = threading.Event(), []
    flooders = [threading.Thread(target=flood, args=(d.target_port, stop, served)) for _ in range(FLOODERS)]
    for t in flooders:
        t.start()
    out = h.tempdir("vlessbench-log-flood-")
    try:
        time.sleep(0.5)  # the flood has spent the bucket before the run's first sample
        r = subprocess.run([str(h.CLIENT_BIN / "vlessbench"), "run", "--target",
                            f"http://{LOOPBACK}:{d.target_port}/generate_204", "--path", f"vless={link}",
                            "--new", "15", "--reuse", "15", "--warmup", "1", "--out", str(out), "--seed", "38"],
                           capture_output=True, text=True, timeout=120)
    finally:
        stop.set()
        for t in flooders:
            t.join(30)
    check(r.returncode == 0, f"rc {r.returncode}\n{r.stdout}\n{r.stderr}")
    with open(out / "samples.csv", newline="") as f:
        reader = csv.DictReader(f)
        fields, every = reader.fieldnames, list(reader)
    rows = [s for s in every if s["path"] == "vless"]
    check(len(rows) >= 30 and all(s["ok"] == "1" and s["route"] == "vless" for s in rows), rows[:3])
    flooded = sum(served)
    dropped = d.wait_event("log.dropped", timeout=10, since=mark, reason="rate")
    check(flooded > 10 * RATE and dropped["lines"] > 0, f"no flood: {flooded} requests, {dropped}")
    # The runner's direct baseline is direct traffic like the flood: its lines share the flood's
    # budget and may be dropped. The VLESS path's samples are the route proof: verify finds all.
    proof_dir = h.tempdir("vlessbench-log-flood-vless-")
    shutil.copytree(out, proof_dir, dirs_exist_ok=True)
    with open(proof_dir / "samples.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        w.writerows(rows)
    h.verify_log(h.CLIENT_BIN / "vlessbench", d.access, proof_dir, timeout=5)
    check(not d.events("log.dropped", since=mark, reason="session_rate"), "the run's own lines were dropped")
    admin = d.cfg["admin"]["listen"]
    with urllib.request.urlopen(f"http://{admin}/metrics", timeout=10) as m:
        metrics = m.read().decode()
    drops = dict(re.findall(r'^vlessbench_access_log_dropped_lines_total\{reason="(\w+)"\} (\d+)$', metrics, re.M))
    check(int(drops.get("rate", 0)) > 0 and drops.get("session_rate") == "0", f"/metrics drops by class: {drops}")
    proof = [e for e in d.events("http.request", since=mark) if e.get("route") == "vless"]
    check(len(proof) >= len(rows), f"{len(proof)} relayed http.request lines for {len(rows)} samples")
    print(f"FIGURE direct_flood_route_proof = {len(rows)} samples verified beside {flooded} direct requests "
          f"from {FLOODERS} clients (rate bound {RATE}/s)", flush=True)
    d.stop()


if __name__ == "__main__":
    suite.run()
