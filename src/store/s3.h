// The S3 backend of the Vfs seam: ListObjectsV2 (every page), GET, PUT, create-if-absent, DELETE,
// streamed uploads (multipart beyond one part) and streamed reads (ranged GETs) against AWS S3 or
// any S3-compatible store, signed with AWS Signature Version 4 (net/cloud/sigv4.h). The store's
// own: OpenVfs opens it by its s3:// URL; the addressing and the XML readers are here for tests.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "net/cloud/sigv4.h"
#include "quorate/clock.h"
#include "quorate/status.h"
#include "quorate/vfs.h"

namespace quorate {

// "s3://bucket/prefix?endpoint=http://127.0.0.1:4568&region=us-east-1&path_style=true
//  &conditional_put=false&timeout=5s&page_size=1000", every parameter optional:
//   endpoint         default https://s3.<region>.amazonaws.com
//   region           default $AWS_REGION, then $AWS_DEFAULT_REGION, then us-east-1
//   path_style       endpoint/bucket/key (default when an endpoint is given; over https, what a
//                    bucket name with dots needs) or bucket.endpoint/key
//   conditional_put  the store honours `If-None-Match: *`, so CreateIfAbsent is exclusive
//   timeout          the longest one Vfs call takes, retries included (default 5s)
//   page_size        keys a listing page asks for (max-keys), 1-1000
// Credentials: AWS's chain (net/cloud/aws_credentials.h).
// InvalidArgument, naming the part and the fix, for a bad URL or missing credentials.
//
// Errors of the calls: NotFound for a missing key; InvalidArgument for rejected credentials (403),
// a missing bucket and other requests the store refuses; Unavailable when the store does not answer,
// answers 5xx or times out, after up to 3 tries, or when a listing repeats a continuation token or
// goes on past 1000 pages; DataLoss for a body larger than any quorate record (64 KiB) or a listing
// page over 4 MiB. Streams are sent and read in parts of 8 MiB, each part a call of its own
// that may take up to 2 minutes or timeout=, whichever is longer. Each call, its tries and pages together, ends within `timeout` and `deadline`
// (the caller's --timeout), however slowly the store answers.
Result<std::unique_ptr<Vfs>> OpenS3Vfs(const std::string& url, Clock::TimePoint deadline = Clock::kNever);

namespace s3 {

// One page of a ListObjectsV2 answer, keys as stored (XML entities decoded).
struct ListPage {
  std::vector<std::string> keys;
  bool truncated = false;
  std::string next_token;
};
// DataLoss when `xml` is not a ListBucketResult (say a proxy's page that came with a 200).
Result<ListPage> ParseListPage(const std::string& xml);

// S3's <Error><Code/><Message/></Error>; empty fields for a body that is not one (a HEAD, a proxy).
struct ErrorBody {
  std::string code;
  std::string message;
};
ErrorBody ParseErrorBody(const std::string& xml);

// Multipart uploads: the UploadId of an InitiateMultipartUploadResult (empty when the answer is not
// one), and the CompleteMultipartUpload request naming parts 1..n by their ETags.
std::string ParseUploadId(const std::string& xml);
std::string CompleteMultipartBody(const std::vector<std::string>& etags);

// One page of a ListMultipartUploads answer: the uploads begun and neither completed nor aborted.
struct MultipartUpload {
  std::string key;
  std::string upload_id;
  std::chrono::system_clock::time_point initiated;
};
struct MultipartPage {
  std::vector<MultipartUpload> uploads;
  bool truncated = false;
  std::string next_key_marker, next_upload_id_marker;
};
// DataLoss when `xml` is not a ListMultipartUploadsResult, an upload lacks its key or ID, or its
// Initiated is not an ISO 8601 UTC time.
Result<MultipartPage> ParseMultipartUploads(const std::string& xml);

// Where a request for `key` goes: the Host header and the request path (not yet encoded).
struct Target {
  std::string host;
  std::string path;
};
// `endpoint_host` without the port; `port` 0 when the endpoint uses its scheme's default port.
Target Address(const std::string& endpoint_host, int port, const std::string& bucket, const std::string& key,
               bool path_style);

}  // namespace s3
}  // namespace quorate
