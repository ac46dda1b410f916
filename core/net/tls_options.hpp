#pragma once
// The daemon's certificate and TLS settings ([tls]): a plain value the config reads and
// core/net/tls.hpp's server context is made from.
#include <string>
#include <vector>

namespace vlessbench {

struct tls_config {
  std::string cert;  // PEM path; empty together with key = in-memory self-signed certificate
  std::string key;
  // Create a self-signed certificate at cert/key on start when they do not exist yet (SANs: names,
  // localhost, the host name and the machine's addresses); kept across restarts.
  bool generate = false;
  std::vector<std::string> names;
  // TLS 1.3 session tickets sent right after the client's Finished carry the ACK for it and so
  // hide the Nagle/delayed-ACK stall this tool exists to show; off by default (see docs).
  bool session_tickets = false;
  std::string min_version = "1.2";  // "1.2" or "1.3"
};

}  // namespace vlessbench
