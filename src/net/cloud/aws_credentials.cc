#include "net/cloud/aws_credentials.h"

#include <pugixml.hpp>

#include <map>
#include <optional>

#include <fmt/format.h>

#include "net/cloud/opaque.h"
#include "net/cloud/request.h"
#include "quorate/duration.h"
#include "quorate/env.h"
#include "quorate/fs.h"
#include "quorate/http.h"
#include "quorate/json.h"
#include "quorate/member.h"
#include "net/cloud/request.h"
#include "quorate/text.h"

namespace quorate::cloud {
namespace {

constexpr size_t kMaxAnswerBytes = 64 * 1024;
constexpr size_t kMaxKeyBytes = 128;
// Session tokens run to a few KB; IMDSv2's session token is 56 bytes.
constexpr size_t kMaxTokenBytes = 16 * 1024;
constexpr size_t kMaxSharedFileBytes = 1 << 20;
constexpr char kDefaultImds[] = "http://169.254.169.254:80";
constexpr char kEcsHost[] = "http://169.254.170.2";
constexpr char kRoleNameChars[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+=,.@_-";

pugi::xml_node Root(pugi::xml_document& doc, const std::string& xml, const char* name) {
  // No DOCTYPE, so no entity the answer defines; character references are decoded as XML says.
  if (!doc.load_buffer(xml.data(), xml.size(), pugi::parse_default & ~pugi::parse_doctype)) return {};
  return doc.child(name);
}

// "2026-11-24T14:00:00Z" (IMDS) or with a fraction (STS).
std::optional<std::chrono::system_clock::time_point> ParseIsoTime(const std::string& text) {
  if (text.empty() || text.back() != 'Z') return std::nullopt;
  return ParseUtcTimePrefix(text);
}

Status CheckKeys(const AwsCredentials& c, const std::string& source) {
  for (const auto& [what, value, max] : {std::tuple{"access key", &c.access_key, kMaxKeyBytes},
                                         std::tuple{"secret", &c.secret, kMaxKeyBytes},
                                         std::tuple{"session token", &c.session_token, kMaxTokenBytes}}) {
    if (value->empty()) continue;
    if (Status s = CheckOpaque(*value, max, fmt::format("{}'s {}", source, what)); !s.ok()) return s;
  }
  return Status::Ok();
}

Result<AwsCredentials> Checked(AwsCredentials c, const std::string& expiration, const std::string& source) {
  auto when = ParseIsoTime(expiration);
  if (c.access_key.empty() || c.secret.empty() || !when) {
    return Status::Unavailable(fmt::format("{} lacks an access key, a secret or an ISO 8601 Expiration", source));
  }
  if (Status s = CheckKeys(c, source); !s.ok()) return s;
  c.expiration = *when;
  return c;
}

// A call without SigV4 (STS's web identity call, IMDS, the container endpoint): the body when 200.
Result<std::string> Unsigned(const std::string& base, const std::string& method, const std::string& target,
                          std::vector<std::pair<std::string, std::string>> headers, Clock::TimePoint deadline,
                          const std::string& what, const std::string& body = "") {
  HttpResult result = HttpSendThrottled(
      CloudRequest(base, method, target, std::move(headers), body, deadline, kMaxAnswerBytes), RealClock());
  if (!result.ok()) return result.ToStatus(what);
  if (result.response.status != 200) {
    ApiError error = ParseAwsError(result.response.body);
    return Status::Unavailable(fmt::format("{}: HTTP {} {}{}", what, result.response.status, Printable(error.code, 64),
                                           error.message.empty() ? "" : ": " + Printable(error.message, 200)));
  }
  return result.response.body;
}

class ImdsSession {
 public:
  ImdsSession(std::string endpoint, Clock::TimePoint deadline) : endpoint_(std::move(endpoint)), deadline_(deadline) {}

  Result<std::string> Get(const std::string& path) {
    if (token_.empty()) {
      auto token = Unsigned(endpoint_, "PUT", "/latest/api/token", {{"X-aws-ec2-metadata-token-ttl-seconds", "21600"}},
                         deadline_, "PUT /latest/api/token");
      if (!token.ok()) return token.status();
      if (Status s = CheckOpaque(*token, 4096, "the session token PUT /latest/api/token answered"); !s.ok()) return s;
      token_ = std::move(*token);
    }
    return Unsigned(endpoint_, "GET", path, {{"X-aws-ec2-metadata-token", token_}}, deadline_, "GET " + path);
  }

 private:
  std::string endpoint_, token_;
  Clock::TimePoint deadline_;
};

// scheme://host[:port] with nothing after it, or nullopt.
std::optional<std::string> BaseUrl(std::string url) {
  while (!url.empty() && url.back() == '/') url.pop_back();
  auto parsed = ParseUrl(url);
  const size_t authority = url.find("://");
  if (!parsed.ok() || authority == std::string::npos || url.find('/', authority + 3) != std::string::npos) {
    return std::nullopt;
  }
  return url;
}

// One profile's keys from the shared files: `[name]` in the credentials file, `[profile name]` (or
// `[default]`) in the config file; the credentials file's value wins, as in the SDKs.
using Profile = std::map<std::string, std::string>;

Result<std::map<std::string, Profile>> ReadSharedFile(const std::string& path, bool config, const char* variable) {
  std::map<std::string, Profile> profiles;
  if (!PathExists(path)) return profiles;
  auto text = ReadFile(path, kMaxSharedFileBytes);
  if (!text.ok()) return Status::InvalidArgument(fmt::format("{} {}: {}", variable, path, text.status().message()));
  std::string section;
  size_t number = 0;
  for (size_t from = 0; from < text->size();) {
    const size_t end = std::min(text->find('\n', from), text->size());
    std::string line = text->substr(from, end - from);
    from = end + 1;
    ++number;
    auto trim = [](std::string s) {
      const size_t a = s.find_first_not_of(" \t\r");
      const size_t b = s.find_last_not_of(" \t\r");
      return a == std::string::npos ? std::string() : s.substr(a, b - a + 1);
    };
    line = trim(line);
    if (line.empty() || line[0] == '#' || line[0] == ';') continue;
    if (line.front() == '[') {
      if (line.back() != ']') {
        return Status::InvalidArgument(fmt::format("{} {} line {}: a section header without ']'", variable, path, number));
      }
      section = trim(line.substr(1, line.size() - 2));
      if (config && section.rfind("profile ", 0) == 0) section = trim(section.substr(8));
      continue;
    }
    const size_t eq = line.find('=');
    if (eq == std::string::npos || section.empty()) continue;  // a nested block's lines, or before any section
    profiles[section][trim(line.substr(0, eq))] = trim(line.substr(eq + 1));
  }
  return profiles;
}

std::string HomeFile(const char* variable, const char* under_home) {
  if (std::string path = Env(variable); !path.empty()) return path;
  const std::string home = Env("HOME");
  return home.empty() ? std::string() : home + "/" + under_home;
}

// The profile `name` of both files merged; nullopt when neither has it.
Result<std::optional<Profile>> LoadProfile(const std::string& name) {
  auto creds = ReadSharedFile(HomeFile("AWS_SHARED_CREDENTIALS_FILE", ".aws/credentials"), false,
                              "AWS_SHARED_CREDENTIALS_FILE");
  if (!creds.ok()) return creds.status();
  auto config = ReadSharedFile(HomeFile("AWS_CONFIG_FILE", ".aws/config"), true, "AWS_CONFIG_FILE");
  if (!config.ok()) return config.status();
  std::optional<Profile> out;
  for (auto* file : {&*config, &*creds}) {
    auto it = file->find(name);
    if (it == file->end()) continue;
    if (!out) out.emplace();
    for (const auto& [k, v] : it->second) (*out)[k] = v;
  }
  return out;
}

bool AllowedContainerHost(const std::string& url) {
  const size_t colon = url.find("://");
  if (colon == std::string::npos) return false;
  const std::string scheme = url.substr(0, colon);
  std::string h = url.substr(colon + 3, url.find('/', colon + 3) - colon - 3);
  if (h.empty() || (scheme != "http" && scheme != "https")) return false;
  if (scheme == "https") return true;
  // Over plain HTTP the SDKs send the authorization token only to the task metadata addresses of
  // ECS and EKS Pod Identity, or to the host itself.
  if (h.front() == '[') {
    h = h.substr(1, h.find(']') - 1);
  } else {
    h = h.substr(0, h.find(':'));
  }
  return h == "169.254.170.2" || h == "169.254.170.23" || h == "fd00:ec2::23" || h == "localhost" ||
         h.rfind("127.", 0) == 0 || h == "::1";
}

}  // namespace

std::string AwsEndpoint(const std::string& service, const std::string& region) {
  std::string suffix = "amazonaws.com";
  if (region.rfind("cn-", 0) == 0) suffix = "amazonaws.com.cn";
  if (region.rfind("us-iso-", 0) == 0) suffix = "c2s.ic.gov";
  if (region.rfind("us-isob-", 0) == 0) suffix = "sc2s.sgov.gov";
  return fmt::format("https://{}.{}.{}:443", service, region, suffix);
}

Result<std::string> CheckAwsRegion(const std::string& text) {
  if (text.empty() || text.size() > 32 || text.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789-") != std::string::npos) {
    return Status::Unavailable(fmt::format("'{}' is not an AWS region name (like eu-west-1)", Printable(text, 40)));
  }
  return text;
}

Result<std::shared_ptr<AwsCredentialChain>> AwsCredentialChain::Create(const AwsSettings& settings) {
  std::shared_ptr<AwsCredentialChain> chain(new AwsCredentialChain());
  AwsCredentialChain& c = *chain;
  c.imds_endpoint_ = settings.imds_endpoint.empty() ? Env("AWS_EC2_METADATA_SERVICE_ENDPOINT") : settings.imds_endpoint;
  if (c.imds_endpoint_.empty()) c.imds_endpoint_ = kDefaultImds;
  if (auto base = BaseUrl(c.imds_endpoint_)) {
    c.imds_endpoint_ = *base;
  } else {
    return Status::InvalidArgument(fmt::format("AWS_EC2_METADATA_SERVICE_ENDPOINT '{}' is not a URL like {}",
                                               Printable(c.imds_endpoint_, 100), kDefaultImds));
  }
  c.sts_endpoint_ = settings.sts_endpoint;
  if (c.sts_endpoint_.empty()) {
    c.sts_endpoint_ = settings.region.empty() ? "https://sts.amazonaws.com:443" : AwsEndpoint("sts", settings.region);
  }
  c.role_session_name_ = Env("AWS_ROLE_SESSION_NAME");
  if (c.role_session_name_.empty()) c.role_session_name_ = "quorate";

  auto keys = [&](AwsCredentials k, const std::string& source) -> Status {
    if (k.access_key.empty() != k.secret.empty()) {
      return Status::InvalidArgument(fmt::format("{}: an access key and a secret go together: give both or neither", source));
    }
    // They go into headers as they are: a stray line break or space is the operator's to fix.
    if (Status s = CheckKeys(k, source); !s.ok()) return Status::InvalidArgument(s.message());
    c.kind_ = Kind::kStatic;
    c.static_ = std::move(k);
    c.source_ = source;
    return Status::Ok();
  };
  auto web_identity = [&](std::string file, std::string role, const std::string& source) -> Status {
    if (file.empty() != role.empty()) {
      return Status::InvalidArgument(fmt::format("{}: a web identity token file and a role ARN go together (as EKS sets "
                                                 "AWS_WEB_IDENTITY_TOKEN_FILE and AWS_ROLE_ARN)",
                                                 source));
    }
    c.kind_ = Kind::kWebIdentity;
    c.web_identity_token_file_ = std::move(file);
    c.role_arn_ = std::move(role);
    c.source_ = fmt::format("web identity {} ({})", Printable(c.role_arn_, 200), source);
    return Status::Ok();
  };
  // A profile's keys, or its role with a web identity; false when it holds neither.
  auto from_profile = [&](const Profile& p, const std::string& name) -> Result<bool> {
    auto get = [&](const char* key) {
      auto it = p.find(key);
      return it == p.end() ? std::string() : it->second;
    };
    const std::string source = "profile " + Printable(name, 64);
    if (!get("aws_access_key_id").empty() || !get("aws_secret_access_key").empty()) {
      if (Status s = keys({get("aws_access_key_id"), get("aws_secret_access_key"), get("aws_session_token")}, source);
          !s.ok()) {
        return s;
      }
      return true;
    }
    if (!get("web_identity_token_file").empty()) {
      if (Status s = web_identity(get("web_identity_token_file"), get("role_arn"), source); !s.ok()) return s;
      if (!get("role_session_name").empty()) c.role_session_name_ = get("role_session_name");
      return true;
    }
    if (!get("role_arn").empty() || !get("credential_process").empty() || !get("sso_session").empty() ||
        !get("sso_start_url").empty()) {
      return Status::InvalidArgument(fmt::format(
          "{} takes its credentials from a source profile, a process or SSO, which quorate does not run: give it "
          "keys or role_arn with web_identity_token_file, or use the instance's or container's role",
          source));
    }
    return false;
  };

  Status done = Status::Ok();
  bool found = false;
  std::string profile = Env("AWS_PROFILE");
  if (profile.empty()) profile = Env("AWS_DEFAULT_PROFILE");
  if (!settings.access_key.empty() || !settings.secret.empty()) {
    done = keys({settings.access_key, settings.secret, settings.session_token, {}}, "the keys given");
    found = true;
  } else if (!profile.empty()) {
    auto p = LoadProfile(profile);
    if (!p.ok()) return p.status();
    if (!*p) {
      return Status::InvalidArgument(fmt::format("AWS_PROFILE '{}' is in neither {} nor {}", Printable(profile, 64),
                                                 HomeFile("AWS_SHARED_CREDENTIALS_FILE", ".aws/credentials"),
                                                 HomeFile("AWS_CONFIG_FILE", ".aws/config")));
    }
    auto used = from_profile(**p, profile);
    if (!used.ok()) return used.status();
    found = *used;
  }
  if (!found && (!Env("AWS_ACCESS_KEY_ID").empty() || !Env("AWS_SECRET_ACCESS_KEY").empty())) {
    done = keys({Env("AWS_ACCESS_KEY_ID"), Env("AWS_SECRET_ACCESS_KEY"), Env("AWS_SESSION_TOKEN"), {}},
                "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY");
    found = true;
  }
  if (!found && (!Env("AWS_WEB_IDENTITY_TOKEN_FILE").empty() || !Env("AWS_ROLE_ARN").empty())) {
    done = web_identity(Env("AWS_WEB_IDENTITY_TOKEN_FILE"), Env("AWS_ROLE_ARN"),
                        "AWS_WEB_IDENTITY_TOKEN_FILE and AWS_ROLE_ARN");
    found = true;
  }
  if (!done.ok()) return done;
  if (!found && profile.empty()) {
    auto p = LoadProfile("default");
    if (!p.ok()) return p.status();
    if (*p) {
      auto used = from_profile(**p, "default");
      if (!used.ok()) return used.status();
      found = *used;
    }
  }
  if (!found) {
    const std::string relative = Env("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI");
    const std::string full = Env("AWS_CONTAINER_CREDENTIALS_FULL_URI");
    if (!relative.empty() || !full.empty()) {
      if (!relative.empty()) {
        c.container_url_ = kEcsHost + (relative.front() == '/' ? relative : "/" + relative);
      } else {
        c.container_url_ = full;
      }
      if (!IsPrintable(c.container_url_) || c.container_url_.find(' ') != std::string::npos ||
          !AllowedContainerHost(c.container_url_)) {
        return Status::InvalidArgument(fmt::format(
            "{} '{}' is not an https URL nor http on 169.254.170.2, 169.254.170.23, [fd00:ec2::23] or loopback (where "
            "the SDKs send the authorization token)",
            relative.empty() ? "AWS_CONTAINER_CREDENTIALS_FULL_URI" : "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
            Printable(relative.empty() ? full : relative, 200)));
      }
      c.container_token_file_ = Env("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE");
      if (c.container_token_file_.empty()) c.container_token_ = Env("AWS_CONTAINER_AUTHORIZATION_TOKEN");
      if (!c.container_token_.empty()) {
        if (Status s = CheckOpaque(c.container_token_, kMaxTokenBytes, "AWS_CONTAINER_AUTHORIZATION_TOKEN"); !s.ok()) {
          return Status::InvalidArgument(s.message());
        }
      }
      c.kind_ = Kind::kContainer;
      c.source_ = "container credentials at " + Printable(c.container_url_, 200);
      found = true;
    }
  }
  if (!found) {
    if (Env("AWS_EC2_METADATA_DISABLED") == "true") {
      return Status::InvalidArgument(
          "no AWS credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE, a web identity or "
          "container credentials, or run on an instance with a role (AWS_EC2_METADATA_DISABLED=true rules IMDS out)");
    }
    c.kind_ = Kind::kInstanceRole;
    c.source_ = "the instance role from IMDS at " + c.imds_endpoint_;
  }
  if (c.kind_ != Kind::kStatic) {
    AwsCredentialChain* self = chain.get();
    c.cache_ = std::make_unique<TokenCache<AwsCredentials>>(settings.clock ? *settings.clock : RealClock(),
                                                            [self](Clock::TimePoint deadline) { return self->Fetch(deadline); });
  }
  return chain;
}

Result<AwsCredentials> AwsCredentialChain::Get(Clock::TimePoint deadline) {
  if (kind_ == Kind::kStatic) return static_;
  auto creds = cache_->Get(deadline);
  if (!creds.ok()) return creds.status().Prefixed(source_);
  return creds;
}

void AwsCredentialChain::Drop() {
  if (cache_) cache_->Drop();
}

Result<TokenCache<AwsCredentials>::Fetched> AwsCredentialChain::Fetch(Clock::TimePoint deadline) const {
  Result<AwsCredentials> creds = Status::Internal("no source");
  if (kind_ == Kind::kWebIdentity) {
    // Read at every exchange: the kubelet rotates the projected token.
    auto read = ReadFile(web_identity_token_file_, 16 * 1024);
    if (!read.ok()) return Status::Unavailable(fmt::format("the web identity token file: {}", read.status().message()));
    std::string token = std::move(*read);
    while (!token.empty() && (token.back() == '\n' || token.back() == '\r')) token.pop_back();
    // A form POST, as AWS's SDKs send it: the token stays out of URLs and access logs.
    std::string form = "Action=AssumeRoleWithWebIdentity&Version=2011-06-15";
    for (const auto& [k, v] : {std::pair{"RoleArn", role_arn_}, std::pair{"RoleSessionName", role_session_name_},
                               std::pair{"WebIdentityToken", token}}) {
      form += fmt::format("&{}={}", k, PercentEncode(v));
    }
    auto body = Unsigned(sts_endpoint_, "POST", "/", {{"Content-Type", "application/x-www-form-urlencoded"}}, deadline,
                      fmt::format("AssumeRoleWithWebIdentity at {}", sts_endpoint_), form);
    if (!body.ok()) {
      return body.status().Prefixed("the web identity needs sts:AssumeRoleWithWebIdentity on the role's trust policy");
    }
    creds = ParseAssumeRoleWithWebIdentity(*body);
  } else if (kind_ == Kind::kContainer) {
    std::string token = container_token_;
    if (!container_token_file_.empty()) {
      // Read at every fetch: EKS Pod Identity rotates it.
      auto read = ReadFile(container_token_file_, kMaxTokenBytes + 2);
      if (!read.ok()) {
        return Status::Unavailable(fmt::format("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE: {}", read.status().message()));
      }
      token = std::move(*read);
      while (!token.empty() && (token.back() == '\n' || token.back() == '\r')) token.pop_back();
      if (Status s = CheckOpaque(token, kMaxTokenBytes, "the token in AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE"); !s.ok()) {
        return s;
      }
    }
    const size_t path = container_url_.find('/', container_url_.find("://") + 3);
    const std::string base = container_url_.substr(0, path);
    const std::string target = path == std::string::npos ? "/" : container_url_.substr(path);
    std::vector<std::pair<std::string, std::string>> headers;
    if (!token.empty()) headers.emplace_back("Authorization", token);
    auto body = Unsigned(base, "GET", target, std::move(headers), deadline, "GET");
    if (!body.ok()) return body.status();
    creds = ParseCredentialsJson(*body, "the container credentials");
  } else {
    ImdsSession imds(imds_endpoint_, deadline);
    auto roles = imds.Get("/latest/meta-data/iam/security-credentials/");
    if (!roles.ok()) return roles.status();
    const std::string role = roles->substr(0, roles->find('\n'));
    if (role.empty() || role.size() > 128 || role.find_first_not_of(kRoleNameChars) != std::string::npos) {
      return Status::Unavailable(
          fmt::format("no instance role (the instance profile names '{}')", Printable(role, 64)));
    }
    auto answer = imds.Get("/latest/meta-data/iam/security-credentials/" + role);
    if (!answer.ok()) return answer.status();
    creds = ParseCredentialsJson(*answer, "IMDS's instance role credentials");
  }
  if (!creds.ok()) return creds.status();
  const Clock::Duration lifetime = LifetimeUntil(creds->expiration);
  return TokenCache<AwsCredentials>::Fetched{std::move(*creds), lifetime};
}

Result<std::vector<std::string>> ImdsGet(const std::string& endpoint, const std::vector<std::string>& paths,
                                         Clock::TimePoint deadline) {
  ImdsSession imds(endpoint, deadline);
  std::vector<std::string> answers;
  for (const auto& path : paths) {
    auto answer = imds.Get(path);
    if (!answer.ok()) return answer.status().Prefixed(fmt::format("IMDS at {}", endpoint));
    answers.push_back(std::move(*answer));
  }
  return answers;
}

Result<AwsCredentials> ParseAssumeRoleWithWebIdentity(const std::string& xml) {
  pugi::xml_document doc;
  pugi::xml_node creds =
      Root(doc, xml, "AssumeRoleWithWebIdentityResponse").child("AssumeRoleWithWebIdentityResult").child("Credentials");
  if (!creds) {
    // Not even its start is shown: a garbled answer may still hold a secret.
    return Status::Unavailable(
        fmt::format("the answer ({} bytes) is not STS's AssumeRoleWithWebIdentityResponse XML", xml.size()));
  }
  return Checked({creds.child("AccessKeyId").text().get(), creds.child("SecretAccessKey").text().get(),
                  creds.child("SessionToken").text().get(), {}},
                 creds.child("Expiration").text().get(), "STS's AssumeRoleWithWebIdentity answer");
}

Result<AwsCredentials> ParseCredentialsJson(const std::string& json, const std::string& source) {
  auto doc = ParseForeignJson(json);
  if (!doc.ok() || !doc->is_object()) {
    return Status::Unavailable(fmt::format("{} ({} bytes) are not a JSON object", source, json.size()));
  }
  auto text = [&](const char* field) {
    auto it = doc->find(field);
    return it != doc->end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  return Checked({text("AccessKeyId"), text("SecretAccessKey"), text("Token"), {}}, text("Expiration"), source);
}

ApiError ParseAwsError(const std::string& xml) {
  pugi::xml_document doc;
  if (!doc.load_buffer(xml.data(), xml.size(), pugi::parse_default & ~pugi::parse_doctype)) return {};
  pugi::xml_node error = doc.child("Response").child("Errors").child("Error");
  if (!error) error = doc.child("ErrorResponse").child("Error");
  return {error.child("Code").text().get(), error.child("Message").text().get()};
}

}  // namespace quorate::cloud
