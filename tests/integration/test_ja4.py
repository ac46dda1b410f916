"""The JA4 client fingerprint (core/ja4.hpp, docs/sessions.md "Client fingerprint") of real clients:
the runner's built-in client (BoringSSL, and its OpenSSL 3 build when configured), python's ssl
(TLS 1.3 and 1.2), the real v2ray 4.34 client, curl, and Debian's headless chromium (skipped when
it is missing). Each one's sessions carry a well-formed ja4 in `vless.session` (or `vless.reject`
for curl and chromium, which speak HTTP, not VLESS, after TLS; and `http.request` on the HTTPS
target); the same client gives the same ja4 twice; different clients give different ones; the
VLESS client's ja4 is in the target's Server-Timing. Prints the table docs/sessions.md records.
"""
import json
import os
import re
import signal
import ssl
import shutil
import subprocess

from harness import (BIN, LOOPBACK, Daemon, Suite, TlsClient, V2ray, check, client_tls_context, curl,
                     curl_headers, free_port, http_request, read_vless_response_header, require_binary, spawn,
                     stop_process, tempdir, v2ray_client_config, vless_header)

suite = Suite("test_ja4")
require_binary()
JA4 = re.compile(r"^t1[23][di]\d{4}[0-9a-z]{2}_[0-9a-f]{12}_[0-9a-f]{12}$")
UUID = "0b7e4a52-6c1d-4f3e-9a10-aabbccddeeff"
D = Daemon({
    "users": [{"name": "tester", "uuid": UUID}],
    "vless": [{"name": "kernel", "listen": f"{LOOPBACK}:{free_port()}"}],
    "target": [{"name": "http", "listen": f"{LOOPBACK}:{free_port()}"},
               {"name": "https", "listen": f"{LOOPBACK}:{free_port()}", "tls": True}],
}, limits={"header_timeout_ms": 2000})
VP, TP, HTTPS = D.port("kernel"), D.port("http"), D.port("https")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
measured: dict[str, str] = {}  # client kind -> its ja4


def well_formed(ja4: str, what) -> str:
    check(isinstance(ja4, str) and JA4.match(ja4), (ja4, what))
    return ja4


def same_twice(kind: str, first: str, second: str) -> None:
    well_formed(first, kind)
    check(first == second, f"{kind}: {first} then {second}")
    measured[kind] = first


def session_ja4s(mark: int, count: int) -> list[str]:
    """The ja4 of the first `count` vless.session lines after mark (waiting for them)."""
    D.wait_event("vless.session", since=mark, timeout=10, pred=lambda _: len(D.events("vless.session", since=mark)) >= count)
    return [e.get("ja4") for e in D.events("vless.session", since=mark)[:count]]


def runner(binary, kind: str) -> None:
    link = (f"vless://{UUID}@{LOOPBACK}:{VP}?encryption=none&security=tls&sni=localhost"
            f"&allowInsecure=1&type=tcp#ja4")
    seen = []
    for run in range(2):
        mark = D.mark()
        out = tempdir("vlessbench-run-")
        r = subprocess.run([str(binary), "run", "--target", f"http://{LOOPBACK}:{TP}/", "--path", f"v={link}",
                            "--new", "2", "--reuse", "1", "--warmup", "0", "--out", str(out), "--seed", str(run + 1)],
                           capture_output=True, text=True, timeout=120)
        check(r.returncode == 0, f"rc={r.returncode}\n{r.stdout}\n{r.stderr}")
        ja4s = session_ja4s(mark, 2)
        check(len(set(ja4s)) == 1, ja4s)
        seen.append(ja4s[0])
    same_twice(kind, *seen)


@suite.test
def runner_builtin_client():
    runner(BIN / "vlessbench", "runner (BoringSSL)")


@suite.test
def runner_openssl_build():
    binary = BIN / "vlessbench-openssl"
    if not binary.exists():
        print("  vlessbench-openssl not built (-DVLESSBENCH_RUNNER_OPENSSL=ON): skipped")
        return
    runner(binary, "runner (OpenSSL 3)")


def python_session(tls13: bool) -> tuple[str, dict]:
    mark = D.mark()
    with TlsClient(VP, context=client_tls_context(tls13)) as c:
        c.handshake()
        c.send(vless_header(UUID, TP) + http_request("GET", "/", headers={"Connection": "close"}))
        read_vless_response_header(c.stream)
        resp = c.stream.read_response()
    return session_ja4s(mark, 1)[0], resp.headers


@suite.test
def python_ssl_tls13_and_tls12():
    first, headers = python_session(True)
    second, _ = python_session(True)
    same_twice("python ssl (TLS 1.3)", first, second)
    check(first.startswith("t13d"), first)  # SNI "localhost"
    # The VLESS client's ja4 is the target's Server-Timing entry too.
    timing = headers.get("server-timing", headers.get("Server-Timing", ""))
    check(f'ja4;desc="{first}"' in timing, timing)
    tls12, _ = python_session(False)
    well_formed(tls12, "python ssl TLS 1.2")
    # Without a TLS 1.3 minimum python offers 1.3 too: its highest supported version says 13.
    check(tls12.startswith("t13"), tls12)
    ctx = client_tls_context(False)
    ctx.maximum_version = ssl.TLSVersion.TLSv1_2
    mark = D.mark()
    with TlsClient(VP, context=ctx) as c:
        c.handshake()
        c.send(vless_header(UUID, TP) + http_request("GET", "/", headers={"Connection": "close"}))
        read_vless_response_header(c.stream)
        c.stream.read_response()
    only12 = session_ja4s(mark, 1)[0]
    well_formed(only12, "python ssl TLS 1.2 only")
    check(only12.startswith("t12d"), only12)
    measured["python ssl (TLS 1.2 only)"] = only12


@suite.test
def v2ray_client():
    port = free_port()
    seen = []
    with V2ray(v2ray_client_config(port, VP, UUID), port) as v:
        for i in range(2):
            mark = D.mark()
            r = curl(["-i", "-x", f"http://127.0.0.1:{port}", "-H", "Connection: close",
                      f"http://127.0.0.1:{TP}/generate_204"])
            check(r.returncode == 0, (r.returncode, r.stderr, v.output()[-2000:]))
            ja4 = session_ja4s(mark, 1)[0]
            timing = curl_headers(r.stdout).get("server-timing", "")
            check(f'ja4;desc="{ja4}"' in timing, (timing, ja4))
            seen.append(ja4)
    same_twice("v2ray 4.34", *seen)


def reject_ja4(mark: int) -> str:
    e = D.wait_event("vless.reject", since=mark, timeout=10, pred=lambda x: "ja4" in x)
    check(e["phase"] == "header", e)  # TLS done, then HTTP where a VLESS header belongs
    return e["ja4"]


@suite.test
def curl_to_the_vless_port_and_the_https_target():
    seen = []
    for _ in range(2):
        mark = D.mark()
        curl(["-k", "-o", "/dev/null", f"https://localhost:{VP}/"], timeout=5)
        seen.append(reject_ja4(mark))
    same_twice("curl", *seen)
    # The HTTPS target's hook: the same client, the same ClientHello, the same fingerprint.
    mark = D.mark()
    r = curl(["-k", "-o", "/dev/null", "-w", "%{http_code}", f"https://localhost:{HTTPS}/generate_204"])
    check(r.stdout == b"204", r.stdout)
    e = D.wait_event("http.request", since=mark, listener="https")
    check(e.get("ja4") == seen[0], (e, seen[0]))
    check(e["route"] == "direct", e)


def chromium_fetch(url: str) -> None:
    profile = tempdir("vlessbench-chromium-")
    argv = [CHROMIUM, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-extensions",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            "--no-default-browser-check", "--disable-breakpad", "--disable-crash-reporter",
            "--ignore-certificate-errors", f"--user-data-dir={profile}", "--dump-dom", url]
    p = spawn(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        p.wait(timeout=60)
    except subprocess.TimeoutExpired:
        pass
    finally:
        stop_process(p, timeout=5)
        try:  # its helpers, in the session (and process group) it was started in
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


@suite.test
def chromium_headless():
    if not CHROMIUM:
        print("  chromium not installed: skipped")
        return
    seen = []
    for _ in range(2):
        mark = D.mark()
        chromium_fetch(f"https://localhost:{HTTPS}/")
        e = D.wait_event("http.request", since=mark, listener="https", path="/", timeout=10)
        seen.append(e.get("ja4"))
    same_twice("chromium", *seen)
    # The same browser at the VLESS port: a reject that names the same fingerprint.
    mark = D.mark()
    chromium_fetch(f"https://localhost:{VP}/")
    check(reject_ja4(mark) == seen[0], seen[0])


@suite.test
def different_clients_differ():
    kinds = [k for k in ("runner (BoringSSL)", "python ssl (TLS 1.3)", "v2ray 4.34", "curl", "chromium")
             if k in measured]
    check(len(kinds) >= 4, measured)
    values = [measured[k] for k in kinds]
    check(len(set(values)) == len(values), json.dumps(measured, indent=1))
    print("  measured:")
    for kind, ja4 in measured.items():
        print(f"    {kind:28} {ja4}")


if __name__ == "__main__":
    try:
        suite.run()
    finally:
        D.stop()
