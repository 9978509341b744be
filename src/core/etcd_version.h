// etcd's versions as facts: the binary quorate will run, what each peer runs, and the cluster's
// version, and the upgrade rules of docs/DESIGN.md §4 rule 6 over them. Pure: src/etcd/ and
// src/node/ learn the versions (etcd --version, GET /version), the planner only weighs them.
#pragma once

#include <compare>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "quorate/status.h"

namespace quorate {

struct EtcdVersion {
  int major = 0;
  int minor = 0;
  int patch = 0;
  auto operator<=>(const EtcdVersion&) const = default;
  std::string ToString() const;  // "3.5.30"
  std::string Minor() const;     // "3.5"
};

// "3.5.30", also with a leading "v" or a pre-release or build suffix ("3.6.0-rc.1"), as etcd
// prints them; InvalidArgument naming `source` for anything else (each part at most 4 digits).
Result<EtcdVersion> ParseEtcdVersion(std::string_view text, std::string_view source);

// What an etcd peer URL answers on GET /version.
struct VersionAnswer {
  EtcdVersion server;
  std::optional<EtcdVersion> cluster;  // nullopt while etcd says "not_decided"
};

// What one peer's etcd said on GET /version.
struct PeerVersion {
  std::string name;
  EtcdVersion server;
  std::optional<EtcdVersion> cluster;  // nullopt while etcd answers "not_decided"
};

struct VersionFacts {
  std::optional<EtcdVersion> binary;  // what --etcd says it is; nullopt when it cannot be run
  // The cluster version this member last saw (its member bucket): what binds it when no peer answers.
  std::optional<EtcdVersion> recorded_cluster;
  std::vector<PeerVersion> peers;  // those that answered
};

// The cluster's version: the highest any peer reports or this member recorded (it never goes down).
std::optional<EtcdVersion> ClusterVersion(const VersionFacts& facts);

// Empty when the binary may start here; else the one line that says why not, naming both versions
// and what to do: a binary older than the cluster version (etcd would refuse to join it), one more
// than one minor version ahead of the cluster or of a peer (etcd upgrades one minor at a time), or a
// 3.6 or later binary while a peer runs a 3.5 older than 3.5.32 (etcd's 3.6 upgrade guide). Nothing
// is refused without a known binary version.
std::string VersionRefusal(const VersionFacts& facts);

}  // namespace quorate
