// The certificate module (src/tls/cert.h) against a CA made by the openssl command: leaves issued for
// IPs and names, checked against URLs, written in place, and read back from a live TLS handshake.
#include <doctest/doctest.h>
#include <httplib.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "quorate/fs.h"
#include "../support/test_certs.h"
#include "tls/cert.h"

namespace quorate {
namespace {

using std::chrono::hours;
using std::chrono::seconds;

struct CaRig {
  TestCerts certs;
  CaKey ca;
  WallTime now = std::chrono::system_clock::now();

  bool Load() {
    if (!certs.ok()) return false;
    auto loaded = LoadCa(certs.Path("ca.crt"), certs.Path("ca.key"));
    REQUIRE_MESSAGE(loaded.ok(), loaded.status().message());
    ca = *loaded;
    return true;
  }
  Leaf Issue(std::vector<std::string> hosts, seconds lifetime = hours(24), std::string key = "") {
    auto leaf = IssueLeaf(ca, {"n1", std::move(hosts), lifetime, now, std::move(key)});
    REQUIRE_MESSAGE(leaf.ok(), leaf.status().message());
    return *leaf;
  }
};

TEST_CASE("tls: a CA is loaded only with its own key, and only when it is a CA") {
  CaRig rig;
  if (!rig.Load()) return;
  CHECK(rig.ca.info.is_ca);
  CHECK(rig.ca.info.subject == "CN=ca");

  auto wrong_key = LoadCa(rig.certs.Path("ca.crt"), rig.certs.Path("other-ca.key"));
  REQUIRE_FALSE(wrong_key.ok());
  CHECK(wrong_key.status().IsInvalidArgument());
  CHECK(wrong_key.status().message().find("is not the key of the CA certificate") != std::string::npos);

  auto not_ca = LoadCa(rig.certs.Path("peer.crt"), rig.certs.Path("peer.key"));
  REQUIRE_FALSE(not_ca.ok());
  CHECK(not_ca.status().message().find("is not a CA") != std::string::npos);

  auto missing = LoadCa(rig.certs.Path("absent.crt"), rig.certs.Path("ca.key"));
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().IsInvalidArgument());
}

TEST_CASE("tls: a CA key is never quoted, and an encrypted one is refused rather than prompted for") {
  CaRig rig;
  if (!rig.Load()) return;
  const std::string encrypted = rig.certs.Path("ca-enc.key");
  REQUIRE(std::system(("openssl pkey -in '" + rig.certs.Path("ca.key") + "' -aes256 -passout pass:x -out '" +
                       encrypted + "' 2>/dev/null")
                          .c_str()) == 0);
  auto refused = LoadCa(rig.certs.Path("ca.crt"), encrypted);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().message().find("without a passphrase") != std::string::npos);
  auto key = ReadFile(encrypted);
  REQUIRE(key.ok());
  CHECK(refused.status().message().find(key->substr(40, 20)) == std::string::npos);
}

TEST_CASE("tls: a leaf names its IPs and DNS names, chains to the CA, and lives as long as asked") {
  CaRig rig;
  if (!rig.Load()) return;
  Leaf leaf = rig.Issue({"127.0.0.1", "::1", "n1.etcd.default.svc"}, hours(90 * 24));
  CHECK(leaf.info.ips == std::vector<std::string>{"127.0.0.1", "::1"});
  CHECK(leaf.info.dns_names == std::vector<std::string>{"n1.etcd.default.svc"});
  CHECK(leaf.info.subject == "CN=n1");
  CHECK(leaf.info.issuer == "CN=ca");
  CHECK_FALSE(leaf.info.is_ca);
  CHECK(leaf.info.serial.size() >= 30);
  // The test CA lives 2 days, so a 90-day leaf ends with it.
  CHECK(leaf.info.not_after == std::chrono::floor<seconds>(rig.ca.info.not_after));
  CHECK(CheckLeaf(leaf, rig.ca, rig.now).ok());

  Leaf short_lived = rig.Issue({"127.0.0.1"}, seconds(60));
  CHECK(short_lived.info.not_after - short_lived.info.not_before == seconds(66));  // a tenth backdated
  CHECK_FALSE(CheckLeaf(short_lived, rig.ca, rig.now + seconds(61)).ok());
  CHECK(ReadCertPem(leaf.cert_pem, "leaf")->serial == leaf.info.serial);
}

TEST_CASE("tls: a renewal keeps the key it is given; a new leaf gets a new one") {
  CaRig rig;
  if (!rig.Load()) return;
  Leaf first = rig.Issue({"127.0.0.1"});
  Leaf renewed = rig.Issue({"127.0.0.1"}, hours(24), first.key_pem);
  CHECK(renewed.key_pem == first.key_pem);
  CHECK(renewed.info.serial != first.info.serial);
  CHECK(CheckLeaf(renewed, rig.ca, rig.now).ok());
  CHECK(rig.Issue({"127.0.0.1"}).key_pem != first.key_pem);

  auto bad_key = IssueLeaf(rig.ca, {"n1", {"127.0.0.1"}, hours(1), rig.now, "not a key"});
  CHECK_FALSE(bad_key.ok());
}

TEST_CASE("tls: hosts that are neither IPs nor DNS names are refused, so no host can smuggle in another name") {
  CaRig rig;
  if (!rig.Load()) return;
  for (const char* host : {"a,DNS:evil.example", "a b", "", "a..b", "-"}) {
    CAPTURE(host);
    auto leaf = IssueLeaf(rig.ca, {"n1", {host}, hours(1), rig.now, ""});
    if (std::string(host) == "-") {
      CHECK(leaf.ok());  // a one-label name of a dash is odd but harmless
      continue;
    }
    CHECK_FALSE(leaf.ok());
  }
  CHECK_FALSE(IssueLeaf(rig.ca, {"n1", {}, hours(1), rig.now, ""}).ok());
}

TEST_CASE("tls: a leaf issued by another CA fails the check made before the swap") {
  CaRig rig;
  if (!rig.Load()) return;
  auto other = LoadCa(rig.certs.Path("other-ca.crt"), rig.certs.Path("other-ca.key"));
  REQUIRE(other.ok());
  Leaf leaf = rig.Issue({"127.0.0.1"});
  Status s = CheckLeaf(leaf, *other, rig.now);
  CHECK(s.message().find("not signed by the CA") != std::string::npos);
  Leaf mismatched = leaf;
  mismatched.key_pem = rig.Issue({"127.0.0.1"}).key_pem;
  CHECK(CheckLeaf(mismatched, rig.ca, rig.now).message().find("key is not") != std::string::npos);
}

TEST_CASE("tls: names are checked against URLs: IP SANs for IPs, DNS SANs for names, wildcards for one label") {
  CertInfo cert;
  cert.ips = {"10.0.0.1", "::1"};
  cert.dns_names = {"n1.example.com", "*.etcd.svc"};
  CHECK(CheckNames(cert, {"https://10.0.0.1:2380", "https://[0:0::1]:2380"}, "peer.crt").ok());
  CHECK(CheckNames(cert, {"https://N1.example.com:2380", "https://n2.etcd.svc:2380"}, "peer.crt").ok());
  CHECK(CheckNames(cert, {"https://0.0.0.0:2380"}, "peer.crt").ok());  // a wildcard listener is never dialled

  Status missing = CheckNames(cert, {"https://10.0.0.2:2380", "https://a.b.etcd.svc:2380"}, "peer.crt");
  CHECK(missing.code() == Status::Code::kFailedPrecondition);
  CHECK(missing.message().find("peer.crt does not name IP:10.0.0.2, DNS:a.b.etcd.svc") == 0);
  // An IP is not matched by a DNS SAN spelling it, as etcd 3.4 checks a peer's IP SANs.
  CertInfo dns_only;
  dns_only.dns_names = {"10.0.0.1"};
  CHECK_FALSE(CheckNames(dns_only, {"https://10.0.0.1:2380"}, "x").ok());
  CHECK(HostsOf({"https://10.0.0.1:2380", "http://10.0.0.1:2379", "https://[::]:2380", "https://h:1"}) ==
        std::vector<std::string>{"10.0.0.1", "h"});
}

TEST_CASE("tls: a leaf is written in place: key 0600 first and only when it changed, certificate 0644") {
  CaRig rig;
  if (!rig.Load()) return;
  const std::string dir = rig.certs.Path("leaves");
  REQUIRE(MakeDirs(dir).ok());
  const std::string crt = dir + "/peer.crt", key = dir + "/peer.key";
  Leaf first = rig.Issue({"127.0.0.1"});
  REQUIRE(WriteLeaf(first, crt, key).ok());
  struct stat st {};
  REQUIRE(stat(key.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  const ino_t key_inode = st.st_ino;
  REQUIRE(stat(crt.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0644);
  CHECK(ReadCertFile(crt)->serial == first.info.serial);

  Leaf renewed = rig.Issue({"127.0.0.1"}, hours(24), first.key_pem);
  REQUIRE(WriteLeaf(renewed, crt, key).ok());
  REQUIRE(stat(key.c_str(), &st) == 0);
  CHECK(st.st_ino == key_inode);  // the key was not rewritten
  CHECK(ReadCertFile(crt)->serial == renewed.info.serial);
  // No temp file is left beside them.
  int entries = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir)) ++entries;
  CHECK(entries == 2);
  CHECK(ReadCertFile(dir + "/absent.crt").status().IsNotFound());
}

TEST_CASE("tls: a bundle expires with its first certificate to expire") {
  CaRig rig;
  if (!rig.Load()) return;
  const std::string bundle = rig.certs.Path("bundle.crt");
  Leaf soon = rig.Issue({"127.0.0.1"}, seconds(600));
  REQUIRE(WriteFileAtomic(bundle, rig.ca.cert_pem + soon.cert_pem).ok());
  auto earliest = EarliestNotAfter(bundle);
  REQUIRE(earliest.ok());
  CHECK(*earliest == soon.info.not_after);
  REQUIRE(WriteFileAtomic(bundle, rig.ca.cert_pem + "-----BEGIN CERTIFICATE-----\nxx\n-----END CERTIFICATE-----\n").ok());
  CHECK(EarliestNotAfter(bundle).status().code() == Status::Code::kDataLoss);
  REQUIRE(WriteFileAtomic(bundle, "nothing").ok());
  CHECK(EarliestNotAfter(bundle).status().code() == Status::Code::kDataLoss);
}

TEST_CASE("tls: the certificate a server presents is read from its handshake, even one that wants a client cert") {
  CaRig rig;
  if (!rig.Load()) return;
  Leaf leaf = rig.Issue({"127.0.0.1"});
  const std::string crt = rig.certs.Path("server.crt"), key = rig.certs.Path("server.key");
  REQUIRE(WriteLeaf(leaf, crt, key).ok());
  // Requires a client certificate signed by the CA, as etcd's peer port does.
  httplib::SSLServer server(crt.c_str(), key.c_str(), rig.certs.Path("ca.crt").c_str());
  server.Get("/", [](const httplib::Request&, httplib::Response& res) { res.set_content("ok", "text/plain"); });
  int port = server.bind_to_any_port("127.0.0.1");
  REQUIRE(port > 0);
  std::thread serving([&] { server.listen_after_bind(); });
  const std::string url = "https://127.0.0.1:" + std::to_string(port);

  auto anonymous = ReadServerCertificate(url, {}, std::chrono::seconds(5));
  REQUIRE_MESSAGE(anonymous.ok(), anonymous.status().message());
  CHECK(anonymous->serial == leaf.info.serial);
  CHECK(anonymous->not_after == leaf.info.not_after);
  auto with_cert = ReadServerCertificate(url, rig.certs.Peer(), std::chrono::seconds(5));
  REQUIRE_MESSAGE(with_cert.ok(), with_cert.status().message());
  CHECK(with_cert->serial == leaf.info.serial);
  server.stop();
  serving.join();

  CHECK(ReadServerCertificate(url, {}, std::chrono::seconds(1)).status().IsUnavailable());
  CHECK(ReadServerCertificate("http://127.0.0.1:1", {}, std::chrono::seconds(1)).status().IsInvalidArgument());
}

}  // namespace
}  // namespace quorate
