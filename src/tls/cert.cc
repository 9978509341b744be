#include "tls/cert.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <algorithm>
#include <cctype>
#include <ctime>
#include <filesystem>
#include <memory>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "quorate/duration.h"
#include "quorate/fs.h"
#include "quorate/member.h"
#include "quorate/text.h"

namespace quorate {
namespace {

template <typename T, void (*F)(T*)>
struct Freer {
  void operator()(T* p) const { F(p); }
};
using BioPtr = std::unique_ptr<BIO, Freer<BIO, BIO_free_all>>;
using X509Ptr = std::unique_ptr<X509, Freer<X509, X509_free>>;
using KeyPtr = std::unique_ptr<EVP_PKEY, Freer<EVP_PKEY, EVP_PKEY_free>>;
using BnPtr = std::unique_ptr<BIGNUM, Freer<BIGNUM, BN_free>>;
using NamesPtr = std::unique_ptr<GENERAL_NAMES, Freer<GENERAL_NAMES, GENERAL_NAMES_free>>;
using SslCtxPtr = std::unique_ptr<SSL_CTX, Freer<SSL_CTX, SSL_CTX_free>>;
using SslPtr = std::unique_ptr<SSL, Freer<SSL, SSL_free>>;

// The library's reason for the last failure, for the operator; OpenSSL's error queue never holds
// key material, only where parsing stopped. Cleared, so the next call starts afresh.
std::string OpenSslReason() {
  unsigned long e = ERR_peek_last_error();
  ERR_clear_error();
  if (e == 0) return "no reason given";
  const char* reason = ERR_reason_error_string(e);
  return reason != nullptr ? reason : fmt::format("error {:x}", e);
}

BioPtr MemoryIn(const std::string& text) {
  return BioPtr(BIO_new_mem_buf(text.data(), static_cast<int>(text.size())));
}

std::string BioText(BIO* bio) {
  char* data = nullptr;
  long n = BIO_get_mem_data(bio, &data);
  return n > 0 ? std::string(data, static_cast<size_t>(n)) : std::string();
}

// An encrypted key is refused: quorate runs unattended, and OpenSSL's default would ask the tty.
int NoPassphrase(char*, int, int, void*) { return 0; }

KeyPtr ParseKey(const std::string& pem) {
  auto bio = MemoryIn(pem);
  return KeyPtr(PEM_read_bio_PrivateKey(bio.get(), nullptr, NoPassphrase, nullptr));
}

X509Ptr ParseCert(const std::string& pem) {
  auto bio = MemoryIn(pem);
  return X509Ptr(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
}

WallTime FromAsn1(const ASN1_TIME* t) {
  std::tm tm{};
  if (t == nullptr || ASN1_TIME_to_tm(t, &tm) != 1) return WallTime{};
  return std::chrono::system_clock::from_time_t(timegm(&tm));
}

std::string NameLine(const X509_NAME* name) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  X509_NAME_print_ex(bio.get(), name, 0, XN_FLAG_RFC2253);
  return Printable(BioText(bio.get()));
}

CertInfo InfoOf(X509* x) {
  CertInfo info;
  info.not_before = FromAsn1(X509_get0_notBefore(x));
  info.not_after = FromAsn1(X509_get0_notAfter(x));
  info.subject = NameLine(X509_get_subject_name(x));
  info.issuer = NameLine(X509_get_issuer_name(x));
  info.is_ca = (X509_get_extension_flags(x) & EXFLAG_CA) != 0;
  if (BnPtr bn(ASN1_INTEGER_to_BN(X509_get0_serialNumber(x), nullptr)); bn) {
    char* hex = BN_bn2hex(bn.get());
    if (hex != nullptr) info.serial = hex;
    OPENSSL_free(hex);
  }
  NamesPtr names(static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(x, NID_subject_alt_name, nullptr, nullptr)));
  for (int i = 0; names && i < sk_GENERAL_NAME_num(names.get()); ++i) {
    const GENERAL_NAME* g = sk_GENERAL_NAME_value(names.get(), i);
    if (g->type == GEN_DNS) {
      const ASN1_STRING* s = g->d.dNSName;
      info.dns_names.push_back(
          Printable(std::string(reinterpret_cast<const char*>(ASN1_STRING_get0_data(s)), ASN1_STRING_length(s))));
    } else if (g->type == GEN_IPADD) {
      const ASN1_OCTET_STRING* s = g->d.iPAddress;
      char text[INET6_ADDRSTRLEN] = {};
      int len = ASN1_STRING_length(s);
      if ((len == 4 || len == 16) &&
          inet_ntop(len == 4 ? AF_INET : AF_INET6, ASN1_STRING_get0_data(s), text, sizeof text) != nullptr) {
        info.ips.push_back(text);
      }
    }
  }
  return info;
}

bool IsIp(const std::string& host) {
  unsigned char buf[16];
  return inet_pton(AF_INET, host.c_str(), buf) == 1 || inet_pton(AF_INET6, host.c_str(), buf) == 1;
}

// Normalised IP text (so "::1" and "0:0::1" compare equal); the host itself when it is not an IP.
std::string CanonicalIp(const std::string& host) {
  unsigned char buf[16];
  char text[INET6_ADDRSTRLEN] = {};
  if (inet_pton(AF_INET, host.c_str(), buf) == 1) return inet_ntop(AF_INET, buf, text, sizeof text);
  if (inet_pton(AF_INET6, host.c_str(), buf) == 1) return inet_ntop(AF_INET6, buf, text, sizeof text);
  return host;
}

// A DNS name a certificate may carry: labels of letters, digits and '-', a leading "*." allowed.
bool IsDnsName(const std::string& host) {
  std::string rest = host.rfind("*.", 0) == 0 ? host.substr(2) : host;
  if (rest.empty() || rest.size() > 253 || rest.front() == '.' || rest.back() == '.') return false;
  for (size_t i = 0; i < rest.size(); ++i) {
    char c = rest[i];
    if (c == '.' && rest[i + 1] == '.') return false;
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '.') return false;
  }
  return true;
}

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

// RFC 6125: a wildcard stands for exactly the leftmost label.
bool DnsMatches(const std::string& pattern, const std::string& host) {
  std::string p = Lower(pattern), h = Lower(host);
  if (p.rfind("*.", 0) != 0) return p == h;
  size_t dot = h.find('.');
  return dot != std::string::npos && dot > 0 && h.substr(dot) == p.substr(1);
}

Status AddExtension(X509* cert, X509* issuer, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
  if (ext == nullptr) return Status::Internal(fmt::format("certificate extension {}: {}", value, OpenSslReason()));
  int added = X509_add_ext(cert, ext, -1);
  X509_EXTENSION_free(ext);
  if (added != 1) return Status::Internal(fmt::format("certificate extension {}: {}", value, OpenSslReason()));
  return Status::Ok();
}

// The subjectAltName of `hosts`, built as values rather than as config text, so that no host can
// change how the rest is read.
Status AddNames(X509* cert, const std::vector<std::string>& hosts) {
  NamesPtr names(sk_GENERAL_NAME_new_null());
  for (const auto& host : hosts) {
    GENERAL_NAME* g = GENERAL_NAME_new();
    if (IsIp(host)) {
      ASN1_OCTET_STRING* ip = a2i_IPADDRESS(host.c_str());
      if (ip == nullptr) {
        GENERAL_NAME_free(g);
        return Status::InvalidArgument(fmt::format("'{}' is not an IP address", Printable(host)));
      }
      GENERAL_NAME_set0_value(g, GEN_IPADD, ip);
    } else {
      ASN1_IA5STRING* dns = ASN1_IA5STRING_new();
      ASN1_STRING_set(dns, host.data(), static_cast<int>(host.size()));
      GENERAL_NAME_set0_value(g, GEN_DNS, dns);
    }
    sk_GENERAL_NAME_push(names.get(), g);
  }
  if (X509_add1_ext_i2d(cert, NID_subject_alt_name, names.get(), 0, X509V3_ADD_DEFAULT) != 1) {
    return Status::Internal("subjectAltName: " + OpenSslReason());
  }
  return Status::Ok();
}

std::string CertPem(X509* x) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  PEM_write_bio_X509(bio.get(), x);
  return BioText(bio.get());
}

std::string KeyPem(EVP_PKEY* key) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr);
  return BioText(bio.get());
}

}  // namespace

Result<CertInfo> ReadCertPem(const std::string& pem, const std::string& where) {
  X509Ptr x = ParseCert(pem);
  if (!x) return Status::DataLoss(fmt::format("{} holds no PEM certificate that parses ({})", where, OpenSslReason()));
  return InfoOf(x.get());
}

Result<std::vector<CertInfo>> ReadCertBundlePem(const std::string& pem, const std::string& where) {
  auto bio = MemoryIn(pem);
  std::vector<CertInfo> out;
  while (X509Ptr x{PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)}) out.push_back(InfoOf(x.get()));
  // The loop ends on the end of the text (an expected "no start line") or on a block that does not parse.
  unsigned long e = ERR_peek_last_error();
  bool at_end = ERR_GET_REASON(e) == PEM_R_NO_START_LINE;
  ERR_clear_error();
  if (out.empty()) return Status::DataLoss(fmt::format("{} holds no PEM certificate that parses", where));
  if (!at_end) {
    return Status::DataLoss(
        fmt::format("{}: the block after its certificate #{} is not a PEM certificate that parses", where, out.size()));
  }
  return out;
}

Result<CertInfo> ReadCertFile(const std::string& path) {
  auto text = ReadFile(path);
  if (!text.ok()) return text.status();
  return ReadCertPem(*text, path);
}

Result<WallTime> EarliestNotAfter(const std::string& path) {
  auto text = ReadFile(path);
  if (!text.ok()) return text.status();
  auto certs = ReadCertBundlePem(*text, path);
  if (!certs.ok()) return certs.status();
  WallTime earliest = WallTime::max();
  for (const auto& c : *certs) earliest = std::min(earliest, c.not_after);
  return earliest;
}

Result<CaKey> LoadCa(const std::string& cert_file, const std::string& key_file) {
  CaKey ca;
  auto cert_text = ReadFile(cert_file);
  if (!cert_text.ok()) return Status::InvalidArgument(fmt::format("CA certificate: {}", cert_text.status().message()));
  auto key_text = ReadFile(key_file);
  if (!key_text.ok()) return Status::InvalidArgument(fmt::format("CA key: {}", key_text.status().message()));
  X509Ptr cert = ParseCert(*cert_text);
  if (!cert) {
    return Status::InvalidArgument(
        fmt::format("CA certificate {} holds no PEM certificate that parses ({})", cert_file, OpenSslReason()));
  }
  KeyPtr key = ParseKey(*key_text);
  if (!key) {
    return Status::InvalidArgument(fmt::format(
        "CA key {} holds no unencrypted PEM private key that parses ({}); give the key without a passphrase",
        key_file, OpenSslReason()));
  }
  ca.info = InfoOf(cert.get());
  if (!ca.info.is_ca) {
    return Status::InvalidArgument(
        fmt::format("CA certificate {} ({}) is not a CA (no basicConstraints CA:TRUE)", cert_file, ca.info.subject));
  }
  if (X509_check_private_key(cert.get(), key.get()) != 1) {
    ERR_clear_error();
    return Status::InvalidArgument(
        fmt::format("CA key {} is not the key of the CA certificate {}: give the pair from one CA", key_file, cert_file));
  }
  // The PEM as read: a leaf's chain is this certificate, byte for byte.
  ca.cert_pem = CertPem(cert.get());
  ca.key_pem = std::move(*key_text);
  return ca;
}

bool IsCertHost(const std::string& host) { return IsIp(host) || IsDnsName(host); }

std::vector<std::string> HostsOf(const std::vector<std::string>& urls) {
  std::vector<std::string> hosts;
  for (const auto& u : urls) {
    auto url = ParseUrl(u);
    if (!url.ok()) continue;
    std::string host = CanonicalIp(url->host);
    if (host == "0.0.0.0" || host == "::") continue;
    if (std::find(hosts.begin(), hosts.end(), host) == hosts.end()) hosts.push_back(host);
  }
  return hosts;
}

Status CheckNames(const CertInfo& cert, const std::vector<std::string>& urls, const std::string& what) {
  std::vector<std::string> missing;
  for (const auto& host : HostsOf(urls)) {
    bool named = false;
    if (IsIp(host)) {
      for (const auto& ip : cert.ips) named = named || CanonicalIp(ip) == host;
    } else {
      for (const auto& dns : cert.dns_names) named = named || DnsMatches(dns, host);
    }
    if (!named) missing.push_back(IsIp(host) ? "IP:" + host : "DNS:" + host);
  }
  if (missing.empty()) return Status::Ok();
  return Status::FailedPrecondition(fmt::format("{} does not name {} (it names IP [{}], DNS [{}])", what,
                                                fmt::join(missing, ", "), fmt::join(cert.ips, ", "),
                                                fmt::join(cert.dns_names, ", ")));
}

Result<Leaf> IssueLeaf(const CaKey& ca, const LeafRequest& request) {
  if (request.hosts.empty()) return Status::InvalidArgument("a leaf needs at least one host to name");
  for (const auto& host : request.hosts) {
    if (!IsCertHost(host)) {
      return Status::InvalidArgument(fmt::format("'{}' is neither an IP address nor a DNS name", Printable(host)));
    }
  }
  if (request.lifetime <= std::chrono::seconds(0)) return Status::InvalidArgument("a leaf's lifetime must be positive");
  X509Ptr ca_cert = ParseCert(ca.cert_pem);
  KeyPtr ca_key = ParseKey(ca.key_pem);
  if (!ca_cert || !ca_key) return Status::InvalidArgument("the CA does not parse: load it with LoadCa");

  KeyPtr key;
  if (!request.key_pem.empty()) {
    key = ParseKey(request.key_pem);
    if (!key) return Status::InvalidArgument("the key to keep does not parse (" + OpenSslReason() + ")");
  } else {
    key.reset(EVP_EC_gen("P-256"));
    if (!key) return Status::Internal("generating an EC P-256 key: " + OpenSslReason());
  }

  X509Ptr x(X509_new());
  X509_set_version(x.get(), X509_VERSION_3);
  unsigned char serial[16];
  if (RAND_bytes(serial, sizeof serial) != 1) return Status::Internal("random serial: " + OpenSslReason());
  serial[0] &= 0x7f;  // a positive INTEGER
  BnPtr bn(BN_bin2bn(serial, sizeof serial, nullptr));
  BN_to_ASN1_INTEGER(bn.get(), X509_get_serialNumber(x.get()));

  const auto backdate = std::min<std::chrono::seconds>(std::chrono::minutes(5), request.lifetime / 10);
  const std::time_t now = std::chrono::system_clock::to_time_t(request.now);
  std::time_t not_after = now + request.lifetime.count();
  // A leaf outliving its CA would fail verification from the CA's expiry on, whatever it says.
  not_after = std::min(not_after, std::chrono::system_clock::to_time_t(ca.info.not_after));
  ASN1_TIME_set(X509_getm_notBefore(x.get()), now - backdate.count());
  ASN1_TIME_set(X509_getm_notAfter(x.get()), not_after);

  X509_NAME* subject = X509_get_subject_name(x.get());
  X509_NAME_add_entry_by_txt(subject, "CN", MBSTRING_UTF8,
                             reinterpret_cast<const unsigned char*>(request.common_name.c_str()), -1, -1, 0);
  X509_set_issuer_name(x.get(), X509_get_subject_name(ca_cert.get()));
  X509_set_pubkey(x.get(), key.get());

  for (auto [nid, value] : {std::pair{NID_basic_constraints, "critical,CA:FALSE"},
                            std::pair{NID_key_usage, "critical,digitalSignature,keyEncipherment"},
                            std::pair{NID_ext_key_usage, "serverAuth,clientAuth"},
                            std::pair{NID_subject_key_identifier, "hash"},
                            std::pair{NID_authority_key_identifier, "keyid:always"}}) {
    if (Status s = AddExtension(x.get(), ca_cert.get(), nid, value); !s.ok()) return s;
  }
  if (Status s = AddNames(x.get(), request.hosts); !s.ok()) return s;

  // Ed25519 and Ed448 sign without a separate digest.
  int ca_type = EVP_PKEY_get_id(ca_key.get());
  const EVP_MD* md = ca_type == EVP_PKEY_ED25519 || ca_type == EVP_PKEY_ED448 ? nullptr : EVP_sha256();
  if (X509_sign(x.get(), ca_key.get(), md) <= 0) return Status::Internal("signing the leaf: " + OpenSslReason());

  Leaf leaf;
  leaf.cert_pem = CertPem(x.get());
  leaf.key_pem = request.key_pem.empty() ? KeyPem(key.get()) : request.key_pem;
  leaf.info = InfoOf(x.get());
  return leaf;
}

Status CheckLeaf(const Leaf& leaf, const CaKey& ca, WallTime now) {
  X509Ptr cert = ParseCert(leaf.cert_pem);
  KeyPtr key = ParseKey(leaf.key_pem);
  X509Ptr ca_cert = ParseCert(ca.cert_pem);
  if (!cert || !key || !ca_cert) return Status::FailedPrecondition("the new leaf or its CA does not parse");
  if (X509_check_private_key(cert.get(), key.get()) != 1) {
    ERR_clear_error();
    return Status::FailedPrecondition("the new leaf's key is not its certificate's");
  }
  EVP_PKEY* ca_pub = X509_get0_pubkey(ca_cert.get());
  if (X509_check_issued(ca_cert.get(), cert.get()) != X509_V_OK || ca_pub == nullptr ||
      X509_verify(cert.get(), ca_pub) != 1) {
    ERR_clear_error();
    return Status::FailedPrecondition(fmt::format("the new leaf is not signed by the CA {}", ca.info.subject));
  }
  CertInfo info = InfoOf(cert.get());
  if (now < info.not_before || now >= info.not_after) {
    return Status::FailedPrecondition(fmt::format("the new leaf is not valid now: from {} to {}",
                                                  FormatUtcTime(info.not_before), FormatUtcTime(info.not_after)));
  }
  return Status::Ok();
}

Status WriteLeaf(const Leaf& leaf, const std::string& cert_file, const std::string& key_file) {
  // The key first: a handshake between the two renames sees the new key beside the old certificate
  // only when the key changed, and a renewal keeps it, so then the certificate's rename is the swap.
  auto current = ReadFile(key_file);
  if (!current.ok() || *current != leaf.key_pem) {
    if (Status s = WriteFileAtomic(key_file, leaf.key_pem, 0600); !s.ok()) return s;
  }
  return WriteFileAtomic(cert_file, leaf.cert_pem, 0644);
}

namespace {

// The leaf the server presented, taken at depth 0 of verification: it is there even when the
// server then refuses us (no client certificate it trusts). Trust is not asked: accepted, read.
int KeepLeaf(int, X509_STORE_CTX* store) {
  if (X509_STORE_CTX_get_error_depth(store) != 0) return 1;
  auto* ssl = static_cast<SSL*>(X509_STORE_CTX_get_ex_data(store, SSL_get_ex_data_X509_STORE_CTX_idx()));
  auto* out = static_cast<X509Ptr*>(SSL_get_app_data(ssl));
  X509* leaf = X509_STORE_CTX_get_current_cert(store);
  if (out != nullptr && leaf != nullptr && !*out) {
    X509_up_ref(leaf);
    out->reset(leaf);
  }
  return 1;
}

// Waits for `fd` to be ready for `events` until `deadline`: false when time ran out.
bool WaitFd(int fd, short events, std::chrono::steady_clock::time_point deadline) {
  while (true) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd p{fd, events, 0};
    int n = ::poll(&p, 1, static_cast<int>(left.count()));
    if (n > 0) return true;
    if (n < 0 && errno != EINTR) return false;
  }
}

}  // namespace

Result<CertInfo> ReadServerCertificate(const std::string& url_text, const TlsFiles& tls,
                                       std::chrono::milliseconds timeout) {
  auto url = ParseUrl(url_text);
  if (!url.ok()) return url.status();
  if (url->scheme != "https") return Status::InvalidArgument(fmt::format("{} is not https: no certificate", url_text));
  // Real time on purpose, as the HTTP client's: a socket's deadline, with nothing to fake below it.
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* found = nullptr;
  if (int rc = getaddrinfo(url->host.c_str(), std::to_string(url->port).c_str(), &hints, &found); rc != 0) {
    return Status::Unavailable(fmt::format("{}: cannot resolve: {}", url_text, gai_strerror(rc)));
  }
  std::unique_ptr<addrinfo, Freer<addrinfo, freeaddrinfo>> addresses(found);
  UniqueFd fd(::socket(found->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd) return Status::FromErrno(errno, "socket for " + url_text);
  if (::connect(fd.get(), found->ai_addr, found->ai_addrlen) != 0) {
    if (errno != EINPROGRESS || !WaitFd(fd.get(), POLLOUT, deadline)) {
      return Status::Unavailable(fmt::format("{}: no connection", url_text));
    }
    int err = 0;
    socklen_t len = sizeof err;
    if (getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0) {
      return Status::Unavailable(fmt::format("{}: cannot connect ({})", url_text, std::strerror(err)));
    }
  }
  SslCtxPtr ctx(SSL_CTX_new(TLS_client_method()));
  if (!ctx) return Status::Internal("TLS context: " + OpenSslReason());
  SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_PEER, KeepLeaf);
  if (!tls.cert_file.empty() && !tls.key_file.empty() &&
      (SSL_CTX_use_certificate_chain_file(ctx.get(), tls.cert_file.c_str()) != 1 ||
       SSL_CTX_use_PrivateKey_file(ctx.get(), tls.key_file.c_str(), SSL_FILETYPE_PEM) != 1)) {
    return Status::InvalidArgument(
        fmt::format("cannot use TLS certificate '{}' with key '{}' ({})", tls.cert_file, tls.key_file, OpenSslReason()));
  }
  SslPtr ssl(SSL_new(ctx.get()));
  X509Ptr leaf;
  SSL_set_app_data(ssl.get(), &leaf);
  SSL_set_fd(ssl.get(), fd.get());
  if (!IsIp(url->host)) SSL_set_tlsext_host_name(ssl.get(), url->host.c_str());
  while (!leaf) {
    int rc = SSL_connect(ssl.get());
    if (rc == 1) break;
    int why = SSL_get_error(ssl.get(), rc);
    if (why == SSL_ERROR_WANT_READ || why == SSL_ERROR_WANT_WRITE) {
      if (WaitFd(fd.get(), why == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, deadline)) continue;
      return Status::Unavailable(fmt::format("{}: no TLS handshake within {} ms", url_text, timeout.count()));
    }
    if (!leaf) return Status::Unavailable(fmt::format("{}: TLS handshake failed ({})", url_text, OpenSslReason()));
  }
  ERR_clear_error();
  if (!leaf) leaf.reset(SSL_get1_peer_certificate(ssl.get()));
  if (!leaf) return Status::Unavailable(fmt::format("{}: the server presented no certificate", url_text));
  return InfoOf(leaf.get());
}


}  // namespace quorate
