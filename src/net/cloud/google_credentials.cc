#include "net/cloud/google_credentials.h"

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include <fmt/format.h>

#include "net/cloud/opaque.h"
#include "net/cloud/request.h"
#include "quorate/duration.h"
#include "quorate/env.h"
#include "quorate/fs.h"
#include "quorate/http.h"
#include "quorate/json.h"
#include "net/cloud/request.h"
#include "quorate/text.h"

namespace quorate::cloud {
namespace {

constexpr size_t kMaxAnswerBytes = 64 * 1024;
constexpr size_t kMaxCredentialFileBytes = 64 * 1024;
constexpr size_t kMaxTokenBytes = 16 * 1024;
constexpr char kDefaultMetadata[] = "http://169.254.169.254";
constexpr char kDefaultTokenUri[] = "https://oauth2.googleapis.com/token";

std::string Text(const nlohmann::json& object, const char* field) {
  if (!object.is_object()) return "";
  auto it = object.find(field);
  return it != object.end() && it->is_string() ? it->get<std::string>() : std::string();
}

std::string Base64Url(const std::string& bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3) + 1, '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(bytes.data()), static_cast<int>(bytes.size()));
  out.resize(static_cast<size_t>(n));
  while (!out.empty() && out.back() == '=') out.pop_back();
  for (char& c : out) {
    if (c == '+') c = '-';
    if (c == '/') c = '_';
  }
  return out;
}


using PrivateKey = std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)>;

// The PEM key of a key file (unencrypted, as Google issues them); empty when it is not one.
PrivateKey LoadPrivateKey(const std::string& pem) {
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())), BIO_free);
  // No passphrase: OpenSSL's default would ask for one on the terminal.
  pem_password_cb* no_passphrase = [](char*, int, int, void*) { return 0; };
  return PrivateKey(bio ? PEM_read_bio_PrivateKey(bio.get(), nullptr, no_passphrase, nullptr) : nullptr, EVP_PKEY_free);
}

// An http(s) URL split into its base and its path (with query), or nullopt.
std::optional<std::pair<std::string, std::string>> SplitUrl(const std::string& url) {
  const size_t scheme_end = url.find("://");
  if (scheme_end == std::string::npos) return std::nullopt;
  const size_t path = url.find('/', scheme_end + 3);
  auto base = GoogleBaseUrl(url.substr(0, path));
  if (!base || (path != std::string::npos && !IsPrintable(url.substr(path))) ||
      url.find_first_of(" \r\n") != std::string::npos) {
    return std::nullopt;
  }
  return std::pair{*base, path == std::string::npos ? std::string("/") : url.substr(path)};
}

// One POST or GET of a token flow: the body of a 200, else Unavailable naming the call and the
// answer's error (never the form: it carries a JWT or a subject token).
Result<std::string> TokenCall(const std::string& url, const std::string& method,
                              std::vector<std::pair<std::string, std::string>> headers, const std::string& body,
                              Clock::TimePoint deadline, const std::string& what) {
  auto split = SplitUrl(url);
  if (!split) return Status::Unavailable(fmt::format("{}: '{}' is not an http(s) URL", what, Printable(url, 200)));
  HttpResult result = HttpSendThrottled(
      CloudRequest(split->first, method, split->second, std::move(headers), body, deadline, kMaxAnswerBytes),
      RealClock());
  if (!result.ok()) return result.ToStatus(what);
  if (result.response.status != 200) {
    GoogleError error = ParseGoogleError(result.response.body);
    return Status::Unavailable(fmt::format("{}: HTTP {} {}{}{}", what, result.response.status, Printable(error.status, 64),
                                           error.message.empty() ? "" : ": " + Printable(error.message, 200),
                                           result.response.status == 400 || result.response.status == 401
                                               ? " (is the key or the federation's provider deleted or disabled?)"
                                               : ""));
  }
  return result.response.body;
}

}  // namespace

std::optional<std::string> GoogleBaseUrl(std::string url) {
  while (!url.empty() && url.back() == '/') url.pop_back();
  const size_t colon = url.find("://");
  if (colon == std::string::npos) return std::nullopt;
  const std::string scheme = url.substr(0, colon);
  if (scheme != "http" && scheme != "https") return std::nullopt;
  const std::string rest = url.substr(colon + 3);
  if (rest.empty() || rest.find_first_of("/?#@ ") != std::string::npos || !IsPrintable(rest)) return std::nullopt;
  return url;
}

Result<ServiceAccountKey> ParseServiceAccountKey(const std::string& json) {
  auto doc = ParseForeignJson(json);
  if (!doc.ok() || !doc->is_object()) {
    return Status::InvalidArgument("is not a JSON key file (it is not a JSON object)");
  }
  if (Text(*doc, "type") != "service_account") {
    return Status::InvalidArgument(fmt::format("is a '{}' credential, not a service-account key (\"type\": "
                                               "\"service_account\"); create one with gcloud iam service-accounts keys create",
                                               Printable(Text(*doc, "type"), 40)));
  }
  ServiceAccountKey key{Text(*doc, "client_email"), Text(*doc, "private_key"), Text(*doc, "private_key_id"),
                        Text(*doc, "token_uri"), Text(*doc, "project_id")};
  if (key.token_uri.empty()) key.token_uri = kDefaultTokenUri;
  if (key.client_email.empty() || key.private_key.empty()) {
    return Status::InvalidArgument("lacks client_email or private_key");
  }
  if (!SplitUrl(key.token_uri)) {
    return Status::InvalidArgument(fmt::format("has token_uri '{}', not an http(s) URL", Printable(key.token_uri, 100)));
  }
  PrivateKey pkey = LoadPrivateKey(key.private_key);
  if (!pkey || EVP_PKEY_base_id(pkey.get()) != EVP_PKEY_RSA) {
    return Status::InvalidArgument("has a private_key that is not a PEM RSA key");
  }
  return key;
}

Result<std::string> SignedJwt(const ServiceAccountKey& key, const std::string& scope,
                              std::chrono::system_clock::time_point now) {
  nlohmann::json header = {{"alg", "RS256"}, {"typ", "JWT"}};
  if (!key.private_key_id.empty()) header["kid"] = key.private_key_id;
  const auto iat = std::chrono::duration_cast<std::chrono::seconds>(now.time_since_epoch()).count();
  const nlohmann::json claims = {
      {"iss", key.client_email}, {"scope", scope}, {"aud", key.token_uri}, {"iat", iat}, {"exp", iat + 3600}};
  const std::string input = Base64Url(header.dump()) + "." + Base64Url(claims.dump());

  PrivateKey pkey = LoadPrivateKey(key.private_key);
  if (!pkey) return Status::InvalidArgument("the service-account key's private_key is not a PEM key");
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  size_t size = 0;
  if (!ctx || EVP_DigestSignInit(ctx.get(), nullptr, EVP_sha256(), nullptr, pkey.get()) != 1 ||
      EVP_DigestSign(ctx.get(), nullptr, &size, reinterpret_cast<const unsigned char*>(input.data()), input.size()) != 1) {
    return Status::Internal("signing the service-account JWT failed");
  }
  std::string signature(size, '\0');
  if (EVP_DigestSign(ctx.get(), reinterpret_cast<unsigned char*>(signature.data()), &size,
                     reinterpret_cast<const unsigned char*>(input.data()), input.size()) != 1) {
    return Status::Internal("signing the service-account JWT failed");
  }
  signature.resize(size);
  return input + "." + Base64Url(signature);
}

Result<ExternalAccount> ParseExternalAccount(const std::string& json) {
  auto doc = ParseForeignJson(json);
  if (!doc.ok() || !doc->is_object() || Text(*doc, "type") != "external_account") {
    return Status::InvalidArgument("is not an external account credential file (\"type\": \"external_account\")");
  }
  ExternalAccount a{Text(*doc, "audience"), Text(*doc, "subject_token_type"), Text(*doc, "token_url"),
                    Text(*doc, "service_account_impersonation_url"), "", "", {}, ""};
  if (a.token_url.empty()) a.token_url = "https://sts.googleapis.com/v1/token";
  if (a.audience.empty() || a.subject_token_type.empty()) {
    return Status::InvalidArgument("lacks audience or subject_token_type");
  }
  for (const auto& [what, url] : {std::pair{"token_url", a.token_url},
                                  std::pair{"service_account_impersonation_url", a.service_account_impersonation_url}}) {
    if (!url.empty() && !SplitUrl(url)) {
      return Status::InvalidArgument(fmt::format("has {} '{}', not an http(s) URL", what, Printable(url, 200)));
    }
  }
  auto source = doc->find("credential_source");
  if (source == doc->end() || !source->is_object()) return Status::InvalidArgument("lacks credential_source");
  a.source_file = Text(*source, "file");
  a.source_url = Text(*source, "url");
  if (a.source_file.empty() == a.source_url.empty()) {
    return Status::InvalidArgument(
        "has a credential_source that is not a file or a url (AWS and executable sources are not supported: "
        "on AWS, use provider=aws)");
  }
  if (!a.source_url.empty() && !SplitUrl(a.source_url)) {
    return Status::InvalidArgument(
        fmt::format("has credential_source.url '{}', not an http(s) URL", Printable(a.source_url, 200)));
  }
  if (auto headers = source->find("headers"); headers != source->end() && headers->is_object()) {
    for (const auto& [k, v] : headers->items()) {
      if (!v.is_string() || !CheckOpaque(k, 256, "a header name").ok() || !IsPrintable(v.get<std::string>()) ||
          v.get<std::string>().find_first_of("\r\n") != std::string::npos) {
        return Status::InvalidArgument("has a credential_source header that is not one line of text");
      }
      a.source_headers.emplace_back(k, v.get<std::string>());
    }
  }
  if (auto format = source->find("format"); format != source->end() && format->is_object()) {
    const std::string type = Text(*format, "type");
    if (type == "json") {
      a.json_field = Text(*format, "subject_token_field_name");
      if (a.json_field.empty()) return Status::InvalidArgument("has format json without subject_token_field_name");
    } else if (!type.empty() && type != "text") {
      return Status::InvalidArgument(fmt::format("has format '{}', not text or json", Printable(type, 32)));
    }
  }
  return a;
}

Result<AccessToken> ParseGoogleToken(const std::string& json) {
  auto doc = ParseForeignJson(json);
  if (!doc.ok() || !doc->is_object()) {
    // Not even its start is shown: a garbled answer may still hold a token.
    return Status::Unavailable(fmt::format("the token answer ({} bytes) is not a JSON object", json.size()));
  }
  AccessToken token;
  token.access_token = Text(*doc, "access_token");
  auto expires = doc->find("expires_in");
  const std::string type = Text(*doc, "token_type");
  if (token.access_token.empty() || expires == doc->end() || !expires->is_number_integer() ||
      expires->get<int64_t>() <= 0 || expires->get<int64_t>() > 7 * 24 * 3600 ||
      (!type.empty() && type != "Bearer" && type != "bearer")) {
    return Status::Unavailable("the token answer lacks an access_token, a positive expires_in or token_type Bearer");
  }
  if (Status s = CheckOpaque(token.access_token, kMaxTokenBytes, "the token answer's access_token"); !s.ok()) return s;
  token.expires_in = std::chrono::seconds(expires->get<int64_t>());
  return token;
}

GoogleError ParseGoogleError(const std::string& json) {
  auto doc = ParseForeignJson(json);
  if (!doc.ok() || !doc->is_object()) return {};
  auto error = doc->find("error");
  if (error == doc->end()) return {};
  if (error->is_string()) return {error->get<std::string>(), "", Text(*doc, "error_description")};
  if (!error->is_object()) return {};
  GoogleError out{Text(*error, "status"), "", Text(*error, "message")};
  auto errors = error->find("errors");
  if (errors != error->end() && errors->is_array() && !errors->empty() && (*errors)[0].is_object()) {
    out.reason = Text((*errors)[0], "reason");
  }
  return out;
}

Result<std::shared_ptr<GoogleTokenSource>> GoogleTokenSource::Create(const GoogleSettings& settings) {
  std::shared_ptr<GoogleTokenSource> google(new GoogleTokenSource());
  GoogleTokenSource& g = *google;
  g.scope_ = settings.scope;
  if (!settings.metadata_endpoint.empty()) {
    g.metadata_endpoint_ = settings.metadata_endpoint;
  } else if (const std::string host = Env("GCE_METADATA_HOST"); !host.empty()) {
    auto base = GoogleBaseUrl("http://" + host);
    if (!base) {
      return Status::InvalidArgument(
          fmt::format("GCE_METADATA_HOST '{}' is not a host[:port] like 169.254.169.254", Printable(host, 100)));
    }
    g.metadata_endpoint_ = *base;
  } else {
    g.metadata_endpoint_ = kDefaultMetadata;
  }
  // Application Default Credentials' first place, as Google's libraries read it.
  std::string file = settings.credentials_file;
  std::string label = settings.credentials_label;
  if (file.empty()) {
    file = Env("GOOGLE_APPLICATION_CREDENTIALS");
    label = "GOOGLE_APPLICATION_CREDENTIALS";
  }
  if (file.empty()) {
    g.source_ = "the metadata server at " + g.metadata_endpoint_;
  } else {
    auto text = ReadFile(file, kMaxCredentialFileBytes);
    if (!text.ok()) return Status::InvalidArgument(fmt::format("{}: {}", label, text.status().message()));
    auto doc = ParseForeignJson(*text);
    if (doc.ok() && doc->is_object() && Text(*doc, "type") == "external_account") {
      auto account = ParseExternalAccount(*text);
      if (!account.ok()) {
        return Status::InvalidArgument(fmt::format("{} {} {}", label, Printable(file, 200), account.status().message()));
      }
      g.external_ = std::move(*account);
      g.source_ = "the external account of " + Printable(file, 200);
    } else {
      auto key = ParseServiceAccountKey(*text);
      if (!key.ok()) {
        return Status::InvalidArgument(fmt::format("{} {} {}", label, Printable(file, 200), key.status().message()));
      }
      g.project_id_ = key->project_id;
      g.source_ = "the service account " + Printable(key->client_email, 100);
      g.key_ = std::move(*key);
    }
  }
  GoogleTokenSource* self = google.get();
  g.cache_ = std::make_unique<TokenCache<std::string>>(settings.clock ? *settings.clock : RealClock(),
                                                       [self](Clock::TimePoint deadline) { return self->Fetch(deadline); });
  return google;
}

Result<std::string> GoogleTokenSource::Token(Clock::TimePoint deadline) {
  auto token = cache_->Get(deadline);
  if (!token.ok()) return token.status().Prefixed(source_);
  return token;
}

Result<std::string> GoogleTokenSource::Metadata(const std::string& path, Clock::TimePoint deadline,
                                                size_t max_body) const {
  HttpRequest request =
      CloudRequest(metadata_endpoint_, "GET", path, {{"Metadata-Flavor", "Google"}}, "", deadline, max_body);
  const std::string what = fmt::format("the metadata server at {} (GET {})", metadata_endpoint_, path);
  HttpResult result = HttpSendThrottled(request, RealClock());
  if (!result.ok()) return result.ToStatus(what);
  if (result.response.Header("Metadata-Flavor") != "Google") {
    return Status::Unavailable(
        fmt::format("{}: the answer lacks Metadata-Flavor: Google, so it is not from a metadata server", what));
  }
  if (result.response.status != 200) return Status::Unavailable(fmt::format("{}: HTTP {}", what, result.response.status));
  // Values are served bare; a line break after one (a proxy, a test server) is not part of it.
  std::string value = result.response.body;
  while (!value.empty() && (value.back() == '\n' || value.back() == '\r')) value.pop_back();
  return value;
}

Result<TokenCache<std::string>::Fetched> GoogleTokenSource::Fetch(Clock::TimePoint deadline) const {
  Result<AccessToken> token = Status::Internal("no source");
  if (key_) {
    auto jwt = SignedJwt(*key_, scope_, std::chrono::system_clock::now());
    if (!jwt.ok()) return jwt.status();
    auto body = TokenCall(key_->token_uri, "POST", {{"Content-Type", "application/x-www-form-urlencoded"}},
                          "grant_type=" + PercentEncode("urn:ietf:params:oauth:grant-type:jwt-bearer") + "&assertion=" + *jwt,
                          deadline, fmt::format("the token exchange at {}", Printable(key_->token_uri, 100)));
    if (!body.ok()) return body.status();
    token = ParseGoogleToken(*body);
  } else if (external_) {
    token = ExternalAccountToken(deadline);
  } else {
    auto body = Metadata("/computeMetadata/v1/instance/service-accounts/default/token", deadline, kMaxAnswerBytes);
    if (!body.ok()) {
      return body.status().Prefixed(
          "no credentials file (nor GOOGLE_APPLICATION_CREDENTIALS) and no token from the instance's service account");
    }
    token = ParseGoogleToken(*body);
  }
  if (!token.ok()) return token.status();
  return TokenCache<std::string>::Fetched{std::move(token->access_token), token->expires_in};
}

Result<AccessToken> GoogleTokenSource::ExternalAccountToken(Clock::TimePoint deadline) const {
  const ExternalAccount& a = *external_;
  std::string subject;
  if (!a.source_file.empty()) {
    // Read at every exchange: the platform rotates it.
    auto read = ReadFile(a.source_file, kMaxTokenBytes);
    if (!read.ok()) return Status::Unavailable(fmt::format("credential_source.file: {}", read.status().message()));
    subject = std::move(*read);
  } else {
    auto body = TokenCall(a.source_url, "GET", a.source_headers, "", deadline,
                          fmt::format("the subject token at {}", Printable(a.source_url, 200)));
    if (!body.ok()) return body.status();
    subject = std::move(*body);
  }
  if (!a.json_field.empty()) {
    auto doc = ParseForeignJson(subject);
    subject = doc.ok() ? Text(*doc, a.json_field.c_str()) : "";
  }
  while (!subject.empty() && (subject.back() == '\n' || subject.back() == '\r')) subject.pop_back();
  if (Status s = CheckOpaque(subject, kMaxTokenBytes, "the external account's subject token"); !s.ok()) return s;
  // RFC 8693's token exchange at Google's STS, as Google's libraries send it.
  const std::string scope = a.service_account_impersonation_url.empty()
                                ? scope_
                                : std::string("https://www.googleapis.com/auth/cloud-platform");
  const std::string form =
      fmt::format("grant_type={}&audience={}&scope={}&requested_token_type={}&subject_token_type={}&subject_token={}",
                  PercentEncode("urn:ietf:params:oauth:grant-type:token-exchange"), PercentEncode(a.audience),
                  PercentEncode(scope), PercentEncode("urn:ietf:params:oauth:token-type:access_token"),
                  PercentEncode(a.subject_token_type), PercentEncode(subject));
  auto body = TokenCall(a.token_url, "POST", {{"Content-Type", "application/x-www-form-urlencoded"}}, form, deadline,
                        fmt::format("the token exchange at {}", Printable(a.token_url, 200)));
  if (!body.ok()) return body.status();
  auto federated = ParseGoogleToken(*body);
  if (!federated.ok() || a.service_account_impersonation_url.empty()) return federated;
  // The federated token stands in for the service account the file names, for the scope asked.
  auto answer = TokenCall(a.service_account_impersonation_url, "POST",
                          {{"Content-Type", "application/json"}, {"Authorization", "Bearer " + federated->access_token}},
                          nlohmann::json{{"scope", {scope_}}, {"lifetime", "3600s"}}.dump(), deadline,
                          "the service account's impersonation (iam.serviceAccounts.getAccessToken)");
  if (!answer.ok()) return answer.status();
  auto doc = ParseForeignJson(*answer);
  const std::string access = doc.ok() ? Text(*doc, "accessToken") : "";
  auto expires = ParseUtcTimePrefix(doc.ok() ? Text(*doc, "expireTime") : "");
  if (Status s = CheckOpaque(access, kMaxTokenBytes, "the impersonation answer's accessToken"); !s.ok()) return s;
  if (!expires) return Status::Unavailable("the impersonation answer lacks an expireTime");
  return AccessToken{access, std::chrono::duration_cast<std::chrono::seconds>(LifetimeUntil(*expires))};
}

}  // namespace quorate::cloud
