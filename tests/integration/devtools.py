"""Headless Debian chromium, the harness's browser half: started once here (chromium_argv,
Browser, chromium_dump_dom) for every browser test (test_probe_page, test_admin, test_ja4), driven
over its DevTools pipe (--remote-debugging-pipe): no websocket library, no port, no browser
download."""
import base64
import json
import os
import select
import shutil
import signal
import subprocess
import time

from harness import check, spawn, stop_process, tempdir

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def kill_leftovers(marker: str) -> list[int]:
    """Live processes whose command line names marker (this run's profile directory: every
    chromium helper, the crash handler in its own session included), each killed; their pids."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = open(f"/proc/{entry}/cmdline", "rb").read().decode("utf-8", "replace")
            state = open(f"/proc/{entry}/stat").read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if marker in cmdline and state != "Z":
            found.append(int(entry))
            try:
                os.kill(int(entry), signal.SIGKILL)
            except ProcessLookupError:
                pass
    return found


class DevTools:
    """Chromium's DevTools protocol over --remote-debugging-pipe (fd 3: commands in, fd 4: replies
    out, each message NUL-terminated): no websocket library, no port."""

    def __init__(self, argv):
        to_r, self.to_w = os.pipe()
        self.from_r, from_w = os.pipe()
        # chromium runs in a session of its own: the whole process group is killed afterwards.
        self.proc = spawn(["sh", "-c", f'exec "$@" 3<&{to_r} 4>&{from_w}', "sh", *argv], pass_fds=(to_r, from_w),
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        os.close(to_r)
        os.close(from_w)
        self.buf = b""
        self.last_id = 0

    def call(self, method: str, params: dict | None = None, session: str | None = None, timeout: float = 10.0):
        self.last_id += 1
        msg = {"id": self.last_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self.to_w, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            while b"\0" in self.buf:
                raw, self.buf = self.buf.split(b"\0", 1)
                reply = json.loads(raw)
                if reply.get("id") == self.last_id:
                    check("error" not in reply, (method, reply))
                    return reply["result"]
            left = deadline - time.monotonic()
            check(left > 0, f"chromium did not answer {method} within {timeout}s")
            ready, _, _ = select.select([self.from_r], [], [], left)
            if ready:
                chunk = os.read(self.from_r, 1 << 16)
                check(chunk, f"chromium closed its pipe during {method}")
                self.buf += chunk

    def close(self) -> None:
        """Asks the browser to quit (it ends its helpers), then kills its process group anyway."""
        try:
            os.write(self.to_w, json.dumps({"id": 0, "method": "Browser.close"}).encode() + b"\0")
            self.proc.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        stop_process(self.proc, signal.SIGKILL, 5)
        os.close(self.to_w)
        os.close(self.from_r)


# --------------------------------------------------------------------------------------------
# Chromium start-up, once for every browser test (issue 27 item 8).

def chromium_argv(profile, *extra: str) -> list[str]:
    """Headless chromium with nothing of its own running (no sync, updates, crash reports), its
    profile in profile, then extra."""
    return [CHROMIUM, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-extensions",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            "--metrics-recording-only", "--no-default-browser-check", "--disable-breakpad",
            "--disable-crash-reporter", f"--user-data-dir={profile}", *extra]


class Browser:
    """Headless chromium over DevTools with a profile of its own; close() (or the with block's end)
    ends it and fails the test if any of its processes survives SIGKILL."""

    def __init__(self, *extra: str):
        self.profile = tempdir("vlessbench-chromium-")
        self.devtools = DevTools(chromium_argv(self.profile, "--remote-debugging-pipe", *extra))

    def open(self, url: str) -> str:
        """A new page at url; returns its DevTools session id."""
        target = self.devtools.call("Target.createTarget", {"url": url}, timeout=20)
        return self.devtools.call("Target.attachToTarget", {"targetId": target["targetId"], "flatten": True})["sessionId"]

    def open_sized(self, url: str, width: int, height: int) -> str:
        """A new page at url with a viewport of width x height CSS px: the window's own width has a
        floor (~500 px), so a phone's viewport is emulated (mobile below 500 px)."""
        session = self.open("about:blank")
        self.devtools.call("Emulation.setDeviceMetricsOverride", {"width": width, "height": height,
                                                                  "deviceScaleFactor": 1, "mobile": width < 500},
                           session)
        self.devtools.call("Page.navigate", {"url": url}, session, timeout=20)
        return session

    def js(self, session: str, expr: str):
        return self.devtools.call("Runtime.evaluate", {"expression": expr, "returnByValue": True},
                                  session)["result"].get("value")

    def screenshot(self, session: str) -> bytes:
        png = self.devtools.call("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True}, session)
        return base64.b64decode(png["data"])

    def close(self) -> None:
        self.devtools.close()
        # A helper outside the group (the crash handler has a session of its own) is killed too;
        # none may be left alive after that.
        kill_leftovers(str(self.profile))
        # SIGKILLed processes leave /proc (or turn zombie) within moments: poll, bounded.
        deadline = time.monotonic() + 3
        while (leaked := kill_leftovers(str(self.profile))) and time.monotonic() < deadline:
            time.sleep(0.05)
        check(not leaked, f"chromium processes survived SIGKILL: {leaked}")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


def chromium_dump_dom(url: str, *extra: str, timeout: float = 60) -> None:
    """chromium --dump-dom url (one fetch, the page discarded), bounded; its helpers, in the session
    and process group it was started in, are killed after it."""
    profile = tempdir("vlessbench-chromium-")
    p = spawn(chromium_argv(profile, *extra, "--dump-dom", url), stdout=subprocess.DEVNULL,
              stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        p.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        pass
    finally:
        stop_process(p, timeout=5)
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        kill_leftovers(str(profile))
