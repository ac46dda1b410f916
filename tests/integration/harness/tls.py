"""The test certificate: one self-signed ECDSA P-256 certificate for localhost and 127.0.0.1 that
every TLS server here (ours, v2ray, Xray, sing-box, HAProxy) is given, made by the openssl CLI."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path


def make_cert(directory: Path) -> tuple[Path, Path]:
    """(cert.pem, key.pem) in directory, valid two days."""
    cert, key = directory / "cert.pem", directory / "key.pem"
    openssl = shutil.which("openssl")
    if not openssl:
        raise RuntimeError("openssl CLI not found")
    subprocess.run([openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                    "-nodes", "-keyout", str(key), "-out", str(cert), "-days", "2", "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
                   check=True, capture_output=True, timeout=30)
    return cert, key


def combined_pem(cert: Path, key: Path, path: Path) -> Path:
    """cert and key in one PEM file at path (HAProxy's `crt`); returns path."""
    path.write_text(cert.read_text() + key.read_text())
    return path
