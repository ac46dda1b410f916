"""Path emulation (`emulate = { delay_ms, jitter_ms, loss_pct }`) where it cannot be installed.

On a kernel without the prio or netem queueing discipline ("Specified qdisc kind is unknown", the
build machines), `--check`, the start and a reload that adds emulation each refuse with that reason
and the remedy; the reload keeps the running generation. Without CAP_NET_ADMIN (the same `--check`
as the user nobody) the reason is the capability. Where the kernel has netem the refusals cannot be
seen: those cases skip saying so (the real thing is for a kernel with netem, such as the qemu guest
of tools/vm.sh).
"""
import os
import shutil
import subprocess

from harness import ANY_PORT, Daemon, Skip, Suite, check, new_uuid, require_binary, run_daemon, tempdir, toml_text
from harness.env import DAEMON

suite = Suite("test_emulate")
require_binary()

UUID = new_uuid()


def config(delay_ms: int) -> dict:
    vless = {"name": "far", "listen": ANY_PORT}
    if delay_ms:
        vless["emulate"] = {"delay_ms": delay_ms, "loss_pct": 1}
    return {"users": [{"name": "u", "uuid": UUID}], "vless": [vless], "target": [{"name": "http", "listen": ANY_PORT}],
            "admin": {"enabled": False}}


def netem_refused() -> str:
    """--check's refusal on this machine, or Skip when the kernel installs netem."""
    d = tempdir()
    path = d / "c.toml"
    path.write_text(toml_text(config(40)))
    r = run_daemon(["--check", "--config", path])
    if r.returncode == 0:
        raise Skip("this kernel has netem and the test runs with CAP_NET_ADMIN: nothing is refused here")
    return r.stderr


@suite.test
def check_and_start_refuse_with_the_reason_and_remedy():
    err = netem_refused()
    check("emulate on listener \"far\": cannot install netem" in err, err)
    if os.geteuid() == 0:
        check("Specified qdisc kind is unknown" in err and "modprobe sch_netem" in err, err)
    else:
        check("CAP_NET_ADMIN" in err, err)
    d = Daemon(config(40), start=False)
    d.start(wait=False)
    rc = d.proc.wait(timeout=15)
    check(rc != 0, f"the start went on: rc {rc}")
    check("cannot install netem" in d.stderr() and ("modprobe sch_netem" in d.stderr() or "CAP_NET_ADMIN" in
                                                     d.stderr()), d.stderr())


@suite.test
def reload_that_adds_emulation_is_refused_and_the_generation_kept():
    netem_refused()
    with Daemon(config(0)) as d:
        # The access log stays where it is: the refused reload neither reopens it nor loses its line.
        ev = d.reload({**config(40), "log": d.cfg["log"]})
        check(ev.get("ok") is False, ev)
        check("emulate: cannot install netem" in ev.get("error", ""), ev)
        check(ev.get("generation") == 1, ev)
        check(d.running(), d.stderr())
        check(d.stop() == 0, "exit code")


@suite.test
def without_cap_net_admin_check_names_the_capability():
    if os.geteuid() != 0:
        raise Skip("runs as root only (to drop to nobody)")
    setpriv = shutil.which("setpriv")
    if not setpriv:
        raise Skip("setpriv (util-linux) is missing")
    d = tempdir()
    os.chmod(d, 0o755)
    path = d / "c.toml"
    path.write_text(toml_text(config(40)))
    os.chmod(path, 0o644)
    r = subprocess.run([setpriv, "--reuid=nobody", "--regid=nogroup", "--clear-groups", "--inh-caps=-all",
                        str(DAEMON), "--check", "--config", str(path)], capture_output=True, text=True, timeout=15)
    if "Permission denied" in r.stderr and "CAP_NET_ADMIN" not in r.stderr:
        raise Skip(f"nobody cannot run the build's binary here: {r.stderr.strip()[:200]}")
    check(r.returncode == 1, f"rc {r.returncode}: {r.stderr}")
    check("CAP_NET_ADMIN" in r.stderr and "AmbientCapabilities=CAP_NET_ADMIN" in r.stderr, r.stderr)


suite.run()
