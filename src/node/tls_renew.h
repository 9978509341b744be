// The member's certificates over their life (docs/DESIGN.md §13), run from upkeep: every leaf quorate
// issues (the peer one, the client-facing one) is renewed from the CA's files at two thirds of its
// life, and before etcd starts when it is missing, expired or no longer names the advertised hosts;
// every certificate file etcd is given is watched for its expiry (/metrics, a warning line, a /readyz
// detail). Without the CA's key nothing is written: cert-manager's files are only watched.
//
// The decision is pure (DecideLeaf: what a leaf's file says and the time, in; renew or keep, and
// why, out); the actor reads the files, logs each decision that changed once, and swaps a leaf in
// only after checking it. Time is a seam: the Clock paces the rounds, `wall` tells certificate time.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/config.h"
#include "quorate/clock.h"
#include "quorate/status.h"
#include "tls/cert.h"

namespace quorate {

// One certificate file as etcd is given it.
struct WatchedCert {
  std::string kind;       // "peer", "client" (leaves); "peer-ca", "client-ca", "issuing-ca" (CAs)
  std::string cert_file;
  std::string key_file;   // leaves only
  bool issued = false;    // quorate issues and renews it (a leaf, with the CA's key)
  // The URLs whose hosts it must name (leaves): the advertised and listen URLs of its side.
  std::vector<std::string> urls;
};

// What a leaf's files hold now.
struct LeafFacts {
  // The certificate as read; nullopt when it is missing or does not parse (`problem` says which).
  std::optional<CertInfo> cert;
  std::string problem;
  // Ok when it names every host of its URLs, else which it misses (CheckNames).
  Status names;
};

enum class LeafAction { kKeep, kRenew };

struct LeafDecision {
  LeafAction action = LeafAction::kKeep;
  std::string rule;    // T1... as docs/DESIGN.md §13 numbers them
  std::string reason;  // one line, for the log
  // When the leaf is due for renewal (two thirds of its life): the next look need not be sooner.
  WallTime renew_at = WallTime::max();
};

// Pure. T2: missing, unreadable or expired -> renew; T3: does not name its hosts -> renew; T1: two
// thirds of its life passed -> renew; otherwise keep until renew_at. For a leaf quorate does not
// issue, a renewal is only reported.
LeafDecision DecideLeaf(const LeafFacts& facts, WallTime now);

// When a leaf is due: not_before + 2/3 (not_after - not_before).
WallTime RenewalTime(const CertInfo& cert);

class TlsRenewer {
 public:
  using WallClock = std::function<WallTime()>;
  // The certificates `config` gives etcd, and the CA when --tls-ca-key-file is given: InvalidArgument
  // (exit 2) when the CA cannot be loaded. Null when the config names no certificate at all.
  static Result<std::unique_ptr<TlsRenewer>> Create(const Config& config, Clock& clock, WallClock wall = {});

  // Before etcd starts: every issued leaf that is missing, expired or misses a name is issued now.
  // An error (the leaf cannot be written, or fails its check) is returned: etcd would not start on it.
  Status BeforeStart();
  // One round, at most every `every`, sooner when a leaf falls due: renew what is due, read every
  // watched file's expiry, log what changed.
  void Round();
  // quorate_tls_not_after_seconds for /metrics.
  std::string RenderMetrics() const;
  // The certificates within --tls-expiry-warning of their expiry (or unreadable), one line each,
  // for /readyz; empty when none.
  std::string Warnings() const;

  // Counts the leaves swapped in: a client made with the files before (upkeep's etcd client, which
  // presents the client leaf) is remade when it moves on, before its certificate expires.
  uint64_t generation() const {
    std::lock_guard lock(mu_);
    return generation_;
  }
  const std::vector<WatchedCert>& watched() const { return watched_; }
  static constexpr Clock::Duration kEvery = std::chrono::seconds(10);

 private:
  TlsRenewer(const Config& config, Clock& clock, WallClock wall);
  // Reads a leaf, decides, logs a changed decision, renews an issued leaf that is due.
  Status Look(const WatchedCert& w);
  Status Renew(const WatchedCert& w, const LeafDecision& d);
  LeafFacts Read(const WatchedCert& w) const;
  // Records a file's expiry (or that it cannot be read) for /metrics and /readyz, warning once.
  void Report(const WatchedCert& w, const Result<WallTime>& not_after);
  // Logs `line` about `file` unless it is what was said last.
  void SayOnce(const std::string& file, const std::string& line, bool warn);

  Clock& clock_;
  WallClock wall_;
  std::optional<CaKey> ca_;
  std::vector<std::string> extra_names_;
  std::chrono::seconds lifetime_;
  std::chrono::seconds warning_;
  std::string name_;
  std::vector<WatchedCert> watched_;
  std::mutex round_mu_;  // one pass at a time: BeforeStart (the supervisor's thread) beside Round (upkeep's)
  Clock::TimePoint next_round_{};
  WallTime earliest_due_ = WallTime::max();
  std::map<std::string, std::string> said_;  // file -> the last line logged about it

  mutable std::mutex mu_;
  std::map<std::string, std::pair<std::string, std::optional<WallTime>>> expiry_;  // file -> kind, not-after
  std::map<std::string, std::string> warnings_;                                    // file -> line
  std::map<std::string, long long> renewed_;  // kind -> leaves swapped in
  std::map<std::string, long long> failed_;   // kind -> renewals that wrote nothing
  uint64_t generation_ = 0;
};

}  // namespace quorate
