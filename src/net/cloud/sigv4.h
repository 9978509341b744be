// AWS Signature Version 4, as the S3 store and the aws provider sign their requests with it (and
// the percent-encoding it defines, RFC 3986's unreserved set, which the credential flows and the
// other clouds' providers use as their form and query encoder). Public functions so that tests check
// them against AWS's published examples.
#pragma once

#include <chrono>
#include <map>
#include <string>

namespace quorate {

namespace sigv4 {

std::string Sha256Hex(const std::string& data);
// RFC 3986 unreserved characters stay; every other byte is %XX (upper case); '/' stays when asked,
// which encodes a path segment by segment as S3 wants.
std::string UriEncode(const std::string& text, bool keep_slash);
// The signing key as hex: the HMAC chain over date (YYYYMMDD), region, service and "aws4_request".
std::string SigningKeyHex(const std::string& secret, const std::string& date, const std::string& region,
                          const std::string& service);

struct Request {
  std::string method;
  std::string path;                            // not yet encoded
  std::map<std::string, std::string> query;    // not yet encoded
  std::map<std::string, std::string> headers;  // the signed ones, lower-case names; host and x-amz-date
  std::string payload_hash;
};
std::string CanonicalRequest(const Request& r);
// The x-amz-date header's value for `t`: YYYYMMDDTHHMMSSZ.
std::string AmzDate(std::chrono::system_clock::time_point t);
// The value of the Authorization header.
std::string Authorization(const Request& r, const std::string& access_key, const std::string& secret,
                          const std::string& region, const std::string& service);

}  // namespace sigv4

}  // namespace quorate
