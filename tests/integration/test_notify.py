#!/usr/bin/env python3
"""sd_notify protocol: the daemon tells a fake NOTIFY_SOCKET READY=1 once its listeners are bound,
RELOADING=1 then READY=1 around a SIGHUP reload, and STOPPING=1 when it drains (issue 5). The SIGHUP
comes from `vlessbenchd reload --pid`, the unit's ExecReload (issue 14), which sends nothing and
fails when the file is broken."""
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

BIN = os.environ.get("VLESSBENCH_BIN", os.path.join(os.path.dirname(__file__), "../../build/bin"))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    with tempfile.TemporaryDirectory() as tmp:
        sock_path = os.path.join(tmp, "notify.sock")
        notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        notify.bind(sock_path)
        notify.settimeout(10)
        cfg = os.path.join(tmp, "d.toml")
        vport, tport, aport = free_port(), free_port(), free_port()
        with open(cfg, "w") as f:
            # Its own admin port: the default 9090 may be a running daemon's (a demo beside the suite).
            f.write(f'[log]\naccess = "{tmp}/access.jsonl"\n[admin]\nlisten = "127.0.0.1:{aport}"\n'
                    f'[[vless]]\nname = "v"\nlisten = "127.0.0.1:{vport}"\n'
                    f'[[target]]\nname = "t"\nlisten = "127.0.0.1:{tport}"\n')
        env = dict(os.environ, NOTIFY_SOCKET=sock_path)
        proc = subprocess.Popen([os.path.join(BIN, "vlessbenchd"), "--config", cfg], env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            def expect(state):
                msg = notify.recv(4096).decode()
                assert state in msg.split("\n"), f"expected {state}, got {msg!r}"
                return msg

            expect("READY=1")
            # READY means bound: both ports accept now.
            for port in (vport, tport):
                socket.create_connection(("127.0.0.1", port), timeout=2).close()
            def reload():
                return subprocess.run([os.path.join(BIN, "vlessbenchd"), "reload", "--config", cfg,
                                       "--pid", str(proc.pid)], capture_output=True, text=True, timeout=10)

            r = reload()
            assert r.returncode == 0, f"reload: rc={r.returncode} {r.stderr}"
            expect("RELOADING=1")
            expect("READY=1")
            good = open(cfg).read()
            with open(cfg, "a") as f:
                f.write("[limits]\nno_such_key = 1\n")
            r = reload()
            assert r.returncode == 1 and "no_such_key" in r.stderr, f"broken reload: rc={r.returncode} {r.stderr}"
            notify.settimeout(0.5)
            try:
                msg = notify.recv(4096).decode()
                raise AssertionError(f"a broken file reached the daemon: {msg!r}")
            except socket.timeout:
                pass
            notify.settimeout(10)
            with open(cfg, "w") as f:
                f.write(good)
            r = subprocess.run([os.path.join(BIN, "vlessbenchd"), "reload", "--config", cfg, "--pid", "1"],
                               capture_output=True, text=True, timeout=10)
            assert r.returncode == 2 and "not a daemon" in r.stderr, f"--pid 1: rc={r.returncode} {r.stderr}"
            proc.send_signal(signal.SIGTERM)
            expect("STOPPING=1")
            rc = proc.wait(timeout=15)
            assert rc == 0, f"exit code {rc}"
            log = open(f"{tmp}/access.jsonl").read()
            assert '"event":"config.reload","ts"' in log and '"ok":true' in log, log
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            err = proc.stderr.read().decode()
        print("notify: READY, RELOADING, READY (reload subcommand), none for a broken file, STOPPING; exit 0")
    return 0


if __name__ == "__main__":
    sys.exit(main())
