// The `k8s` provider: the members are the pods of an etcd StatefulSet, read from the Kubernetes API
// the way client-go's rest.InClusterConfig reaches it (service-account token, CA bundle, namespace),
// either by listing pods with `label_selector` or from the EndpointSlices of the headless `service`.
// Each pod is named by the Service's DNS (<pod>.<service>.<namespace>.svc.<cluster domain>), and the
// StatefulSet's spec.replicas is the expected size when --cluster-size is not given.
#include "k8s.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <map>
#include <set>
#include <nlohmann/json.hpp>
#include <string_view>

#include "quorate/clock.h"
#include "quorate/duration.h"
#include "quorate/env.h"
#include "quorate/fs.h"
#include "quorate/http.h"
#include "quorate/json.h"
#include "quorate/text.h"

namespace quorate::k8s {
namespace {

using nlohmann::json;

constexpr int kDefaultPeerPort = 2380;
constexpr int kDefaultClientPort = 2379;
// A continue token the server has forgotten restarts the listing; a server that forgets every time
// is not going to give a consistent list soon.
constexpr int kListRestarts = 3;
// A list of etcd pods is a few pages at most; a server handing out continue tokens without end is
// not giving a list.
constexpr int kMaxListPages = 100;
// A pod is a few KiB of JSON, and a page holds up to page_size (at most 10000) of them, but an etcd
// StatefulSet's label selector finds a handful.
constexpr size_t kMaxListPageBytes = 8 << 20;
constexpr size_t kMaxObjectBytes = 1 << 20;
// The API server's continue tokens are base64 of a small JSON object: a few hundred bytes.
constexpr size_t kMaxContinueBytes = 4096;

Status Bad(const std::string& why) { return Status::InvalidArgument("--discovery k8s " + why); }

// RFC 1123 label as Kubernetes checks names: lower-case letters, digits and '-', alphanumeric ends.
bool IsDns1123Label(std::string_view s, size_t max = 63) {
  if (s.empty() || s.size() > max || s.front() == '-' || s.back() == '-') return false;
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'; });
}

bool IsDns1123Subdomain(std::string_view s) {
  if (s.empty() || s.size() > 253) return false;
  for (size_t start = 0;;) {
    size_t dot = s.find('.', start);
    if (!IsDns1123Label(s.substr(start, dot == std::string_view::npos ? dot : dot - start))) return false;
    if (dot == std::string_view::npos) return true;
    start = dot + 1;
  }
}

std::string Trimmed(std::string text) {
  auto space = [](unsigned char c) { return std::isspace(c); };
  text.erase(text.begin(), std::find_if_not(text.begin(), text.end(), space));
  text.erase(std::find_if_not(text.rbegin(), text.rend(), space).base(), text.end());
  return text;
}

Result<std::string> CheckApiServer(std::string url, const std::string& from) {
  auto bad = [&](const std::string& why) {
    return Bad(
        fmt::format("{} '{}' {}; want https://HOST[:PORT], e.g. api_server=https://10.96.0.1:443", from, url, why));
  };
  if (url.rfind("https://", 0) != 0) return bad("is not an https URL (the token must not travel in clear)");
  while (!url.empty() && url.back() == '/') url.pop_back();
  std::string authority = url.substr(8);
  if (authority.find_first_of("/?#@") != std::string::npos) return bad("has a path, query or user");
  size_t colon = authority.rfind(':');
  if (colon == std::string::npos || authority.find(']', colon) != std::string::npos) url += ":443";
  auto parsed = ParseUrl(url);
  if (!parsed.ok()) return bad("is not a URL: " + parsed.status().message());
  return url;
}

// KUBERNETES_SERVICE_HOST/PORT, joined as Go's net.JoinHostPort does.
Result<std::string> InClusterServer() {
  const std::string host = Env("KUBERNETES_SERVICE_HOST"), port = Env("KUBERNETES_SERVICE_PORT");
  if (host.empty() || port.empty()) {
    return Bad(
        "needs the API server: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are unset (not in a pod?); run "
        "in-cluster or give api_server=https://HOST:PORT with token_file= and ca_file=");
  }
  return CheckApiServer(
      fmt::format("https://{}:{}", host.find(':') != std::string::npos ? "[" + host + "]" : host, port),
      "KUBERNETES_SERVICE_HOST/PORT give");
}

// The file must be there and readable now: a typo is better reported at start than at the first
// request. Its content is read again on every use.
Status CheckReadable(const std::string& path, const std::string& key, const std::string& what) {
  auto content = ReadFile(path);
  if (!content.ok()) {
    return Bad(
        fmt::format("cannot read the {} {}: {}; mount the service account (automountServiceAccountToken) "
                    "or give {}=",
                    what, path, content.status().message(), key));
  }
  if (Trimmed(*content).empty()) {
    return Bad(fmt::format("the {} {} is empty; give {}= a file that holds it", what, path, key));
  }
  return Status::Ok();
}

Result<int> ParsePageSize(const std::string& text) {
  int n = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (ec != std::errc() || end != text.data() + text.size() || n < 1 || n > 10000) {
    return Bad(fmt::format("page_size='{}': want a whole number from 1 to 10000 (items a list page)", text));
  }
  return n;
}

// An IANA service name, which is what a Kubernetes port name must be.
bool IsPortName(std::string_view s) {
  return IsDns1123Label(s, 15) && std::any_of(s.begin(), s.end(), [](char c) { return c >= 'a' && c <= 'z'; });
}

const json* Field(const json& obj, const char* key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(key);
  return it == obj.end() || it->is_null() ? nullptr : &*it;
}

std::string StringField(const json& obj, const char* key) {
  const json* v = Field(obj, key);
  return v && v->is_string() ? v->get<std::string>() : "";
}

bool BoolField(const json& obj, const char* key) {
  const json* v = Field(obj, key);
  return v && v->is_boolean() && v->get<bool>();
}

struct NamedPorts {
  std::map<std::string, int> ports;
  int Or(const std::string& name, int fallback) const {
    auto it = ports.find(name);
    return it == ports.end() ? fallback : it->second;
  }
};

// What the API server answered is fetched at run time: when it is wrong (a proxy's HTML page, a
// half-written object), it may be right on the next look, and the caller retries.
Status WrongAnswer(const std::string& text) { return Status::Unavailable(text); }

Result<json> ParseJson(const std::string& body, const std::string& source) {
  auto doc = ParseForeignJson(body);
  if (!doc.ok()) {
    return WrongAnswer(
        fmt::format("{}: the answer is {}; is api_server a Kubernetes API server?", source, doc.status().message()));
  }
  return doc;
}

// A list answer, its shape checked: the document (never copied: the items are read where they are)
// and its continue token.
struct List {
  json doc;
  std::string next;
  const json& items() const {
    static const json kNone = json::array();
    const json* items = Field(doc, "items");
    return items ? *items : kNone;
  }
};

Result<List> ParseList(const std::string& body, const std::string& kind, const std::string& source) {
  auto doc = ParseJson(body, source);
  if (!doc.ok()) return doc.status();
  auto bad = [&](const std::string& why) {
    return WrongAnswer(fmt::format("{}: the answer is not a {}: {}", source, kind, why));
  };
  if (!doc->is_object()) return bad(fmt::format("it is {}, not an object", doc->type_name()));
  if (StringField(*doc, "kind") != kind) {
    return bad(fmt::format("kind is '{}'", Printable(StringField(*doc, "kind"), 64)));
  }
  if (const json* items = Field(*doc, "items"); items && !items->is_array()) return bad("items is not a list");
  List list{std::move(*doc), ""};
  if (const json* meta = Field(list.doc, "metadata")) list.next = StringField(*meta, "continue");
  // The token goes back into our next request: an opaque, printable, short word from the server,
  // never one with a control byte or a space (escaped or not, such a token is not the API's).
  if (list.next.size() > kMaxContinueBytes ||
      std::any_of(list.next.begin(), list.next.end(), [](unsigned char c) { return c <= 0x20 || c >= 0x7f; })) {
    return bad(fmt::format("its continue token ({} bytes) holds a space, a control byte or a byte beyond ASCII, or "
                           "is longer than {} bytes",
                           list.next.size(), kMaxContinueBytes));
  }
  return list;
}

// The StatefulSet named by an object's controller ownerReference; empty when there is none.
std::string ControllingStatefulSet(const json& meta) {
  const json* owners = Field(meta, "ownerReferences");
  if (!owners || !owners->is_array()) return "";
  for (const json& owner : *owners) {
    if (BoolField(owner, "controller") && StringField(owner, "kind") == "StatefulSet") {
      return StringField(owner, "name");
    }
  }
  return "";
}

// Read from a container's or a slice's ports: [{"name": ..., "containerPort"|"port": N}].
Status ReadPorts(const json& ports, const char* number_key, const std::string& source, NamedPorts& out) {
  if (!ports.is_array()) return WrongAnswer(fmt::format("{}: ports is not a list", source));
  for (const json& p : ports) {
    const json* number = Field(p, number_key);
    const std::string name = StringField(p, "name");
    if (name.empty()) continue;
    if (!number || !number->is_number_integer() || *number < 1 || *number > 65535) {
      return WrongAnswer(fmt::format("{}: port '{}' has no {} from 1 to 65535", source, Printable(name, 64), number_key));
    }
    out.ports.emplace(name, number->get<int>());
  }
  return Status::Ok();
}

}  // namespace

Result<Options> TakeOptions(ProviderParams& params) {
  Options o;
  auto service = params.TakeRequired("service");
  if (!service.ok()) return Bad("needs service=NAME: the headless Service that gives the pods DNS names");
  o.service = *service;
  auto ns = params.Take("namespace");
  o.label_selector = params.Take("label_selector").value_or("");
  o.port_name = params.Take("port_name").value_or(o.port_name);
  o.client_port_name = params.Take("client_port_name").value_or(o.client_port_name);
  o.scheme = params.Take("scheme").value_or(o.scheme);
  o.cluster_domain = params.Take("cluster_domain").value_or(o.cluster_domain);
  o.statefulset = params.Take("statefulset").value_or("");
  auto page_size = params.Take("page_size");
  auto timeout = params.Take("timeout");
  auto api_server = params.Take("api_server");
  o.token_file = params.Take("token_file").value_or(std::string(kServiceAccountDir) + "/token");
  o.ca_file = params.Take("ca_file").value_or(std::string(kServiceAccountDir) + "/ca.crt");
  if (Status s = params.CheckAllTaken(); !s.ok()) return s;

  if (!IsDns1123Label(o.service)) {
    return Bad(
        fmt::format("service='{}': not a Service name (lower-case letters, digits and '-', up to 63)", o.service));
  }
  if (!IsPortName(o.port_name)) {
    return Bad(fmt::format("port_name='{}': not a Kubernetes port name (up to 15 of a-z, 0-9 and '-')", o.port_name));
  }
  if (!IsPortName(o.client_port_name)) {
    return Bad(fmt::format("client_port_name='{}': not a Kubernetes port name (up to 15 of a-z, 0-9 and '-')",
                           o.client_port_name));
  }
  if (o.scheme != "http" && o.scheme != "https") return Bad(fmt::format("scheme='{}': want http or https", o.scheme));
  while (!o.cluster_domain.empty() && o.cluster_domain.back() == '.') o.cluster_domain.pop_back();
  if (!o.cluster_domain.empty() && !IsDns1123Subdomain(o.cluster_domain)) {
    return Bad(
        fmt::format("cluster_domain='{}': not a DNS domain (e.g. cluster.local; empty for none)", o.cluster_domain));
  }
  if (!o.statefulset.empty() && !IsDns1123Subdomain(o.statefulset)) {
    return Bad(fmt::format("statefulset='{}': not a StatefulSet name", o.statefulset));
  }
  if (page_size) {
    auto n = ParsePageSize(*page_size);
    if (!n.ok()) return n.status();
    o.page_size = *n;
  }
  if (timeout) {
    auto d = ParseDuration(*timeout, "--discovery k8s timeout");
    if (!d.ok()) return d.status();
    o.timeout = *d;
  }

  auto server = api_server ? CheckApiServer(*api_server, "api_server") : InClusterServer();
  if (!server.ok()) return server.status();
  o.api_server = *server;
  if (Status s = CheckReadable(o.token_file, "token_file", "service-account token"); !s.ok()) return s;
  if (Status s = CheckReadable(o.ca_file, "ca_file", "API server's CA bundle"); !s.ok()) return s;

  if (ns) {
    o.namespace_name = *ns;
  } else {
    const std::string file = std::string(kServiceAccountDir) + "/namespace";
    auto content = ReadFile(file);
    if (!content.ok()) {
      return Bad(fmt::format("needs namespace=NAME: there is no {} to default it from (not in a pod?)", file));
    }
    o.namespace_name = Trimmed(*content);
  }
  if (!IsDns1123Label(o.namespace_name)) {
    return Bad(fmt::format("namespace='{}': not a namespace name (lower-case letters, digits and '-', up to 63)",
                           o.namespace_name));
  }
  return o;
}

std::string QueryEscape(const std::string& text) {
  std::string out;
  for (unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += fmt::format("%{:02X}", c);
    }
  }
  return out;
}

namespace {

std::string ListQuery(const Options& o, const std::string& selector, const std::string& continue_token) {
  std::string query = fmt::format("?labelSelector={}&limit={}", QueryEscape(selector), o.page_size);
  if (!continue_token.empty()) query += "&continue=" + QueryEscape(continue_token);
  return query;
}

}  // namespace

std::string PodListPath(const Options& o, const std::string& continue_token) {
  return fmt::format("/api/v1/namespaces/{}/pods{}", o.namespace_name, ListQuery(o, o.label_selector, continue_token));
}

std::string EndpointSliceListPath(const Options& o, const std::string& continue_token) {
  return fmt::format("/apis/discovery.k8s.io/v1/namespaces/{}/endpointslices{}", o.namespace_name,
                     ListQuery(o, "kubernetes.io/service-name=" + o.service, continue_token));
}

std::string PodPath(const Options& o, const std::string& pod) {
  return fmt::format("/api/v1/namespaces/{}/pods/{}", o.namespace_name, pod);
}

std::string StatefulSetPath(const Options& o, const std::string& statefulset) {
  return fmt::format("/apis/apps/v1/namespaces/{}/statefulsets/{}", o.namespace_name, statefulset);
}

Member MemberFor(const Options& o, const std::string& name, const std::string& dns_label, int peer_port,
                 int client_port) {
  const std::string host = fmt::format("{}.{}.{}.svc{}{}", dns_label, o.service, o.namespace_name,
                                       o.cluster_domain.empty() ? "" : ".", o.cluster_domain);
  return {name,
          {fmt::format("{}://{}:{}", o.scheme, host, peer_port)},
          {fmt::format("{}://{}:{}", o.scheme, host, client_port)}};
}

Result<ListPage> ParsePodList(const Options& o, const std::string& body, const std::string& source) {
  auto list = ParseList(body, "PodList", source);
  if (!list.ok()) return list.status();
  ListPage page;
  page.next = list->next;
  for (const json& pod : list->items()) {
    const json* meta = Field(pod, "metadata");
    const std::string name = meta ? StringField(*meta, "name") : "";
    if (!IsDns1123Label(name)) {
      return WrongAnswer(fmt::format(
          "{}: pod '{}' has no name usable as a DNS label under the Service (a StatefulSet's pods do): narrow "
          "label_selector=",
          source, Printable(name, 64)));
    }
    if (Field(*meta, "deletionTimestamp")) continue;
    NamedPorts ports;
    const json* spec = Field(pod, "spec");
    const json* containers = spec ? Field(*spec, "containers") : nullptr;
    if (containers && containers->is_array()) {
      for (const json& c : *containers) {
        if (const json* p = Field(c, "ports")) {
          if (Status s = ReadPorts(*p, "containerPort", source + " pod " + name, ports); !s.ok()) return s;
        }
      }
    }
    if (std::string controller = ControllingStatefulSet(*meta); !controller.empty()) {
      page.statefulsets.push_back(std::move(controller));
    }
    page.members.push_back(MemberFor(o, name, name, ports.Or(o.port_name, kDefaultPeerPort),
                                     ports.Or(o.client_port_name, kDefaultClientPort)));
  }
  return page;
}

Result<ListPage> ParseEndpointSliceList(const Options& o, const std::string& body, const std::string& source) {
  auto list = ParseList(body, "EndpointSliceList", source);
  if (!list.ok()) return list.status();
  ListPage page;
  page.next = list->next;
  for (const json& slice : list->items()) {
    const json* meta = Field(slice, "metadata");
    const std::string where = fmt::format("{} slice '{}'", source, Printable(meta ? StringField(*meta, "name") : "", 64));
    NamedPorts ports;
    if (const json* p = Field(slice, "ports")) {
      if (Status s = ReadPorts(*p, "port", where, ports); !s.ok()) return s;
    }
    const json* endpoints = Field(slice, "endpoints");
    if (!endpoints) continue;
    if (!endpoints->is_array()) return WrongAnswer(where + ": endpoints is not a list");
    for (const json& e : *endpoints) {
      // Not-ready endpoints count: a member that has not started yet is still a member.
      if (const json* conditions = Field(e, "conditions"); conditions && BoolField(*conditions, "terminating"))
        continue;
      const json* target = Field(e, "targetRef");
      std::string pod = target && StringField(*target, "kind") == "Pod" ? StringField(*target, "name") : "";
      std::string hostname = StringField(e, "hostname");
      if (pod.empty()) pod = hostname;
      if (hostname.empty()) hostname = pod;
      if (!IsDns1123Label(pod) || !IsDns1123Label(hostname)) {
        return WrongAnswer(fmt::format(
            "{}: an endpoint ({}) names no pod usable as a member (targetRef '{}', hostname '{}')", where,
            Printable(Field(e, "addresses") ? Field(e, "addresses")->dump() : "no addresses", 80), Printable(pod, 64),
            Printable(hostname, 64)));
      }
      page.members.push_back(MemberFor(o, pod, hostname, ports.Or(o.port_name, kDefaultPeerPort),
                                       ports.Or(o.client_port_name, kDefaultClientPort)));
    }
  }
  return page;
}

Result<std::string> ParsePodController(const std::string& body, const std::string& source) {
  auto doc = ParseJson(body, source);
  if (!doc.ok()) return doc.status();
  if (StringField(*doc, "kind") != "Pod") {
    return WrongAnswer(fmt::format("{}: the answer is not a Pod", source));
  }
  const json* meta = Field(*doc, "metadata");
  return meta ? ControllingStatefulSet(*meta) : std::string();
}

Result<size_t> ParseStatefulSetReplicas(const std::string& body, const std::string& source) {
  auto doc = ParseJson(body, source);
  if (!doc.ok()) return doc.status();
  if (StringField(*doc, "kind") != "StatefulSet") {
    return WrongAnswer(fmt::format("{}: the answer is not a StatefulSet", source));
  }
  const json* spec = Field(*doc, "spec");
  // The API server defaults a missing spec.replicas to 1, as it does when creating the object.
  const json* replicas = spec ? Field(*spec, "replicas") : nullptr;
  if (!replicas) return size_t{1};
  if (!replicas->is_number_integer() || *replicas < 0) {
    return WrongAnswer(fmt::format("{}: spec.replicas is {}, not a count", source, Printable(replicas->dump(), 64)));
  }
  return replicas->get<size_t>();
}

Status Refusal(const Options& o, const Call& call, int status, const std::string& body) {
  auto doc = ParseForeignJson(body);
  std::string message = Printable(doc.ok() ? StringField(*doc, "message") : "", 200);
  if (message.empty()) message = Printable(body, 80);
  const std::string what = fmt::format("GET {}{}: HTTP {}", o.api_server, call.path, status);
  const std::string server_said = message.empty() ? "" : "; the API server says: " + message;
  if (status == 403) {
    return Status::InvalidArgument(fmt::format(
        "the service account may not {} {} in namespace {}: add verb \"{}\" on \"{}\" (API group \"{}\") to its Role "
        "({} Forbidden{})",
        call.verb, call.resource, o.namespace_name, call.verb, call.resource, call.group, what, server_said));
  }
  if (status == 404 && call.resource == "statefulsets") {
    return Status::InvalidArgument(fmt::format("StatefulSet '{}' not found in namespace {}: fix statefulset= ({}{})",
                                               call.name, o.namespace_name, what, server_said));
  }
  if (status == 404 && call.name.empty()) {
    return Status::InvalidArgument(fmt::format("namespace {} not found (or no {} API there): fix namespace= ({}{})",
                                               o.namespace_name, call.resource, what, server_said));
  }
  if (status == 404) {
    // A pod named by a slice a moment ago and gone now: the next look will not name it.
    return Status::Unavailable(fmt::format("{} '{}' is gone ({}{})", call.resource, call.name, what, server_said));
  }
  if (IsRetryableHttpStatus(status)) return Status::Unavailable(fmt::format("{}{}; retrying", what, server_said));
  return Status::InvalidArgument(what + server_said);
}

namespace {

struct Answer {
  int status = 0;
  std::string body;
};

class K8sProvider : public DiscoveryProvider {
 public:
  K8sProvider(Options o, std::optional<size_t> cluster_size, Clock::TimePoint deadline)
      : o_(std::move(o)), cluster_size_(cluster_size), deadline_(deadline) {}

  Result<std::vector<Member>> Discover() override {
    // Asked again once the caller's time is up, the last failure is still the reason to give.
    if (!last_failure_.ok() && RealClock().Now() >= deadline_) return last_failure_;
    auto members = DiscoverNow();
    last_failure_ = members.ok() ? Status::Ok() : members.status();
    return members;
  }

  std::optional<size_t> ImpliedSize() const override { return implied_size_; }

  std::string Describe() const override {
    return o_.label_selector.empty()
               ? fmt::format("k8s endpointslices of service {} in namespace {} at {}", o_.service, o_.namespace_name,
                             o_.api_server)
               : fmt::format("k8s pods {} in namespace {} at {}", o_.label_selector, o_.namespace_name, o_.api_server);
  }

 private:
  Result<std::vector<Member>> DiscoverNow() {
    std::vector<Member> members;
    std::vector<std::string> controllers;
    for (int restarts = 0;; ++restarts) {
      auto listed = ListAll(members, controllers);
      if (!listed.ok()) return listed.status();
      if (*listed) break;
      if (restarts == kListRestarts) {
        return Status::Unavailable(fmt::format(
            "{}: the list's continue token expired {} times in a row (410 Gone); page_size={} may be too small for how "
            "fast the list changes",
            Describe(), restarts + 1, o_.page_size));
      }
    }
    // Dual-stack Services list a pod once per address family.
    std::sort(members.begin(), members.end(), [](const Member& a, const Member& b) { return a.name < b.name; });
    members.erase(
        std::unique(members.begin(), members.end(), [](const Member& a, const Member& b) { return a.name == b.name; }),
        members.end());
    if (!cluster_size_) {
      auto replicas = FetchReplicas(members, controllers);
      if (!replicas.ok()) return replicas.status();
      implied_size_ = *replicas;
    }
    return members;
  }

  // The whole list into `members`; false when a continue token expired and it must start again.
  Result<bool> ListAll(std::vector<Member>& members, std::vector<std::string>& controllers) {
    members.clear();
    controllers.clear();
    const bool pods = !o_.label_selector.empty();
    std::string next;
    std::set<std::string> tokens;
    int pages = 0;
    do {
      Call call = pods ? Call{"list", "pods", "", "", PodListPath(o_, next)}
                       : Call{"list", "endpointslices", "discovery.k8s.io", "", EndpointSliceListPath(o_, next)};
      if (++pages > kMaxListPages) {
        return Status::Unavailable(fmt::format(
            "the list did not end after {} pages of up to {} (the API server keeps handing out continue tokens)",
            kMaxListPages, o_.page_size));
      }
      auto answer = Get(call, kMaxListPageBytes);
      if (!answer.ok() && pages > 1 && answer.status().IsUnavailable() && RealClock().Now() >= deadline_) {
        // The page the deadline cut short is not the story: the list that never ended is.
        return Status::Unavailable(
            fmt::format("the list did not end: {} pages, each with a new continue token, and more to come when the "
                        "time ran out ({})",
                        pages - 1, answer.status().message()));
      }
      if (!answer.ok()) return answer.status();
      if (answer->status == 410 && !next.empty()) return false;
      if (answer->status != 200) return Refusal(o_, call, answer->status, answer->body);
      const std::string source = "GET " + call.path;
      auto page = pods ? ParsePodList(o_, answer->body, source) : ParseEndpointSliceList(o_, answer->body, source);
      if (!page.ok()) return page.status();
      if (!page->next.empty() && !tokens.insert(page->next).second) {
        return Status::Unavailable(source + ": the API server gave back a continue token it had given before");
      }
      members.insert(members.end(), page->members.begin(), page->members.end());
      controllers.insert(controllers.end(), page->statefulsets.begin(), page->statefulsets.end());
      next = page->next;
    } while (!next.empty());
    return true;
  }

  // spec.replicas of the configured StatefulSet, or of the one that controls the pods; none when
  // no StatefulSet controls them (bare pods): then only --cluster-size fixes the size.
  Result<std::optional<size_t>> FetchReplicas(const std::vector<Member>& members,
                                              std::vector<std::string> controllers) {
    std::string statefulset = o_.statefulset;
    if (statefulset.empty() && o_.label_selector.empty() && !members.empty()) {
      // Endpoints do not say who controls their pod; the first pod does.
      Call call{"get", "pods", "", members.front().name, PodPath(o_, members.front().name)};
      auto answer = Get(call, kMaxObjectBytes);
      if (!answer.ok()) return answer.status();
      if (answer->status != 200) {
        return Refusal(o_, call, answer->status, answer->body)
            .Prefixed("finding the pods' StatefulSet for the expected size (or give statefulset= or --cluster-size)");
      }
      auto controller = ParsePodController(answer->body, "GET " + call.path);
      if (!controller.ok()) return controller.status();
      controllers = {*controller};
    }
    if (statefulset.empty()) {
      std::sort(controllers.begin(), controllers.end());
      controllers.erase(std::unique(controllers.begin(), controllers.end()), controllers.end());
      std::erase(controllers, std::string());
      if (controllers.size() > 1) {
        return Status::InvalidArgument(fmt::format(
            "{}: the pods belong to StatefulSets {} and {}: narrow label_selector= or give statefulset=", Describe(),
            controllers[0], controllers[1]));
      }
      if (controllers.empty()) return std::optional<size_t>();
      statefulset = controllers.front();
    }
    Call call{"get", "statefulsets", "apps", statefulset, StatefulSetPath(o_, statefulset)};
    auto answer = Get(call, kMaxObjectBytes);
    if (!answer.ok()) return answer.status();
    if (answer->status != 200) return Refusal(o_, call, answer->status, answer->body);
    auto replicas = ParseStatefulSetReplicas(answer->body, "GET " + call.path);
    if (!replicas.ok()) return replicas.status();
    return std::optional<size_t>(*replicas);
  }

  Result<std::string> ReadToken() const {
    auto token = ReadFile(o_.token_file);
    if (!token.ok())
      return Status::Unavailable(fmt::format("reading token_file {}: {}", o_.token_file, token.status().message()));
    std::string trimmed = Trimmed(*token);
    // It goes into the Authorization header: a line break or another control byte inside is not a
    // service-account token (the kubelet writes one line of base64), and is never sent; nor shown.
    if (std::any_of(trimmed.begin(), trimmed.end(), [](unsigned char c) { return c < 0x20 || c == 0x7f; })) {
      return Status::InvalidArgument(fmt::format(
          "token_file {} holds a line break or another control byte inside the token: mount the service-account "
          "token as the kubelet writes it, or fix token_file=",
          o_.token_file));
    }
    return trimmed;
  }

  // The answer whatever its status, after one retry when a 401 meets a token that has rotated since
  // it was read. Transport failures are Unavailable, an untrusted server InvalidArgument.
  Result<Answer> Get(const Call& call, size_t max_body) {
    auto token = ReadToken();
    if (!token.ok()) return token.status();
    auto answer = Send(call, *token, max_body);
    if (!answer.ok() || answer->status != 401) return answer;
    auto rotated = ReadToken();
    if (!rotated.ok()) return rotated.status();
    if (*rotated != *token) answer = Send(call, *rotated, max_body);
    if (!answer.ok() || answer->status != 401) return answer;
    return Status::InvalidArgument(
        fmt::format("GET {}{}: 401 Unauthorized: the API server rejects the service-account token in {} (expired, "
                    "revoked or for another cluster): mount a current token or fix token_file=",
                    o_.api_server, call.path, o_.token_file));
  }

  // Each request within timeout= and the caller's deadline, its body within max_body.
  Result<Answer> Send(const Call& call, const std::string& token, size_t max_body) const {
    HttpRequest request;
    request.base_url = o_.api_server;
    request.tls.trusted_ca_file = o_.ca_file;
    request.target = call.path;
    request.headers = {{"Accept", "application/json"}, {"Authorization", "Bearer " + token}};
    request.timeout = o_.timeout;
    request.deadline = deadline_;
    request.max_body = max_body;
    HttpResult result = HttpSend(request);
    const std::string what = fmt::format("GET {}{}", o_.api_server, call.path);
    if (result.failure == HttpFailure::kTlsUntrusted || result.failure == HttpFailure::kTlsSetUp) {
      return Status::InvalidArgument(fmt::format(
          "{}: the API server's TLS certificate is not trusted by ca_file {} ({}): give the cluster's CA bundle", what,
          o_.ca_file, result.why));
    }
    if (!result.ok()) return Status::Unavailable(fmt::format("{}: {}; is the API server up?", what, result.why));
    return Answer{result.response.status, std::move(result.response.body)};
  }

  Options o_;
  std::optional<size_t> cluster_size_;
  std::optional<size_t> implied_size_;
  Clock::TimePoint deadline_;
  Status last_failure_;
};

Result<std::unique_ptr<DiscoveryProvider>> CreateK8s(ProviderParams& params) {
  auto options = TakeOptions(params);
  if (!options.ok()) return options.status();
  return std::unique_ptr<DiscoveryProvider>(new K8sProvider(std::move(*options), params.context().cluster_size, params.context().deadline));
}

const RegisterProvider kRegistration(
    "k8s",
    {{.name = "service", .help = "the headless Service that gives the pods DNS names", .required = true,
      .values = "a Service name"},
     {.name = "namespace", .help = "the pods' namespace; default the service account's"},
     {.name = "label_selector", .help = "list the pods it selects; default the Service's EndpointSlices"},
     {.name = "port_name", .help = "the container port etcd's peers use", .fallback = "peer", .values = "a port name"},
     {.name = "client_port_name", .help = "the container port etcd's clients use", .fallback = "client",
      .values = "a port name"},
     {.name = "scheme", .help = "the scheme of the members' URLs", .fallback = "http", .choices = {"http", "https"}},
     {.name = "cluster_domain", .help = "the cluster's DNS domain; empty: names end in .svc",
      .fallback = "cluster.local", .values = "a DNS domain"},
     {.name = "statefulset", .help = "the StatefulSet whose spec.replicas is the size; default the pods' controller"},
     {.name = "page_size", .help = "the items a list page asks for", .fallback = "500", .lo = 1, .hi = 10000,
      .values = "a page size"},
     {.name = "timeout", .help = "one API call's longest wait", .fallback = "10s", .values = "a duration"},
     {.name = "api_server", .help = "the API server's URL; default the in-cluster one (KUBERNETES_SERVICE_HOST)",
      .values = "an https URL"},
     {.name = "token_file", .help = "the service-account token, read at every request",
      .fallback = "/var/run/secrets/kubernetes.io/serviceaccount/token", .values = "a file"},
     {.name = "ca_file", .help = "the API server's CA bundle",
      .fallback = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt", .values = "a file"}},
    CreateK8s);

}  // namespace
}  // namespace quorate::k8s
