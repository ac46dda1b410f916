"""The integration tests' harness, shared with the bench scripts (bench/run.py and the others):
the real vlessbenchd, v2ray and the other cores, raw clients, all on loopback.

Python 3 standard library only. Every process started here is killed at exit (atexit, and the
kernel's parent-death signal if this interpreter is killed outright); every wait is bounded in
time; everything listens and connects on 127.0.0.1 / ::1 only.

One package, one module per concern, one implementation of each helper (issue 24 item 6):

  env        where the repository and the binaries under test are, what ctest set (SANITIZED, THREADS)
  checks     check(), Skip, skip_file()
  processes  spawn() and the one process registry the cleanup walks; temp folders; /proc figures;
             exit statuses and sanitizer reports
  ports      free_port(), wait_ports(), the kernel's view of a port's connections (`ss`)
  config     the daemon's TOML from a dict; its access log read back
  netns      a network or mount namespace of the test's own
  daemon     Daemon (config, ports file, log, reload, a checked stop), check_daemons(), verify_log()
  frames     VLESS, WebSocket, Mux.Cool, UDP and DNS bytes, built and parsed; routes
  clients    Stream, TlsClient, HTTP, SOCKS5, an echo server, curl
  tls        the test certificate
  v2ray      v2ray as a process; its client and server config pieces
  cores      where Xray, sing-box, mihomo, HAProxy are, how each runs and checks a config, and the
             server configs the bench gives them (`from harness import cores`)
  peers      a core as a process (its config checked by its own checker), `vlessbenchd links`
             parsing, SOCKS5 UDP through a core (`from harness import peers`)
  suite      Suite, the tiny runner each test file ends with, and the exit hook

A test does `import harness as h` (or `from harness import ...`): the names below are the package's
whole surface. The tests find the package as the folder beside them (Python puts a script's folder
first on sys.path); a bench script adds tests/integration to sys.path once, before importing it.
"""
from __future__ import annotations

from .env import (BIN, CLIENT_BIN, CURL, DAEMON, HERE, LOOPBACK, REPO, SANITIZED, THREADS, V2RAY)
from .checks import (check, median_ms, Skip, skip_file)
from .processes import (cpu_seconds, describe_rc, forget, handle_signals, keep_tmp, load_json, rss_kib,
                        SANITIZER_MARKERS, sanitizer_report, set_pdeathsig, spawn, Started, stop_all, stop_process,
                        tempdir, TSAN_EXITCODE)
from .ports import (ANY_PORT, free_port, LOW_PORTS, port_open, PROTOCOLS, tcp_connections, wait_ports,
                    wait_sender_stalled, wait_server_closed, wait_server_read, was_given)
from .config import (new_uuid, policy, read_events, toml_text)
from .netns import (NETNS_ENV, private_hosts_prefix, run_in_own_netns)
from .daemon import (check_daemons, Daemon, ONE_ADDRESS_LOAD, require_binary, run_daemon, verify_log)
from .frames import (addons_flow, ATYP_DOMAIN, ATYP_V4, ATYP_V6, dns_query, echo_datagram, parse_route,
                     read_mux_frame, read_udp_frame, read_vless_response_header, read_ws_frame, route_session, UDP_ECHO_MARKER,
                     UDP_ECHO_ROOM, udp_echo_trailer, udp_frame, vless_header, ws_frame)
from .clients import (client_tls_context, curl, curl_headers, EchoServer, http_request, plain_stream, probe_ticket, recv_exact, Response, socks5_connect,
                      socks5_udp_associate, socks5_udp_header, Stream, tcp_connect, TlsClient, vless_get)
from .tls import (combined_pem, make_cert)
from .v2ray import (V2ray, v2ray_client_config, v2ray_http_inbound, v2ray_server_config, v2ray_socks_config,
                    v2ray_socks_inbound, v2ray_tcp_inbounds, v2ray_vless_outbound)
from .suite import Suite
