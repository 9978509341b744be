// The member's own upkeep while its etcd runs (docs/DESIGN.md §5): promote it once it is a caught-up learner,
// and bring its advertised peer URLs up to date. Only ever acts on this member, so nodes never fight;
// the one exception, the cluster's maintenance (§12), is done only by the quorate whose etcd leads.
// One etcd client per member set, reused across rounds; the clock and the client factory are seams,
// so a round (Tick) is tested against a fake cluster.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/config.h"
#include "etcd/etcd_client.h"
#include "node/maintenance.h"
#include "node/rotation.h"
#include "node/tls_renew.h"
#include "quorate/clock.h"
#include "quorate/member.h"
#include "quorate/status.h"
#include "status/status_server.h"

namespace quorate {

struct UpkeepOptions {
  Clock::Duration interval = std::chrono::seconds(1);
  // The seams; null means the real ones.
  Clock* clock = nullptr;
  EtcdClientFactory etcd_clients;
  // How often the leader's maintenance (§12) looks: it asks every member's status.
  Clock::Duration maintenance_interval = std::chrono::seconds(5);
  Clock::Duration rotation_interval = std::chrono::seconds(1);
  // Rule M7's StatefulSet replicas; null: read through discovery when it is provider=k8s
  // (ScaleTargetFromDiscovery).
  Maintainer::ScaleTargetSource scale_target = nullptr;
  // The member's certificates (§13), looked after every round whether etcd runs or not; none: no TLS.
  TlsRenewer* tls = nullptr;
};

class Upkeep {
 public:
  Upkeep(const Config& config, Metrics& metrics, UpkeepOptions options = {});
  ~Upkeep();
  Upkeep(const Upkeep&) = delete;
  Upkeep& operator=(const Upkeep&) = delete;

  // The member to look after, and the client URLs of the others (a learner cannot serve the
  // membership calls, so the voters are asked first). Each round's member list puts the client URLs
  // of the members it lists before these. The client is remade only when the endpoints change.
  void SetSelf(const Member& self, const std::vector<std::string>& peer_client_urls);
  // Rounds are made only while etcd runs (true at first): one against a stopped etcd would only
  // wait out its call timeouts, and hold up a stop. Either way Ready() is Unavailable at once, not
  // after the next round: a readiness probe must not see a healthy voter in an etcd that has exited,
  // or in one just started that no round has checked yet.
  void SetEtcdRunning(bool running);
  // etcd now runs another binary than at its last start ("3.4.23 to 3.5.30", InitOutcome's
  // version_change): the first round that finds this member a healthy voter again says the change is
  // done, with the version etcd reports. Empty: nothing new (a change not yet seen done stays).
  void SetVersionChange(const std::string& change);
  // One round: Ok when etcd is healthy and this member a voter, else why not (for /readyz).
  Status Tick();
  // The leader's maintenance round (§12), at most every maintenance_interval; nothing on a member
  // that does not lead.
  void Maintain();
  // The rolling changes (§14) to carry out, one round every rotation_interval while etcd runs; null:
  // none (the init-container variant, where quorate cannot restart etcd). Set before Start(). The
  // peer URLs kept in the membership are then the ones its phase of the move to TLS says.
  void SetRotation(RollingChanges* rotation) { rotation_ = rotation; }
  // What the last round found; Unavailable before the first.
  Status Ready() const;

  // Runs a round every interval on the calling thread until Stop(), or until its clock's wait fails
  // (the simulator's process ended). Start() runs it on a thread of its own.
  void Run();
  void Start();
  // Ends Run() wherever it runs, and cancels the round's calls in flight (a cluster without quorum
  // would hold each for its timeout); final.
  void Stop();

 private:
  // endpoints_ from what is known now; the client is remade, and true returned, only when they are
  // other URLs (an order of the same ones is kept: a client per round would redo its connections).
  // Under mu_.
  bool UseEndpointsLocked();
  // The client for endpoints_, with the TLS files as they are now. Under mu_.
  void MakeClientLocked();
  // The TLS files the client is to use now: the operator's, or a CA rotation's phase's (§14).
  OwnClientTls ClientTlsNow() const;
  void Rotate();

  const Config& config_;
  Metrics& metrics_;
  UpkeepOptions options_;
  Clock& clock_;
  mutable std::mutex mu_;
  Member self_;
  std::vector<std::string> peer_clients_;   // as SetSelf named them
  std::vector<std::string> listed_clients_;  // the other members' client URLs the last MemberList gave
  std::vector<std::string> endpoints_;       // listed_clients_, then the rest of peer_clients_, then self's
  std::shared_ptr<EtcdClient> client_;
  uint64_t client_tls_generation_ = 0;  // the renewer's generation the client's files were read at
  std::string client_rotation_generation_;  // the CA rotation's phase they were read at (OwnClientTls)
  bool etcd_running_ = true;
  std::string version_change_;
  MemberId self_id_ = 0;  // as the last round's status said
  Status ready_;
  // Shared with the /metrics section it renders, which may outlive this object.
  std::shared_ptr<Maintainer> maintainer_;
  Clock::TimePoint last_maintenance_{};
  RollingChanges* rotation_ = nullptr;
  Clock::TimePoint last_rotation_{};
  int stop_fd_ = -1;  // written by Stop(); Run() waits on it between rounds
  // Every client made here carries it; Stop() cancels it.
  std::shared_ptr<Cancellation> cancel_ = std::make_shared<Cancellation>();
  std::thread thread_;
};

// The client URLs of the members of the bucket in `state_dir` other than `self_name`; none when
// there is no readable bucket.
std::vector<std::string> PeerClientUrls(const std::string& state_dir, const std::string& self_name);

}  // namespace quorate
