#!/usr/bin/env python3
"""The REALITY test vector of test_reality_auth.cpp, made with python's cryptography (independent of
BoringSSL): a hand-built ClientHello whose session id is sealed as Xray's client seals it. Prints the
message, the AuthKey and the server's public key."""
import struct, hashlib, hmac
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
import base64
server_priv = bytes(range(1,33))
client_priv = bytes(range(101,133))
sp = X25519PrivateKey.from_private_bytes(server_priv)
cp = X25519PrivateKey.from_private_bytes(client_priv)
raw = serialization.Encoding.Raw; rawpub = serialization.PublicFormat.Raw
server_pub = sp.public_key().public_bytes(raw, rawpub)
client_pub = cp.public_key().public_bytes(raw, rawpub)
random = bytes(range(200,232)) if False else bytes((i*7+3)&0xff for i in range(32))
def ext(t, body): return struct.pack(">HH", t, len(body)) + body
name = b"reality.vlessbench.test"
sni = ext(0, struct.pack(">H", len(name)+3) + b"\x00" + struct.pack(">H", len(name)) + name)
groups = ext(0x0a, struct.pack(">H", 4) + struct.pack(">HH", 0x001d, 0x0017))
ks_entry = struct.pack(">HH", 0x001d, 32) + client_pub
ks = ext(0x33, struct.pack(">H", len(ks_entry)) + ks_entry)
sv = ext(0x2b, b"\x02\x03\x04")
sig = ext(0x0d, struct.pack(">H", 4) + struct.pack(">HH", 0x0403, 0x0804))
exts = sni + groups + ks + sv + sig
body_zero = b"\x03\x03" + random + b"\x20" + b"\x00"*32 + struct.pack(">H", 2) + b"\x13\x01" + b"\x01\x00" + struct.pack(">H", len(exts)) + exts
msg_zero = b"\x01" + len(body_zero).to_bytes(3, "big") + body_zero
shared = cp.exchange(X25519PublicKey.from_public_bytes(server_pub))
auth = HKDF(algorithm=hashes.SHA256(), length=32, salt=random[:20], info=b"REALITY").derive(shared)
plain = bytes([25, 9, 11, 0]) + struct.pack(">I", 1764900000) + bytes.fromhex("0123abcd00000000")
sealed = AESGCM(auth).encrypt(random[20:], plain, msg_zero)
assert len(sealed) == 32
msg = msg_zero[:39] + sealed + msg_zero[71:]
print("server_priv", server_priv.hex())
print("server_pub_b64", base64.urlsafe_b64encode(server_pub).decode().rstrip("="))
print("msg", msg.hex())
print("auth", auth.hex())
ed_pub = bytes(range(32))
print("hmac_of_0..31", hmac.new(auth, ed_pub, hashlib.sha512).hexdigest())
