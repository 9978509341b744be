// Throw-away TLS material for the agent and peer-probe tests, made with the openssl command in a
// temp dir that is removed afterwards: one CA signs the peer certificate (valid for 127.0.0.1, for
// both server and client use, as etcd's peer certificates are); another CA signs a stranger's.
#pragma once

#include <doctest/doctest.h>
#include <stdlib.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "quorate/tls.h"

namespace quorate {
namespace {

class TestCerts {
 public:
  // Skips (with a message) when there is no openssl command: check ok() first.
  TestCerts() {
    if (std::system("command -v openssl >/dev/null 2>&1") != 0) {
      MESSAGE("openssl not on PATH: TLS checks skipped");
      return;
    }
    std::string tmpl = (std::filesystem::temp_directory_path() / "quorate-certs-XXXXXX").string();
    REQUIRE(mkdtemp(tmpl.data()) != nullptr);
    dir_ = tmpl;
    std::ofstream(dir_ + "/ext") << "subjectAltName=IP:127.0.0.1,DNS:localhost\n"
                                    "extendedKeyUsage=serverAuth,clientAuth\n";
    std::string script = "set -e; cd '" + dir_ + "'\n" + R"(
      key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1"; }
      ca() { key $1.key; openssl req -x509 -new -key $1.key -out $1.crt -days 2 -subj /CN=$1; }
      signed() {
        key $1.key; openssl req -new -key $1.key -out $1.csr -subj /CN=$1
        openssl x509 -req -in $1.csr -CA $2.crt -CAkey $2.key -CAcreateserial -out $1.crt -days 2 -extfile ext
      }
      ca ca; ca other-ca; signed peer ca; signed stranger other-ca
    )";
    int rc = std::system(("(" + script + ") >'" + dir_ + "/openssl.log' 2>&1").c_str());
    REQUIRE_MESSAGE(rc == 0, ("openssl failed, see " + dir_ + "/openssl.log"));
  }
  ~TestCerts() {
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }

  bool ok() const { return !dir_.empty(); }
  std::string Path(const std::string& name) const { return dir_ + "/" + name; }
  // The peer certificate, trusting our CA.
  TlsFiles Peer(bool client_cert_auth = true) const {
    return {Path("peer.crt"), Path("peer.key"), Path("ca.crt"), client_cert_auth};
  }

 private:
  std::string dir_;
};

}  // namespace
}  // namespace quorate
