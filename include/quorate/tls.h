// TLS material as etcd names it: a certificate and key to present, and a CA bundle to trust.
// One set for the client side (etcd API, --cert-file...) and one for the peer side (--peer-*).
#pragma once

#include <string>

namespace quorate {

struct TlsFiles {
  std::string cert_file;
  std::string key_file;
  std::string trusted_ca_file;
  bool client_cert_auth = false;

  bool enabled() const { return !cert_file.empty() || !trusted_ca_file.empty(); }
};

}  // namespace quorate
