"""The runner built against OpenSSL 3 (vlessbench-openssl, what a macOS build links) measures the
same paths as the BoringSSL one: direct and the built-in VLESS+TLS client, routes verified."""
import json
import subprocess

from harness import BIN, LOOPBACK, Daemon, Suite, check, require_binary, tempdir, verify_log

suite = Suite("test_runner_openssl")
require_binary()
RUNNER = BIN / "vlessbench-openssl"
D = Daemon()


@suite.test
def openssl_runner_direct_and_vless_verified():
    check(RUNNER.exists(), f"{RUNNER} missing: configure with -DVLESSBENCH_RUNNER_OPENSSL=ON")
    out = tempdir("vlessbench-run-")
    link = (f"vless://{D.uuid}@{LOOPBACK}:{D.port('quick')}?encryption=none&security=tls&sni=localhost"
            f"&allowInsecure=1&type=tcp#quick")
    r = subprocess.run([str(RUNNER), "run", "--target", f"http://{LOOPBACK}:{D.target_port}/",
                        "--path", f"ctl={link}", "--new", "6", "--reuse", "6", "--warmup", "1",
                        "--out", str(out), "--seed", "3"], capture_output=True, text=True, timeout=120)
    check(r.returncode == 0, f"rc={r.returncode}\n{r.stdout}\n{r.stderr}")
    summary = json.loads((out / "summary.json").read_text())
    text = json.dumps(summary)
    check("OpenSSL 3" in text, "summary does not name OpenSSL 3 as the TLS library")
    verify_log(RUNNER, D.access, out)


suite.run()
