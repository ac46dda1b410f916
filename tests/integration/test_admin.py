"""The admin listener (docs/dashboard.md), in a network namespace of the test's own so it can sit
on a non-loopback address as on a VM's LAN: a token is then required (config error without one;
a request without it or with a wrong one is answered 401 and logged); /metrics after real traffic
passes `promtool check metrics` and counts what was sent; the dashboard in headless chromium shows
an SNI and a probe user agent full of HTML as text, never as elements; against a Nagle-prone client
the kernel-ACK listener's sessions carry stall flags and the QUICKACK listener's do not; a reload
moves the admin listener, changes its token, turns it off. A
screenshot of the dashboard is taken (VLESSBENCH_DASHBOARD_SCREENSHOT=FILE keeps it).
Skipped (77) without root (namespace) or chromium."""
import copy
import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import time
from pathlib import Path

from harness import (Daemon, Suite, echo_datagram, TlsClient, check, free_port, http_request, new_uuid, plain_stream, policy, probe_ticket,
                     read_vless_response_header, require_binary, run_daemon, run_in_own_netns, sanitizer_report,
                     skip_file, tcp_connect, tempdir,
                     vless_get, vless_header, wait_ports)

LAN = "10.77.0.1"
run_in_own_netns(addresses=(LAN,))

from devtools import CHROMIUM, Browser  # noqa: E402 - after the namespace is entered

PROMTOOL = shutil.which("promtool")
if not CHROMIUM or not PROMTOOL:
    skip_file("chromium or promtool not installed (tools/deps.sh --test)")

suite = Suite("test_admin")
require_binary()

TOKEN = "tok-" + secrets.token_hex(12)
ADMIN_PORT = free_port()
D = Daemon({
    "users": [{"name": "tester", "uuid": new_uuid()}],
    "vless": [
        {"name": "kernel", "listen": f"127.0.0.1:{free_port()}", "tcp": policy(True, "kernel"),
         "upstream_tcp": policy(True, "kernel")},
        {"name": "quick", "listen": f"127.0.0.1:{free_port()}", "tcp": policy(True, "on"),
         "upstream_tcp": policy(True, "on")},
    ],
    "target": [{"name": "http", "listen": f"127.0.0.1:{free_port()}"}],
    "admin": {"listen": f"{LAN}:{ADMIN_PORT}", "token": TOKEN},
})
TP = D.target_port
wait_ports([(LAN, ADMIN_PORT)], proc=D.proc, what="admin listener")

SNI_SCRIPT = "<script>window.__pwned=1</script>"
SNI_IMG = '"><img src=x onerror=window.__pwned=2>'
UA = '<script>window.__pwned=3</script>"><img src=x onerror=window.__pwned=4>'


def admin_get(path: str, headers: dict | None = None):
    with tcp_connect(ADMIN_PORT, LAN) as sock:
        sock.sendall(http_request("GET", path, host=LAN, headers=headers))
        return plain_stream(sock).read_response()


def authed(path: str):
    return admin_get(path, {"Authorization": f"Bearer {TOKEN}"})


def state() -> dict:
    r = authed("/api/state")
    check(r.status == 200 and r.headers["content-type"] == "application/json", r)
    return json.loads(r.body)


def vless_session_with_sni(port: int, sni: str) -> None:
    with TlsClient(port, sni=sni) as c:
        c.handshake()
        c.send(vless_header(D.uuid, TP) + http_request("GET", "/", headers={"Connection": "close"}))
        read_vless_response_header(c.stream)
        check(c.stream.read_response().status == 200)


@suite.test
def token_required_off_loopback():
    bad = tempdir() / "bad.toml"
    bad.write_text(f'[admin]\nlisten = "{LAN}:{ADMIN_PORT}"\n[[target]]\nname = "t"\nlisten = "127.0.0.1:1"\n')
    r = run_daemon(["--check", "--config", bad])
    check(r.returncode != 0 and "admin.listen" in r.stderr and "requires admin.token" in r.stderr, r.stderr)
    r = admin_get("/metrics")
    check(r.status == 401 and "bearer" in r.headers.get("www-authenticate", "").lower(), r)
    D.wait_stderr("admin: 401 to", "no token")
    for headers, path in (({"Authorization": "Bearer " + TOKEN[:-1] + "x"}, "/metrics"),
                          ({"Authorization": "Basic " + TOKEN}, "/"),
                          (None, "/api/state?token=" + "z" * len(TOKEN)),
                          (None, "/?token=")):
        r = admin_get(path, headers)
        check(r.status == 401, (headers, path, r))
    # Guessing: every guess refused, the warning at most once a second (with its count).
    before = D.stderr().count("admin: 401 to")
    t0 = time.monotonic()
    for i in range(100):
        check(admin_get(f"/metrics?token=guess{i:012d}xxxx").status == 401)
    lines = D.stderr().count("admin: 401 to") - before
    check(lines <= time.monotonic() - t0 + 2, f"{lines} warnings for 100 guesses")
    check(authed("/metrics").status == 200)
    check(admin_get(f"/api/state?token={TOKEN}").status == 200)
    check(admin_get(f"/?token={TOKEN}").status == 200)
    r = authed("/nothing")
    check(r.status == 404, r)


@suite.test
def metrics_after_traffic_pass_promtool():
    for _ in range(5):
        resp, _secs = vless_get(D.port("kernel"), D.uuid, TP, "/generate_204")
        check(resp.status == 204, resp)
    with TlsClient(D.port("kernel")) as c:  # an unknown user: a vless.reject
        c.handshake()
        c.send(vless_header(new_uuid(), TP))
        c.stream.read_to_eof()
    D.wait_event("vless.reject", reason="unknown_user")
    ev = D.reload(D.cfg)
    check(ev["ok"], ev)
    # Sessions are counted as they close, on whichever thread ran them: a bounded wait for the last.
    deadline = time.monotonic() + 5
    while True:
        r = authed("/metrics")
        check(r.status == 200 and r.headers["content-type"].startswith("text/plain; version=0.0.4"), r)
        text = r.body.decode()
        if "\nvlessbench_open_sessions 0\n" in text or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    p = subprocess.run([PROMTOOL, "check", "metrics"], input=text, capture_output=True, text=True, timeout=30)
    check(p.returncode == 0, f"promtool: {p.stdout}{p.stderr}")

    def value(series: str) -> float:
        m = re.search("^" + re.escape(series) + r" (\S+)$", text, re.M)
        check(m, f"no {series} in\n{text}")
        return float(m.group(1))

    check(value('vlessbench_sessions_total{listener="kernel"}') >= 5)
    check(value('vlessbench_rejects_total{listener="kernel",reason="unknown_user"}') >= 1)
    check(value('vlessbench_phase_seconds_count{listener="kernel",phase="tls"}') >= 5)
    check(value('vlessbench_phase_seconds_bucket{listener="kernel",phase="tls",le="+Inf"}') >= 5)
    check(value('vlessbench_bytes_total{listener="kernel",direction="down"}') > 0)
    check(value('vlessbench_reloads_total{result="ok"}') == 1)
    check(value("vlessbench_config_generation") == 2)
    check(value("vlessbench_open_sessions") == 0)
    check(re.search(r'^vlessbench_build_info\{version="[^"]+"\} 1$', text, re.M), text)


@suite.test
def stall_flags_on_the_kernel_ack_listener_only():
    rounds = 12
    before = max((x["id"] for x in state()["sessions"]), default=0)
    for _ in range(rounds):
        for name in ("kernel", "quick"):
            resp, _secs = vless_get(D.port(name), D.uuid, TP, "/generate_204", nodelay=False)
            check(resp.status == 204, resp)
    # Every one of these sessions in the state, the last ones still closing when we look first (open
    # sessions 0 was not enough: under TSan the last session was once neither open nor listed yet).
    deadline = time.monotonic() + 10
    while True:
        s = state()
        recent = [x for x in s["sessions"] if x["id"] > before]
        if (len(recent) >= 2 * rounds and not s["open_sessions"]) or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    by_name = {l["name"]: l for l in s["listeners"]}
    kernel = [r for r in recent if r["listener"] == "kernel"]
    quick = [r for r in recent if r["listener"] == "quick"]
    flagged_kernel = sum(r["stall"] for r in kernel)
    flagged_quick = sum(r["stall"] for r in quick)
    print(f"  stall flags: kernel {flagged_kernel}/{len(kernel)}, quick {flagged_quick}/{len(quick)}; "
          f"counters kernel {by_name['kernel']['stalls']}, quick {by_name['quick'].get('stalls', 0)}")
    check(len(kernel) == rounds and len(quick) == rounds, recent)
    check(flagged_kernel >= (rounds * 2) // 3, kernel)
    check(flagged_quick == 0, quick)
    check(by_name["kernel"]["stalls"] >= flagged_kernel)
    hist = by_name["kernel"]["phases"]["vless_header"]
    check(hist["count"] >= rounds and len(hist["buckets"]) == len(s["buckets_ms"]), hist)


def udp_echo(addr: tuple[str, int], payload: bytes) -> bytes:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as u:
        u.settimeout(5)
        u.sendto(payload, addr)
        return u.recvfrom(65535)[0]


@suite.test
def udp_dns_listeners_and_target_answers_in_state_and_metrics():
    # On main: /api/state listed no udp or dns listener, a target row had no counts (the page showed
    # 0 sessions, 0 bytes) and /metrics had no target counter and no per-listener info.
    token = "tok-" + secrets.token_hex(12)
    admin_port = free_port(LAN)
    d = Daemon({
        "users": [{"name": "tester", "uuid": new_uuid()}],
        "vless": [{"name": "node", "listen": f"{LAN}:{free_port(LAN)}", "tcp": policy(True, "kernel"),
                   "upstream_tcp": policy(False, "on")}],
        "target": [{"name": "web", "listen": f"{LAN}:{free_port(LAN)}"}],
        "udp_target": [{"name": "echo", "listen": f"{LAN}:{free_port(LAN)}"}],
        "dns": [{"name": "names", "listen": f"{LAN}:{free_port(LAN)}"}],
        "admin": {"listen": f"{LAN}:{admin_port}", "token": token},
        "limits": {"udp_idle_timeout_ms": 200},
    })
    wait_ports([(LAN, admin_port)], proc=d.proc, what="admin listener")
    web = d.port("web")
    direct, relayed = 7, 3
    for _ in range(direct):
        with tcp_connect(web, LAN) as sock:
            sock.sendall(http_request("GET", "/bytes/1000", host=LAN, headers={"Connection": "close"}))
            check(plain_stream(sock).read_response().status == 200)
    for _ in range(relayed):
        with TlsClient(d.port("node"), host=LAN) as c:
            c.handshake()
            c.send(vless_header(d.uuid, web, LAN) + http_request("GET", "/", headers={"Connection": "close"}))
            read_vless_response_header(c.stream)
            check(c.stream.read_response().status == 200)
    echo_addr = (LAN, int(d.cfg["udp_target"][0]["listen"].rsplit(":", 1)[1]))
    for i in range(4):
        check(udp_echo(echo_addr, echo_datagram(b"ping %d" % i)).startswith(b"ping %d" % i))
    dns_port = d.port("names")
    query = bytes.fromhex("1234 0100 0001 0000 0000 0000".replace(" ", "")) + b"\x01a\x0avlessbench\x04test\x00\x00\x01\x00\x01"
    check(udp_echo((LAN, dns_port), query)[:2] == b"\x12\x34")
    d.wait_event("udp.packet", timeout=5)  # the echo flow's line: written after 200 ms idle
    d.wait_event("dns.query")

    def get(path):
        with tcp_connect(admin_port, LAN) as sock:
            sock.sendall(http_request("GET", path, host=LAN, headers={"Authorization": f"Bearer {token}"}))
            r = plain_stream(sock).read_response()
        check(r.status == 200, r)
        return r.body.decode()

    deadline = time.monotonic() + 5
    while True:  # sessions and echo flows are counted as they close (each flow after 200 ms idle)
        s = json.loads(get("/api/state"))
        by = {l["name"]: l for l in s["listeners"]}
        if (by["node"]["sessions"] >= relayed and by["echo"]["answers"] >= 4) or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    check({n: by[n]["kind"] for n in by} == {"node": "vless", "web": "target", "echo": "udp", "names": "dns"}, by)
    check(by["echo"]["listen"] == f"{LAN}:{echo_addr[1]}" and by["names"]["listen"] == f"{LAN}:{dns_port}", by)
    check(by["web"]["answers"] == direct + relayed and by["web"]["answers_vless"] == relayed, by["web"])
    check(by["web"]["bytes_down"] >= direct * 1000, by["web"])
    check(by["echo"]["answers"] == 4 and by["echo"]["answers_vless"] == 0, by["echo"])
    check(by["names"]["answers"] == 1, by["names"])
    check(by["node"]["sessions"] == relayed and by["node"]["answers"] == 0, by["node"])

    text = get("/metrics")
    p = subprocess.run([PROMTOOL, "check", "metrics"], input=text, capture_output=True, text=True, timeout=30)
    check(p.returncode == 0, f"promtool: {p.stdout}{p.stderr}")
    check(f'vlessbench_target_answers_total{{listener="web",route="vless"}} {relayed}\n' in text, text)
    check(f'vlessbench_target_answers_total{{listener="web",route="direct"}} {direct}\n' in text, text)
    check('vlessbench_target_answers_total{listener="echo",route="direct"} 4\n' in text, text)
    info = re.findall(r"^vlessbench_listener_info\{(.*)\} 1$", text, re.M)
    check(len(info) == 4, info)
    check(f'listener="node",kind="vless",listen="{LAN}:{d.port("node")}",policy="nodelay=true quickack=kernel",'
          'upstream_policy="nodelay=false quickack=on",transport="tls"' in info, info)
    check(any(i.startswith('listener="names",kind="dns"') for i in info), info)
    d.stop()


@suite.test
def stalls_before_a_reload_to_quickack_are_told_apart():
    # On main a listener kept its stall count after the reload to QUICKACK with nothing saying when.
    cfg = copy.deepcopy(D.cfg)
    before = {l["name"]: l for l in state()["listeners"]}["kernel"]
    if not before["stalls"]:
        for _ in range(6):
            vless_get(D.port("kernel"), D.uuid, TP, "/generate_204", nodelay=False)
    deadline = time.monotonic() + 5
    while state()["open_sessions"] and time.monotonic() < deadline:
        time.sleep(0.05)
    stalled = {l["name"]: l for l in state()["listeners"]}["kernel"]["stalls"]
    check(stalled > 0, "no stall on the kernel-ACK listener to tell apart")
    for entry in cfg["vless"]:
        if entry["name"] == "kernel":
            entry["tcp"] = policy(True, "on")
    t0 = time.time() * 1000
    ev = D.reload(cfg)
    check(ev["ok"], ev)
    by = {l["name"]: l for l in state()["listeners"]}
    check(by["kernel"]["stalls_before_policy_change"] == stalled and by["kernel"]["stalls"] == stalled, by["kernel"])
    check(by["kernel"]["policy_changed_unix_ms"] >= t0 - 1000, by["kernel"])
    check(by["quick"]["policy_changed_unix_ms"] is None, by["quick"])  # its policy did not change
    # A reload that changes nothing keeps the moment of the change.
    ev = D.reload(cfg)
    check(ev["ok"], ev)
    again = {l["name"]: l for l in state()["listeners"]}["kernel"]
    check(again["policy_changed_unix_ms"] == by["kernel"]["policy_changed_unix_ms"], again)
    # The listener stays on QUICKACK: the dashboard's screenshot shows its stalls as before the reload.


def open_dashboard(url: str, screenshot: Path, size: str = "1400,1100") -> dict:
    with Browser(f"--window-size={size}") as browser:
        width, height = (int(v) for v in size.split(","))
        session = browser.open_sized(url, width, height)

        def js(expr: str):
            return browser.js(session, expr)

        deadline = time.monotonic() + 20
        while js("document.body && document.body.dataset.loaded") != "1" and time.monotonic() < deadline:
            time.sleep(0.2)
        # A second poll has rendered too (an injected onerror would have fired by then): the
        # header's "updated" time (a poll's now_unix_ms, in seconds) changes with each render.
        first = js("document.getElementById('meta').textContent")
        deadline = time.monotonic() + 20
        while js("document.getElementById('meta').textContent") == first and time.monotonic() < deadline:
            time.sleep(0.2)
        check(js("document.getElementById('meta').textContent") != first, f"no second render after {first!r}")
        probe = json.dumps([SNI_SCRIPT, SNI_IMG, UA])
        found = js(f"""(function(){{
            const texts = {probe};
            const all = document.body.textContent;
            return {{loaded: document.body.dataset.loaded || "", pwned: window.__pwned || 0,
                    scripts: document.querySelectorAll("script").length,
                    imgs: document.querySelectorAll("img").length,
                    literal: texts.map(t => all.includes(t)),
                    sessions: document.querySelectorAll("#sessions tr").length,
                    stall_rows: document.querySelectorAll("#sessions tr.stall").length,
                    width: window.innerWidth,
                    page_overflow: document.documentElement.scrollWidth - window.innerWidth,
                    listeners_box_overflow: (function(b){{ return b.getBoundingClientRect().right - window.innerWidth; }})(
                        document.getElementById("listeners").parentElement),
                    sessions_overflow: (function(b){{ return b.scrollWidth - b.clientWidth; }})(
                        document.getElementById("sessions").parentElement),
                    probes_overflow: (function(b){{ return b.scrollWidth - b.clientWidth; }})(
                        document.getElementById("probes").parentElement),
                    order: Array.from(document.querySelectorAll("h2")).map(h => h.firstChild.textContent.trim()),
                    stall_text: Array.from(document.querySelectorAll("#listeners tr")).filter(r =>
                        r.firstChild.textContent === "kernel").map(r => r.children[1].textContent),
                    stalls_right: (function(th){{ return th ? th.getBoundingClientRect().right - window.innerWidth : 1e9; }})(
                        Array.from(document.querySelectorAll("#listeners th")).find(h => h.textContent === "stalls")),
                    hot_bars: Array.from(document.querySelectorAll(".bars div.hot")).filter(b => b.title.endsWith(": 0") === false)
                        .map(b => b.getBoundingClientRect().height),
                    hist_flags: Array.from(document.querySelectorAll(".hist .t .flag")).map(f => f.textContent),
                    axis: Array.from(document.querySelectorAll(".axis")).slice(0, 1).map(a =>
                        Array.from(a.children).map(c => [c.textContent, c.scrollWidth <= c.clientWidth]))}};
        }})()""")
        screenshot.write_bytes(browser.screenshot(session))
    return found


@suite.test
def injected_html_is_shown_as_text():
    # What the screenshot shows besides: stalled sessions, and their count before a reload to
    # QUICKACK. The cases above leave both; run alone (`test_admin.py injected_html_is_shown_as_text`)
    # this case makes them itself.
    if {l["name"]: l for l in state()["listeners"]}["kernel"]["policy_changed_unix_ms"] is None:
        stalls_before_a_reload_to_quickack_are_told_apart()
    vless_session_with_sni(D.port("kernel"), SNI_SCRIPT)
    vless_session_with_sni(D.port("quick"), SNI_IMG)
    t = probe_ticket(TP)
    body = json.dumps({"v": 1, "run": t["run"], "new": 1, "reuse": 0, "verdict": "no_stall",
                       "samples": [{"seq": 1, "path": "target", "mode": "new", "ok": True, "ms": 1.5,
                                    "route": "direct"}]}).encode()
    with tcp_connect(TP) as sock:
        sock.sendall(http_request("POST", "/probe/result", headers={"User-Agent": UA,
                                                                    "X-Vlessbench-Probe-Token": t["token"]},
                                  body=body))
        r = plain_stream(sock).read_response()
    check(r.status == 200, r)
    # The two sessions reach the state when the daemon has closed them, which can come after our
    # side closed (1 run in 10 under TSan read the state first): wait for them, bounded.
    deadline = time.monotonic() + 10
    while True:
        s = state()
        seen = ({x["sni"] for x in s["sessions"]} >= {SNI_SCRIPT, SNI_IMG} and
                any(p["user_agent"] == UA for p in s["probes"]))
        if seen or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    check(any(x["sni"] == SNI_SCRIPT for x in s["sessions"]) and any(x["sni"] == SNI_IMG for x in s["sessions"]),
          [x["sni"] for x in s["sessions"]][:5])
    check(any(p["user_agent"] == UA for p in s["probes"]), s["probes"])
    check(all(x["ja4"].startswith("t13") for x in s["sessions"]), s["sessions"])  # the ja4 column
    r = admin_get(f"/?token={TOKEN}")
    check("script-src 'sha256-" in r.headers.get("content-security-policy", ""), r.headers)
    shot = Path(os.environ.get("VLESSBENCH_DASHBOARD_SCREENSHOT") or tempdir() / "dashboard.png")
    found = open_dashboard(f"http://{LAN}:{ADMIN_PORT}/?token={TOKEN}", shot)
    print(f"  dashboard DOM: {found}")
    check(found["loaded"] == "1", found)
    check(found["pwned"] == 0 and found["scripts"] == 1 and found["imgs"] == 0, found)
    check(all(found["literal"]), found)
    check(found["sessions"] > 1 and found["stall_rows"] >= 1, found)
    check(shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000, shot)
    # Probe runs and reloads above the 200-row sessions table; bucket labels that fit their bars.
    check(found["order"].index("Probe runs") < found["order"].index("Recent sessions") and
          found["order"].index("Reloads") < found["order"].index("Recent sessions"), found["order"])
    check(found["axis"] and all(fits for _label, fits in found["axis"][0]), found["axis"])
    check(found["axis"][0][-1][0] == ">5s", found["axis"])
    # The stalls before the reload to QUICKACK are told apart (stalls_before_a_reload_...).
    check(found["stall_text"] and re.search(r"[1-9]\d* before reload at [^,]+, 0 since", found["stall_text"][0]),
          found["stall_text"])
    # At 1280 px the sessions table fits without sideways scrolling; at 390 px (a phone) the page
    # does not scroll sideways, the listeners table scrolls inside its own box.
    check(found["sessions_overflow"] <= 0, f"sessions table {found['sessions_overflow']} px too wide at {found['width']}")
    wide = Path(os.environ.get("VLESSBENCH_DASHBOARD_SCREENSHOT_1280") or tempdir() / "dashboard-1280.png")
    found = open_dashboard(f"http://{LAN}:{ADMIN_PORT}/?token={TOKEN}", wide, "1280,900")
    check(found["sessions_overflow"] <= 0, f"sessions table {found['sessions_overflow']} px too wide at 1280")
    # The probe runs table too, with a long hostile user agent in it (cut, its full text in the row's title).
    check(found["probes_overflow"] <= 0, f"probe runs table {found['probes_overflow']} px too wide at 1280")
    phone = Path(os.environ.get("VLESSBENCH_DASHBOARD_SCREENSHOT_PHONE") or tempdir() / "dashboard-phone.png")
    found = open_dashboard(f"http://{LAN}:{ADMIN_PORT}/?token={TOKEN}", phone, "390,844")
    print(f"  at 390 px: page overflow {found['page_overflow']}, listeners box right edge "
          f"{found['listeners_box_overflow']:+.0f} px past the viewport")
    check(found["page_overflow"] <= 0 and found["listeners_box_overflow"] <= 0, found)
    # The stalls column is on screen at 390 px (it was the 8th, past the right edge), and a stall
    # minority in a phase histogram is a bar one can see, counted beside the histogram's title.
    check(found["stalls_right"] <= 0, f"stalls column {found['stalls_right']:+.0f} px past the viewport at 390")
    check(found["hot_bars"] and min(found["hot_bars"]) >= 4, found["hot_bars"])
    check(any(re.fullmatch(r" · [1-9]\d* stalled \(≥ 30 ms\)", f) for f in found["hist_flags"]), found["hist_flags"])


@suite.test
def reload_moves_the_admin_listener_and_changes_the_token():
    global ADMIN_PORT, TOKEN
    old_port, old_token = ADMIN_PORT, TOKEN
    cfg = copy.deepcopy(D.cfg)
    cfg["admin"] = {"listen": f"{LAN}:{free_port(LAN)}", "token": "new-" + secrets.token_hex(12)}
    ev = D.reload(cfg)
    check(ev["ok"], ev)
    ADMIN_PORT = int(cfg["admin"]["listen"].rsplit(":", 1)[1])
    TOKEN = cfg["admin"]["token"]
    check(authed("/metrics").status == 200)
    check(admin_get("/metrics", {"Authorization": f"Bearer {old_token}"}).status == 401)
    try:
        tcp_connect(old_port, LAN, timeout=1).close()
        check(False, "the old admin port still accepts")
    except OSError:
        pass
    check(state()["generation"] == ev["generation"])
    # A port in use fails the reload; the admin listener stays where it was.
    with socket.socket() as busy:
        busy.bind((LAN, 0))
        busy.listen()
        clash = copy.deepcopy(cfg)
        clash["admin"]["listen"] = f"{LAN}:{busy.getsockname()[1]}"
        ev2 = D.reload(clash)
        check(not ev2["ok"] and "admin listener cannot listen" in ev2["error"], ev2)
    check(authed("/metrics").status == 200)
    D.write_config(cfg)
    cfg = copy.deepcopy(cfg)
    cfg["admin"] = {"enabled": False}
    check(D.reload(cfg)["ok"])
    try:
        tcp_connect(ADMIN_PORT, LAN, timeout=1).close()
        check(False, "admin still accepts with enabled = false")
    except OSError:
        pass


@suite.test
def no_sanitizer_report():
    # Against the TSan build (VLESSBENCH_BIN=build-tsan/bin, VLESSBENCH_TEST_THREADS=2) sessions close
    # on worker threads while the admin listener reads the hub on the main one.
    check(D.stderr(), "no stderr to look at")
    report = sanitizer_report(D.stderr())
    check(report is None, report)


if __name__ == "__main__":
    try:
        suite.run()
    finally:
        D.stop()
