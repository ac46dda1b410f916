"""A stalled access-log reader never blocks serving (issue 16, item 5).

The daemon logs to stdout, a pipe this test does not read: the pipe fills (64 KiB), then the
daemon's queue (`[log] queue_bytes`), then lines are dropped and counted. Direct and VLESS requests
must keep being answered at once; once the pipe is read, the log holds a prefix of the lines in
order, one `log.dropped` event whose count is exactly what is missing, and only valid JSON. At
exit with the reader still stalled the daemon gives up within its deadline.
"""
import json
import signal
import threading
import time

from harness import (SANITIZED, Daemon, Suite, check, http_request, plain_stream, require_binary, tcp_connect,
                     vless_get)

suite = Suite("test_log_stall")
require_binary()

QUEUE_BYTES = 65536  # the smallest allowed: the test fills it quickly
DIRECT = 1200        # direct GETs: ~300 bytes of log each, several times pipe + queue
PER_CONNECTION = 100
VLESS_EVERY = 40     # one VLESS session (two lines: http.request and vless.session) per 40 GETs
DRAIN_MS = 1000
# harness.wait_ports opens one connection to each of the two VLESS listeners at start: each is a
# vless.reject (tls_handshake_failed), the first lines of the log.
PROBE_REJECTS = 2


def stdout_daemon() -> Daemon:
    d = Daemon(start=False, stdout_pipe=True, limits={"drain_timeout_ms": DRAIN_MS})
    d.cfg["log"]["access"] = "stdout"
    d.cfg["log"]["queue_bytes"] = QUEUE_BYTES
    d.write_config(d.cfg)
    return d.start()


def serve_while_stalled(d: Daemon, direct: int) -> dict:
    """direct GETs on keep-alive connections with a VLESS session every VLESS_EVERY; all must be
    answered (a blocked daemon shows as a 5 s socket timeout). Returns counts and the worst time."""
    worst = 0.0
    sessions = 0
    t_all = time.perf_counter()
    seq = 0
    while seq < direct:
        with tcp_connect(d.target_port, timeout=5.0) as s:
            stream = plain_stream(s)
            for _ in range(min(PER_CONNECTION, direct - seq)):
                t0 = time.perf_counter()
                stream.send(http_request("GET", "/generate_204", headers={"X-Vlessbench-Seq": str(seq)}))
                r = stream.read_response()
                worst = max(worst, time.perf_counter() - t0)
                check(r.status == 204, f"direct GET {seq}: {r}")
                seq += 1
                if seq % VLESS_EVERY == 0:
                    r, elapsed = vless_get(d.port("kernel"), d.uuid, d.target_port, "/generate_204")
                    check(r.status == 204, f"VLESS session {sessions}: {r}")
                    worst = max(worst, elapsed)
                    sessions += 1
    return {"direct": seq, "sessions": sessions, "worst_s": worst, "total_s": time.perf_counter() - t_all}


class PipeReader(threading.Thread):
    """Reads the daemon's stdout to EOF in the background."""

    def __init__(self, pipe):
        super().__init__(daemon=True)
        self.pipe = pipe
        self.data = bytearray()
        self.lock = threading.Lock()

    def run(self):
        while True:
            chunk = self.pipe.read1(65536)
            if not chunk:
                return
            with self.lock:
                self.data += chunk

    def text(self) -> bytes:
        with self.lock:
            return bytes(self.data)


def parse_lines(data: bytes) -> list[dict]:
    check(data.endswith(b"\n"), f"the log ends in half a line: {data[-200:]!r}")
    return [json.loads(line.decode("utf-8")) for line in data.split(b"\n")[:-1]]


def wait_for(pred, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.05)
    raise AssertionError(f"{what} within {timeout} s")


@suite.test
def stalled_stdout_never_blocks_serving_and_the_drop_is_reported():
    d = stdout_daemon()
    reader = None
    try:
        done = serve_while_stalled(d, DIRECT)
        print(f"FIGURE stalled_stdout_requests = {done}", flush=True)
        expected = done["direct"] + 2 * done["sessions"] + PROBE_REJECTS
        # Answered at once, not after a reader showed up (the old daemon stopped after ~320, for
        # good: no reader ever comes here). The bound only has to tell "served" from "held until
        # a reader": generous, as this file runs beside others in a parallel ctest.
        limit = 10.0 if SANITIZED else 5.0
        check(done["worst_s"] < limit, f"a request took {done['worst_s']:.3f} s while stdout was stalled")
        wait_for(lambda: "does not keep up" in d.stderr(), 5, "no warning about the stalled reader")

        reader = PipeReader(d.proc.stdout)
        reader.start()
        wait_for(lambda: b'"log.dropped"' in reader.text(), 10, "no log.dropped event once the pipe was read")
        check(d.stop() == 0, "exit code")
        reader.join(timeout=10)
        check(not reader.is_alive(), "stdout not closed at exit")
        events = parse_lines(reader.text())

        dropped = [e for e in events if e["event"] == "log.dropped"]
        logged = [e for e in events if e["event"] != "log.dropped"]
        lost = sum(e["lines"] for e in dropped)
        print(f"FIGURE stalled_stdout_log = {{'expected': {expected}, 'logged': {len(logged)}, "
              f"'dropped': {lost}, 'events': {len(dropped)}}}", flush=True)
        check(len(dropped) >= 1 and lost > 0, "nothing dropped: the test did not fill pipe and queue")
        check(len(logged) + lost == expected, f"{len(logged)} logged + {lost} dropped != {expected} produced")
        check(dropped[-1]["total_lines"] == lost, f"total_lines {dropped[-1]['total_lines']} != {lost}")
        # The direct requests' lines keep their order, and wherever their sequence skips numbers a
        # log.dropped report stands in the gap. (Usually the drops begin once the pipe is full and
        # nothing follows them; when the writer thread is slow, as under TSan on a busy machine,
        # the queue can fill while the pipe still takes data, and later lines fit again after a
        # report: still no line lost without one.)
        last, drop_since_last, gaps = -1, False, 0
        for e in events:
            if e["event"] == "log.dropped":
                drop_since_last = True
            elif e["event"] == "http.request" and "seq" in e:
                seq = int(e["seq"])
                check(seq > last, f"direct request {seq} logged after {last}")
                if seq != last + 1:
                    gaps += 1
                    check(drop_since_last, f"direct requests {last + 1}..{seq - 1} missing without a log.dropped")
                last, drop_since_last = seq, False
        check(last >= 0, "no direct request logged at all")
        print(f"FIGURE stalled_stdout_gaps = {gaps}", flush=True)
        check(f"{lost} line(s) dropped in all" in d.stderr(), "the drop total at exit")
    finally:
        d.stop()
        if reader is not None:
            reader.join(timeout=5)


@suite.test
def a_reader_that_keeps_up_loses_nothing():
    d = stdout_daemon()
    reader = PipeReader(d.proc.stdout)
    reader.start()
    try:
        done = serve_while_stalled(d, 400)
        check(d.stop() == 0, "exit code")
        reader.join(timeout=10)
        events = parse_lines(reader.text())
        check(not [e for e in events if e["event"] == "log.dropped"], "lines dropped with a reader reading")
        kinds = {}
        for e in events:
            kinds[e["event"]] = kinds.get(e["event"], 0) + 1
        want = {"http.request": done["direct"] + done["sessions"], "vless.session": done["sessions"],
                "vless.reject": PROBE_REJECTS}
        check(kinds == want, f"events {kinds}, expected {want}")
        check("dropped" not in d.stderr(), "a drop warning with a reader reading")
    finally:
        d.stop()
        reader.join(timeout=5)


@suite.test
def sigterm_with_a_stalled_reader_exits_within_the_deadline():
    d = stdout_daemon()
    try:
        serve_while_stalled(d, 600)  # pipe and queue full
        t0 = time.monotonic()
        d.signal(signal.SIGTERM)
        d.proc.wait(timeout=DRAIN_MS / 1000 * 2 + 8)
        took = time.monotonic() - t0
        print(f"FIGURE stalled_stdout_exit_s = {took:.2f}", flush=True)
        check(d.proc.returncode == 0, f"exit code {d.proc.returncode}")
        # drain_timeout for the (idle) drain, then the same again for the queue at most.
        check(took < 2 * DRAIN_MS / 1000 + 3, f"exit took {took:.2f} s")
        check("not written at exit" in d.stderr(), "no word about the lines lost at exit")
    finally:
        d.stop()


if __name__ == "__main__":
    suite.run()
