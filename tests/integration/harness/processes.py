"""Process bookkeeping: nothing outlives the run. Every process started through spawn() is
registered, killed by the kernel if this interpreter dies first (PR_SET_PDEATHSIG), and ended at
exit (suite.py registers the exit hook) or on SIGTERM; temp folders are deleted unless a check
failed or VLESSBENCH_KEEP_TMP is set. Also what /proc and an exit status say about a process."""
from __future__ import annotations

import ctypes
import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
from pathlib import Path

from .ports import wait_ports

_procs: list[subprocess.Popen] = []
_procs_lock = threading.Lock()
_tmpdirs: list[Path] = []


def set_pdeathsig() -> None:
    """preexec_fn of every child: the kernel SIGKILLs it if this interpreter dies first (runs in
    the child between fork and exec)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    except Exception:  # noqa: BLE001 - best effort; atexit still cleans up
        pass


def spawn(argv, **kw) -> subprocess.Popen:
    p = subprocess.Popen([str(a) for a in argv], preexec_fn=set_pdeathsig, **kw)
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
    forget(p)
    return p.returncode


def forget(p: subprocess.Popen) -> None:
    """p has been stopped and waited for: the end-of-run cleanup leaves it alone."""
    with _procs_lock:
        if p in _procs:
            _procs.remove(p)


_keep_tmp = False  # set when a check failed: the temp folders (stderr.log included) stay for a look


def keep_tmp() -> None:
    """A check failed: the temp folders stay at the end of the run, for a look."""
    global _keep_tmp
    _keep_tmp = True


def _prog(p: subprocess.Popen) -> str:
    args = p.args if isinstance(p.args, (list, tuple)) else [p.args]
    return Path(str(args[0])).name if args else "?"


def _cleanup(announce: bool = True) -> None:
    """Ends every process still running (SIGTERM, then SIGKILL), then deletes the temp folders,
    unless a check failed or VLESSBENCH_KEEP_TMP is set. Daemons are checked before this
    (check_daemons); a process still running here is named on stdout (announce), not dropped in
    silence: in a test, whatever it started it stops itself."""
    with _procs_lock:
        procs = list(_procs)
    running = [p for p in procs if p.poll() is None]
    for p in running:
        if announce:
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


def stop_all() -> None:
    """Ends every process started and deletes the temp folders, without naming each process: for a
    script (bench/run.py) whose servers are meant to run until it ends."""
    _cleanup(announce=False)


def _on_signal(signum, _frame):
    _cleanup()
    os._exit(128 + signum)


def handle_signals(*signums) -> None:
    """On each of signums: end every process, then exit 128 + the signal's number. SIGTERM is
    handled from import on (ctest's timeout sends it); bench/run.py adds SIGINT (Ctrl-C)."""
    for signum in signums:
        signal.signal(signum, _on_signal)


handle_signals(signal.SIGTERM)


class Started:
    """A process started with its output (stdout and stderr) in self.log_path, waited for until it
    accepts on its ports, stopped by stop() or at the end of a with block: v2ray.V2ray, peers.Core."""

    proc: subprocess.Popen
    log_path: Path

    def _start(self, what: str, argv, ports, cwd: Path, timeout: float = 20) -> None:
        self.proc = spawn(argv, stdout=open(self.log_path, "wb"), stderr=subprocess.STDOUT, cwd=cwd)
        try:
            wait_ports(ports, proc=self.proc, what=what, timeout=timeout)
        except RuntimeError as e:
            raise RuntimeError(f"{e}\n--- {what} output ---\n{self.output()}") from None

    def output(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def stop(self) -> None:
        stop_process(self.proc, signal.SIGTERM, 5)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
        return False


def load_json(load: Path, mode: str, *args, timeout: float = 60) -> tuple[int, dict]:
    """Runs `vlessbench_load MODE ARGS...` to its end (bounded): (exit status, its last JSON line,
    which says what failed when the status is not 0). No output at all raises RuntimeError."""
    r = subprocess.run([str(load), mode, *map(str, args)], capture_output=True, text=True, timeout=timeout,
                       preexec_fn=set_pdeathsig)
    if not r.stdout.strip():
        raise RuntimeError(f"no JSON from vlessbench_load {mode}: exit {r.returncode}: {r.stderr.strip()}")
    return r.returncode, json.loads(r.stdout.strip().splitlines()[-1])


def tempdir(prefix="vlessbench-it-") -> Path:
    d = Path(tempfile.mkdtemp(prefix=prefix))
    _tmpdirs.append(d)
    return d



def rss_kib(pid: int) -> int:
    """VmRSS of a process, KiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for {pid}")


def cpu_seconds(pid: int) -> float:
    """utime + stime of the process, from /proc/PID/stat."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # fields 14, 15 of proc(5)


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
