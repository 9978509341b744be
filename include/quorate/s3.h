// The S3 backend of the Vfs seam: ListObjectsV2 (every page), GET, PUT, and create-if-absent, signed
// with AWS Signature Version 4. The signer's steps are public so they are checked against AWS's
// published examples.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "quorate/status.h"
#include "quorate/vfs.h"

namespace quorate {

// "s3://bucket/prefix?endpoint=http://127.0.0.1:4568&region=us-east-1&path_style=true
//  &conditional_put=false&timeout=5s&page_size=1000". Credentials: AWS_ACCESS_KEY_ID,
// AWS_SECRET_ACCESS_KEY, optional AWS_SESSION_TOKEN.
Result<std::unique_ptr<Vfs>> OpenS3Vfs(const std::string& url);

namespace sigv4 {

std::string Sha256Hex(const std::string& data);
// RFC 3986 unreserved characters stay; everything else is %XX (upper case). '/' kept when asked.
std::string UriEncode(const std::string& text, bool keep_slash);
// The signing key as hex: HMAC chain over date (YYYYMMDD), region, service, "aws4_request".
std::string SigningKeyHex(const std::string& secret, const std::string& date, const std::string& region,
                          const std::string& service);

struct Request {
  std::string method;
  std::string path;  // not yet encoded
  std::map<std::string, std::string> query;  // not yet encoded
  std::map<std::string, std::string> headers;  // lower-case names; must hold host and x-amz-date
  std::string payload_hash;
};
std::string CanonicalRequest(const Request& r);
// The Authorization header value.
std::string Authorization(const Request& r, const std::string& access_key, const std::string& secret,
                          const std::string& region, const std::string& service);

}  // namespace sigv4
}  // namespace quorate
