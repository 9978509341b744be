// AWS credentials found as AWS's SDKs find them, one chain for every consumer: the aws provider
// signs EC2 and Auto Scaling calls with it, the S3 store (s3://) its requests. Use:
//
//   auto chain = cloud::AwsCredentialChain::Create({.region = "eu-west-1"});  // reads env and files now
//   if (!chain.ok()) return chain.status();             // InvalidArgument: the operator's to fix, exit 2
//   auto creds = (*chain)->Get(deadline);               // {access_key, secret, session_token}
//   if (!creds.ok()) return creds.status();             // Unavailable: a source did not answer; retry
//   ... sign with creds->access_key, creds->secret; send creds->session_token when not empty ...
//   cloud::AwsEndpoint("s3", "cn-north-1")             // https://s3.cn-north-1.amazonaws.com.cn:443
//
// The chain, in the SDKs' order: the keys given; a profile named by AWS_PROFILE; AWS_ACCESS_KEY_ID
// and AWS_SECRET_ACCESS_KEY (with AWS_SESSION_TOKEN); a web identity (AWS_WEB_IDENTITY_TOKEN_FILE
// with AWS_ROLE_ARN, as EKS sets them) exchanged at STS; the shared files' default profile
// (~/.aws/credentials and ~/.aws/config, or AWS_SHARED_CREDENTIALS_FILE and AWS_CONFIG_FILE: keys,
// or role_arn with web_identity_token_file); container credentials (ECS task roles and EKS Pod
// Identity: AWS_CONTAINER_CREDENTIALS_RELATIVE_URI or _FULL_URI, with AWS_CONTAINER_AUTHORIZATION_TOKEN
// or the _TOKEN_FILE read at every fetch); the instance role from IMDSv2 (unless
// AWS_EC2_METADATA_DISABLED=true). Fetched credentials are kept until kRefreshMargin before they
// expire, on the Clock given. Nothing here shows a key, a secret or a token in a message.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "net/cloud/request.h"
#include "net/cloud/token_cache.h"
#include "quorate/clock.h"
#include "quorate/status.h"

namespace quorate::cloud {

struct AwsCredentials {
  std::string access_key, secret, session_token;  // session_token empty for long-term keys
  std::chrono::system_clock::time_point expiration = std::chrono::system_clock::time_point::max();
};

// https://SERVICE.REGION.SUFFIX:443 with the region's partition's DNS suffix: amazonaws.com.cn in
// China (cn-*), c2s.ic.gov and sc2s.sgov.gov in the ISO partitions, amazonaws.com elsewhere
// (GovCloud's us-gov-* included).
std::string AwsEndpoint(const std::string& service, const std::string& region);

// AWS's region name (like eu-west-1): Unavailable for anything else, an answer's or a key's.
Result<std::string> CheckAwsRegion(const std::string& text);

struct AwsSettings {
  // Keys given by the operator (a provider's keys); empty: the chain.
  std::string access_key, secret, session_token;
  std::string region;        // for STS's regional endpoint; empty: STS's global one
  std::string sts_endpoint;  // a base URL for STS; empty: AwsEndpoint("sts", region)
  std::string imds_endpoint;  // empty: AWS_EC2_METADATA_SERVICE_ENDPOINT, else http://169.254.169.254:80
  Clock* clock = nullptr;     // nullptr: RealClock()
};

class AwsCredentialChain {
 public:
  // Reads the settings, the environment and the shared files; InvalidArgument naming the variable,
  // file or key at fault (keys without a secret, a profile that is not there, a container URI on a
  // host the SDKs refuse, a token with a line break).
  static Result<std::shared_ptr<AwsCredentialChain>> Create(const AwsSettings& settings);

  // Credentials that hold for kRefreshMargin more at least; Unavailable naming the source and what
  // it answered (never its secrets) when a fetch fails.
  Result<AwsCredentials> Get(Clock::TimePoint deadline);
  // The credentials were refused: the next Get fetches others (static keys stay).
  void Drop();
  // STS's base URL for a web identity, once the region is known (IMDS's, at the first Discover).
  void SetStsEndpoint(const std::string& base) { sts_endpoint_ = base; }
  // The source in use, for logs and messages: "AWS_ACCESS_KEY_ID", "profile prod", "web identity
  // arn:aws:iam::1:role/etcd", "container credentials at http://...", "the instance role from IMDS at ...".
  const std::string& Source() const { return source_; }
  // The IMDS base URL the chain would ask (also for a region or instance ID).
  const std::string& imds_endpoint() const { return imds_endpoint_; }

  enum class Kind { kStatic, kWebIdentity, kContainer, kInstanceRole };

 private:
  AwsCredentialChain() = default;
  Result<TokenCache<AwsCredentials>::Fetched> Fetch(Clock::TimePoint deadline) const;

  Kind kind_ = Kind::kStatic;
  std::string source_;
  AwsCredentials static_;
  std::string web_identity_token_file_, role_arn_, role_session_name_, sts_endpoint_;
  std::string container_url_, container_token_, container_token_file_;
  std::string imds_endpoint_;
  std::unique_ptr<TokenCache<AwsCredentials>> cache_;
};

// IMDSv2 as AWS's SDKs speak it: one session token, asked for with a PUT (which a container's extra
// network hop cannot forward), then carried by every GET of `paths`; the answers in order.
// Unavailable naming the path and what IMDS answered.
Result<std::vector<std::string>> ImdsGet(const std::string& endpoint, const std::vector<std::string>& paths,
                                         Clock::TimePoint deadline);

// STS's AssumeRoleWithWebIdentityResponse (XML), and the JSON IMDS and the container endpoints
// answer (AccessKeyId, SecretAccessKey, Token, Expiration). Unavailable when the answer is not that
// or lacks a part, saying its size, never its content.
Result<AwsCredentials> ParseAssumeRoleWithWebIdentity(const std::string& xml);
Result<AwsCredentials> ParseCredentialsJson(const std::string& json,
                                            const std::string& source = "the credentials answer");

// An error answer of AWS's Query APIs (EC2's <Response><Errors><Error>, the others' <ErrorResponse>).
ApiError ParseAwsError(const std::string& xml);

}  // namespace quorate::cloud
