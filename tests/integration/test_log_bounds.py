"""issue 23 item 10: one connection pipelining tiny HTTP requests to the target cannot make the
access log grow without bound: [log] max_lines_per_second drops the excess, counted in a
log.dropped event with reason "rate". Bounded: 4000 requests, 20 s at most."""
import socket
import time

from harness import ANY_PORT, Daemon, Suite, check, require_binary, tcp_connect

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


if __name__ == "__main__":
    suite.run()
