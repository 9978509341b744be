#include <doctest/doctest.h>

#include <cstdlib>

#include "quorate/s3.h"

namespace quorate {

// AWS's published SigV4 examples (General Reference, "Examples of how to derive a signing key";
// S3 API Reference, "Signature calculation: GET Object").
TEST_CASE("SigV4 signing key matches AWS's example") {
  CHECK(sigv4::SigningKeyHex("wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", "20150830", "us-east-1", "iam") ==
        "c4afb1cc5771d871763a393e44b703571b55cc28424d1a5e86da6ed3c154a4b9");
}

TEST_CASE("SigV4 signature matches AWS's S3 GET Object example") {
  sigv4::Request r;
  r.method = "GET";
  r.path = "/test.txt";
  r.payload_hash = sigv4::Sha256Hex("");
  r.headers = {{"host", "examplebucket.s3.amazonaws.com"},
               {"range", "bytes=0-9"},
               {"x-amz-content-sha256", r.payload_hash},
               {"x-amz-date", "20130524T000000Z"}};
  std::string auth = sigv4::Authorization(r, "AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
                                          "us-east-1", "s3");
  CHECK(auth ==
        "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, "
        "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, "
        "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
}

TEST_CASE("SigV4 canonical query and URI encoding") {
  CHECK(sigv4::UriEncode("a b/c~d*", true) == "a%20b/c~d%2A");
  CHECK(sigv4::UriEncode("a/b", false) == "a%2Fb");
  sigv4::Request r{"GET", "/bucket", {{"prefix", "t/x"}, {"list-type", "2"}}, {{"host", "h"}}, "e3b0"};
  std::string canonical = sigv4::CanonicalRequest(r);
  CHECK(canonical.find("\nlist-type=2&prefix=t%2Fx\n") != std::string::npos);
}

TEST_CASE("S3 store URLs are checked") {
  setenv("AWS_ACCESS_KEY_ID", "k", 1);
  setenv("AWS_SECRET_ACCESS_KEY", "s", 1);
  CHECK(OpenS3Vfs("s3://bucket/prefix?endpoint=http://127.0.0.1:9000").ok());
  CHECK(OpenS3Vfs("s3://Bad_Bucket/p").status().IsInvalidArgument());
  CHECK(OpenS3Vfs("s3://b/../x").status().IsInvalidArgument());
  CHECK(OpenS3Vfs("s3://b/p?colour=blue").status().IsInvalidArgument());
  CHECK(OpenS3Vfs("s3://b/p?endpoint=127.0.0.1:9000").status().IsInvalidArgument());
  unsetenv("AWS_SECRET_ACCESS_KEY");
  auto no_creds = OpenS3Vfs("s3://b/p");
  CHECK(no_creds.status().message().find("AWS_SECRET_ACCESS_KEY") != std::string::npos);
  unsetenv("AWS_ACCESS_KEY_ID");
}

}  // namespace quorate
