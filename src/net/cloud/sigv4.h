// AWS Signature Version 4, as the S3 store and the aws provider sign their requests with it. Public
// functions so that tests check them against AWS's published examples.
#pragma once

#include <chrono>
#include <map>
#include <string>

#include "net/cloud/request.h"

namespace quorate {

namespace sigv4 {

std::string Sha256Hex(const std::string& data);
// SigV4's name for cloud::PercentEncode (its UriEncode): a path keeps its '/', a query does not.
inline std::string UriEncode(const std::string& text, bool keep_slash) { return cloud::PercentEncode(text, keep_slash); }
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
