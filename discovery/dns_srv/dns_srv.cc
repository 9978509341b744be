// The `dns-srv` provider: the members are the targets of _etcd-server-ssl._tcp (https) and
// _etcd-server._tcp (http) SRV records, as etcd's --discovery-srv reads them, but with both schemes
// merged (etcd 3.4's plain-http path is broken, docs/DESIGN.md §8) and every answer checked before use.
#include "dns_srv.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <map>
#include <set>

#include "quorate/duration.h"
#include "quorate/provider.h"
#include "quorate/text.h"

namespace quorate::dns_srv {
namespace {

std::string Lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

// 1-63 bytes of letters, digits and `punct`, with no '-' at either end.
bool IsLabel(std::string_view label, std::string_view punct) {
  if (label.empty() || label.size() > 63 || label.front() == '-' || label.back() == '-') return false;
  return std::all_of(label.begin(), label.end(), [&](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || punct.find(c) != std::string_view::npos;
  });
}

// DNS answers are fetched at run time and often fixed after the first node starts: a wrong one is
// retried within --timeout like a missing one, never bad input.
Status WrongAnswer(const std::string& text) { return Status::Unavailable(text); }

struct Host {
  std::set<std::string> peer_urls;  // a set, so identical records count once
  std::set<std::string> records;    // the record names that list the host, for messages
};

}  // namespace

std::string SrvQuery::RecordName(bool secure) const {
  return fmt::format("_{}{}{}{}._tcp.{}", service, secure ? "-ssl" : "", suffix.empty() ? "" : "-", suffix,
                     domain);
}

bool IsDnsName(std::string_view name) {
  if (name.empty() || name.size() > 253) return false;
  size_t start = 0;
  while (true) {
    size_t dot = name.find('.', start);
    std::string_view label = name.substr(start, dot == std::string_view::npos ? dot : dot - start);
    if (!IsLabel(label, "-_")) return false;
    if (dot == std::string_view::npos) break;
    start = dot + 1;
  }
  // As Go's resolver: an all-digit name is an IPv4 address, not a host name.
  return std::any_of(name.begin(), name.end(),
                     [](char c) { return !std::isdigit(static_cast<unsigned char>(c)) && c != '.'; });
}

Result<std::vector<Member>> DiscoverSrvMembers(const SrvQuery& query, Resolver& resolver) {
  const std::string secure_name = query.RecordName(true);
  const std::string plain_name = query.RecordName(false);

  // DNS names are case-insensitive: lower-case them so one host is one member and one set of URLs,
  // whatever case each record happens to use.
  std::map<std::string, Host> hosts;
  std::map<std::string, std::string> host_of_name;
  for (bool secure : {true, false}) {
    const std::string& record_name = secure ? secure_name : plain_name;
    auto records = resolver.LookupSrv(record_name);
    if (!records.ok()) {
      // One scheme without records is normal (etcd uses either); a half answer is never merged.
      if (records.status().IsNotFound()) continue;
      return records.status();
    }
    for (const SrvRecord& record : *records) {
      std::string target = Lower(record.target);
      if (!target.empty() && target.back() == '.') target.pop_back();
      if (target.empty()) {
        // RFC 2782's "." target: the service is decidedly not available here.
        return WrongAnswer(fmt::format(
            "SRV record {} has the empty target '.' (no service here): point it at the member's host "
            "(e.g. etcd-0.{}.) or delete it",
            record_name, query.domain));
      }
      if (!IsDnsName(target)) {
        return WrongAnswer(fmt::format(
            "SRV record {} points at '{}', which is not a host name: point it at the member's host "
            "(e.g. etcd-0.{}.)",
            record_name, Printable(record.target, 253), query.domain));
      }
      std::string name = target.substr(0, target.find('.'));
      auto [it, inserted] = host_of_name.emplace(name, target);
      if (!inserted && it->second != target) {
        return WrongAnswer(fmt::format(
            "SRV targets {} and {} both make member name '{}' (the first label): member names must be "
            "unique, so rename one host",
            it->second, target, name));
      }
      std::string url = fmt::format("{}://{}:{}", secure ? "https" : "http", target, record.port);
      if (auto parsed = ParseUrl(url); !parsed.ok()) {
        return WrongAnswer(fmt::format("SRV record {} for {}: {}", record_name, target, parsed.status().message()));
      }
      hosts[target].peer_urls.insert(url);
      hosts[target].records.insert(record_name);
    }
  }
  if (hosts.empty()) {
    return Status::NotFound(fmt::format(
        "no SRV records at {} or {}: publish the members there, or check domain=, service= and name=",
        secure_name, plain_name));
  }

  // Only now, after the cheap checks: a target nobody can resolve would make etcd fail later, on
  // every node, with a less helpful message.
  for (const auto& [target, host] : hosts) {
    auto addresses = resolver.LookupHost(target);
    if (addresses.status().IsNotFound()) {
      return WrongAnswer(fmt::format(
          "SRV target {} (in {}) does not resolve: {}; add an A or AAAA record for it or remove it "
          "from the SRV records",
          target, fmt::join(host.records, " and "), addresses.status().message()));
    }
    if (!addresses.ok()) return addresses.status();
  }

  std::vector<Member> members;
  for (const auto& [name, target] : host_of_name) {
    Member m;
    m.name = name;
    for (const std::string& url : hosts[target].peer_urls) {
      m.peer_urls.push_back(url);
      std::string client = DefaultClientUrl(*ParseUrl(url));
      if (std::find(m.client_urls.begin(), m.client_urls.end(), client) == m.client_urls.end()) {
        m.client_urls.push_back(client);
      }
    }
    members.push_back(std::move(m));
  }
  return members;
}

namespace {

class DnsSrvProvider : public DiscoveryProvider {
 public:
  DnsSrvProvider(SrvQuery query, std::string server, std::unique_ptr<Resolver> resolver)
      : query_(std::move(query)), server_(std::move(server)), resolver_(std::move(resolver)) {}

  Result<std::vector<Member>> Discover() override { return DiscoverSrvMembers(query_, *resolver_); }

  std::string Describe() const override {
    return fmt::format("dns-srv {} + {}{}", query_.RecordName(true), query_.RecordName(false),
                       server_.empty() ? "" : " via " + server_);
  }

 private:
  SrvQuery query_;
  std::string server_;
  std::unique_ptr<Resolver> resolver_;
};


Status CheckLabel(const std::string& key, const std::string& value, std::string_view example) {
  if (!value.empty() && value.front() == '_') {
    return Status::InvalidArgument(fmt::format(
        "--discovery dns-srv {}='{}': give it without the leading '_' ({}={})", key, value, key, example));
  }
  if (!IsLabel(value, "-")) {
    return Status::InvalidArgument(
        fmt::format("--discovery dns-srv {}='{}': want one DNS label of letters, digits and '-' (e.g. {}={})",
                    key, value, key, example));
  }
  return Status::Ok();
}

Result<std::unique_ptr<DiscoveryProvider>> CreateDnsSrv(ProviderParams& params) {
  auto domain = params.TakeRequired("domain");
  if (!domain.ok()) return domain.status();
  auto service = params.Take("service");
  auto suffix = params.Take("name");
  auto server = params.Take("server");
  auto timeout = params.Take("timeout");
  auto retries = params.Take("retries");
  if (Status s = params.CheckAllTaken(); !s.ok()) return s;

  SrvQuery query;
  query.domain = Lower(*domain);
  if (query.domain.back() == '.') query.domain.pop_back();
  if (!IsDnsName(query.domain)) {
    return Status::InvalidArgument(fmt::format(
        "--discovery dns-srv domain='{}': not a DNS domain name (e.g. domain=example.com)", *domain));
  }
  if (service) {
    if (Status s = CheckLabel("service", *service, "etcd-server"); !s.ok()) return s;
    query.service = *service;
  }
  if (suffix && !suffix->empty()) {
    if (Status s = CheckLabel("name", *suffix, "prod"); !s.ok()) return s;
    query.suffix = *suffix;
  }
  for (bool secure : {true, false}) {
    if (!IsDnsName(query.RecordName(secure))) {
      return Status::InvalidArgument(fmt::format(
          "--discovery dns-srv: record name {} is too long for DNS (labels up to 63 bytes, names up to "
          "253): shorten domain=, service= or name=",
          query.RecordName(secure)));
    }
  }

  CaresOptions options;
  if (server) options.server = *server;
  if (timeout) {
    auto d = ParseDuration(*timeout, "--discovery dns-srv timeout");
    if (!d.ok()) return d.status();
    if (*d > std::chrono::minutes(1)) {
      return Status::InvalidArgument(fmt::format(
          "--discovery dns-srv timeout='{}': at most 60s per try (the caller retries the whole lookup)",
          *timeout));
    }
    options.timeout = *d;
  }
  if (retries) {
    int n = -1;
    auto [end, ec] = std::from_chars(retries->data(), retries->data() + retries->size(), n);
    if (ec != std::errc() || end != retries->data() + retries->size() || n < 0 || n > 10) {
      return Status::InvalidArgument(
          fmt::format("--discovery dns-srv retries='{}': want a whole number from 0 to 10", *retries));
    }
    options.retries = n;
  }
  auto resolver = NewCaresResolver(options);
  if (!resolver.ok()) return resolver.status().Prefixed("--discovery dns-srv");
  return std::unique_ptr<DiscoveryProvider>(
      new DnsSrvProvider(std::move(query), options.server, std::move(*resolver)));
}

const RegisterProvider kRegistration(
    "dns-srv",
    {{.name = "domain", .help = "the domain the SRV records are under", .required = true, .values = "a DNS name"},
     {.name = "service", .help = "the records' service, without the leading _ (-ssl is added for https)",
      .fallback = "etcd-server", .values = "a DNS label"},
     {.name = "name", .help = "a suffix of the service, as --discovery-srv-name", .values = "a DNS label"},
     {.name = "server", .help = "the DNS server to ask; default the system's", .values = "host:port"},
     {.name = "timeout", .help = "one try's wait (c-ares doubles it each retry)", .fallback = "2s",
      .values = "a duration, at most 60s"},
     {.name = "retries", .help = "tries after the first", .fallback = "2", .lo = 0, .hi = 10,
      .values = "a retry count"}},
    CreateDnsSrv);

}  // namespace
}  // namespace quorate::dns_srv
