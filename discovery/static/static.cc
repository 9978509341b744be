// The `static` provider: a fixed member list, as etcd's --initial-cluster. It implies the size.
#include <fmt/format.h>

#include "quorate/provider.h"

namespace quorate {
namespace {

class StaticProvider : public DiscoveryProvider {
 public:
  explicit StaticProvider(std::vector<Member> members) : members_(std::move(members)) {}
  Result<std::vector<Member>> Discover() override { return members_; }
  std::optional<size_t> ImpliedSize() const override { return members_.size(); }
  std::string Describe() const override { return fmt::format("static ({} members)", members_.size()); }

 private:
  std::vector<Member> members_;
};

Result<std::unique_ptr<DiscoveryProvider>> CreateStatic(ProviderParams& params) {
  auto text = params.TakeRequired("members");
  if (!text.ok()) return text.status();
  if (Status s = params.CheckAllTaken(); !s.ok()) return s;
  const std::string label = params.Label("members");
  auto members = ParseInitialCluster(*text, label);
  if (!members.ok()) return members.status();
  for (auto& m : *members) {
    for (const auto& u : m.peer_urls) m.client_urls.push_back(DefaultClientUrl(*ParseUrl(u)));
  }
  // Names and URLs are checked once more by MemberSet::Create; check here too so the message
  // points at the flag rather than at a later stage.
  if (auto set = MemberSet::Create(*members, "check"); !set.ok()) {
    return set.status().Prefixed(label);
  }
  return std::unique_ptr<DiscoveryProvider>(new StaticProvider(std::move(*members)));
}

const RegisterProvider kRegistration("static",
                                     {{.name = "members",
                                       .help = "the members as --initial-cluster gives them (n1=https://h1:2380,...)",
                                       .required = true,
                                       .values = "name=peer URL, comma-separated"}},
                                     CreateStatic);

}  // namespace
}  // namespace quorate
