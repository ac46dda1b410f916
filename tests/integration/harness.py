"""Shared fixtures for the integration tests: the real vlessbenchd, v2ray, raw clients.

Python 3 standard library only. Every process started here is killed at exit (atexit, and the
kernel's parent-death signal if this interpreter is killed outright); every wait is bounded in
time; everything listens and connects on 127.0.0.1 / ::1 only.

One module (~800 lines) on purpose: every test imports it, and the process bookkeeping that
guarantees the cleanup above must be one registry, not one per file.
"""
from __future__ import annotations

import atexit
import ctypes
import json
import os
import re
import shutil
import signal
import socket
import ssl
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import uuid as uuidlib
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
# Absolute: processes start in their own temp folders (VLESSBENCH_BIN=build/bin works too).
BIN = Path(os.environ.get("VLESSBENCH_BIN") or REPO / "build" / "bin").resolve()
# The client tools (the runner vlessbench, the load generator vlessbench_load): the Release tree's even
# when the daemon under test is a sanitizer build (ctest sets VLESSBENCH_CLIENT_BIN there). The
# sanitizer trees build the daemon, the unit tests and the fuzz targets only: the client code runs
# under ASan in the unit tests and fuzz targets, and the tools' own threads are test scaffolding.
CLIENT_BIN = Path(os.environ.get("VLESSBENCH_CLIENT_BIN") or BIN).resolve()
DAEMON = BIN / "vlessbenchd"
V2RAY = shutil.which("v2ray") or "/usr/bin/v2ray"
CURL = shutil.which("curl") or "/usr/bin/curl"

LOOPBACK = "127.0.0.1"
# Set by the sanitizer build's ctest entries: the daemon is several times slower there, so
# timing-sensitive checks skip themselves.
SANITIZED = bool(os.environ.get("VLESSBENCH_SANITIZED"))
# Set by the TSan tree's ctest entries: every daemon a test starts from a dict config runs
# [limits] threads = N, so VLESS sessions run on N io_context threads.
THREADS = int(os.environ.get("VLESSBENCH_TEST_THREADS") or 0)

# --------------------------------------------------------------------------------------------
# Process bookkeeping: nothing outlives the test.

_procs: list[subprocess.Popen] = []
_procs_lock = threading.Lock()
_tmpdirs: list[Path] = []


def _set_pdeathsig() -> None:
    # Runs in the child between fork and exec: SIGKILL it if this interpreter dies first.
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    except Exception:  # noqa: BLE001 - best effort; atexit still cleans up
        pass


def spawn(argv, **kw) -> subprocess.Popen:
    p = subprocess.Popen([str(a) for a in argv], preexec_fn=_set_pdeathsig, **kw)
    with _procs_lock:
        _procs.append(p)
    return p


def stop_process(p: subprocess.Popen, sig=signal.SIGTERM, timeout: float = 5.0) -> int | None:
    """Signals p, waits up to timeout, then kill -9. Returns the exit code."""
    if p.poll() is None:
        try:
            p.send_signal(sig)
        except ProcessLookupError:
            pass
        try:
            p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(timeout=5)
    with _procs_lock:
        if p in _procs:
            _procs.remove(p)
    return p.returncode


_daemons: list["Daemon"] = []  # every Daemon made: checked at the end of the run (check_daemons)
_keep_tmp = False  # set when a check failed: the temp folders (stderr.log included) stay for a look


def _prog(p: subprocess.Popen) -> str:
    args = p.args if isinstance(p.args, (list, tuple)) else [p.args]
    return Path(str(args[0])).name if args else "?"


def _cleanup() -> None:
    """Ends every process still running (SIGTERM, then SIGKILL), then deletes the temp folders,
    unless a check failed or VLESSBENCH_KEEP_TMP is set. Daemons are checked before this
    (check_daemons); a process still running here is named on stdout, not dropped in silence."""
    with _procs_lock:
        procs = list(_procs)
    running = [p for p in procs if p.poll() is None]
    for p in running:
        print(f"cleanup: {_prog(p)} (pid {p.pid}) still running at the end: SIGTERM", flush=True)
        try:
            p.terminate()
        except ProcessLookupError:
            pass
    for p in running:
        try:
            p.wait(timeout=3)
        except subprocess.TimeoutExpired:
            print(f"cleanup: {_prog(p)} (pid {p.pid}) ignored SIGTERM for 3 s: SIGKILL", flush=True)
            p.kill()
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
    if _keep_tmp or os.environ.get("VLESSBENCH_KEEP_TMP"):
        if _tmpdirs:
            print("cleanup: temp folders kept: " + " ".join(str(d) for d in _tmpdirs), flush=True)
    else:
        for d in _tmpdirs:
            shutil.rmtree(d, ignore_errors=True)
    _tmpdirs.clear()


def _at_exit() -> None:
    # A script that ends without Suite.run() (an exception at module level, sys.exit) still has
    # its daemons stopped and checked; a finding makes the exit status 1.
    global _keep_tmp
    findings = check_daemons()
    if findings:
        _keep_tmp = True
    _cleanup()
    if findings:
        sys.stdout.flush()
        os._exit(1)


atexit.register(_at_exit)


def _on_signal(signum, _frame):
    _cleanup()
    os._exit(128 + signum)


signal.signal(signal.SIGTERM, _on_signal)


def tempdir(prefix="vlessbench-it-") -> Path:
    d = Path(tempfile.mkdtemp(prefix=prefix))
    _tmpdirs.append(d)
    return d


# --------------------------------------------------------------------------------------------
# Ports

# Where the daemon listens, write ANY_PORT ("127.0.0.1:0"): the daemon binds a port the kernel
# picks and reports it (--ports-file, docs/configuration.md "Port 0"), and Daemon.port(name) reads
# it. free_port is for the ports that must be known before a process starts (a v2ray inbound, a
# config that points at another process): it cannot keep another process from taking the port
# before it is bound, so Daemon.start() retries on "address in use" with a new one (bounded).

ANY_PORT = f"{LOOPBACK}:0"

PROTOCOLS = ("tcp", "udp", "tcp+udp")
_given_ports: dict[str, set[int]] = {"tcp": set(), "udp": set()}


def free_port(host: str = LOOPBACK, proto: str = "tcp") -> int:
    """A port free a moment ago for proto ("tcp", "udp", or "tcp+udp": both, as a [[dns]] takes),
    never given twice for the same protocol: bind 0, read, release."""
    if proto not in PROTOCOLS:
        raise ValueError(f"proto {proto!r}: one of {PROTOCOLS}")
    fam = socket.AF_INET6 if ":" in host else socket.AF_INET
    kinds = [k for k in ("tcp", "udp") if k in proto.split("+")]
    types = {"tcp": socket.SOCK_STREAM, "udp": socket.SOCK_DGRAM}
    for _ in range(50):
        with socket.socket(fam, types[kinds[0]]) as first:
            first.bind((host, 0))
            port = first.getsockname()[1]
            if any(port in _given_ports[k] for k in kinds):
                continue
            if len(kinds) == 2:
                try:
                    with socket.socket(fam, types[kinds[1]]) as second:
                        second.bind((host, port))
                except OSError:
                    continue
        for k in kinds:
            _given_ports[k].add(port)
        return port
    raise RuntimeError(f"no free {proto} port found")


def port_open(port: int, host: str = LOOPBACK, timeout: float = 0.5) -> bool:
    fam = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(fam, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        try:
            s.connect((host, port))
            return True
        except OSError:
            return False


def wait_ports(ports, host: str = LOOPBACK, timeout: float = 15.0, proc: subprocess.Popen | None = None,
               what: str = "process") -> None:
    """Waits until every port accepts; a port may also be given as (host, port)."""
    deadline = time.monotonic() + timeout
    pending = [p if isinstance(p, tuple) else (host, p) for p in ports]
    while pending:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode} before its ports opened")
        pending = [(h, p) for h, p in pending if not port_open(p, h)]
        if not pending:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what}: ports {pending} not accepting after {timeout}s")
        time.sleep(0.05)


def _ss_endpoint(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    return host.strip("[]"), int(port)


def tcp_connections(port: int) -> list[dict]:
    """The established TCP connections accepted on port in this network namespace (`ss -tin`):
    each as {"local", "peer", "recv_q", "bytes_received", "bytes_acked", "peer_bytes_sent"}
    (bytes_acked: what the server sent and the peer's kernel acknowledged; peer_bytes_sent: what
    the connecting side sent, when that side is in this namespace too, else None)."""
    out = subprocess.run(["ss", "-tinHO", "state", "established", f"( sport = :{port} or dport = :{port} )"],
                         capture_output=True, text=True, timeout=10, check=True).stdout
    rows = []
    for line in out.splitlines():
        f = line.split()
        if len(f) < 4:
            continue
        info = dict(kv.split(":", 1) for kv in f[4:] if ":" in kv and kv.split(":", 1)[0].isidentifier())
        rows.append({"recv_q": int(f[0]), "local": _ss_endpoint(f[2]), "peer": _ss_endpoint(f[3]),
                     "bytes_received": int(info.get("bytes_received", 0)),
                     "bytes_acked": int(info.get("bytes_acked", 0)),
                     # bytes_sent counts retransmitted bytes again (a spurious retransmission on a
                     # loaded machine): what the peer can have received is the difference.
                     "bytes_sent": int(info.get("bytes_sent", 0)) - int(info.get("bytes_retrans", 0))})
    by_local = {r["local"]: r for r in rows}
    server = []
    for r in rows:
        if r["local"][1] != port:
            continue
        client = by_local.get(r["peer"])
        server.append({"local": r["local"], "peer": r["peer"], "recv_q": r["recv_q"],
                       "bytes_received": r["bytes_received"], "bytes_acked": r["bytes_acked"],
                       "peer_bytes_sent": client["bytes_sent"] if client else None})
    return server


def wait_server_read(port: int, with_data: int, total: int | None = None, timeout: float = 10.0) -> list[dict]:
    """Waits until the server on port has read everything its clients sent (the kernel's evidence:
    receive queue empty, bytes received = bytes the client side sent) on every connection it
    accepted, at least with_data of them carried bytes, and (if given) exactly total are open.
    The evidence that requests are in the server's hands, instead of a sleep."""
    deadline = time.monotonic() + timeout
    first = None
    while True:
        conns = tcp_connections(port)
        first = conns if first is None else first
        read_all = all(c["recv_q"] == 0 and c["peer_bytes_sent"] in (None, c["bytes_received"]) for c in conns)
        carried = sum(1 for c in conns if c["bytes_received"] > 0)
        if read_all and carried >= with_data and (total is None or len(conns) == total):
            return conns
        if time.monotonic() > deadline:
            raise AssertionError(f"port {port}: wanted {with_data} connections read to the end"
                                 f"{f' of {total}' if total is not None else ''} within {timeout} s:\nfirst {first}\nlast {conns}")
        time.sleep(0.02)


def wait_sender_stalled(port: int, timeout: float = 20.0, still: int = 10) -> list[dict]:
    """Waits until the server on port has stopped getting its bytes through to a client that does
    not read: on every connection it accepted, at least one byte acknowledged and bytes_acked the
    same for `still` polls in a row (20 ms apart). The evidence that a relay's buffers between
    that server and a stalled reader are full (backpressure reached the source), instead of a
    sleep before measuring what the stall costs."""
    deadline = time.monotonic() + timeout
    last, same, conns = None, 0, []
    while True:
        conns = tcp_connections(port)
        now = sorted((c["peer"], c["bytes_acked"]) for c in conns)
        same = same + 1 if now == last and conns and all(a > 0 for _, a in now) else 0
        if same >= still:
            return conns
        last = now
        if time.monotonic() > deadline:
            raise AssertionError(f"port {port}: the server still gets bytes through after {timeout} s: {now}")
        time.sleep(0.02)


def wait_server_closed(port: int, timeout: float = 10.0) -> None:
    """Waits until the server on port holds no accepted connection: none established, none in
    CLOSE-WAIT (the client's FIN arrived, the server has not closed its side yet). The evidence
    that an earlier case's connections are gone from the server too, instead of a sleep."""
    deadline = time.monotonic() + timeout
    while True:
        out = subprocess.run(["ss", "-tanH", "state", "established", "state", "close-wait", "state", "syn-recv",
                              f"( sport = :{port} )"], capture_output=True, text=True, timeout=10, check=True).stdout
        if not out.strip():
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"port {port}: the server still holds connections after {timeout} s:\n{out}")
        time.sleep(0.02)


# --------------------------------------------------------------------------------------------
# TOML config

def _toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, str):
        return json.dumps(v)  # a JSON string is a valid TOML basic string for our values
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{k} = {_toml_value(x)}" for k, x in v.items()) + " }"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    raise TypeError(f"cannot write {v!r} as TOML")


def policy(nodelay: bool = True, quickack: str = "kernel") -> dict:
    return {"nodelay": nodelay, "quickack": quickack}


def toml_text(cfg: dict) -> str:
    """cfg: {"log", "tls", "limits", "destinations", "admin": {...}, "users", "vless", "target": [...]}."""
    out = []
    for table in ("log", "tls", "limits", "destinations", "admin"):
        if table in cfg:
            out.append(f"[{table}]")
            out += [f"{k} = {_toml_value(v)}" for k, v in cfg[table].items()]
            out.append("")
    for arr in ("users", "vless", "target", "banner", "udp_target", "dns"):
        for entry in cfg.get(arr, []):
            out.append(f"[[{arr}]]")
            out += [f"{k} = {_toml_value(v)}" for k, v in entry.items()]
            out.append("")
    return "\n".join(out)


def new_uuid() -> str:
    return str(uuidlib.uuid4())


# --------------------------------------------------------------------------------------------
# A network namespace of the test's own

NETNS_ENV = "VLESSBENCH_TEST_NETNS"


def run_in_own_netns(addresses=(), port_range: tuple[int, int] | None = None, timeout: float = 280) -> None:
    """Re-runs the calling test script in a fresh network namespace (unshare --net), unless it runs
    in one already; there, brings lo up, puts each of addresses (non-loopback, the namespace's
    own, as a VM's LAN address is) on lo and, if given, narrows the ephemeral port range. The
    outer process exits with the inner one's status (77, ctest's skip, without root)."""
    if os.environ.get(NETNS_ENV):
        cmds = [["ip", "link", "set", "lo", "up"]] + [["ip", "addr", "add", f"{a}/32", "dev", "lo"] for a in addresses]
        for cmd in cmds:
            subprocess.run(cmd, check=True, timeout=10)
        if port_range:
            Path("/proc/sys/net/ipv4/ip_local_port_range").write_text(f"{port_range[0]} {port_range[1]}\n")
        return
    if os.geteuid() != 0 or not shutil.which("unshare"):
        skip_file("a network namespace of the test's own needs root and unshare")
    env = dict(os.environ, **{NETNS_ENV: "1"})
    try:
        rc = subprocess.run(["unshare", "--net", "--", sys.executable, os.path.abspath(sys.argv[0]), *sys.argv[1:]],
                            env=env, timeout=timeout).returncode
    except subprocess.TimeoutExpired:
        print(f"FAIL: the run in its network namespace did not finish within {timeout} s", flush=True)
        rc = 1
    sys.exit(rc)


def private_hosts_prefix(hosts_text: str) -> list:
    """An argv prefix that runs a program in a mount namespace of its own (unshare --mount,
    propagation private) with hosts_text bind-mounted over /etc/hosts, then execs it (same pid).
    The name lookups of that program see these names whatever the machine's /etc/hosts holds.
    Needs root and unshare: raises Skip otherwise."""
    if os.geteuid() != 0 or not shutil.which("unshare") or not shutil.which("mount"):
        raise Skip("a mount namespace of the test's own needs root, unshare and mount")
    path = tempdir("vlessbench-hosts-") / "hosts"
    path.write_text(hosts_text)
    return ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c",
            'mount --bind "$0" /etc/hosts && exec "$@"', path]


# --------------------------------------------------------------------------------------------
# Access log

def read_events(path: Path) -> list[dict]:
    """Every complete JSON line in the access log; a line that is not JSON fails the test."""
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        return []
    out = []
    for raw in data.split(b"\n")[:-1]:  # the last piece is empty or a line still being written
        if not raw:
            continue
        text = raw.decode("utf-8")  # the log promises UTF-8 whatever clients send
        out.append(json.loads(text))
    return out


# --------------------------------------------------------------------------------------------
# The daemon

# [limits] for a test that opens thousands of sessions from one address (loopback): the per-address
# caps (docs/configuration.md max_*_per_client) would refuse them first.
ONE_ADDRESS_LOAD = {"max_sessions_per_client": 1_000_000, "max_upstreams_per_client": 1_000_000}


class Daemon:
    """vlessbenchd on loopback, with its access log in a file.

    Default layout: one user, vless listeners "kernel" (quickack kernel) and "quick" (quickack on),
    one target "http", each on ANY_PORT. Pass cfg to replace it; use self.port(name) /
    self.addr(name) for a listener's port: the one the daemon bound, read from its --ports-file
    (self.bound), so a listener written ANY_PORT works as one written with a fixed port.
    """

    def __init__(self, cfg: dict | None = None, limits: dict | None = None, start: bool = True,
                 extra_args=(), stdout_pipe: bool = False, argv_prefix=()):
        self.dir = tempdir()
        self.access = self.dir / "access.jsonl"
        self.config_path = self.dir / "vlessbenchd.toml"
        self.stderr_path = self.dir / "stderr.log"
        self.stdout_path = self.dir / "stdout.log"
        self.ports_path = self.dir / "ports.json"
        # name -> (host, port) as the running daemon bound it (its --ports-file); empty before start.
        self.bound: dict[str, tuple[str, int]] = {}
        self.proc: subprocess.Popen | None = None
        # The process whose exit status and stderr were checked (stop or check_daemons), and the
        # status it had: a second stop() returns it.
        self._checked: subprocess.Popen | None = None
        self._checked_rc: int | None = None
        self.extra_args = list(extra_args)
        # Run the daemon through this (e.g. private_hosts_prefix()): it must exec the daemon, so
        # that self.proc is the daemon itself and receives the signals.
        self.argv_prefix = list(argv_prefix)
        _daemons.append(self)
        # True: the daemon's stdout is a pipe (self.proc.stdout) that only the test reads.
        self.stdout_pipe = stdout_pipe
        if cfg is None:
            self.user = "tester"
            self.uuid = new_uuid()
            cfg = {
                "users": [{"name": self.user, "uuid": self.uuid}],
                "vless": [
                    {"name": "kernel", "listen": ANY_PORT, "tcp": policy(True, "kernel"),
                     "upstream_tcp": policy(True, "kernel")},
                    {"name": "quick", "listen": ANY_PORT, "tcp": policy(True, "on"),
                     "upstream_tcp": policy(True, "on")},
                ],
                "target": [{"name": "http", "listen": ANY_PORT}],
            }
        else:
            users = cfg.get("users") or []
            self.user = users[0]["name"] if users else None
            self.uuid = users[0]["uuid"] if users else None
        # The admin listener's default port (9090) would clash between daemons run side by side.
        cfg.setdefault("admin", {"enabled": False})
        cfg.setdefault("log", {})
        cfg["log"].setdefault("access", str(self.access))
        cfg["log"].setdefault("level", "info")
        if limits:
            cfg.setdefault("limits", {}).update(limits)
        if THREADS:
            cfg.setdefault("limits", {}).setdefault("threads", THREADS)
        self.cfg = cfg
        self.write_config(cfg)
        if start:
            self.start()

    # -- config --
    def write_config(self, cfg: dict | str) -> None:
        text = cfg if isinstance(cfg, str) else toml_text(cfg)
        tmp = self.config_path.with_suffix(".tmp")
        tmp.write_text(text)
        os.replace(tmp, self.config_path)
        if not isinstance(cfg, str):
            self.cfg = cfg

    def listeners(self) -> list[dict]:
        """The config's TCP listeners (a [[dns]]'s TCP half included)."""
        return (list(self.cfg.get("vless", [])) + list(self.cfg.get("target", [])) + list(self.cfg.get("banner", []))
                + list(self.cfg.get("dns", [])))

    def addr(self, name: str) -> tuple[str, int]:
        """(host, port) of listener name (any kind; "admin" for [admin]): the config's, or for one
        written with port 0, the one the running daemon bound (self.bound)."""
        entries = self.listeners() + list(self.cfg.get("udp_target", []))
        if isinstance(self.cfg.get("admin"), dict) and self.cfg["admin"].get("listen"):
            entries.append({"name": "admin", "listen": self.cfg["admin"]["listen"]})
        for entry in entries:
            if entry["name"] == name:
                host, _, port = entry["listen"].rpartition(":")
                if int(port) != 0:
                    return host.strip("[]"), int(port)
                if name not in self.bound:
                    raise RuntimeError(f"listener {name!r} is on port 0 and the daemon has not reported it "
                                       f"(not started, or not waited for)")
                return self.bound[name]
        if name in self.bound:
            return self.bound[name]
        raise KeyError(name)

    def read_ports(self) -> dict[str, tuple[str, int]]:
        """Reads the daemon's --ports-file into self.bound (and returns it)."""
        data = json.loads(self.ports_path.read_text())
        bound = {}
        for entry in data["listeners"]:
            host, _, port = entry["listen"].rpartition(":")
            bound[entry["name"]] = (host.strip("[]"), int(port))
        if data.get("admin"):
            host, _, port = data["admin"].rpartition(":")
            bound["admin"] = (host.strip("[]"), int(port))
        self.bound = bound
        return bound

    def port(self, name: str) -> int:
        return self.addr(name)[1]

    @property
    def target_port(self) -> int:
        return self.port(self.cfg["target"][0]["name"])

    # -- process --
    START_ATTEMPTS = 3

    def start(self, wait: bool = True) -> "Daemon":
        """Starts the daemon; wait: until its ports file says every listener is bound (then each TCP
        one is connected to once). A start that fails on "address in use" for a port free_port gave
        is retried with a new port for that listener (START_ATTEMPTS in all)."""
        for attempt in range(1, self.START_ATTEMPTS + 1):
            self._spawn()
            if not wait:
                return self
            try:
                self.wait_ready()
                return self
            except RuntimeError as e:
                if attempt == self.START_ATTEMPTS or not self._move_busy_port():
                    raise RuntimeError(f"{e}\n--- stderr ---\n{self.stderr()}") from None
                print(f"vlessbenchd: a port free_port gave was taken before the daemon bound it: retrying "
                      f"({attempt + 1}/{self.START_ATTEMPTS})", flush=True)
        return self

    def _spawn(self) -> None:
        self.bound = {}
        self.ports_path.unlink(missing_ok=True)
        argv = [*self.argv_prefix, DAEMON, "--config", self.config_path, "--ports-file", self.ports_path,
                *self.extra_args]
        stdout = subprocess.PIPE if self.stdout_pipe else open(self.stdout_path, "wb")
        self.proc = spawn(argv, stdout=stdout, stderr=open(self.stderr_path, "wb"), cwd=self.dir)

    def wait_ready(self, timeout: float | None = None) -> dict[str, tuple[str, int]]:
        """Waits (bounded) until the daemon has written its ports file, reads it, and waits until its
        TCP listeners accept. Raises RuntimeError if the daemon exits first."""
        timeout = timeout or (60.0 if SANITIZED else 15.0)
        deadline = time.monotonic() + timeout
        while not self.ports_path.exists():
            if self.proc.poll() is not None:
                raise RuntimeError(f"vlessbenchd exited {describe_rc(self.proc.returncode)} before it was ready")
            if time.monotonic() > deadline:
                raise RuntimeError(f"vlessbenchd: no ports file {self.ports_path} within {timeout} s")
            time.sleep(0.02)
        self.read_ports()
        wait_ports([self.addr(e["name"]) for e in self.listeners()], proc=self.proc, what="vlessbenchd",
                   timeout=max(1.0, deadline - time.monotonic()))
        return self.bound

    def _move_busy_port(self) -> bool:
        """After a start that failed on "address in use": gives the listener on that port a new one
        from free_port, if free_port had given the old one (else the test chose it: no retry)."""
        m = re.search(r'(\w+) listener (?:"([^"]*)" )?cannot (?:listen on|bind) (\S+): Address already in use', self.stderr())
        if not m or not isinstance(self.cfg, dict):
            return False
        kind, name, endpoint = m.group(1), m.group(2), m.group(3)
        host, _, port = endpoint.rpartition(":")
        proto = "udp" if kind == "udp_target" else "tcp+udp" if kind == "dns" else "tcp"
        if not all(int(port) in _given_ports[k] for k in proto.split("+")):
            return False
        if kind == "admin":
            entry = self.cfg.get("admin", {})
        else:
            entry = next((e for table in ("vless", "target", "banner", "udp_target", "dns")
                          for e in self.cfg.get(table, []) if e.get("name") == name), None)
        if not entry or entry.get("listen") != endpoint:
            return False
        entry["listen"] = f"{host}:{free_port(host.strip('[]'), proto)}"
        self.write_config(self.cfg)
        return True

    def stderr(self) -> str:
        try:
            return self.stderr_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def wait_stderr(self, *texts: str, timeout: float = 10.0) -> str:
        """Waits until the human log holds every one of texts (it is written after the ports
        open, and late under the sanitizers); returns it."""
        deadline = time.monotonic() + timeout
        while True:
            text = self.stderr()
            if all(t in text for t in texts):
                return text
            if time.monotonic() > deadline:
                raise AssertionError(f"{texts!r} not all in stderr within {timeout} s:\n{text[-2000:]}")
            time.sleep(0.02)

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def unexpected_exceptions(self) -> list[str]:
        """stderr lines of exceptions that escaped a coroutine (logged, never expected)."""
        return [line for line in self.stderr().splitlines() if "unexpected exception" in line]

    def signal(self, sig) -> None:
        assert self.proc is not None
        self.proc.send_signal(sig)

    def stop(self, timeout: float | None = None, expect_rc: int | None = 0) -> int | None:
        """SIGTERM, waits up to timeout (SIGKILL after it), then checks the exit: a sanitizer report
        in stderr, or an exit status other than expect_rc (None: any), raises AssertionError.
        Returns the exit status (negative: the signal that ended it). A daemon that exited before
        (a test waited for it or killed it) is checked the same way; stopping twice checks once."""
        if self.proc is None:
            return None
        if self._checked is self.proc:
            return self._checked_rc
        if timeout is None:
            timeout = 30.0 if SANITIZED else 10.0  # the leak check at exit takes seconds there
        proc = self.proc
        was_running = proc.poll() is None
        if was_running:
            try:
                proc.send_signal(signal.SIGTERM)
            except ProcessLookupError:
                pass
        timed_out = False
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            proc.kill()
            proc.wait(timeout=5)
        with _procs_lock:
            if proc in _procs:
                _procs.remove(proc)
        rc = proc.returncode
        self._checked, self._checked_rc = proc, rc
        text = self.stderr()
        report = sanitizer_report(text)
        if report:
            raise AssertionError(f"vlessbenchd exited {describe_rc(rc)}; sanitizer report in its stderr "
                                 f"({self.stderr_path}):\n{report}")
        if timed_out:
            raise AssertionError(f"vlessbenchd did not exit within {timeout:.0f} s of SIGTERM (killed); "
                                 f"stderr tail ({self.stderr_path}):\n{text[-3000:]}")
        if expect_rc is not None and rc != expect_rc:
            raise AssertionError(f"vlessbenchd exited {describe_rc(rc)}, expected {describe_rc(expect_rc)}"
                                 f"{' after SIGTERM' if was_running else ''}; stderr tail ({self.stderr_path}):\n"
                                 f"{text[-3000:]}")
        return rc

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
        return False

    # -- log --
    def mark(self) -> int:
        """How many events the log holds now: pass as since= to look only at later ones."""
        return len(read_events(self.access))

    def events(self, event: str | None = None, since: int = 0, **match) -> list[dict]:
        out = []
        for e in read_events(self.access)[since:]:
            if event is not None and e.get("event") != event:
                continue
            if all(e.get(k) == v for k, v in match.items()):
                out.append(e)
        return out

    def wait_event(self, event: str, timeout: float = 5.0, pred=None, since: int = 0, **match) -> dict:
        """The first event of this kind matching match and pred, waiting for it up to timeout."""
        deadline = time.monotonic() + timeout
        while True:
            for e in self.events(event, since=since, **match):
                if pred is None or pred(e):
                    return e
            if time.monotonic() > deadline:
                raise AssertionError(f"no {event} event matching {match} within {timeout}s; log tail:\n"
                                     + "\n".join(json.dumps(x) for x in self.events()[-10:]))
            time.sleep(0.02)

    def reload(self, cfg: dict | str, timeout: float = 5.0) -> dict:
        """Writes cfg, sends SIGHUP and returns the config.reload event it caused."""
        before = len(self.events("config.reload"))
        self.write_config(cfg)
        self.signal(signal.SIGHUP)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            ev = self.events("config.reload")
            if len(ev) > before:
                if ev[before].get("ok"):
                    self.read_ports()  # rewritten before the event: listeners may have opened
                return ev[before]
            time.sleep(0.02)
        raise AssertionError(f"no config.reload event within {timeout}s\n{self.stderr()}")


def run_daemon(args, timeout: float = 15.0, cwd=None) -> subprocess.CompletedProcess:
    """Runs vlessbenchd to completion (e.g. --check), bounded in time."""
    return subprocess.run([str(DAEMON), *map(str, args)], capture_output=True, text=True, timeout=timeout,
                          cwd=cwd, preexec_fn=_set_pdeathsig)


# --------------------------------------------------------------------------------------------
# HTTP over any byte stream

class Stream:
    """Buffered reads over a recv function (plain socket or TLS); b"" from recv means EOF."""

    def __init__(self, recv, send):
        self._recv = recv
        self._send = send
        self.buf = b""

    def send(self, data: bytes) -> None:
        self._send(data)

    def _fill(self) -> bool:
        data = self._recv(65536)
        if not data:
            return False
        self.buf += data
        return True

    def read_exact(self, n: int) -> bytes:
        while len(self.buf) < n:
            if not self._fill():
                raise EOFError(f"EOF after {len(self.buf)} of {n} bytes")
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def read_until(self, sep: bytes, limit: int = 1 << 20) -> bytes:
        while sep not in self.buf:
            if len(self.buf) > limit:
                raise ValueError("no separator within limit")
            if not self._fill():
                raise EOFError(f"EOF before {sep!r}; have {self.buf[:200]!r}")
        i = self.buf.index(sep) + len(sep)
        out, self.buf = self.buf[:i], self.buf[i:]
        return out

    def read_to_eof(self, limit: int = 1 << 26) -> bytes:
        while len(self.buf) < limit and self._fill():
            pass
        out, self.buf = self.buf, b""
        return out

    def at_eof(self) -> bool:
        """True if the peer closed (after whatever is buffered); blocks until data or EOF."""
        if self.buf:
            return False
        try:
            return not self._fill()
        except (ConnectionResetError, ssl.SSLError):
            return True

    def read_response(self, head_only: bool = False) -> "Response":
        head = self.read_until(b"\r\n\r\n")
        lines = head[:-4].decode("latin-1").split("\r\n")
        version, status, *rest = lines[0].split(" ", 2)
        headers: dict[str, str] = {}
        for line in lines[1:]:
            k, _, v = line.partition(":")
            headers[k.strip().lower()] = v.strip()
        status = int(status)
        if head_only or status in (204, 304) or 100 <= status < 200:
            body = b""
        elif "content-length" in headers:
            body = self.read_exact(int(headers["content-length"]))
        else:
            body = self.read_to_eof()
        return Response(status, headers, body, version)


class Response:
    def __init__(self, status: int, headers: dict, body: bytes, version: str = "HTTP/1.1"):
        self.status = status
        self.headers = headers
        self.body = body
        self.version = version

    def __repr__(self):
        return f"<Response {self.status} {self.headers} {self.body[:80]!r}>"


class EchoServer:
    """A TCP echo server on loopback: every byte comes back; one thread per connection."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.sock.settimeout(0.5)
        self.port = self.sock.getsockname()[1]
        self.stopped = False
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while not self.stopped:
            try:
                c, _ = self.sock.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            threading.Thread(target=self.serve, args=(c,), daemon=True).start()

    @staticmethod
    def serve(c):
        c.settimeout(30)
        with c:
            try:
                while True:
                    data = c.recv(1 << 18)
                    if not data:
                        c.shutdown(socket.SHUT_WR)
                        return
                    c.sendall(data)
            except OSError:
                return

    def stop(self):
        self.stopped = True
        self.sock.close()


def socks5_connect(socks_port: int, port: int) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", socks_port), timeout=30)
    s.sendall(b"\x05\x01\x00")
    check(s.recv(2) == b"\x05\x00")
    s.sendall(b"\x05\x01\x00\x01" + socket.inet_aton("127.0.0.1") + struct.pack(">H", port))
    reply = b""
    while len(reply) < 10:
        chunk = s.recv(10 - len(reply))
        check(chunk, "socks reply cut")
        reply += chunk
    check(reply[:2] == b"\x05\x00", reply)
    return s


def recv_exact(s: socket.socket, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        chunk = s.recv(min(1 << 18, n - len(out)))
        check(chunk, f"EOF after {len(out)} of {n}")
        out += chunk
    return bytes(out)


def http_request(method: str, path: str, host: str = "127.0.0.1", headers: dict | None = None,
                 body: bytes = b"") -> bytes:
    h = {"Host": host}
    if body or method == "POST":
        h["Content-Length"] = str(len(body))
    h.update(headers or {})
    head = f"{method} {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in h.items()) + "\r\n"
    return head.encode("latin-1") + body


def probe_ticket(port: int, host: str = "127.0.0.1") -> dict:
    """A browser-probe run id and results token from the target at host:port (GET /probe/token,
    docs/probe.md): {"run": ..., "token": ...}; post with {"X-Vlessbench-Probe-Token": token}."""
    with tcp_connect(port, host) as s:
        s.sendall(http_request("GET", "/probe/token", host=host))
        r = plain_stream(s).read_response()
    if r.status != 200:
        raise AssertionError(f"GET /probe/token: {r}")
    return json.loads(r.body)


def tcp_connect(port: int, host: str = LOOPBACK, nodelay: bool = True, timeout: float = 5.0) -> socket.socket:
    fam = socket.AF_INET6 if ":" in host else socket.AF_INET
    s = socket.socket(fam, socket.SOCK_STREAM)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1 if nodelay else 0)
    s.settimeout(timeout)
    s.connect((host, port))
    return s


def plain_stream(sock: socket.socket) -> Stream:
    return Stream(sock.recv, sock.sendall)


# --------------------------------------------------------------------------------------------
# TLS + VLESS raw client (memory BIOs, so every TCP write is under our control)

def client_tls_context(tls13: bool = True) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    if tls13:
        ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    ctx.set_alpn_protocols(["http/1.1"])
    return ctx


class TlsClient:
    """A TLS client over a plain socket with memory BIOs: one TCP send per flush."""

    def __init__(self, port: int, host: str = LOOPBACK, nodelay: bool = True, tls13: bool = True,
                 sni: str | None = "localhost", timeout: float = 5.0, sock: socket.socket | None = None,
                 context: ssl.SSLContext | None = None):
        self.sock = sock or tcp_connect(port, host, nodelay=nodelay, timeout=timeout)
        self.incoming = ssl.MemoryBIO()
        self.outgoing = ssl.MemoryBIO()
        ctx = context or client_tls_context(tls13)
        self.obj = ctx.wrap_bio(self.incoming, self.outgoing, server_hostname=sni)
        self.stream = Stream(self.recv, self.send)
        self.eof = False

    def _flush(self) -> None:
        data = self.outgoing.read()
        if data:
            self.sock.sendall(data)

    def _pull(self) -> bool:
        data = self.sock.recv(65536)
        if not data:
            self.incoming.write_eof()
            self.eof = True
            return False
        self.incoming.write(data)
        return True

    def handshake(self) -> "TlsClient":
        for _ in range(1000):
            try:
                self.obj.do_handshake()
                break
            except ssl.SSLWantReadError:
                self._flush()
                if not self._pull():
                    raise ConnectionError("EOF during TLS handshake") from None
        self._flush()
        return self

    def send(self, data: bytes) -> None:
        self.obj.write(data)
        self._flush()

    def recv(self, n: int = 65536) -> bytes:
        while True:
            try:
                return self.obj.read(n)
            except ssl.SSLWantReadError:
                if self.eof or not self._pull():
                    # Peer closed TCP without close_notify: treat as EOF (the test decides).
                    return b""
            except ssl.SSLZeroReturnError:
                return b""
            except ssl.SSLEOFError:
                return b""

    def close_notify(self) -> None:
        """Half-close: our close_notify goes out, reading stays possible."""
        try:
            self.obj.unwrap()
        except (ssl.SSLWantReadError, ssl.SSLError):
            pass
        self._flush()

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


ATYP_V4, ATYP_DOMAIN, ATYP_V6 = 1, 2, 3


def addons_flow(flow: str) -> bytes:
    raw = flow.encode()
    return bytes([0x0A, len(raw)]) + raw


def vless_header(user_uuid: str, port: int, addr: str = LOOPBACK, atyp: int | None = None, cmd: int = 1,
                 version: int = 0, addons: bytes = b"") -> bytes:
    u = uuidlib.UUID(user_uuid).bytes
    out = bytes([version]) + u + bytes([len(addons)]) + addons + bytes([cmd])
    if cmd == 3:  # Mux: no address on the wire
        return out
    if atyp is None:
        atyp = ATYP_V6 if ":" in addr else (ATYP_V4 if addr.replace(".", "").isdigit() else ATYP_DOMAIN)
    out += struct.pack(">H", port) + bytes([atyp])
    if atyp == ATYP_V4:
        out += socket.inet_pton(socket.AF_INET, addr)
    elif atyp == ATYP_V6:
        out += socket.inet_pton(socket.AF_INET6, addr)
    elif atyp == ATYP_DOMAIN:
        raw = addr.encode()
        out += bytes([len(raw)]) + raw
    return out


def read_vless_response_header(stream: Stream) -> None:
    ver, alen = stream.read_exact(2)
    assert ver == 0, f"VLESS response version {ver}"
    stream.read_exact(alen)


# VLESS UDP (command 2) and the daemon's UDP targets

UDP_ECHO_MARKER = b"\nVLESSBENCH-UDP "
# The echo is never longer than the datagram (docs/target.md "No amplifier"): its trailer takes the
# place of the datagram's last bytes, so a datagram leaves room for it (core/wire/route_header.hpp
# udp_echo_room). The room is NUL bytes, which udp_echo_trailer drops from the payload it returns.
UDP_ECHO_ROOM = 256


def echo_datagram(payload: bytes) -> bytes:
    """payload as a datagram for the [[udp_target]] echo: with room for its route trailer."""
    return payload + b"\0" * UDP_ECHO_ROOM


def ws_frame(op: int, payload: bytes, fin: bool = True, mask: bool = True) -> bytes:
    """One RFC 6455 frame as a client sends it (masked unless mask=False)."""
    head = bytes([(0x80 if fin else 0) | op])
    n = len(payload)
    m = 0x80 if mask else 0
    if n < 126:
        head += bytes([m | n])
    elif n < 65536:
        head += bytes([m | 126]) + struct.pack(">H", n)
    else:
        head += bytes([m | 127]) + struct.pack(">Q", n)
    if not mask:
        return head + payload
    key = os.urandom(4)
    return head + key + bytes(b ^ key[i % 4] for i, b in enumerate(payload))


def read_ws_frame(stream: Stream) -> tuple[int, bytes]:
    """(opcode, payload) of the next frame from a server (which never masks)."""
    b0, b1 = stream.read_exact(2)
    check(b1 & 0x80 == 0, "server frames are not masked")
    n = b1 & 0x7F
    if n == 126:
        n = struct.unpack(">H", stream.read_exact(2))[0]
    elif n == 127:
        n = struct.unpack(">Q", stream.read_exact(8))[0]
    return b0 & 0x0F, stream.read_exact(n)


def read_mux_frame(stream: "Stream") -> tuple[int, int, int, bytes, bytes]:
    """(id, status, option, extra metadata, data) of the next Mux.Cool frame on stream."""
    (mlen,) = struct.unpack(">H", stream.read_exact(2))
    meta = stream.read_exact(mlen)
    sid, st, opt = struct.unpack(">HBB", meta[:4])
    data = b""
    if opt & 1:
        (n,) = struct.unpack(">H", stream.read_exact(2))
        data = stream.read_exact(n)
    return sid, st, opt, meta[4:], data


def udp_frame(data: bytes) -> bytes:
    """One datagram as a VLESS UDP session carries it: 2-byte big-endian length, then the bytes."""
    return struct.pack(">H", len(data)) + data


def read_udp_frame(stream: Stream) -> bytes:
    (n,) = struct.unpack(">H", stream.read_exact(2))
    return stream.read_exact(n)


def udp_echo_trailer(echo: bytes) -> tuple[bytes, str, str]:
    """(payload, listener, route) of a [[udp_target]] echo (core/wire/route_header.hpp, format_udp_echo)
    of an echo_datagram: the payload without what is left of the room."""
    at = echo.rfind(UDP_ECHO_MARKER)
    check(at >= 0, echo[-80:])
    listener, _, route = echo[at + len(UDP_ECHO_MARKER):].decode().partition(" ")
    return echo[:at].rstrip(b"\0"), listener, route


def dns_query(qid: int, name: str, qtype: int = 1) -> bytes:
    """A DNS query (RD set) for name, type qtype (1 = A), class IN."""
    q = struct.pack(">HHHHHH", qid, 0x0100, 1, 0, 0, 0)
    for label in name.split("."):
        q += bytes([len(label)]) + label.encode()
    return q + b"\0" + struct.pack(">HH", qtype, 1)


def vless_get(vless_port: int, user_uuid: str, target_port: int, path: str = "/", nodelay: bool = True,
              headers: dict | None = None, dest: str = LOOPBACK, timeout: float = 5.0):
    """One new connection: TLS 1.3 + VLESS header + GET in one write. Returns (response, seconds)."""
    t0 = time.perf_counter()
    with TlsClient(vless_port, nodelay=nodelay, timeout=timeout) as c:
        c.handshake()
        req = http_request("GET", path, headers={"Connection": "close", **(headers or {})})
        c.send(vless_header(user_uuid, target_port, dest) + req)
        read_vless_response_header(c.stream)
        resp = c.stream.read_response()
        elapsed = time.perf_counter() - t0
    return resp, elapsed


# --------------------------------------------------------------------------------------------
# curl

def curl(args, timeout: float = 15.0) -> subprocess.CompletedProcess:
    return subprocess.run([CURL, "-sS", "--max-time", str(int(timeout)), *map(str, args)],
                          capture_output=True, timeout=timeout + 5, preexec_fn=_set_pdeathsig)


def curl_headers(text: bytes) -> dict:
    headers = {}
    for line in text.decode("latin-1").split("\r\n"):
        if ":" in line and not line.startswith("HTTP/"):
            k, _, v = line.partition(":")
            headers[k.strip().lower()] = v.strip()
    return headers


# --------------------------------------------------------------------------------------------
# Certificates and v2ray

def make_cert(directory: Path) -> tuple[Path, Path]:
    cert, key = directory / "cert.pem", directory / "key.pem"
    openssl = shutil.which("openssl")
    if not openssl:
        raise RuntimeError("openssl CLI not found")
    subprocess.run([openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                    "-nodes", "-keyout", str(key), "-out", str(cert), "-days", "2", "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
                   check=True, capture_output=True, timeout=30)
    return cert, key


def v2ray_tcp_inbounds(config: dict) -> list[tuple[str, int]]:
    """(host, port) of every inbound of a v2ray config that listens on TCP: all but a
    dokodemo-door whose network leaves tcp out (a UDP-only one cannot be connected to)."""
    out = []
    for ib in config.get("inbounds", []):
        network = (ib.get("settings") or {}).get("network", "tcp") if ib.get("protocol") == "dokodemo-door" else "tcp"
        if "tcp" in str(network).split(","):
            out.append((ib.get("listen", LOOPBACK), int(ib["port"])))
    return out


class V2ray:
    """v2ray 4.34 with a generated JSON config; waits until every TCP inbound it configured accepts
    (port: the one the test uses first, kept as self.port)."""

    def __init__(self, config: dict, port: int | None = None):
        self.dir = tempdir("vlessbench-v2ray-")
        self.config_path = self.dir / "config.json"
        self.config_path.write_text(json.dumps(config, indent=2))
        self.log_path = self.dir / "v2ray.log"
        inbounds = v2ray_tcp_inbounds(config)
        self.port = port if port is not None else (inbounds[0][1] if inbounds else None)
        self.proc = spawn([V2RAY, "-config", self.config_path], stdout=open(self.log_path, "wb"),
                          stderr=subprocess.STDOUT, cwd=self.dir)
        try:
            wait_ports(inbounds, proc=self.proc, what="v2ray", timeout=20)
        except RuntimeError as e:
            raise RuntimeError(f"{e}\n--- v2ray output ---\n{self.output()}") from None

    def output(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def stop(self):
        stop_process(self.proc, signal.SIGTERM, 5)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
        return False


def verify_log(runner, access: Path, out, timeout: float = 10.0, want_ok: bool = True) -> str:
    """`vlessbench verify OUT --log ACCESS`: the server's own record of each sample's route, not the
    runner's route column. http.request lines land as each request is served, udp.packet and
    dns.query once a flow idles, banner.connection at close, so the last ones may lag the run:
    retried until verify says OK (want_ok=False: until it fails) for at most timeout seconds
    (0: once). Returns verify's stdout."""
    deadline = time.monotonic() + timeout
    while True:
        v = subprocess.run([str(runner), "verify", str(out), "--log", str(access)], capture_output=True,
                           text=True, timeout=60)
        if (v.returncode == 0) == want_ok or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    if want_ok:
        check(v.returncode == 0 and "verify: OK" in v.stdout, v.stdout + v.stderr)
    else:
        check(v.returncode != 0, v.stdout + v.stderr)
    return v.stdout


def v2ray_client_config(http_port: int, server_port: int, user_uuid: str) -> dict:
    """http inbound -> vless outbound (TLS, allowInsecure, serverName localhost)."""
    return {
        "log": {"loglevel": "warning"},
        "inbounds": [{"listen": LOOPBACK, "port": http_port, "protocol": "http", "settings": {}}],
        "outbounds": [v2ray_vless_outbound(server_port, user_uuid)],
    }


def v2ray_server_config(port: int, user_uuid: str, cert: Path, key: Path) -> dict:
    """vless inbound over TLS -> freedom."""
    return {
        "log": {"loglevel": "warning"},
        "inbounds": [{
            "listen": LOOPBACK, "port": port, "protocol": "vless",
            "settings": {"clients": [{"id": user_uuid}], "decryption": "none"},
            "streamSettings": {"network": "tcp", "security": "tls",
                               "tlsSettings": {"certificates": [{"certificateFile": str(cert),
                                                                 "keyFile": str(key)}]}},
        }],
        "outbounds": [{"protocol": "freedom", "settings": {}}],
    }


# ============================================================================================
# Helpers the test files share (issue 27 item 8: each was copied into several files). Kept in
# this block of their own, apart from the fixtures above.

def parse_route(route: str) -> dict:
    """The route a relayed answer names (X-Vlessbench-Route, the UDP echo's trailer, the DNS TXT
    record; core/wire/route_header.hpp): "direct" -> {"route": "direct"}; "vless session=ID
    [sub=N] user=NAME [transport=T]" -> {"route": "vless", "session": ID, "sub": N or None,
    "user": NAME, ...every other key=value as text}. Anything else fails the test."""
    kind, *fields = route.split()
    check(kind in ("vless", "direct"), f"not a route: {route!r}")
    out: dict = {"route": kind}
    if kind == "direct":
        check(not fields, f"not a route: {route!r}")
        return out
    for field in fields:
        key, eq, value = field.partition("=")
        check(eq == "=" and key and key not in out, f"not a route: {route!r}")
        out[key] = value
    check("session" in out and out["session"].isdigit(), f"no session id in route {route!r}")
    out["session"] = int(out["session"])
    out["sub"] = int(out["sub"]) if "sub" in out else None
    return out


def route_session(route: str) -> int:
    """The VLESS session id a route names ("vless session=ID ..."); a direct route fails the test."""
    r = parse_route(route)
    check(r["route"] == "vless", f"route {route!r} is not a VLESS session")
    return r["session"]


def v2ray_socks_inbound(port: int, udp: bool = True, tag: str | None = None) -> dict:
    """A v2ray SOCKS5 inbound on loopback; udp: UDP ASSOCIATE on, its relay on the same port number
    (so allocate it with free_port(proto="tcp+udp"))."""
    inbound = {"listen": LOOPBACK, "port": port, "protocol": "socks",
               "settings": {"auth": "noauth", "udp": udp, **({"ip": LOOPBACK} if udp else {})}}
    if tag:
        inbound = {"tag": tag, **inbound}
    return inbound


def v2ray_vless_outbound(server_port: int, user_uuid: str, mux_concurrency: int | None = None,
                         tag: str | None = None) -> dict:
    """A v2ray VLESS+TLS outbound to the daemon on loopback (allowInsecure, serverName localhost);
    mux_concurrency: Mux.Cool on with that many sub-connections at once."""
    outbound = {
        "protocol": "vless",
        "settings": {"vnext": [{"address": LOOPBACK, "port": server_port,
                                "users": [{"id": user_uuid, "encryption": "none"}]}]},
        "streamSettings": {"network": "tcp", "security": "tls",
                           "tlsSettings": {"serverName": "localhost", "allowInsecure": True}},
    }
    if mux_concurrency:
        outbound["mux"] = {"enabled": True, "concurrency": mux_concurrency}
    if tag:
        outbound = {"tag": tag, **outbound}
    return outbound


def v2ray_socks_config(socks_port: int, server_port: int, user_uuid: str, udp: bool = True,
                       mux_concurrency: int | None = None) -> dict:
    """v2ray 4.34: a SOCKS5 inbound (v2ray_socks_inbound) -> a VLESS+TLS outbound to the daemon."""
    return {"log": {"loglevel": "warning"}, "inbounds": [v2ray_socks_inbound(socks_port, udp)],
            "outbounds": [v2ray_vless_outbound(server_port, user_uuid, mux_concurrency)]}


# --------------------------------------------------------------------------------------------
# A tiny test runner: named checks, all run, failures listed, exit code for ctest.

class Skip(Exception):
    """raise Skip("reason") in a test: reported as "SKIP name: reason", neither pass nor fail."""


def skip_file(reason: str) -> None:
    """The whole file skips: "SKIP <file>: (every case): reason", exit 77 (ctest's skip)."""
    print(f"SKIP {Path(sys.argv[0]).stem}: (every case): {reason}", flush=True)
    sys.exit(77)


class Suite:
    def __init__(self, name: str):
        self.name = name
        self.tests = []

    def test(self, fn):
        self.tests.append(fn)
        return fn

    def run(self) -> None:
        """Runs the tests (all of them, or those named on the command line), then stops and checks
        every daemon (check_daemons: a sanitizer report or a bad exit is a failure), then cleans up.
        Exit status: 1 on any failure; 77 (ctest's skip) when every test that ran skipped; else 0."""
        global _keep_tmp
        only = set(sys.argv[1:])
        failed, skipped, passed = [], [], []
        t_all = time.monotonic()
        for fn in self.tests:
            if only and fn.__name__ not in only:
                continue
            t0 = time.monotonic()
            try:
                fn()
                passed.append(fn.__name__)
                print(f"PASS {fn.__name__} ({time.monotonic() - t0:.2f}s)", flush=True)
            except Skip as e:
                skipped.append(fn.__name__)
                print(f"SKIP {self.name}: {fn.__name__}: {e}", flush=True)
            except Exception:  # noqa: BLE001 - report and continue with the next check
                failed.append(fn.__name__)
                print(f"FAIL {fn.__name__} ({time.monotonic() - t0:.2f}s)", flush=True)
                traceback.print_exc()
                sys.stdout.flush()
        findings = check_daemons()
        failed += ["daemon check"] * len(findings)
        skip_note = f", {len(skipped)} skipped ({', '.join(skipped)})" if skipped else ""
        print(f"{self.name}: {len(failed)} failed{skip_note}; {time.monotonic() - t_all:.1f}s", flush=True)
        if failed:
            _keep_tmp = True
        _cleanup()
        sys.exit(1 if failed else 77 if skipped and not passed else 0)


def rss_kib(pid: int) -> int:
    """VmRSS of a process, KiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS")


SANITIZER_MARKERS = ("WARNING: ThreadSanitizer", "ERROR: AddressSanitizer", "ERROR: LeakSanitizer",
                     "runtime error:")


def sanitizer_report(text: str) -> str | None:
    """The first sanitizer report in a process's stderr (ASan, LSan, UBSan, TSan), if any."""
    hits = [i for i in (text.find(m) for m in SANITIZER_MARKERS) if i >= 0]
    return text[min(hits):min(hits) + 6000] if hits else None


# TSan's exit status when it reported anything (its exitcode flag; halt_on_error=0 lets it go on
# and exit with it at the end).
TSAN_EXITCODE = 66


def describe_rc(rc: int | None) -> str:
    if rc is None:
        return "(still running)"
    if rc < 0:
        try:
            name = signal.Signals(-rc).name
        except ValueError:
            name = f"signal {-rc}"
        extra = (" (abort(): a sanitizer's report under abort_on_error=1, or glibc's heap checks)"
                 if -rc == signal.SIGABRT else "")
        return f"by {name}{extra}"
    if rc == TSAN_EXITCODE:
        return f"with status {rc} (ThreadSanitizer's exit status after a report)"
    return f"with status {rc}"


# An exit a test cannot have wanted without saying so: a crash, an abort, a sanitizer's status.
_CRASH_SIGNALS = {-signal.SIGABRT, -signal.SIGSEGV, -signal.SIGBUS, -signal.SIGILL, -signal.SIGFPE}


def check_daemons() -> list[str]:
    """Stops every daemon still running (SIGTERM; exit status 0 expected) and checks the stderr of
    every daemon started, before anything is deleted. One that had exited already (a test waited
    for it or killed it) and was not stopped through stop(): its sanitizer report, a crash signal
    or TSan's status is a finding, any other status the test's own business. Returns the
    findings, printed as FAIL lines."""
    findings = []
    for d in list(_daemons):
        if d.proc is None or d._checked is d.proc:
            continue
        if d.proc.poll() is None:
            try:
                d.stop()
            except AssertionError as e:
                findings.append(f"vlessbenchd in {d.dir}, stopped at the end of the run: {e}")
            continue
        rc = d.proc.returncode
        d._checked, d._checked_rc = d.proc, rc
        report = sanitizer_report(d.stderr())
        if report:
            findings.append(f"vlessbenchd in {d.dir} exited {describe_rc(rc)}; sanitizer report in its stderr:\n{report}")
        elif rc in _CRASH_SIGNALS or rc == TSAN_EXITCODE:
            findings.append(f"vlessbenchd in {d.dir} exited {describe_rc(rc)}; stderr tail:\n{d.stderr()[-3000:]}")
    for f in findings:
        print(f"FAIL daemon check: {f}", flush=True)
    return findings


def median_ms(samples) -> float:
    return statistics.median(samples) * 1000.0


def check(cond, msg="check failed"):
    if not cond:
        raise AssertionError(msg)


def require_binary() -> None:
    if not DAEMON.exists():
        print(f"vlessbenchd not found at {DAEMON} (set VLESSBENCH_BIN)", file=sys.stderr)
        sys.exit(1)
