#include "net/cloud/azure_credentials.h"

#include <algorithm>

#include <fmt/format.h>

#include "net/cloud/opaque.h"
#include "net/cloud/request.h"
#include "quorate/env.h"
#include "quorate/fs.h"
#include "quorate/http.h"
#include "quorate/json.h"
#include "quorate/member.h"
#include "net/cloud/request.h"
#include "quorate/text.h"

namespace quorate::cloud {
namespace {

using nlohmann::json;

constexpr char kImdsTokenVersion[] = "2018-02-01";
constexpr size_t kMaxAnswerBytes = 64 * 1024;
// Access tokens and federated tokens run to a few KB.
constexpr size_t kMaxTokenBytes = 16 * 1024;
constexpr char kIdChars[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-";

constexpr AzureCloud kClouds[] = {
    {"public", "https://management.azure.com:443", "https://login.microsoftonline.com:443",
     "https://management.azure.com/", "core.windows.net"},
    {"usgovernment", "https://management.usgovcloudapi.net:443", "https://login.microsoftonline.us:443",
     "https://management.usgovcloudapi.net/", "core.usgovcloudapi.net"},
    {"china", "https://management.chinacloudapi.cn:443", "https://login.chinacloudapi.cn:443",
     "https://management.chinacloudapi.cn/", "core.chinacloudapi.cn"},
};

std::string Lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::tolower(c); });
  return text;
}

std::string Text(const json& object, const char* field) {
  if (!object.is_object()) return "";
  auto it = object.find(field);
  return it != object.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// A whole number as JSON gives it or as a string of digits (IMDS sends numbers as strings).
std::optional<int64_t> Whole(const json& object, const char* field) {
  if (!object.is_object() || !object.contains(field)) return std::nullopt;
  const json& value = object.at(field);
  if (value.is_number_integer()) return value.get<int64_t>();
  if (!value.is_string()) return std::nullopt;
  const std::string text = value.get<std::string>();
  if (text.empty() || text.size() > 12 || text.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
  return std::stoll(text);
}

std::string FirstOf(const std::string& given, std::initializer_list<const char*> variables) {
  if (!given.empty()) return given;
  for (const char* v : variables) {
    if (std::string value = Env(v); !value.empty()) return value;
  }
  return "";
}

}  // namespace

const AzureCloud* AzureCloudNamed(const std::string& name) {
  for (const auto& c : kClouds) {
    if (name == c.name) return &c;
  }
  return nullptr;
}

Result<AzureToken> ParseAzureToken(const std::string& text, std::chrono::system_clock::time_point now) {
  auto doc = ParseForeignJson(text);
  if (!doc.ok() || !doc->is_object()) {
    // Not even its start is shown: a garbled answer may still hold a token.
    return Status::Unavailable(fmt::format("the token answer ({} bytes) is not a JSON object", text.size()));
  }
  AzureToken token;
  token.access_token = Text(*doc, "access_token");
  if (Status s = CheckOpaque(token.access_token, kMaxTokenBytes, "the token answer's access_token"); !s.ok()) return s;
  const std::string type = Text(*doc, "token_type");
  if (!type.empty() && Lower(type) != "bearer") {
    return Status::Unavailable(fmt::format("the token answer's token_type ({} bytes) is not Bearer", type.size()));
  }
  // Ten years at most: a lifetime past that is garbage, and would overflow the clock's arithmetic.
  constexpr int64_t kMaxSeconds = 10LL * 366 * 24 * 3600;
  if (auto on = Whole(*doc, "expires_on"); on && *on > 0) {
    const int64_t now_s = std::chrono::duration_cast<std::chrono::seconds>(now.time_since_epoch()).count();
    if (*on > now_s + kMaxSeconds) return Status::Unavailable("the token answer's expires_on is years away");
    token.expires = std::chrono::system_clock::time_point(std::chrono::seconds(*on));
    return token;
  }
  auto in = Whole(*doc, "expires_in");
  if (!in || *in > kMaxSeconds) return Status::Unavailable("the token answer has no expires_in or expires_on in seconds");
  token.expires = now + std::chrono::seconds(*in);
  return token;
}

ApiError ParseAzureError(const std::string& text) {
  auto doc = ParseForeignJson(text);
  if (!doc.ok() || !doc->is_object()) return {};
  auto error = doc->find("error");
  if (error != doc->end() && error->is_object()) return {Text(*error, "code"), Text(*error, "message")};
  return {Text(*doc, "error"), Text(*doc, "error_description")};
}

Result<std::shared_ptr<AzureTokenSource>> AzureTokenSource::Create(const AzureSettings& settings,
                                                                   const std::string& resource) {
  std::shared_ptr<AzureTokenSource> source(new AzureTokenSource());
  AzureTokenSource& a = *source;
  a.settings_ = settings;
  a.resource_ = resource;
  AzureSettings& s = a.settings_;
  const bool tenant_given = !s.tenant_id.empty();
  s.tenant_id = FirstOf(s.tenant_id, {"AZURE_TENANT_ID", "ARM_TENANT_ID"});
  s.client_id = FirstOf(s.client_id, {"AZURE_CLIENT_ID", "ARM_CLIENT_ID"});
  s.secret = FirstOf(s.secret, {"AZURE_CLIENT_SECRET", "ARM_CLIENT_SECRET"});
  a.federated_token_file_ = Env("AZURE_FEDERATED_TOKEN_FILE");
  if (s.authority_host.empty()) {
    s.authority_host = FirstOf("", {"AZURE_AUTHORITY_HOST"});
    while (!s.authority_host.empty() && s.authority_host.back() == '/') s.authority_host.pop_back();
    if (s.authority_host.empty()) s.authority_host = kClouds[0].authority_host;
    auto url = ParseUrl(s.authority_host);
    if (!url.ok() || s.authority_host.find('/', s.authority_host.find("://") + 3) != std::string::npos) {
      return Status::InvalidArgument(fmt::format("AZURE_AUTHORITY_HOST '{}' is not a base URL like "
                                                 "https://login.microsoftonline.com",
                                                 Printable(s.authority_host, 100)));
    }
  }
  for (const auto& [what, value] : {std::pair{"tenant_id (or AZURE_TENANT_ID, ARM_TENANT_ID)", &s.tenant_id},
                                    std::pair{"client_id (or AZURE_CLIENT_ID, ARM_CLIENT_ID)", &s.client_id}}) {
    if (!value->empty() && (value->size() > 253 || value->find_first_not_of(kIdChars) != std::string::npos)) {
      return Status::InvalidArgument(fmt::format("{} '{}' is not an ID or a domain", what, Printable(*value, 100)));
    }
  }
  if (!s.secret.empty()) {
    if (s.tenant_id.empty() || s.client_id.empty()) {
      return Status::InvalidArgument(
          "a client secret (secret_access_key, AZURE_CLIENT_SECRET or ARM_CLIENT_SECRET) needs tenant_id and "
          "client_id (or AZURE_TENANT_ID and AZURE_CLIENT_ID)");
    }
    if (Status c = CheckOpaque(s.secret, 1024, "the client secret"); !c.ok()) return Status::InvalidArgument(c.message());
    a.source_ = fmt::format("the client secret of client {}", s.client_id);
  } else if (!a.federated_token_file_.empty()) {
    if (s.tenant_id.empty() || s.client_id.empty()) {
      return Status::InvalidArgument(
          "AZURE_FEDERATED_TOKEN_FILE (workload identity) needs AZURE_CLIENT_ID and AZURE_TENANT_ID, as AKS sets them");
    }
    a.source_ = fmt::format("the workload identity of client {}", s.client_id);
  } else {
    if (tenant_given) {
      return Status::InvalidArgument(
          "tenant_id goes with secret_access_key or ARM_CLIENT_SECRET (a service principal's client secret) or "
          "AZURE_FEDERATED_TOKEN_FILE; a managed identity needs neither");
    }
    a.source_ = s.client_id.empty() ? "the managed identity"
                                    : fmt::format("the user-assigned managed identity {}", s.client_id);
  }
  AzureTokenSource* self = source.get();
  a.cache_ = std::make_unique<TokenCache<std::string>>(settings.clock ? *settings.clock : RealClock(),
                                                       [self](Clock::TimePoint deadline) { return self->Fetch(deadline); });
  return source;
}

Result<std::string> AzureTokenSource::Token(Clock::TimePoint deadline) {
  auto token = cache_->Get(deadline);
  if (!token.ok()) return token.status().Prefixed(source_);
  return token;
}

Result<std::string> AzureTokenSource::Call(const std::string& base, const std::string& method, const std::string& target,
                                           std::vector<std::pair<std::string, std::string>> headers,
                                           const std::string& body, Clock::TimePoint deadline,
                                           const std::string& hint) const {
  HttpRequest request = CloudRequest(base, method, target, std::move(headers), body, deadline, kMaxAnswerBytes);
  if (base.rfind("https://", 0) == 0) request.tls.trusted_ca_file = settings_.ca_file;
  const std::string what = fmt::format("{} {}{}", method, base, Printable(target.substr(0, target.find('?')), 200));
  HttpResult result = HttpSendThrottled(request, RealClock());
  if (!result.ok()) {
    Status s = result.ToStatus(what);
    if (result.failure == HttpFailure::kTlsUntrusted && settings_.ca_file.empty()) {
      return Status::InvalidArgument(s.message() + "; give ca_file= the CA bundle it chains to");
    }
    return s;
  }
  if (result.response.status == 200) return std::move(result.response.body);
  ApiError error = ParseAzureError(result.response.body);
  std::string text = fmt::format("{}: HTTP {}", what, result.response.status);
  if (!error.code.empty()) text += " " + Printable(error.code, 64);
  if (!error.message.empty()) text += ": " + Printable(error.message, 300);
  if (result.response.status == 400 || result.response.status == 401) text += hint;
  return Status::Unavailable(text);
}

Result<TokenCache<std::string>::Fetched> AzureTokenSource::Fetch(Clock::TimePoint deadline) const {
  const auto now = std::chrono::system_clock::now();
  const std::string scope = PercentEncode(resource_ + ".default");
  const std::string token_path = fmt::format("/{}/oauth2/v2.0/token", settings_.tenant_id);
  Result<std::string> body = Status::Internal("no source");
  if (!settings_.secret.empty()) {
    // In the body, never the URL: the secret stays out of access logs and of our messages.
    body = Call(settings_.authority_host, "POST", token_path,
                {{"Content-Type", "application/x-www-form-urlencoded"}, {"Accept", "application/json"}},
                fmt::format("grant_type=client_credentials&client_id={}&client_secret={}&scope={}",
                            PercentEncode(settings_.client_id), PercentEncode(settings_.secret),
                            scope),
                deadline, "; is the client secret current, for this client_id and tenant_id?");
  } else if (!federated_token_file_.empty()) {
    // Read at every exchange: the kubelet rotates the projected token.
    auto read = ReadFile(federated_token_file_, kMaxTokenBytes + 2);
    if (!read.ok()) return Status::Unavailable(fmt::format("AZURE_FEDERATED_TOKEN_FILE: {}", read.status().message()));
    std::string assertion = std::move(*read);
    while (!assertion.empty() && (assertion.back() == '\n' || assertion.back() == '\r')) assertion.pop_back();
    if (Status s = CheckOpaque(assertion, kMaxTokenBytes, "the token in AZURE_FEDERATED_TOKEN_FILE"); !s.ok()) return s;
    body = Call(settings_.authority_host, "POST", token_path,
                {{"Content-Type", "application/x-www-form-urlencoded"}, {"Accept", "application/json"}},
                fmt::format("grant_type=client_credentials&client_id={}&client_assertion_type={}&client_assertion={}"
                            "&scope={}",
                            PercentEncode(settings_.client_id),
                            PercentEncode("urn:ietf:params:oauth:client-assertion-type:jwt-bearer"),
                            PercentEncode(assertion), scope),
                deadline, "; does the app registration or managed identity trust this service account (a federated "
                          "identity credential)?");
  } else {
    std::string target = fmt::format("/metadata/identity/oauth2/token?api-version={}&resource={}", kImdsTokenVersion,
                                     PercentEncode(resource_));
    if (!settings_.client_id.empty()) target += "&client_id=" + PercentEncode(settings_.client_id);
    body = Call(settings_.imds_endpoint, "GET", target, {{"Metadata", "true"}}, "", deadline,
                "; does the VM have a managed identity (else give tenant_id, client_id and secret_access_key)?");
  }
  if (!body.ok()) return body.status();
  auto token = ParseAzureToken(*body, now);
  if (!token.ok()) return token.status();
  return TokenCache<std::string>::Fetched{std::move(token->access_token), LifetimeUntil(token->expires)};
}

}  // namespace quorate::cloud
