// The rendezvous behind the shared-store providers (`file`, `s3`): nodes that know nothing of each
// other but a store and a token agree on one member set. Each node registers an immutable record,
// and the first `size` registrations are sealed into a member bucket that every node then reads.
// The Vfs is borrowed; everything read from it is validated and nothing written is ever replaced.
//
// Layout under the store's root:
//   <token>/members/<name>  one registration: {"name", "peerURLs", "clientURLs", "registeredAt"}
//   <token>/sealed          the member bucket (EncodeBucket) of the sealed set
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "quorate/member.h"
#include "quorate/provider.h"
#include "quorate/status.h"
#include "quorate/vfs.h"

namespace quorate {

// No registration or sealed bucket is larger; anything bigger in the store is corrupt.
inline constexpr size_t kMaxRecordBytes = 64 * 1024;

struct RendezvousState {
  std::optional<MemberSet> sealed;
  std::vector<Member> registered;  // sorted by name; read only while unsealed
  std::string waiting;             // why it is not sealed yet, for the log; empty once sealed
  // More registrations than seats on a store without exclusive create: no writer can tell which
  // came first, so nobody seals until an operator removes some or raises the size.
  bool ambiguous = false;
};

class Rendezvous {
 public:
  // InvalidArgument when `token` is not a single key segment or `size` is 0.
  static Result<Rendezvous> Create(Vfs& vfs, std::string token, size_t size);

  // Creates this node's registration. Idempotent for the same name and peer URLs (a restart);
  // InvalidArgument when the name is registered with other peer URLs, or `self` is malformed.
  Status Register(const Member& self);

  // The sealed set when there is one; otherwise seals when the set is unambiguous: with exclusive
  // create, the `size` registrations whose names sort first; without it, only exactly `size`
  // registrations, encoded so that racing writers write identical bytes. DataLoss naming the key
  // for a truncated, corrupt or foreign record, which is reported and never overwritten.
  Result<RendezvousState> Seal();

  // A provider's Discover(): Register, Seal, then the sealed members when they include `self`.
  // Unsealed: the registrations so far (fewer than `size`), or Unavailable when ambiguous.
  // FailedPrecondition when the sealed set is full and lacks `self` (the node is extra). When the
  // size was raised past the sealed set, the sealed members plus `self`, so the planner can join.
  Result<std::vector<Member>> Discover(const Member& self);

  std::string MembersPrefix() const { return token_ + "/members"; }
  std::string SealedKey() const { return token_ + "/sealed"; }

 private:
  Rendezvous(Vfs& vfs, std::string token, size_t size);
  struct Registration;
  Result<Registration> ReadRegistration(const std::string& key);
  Result<std::vector<Registration>> ReadRegistrations();
  Result<std::optional<MemberSet>> ReadSealed();
  Result<std::string> ReadBounded(const std::string& key);
  std::string Where() const;

  Vfs* vfs_;
  std::string token_;
  size_t size_;
  bool registered_ = false;
};

// What a rendezvous provider needs besides its store.
struct RendezvousConfig {
  Member self;
  std::string token;
  size_t size = 0;
};

// Takes the keys every rendezvous provider shares, `token=` (default: the caller's token, else
// etcd's default "etcd-cluster") and `size=` (default: --cluster-size), and checks them against the
// caller's context: InvalidArgument when they disagree, when no size is known, or when the caller
// gave no --name and peer URLs to register. The caller takes its own keys and calls CheckAllTaken.
Result<RendezvousConfig> TakeRendezvousConfig(ProviderParams& params);

// A provider (`name` for messages) that rendezvouses in `vfs` as config.self: Rendezvous::Discover.
Result<std::unique_ptr<DiscoveryProvider>> MakeRendezvousProvider(std::string name, std::unique_ptr<Vfs> vfs,
                                                                  RendezvousConfig config);

}  // namespace quorate
