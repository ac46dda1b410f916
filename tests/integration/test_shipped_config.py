"""The shipped config/vlessbenchd.toml as a new user meets it (issue 30 items 3, 8, 9): its
placeholder UUID refused off loopback by --check, start and reload; the installer's copy serving on
a non-loopback address; --check judging the certificate files start will open, each message saying
what to do; docs/deploy.md §5's sed flipping only the VLESS listener it names. Runs in a network
namespace of its own, the daemon's VM address 10.77.30.2 on its lo."""
import re
import signal
import socket
import ssl
import subprocess
import tomllib

from harness import (REPO, Daemon, Suite, TlsClient, check, http_request, new_uuid, port_open, read_vless_response_header,
                     require_binary, run_daemon, run_in_own_netns, tempdir, toml_text, vless_header)

run_in_own_netns(addresses=("10.77.30.2",))
suite = Suite("test_shipped_config")
require_binary()

VM = "10.77.30.2"
SHIPPED = REPO / "config" / "vlessbenchd.toml"
PLACEHOLDER = "00000000-0000-4000-8000-000000000000"


def shipped(uuid: str | None = None, state=None) -> dict:
    """The shipped config with its paths moved into a temporary folder (as a user copying it does),
    optionally with the user UUID the installer would write."""
    cfg = tomllib.loads(SHIPPED.read_text())
    check(cfg["users"][0]["uuid"] == PLACEHOLDER, cfg["users"])
    state = state or tempdir()
    cfg["tls"]["cert"] = str(state / "cert.pem")
    cfg["tls"]["key"] = str(state / "key.pem")
    cfg["log"].pop("access")  # Daemon's own file
    if uuid:
        cfg["users"][0]["uuid"] = uuid
    return cfg


def check_file(cfg: dict) -> subprocess.CompletedProcess:
    d = Daemon(cfg, start=False)
    return run_daemon(["--check", "--config", d.config_path])


def start_file(cfg: dict) -> subprocess.CompletedProcess:
    d = Daemon(cfg, start=False)
    return run_daemon(["--config", d.config_path], timeout=15)


def peer_certificate(port: int, server_name: str) -> bytes:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    with socket.create_connection((VM, port), timeout=5) as raw, ctx.wrap_socket(raw, server_hostname=server_name) as s:
        return s.getpeercert(binary_form=True)


def get_via_vless(d: Daemon, listener: str, uuid: str):
    with TlsClient(d.port(listener), host=VM) as c:
        c.handshake()
        c.send(vless_header(uuid, d.port("http"), VM) + http_request("GET", "/", headers={"Connection": "close"}))
        read_vless_response_header(c.stream)
        return c.stream.read_response()


@suite.test
def placeholder_uuid_refused_off_loopback():
    # On main: --check said "ok" and the daemon served the published UUID on 0.0.0.0.
    cfg = shipped()
    for r in (check_file(cfg), start_file(cfg)):
        check(r.returncode == 1 and r.stdout.strip() != "ok", (r.returncode, r.stdout, r.stderr))
        check(f'users[0].uuid: "{PLACEHOLDER}": a UUID published' in r.stderr, r.stderr)
        check("listener default-ack listens on 0.0.0.0:8443" in r.stderr, r.stderr)
        check("`vlessbenchd uuid`" in r.stderr and "/proc/sys/kernel/random/uuid" in r.stderr, r.stderr)
        check("Debian package" in r.stderr, r.stderr)
    check(not port_open(8443, VM), "a listener was left open")
    # What the message says to run does make a UUID, and a config with it passes.
    made = run_daemon(["uuid"])
    check(made.returncode == 0 and re.fullmatch(r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}\n",
                                                  made.stdout), (made.returncode, made.stdout))
    r = check_file(shipped(made.stdout.strip()))
    check(r.returncode == 0 and r.stdout.strip() == "ok", (r.returncode, r.stdout, r.stderr))


@suite.test
def placeholder_uuid_kept_on_loopback_for_the_quickstart():
    cfg = shipped()
    for table in ("vless", "target", "banner", "udp_target", "dns"):
        for entry in cfg.get(table, []):
            entry["listen"] = entry["listen"].replace("0.0.0.0", "127.0.0.1")
    r = check_file(cfg)
    check(r.returncode == 0 and r.stdout.strip() == "ok", (r.returncode, r.stdout, r.stderr))


@suite.test
def installed_config_serves_off_loopback_and_refuses_a_reload_to_the_placeholder():
    uuid = new_uuid()  # what postinst and cmake --install put in place of the placeholder
    with Daemon(shipped(uuid)) as d:
        resp = get_via_vless(d, "default-ack", uuid)
        check(resp.status == 200 and resp.headers["x-vlessbench-route"].startswith("vless session="), resp)
        # REALITY + Vision on 8448: its key made at this first start, in the links; a prober's
        # ClientHello gets the HTTPS target's certificate.
        links = run_daemon(["links", "--config", d.config_path, "--host", VM, "--no-qr"])
        check(links.returncode == 0 and re.search(rf"vless://{uuid}@{VM}:8448\?\S*security=reality\S*pbk=[\w-]{{43}}",
                                                  links.stdout), (links.returncode, links.stderr, links.stdout[-600:]))
        check(peer_certificate(8448, "probe.example") == peer_certificate(8081, "localhost"), "no fallback to 8081")
        ev = d.reload(shipped(PLACEHOLDER, state=tempdir()))
        check(ev["ok"] is False and "a UUID published" in ev["error"], ev)
        # The old config, own UUID, still serves.
        resp = get_via_vless(d, "quickack", uuid)
        check(resp.status == 200, resp)


@suite.test
def check_fails_on_a_missing_cert_folder():
    # On main: --check said "ok", the start failed with "…/key.pem: No such file or directory".
    cfg = shipped(new_uuid())
    folder = tempdir() / "not-made"
    cfg["tls"]["cert"], cfg["tls"]["key"] = str(folder / "cert.pem"), str(folder / "key.pem")
    for r in (check_file(cfg), start_file(cfg)):
        check(r.returncode == 1 and r.stdout.strip() != "ok", (r.returncode, r.stdout, r.stderr))
        check(f"tls.cert: \"{folder}/cert.pem\": the folder {folder} does not exist, so tls.generate = true cannot "
              f"write there: create it (mkdir -p {folder}" in r.stderr, r.stderr)
    check(not folder.exists(), "the folder was made")


@suite.test
def check_names_what_to_do_with_a_missing_or_non_pem_cert():
    cfg = shipped(new_uuid())
    cfg["tls"]["generate"] = False
    r = check_file(cfg)
    check(r.returncode == 1, (r.returncode, r.stdout, r.stderr))
    check("no such file: set tls.generate = true" in r.stderr and "OPENSSL_internal" not in r.stderr, r.stderr)
    # A DER file where PEM belongs: on main BoringSSL's "NO_START_LINE".
    cert = cfg["tls"]["cert"]
    with open(cert, "wb") as f:
        f.write(bytes([0x30, 0x82, 0x01, 0x0A, 0x02, 0x82]))
    with open(cfg["tls"]["key"], "w") as f:
        f.write("")
    for r in (check_file(cfg), start_file(cfg)):
        check(r.returncode == 1, (r.returncode, r.stdout, r.stderr))
        check(f'not PEM (no "-----BEGIN CERTIFICATE-----" line): if it is DER, convert it (openssl x509 -inform der '
              f"-in {cert}" in r.stderr and "NO_START_LINE" not in r.stderr, r.stderr)


def deploy_sed() -> str:
    text = (REPO / "docs" / "deploy.md").read_text()
    section = text.split("## 5. Toggle the ACK mode", 1)[1].split("\n## ", 1)[0]
    lines = [l for l in section.splitlines() if l.startswith("sed -i ")]
    check(len(lines) == 1, lines)
    return lines[0]


def policies(cfg: dict) -> dict:
    return {(table, e["name"], key): e[key].get("quickack")
            for table in ("vless", "target", "banner") for e in cfg.get(table, []) for key in ("tcp", "upstream_tcp")
            if key in e}


@suite.test
def deploy_sed_flips_only_the_vless_listener():
    # On main the sed also flipped the http, https and banner targets (four listeners).
    folder = tempdir()
    installed = folder / "vlessbenchd.toml"
    installed.write_text(SHIPPED.read_text().replace(PLACEHOLDER, new_uuid())
                         .replace("/var/lib/vlessbench", str(folder)).replace("/var/log/vlessbench", str(folder)))
    command = deploy_sed().replace("/etc/vlessbench/vlessbenchd.toml", str(installed))
    before = policies(tomllib.loads(installed.read_text()))
    r = subprocess.run(["sh", "-c", command], capture_output=True, text=True, timeout=10)
    check(r.returncode == 0, r.stderr)
    after = policies(tomllib.loads(installed.read_text()))
    changed = {k for k in before if before[k] != after.get(k)}
    check(changed == {("vless", "default-ack", "tcp"), ("vless", "default-ack", "upstream_tcp")}, changed)
    check(all(after[k] == "on" for k in changed), after)
    r = run_daemon(["--check", "--config", installed])
    check(r.returncode == 0, f"the edited file does not pass --check: {r.stderr}")


if __name__ == "__main__":
    suite.run()
