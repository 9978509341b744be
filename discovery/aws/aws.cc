#include "aws.h"

#include <pugixml.hpp>

#include <chrono>
#include <ctime>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include "discovery/cloud/api.h"
#include "discovery/cloud/cloud.h"
#include "net/cloud/opaque.h"
#include "quorate/env.h"
#include "quorate/http.h"
#include "quorate/log.h"
#include "net/cloud/sigv4.h"
#include "quorate/text.h"

namespace quorate::aws {
namespace {

constexpr char kEc2Version[] = "2016-11-15";
constexpr char kAutoScalingVersion[] = "2011-01-01";
// A DescribeInstances page of 1000 instances is about 5 MB of XML at most.
constexpr size_t kMaxAnswerBytes = 8 << 20;

// The root element `name` of an answer, or an empty node when it is not that document.
pugi::xml_node Root(pugi::xml_document& doc, const std::string& xml, const char* name) {
  // No DOCTYPE, so no entity the answer defines; character references are decoded as XML says.
  if (!doc.load_buffer(xml.data(), xml.size(), pugi::parse_default & ~pugi::parse_doctype)) return {};
  return doc.child(name);
}

}  // namespace

void SetRegion(Options& o, const std::string& region) {
  o.region = region;
  for (const auto& [service, url, given] : {std::tuple{"ec2", &o.ec2_endpoint, o.ec2_given},
                                            std::tuple{"autoscaling", &o.autoscaling_endpoint, o.autoscaling_given},
                                            std::tuple{"sts", &o.sts_endpoint, o.sts_given}}) {
    if (!given) *url = o.endpoint.empty() ? cloud::AwsEndpoint(service, region) : o.endpoint;
  }
}

Result<std::string> CheckInstanceId(const std::string& text) {
  if (text.size() < 3 || text.size() > 32 || text.compare(0, 2, "i-") != 0 ||
      text.find_first_not_of("0123456789abcdef", 2) != std::string::npos) {
    return Status::Unavailable(fmt::format("'{}' is not an EC2 instance ID (like i-0abc123)", Printable(text, 40)));
  }
  return text;
}

namespace {

// The keys, once: what TakeOptions reads by, what --help-provider aws prints.
const ProviderKeys& Keys() {
  static const ProviderKeys kKeys = cloud::WithCommonKeys(
      {
          {.name = "asg", .help = "the Auto Scaling group of the etcd instances; auto: this instance's (IMDS)",
           .values = "auto or a group's name"},
          {.name = "tag_key", .help = "instances carrying this tag, instead of or beside asg (no size, no rule 9)"},
          {.name = "tag_value", .help = "with tag_key: the tag's value"},
          {.name = "region", .help = "the region; else AWS_REGION, AWS_DEFAULT_REGION, else this instance's (IMDS)",
           .values = "an AWS region (eu-west-1)"},
          {.name = "addr_type", .help = "the instance address the members' URLs carry", .fallback = "private_v4",
           .choices = {"private_v4", "public_v4", "public_v6", "private_dns"}},
          {.name = "access_key_id", .help = "a key, with secret_access_key; else AWS's credential chain"},
          {.name = "secret_access_key", .help = "the key's secret, with access_key_id"},
          {.name = "session_token", .help = "the session token of temporary keys"},
          {.name = "endpoint", .help = "one base URL for EC2, Auto Scaling and STS (VPC endpoints, tests)",
           .values = "a base URL"},
          {.name = "ec2_endpoint", .help = "EC2's base URL alone; default the region's", .values = "a base URL"},
          {.name = "autoscaling_endpoint", .help = "Auto Scaling's base URL alone; default the region's",
           .values = "a base URL"},
          {.name = "sts_endpoint", .help = "STS's base URL alone (web identity); default the region's",
           .values = "a base URL"},
          {.name = "page_size", .help = "DescribeInstances' MaxResults", .fallback = "1000", .lo = 5, .hi = 1000,
           .values = "a page size (DescribeInstances' MaxResults)"},
      },
      "the instance tag naming the member; default the instance ID");
  return kKeys;
}

}  // namespace

Result<Options> TakeOptions(ProviderParams& params) {
  Options o;
  std::string region = params.Take("region").value_or("");
  if (region.empty()) region = Env("AWS_REGION");
  if (region.empty()) region = Env("AWS_DEFAULT_REGION");
  o.tag_key = params.Take("tag_key").value_or("");
  o.tag_value = params.Take("tag_value").value_or("");
  auto addr_type = params.TakeValue("addr_type");
  if (!addr_type.ok()) return addr_type.status();
  o.addr_type = *addr_type;
  o.access_key = params.Take("access_key_id").value_or("");
  o.secret = params.Take("secret_access_key").value_or("");
  o.session_token = params.Take("session_token").value_or("");
  o.endpoint = params.Take("endpoint").value_or("");
  const std::string ec2_endpoint = params.Take("ec2_endpoint").value_or("");
  const std::string autoscaling_endpoint = params.Take("autoscaling_endpoint").value_or("");
  const std::string sts_endpoint = params.Take("sts_endpoint").value_or("");
  o.asg = params.Take("asg").value_or("");
  auto common = cloud::TakeCommonKeys(params);
  if (!common.ok()) return common.status();
  static_cast<cloud::CommonKeys&>(o) = std::move(*common);
  auto page_size = params.TakeNumber("page_size");
  if (!page_size.ok()) return page_size.status();
  o.page_size = *page_size;
  if (Status s = params.CheckAllTaken(); !s.ok()) return s;
  if (!region.empty() && !cloud::CheckAwsRegion(region).ok()) {
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
  if (o.access_key.empty() != o.secret.empty()) {
    return Status::InvalidArgument("access_key_id and secret_access_key go together: give both or neither");
  }
  for (const auto& [key, value, url, given] :
       {std::tuple{"endpoint", o.endpoint, &o.endpoint, static_cast<bool*>(nullptr)},
        std::tuple{"ec2_endpoint", ec2_endpoint, &o.ec2_endpoint, &o.ec2_given},
        std::tuple{"autoscaling_endpoint", autoscaling_endpoint, &o.autoscaling_endpoint, &o.autoscaling_given},
        std::tuple{"sts_endpoint", sts_endpoint, &o.sts_endpoint, &o.sts_given}}) {
    if (value.empty()) continue;
    auto parsed = ParseUrl(value);
    if (!parsed.ok() || value.find('/', value.find("://") + 3) != std::string::npos) {
      return Status::InvalidArgument(fmt::format("{} '{}' is not a base URL like http://127.0.0.1:5000",
                                                 params.Label(key), Printable(value, 100)));
    }
    *url = value;
    if (given) *given = true;
  }
  if (!region.empty()) SetRegion(o, region);
  auto chain = cloud::AwsCredentialChain::Create(
      {o.access_key, o.secret, o.session_token, o.region, o.sts_endpoint, "", nullptr});
  if (!chain.ok()) return chain.status();
  o.credentials = std::move(*chain);
  return o;
}

Result<InstancePage> ParseDescribeInstances(const std::string& xml) {
  pugi::xml_document doc;
  pugi::xml_node root = Root(doc, xml, "DescribeInstancesResponse");
  if (!root) {
    return cloud::NotThe("EC2's DescribeInstancesResponse XML", xml);
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
    return cloud::NotThe("Auto Scaling's DescribeAutoScalingGroupsResponse XML", xml);
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
    if (Status s = cloud::CheckGroupSize(group.desired, fmt::format("Auto Scaling group {}", Printable(name, 64)));
        !s.ok()) {
      return s;
    }
    for (pugi::xml_node m : g.child("Instances").children("member")) {
      if (!GroupCounts(m.child("LifecycleState").text().get())) continue;
      auto id = CheckInstanceId(m.child("InstanceId").text().get());
      if (!id.ok()) return id.status().Prefixed(fmt::format("Auto Scaling group {}", Printable(name, 64)));
      group.instance_ids.push_back(*id);
    }
    if (Status s = cloud::CheckGroupSize(static_cast<int64_t>(group.instance_ids.size()),
                                         fmt::format("Auto Scaling group {}'s instance list", Printable(name, 64)));
        !s.ok()) {
      return s;
    }
    return group;
  }
  return Status::NotFound(fmt::format("no Auto Scaling group named {}", Printable(name, 64)));
}

Result<std::string> ParseAutoScalingInstanceGroup(const std::string& xml, const std::string& instance_id) {
  pugi::xml_document doc;
  pugi::xml_node root = Root(doc, xml, "DescribeAutoScalingInstancesResponse");
  if (!root) {
    return cloud::NotThe("Auto Scaling's DescribeAutoScalingInstancesResponse XML", xml);
  }
  for (pugi::xml_node i :
       root.child("DescribeAutoScalingInstancesResult").child("AutoScalingInstances").children("member")) {
    if (instance_id != i.child("InstanceId").text().get()) continue;
    std::string group = i.child("AutoScalingGroupName").text().get();
    if (group.empty() || group.size() > 255 || !IsPrintable(group)) {
      return Status::Unavailable(fmt::format("DescribeAutoScalingInstances gives instance {} a group name of {} bytes",
                                             Printable(instance_id, 40), group.size()));
    }
    return group;
  }
  return Status::NotFound(fmt::format("instance {} is in no Auto Scaling group", Printable(instance_id, 40)));
}

bool Counts(const std::string& state) { return state == "pending" || state == "running"; }

bool GroupCounts(const std::string& lifecycle_state) {
  return lifecycle_state == "InService" || lifecycle_state == "Pending" || lifecycle_state == "Pending:Wait" ||
         lifecycle_state == "Pending:Proceed";
}

Result<std::optional<Member>> MemberOf(const Options& o, const Instance& instance) {
  std::string given;
  if (o.addr_type == "private_v4") given = instance.private_ip;
  if (o.addr_type == "public_v4") given = instance.public_ip;
  if (o.addr_type == "private_dns") given = instance.private_dns;
  if (o.addr_type == "public_v6") given = instance.ipv6;
  if (given.empty()) return std::optional<Member>();
  const std::string what = "instance " + Printable(instance.id, 40);
  auto host = o.addr_type == "private_dns" ? cloud::DnsHost(given, what)
                                           : cloud::UnicastHost(given, o.addr_type == "public_v6" ? cloud::Family::kV6
                                                                                                   : cloud::Family::kV4,
                                                                what);
  if (!host.ok()) return host.status();
  std::string name = instance.id;
  if (!o.name_tag.empty()) {
    auto tag = instance.tags.find(o.name_tag);
    if (tag != instance.tags.end() && !tag->second.empty()) name = tag->second;
  }
  auto member = cloud::InstanceMember(name, *host, o, what);
  if (!member.ok()) return member.status();
  return std::optional<Member>(std::move(*member));
}

std::map<std::string, std::string> DescribeInstancesQuery(const Options& o, const std::vector<std::string>* group_ids,
                                                          const std::string& next_token) {
  std::map<std::string, std::string> q = {{"Action", "DescribeInstances"},
                                          {"Version", kEc2Version},
                                          {"MaxResults", std::to_string(o.page_size)},
                                          {"Filter.1.Name", "instance-state-name"},
                                          {"Filter.1.Value.1", "pending"},
                                          {"Filter.1.Value.2", "running"}};
  int n = 2;
  if (group_ids) {
    // By ID, as the group lists them: a filter (MaxResults does not go with InstanceIds), at most
    // kMaxClusterSize values, within the API's 200.
    q[fmt::format("Filter.{}.Name", n)] = "instance-id";
    for (size_t i = 0; i < group_ids->size(); ++i) q[fmt::format("Filter.{}.Value.{}", n, i + 1)] = (*group_ids)[i];
    ++n;
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

class AwsProvider : public cloud::ScalingGroupProvider {
 public:
  AwsProvider(Options o, const ProviderContext& context) : o_(std::move(o)), deadline_(context.deadline) {
    api_.clock = context.clock;
    api_.deadline = deadline_;
    api_.read_error = cloud::ParseAwsError;
    api_.throttled = [](int, const cloud::ApiError& e) {
      return e.code == "RequestLimitExceeded" || e.code == "Throttling" || e.code == "ThrottlingException";
    };
    api_.expired = [](int, const cloud::ApiError& e) {
      return e.code == "ExpiredToken" || e.code == "RequestExpired" || e.code == "AuthFailure";
    };
    api_.drop = [this] { o_.credentials->Drop(); };
    api_.refusal = "the credentials need {} (and are they valid, for this region?)";
  }

  Result<std::vector<Member>> Discover() override {
    StartReading();
    if (Status s = AskInstanceMetadata(); !s.ok()) return s;
    // Once a Discover: its calls carry the same credentials, fetched again when near their expiry.
    auto creds = o_.credentials->Get(deadline_);
    if (!creds.ok()) return creds.status().Prefixed(Describe());
    creds_ = std::move(*creds);
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
      if (group->instance_ids.empty()) {
        return Status::Unavailable(fmt::format("{} has no InService or Pending instance yet", Describe()));
      }
    }
    std::vector<Member> members;
    Status read = cloud::ReadPages("DescribeInstances", "NextToken", [&](const std::string& next) -> Result<cloud::Page> {
      auto answer = Call(o_.ec2_endpoint, "ec2", DescribeInstancesQuery(o_, group ? &group->instance_ids : nullptr, next),
                         "ec2:DescribeInstances");
      if (!answer.ok()) return answer.status();
      auto page = ParseDescribeInstances(*answer);
      if (!page.ok()) return page.status();
      for (const Instance& i : page->instances) {
        if (!Counts(i.state)) continue;
        auto member = MemberOf(o_, i);
        if (!member.ok()) return member.status();
        if (*member) members.push_back(std::move(**member));
      }
      return cloud::Page{page->instances.size(), page->next_token};
    });
    if (!read.ok()) return read;
    if (Status s = cloud::CheckMembers(members, Describe()); !s.ok()) return s;
    if (group) ReadWhole(static_cast<size_t>(group->desired));
    return members;
  }

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
    auto answers = cloud::ImdsGet(o_.credentials->imds_endpoint(), paths, deadline_);
    const std::string need = o_.region.empty() ? "the region (give region=... or AWS_REGION off EC2)"
                                               : "the instance ID for asg=auto (give asg=NAME off EC2)";
    if (!answers.ok()) return answers.status().Prefixed(fmt::format("provider=aws asks IMDS for {}", need));
    size_t next = 0;
    if (o_.region.empty()) {
      auto region = cloud::CheckAwsRegion((*answers)[next++]);
      if (!region.ok()) return region.status().Prefixed("IMDS's placement/region");
      SetRegion(o_, *region);
      o_.credentials->SetStsEndpoint(o_.sts_endpoint);
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

  // One signed Query API GET; the answer's body. Throttles are waited out within the deadline; an
  // error answer names the call and, for a refusal, the permission it needs.
  Result<std::string> Call(const std::string& endpoint, const std::string& service,
                           const std::map<std::string, std::string>& query, const std::string& permission) {
    auto url = ParseUrl(endpoint);
    if (!url.ok()) return url.status();
    HttpRequest request;
    request.base_url = endpoint;
    request.target = "/";
    for (const auto& [k, v] : query) {
      request.target += (request.target.size() == 1 ? "?" : "&") + sigv4::UriEncode(k, false) + "=" +
                        sigv4::UriEncode(v, false);
    }
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
    return cloud::CallApi(api_, std::move(request), kMaxAnswerBytes,
                          {fmt::format("{} {} at {}", query.at("Action"), Describe(), endpoint), permission}, sign);
  }

  Options o_;
  cloud::Api api_;
  cloud::AwsCredentials creds_;  // this Discover's
  Clock::TimePoint deadline_;
  std::string instance_id_;  // asg=auto's, from IMDS
};

Result<std::unique_ptr<DiscoveryProvider>> Create(ProviderParams& params) {
  auto options = TakeOptions(params);
  if (!options.ok()) return options.status();
  return std::unique_ptr<DiscoveryProvider>(new AwsProvider(std::move(*options), params.context()));
}

const RegisterProvider kRegistration("aws", Keys(), Create);

}  // namespace
}  // namespace quorate::aws
