// The rolling changes of etcd's TLS (docs/DESIGN.md §14), carried out by every node's quorate from
// upkeep: the CA rotation of the peer and client sides ((1) trust old and new, by a restart; (2) leaves of the new CA, live; (3)
// trust the new CA only, by a restart) and the move from plaintext to TLS ((1) listen on http and
// https, by a restart; (2) the membership lists the https URL, live; (3) listen on https only, by a
// restart). The operator asks once (`quorate tls rotate-ca`, `quorate tls to-https` write the intent
// into etcd); each node decides with the pure gate (core/rolling) and says where it is in etcd, so the
// others wait for it. The node's own phase is a file in its state dir (what its etcd is started with),
// so a killed quorate starts etcd as it was. Nothing secret leaves the node: etcd holds the new CA's
// fingerprint or the https port, and each node's phase.
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
inline constexpr const char* kPeerHttpsIntentKey = "/quorate/rolling/peer-https/intent";
inline constexpr const char* kPeerHttpsMembersPrefix = "/quorate/rolling/peer-https/members/";

// What tells one rolling change from another: its phases, its keys in etcd, its file in
// <state-dir>/tls, and how its intent reads.
struct RollingSpec {
  RollingPlan plan;
  std::string intent_key;
  std::string members_prefix;
  std::string local_file;
  // The intent's ID (public: it goes to etcd, logs and files), or why the value is not an intent.
  std::function<Result<std::string>(const std::string& value)> intent_id;
};
RollingSpec CaRotationSpec();
RollingSpec PeerHttpsSpec();

// Where the next generation of a TLS file is: `next/` in its directory, under the same name (a second
// Secret mounted at .../next, or files put there by hand).
std::string NextTlsPath(const std::string& path);
// The rotation's ID: the sha256 of the new CA's certificate file (public, so fit for etcd and logs).
Result<std::string> CaFingerprint(const std::string& ca_file);

// The intents as `quorate tls rotate-ca` and `quorate tls to-https` write them, and each member's record.
std::string CaRotationIntentValue(const std::string& id);
Result<std::string> CaRotationIntentId(const std::string& value);
std::string PeerHttpsIntentValue(int https_port);
Result<std::string> PeerHttpsIntentId(const std::string& value);
std::string PeerHttpsId(int https_port);  // the move's ID: "port 2381"
struct RollingReport {
  std::string name;
  std::string id;
  int phase = 0;
};
Result<RollingReport> ParseRollingReport(const std::string& value, const RollingPlan& plan);

// A change as etcd holds it: the intent's ID (empty: none asked) and each member's phase.
struct RollingView {
  std::string id;
  std::vector<std::pair<std::string, int>> members;  // name (hex ID when not started), phase
  int last = 0;                                      // the plan's last phase
  bool done() const;
};
Result<RollingView> ReadRolling(EtcdClient& client, const RollingSpec& spec);
std::string FormatRolling(const RollingSpec& spec, const RollingView& view);
Result<RollingView> ReadCaRotation(EtcdClient& client);
std::string FormatCaRotation(const RollingView& view);
// `quorate tls rotate-ca`: asks for the rotation to the CA of fingerprint `id` (CaFingerprint of the
// next CA). Asking again for the same one changes nothing; another one while a rotation is under way
// is FailedPrecondition naming it: nodes at different phases of two rotations would not trust each other.
// So is either change while the other is under way: each restarts members on its own count (R8).
Status AskCaRotation(EtcdClient& client, const std::string& id);
// `quorate tls to-https`: asks for the move of every member's peer URLs to https at `https_port`, on
// the same terms.
Status AskPeerHttps(EtcdClient& client, int https_port);

// A node's own record of a change: the intent it is at and its phase (0: none, or never started).
struct RollingLocal {
  std::string id;
  int phase = 0;
};
RollingLocal LoadRollingLocal(const std::string& state_dir, const RollingSpec& spec);
// This node's phase of the move to TLS (from <state-dir>/tls) and the https port it moves to; phase 0
// and port 0 when none was taken.
struct PeerHttpsState {
  int port = 0;
  int phase = 0;
};
PeerHttpsState LoadPeerHttps(const std::string& state_dir);
// The move to TLS as the cluster holds it, read through `client`: its https port when it is done on
// every member (rule H4's case of a node that lost its state dir with its volume), else 0.
Result<int> DonePeerHttpsPort(EtcdClient& client);
// Records this node at the last phase of the move to `https_port`, as a node that went through it is.
Status SavePeerHttpsDone(const std::string& state_dir, int https_port);

// One rolling change carried out on this node: gather the facts, decide with the gate, say it, act.
class RollingChange {
 public:
  // `restart_etcd` asks the supervisor for a deliberate restart (Supervisor::RequestRestart).
  RollingChange(const Config& config, RollingSpec spec, std::function<void()> restart_etcd);
  virtual ~RollingChange() = default;

  // One round for member `self`: gather the facts through `client`, decide, log the decision when it
  // changed, carry it out.
  void Round(EtcdClient& client, const Member& self);
  // The decision of the last round, for tests and `tls status`.
  RollingDecision last() const;

 protected:
  RollingLocal LoadLocal() const { return LoadRollingLocal(config_.state_dir, spec_); }
  // Why this node cannot take change `id` now; empty when it can.
  virtual std::string MaterialProblem(const std::string& id, const RollingLocal& local, const Member& self) const = 0;
  // Before `phase` is recorded: what etcd is to read there (files), so the record never names what is
  // not written yet.
  virtual Status Prepare(int phase) const = 0;
  // After a phase etcd takes live is recorded: what makes it so.
  virtual void TakeLive(EtcdClient& client, const Member& self, const RollingLocal& local) = 0;

  const Config& config_;
  const RollingSpec spec_;
  const std::string dir_;  // <state-dir>/tls

 private:
  Status SaveLocal(const RollingLocal& local) const;

  std::function<void()> restart_etcd_;
  std::string said_;
  std::string done_id_;  // the change seen done on every member from here: only its intent is read
  mutable std::mutex mu_;
  RollingDecision last_;
};

// The TLS files quorate's own etcd client is to use now, and what names their contents (it changes when
// they do: the client reads them once, when made); empty: the files it was given, as they are.
struct OwnClientTls {
  TlsFiles files;
  std::string generation;
};

// The CA rotation, of the peer side and, when `next/` of --trusted-ca-file is there, of the client side
// in the same phases. From `bundle` on, etcd's TLS flags of each side name quorate's copies in
// <state-dir>/tls.
class CaRotationChange : public RollingChange {
 public:
  CaRotationChange(const Config& config, std::function<void()> restart_etcd);
  // etcd's argv for the phase this node is at: the TLS flags of each side rotated point at the files
  // quorate keeps in <state-dir>/tls (written again here, so they are there whatever was lost).
  // Unchanged at phase 0, and, side by side, once done when the operator has put the new CA in place of
  // the old.
  std::vector<std::string> EtcdArgv(std::vector<std::string> argv) const;
  // What quorate's own client, given `base` (--cacert/--cert/--key, or etcd's client files), uses at
  // this phase: the client side's copies in place of etcd's client files it names.
  OwnClientTls ClientTls(TlsFiles base) const;

 private:
  std::string MaterialProblem(const std::string& id, const RollingLocal& local, const Member& self) const override;
  Status Prepare(int phase) const override;
  void TakeLive(EtcdClient& client, const Member& self, const RollingLocal& local) override;
};

// The move of the peers from plaintext to TLS, on the peer TLS files quorate is given.
class PeerHttpsChange : public RollingChange {
 public:
  PeerHttpsChange(const Config& config, std::function<void()> restart_etcd);
  // etcd's argv for the phase this node is at: --listen-peer-urls on both twins during the move, the
  // https ones once done; --initial-advertise-peer-urls as the membership lists them.
  std::vector<std::string> EtcdArgv(std::vector<std::string> argv) const;
  // What the membership is to list for this member now (upkeep's MemberUpdate keeps it so).
  std::vector<std::string> AdvertisedPeerUrls(const std::vector<std::string>& urls) const;

 private:
  std::string MaterialProblem(const std::string& id, const RollingLocal& local, const Member& self) const override;
  Status Prepare(int) const override { return Status::Ok(); }
  void TakeLive(EtcdClient& client, const Member& self, const RollingLocal& local) override;
};

// Every rolling change of this node: what `quorate run` holds, rewrites etcd's argv with and hands to
// upkeep. The two never run at once (AskCaRotation, AskPeerHttps), so their rounds do not meet.
class RollingChanges {
 public:
  RollingChanges(const Config& config, std::function<void()> restart_etcd);
  std::vector<std::string> EtcdArgv(std::vector<std::string> argv) const;
  void Round(EtcdClient& client, const Member& self);
  std::vector<std::string> AdvertisedPeerUrls(const std::vector<std::string>& urls) const {
    return https_.AdvertisedPeerUrls(urls);
  }
  OwnClientTls ClientTls(const TlsFiles& base) const;
  const CaRotationChange& ca() const { return ca_; }
  const PeerHttpsChange& https() const { return https_; }

 private:
  CaRotationChange ca_;
  PeerHttpsChange https_;
};

}  // namespace quorate
