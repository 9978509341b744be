// DNS SRV answers as the dns-srv provider turns them into members: the input is a list of records
// (target, port) and of host addresses, made from the fuzzer's bytes, served by a fake resolver.
#include <map>

#include "../../discovery/dns_srv/dns_srv.h"
#include "fuzz.h"

namespace {

using namespace quorate;

class TableResolver : public dns_srv::Resolver {
 public:
  std::map<std::string, std::vector<dns_srv::SrvRecord>> srv;
  std::map<std::string, std::vector<std::string>> hosts;
  Result<std::vector<dns_srv::SrvRecord>> LookupSrv(const std::string& name) override {
    auto it = srv.find(name);
    if (it == srv.end()) return Status::NotFound(name);
    return it->second;
  }
  Result<std::vector<std::string>> LookupHost(const std::string& host) override {
    auto it = hosts.find(host);
    if (it == hosts.end()) return Status::NotFound(host);
    return it->second;
  }
};

}  // namespace

// Lines of the input: "S <target> <port>" adds an SRV record (to the https name when the port is
// odd), "H <host> <address>" a host address.
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  dns_srv::SrvQuery query{"example.test", "etcd-server", ""};
  TableResolver resolver;
  std::string_view in = fuzz::Text(data, size);
  while (!in.empty()) {
    size_t eol = in.find('\n');
    std::string line(in.substr(0, eol));
    in = eol == std::string_view::npos ? std::string_view() : in.substr(eol + 1);
    if (line.size() < 3) continue;
    std::string rest = line.substr(2);
    size_t space = rest.rfind(' ');
    std::string first = rest.substr(0, space);
    std::string second = space == std::string::npos ? "" : rest.substr(space + 1);
    if (line[0] == 'S') {
      unsigned port = 0;
      for (char c : second) port = (port * 10 + static_cast<unsigned>(c - '0')) & 0xffff;
      resolver.srv[query.RecordName(port % 2 == 1)].push_back({first, static_cast<uint16_t>(port), 0, 0});
    } else if (line[0] == 'H') {
      resolver.hosts[first].push_back(second);
    }
  }
  auto members = dns_srv::DiscoverSrvMembers(query, resolver);
  fuzz::CheckMessage(members.status());
  if (members.ok()) {
    for (const auto& m : *members) {
      if (!CheckMemberName(m.name, "name").ok()) std::abort();
      for (const auto& u : m.peer_urls) {
        if (!ParseUrl(u).ok()) std::abort();
      }
    }
  }
  return 0;
}
