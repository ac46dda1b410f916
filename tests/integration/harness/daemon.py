"""vlessbenchd under test: Daemon (config from a dict, started on port 0 or given ports, its
ports file, its access log, reload, a checked stop), one-shot runs, the end-of-run check of every
daemon started, and the runner's verify against a daemon's log."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from . import processes
from .checks import check
from .config import new_uuid, policy, read_events, toml_text
from .env import DAEMON, SANITIZED, THREADS
from .ports import ANY_PORT, free_port, wait_ports, was_given
from .processes import TSAN_EXITCODE, set_pdeathsig, describe_rc, sanitizer_report, spawn, tempdir

_daemons: list["Daemon"] = []  # every Daemon made: checked at the end of the run (check_daemons)

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
                 extra_args=(), stdout_pipe: bool = False, argv_prefix=(), binary: Path | None = None,
                 directory: Path | None = None):
        # binary: another vlessbenchd than VLESSBENCH_BIN's (bench/run.py --bin); directory: where its
        # config and logs go (made if missing; default a temp folder deleted at exit).
        self.binary = Path(binary).resolve() if binary else DAEMON  # absolute: it runs in self.dir
        if directory is not None:
            directory.mkdir(parents=True, exist_ok=True)
        self.dir = directory if directory is not None else tempdir()
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
        argv = [*self.argv_prefix, self.binary, "--config", self.config_path, "--ports-file", self.ports_path,
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
        if not was_given(int(port), proto):
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
        processes.forget(proc)
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
                          cwd=cwd, preexec_fn=set_pdeathsig)


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


def require_binary() -> None:
    if not DAEMON.exists():
        print(f"vlessbenchd not found at {DAEMON} (set VLESSBENCH_BIN)", file=sys.stderr)
        sys.exit(1)
