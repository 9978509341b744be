#include "aws.h"

#include <pugixml.hpp>

#include <chrono>
#include <ctime>
#include <set>

#include <fmt/format.h>

#include "quorate/duration.h"
#include "quorate/env.h"
#include "quorate/fs.h"
#include "quorate/http.h"
#include "quorate/json.h"
#include "quorate/log.h"
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

// The root element `name` of an answer, or an empty node when it is not that document.
pugi::xml_node Root(pugi::xml_document& doc, const std::string& xml, const char* name) {
  // No DOCTYPE, so no entity the answer defines; character references are decoded as XML says.
  if (!doc.load_buffer(xml.data(), xml.size(), pugi::parse_default & ~pugi::parse_doctype)) return {};
  return doc.child(name);
}

std::string Start(const std::string& xml) { return Printable(xml.substr(0, 80), 80); }

}  // namespace

void SetRegion(Options& o, const std::string& region) {
  o.region = region;
  if (o.endpoint.empty()) {
    o.ec2_endpoint = fmt::format("https://ec2.{}.amazonaws.com:443", region);
    o.autoscaling_endpoint = fmt::format("https://autoscaling.{}.amazonaws.com:443", region);
    o.sts_endpoint = fmt::format("https://sts.{}.amazonaws.com:443", region);
  } else {
    o.ec2_endpoint = o.autoscaling_endpoint = o.sts_endpoint = o.endpoint;
  }
}

Result<std::string> CheckRegion(const std::string& text) {
  if (text.empty() || text.size() > 32 || text.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789-") != std::string::npos) {
    return Status::Unavailable(fmt::format("'{}' is not an AWS region name (like eu-west-1)", Printable(text, 40)));
  }
  return text;
}

Result<std::string> CheckInstanceId(const std::string& text) {
  if (text.size() < 3 || text.size() > 32 || text.compare(0, 2, "i-") != 0 ||
      text.find_first_not_of("0123456789abcdef", 2) != std::string::npos) {
    return Status::Unavailable(fmt::format("'{}' is not an EC2 instance ID (like i-0abc123)", Printable(text, 40)));
  }
  return text;
}

Result<Options> TakeOptions(ProviderParams& params) {
  Options o;
  std::string region = params.Take("region").value_or("");
  if (region.empty()) region = Env("AWS_REGION");
  if (region.empty()) region = Env("AWS_DEFAULT_REGION");
  o.tag_key = params.Take("tag_key").value_or("");
  o.tag_value = params.Take("tag_value").value_or("");
  o.addr_type = params.Take("addr_type").value_or("private_v4");
  o.access_key = params.Take("access_key_id").value_or("");
  o.secret = params.Take("secret_access_key").value_or("");
  o.session_token = params.Take("session_token").value_or("");
  o.endpoint = params.Take("endpoint").value_or("");
  o.asg = params.Take("asg").value_or("");
  o.name_tag = params.Take("name_tag").value_or("");
  o.scheme = params.Take("scheme").value_or("http");
  auto peer = params.TakeNumber("peer_port", 2380, 1, 65535, "a port");
  if (!peer.ok()) return peer.status();
  auto client = params.TakeNumber("client_port", 2379, 1, 65535, "a port");
  if (!client.ok()) return client.status();
  o.peer_port = *peer;
  o.client_port = *client;
  auto page_size = params.TakeNumber("page_size", 1000, 5, 1000, "a page size (DescribeInstances' MaxResults)");
  if (!page_size.ok()) return page_size.status();
  o.page_size = *page_size;
  if (Status s = params.CheckAllTaken({"region", "tag_key", "tag_value", "addr_type", "access_key_id",
                                       "secret_access_key", "session_token", "endpoint", "asg", "name_tag", "scheme",
                                       "peer_port", "client_port", "page_size"});
      !s.ok()) {
    return s;
  }
  if (!region.empty() && !CheckRegion(region).ok()) {
    return Status::InvalidArgument(fmt::format("{} '{}' is not an AWS region name (like eu-west-1)",
                                               params.Label("region"), Printable(region, 40)));
  }
  if (o.asg.empty() && o.tag_key.empty()) {
    return Status::InvalidArgument(
        "provider=aws needs asg=NAME or asg=auto (the Auto Scaling group of the etcd instances) or tag_key=... "
        "[tag_value=...]");
  }
  if (!o.tag_value.empty() && o.tag_key.empty()) {
    return Status::InvalidArgument(fmt::format("{} needs tag_key", params.Label("tag_value")));
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
  }
  // IMDS answers for the instance role, the region left out and asg=auto.
  o.imds_endpoint = Env("AWS_EC2_METADATA_SERVICE_ENDPOINT");
  while (!o.imds_endpoint.empty() && o.imds_endpoint.back() == '/') o.imds_endpoint.pop_back();
  if (o.imds_endpoint.empty()) o.imds_endpoint = "http://169.254.169.254:80";
  if (!ParseUrl(o.imds_endpoint).ok()) {
    return Status::InvalidArgument(fmt::format("AWS_EC2_METADATA_SERVICE_ENDPOINT '{}' is not a URL like "
                                               "http://169.254.169.254:80",
                                               Printable(o.imds_endpoint, 100)));
  }
  if (!o.endpoint.empty()) {
    auto url = ParseUrl(o.endpoint);
    if (!url.ok() || o.endpoint.find('/', o.endpoint.find("://") + 3) != std::string::npos) {
      return Status::InvalidArgument(fmt::format("{} '{}' is not a base URL like http://127.0.0.1:5000",
                                                 params.Label("endpoint"), Printable(o.endpoint, 100)));
    }
  }
  if (!region.empty()) SetRegion(o, region);
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

Result<std::string> ParseAutoScalingInstanceGroup(const std::string& xml, const std::string& instance_id) {
  pugi::xml_document doc;
  pugi::xml_node root = Root(doc, xml, "DescribeAutoScalingInstancesResponse");
  if (!root) {
    return Status::Unavailable(fmt::format(
        "the answer is not Auto Scaling's DescribeAutoScalingInstancesResponse XML; it starts '{}'", Start(xml)));
  }
  for (pugi::xml_node i :
       root.child("DescribeAutoScalingInstancesResult").child("AutoScalingInstances").children("member")) {
    if (instance_id != i.child("InstanceId").text().get()) continue;
    std::string group = i.child("AutoScalingGroupName").text().get();
    if (group.empty() || group.size() > 255) {
      return Status::Unavailable(fmt::format("DescribeAutoScalingInstances gives instance {} a group name of {} bytes",
                                             Printable(instance_id, 40), group.size()));
    }
    return group;
  }
  return Status::NotFound(fmt::format("instance {} is in no Auto Scaling group", Printable(instance_id, 40)));
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

// IMDSv2 as AWS's SDKs speak it: one session token, asked for with a PUT (which a container's
// extra network hop cannot forward), then carried by every GET.
class ImdsSession {
 public:
  ImdsSession(std::string endpoint, Clock::TimePoint deadline) : endpoint_(std::move(endpoint)), deadline_(deadline) {}

  Result<std::string> Get(const std::string& path) {
    if (token_.empty()) {
      auto token = Fetch(endpoint_, "PUT", "/latest/api/token", {{"X-aws-ec2-metadata-token-ttl-seconds", "21600"}},
                         deadline_, "PUT /latest/api/token");
      if (!token.ok()) return token.status();
      if (token->empty() || token->size() > 4096 || token->find_first_of("\r\n") != std::string::npos) {
        return Status::Unavailable("PUT /latest/api/token answered no usable session token");
      }
      token_ = std::move(*token);
    }
    return Fetch(endpoint_, "GET", path, {{"X-aws-ec2-metadata-token", token_}}, deadline_, "GET " + path);
  }

 private:
  std::string endpoint_, token_;
  Clock::TimePoint deadline_;
};

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
  ImdsSession imds(o.imds_endpoint, deadline);
  auto roles = imds.Get("/latest/meta-data/iam/security-credentials/");
  if (!roles.ok()) return roles.status().Prefixed(what);
  const std::string role = roles->substr(0, roles->find('\n'));
  if (role.empty() || role.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+=,.@_-") !=
                          std::string::npos) {
    return Status::Unavailable(fmt::format("{}: no instance role (the instance profile names '{}')", what,
                                           Printable(role, 64)));
  }
  auto creds = imds.Get("/latest/meta-data/iam/security-credentials/" + role);
  if (!creds.ok()) return creds.status().Prefixed(what);
  return ParseImdsCredentials(*creds);
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
    if (Status s = AskInstanceMetadata(); !s.ok()) return s;
    if (Status s = RefreshCredentials(); !s.ok()) return s;
    if (Status s = FindOwnGroup(); !s.ok()) return s;
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
    std::string what = o_.asg.empty()       ? fmt::format("aws instances tagged {}{}{}", o_.tag_key,
                                                          o_.tag_value.empty() ? "" : "=", o_.tag_value)
                       : o_.asg == "auto" ? std::string("aws Auto Scaling group of this instance (asg=auto)")
                                          : fmt::format("aws Auto Scaling group {}", Printable(o_.asg, 255));
    return fmt::format("{} in {}", what, o_.region.empty() ? "this instance's region" : o_.region);
  }

 private:
  // What the operator left to the instance itself: the region, and for asg=auto the instance's ID.
  // Asked once; until IMDS answers, every Discover asks again.
  Status AskInstanceMetadata() {
    std::vector<std::string> paths;
    if (o_.region.empty()) paths.push_back("/latest/meta-data/placement/region");
    if (o_.asg == "auto" && instance_id_.empty()) paths.push_back("/latest/meta-data/instance-id");
    if (paths.empty()) return Status::Ok();
    auto answers = ImdsGet(o_.imds_endpoint, paths, deadline_);
    const std::string need = o_.region.empty() ? "the region (give region=... or AWS_REGION off EC2)"
                                               : "the instance ID for asg=auto (give asg=NAME off EC2)";
    if (!answers.ok()) return answers.status().Prefixed(fmt::format("provider=aws asks IMDS for {}", need));
    size_t next = 0;
    if (o_.region.empty()) {
      auto region = CheckRegion((*answers)[next++]);
      if (!region.ok()) return region.status().Prefixed("IMDS's placement/region");
      SetRegion(o_, *region);
      spdlog::info("provider=aws: region {} from the instance metadata", o_.region);
    }
    if (o_.asg == "auto" && instance_id_.empty()) {
      auto id = CheckInstanceId((*answers)[next]);
      if (!id.ok()) return id.status().Prefixed("IMDS's instance-id");
      instance_id_ = *id;
    }
    return Status::Ok();
  }

  // asg=auto: the group the instance is in, asked of Auto Scaling once it answers.
  Status FindOwnGroup() {
    if (o_.asg != "auto") return Status::Ok();
    auto answer = Call(o_.autoscaling_endpoint, "autoscaling",
                       {{"Action", "DescribeAutoScalingInstances"},
                        {"Version", kAutoScalingVersion},
                        {"InstanceIds.member.1", instance_id_}},
                       "autoscaling:DescribeAutoScalingInstances");
    if (!answer.ok()) return answer.status();
    auto group = ParseAutoScalingInstanceGroup(*answer, instance_id_);
    if (!group.ok()) return Status::Unavailable(fmt::format("{}: {}", Describe(), group.status().message()));
    spdlog::info("provider=aws asg=auto: instance {} is in Auto Scaling group {}", instance_id_, Printable(*group, 255));
    o_.asg = std::move(*group);
    return Status::Ok();
  }

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
  std::string instance_id_;  // asg=auto's, from IMDS
};

Result<std::unique_ptr<DiscoveryProvider>> Create(ProviderParams& params) {
  auto options = TakeOptions(params);
  if (!options.ok()) return options.status();
  return std::unique_ptr<DiscoveryProvider>(new AwsProvider(std::move(*options), params.context().deadline));
}

const RegisterProvider kRegistration("aws", Create);

}  // namespace
}  // namespace quorate::aws
