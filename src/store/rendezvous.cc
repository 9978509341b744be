#include "quorate/rendezvous.h"

#include <algorithm>
#include <charconv>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "core/bucket.h"
#include "core/json.h"
#include "quorate/limits.h"

namespace quorate {
namespace {

using nlohmann::json;

std::vector<std::string> NamesOf(const std::vector<Member>& members) {
  std::vector<std::string> names;
  for (const auto& m : members) names.push_back(m.name);
  return names;
}

}  // namespace

struct Rendezvous::Registration {
  Member member;
  std::string registered_at;
};

Rendezvous::Rendezvous(Vfs& vfs, std::string token, size_t size) : vfs_(&vfs), token_(std::move(token)), size_(size) {}

Result<Rendezvous> Rendezvous::Create(Vfs& vfs, std::string token, size_t size) {
  if (token.find('/') != std::string::npos || !ValidateKey(token).ok()) {
    return Status::InvalidArgument(fmt::format(
        "cluster token '{}' cannot name a folder in {}: use letters, digits, '.', '_' and '-', not starting with '.'",
        token, vfs.Describe()));
  }
  if (size == 0) return Status::InvalidArgument("cluster size is 0: set --cluster-size (or size=) to the member count");
  return Rendezvous(vfs, std::move(token), size);
}

std::string Rendezvous::Where() const { return fmt::format("{}/{}", vfs_->Describe(), token_); }

Result<std::string> Rendezvous::ReadBounded(const std::string& key) { return vfs_->Read(key, kMaxRecordBytes); }

Result<Rendezvous::Registration> Rendezvous::ReadRegistration(const std::string& key) {
  auto text = ReadBounded(key);
  if (!text.ok()) return text.status();
  const std::string name = key.substr(MembersPrefix().size() + 1);
  auto corrupt = [&](const std::string& why) {
    return Status::DataLoss(fmt::format("registration {}/{} is corrupt: {}; remove it and restart node '{}'",
                                        vfs_->Describe(), key, why, name));
  };
  json doc = json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return corrupt("not valid JSON (truncated?)");
  if (!doc.is_object() || !doc.contains("name") || !doc["name"].is_string() || !doc.contains("peerURLs") ||
      !doc["peerURLs"].is_array()) {
    return corrupt("no name or peerURLs");
  }
  if (doc["name"].get<std::string>() != name) return corrupt("the name inside differs from the key");
  Registration reg{{name, {}, {}}, ""};
  for (const char* field : {"peerURLs", "clientURLs"}) {
    if (!doc.contains(field)) continue;
    if (!doc[field].is_array()) return corrupt(fmt::format("{} is not a list", field));
    auto& urls = std::string_view(field) == "peerURLs" ? reg.member.peer_urls : reg.member.client_urls;
    for (const auto& u : doc[field]) {
      if (!u.is_string()) return corrupt(fmt::format("{} holds a non-string", field));
      if (auto url = ParseUrl(u.get<std::string>()); !url.ok()) return corrupt(url.status().message());
      urls.push_back(u.get<std::string>());
    }
  }
  if (reg.member.peer_urls.empty()) return corrupt("no peer URL");
  if (doc.contains("registeredAt")) {
    if (!doc["registeredAt"].is_string()) return corrupt("registeredAt is not a string");
    reg.registered_at = doc["registeredAt"].get<std::string>();
  }
  return reg;
}

Result<std::vector<Rendezvous::Registration>> Rendezvous::ReadRegistrations() {
  auto keys = vfs_->List(MembersPrefix());
  if (!keys.ok()) return keys.status().Prefixed("listing registrations in " + Where());
  std::vector<Registration> regs;
  for (const auto& key : *keys) {
    const std::string name = key.substr(std::min(key.size(), MembersPrefix().size() + 1));
    if (name.empty() || name.find('/') != std::string::npos || !ValidateKey(key).ok()) {
      return Status::DataLoss(fmt::format("{}/{} is not a registration (want {}/<member name>); remove it",
                                          vfs_->Describe(), key, MembersPrefix()));
    }
    auto reg = ReadRegistration(key);
    // A registration is never deleted by quorate; one that vanished was removed by an operator.
    if (!reg.ok() && reg.status().IsNotFound()) continue;
    if (!reg.ok()) return reg.status();
    regs.push_back(std::move(*reg));
  }
  std::sort(regs.begin(), regs.end(),
            [](const Registration& a, const Registration& b) { return a.member.name < b.member.name; });
  return regs;
}

Result<std::optional<MemberSet>> Rendezvous::ReadSealed() {
  auto text = ReadBounded(SealedKey());
  if (!text.ok() && text.status().IsNotFound()) return std::optional<MemberSet>();
  if (!text.ok()) return text.status();
  auto bucket = DecodeBucket(*text, vfs_->Describe() + "/" + SealedKey());
  if (!bucket.ok()) return bucket.status();
  if (bucket->members.token() != token_) {
    return Status::DataLoss(fmt::format(
        "{}/{} is foreign: it was sealed for token '{}', not '{}'; use the cluster's token or another store",
        vfs_->Describe(), SealedKey(), bucket->members.token(), token_));
  }
  return std::optional<MemberSet>(std::move(bucket->members));
}

Status Rendezvous::Register(const Member& self) {
  if (self.name.find('/') != std::string::npos || !ValidateKey(self.name).ok()) {
    return Status::InvalidArgument(fmt::format(
        "--name '{}' cannot be registered in {}: a name there is letters, digits, '.', '_' and '-', not starting "
        "with '.'",
        self.name, Where()));
  }
  if (auto set = MemberSet::Create({self}, token_); !set.ok()) return set.status().Prefixed("--name " + self.name);
  json doc = {{"name", self.name},
              {"peerURLs", self.peer_urls},
              {"clientURLs", self.client_urls},
              {"registeredAt", NowRfc3339()}};
  std::string text = JsonText(doc) + "\n";
  if (text.size() > kMaxRecordBytes) {
    return Status::InvalidArgument(fmt::format("member '{}' has {} bytes of URLs: at most {} fit a registration",
                                               self.name, text.size(), kMaxRecordBytes));
  }
  const std::string key = MembersPrefix() + "/" + self.name;
  auto created = vfs_->CreateIfAbsent(key, text);
  if (!created.ok()) return created.status().Prefixed("registering " + self.name + " in " + Where());
  if (*created) return Status::Ok();
  auto existing = ReadRegistration(key);
  if (!existing.ok()) return existing.status();
  if (!SameUrlSet(existing->member.peer_urls, self.peer_urls)) {
    return Status::InvalidArgument(fmt::format(
        "member name '{}' is already registered in {} with peer URLs {}, not {}: give this node another --name, "
        "or remove {}/{} if that registration is stale",
        self.name, Where(), fmt::join(existing->member.peer_urls, ","), fmt::join(self.peer_urls, ","),
        vfs_->Describe(), key));
  }
  return Status::Ok();
}

Result<RendezvousState> Rendezvous::Seal() {
  RendezvousState state;
  auto sealed = ReadSealed();
  if (!sealed.ok()) return sealed.status();
  if (*sealed) {
    state.sealed = std::move(**sealed);
    return state;
  }
  auto regs = ReadRegistrations();
  if (!regs.ok()) return regs.status();
  for (const auto& r : *regs) state.registered.push_back(r.member);
  const std::vector<std::string> names = NamesOf(state.registered);
  if (regs->size() < size_) {
    state.waiting = fmt::format("{}/{} registered in {} ({})", regs->size(), size_, Where(), fmt::join(names, ", "));
    return state;
  }
  if (regs->size() > size_ && !vfs_->exclusive_create()) {
    state.ambiguous = true;
    state.waiting = fmt::format(
        "{} registrations ({}) for {} seats in {}, and the store has no exclusive create to tell which came first: "
        "remove the extra registrations under {}/{} or raise --cluster-size to {}",
        regs->size(), fmt::join(names, ", "), size_, Where(), vfs_->Describe(), MembersPrefix(), regs->size());
    return state;
  }

  // With exclusive create any choice is safe, as only one seal can land; without it, exactly
  // `size` registrations leave one choice, and the bytes must be a pure function of the records
  // so that every racing writer writes the same seal: hence createdAt from the records, not now.
  std::vector<Member> chosen(state.registered.begin(), state.registered.begin() + static_cast<std::ptrdiff_t>(size_));
  std::string created_at;
  for (size_t i = 0; i < size_; ++i) created_at = std::max(created_at, (*regs)[i].registered_at);
  auto set = MemberSet::Create(chosen, token_);
  if (!set.ok()) return set.status().Prefixed("the registrations in " + Where() + " conflict");
  auto created = vfs_->CreateIfAbsent(SealedKey(), EncodeBucket(Bucket{*set, {"new", created_at}}));
  if (!created.ok()) return created.status().Prefixed("sealing " + Where());

  auto winner = ReadSealed();
  if (!winner.ok()) return winner.status();
  if (!*winner) {
    return Status::Unavailable(fmt::format("{}/{} vanished right after it was written: is someone removing it?",
                                           vfs_->Describe(), SealedKey()));
  }
  if (*created && (*winner)->members() != set->members()) {
    return Status::DataLoss(
        fmt::format("{}/{} holds another set ({}) than the one just sealed ({}): the store let two writers create it",
                    vfs_->Describe(), SealedKey(), fmt::join(NamesOf((*winner)->members()), ", "),
                    fmt::join(NamesOf(set->members()), ", ")));
  }
  state.sealed = std::move(**winner);
  state.registered.clear();
  return state;
}

Result<std::vector<Member>> Rendezvous::Discover(const Member& self) {
  if (!registered_) {
    if (Status s = Register(self); !s.ok()) return s;
    registered_ = true;
  }
  auto state = Seal();
  if (!state.ok()) return state.status();
  if (!state->sealed) {
    if (state->ambiguous) return Status::Unavailable(state->waiting);
    return state->registered;
  }
  const MemberSet& sealed = *state->sealed;
  if (const Member* me = sealed.FindByName(self.name)) {
    if (!SameUrlSet(me->peer_urls, self.peer_urls)) {
      return Status::InvalidArgument(fmt::format(
          "{}/{} seals member '{}' with peer URLs {}, not {}: give this node its sealed URLs or another --name",
          vfs_->Describe(), SealedKey(), self.name, fmt::join(me->peer_urls, ","), fmt::join(self.peer_urls, ",")));
    }
    return sealed.members();
  }
  if (sealed.size() < size_) {
    std::vector<Member> members = sealed.members();
    members.push_back(self);
    return members;
  }
  return Status::FailedPrecondition(
      fmt::format("extra: the sealed set ({}) in {} does not include {}; raise --cluster-size or remove a member",
                  fmt::join(NamesOf(sealed.members()), ", "), Where(), self.name));
}

namespace {

class RendezvousProvider : public DiscoveryProvider {
 public:
  RendezvousProvider(std::string name, std::unique_ptr<Vfs> vfs, Rendezvous rendezvous, RendezvousConfig config)
      : name_(std::move(name)), vfs_(std::move(vfs)), rendezvous_(std::move(rendezvous)), config_(std::move(config)) {}
  Result<std::vector<Member>> Discover() override { return rendezvous_.Discover(config_.self); }
  std::optional<size_t> ImpliedSize() const override { return config_.size; }
  std::string Describe() const override {
    return fmt::format("{} {}/{} ({} members)", name_, vfs_->Describe(), config_.token, config_.size);
  }

 private:
  std::string name_;
  std::unique_ptr<Vfs> vfs_;  // before rendezvous_, which borrows it
  Rendezvous rendezvous_;
  RendezvousConfig config_;
};

}  // namespace

Result<RendezvousConfig> TakeRendezvousConfig(ProviderParams& params) {
  const ProviderContext& context = params.context();
  const std::string& provider = params.provider();
  RendezvousConfig config{context.self, "etcd-cluster", 0};  // etcd's own default --initial-cluster-token

  auto token = params.Take("token");
  if (token && !context.token.empty() && *token != context.token) {
    return Status::InvalidArgument(fmt::format(
        "--discovery: provider '{}' has token={} but --initial-cluster-token is '{}': the member IDs hang on the "
        "token, so drop token= or make them equal",
        provider, *token, context.token));
  }
  if (token) {
    config.token = *token;
  } else if (!context.token.empty()) {
    config.token = context.token;
  }

  if (auto size = params.Take("size")) {
    const char* end = size->data() + size->size();
    auto [ptr, ec] = std::from_chars(size->data(), end, config.size);
    if (ec != std::errc() || ptr != end || config.size == 0 || config.size > size_t{kMaxClusterSize}) {
      return Status::InvalidArgument(
          fmt::format("--discovery: provider '{}' has size={}: want the member count, a whole number from 1 to {}",
                      provider, *size, kMaxClusterSize));
    }
    if (context.cluster_size && *context.cluster_size != config.size) {
      return Status::InvalidArgument(
          fmt::format("--discovery: provider '{}' has size={} but --cluster-size is {}: make them equal", provider,
                      config.size, *context.cluster_size));
    }
  } else if (context.cluster_size) {
    config.size = *context.cluster_size;
  } else {
    return Status::InvalidArgument(fmt::format(
        "--discovery: provider '{}' seals a fixed number of members: set --cluster-size N (or size=N)", provider));
  }

  if (config.self.name.empty() || config.self.peer_urls.empty()) {
    return Status::InvalidArgument(fmt::format(
        "--discovery: provider '{}' registers this node in its store: set --name and --initial-advertise-peer-urls",
        provider));
  }
  return config;
}

Result<std::unique_ptr<DiscoveryProvider>> MakeRendezvousProvider(std::string name, std::unique_ptr<Vfs> vfs,
                                                                  RendezvousConfig config) {
  auto rendezvous = Rendezvous::Create(*vfs, config.token, config.size);
  if (!rendezvous.ok()) return rendezvous.status();
  return std::unique_ptr<DiscoveryProvider>(
      new RendezvousProvider(std::move(name), std::move(vfs), std::move(*rendezvous), std::move(config)));
}

}  // namespace quorate
