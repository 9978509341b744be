#include "aws.h"

#include <pugixml.hpp>

#include <charconv>
#include <chrono>
#include <ctime>
#include <cstdlib>
#include <set>

#include <fmt/format.h>

#include "quorate/duration.h"
#include "quorate/fs.h"
#include "quorate/http.h"
#include "quorate/json.h"
#include "quorate/s3.h"
#include "quorate/text.h"

namespace quorate::aws {
namespace {

constexpr char kEc2Version[] = "2016-11-15";
constexpr char kAutoScalingVersion[] = "2011-01-01";
// A DescribeInstances page of 1000 instances is about 5 MB of XML at most.
constexpr size_t kMaxAnswerBytes = 8 << 20;
constexpr int kMaxPages = 100;
constexpr auto kCallTimeout = std::chrono::seconds(10);

std::string Env(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? "" : value;
}

Result<int> Port(ProviderParams& params, const std::string& key, int fallback) {
  auto text = params.Take(key);
  if (!text) return fallback;
  int port = 0;
  auto [end, ec] = std::from_chars(text->data(), text->data() + text->size(), port);
  if (ec != std::errc() || end != text->data() + text->size() || port < 1 || port > 65535) {
    return Status::InvalidArgument(
        fmt::format("{} '{}' is not a port (1-65535)", params.Label(key), Printable(*text, 32)));
  }
  return port;
}

// The root element `name` of an answer, or an empty node when it is not that document.
pugi::xml_node Root(pugi::xml_document& doc, const std::string& xml, const char* name) {
  // No DOCTYPE, so no entity the answer defines; character references are decoded as XML says.
  if (!doc.load_buffer(xml.data(), xml.size(), pugi::parse_default & ~pugi::parse_doctype)) return {};
  return doc.child(name);
}

std::string Start(const std::string& xml) { return Printable(xml.substr(0, 80), 80); }

}  // namespace

Result<Options> TakeOptions(ProviderParams& params) {
  Options o;
  o.region = params.Take("region").value_or("");
  if (o.region.empty()) o.region = Env("AWS_REGION");
  if (o.region.empty()) o.region = Env("AWS_DEFAULT_REGION");
  o.tag_key = params.Take("tag_key").value_or("");
  o.tag_value = params.Take("tag_value").value_or("");
  o.addr_type = params.Take("addr_type").value_or("private_v4");
  o.access_key = params.Take("access_key_id").value_or("");
  o.secret = params.Take("secret_access_key").value_or("");
  o.session_token = params.Take("session_token").value_or("");
  const std::string endpoint = params.Take("endpoint").value_or("");
  o.asg = params.Take("asg").value_or("");
  o.name_tag = params.Take("name_tag").value_or("");
  o.scheme = params.Take("scheme").value_or("http");
  auto peer = Port(params, "peer_port", 2380);
  if (!peer.ok()) return peer.status();
  auto client = Port(params, "client_port", 2379);
  if (!client.ok()) return client.status();
  o.peer_port = *peer;
  o.client_port = *client;
  if (Status s = params.CheckAllTaken({"region", "tag_key", "tag_value", "addr_type", "access_key_id",
                                       "secret_access_key", "session_token", "endpoint", "asg", "name_tag", "scheme",
                                       "peer_port", "client_port"});
      !s.ok()) {
    return s;
  }
  if (o.region.empty()) {
    return Status::InvalidArgument(
        "provider=aws needs a region: give region=... (or AWS_REGION); the instance metadata service is not asked");
  }
  if (o.region.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789-") != std::string::npos) {
    return Status::InvalidArgument(fmt::format("{} '{}' is not an AWS region name (like eu-west-1)",
                                               params.Label("region"), Printable(o.region, 40)));
  }
  if (o.asg.empty() && o.tag_key.empty()) {
    return Status::InvalidArgument(
        "provider=aws needs asg=NAME (the Auto Scaling group of the etcd instances) or tag_key=... [tag_value=...]");
  }
  if (!o.tag_value.empty() && o.tag_key.empty()) {
    return Status::InvalidArgument(fmt::format("{} needs tag_key", params.Label("tag_value")));
  }
  if (o.asg == "auto") {
    return Status::InvalidArgument(
        "asg=auto needs the instance metadata service, which provider=aws does not ask; give the group's name");
  }
  static const std::set<std::string> kAddrTypes = {"private_v4", "public_v4", "public_v6", "private_dns"};
  if (!kAddrTypes.count(o.addr_type)) {
    return Status::InvalidArgument(fmt::format("{} '{}' is not one of private_v4, public_v4, public_v6, private_dns",
                                               params.Label("addr_type"), Printable(o.addr_type, 40)));
  }
  if (o.scheme != "http" && o.scheme != "https") {
    return Status::InvalidArgument(
        fmt::format("{} '{}' is not http or https", params.Label("scheme"), Printable(o.scheme, 40)));
  }
  if (o.access_key.empty() != o.secret.empty()) {
    return Status::InvalidArgument("access_key_id and secret_access_key go together: give both or neither");
  }
  // The chain AWS's SDKs follow: keys, environment, web identity, instance role.
  if (o.access_key.empty()) {
    o.access_key = Env("AWS_ACCESS_KEY_ID");
    o.secret = Env("AWS_SECRET_ACCESS_KEY");
    if (o.session_token.empty()) o.session_token = Env("AWS_SESSION_TOKEN");
  }
  if (o.access_key.empty() != o.secret.empty()) {
    return Status::InvalidArgument("AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY go together: set both or neither");
  }
  if (o.access_key.empty()) {
    o.web_identity_token_file = Env("AWS_WEB_IDENTITY_TOKEN_FILE");
    o.role_arn = Env("AWS_ROLE_ARN");
    o.role_session_name = Env("AWS_ROLE_SESSION_NAME");
    if (o.role_session_name.empty()) o.role_session_name = "quorate";
    if (o.web_identity_token_file.empty() != o.role_arn.empty()) {
      return Status::InvalidArgument(
          "AWS_WEB_IDENTITY_TOKEN_FILE and AWS_ROLE_ARN go together (as EKS sets them for a service account)");
    }
    o.imds_endpoint = Env("AWS_EC2_METADATA_SERVICE_ENDPOINT");
    while (!o.imds_endpoint.empty() && o.imds_endpoint.back() == '/') o.imds_endpoint.pop_back();
    if (o.imds_endpoint.empty()) o.imds_endpoint = "http://169.254.169.254:80";
    if (!ParseUrl(o.imds_endpoint).ok()) {
      return Status::InvalidArgument(fmt::format("AWS_EC2_METADATA_SERVICE_ENDPOINT '{}' is not a URL like "
                                                 "http://169.254.169.254:80",
                                                 Printable(o.imds_endpoint, 100)));
    }
  }
  if (endpoint.empty()) {
    o.ec2_endpoint = fmt::format("https://ec2.{}.amazonaws.com:443", o.region);
    o.autoscaling_endpoint = fmt::format("https://autoscaling.{}.amazonaws.com:443", o.region);
    o.sts_endpoint = fmt::format("https://sts.{}.amazonaws.com:443", o.region);
  } else {
    auto url = ParseUrl(endpoint);
    if (!url.ok() || endpoint.find('/', endpoint.find("://") + 3) != std::string::npos) {
      return Status::InvalidArgument(fmt::format("{} '{}' is not a base URL like http://127.0.0.1:5000",
                                                 params.Label("endpoint"), Printable(endpoint, 100)));
    }
    o.ec2_endpoint = o.autoscaling_endpoint = o.sts_endpoint = endpoint;
  }
  return o;
}

Result<InstancePage> ParseDescribeInstances(const std::string& xml) {
  pugi::xml_document doc;
  pugi::xml_node root = Root(doc, xml, "DescribeInstancesResponse");
  if (!root) {
    return Status::Unavailable(
        fmt::format("the answer is not EC2's DescribeInstancesResponse XML; it starts '{}'", Start(xml)));
  }
  InstancePage page;
  for (pugi::xml_node reservation : root.child("reservationSet").children("item")) {
    for (pugi::xml_node item : reservation.child("instancesSet").children("item")) {
      Instance i;
      i.id = item.child("instanceId").text().get();
      if (i.id.empty()) return Status::Unavailable("DescribeInstances lists an instance without an instanceId");
      i.state = item.child("instanceState").child("name").text().get();
      i.private_ip = item.child("privateIpAddress").text().get();
      i.public_ip = item.child("ipAddress").text().get();
      i.private_dns = item.child("privateDnsName").text().get();
      for (pugi::xml_node eni : item.child("networkInterfaceSet").children("item")) {
        for (pugi::xml_node v6 : eni.child("ipv6AddressesSet").children("item")) {
          if (i.ipv6.empty()) i.ipv6 = v6.child("ipv6Address").text().get();
        }
      }
      for (pugi::xml_node tag : item.child("tagSet").children("item")) {
        i.tags[tag.child("key").text().get()] = tag.child("value").text().get();
      }
      page.instances.push_back(std::move(i));
    }
  }
  page.next_token = root.child("nextToken").text().get();
  return page;
}

Result<Group> ParseAutoScalingGroup(const std::string& xml, const std::string& name) {
  pugi::xml_document doc;
  pugi::xml_node root = Root(doc, xml, "DescribeAutoScalingGroupsResponse");
  if (!root) {
    return Status::Unavailable(fmt::format(
        "the answer is not Auto Scaling's DescribeAutoScalingGroupsResponse XML; it starts '{}'", Start(xml)));
  }
  for (pugi::xml_node g :
       root.child("DescribeAutoScalingGroupsResult").child("AutoScalingGroups").children("member")) {
    if (name != g.child("AutoScalingGroupName").text().get()) continue;
    Group group;
    const std::string desired = g.child("DesiredCapacity").text().get();
    if (desired.empty() || desired.size() > 4 || desired.find_first_not_of("0123456789") != std::string::npos) {
      return Status::Unavailable(fmt::format("Auto Scaling group {} has DesiredCapacity '{}', not a count",
                                             Printable(name, 64), Printable(desired, 16)));
    }
    group.desired = std::stoi(desired);
    for (pugi::xml_node m : g.child("Instances").children("member")) {
      group.instance_ids.push_back(m.child("InstanceId").text().get());
    }
    return group;
  }
  return Status::NotFound(fmt::format("no Auto Scaling group named {}", Printable(name, 64)));
}

ApiError ParseError(const std::string& xml) {
  pugi::xml_document doc;
  if (!doc.load_buffer(xml.data(), xml.size(), pugi::parse_default & ~pugi::parse_doctype)) return {};
  pugi::xml_node error = doc.child("Response").child("Errors").child("Error");
  if (!error) error = doc.child("ErrorResponse").child("Error");
  return {error.child("Code").text().get(), error.child("Message").text().get()};
}

namespace {

// "2026-11-24T14:00:00Z" (IMDS) or with a fraction (STS).
std::optional<std::chrono::system_clock::time_point> ParseIsoTime(const std::string& text) {
  if (text.empty() || text.back() != 'Z') return std::nullopt;
  return ParseUtcTimePrefix(text);
}

Result<Credentials> CheckedCredentials(Credentials c, const std::string& expiration, const std::string& source) {
  auto when = ParseIsoTime(expiration);
  if (c.access_key.empty() || c.secret.empty() || !when) {
    return Status::Unavailable(fmt::format("{} lacks an access key, a secret or an ISO 8601 Expiration", source));
  }
  c.expiration = *when;
  return c;
}

// A GET or PUT without SigV4 (STS's web identity call, IMDS): the body when 200.
Result<std::string> Fetch(const std::string& base, const std::string& method, const std::string& target,
                          std::vector<std::pair<std::string, std::string>> headers, Clock::TimePoint deadline,
                          const std::string& what, const std::string& body = "") {
  HttpRequest request;
  request.base_url = base;
  request.method = method;
  request.target = target;
  request.headers = std::move(headers);
  request.body = body;
  request.timeout = kCallTimeout;
  request.deadline = deadline;
  request.max_body = 64 * 1024;
  HttpResult result = HttpSendThrottled(request, RealClock());
  if (!result.ok()) return result.ToStatus(what);
  if (result.response.status != 200) {
    ApiError error = ParseError(result.response.body);
    return Status::Unavailable(fmt::format("{}: HTTP {} {}{}", what, result.response.status,
                                           Printable(error.code, 64),
                                           error.message.empty() ? "" : ": " + Printable(error.message, 200)));
  }
  return result.response.body;
}

}  // namespace

Result<Credentials> ParseAssumeRoleWithWebIdentity(const std::string& xml) {
  pugi::xml_document doc;
  pugi::xml_node creds =
      Root(doc, xml, "AssumeRoleWithWebIdentityResponse").child("AssumeRoleWithWebIdentityResult").child("Credentials");
  if (!creds) {
    return Status::Unavailable(fmt::format("the answer is not STS's AssumeRoleWithWebIdentityResponse XML; it "
                                           "starts '{}'",
                                           Start(xml)));
  }
  return CheckedCredentials({creds.child("AccessKeyId").text().get(), creds.child("SecretAccessKey").text().get(),
                             creds.child("SessionToken").text().get(), {}},
                            creds.child("Expiration").text().get(), "STS's AssumeRoleWithWebIdentity answer");
}

Result<Credentials> ParseImdsCredentials(const std::string& json) {
  auto doc = ParseForeignJson(json);
  if (!doc.ok() || !doc->is_object()) {
    return Status::Unavailable(
        fmt::format("the instance role's credentials are not IMDS's JSON object; it starts '{}'", Start(json)));
  }
  auto text = [&](const char* field) {
    auto it = doc->find(field);
    return it != doc->end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  return CheckedCredentials({text("AccessKeyId"), text("SecretAccessKey"), text("Token"), {}}, text("Expiration"),
                            "IMDS's instance role credentials");
}

Result<Credentials> FetchCredentials(const Options& o, Clock::TimePoint deadline) {
  if (!o.web_identity_token_file.empty()) {
    // Read at every exchange: the kubelet rotates the projected token.
    auto read = ReadFile(o.web_identity_token_file, 16 * 1024);
    if (!read.ok()) return Status::Unavailable(fmt::format("AWS_WEB_IDENTITY_TOKEN_FILE: {}", read.status().message()));
    std::string token = std::move(*read);
    while (!token.empty() && (token.back() == '\n' || token.back() == '\r')) token.pop_back();
    // A form POST, as AWS's SDKs send it: the token stays out of URLs and access logs.
    std::string form = "Action=AssumeRoleWithWebIdentity&Version=2011-06-15";
    for (const auto& [k, v] : {std::pair{"RoleArn", o.role_arn}, std::pair{"RoleSessionName", o.role_session_name},
                               std::pair{"WebIdentityToken", token}}) {
      form += fmt::format("&{}={}", k, sigv4::UriEncode(v, false));
    }
    auto body = Fetch(o.sts_endpoint, "POST", "/", {{"Content-Type", "application/x-www-form-urlencoded"}}, deadline,
                      fmt::format("AssumeRoleWithWebIdentity of {} at {}", Printable(o.role_arn, 200), o.sts_endpoint),
                      form);
    if (!body.ok()) {
      return body.status().Prefixed("the web identity needs sts:AssumeRoleWithWebIdentity on the role's trust policy");
    }
    return ParseAssumeRoleWithWebIdentity(*body);
  }
  const std::string what = fmt::format("the instance role from IMDS at {}", o.imds_endpoint);
  auto token = Fetch(o.imds_endpoint, "PUT", "/latest/api/token", {{"X-aws-ec2-metadata-token-ttl-seconds", "21600"}},
                     deadline, what + " (PUT /latest/api/token)");
  if (!token.ok()) return token.status();
  const std::pair<std::string, std::string> header{"X-aws-ec2-metadata-token", *token};
  auto roles = Fetch(o.imds_endpoint, "GET", "/latest/meta-data/iam/security-credentials/", {header}, deadline, what);
  if (!roles.ok()) return roles.status();
  const std::string role = roles->substr(0, roles->find('\n'));
  if (role.empty() || role.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+=,.@_-") !=
                          std::string::npos) {
    return Status::Unavailable(fmt::format("{}: no instance role (the instance profile names '{}')", what,
                                           Printable(role, 64)));
  }
  auto creds = Fetch(o.imds_endpoint, "GET", "/latest/meta-data/iam/security-credentials/" + role, {header}, deadline,
                     what);
  if (!creds.ok()) return creds.status();
  return ParseImdsCredentials(*creds);
}

bool Counts(const std::string& state) { return state == "pending" || state == "running"; }

Result<std::optional<Member>> MemberOf(const Options& o, const Instance& instance) {
  std::string address;
  if (o.addr_type == "private_v4") address = instance.private_ip;
  if (o.addr_type == "public_v4") address = instance.public_ip;
  if (o.addr_type == "private_dns") address = instance.private_dns;
  if (o.addr_type == "public_v6") address = instance.ipv6.empty() ? "" : "[" + instance.ipv6 + "]";
  if (address.empty()) return std::optional<Member>();
  std::string name = instance.id;
  if (!o.name_tag.empty()) {
    auto tag = instance.tags.find(o.name_tag);
    if (tag != instance.tags.end() && !tag->second.empty()) name = tag->second;
  }
  if (Status s = CheckMemberName(name, "instance " + Printable(instance.id, 40) + "'s name"); !s.ok()) {
    return Status::Unavailable(s.message());
  }
  Member m{name,
           {fmt::format("{}://{}:{}", o.scheme, address, o.peer_port)},
           {fmt::format("{}://{}:{}", o.scheme, address, o.client_port)}};
  for (const auto& url : {m.peer_urls[0], m.client_urls[0]}) {
    if (auto parsed = ParseUrl(url); !parsed.ok()) {
      return Status::Unavailable(fmt::format("instance {} has an address etcd would refuse: {}",
                                             Printable(instance.id, 40), parsed.status().message()));
    }
  }
  return std::optional<Member>(std::move(m));
}

std::map<std::string, std::string> DescribeInstancesQuery(const Options& o, const std::string& next_token) {
  std::map<std::string, std::string> q = {{"Action", "DescribeInstances"},
                                          {"Version", kEc2Version},
                                          {"MaxResults", std::to_string(o.page_size)},
                                          {"Filter.1.Name", "instance-state-name"},
                                          {"Filter.1.Value.1", "pending"},
                                          {"Filter.1.Value.2", "running"}};
  int n = 2;
  if (!o.asg.empty()) {
    q[fmt::format("Filter.{}.Name", n)] = "tag:aws:autoscaling:groupName";
    q[fmt::format("Filter.{}.Value.1", n++)] = o.asg;
  }
  if (!o.tag_key.empty() && !o.tag_value.empty()) {
    q[fmt::format("Filter.{}.Name", n)] = "tag:" + o.tag_key;
    q[fmt::format("Filter.{}.Value.1", n++)] = o.tag_value;
  } else if (!o.tag_key.empty()) {
    q[fmt::format("Filter.{}.Name", n)] = "tag-key";
    q[fmt::format("Filter.{}.Value.1", n++)] = o.tag_key;
  }
  if (!next_token.empty()) q["NextToken"] = next_token;
  return q;
}

namespace {

class AwsProvider : public DiscoveryProvider {
 public:
  AwsProvider(Options o, Clock::TimePoint deadline) : o_(std::move(o)), deadline_(deadline) {}

  Result<std::vector<Member>> Discover() override {
    whole_group_ = false;
    if (Status s = RefreshCredentials(); !s.ok()) return s;
    std::optional<Group> group;
    if (!o_.asg.empty()) {
      auto answer = Call(o_.autoscaling_endpoint, "autoscaling",
                         {{"Action", "DescribeAutoScalingGroups"},
                          {"Version", kAutoScalingVersion},
                          {"AutoScalingGroupNames.member.1", o_.asg}},
                         "autoscaling:DescribeAutoScalingGroups");
      if (!answer.ok()) return answer.status();
      auto parsed = ParseAutoScalingGroup(*answer, o_.asg);
      if (!parsed.ok()) {
        return Status::Unavailable(fmt::format("{}: {}", Describe(), parsed.status().message()));
      }
      group = std::move(*parsed);
    }
    std::vector<Member> members;
    std::set<std::string> tokens;
    std::string next;
    for (int pages = 1;; ++pages) {
      if (pages > kMaxPages) {
        return Status::Unavailable(fmt::format("DescribeInstances did not end after {} pages of up to {}", kMaxPages,
                                               o_.page_size));
      }
      auto answer = Call(o_.ec2_endpoint, "ec2", DescribeInstancesQuery(o_, next), "ec2:DescribeInstances");
      if (!answer.ok()) return answer.status();
      auto page = ParseDescribeInstances(*answer);
      if (!page.ok()) return page.status();
      for (const Instance& i : page->instances) {
        if (!Counts(i.state)) continue;
        auto member = MemberOf(o_, i);
        if (!member.ok()) return member.status();
        if (*member) members.push_back(std::move(**member));
      }
      next = page->next_token;
      if (next.empty()) break;
      if (!tokens.insert(next).second) {
        return Status::Unavailable("DescribeInstances handed out a NextToken it had given before");
      }
    }
    if (group) {
      implied_size_ = static_cast<size_t>(group->desired);
      whole_group_ = true;
    }
    return members;
  }

  std::optional<size_t> ImpliedSize() const override { return implied_size_; }
  bool ListsWholeGroup() const override { return whole_group_; }

  std::string Describe() const override {
    std::string what = o_.asg.empty() ? fmt::format("aws instances tagged {}{}{}", o_.tag_key,
                                                    o_.tag_value.empty() ? "" : "=", o_.tag_value)
                                      : fmt::format("aws Auto Scaling group {}", o_.asg);
    return fmt::format("{} in {}", what, o_.region);
  }

 private:
  // One signed Query API GET; the answer's body when 200. Throttles are waited out within the
  // deadline; an error answer names the call and, for a refusal, the permission it needs.
  Result<std::string> Call(const std::string& endpoint, const std::string& service,
                           const std::map<std::string, std::string>& query, const std::string& permission) {
    auto url = ParseUrl(endpoint);
    if (!url.ok()) return url.status();
    HttpRequest request;
    request.base_url = endpoint;
    request.max_body = kMaxAnswerBytes;
    request.timeout = kCallTimeout;
    request.deadline = deadline_;
    std::string target = "/";
    for (const auto& [k, v] : query) {
      target += (target.size() == 1 ? "?" : "&") + sigv4::UriEncode(k, false) + "=" + sigv4::UriEncode(v, false);
    }
    request.target = target;
    // As a client sends it: the port only when it is not the scheme's own.
    const bool default_port = (url->scheme == "https" && url->port == 443) || (url->scheme == "http" && url->port == 80);
    const std::string host = default_port ? url->host : fmt::format("{}:{}", url->host, url->port);
    auto sign = [&](HttpRequest& r) {
      sigv4::Request s{"GET", "/", query, {{"host", host}, {"x-amz-date", sigv4::AmzDate(std::chrono::system_clock::now())}},
                       sigv4::Sha256Hex("")};
      if (!creds_.session_token.empty()) s.headers["x-amz-security-token"] = creds_.session_token;
      r.headers.clear();
      for (const auto& [name, value] : s.headers) r.headers.emplace_back(name, value);
      r.headers.emplace_back("Authorization",
                             sigv4::Authorization(s, creds_.access_key, creds_.secret, o_.region, service));
    };
    auto throttled = [](const HttpResponse& a) {
      const std::string code = ParseError(a.body).code;
      return code == "RequestLimitExceeded" || code == "Throttling" || code == "ThrottlingException";
    };
    const std::string what = fmt::format("{} {} at {}", query.at("Action"), Describe(), endpoint);
    HttpResult result = HttpSendThrottled(request, RealClock(), throttled, sign);
    if (!result.ok()) return result.ToStatus(what);
    const HttpResponse& answer = result.response;
    if (answer.status == 200) return answer.body;
    ApiError error = ParseError(answer.body);
    std::string text = fmt::format("{}: HTTP {}", what, answer.status);
    if (!error.code.empty()) text += " " + Printable(error.code, 64);
    if (!error.message.empty()) text += ": " + Printable(error.message, 200);
    if (answer.status == 401 || answer.status == 403) {
      text += fmt::format("; the credentials need {} (and are they valid, for this region?)", permission);
    }
    return Status::Unavailable(text);
  }

  // Static credentials as given; fetched ones again 5 minutes before they expire, as the SDKs do.
  Status RefreshCredentials() {
    if (!o_.access_key.empty()) {
      creds_ = {o_.access_key, o_.secret, o_.session_token, std::chrono::system_clock::time_point::max()};
      return Status::Ok();
    }
    if (!creds_.access_key.empty() && std::chrono::system_clock::now() + std::chrono::minutes(5) < creds_.expiration) {
      return Status::Ok();
    }
    auto fetched = FetchCredentials(o_, deadline_);
    if (!fetched.ok()) return fetched.status().Prefixed(Describe());
    creds_ = std::move(*fetched);
    return Status::Ok();
  }

  Options o_;
  Credentials creds_;
  Clock::TimePoint deadline_;
  std::optional<size_t> implied_size_;
  bool whole_group_ = false;
};

Result<std::unique_ptr<DiscoveryProvider>> Create(ProviderParams& params) {
  auto options = TakeOptions(params);
  if (!options.ok()) return options.status();
  return std::unique_ptr<DiscoveryProvider>(new AwsProvider(std::move(*options), params.context().deadline));
}

const RegisterProvider kRegistration("aws", Create);

}  // namespace
}  // namespace quorate::aws
