// Certificates for etcd's listeners (docs/DESIGN.md §13), on OpenSSL 3: read what a certificate says
// (validity, names, issuer), issue a leaf for given names from a CA held as files, check a leaf's
// names against the URLs it must serve, and put a leaf in place the way etcd can take it live (etcd
// reads its certificate and key files again on every new TLS handshake). The renewal actor
// (node/tls_renew) and the CA rotation build on this; nothing here decides when.
//
// A private key is only ever held in a CaKey or Leaf, written to a 0600 file, and never put into a
// message or a log line: errors name the file, never its content.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "quorate/status.h"
#include "quorate/tls.h"

namespace quorate {

using WallTime = std::chrono::system_clock::time_point;

// What quorate reads from a certificate.
struct CertInfo {
  WallTime not_before;
  WallTime not_after;
  std::vector<std::string> dns_names;  // subjectAltName DNS entries, as written
  std::vector<std::string> ips;        // subjectAltName IP entries, in inet_ntop's text
  std::string subject;                 // one line, RFC 2253
  std::string issuer;                  // one line, RFC 2253
  std::string serial;                  // hex
  bool is_ca = false;                  // basicConstraints CA:TRUE
};

// The first certificate of PEM text (`where` names it in errors: a file, a peer). DataLoss when
// there is none or it does not parse.
Result<CertInfo> ReadCertPem(const std::string& pem, const std::string& where);
// Every certificate of a PEM bundle (a CA file may hold old and new CAs), at least one.
Result<std::vector<CertInfo>> ReadCertBundlePem(const std::string& pem, const std::string& where);
// ReadCertPem of the file at `path`; NotFound when it is absent.
Result<CertInfo> ReadCertFile(const std::string& path);
// The earliest not-after of the certificates in the file at `path` (a CA bundle expires with its
// first certificate to expire).
Result<WallTime> EarliestNotAfter(const std::string& path);

// An issuing CA: its certificate and private key, both PEM. Loaded from files only.
struct CaKey {
  std::string cert_pem;
  std::string key_pem;
  CertInfo info;
};
// The CA of `cert_file` with the key of `key_file`: InvalidArgument naming the file at fault when
// either cannot be read or parsed (an encrypted key is refused, never prompted for), when the
// certificate is not a CA, or when the key is not the certificate's.
Result<CaKey> LoadCa(const std::string& cert_file, const std::string& key_file);

// What a leaf is for and who it names. etcd's leaves serve and also dial (peers dial peers; the
// gRPC gateway dials the client port), so every leaf carries both serverAuth and clientAuth.
struct LeafRequest {
  std::string common_name;         // the member's name
  std::vector<std::string> hosts;  // each an IP (IP SAN) or a DNS name (DNS SAN)
  std::chrono::seconds lifetime{};
  WallTime now;
  // PEM of the key to keep (a renewal keeps the key, so the swap is one rename); empty: a new
  // EC P-256 key.
  std::string key_pem;
};

struct Leaf {
  std::string cert_pem;
  std::string key_pem;
  CertInfo info;
};

// Signs a leaf for `request` with `ca`: serial random (128 bits), not-before backdated by a tenth
// of its life (at most 5 minutes) for clocks a little behind, not-after now + lifetime, but never past
// the CA's own not-after. InvalidArgument when the request names no host, or one that is neither
// an IP nor a DNS name; when the key to keep does not parse.
Result<Leaf> IssueLeaf(const CaKey& ca, const LeafRequest& request);

// A host a leaf may name: an IP address, or a DNS name (labels of letters, digits and '-', a leading
// "*." allowed).
bool IsCertHost(const std::string& host);

// The hosts of `urls` a certificate must name: each URL's host, once, in order; the unspecified
// addresses (0.0.0.0, ::) are listening wildcards, never dialled, and left out.
std::vector<std::string> HostsOf(const std::vector<std::string>& urls);
// Ok when `cert` names every host of `urls`: an IP host by an IP SAN (etcd 3.4 checks a peer's IP
// against the IP SANs), a DNS host by a DNS SAN (a wildcard covers one label). Else
// FailedPrecondition naming the hosts missing and `what` (the certificate's file).
Status CheckNames(const CertInfo& cert, const std::vector<std::string>& urls, const std::string& what);

// Ok when `leaf`'s certificate is signed by `ca`, its key is the certificate's, and it is valid at
// `now`: what etcd will verify, checked before the leaf is put where etcd reads it.
Status CheckLeaf(const Leaf& leaf, const CaKey& ca, WallTime now);

// Puts `leaf` at `cert_file` and `key_file`, each a fsynced hidden temp file renamed into place
// and the directory fsynced: etcd's next handshake reads either the old pair or the new one.
// The key file is 0600 and written first, and only when it differs from what is there (a renewal
// that keeps the key renames the certificate alone); the certificate is 0644.
Status WriteLeaf(const Leaf& leaf, const std::string& cert_file, const std::string& key_file);

// The certificate a TLS server presents at `url` (https://host:port), read from the handshake
// within `timeout` (connecting included), presenting `tls`'s certificate and key when given. Read,
// not trusted: for showing when a member's certificate expires. Unavailable when nothing answers
// or no certificate comes back.
Result<CertInfo> ReadServerCertificate(const std::string& url, const TlsFiles& tls, std::chrono::milliseconds timeout);

}  // namespace quorate
