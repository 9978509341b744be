// Google credentials as Google's libraries find them (Application Default Credentials), one source
// of bearer tokens for every consumer: the gce provider asks for the Compute scope, a Cloud Storage
// store would ask for its own. Use:
//
//   auto google = cloud::GoogleTokenSource::Create({.scope = cloud::kComputeReadOnly});  // files read now
//   if (!google.ok()) return google.status();          // InvalidArgument: the operator's to fix, exit 2
//   auto token = (*google)->Token(deadline);            // "ya29...", for "Authorization: Bearer ..."
//   if (!token.ok()) return token.status();             // Unavailable: retry within --timeout
//   on a 401: (*google)->Drop();                        // the next Token fetches another
//
// The chain: the credentials file given (or GOOGLE_APPLICATION_CREDENTIALS): a service-account key
// (a JWT signed with its key, traded at its token_uri) or an external account (workload identity
// federation: a subject token from a file or a URL, exchanged at Google's STS, then, when the file
// names one, a service account impersonated); without a file, the metadata server (also how GKE's
// workload identity answers), only when it says Metadata-Flavor: Google. Tokens are kept until
// kRefreshMargin before they expire, on the Clock given. No message shows a token or a key.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "net/cloud/token_cache.h"
#include "quorate/clock.h"
#include "quorate/status.h"

namespace quorate::cloud {

inline constexpr char kComputeReadOnly[] = "https://www.googleapis.com/auth/compute.readonly";

// A service-account JSON key, as the Cloud console downloads it; the parts the JWT flow needs.
struct ServiceAccountKey {
  std::string client_email, private_key, private_key_id, token_uri, project_id;
};
// InvalidArgument when the text is not a service-account key with an RSA private key and a token_uri.
Result<ServiceAccountKey> ParseServiceAccountKey(const std::string& json);

// The JWT a service account trades for an access token (RFC 7523): RS256 over base64url(header) "."
// base64url(claims), valid for an hour from `now`, for `scope`, addressed to the key's token_uri.
Result<std::string> SignedJwt(const ServiceAccountKey& key, const std::string& scope,
                              std::chrono::system_clock::time_point now);

// An external account (workload identity federation) credential file, the parts quorate reads.
struct ExternalAccount {
  std::string audience, subject_token_type, token_url;
  std::string service_account_impersonation_url;  // empty: the federated token is used as it is
  std::string source_file;                        // credential_source.file, or
  std::string source_url;                         // credential_source.url, with
  std::vector<std::pair<std::string, std::string>> source_headers;
  std::string json_field;  // credential_source.format.subject_token_field_name; empty: the text as it is
};
// InvalidArgument when the text is not one quorate can use (AWS and executable sources are not).
Result<ExternalAccount> ParseExternalAccount(const std::string& json);

// An OAuth access token answer (the token endpoint's and the metadata server's share the shape).
struct AccessToken {
  std::string access_token;
  std::chrono::seconds expires_in{0};
};
// Unavailable when it is not one (no token, no positive expires_in, not Bearer), saying its size,
// never its content.
Result<AccessToken> ParseGoogleToken(const std::string& json);

// Google's error body: {"error":{"code","message","status","errors":[{"reason"}]}}, or the token
// endpoint's {"error":"invalid_grant","error_description":...}. Empty fields when it is neither.
struct GoogleError {
  std::string status, reason, message;
};
GoogleError ParseGoogleError(const std::string& json);

// scheme://host[:port] with nothing after it (a trailing slash dropped), or nullopt.
std::optional<std::string> GoogleBaseUrl(std::string url);

struct GoogleSettings {
  std::string credentials_file;   // a file given by a key; empty: GOOGLE_APPLICATION_CREDENTIALS
  std::string credentials_label;  // how the operator gave it, for messages ("--discovery credentials_file")
  std::string metadata_endpoint;  // a base URL; empty: http:// + GCE_METADATA_HOST, else http://169.254.169.254
  std::string scope = kComputeReadOnly;
  Clock* clock = nullptr;  // nullptr: RealClock()
};

class GoogleTokenSource {
 public:
  static Result<std::shared_ptr<GoogleTokenSource>> Create(const GoogleSettings& settings);

  Result<std::string> Token(Clock::TimePoint deadline);
  void Drop() { cache_->Drop(); }
  // "the service account etcd@p.iam.gserviceaccount.com", "the external account ...", "the metadata server at ...".
  const std::string& Source() const { return source_; }
  // The key file's project, empty for the other sources.
  const std::string& project_id() const { return project_id_; }
  const std::string& metadata_endpoint() const { return metadata_endpoint_; }
  // A metadata server value (a trailing line break dropped); Unavailable for an answer without
  // Metadata-Flavor: Google (a proxy or a captive portal is not the metadata server).
  Result<std::string> Metadata(const std::string& path, Clock::TimePoint deadline, size_t max_body = 4096) const;

 private:
  GoogleTokenSource() = default;
  Result<TokenCache<std::string>::Fetched> Fetch(Clock::TimePoint deadline) const;
  Result<AccessToken> ExternalAccountToken(Clock::TimePoint deadline) const;

  std::string source_, project_id_, metadata_endpoint_, scope_;
  std::optional<ServiceAccountKey> key_;
  std::optional<ExternalAccount> external_;
  std::unique_ptr<TokenCache<std::string>> cache_;
};

}  // namespace quorate::cloud
