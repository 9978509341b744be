#include "net/cloud/sigv4.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>

#include <ctime>

#include <fmt/format.h>

namespace quorate {
namespace sigv4 {
namespace {

std::string Hex(const std::string& bytes) {
  std::string out;
  for (unsigned char c : bytes) out += fmt::format("{:02x}", c);
  return out;
}

std::string Hmac(const std::string& key, const std::string& data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), reinterpret_cast<const unsigned char*>(data.data()),
       data.size(), out, &len);
  return std::string(reinterpret_cast<char*>(out), len);
}

std::string SigningKey(const std::string& secret, const std::string& date, const std::string& region,
                       const std::string& service) {
  return Hmac(Hmac(Hmac(Hmac("AWS4" + secret, date), region), service), "aws4_request");
}

std::string SignedHeaders(const Request& r) {
  std::string out;
  for (const auto& [name, value] : r.headers) out += (out.empty() ? "" : ";") + name;
  return out;
}

}  // namespace

std::string Sha256Hex(const std::string& data) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(data.data()), data.size(), digest);
  return Hex(std::string(reinterpret_cast<char*>(digest), sizeof digest));
}

std::string SigningKeyHex(const std::string& secret, const std::string& date, const std::string& region,
                          const std::string& service) {
  return Hex(SigningKey(secret, date, region, service));
}

std::string CanonicalRequest(const Request& r) {
  // Sorted by the encoded name, which is what AWS sorts.
  std::map<std::string, std::string> encoded;
  for (const auto& [k, v] : r.query) encoded[UriEncode(k, false)] = UriEncode(v, false);
  std::string query;
  for (const auto& [k, v] : encoded) query += (query.empty() ? "" : "&") + k + "=" + v;
  std::string headers;
  for (const auto& [name, value] : r.headers) headers += name + ":" + value + "\n";
  return fmt::format("{}\n{}\n{}\n{}\n{}\n{}", r.method, r.path.empty() ? "/" : UriEncode(r.path, true), query, headers,
                     SignedHeaders(r), r.payload_hash);
}

std::string AmzDate(std::chrono::system_clock::time_point t) {
  std::time_t secs = std::chrono::system_clock::to_time_t(t);
  std::tm utc;
  gmtime_r(&secs, &utc);
  char stamp[20];
  std::strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &utc);
  return stamp;
}

std::string Authorization(const Request& r, const std::string& access_key, const std::string& secret,
                          const std::string& region, const std::string& service) {
  const std::string& amz_date = r.headers.at("x-amz-date");
  const std::string date = amz_date.substr(0, 8);
  const std::string scope = fmt::format("{}/{}/{}/aws4_request", date, region, service);
  const std::string to_sign =
      fmt::format("AWS4-HMAC-SHA256\n{}\n{}\n{}", amz_date, scope, Sha256Hex(CanonicalRequest(r)));
  return fmt::format("AWS4-HMAC-SHA256 Credential={}/{}, SignedHeaders={}, Signature={}", access_key, scope,
                     SignedHeaders(r), Hex(Hmac(SigningKey(secret, date, region, service), to_sign)));
}

}  // namespace sigv4

}  // namespace quorate
