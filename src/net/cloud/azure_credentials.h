// Azure credentials as Azure's SDKs find them (DefaultAzureCredential's order), one source of bearer
// tokens per resource for every consumer: the azure provider asks for its cloud's ARM, a Blob store
// would ask for https://storage.azure.com/. Use:
//
//   const cloud::AzureCloud* cloud = cloud::AzureCloudNamed("public");     // or usgovernment, china
//   auto azure = cloud::AzureTokenSource::Create({}, cloud->arm_resource);  // environment read now
//   if (!azure.ok()) return azure.status();           // InvalidArgument: the operator's to fix, exit 2
//   auto token = (*azure)->Token(deadline);           // for "Authorization: Bearer ..."
//   if (!token.ok()) return token.status();           // Unavailable: retry within --timeout
//   on a 401: (*azure)->Drop();                       // the next Token fetches another
//
// The chain: a client secret (the secret given, else AZURE_CLIENT_SECRET or ARM_CLIENT_SECRET, with
// the tenant and client IDs); workload identity (AKS: AZURE_FEDERATED_TOKEN_FILE, read at every
// exchange, with AZURE_CLIENT_ID and AZURE_TENANT_ID) at AZURE_AUTHORITY_HOST or the cloud's
// identity platform; else the VM's managed identity from IMDS (a client ID picks a user-assigned
// one). Tokens are kept until kRefreshMargin before they expire, on the Clock given. No message
// shows a secret or a token.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "net/cloud/request.h"
#include "net/cloud/token_cache.h"
#include "quorate/clock.h"
#include "quorate/status.h"

namespace quorate::cloud {

// Azure's clouds as terraform's azurerm spells their `environment`: ARM, the identity platform, the
// resource a token for that ARM names, and the DNS suffix of its storage accounts.
struct AzureCloud {
  const char* name;
  const char* arm_endpoint;
  const char* authority_host;
  const char* arm_resource;
  const char* storage_suffix;
};
// nullptr for a name that is none of public, usgovernment, china.
const AzureCloud* AzureCloudNamed(const std::string& name);

// A bearer token and until when it holds.
struct AzureToken {
  std::string access_token;
  std::chrono::system_clock::time_point expires;
};
// The token endpoint's answer (expires_in a number) or IMDS's (expires_in, expires_on as strings),
// `now` being when it was asked for; Unavailable when it is not one or lacks a part, saying its size,
// never its content.
Result<AzureToken> ParseAzureToken(const std::string& json, std::chrono::system_clock::time_point now);

// ARM's {"error": {"code", "message"}} and the token endpoints' {"error", "error_description"}.
ApiError ParseAzureError(const std::string& json);

struct AzureSettings {
  // Given by the operator (a provider's keys); empty: AZURE_TENANT_ID, AZURE_CLIENT_ID,
  // AZURE_CLIENT_SECRET, then ARM_TENANT_ID, ARM_CLIENT_ID, ARM_CLIENT_SECRET.
  std::string tenant_id, client_id, secret;
  std::string authority_host;  // scheme://host:port; empty: AZURE_AUTHORITY_HOST, else public Azure's
  std::string imds_endpoint = "http://169.254.169.254:80";
  std::string ca_file;  // the CA bundle the authority must chain to; empty: the system's
  Clock* clock = nullptr;  // nullptr: RealClock()
};

class AzureTokenSource {
 public:
  // `resource`: what the token is for ("https://management.azure.com/"). InvalidArgument naming the
  // key or variable at fault (a secret without its tenant, an ID that is not one).
  static Result<std::shared_ptr<AzureTokenSource>> Create(const AzureSettings& settings, const std::string& resource);

  Result<std::string> Token(Clock::TimePoint deadline);
  void Drop() { cache_->Drop(); }
  // "the client secret of client C", "the workload identity of client C", "the managed identity".
  const std::string& Source() const { return source_; }
  const std::string& authority_host() const { return settings_.authority_host; }

 private:
  AzureTokenSource() = default;
  Result<TokenCache<std::string>::Fetched> Fetch(Clock::TimePoint deadline) const;
  Result<std::string> Call(const std::string& base, const std::string& method, const std::string& target,
                           std::vector<std::pair<std::string, std::string>> headers, const std::string& body,
                           Clock::TimePoint deadline, const std::string& hint) const;

  AzureSettings settings_;
  std::string resource_, federated_token_file_, source_;
  std::unique_ptr<TokenCache<std::string>> cache_;
};

}  // namespace quorate::cloud
