// The CA rotation of the peer TLS (docs/DESIGN.md §14), carried out by every node's quorate from upkeep:
// (1) trust old and new, by a restart; (2) leaves of the new CA, live; (3) trust the new CA only, by a
// restart. The operator asks once (`quorate tls rotate-ca` writes the intent into etcd); each node reads
// the new CA and its new leaf from `next/` beside the files it was given, decides with the pure gate
// (core/rolling) and says where it is in etcd, so the others wait for it. The node's own phase is a
// file in its state dir (what its etcd is started with), so a killed quorate starts etcd as it was.
// Nothing secret leaves the node: etcd holds the new CA's fingerprint and each node's phase.
#pragma once

#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "core/config.h"
#include "core/rolling.h"
#include "etcd/etcd_client.h"
#include "quorate/member.h"
#include "quorate/status.h"

namespace quorate {

// Reserved keys (DESIGN §14): the intent, and one record per member under the prefix.
inline constexpr const char* kCaRotationIntentKey = "/quorate/rolling/ca-rotation/intent";
inline constexpr const char* kCaRotationMembersPrefix = "/quorate/rolling/ca-rotation/members/";

// The phases of a CA rotation, for the gate.
RollingPlan CaRotationPlan();

// Where the next generation of a TLS file is: `next/` in its directory, under the same name (a second
// Secret mounted at .../next, or files put there by hand).
std::string NextTlsPath(const std::string& path);
// The rotation's ID: the sha256 of the new CA's certificate file (public, so fit for etcd and logs).
Result<std::string> CaFingerprint(const std::string& ca_file);

// The intent as `quorate tls rotate-ca` writes it, and each member's record.
std::string CaRotationIntentValue(const std::string& id);
Result<std::string> CaRotationIntentId(const std::string& value);
struct CaRotationReport {
  std::string name;
  std::string id;
  int phase = 0;
};
Result<CaRotationReport> ParseCaRotationReport(const std::string& value);

// The rotation as etcd holds it: the intent's ID (empty: none asked) and each member's phase.
struct CaRotationView {
  std::string id;
  std::vector<std::pair<std::string, int>> members;  // name (hex ID when not started), phase
  bool done() const;
};
Result<CaRotationView> ReadCaRotation(EtcdClient& client);
// `quorate tls rotate-ca`: asks for the rotation to the CA of fingerprint `id` (CaFingerprint of the
// next CA). Asking again for the same one changes nothing; another one while a rotation is under way
// is FailedPrecondition naming it: nodes at different phases of two rotations would not trust each other.
Status AskCaRotation(EtcdClient& client, const std::string& id);
std::string FormatCaRotation(const CaRotationView& view);

class CaRotation {
 public:
  // `restart_etcd` asks the supervisor for a deliberate restart (Supervisor::RequestRestart).
  CaRotation(const Config& config, std::function<void()> restart_etcd);

  // etcd's argv for the phase this node is at: its peer TLS flags point at the files quorate keeps
  // in <state-dir>/tls (written again here, so they are there whatever was lost). Unchanged at phase
  // 0, and once done when the operator has put the new CA in place of the old.
  std::vector<std::string> EtcdArgv(std::vector<std::string> argv) const;
  // One round for member `self`: gather the facts through `client`, decide, log the decision when it
  // changed, carry it out.
  void Round(EtcdClient& client, const Member& self);
  // The facts and decision of the last round, for tests and `tls status`.
  RollingDecision last() const;

 private:
  struct Local {
    std::string id;
    int phase = 0;
  };
  Local LoadLocal() const;
  Status SaveLocal(const Local& local) const;
  // Why this node cannot take rotation `id` now; empty when it can. `peer_urls`: what its new leaf
  // must name.
  std::string MaterialProblem(const std::string& id, const Local& local, const std::vector<std::string>& peer_urls) const;
  // Writes the CA bundle, certificate and key etcd is to read at `phase` into <state-dir>/tls.
  Status WriteMaterial(int phase) const;

  const Config& config_;
  std::function<void()> restart_etcd_;
  RollingPlan plan_;
  std::string dir_;
  std::string said_;
  std::string done_id_;  // the rotation seen done on every member from here: only its intent is read
  mutable std::mutex mu_;
  RollingDecision last_;
};

}  // namespace quorate
