#include "etcd/etcd_client.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "etcd/etcd_errors.h"
#include "etcd_rpc.grpc.pb.h"
#include "quorate/clock.h"
#include "quorate/fs.h"
#include "quorate/text.h"

namespace quorate {
namespace {

namespace pb = etcdserverpb;

using std::chrono::milliseconds;
// gRPC's deadlines are system_clock time points; quorate's are the Clock's (steady_clock).
using SystemClock = std::chrono::system_clock;

// Between rounds of a read: soon enough for an etcd that is (re)starting, then once a second.
constexpr milliseconds kFirstBackoff(50);
constexpr milliseconds kMaxBackoff(1000);
// etcd pages ranges; 500 keeps one answer well under gRPC's 4 MiB default for small values.
constexpr int64_t kRangePage = 500;

// A read can be asked again anywhere; a change may already have been made by the endpoint that did
// not answer, so it is only sent elsewhere when the first endpoint certainly never got it.
enum class Kind { kRead, kChange };

SystemClock::time_point ForGrpc(Clock::TimePoint t) {
  return SystemClock::now() + std::chrono::duration_cast<SystemClock::duration>(t - RealClock().Now());
}

// A wait that a Cancellation may end looks at it this often: gRPC's waits take no fd to watch.
constexpr milliseconds kCancelLook(50);

bool Cancelled(const Cancellation* cancel) { return cancel != nullptr && cancel->cancelled(); }

// The end of the next slice of a wait until `deadline`: all of it without a Cancellation.
SystemClock::time_point NextLook(SystemClock::time_point deadline, const Cancellation* cancel) {
  return cancel == nullptr ? deadline : std::min(deadline, SystemClock::now() + kCancelLook);
}

Status Stopped(const std::string& what) {
  return Status::Cancelled(fmt::format("{}: cancelled: quorate is stopping", what));
}

// Waits until the channel is connected. False at once when a connection attempt fails, so a dead
// endpoint costs nothing, and false at the deadline for a silent one, or once cancelled.
bool WaitReady(grpc::Channel& channel, SystemClock::time_point deadline, const Cancellation* cancel) {
  grpc_connectivity_state state = channel.GetState(/*try_to_connect=*/true);
  while (state != GRPC_CHANNEL_READY) {
    if (state == GRPC_CHANNEL_TRANSIENT_FAILURE || state == GRPC_CHANNEL_SHUTDOWN) return false;
    if (channel.WaitForStateChange(state, NextLook(deadline, cancel))) {
      state = channel.GetState(/*try_to_connect=*/true);
    } else if (SystemClock::now() >= deadline || Cancelled(cancel)) {
      return false;
    }
  }
  return true;
}

// Waits until `until`, or less once a channel that was down connects, or once cancelled. Waiting on
// the channels rather than sleeping is what lets gRPC see a reconnect at all: nothing else polls
// them but a backup poller every 5 s.
void PauseWatching(const std::vector<grpc::Channel*>& channels, SystemClock::time_point until,
                   const Cancellation* cancel) {
  for (size_t i = 0; i < channels.size(); ++i) {
    auto now = SystemClock::now();
    if (now >= until || Cancelled(cancel)) return;
    auto slice_end = now + (until - now) / static_cast<int>(channels.size() - i);
    grpc_connectivity_state state = channels[i]->GetState(/*try_to_connect=*/true);
    while (state != GRPC_CHANNEL_READY && !Cancelled(cancel)) {
      if (channels[i]->WaitForStateChange(state, NextLook(slice_end, cancel))) {
        state = channels[i]->GetState(/*try_to_connect=*/true);
      } else if (SystemClock::now() >= slice_end) {
        break;
      }
    }
    if (state == GRPC_CHANNEL_READY) return;
  }
}

// The real clock, except that its waits watch the channels (PauseWatching), so a Backoff on it
// paces the rounds of a read and ends a pause early when an endpoint comes back. A call has no stop
// fd: its timeout bounds it, and the options' Cancellation ends it sooner.
class ChannelWatch : public Clock {
 public:
  ChannelWatch(std::vector<grpc::Channel*> channels, const Cancellation* cancel)
      : channels_(std::move(channels)), cancel_(cancel) {}
  TimePoint Now() override { return RealClock().Now(); }
  Result<int> Poll(std::span<pollfd>, TimePoint deadline) override {
    PauseWatching(channels_, ForGrpc(deadline), cancel_);
    return 0;
  }

 private:
  std::vector<grpc::Channel*> channels_;
  const Cancellation* cancel_;
};

// The members as etcd listed them, each name and URL checked as etcd would: they end up in etcd's
// --initial-cluster and its config files. A listing that fails the check is not used; it is
// Unavailable, so callers retry within --timeout rather than take it for the operator's mistake.
Result<std::vector<ClusterMember>> ToMembers(const google::protobuf::RepeatedPtrField<pb::Member>& members) {
  std::vector<ClusterMember> out;
  for (const auto& m : members) {
    ClusterMember c;
    c.id = m.id();
    auto bad = [&](const std::string& why) {
      return Status::Unavailable(fmt::format("etcd listed member {} {}; not using that listing", IdToHex(c.id), why));
    };
    c.name = m.name();
    if (Status s = CheckMemberName(c.name, "with name"); !s.ok()) return bad(s.message());
    for (const auto* urls : {&m.peerurls(), &m.clienturls()}) {
      for (const auto& u : *urls) {
        if (auto url = ParseUrl(u); !url.ok()) return bad(url.status().message());
      }
    }
    c.peer_urls.assign(m.peerurls().begin(), m.peerurls().end());
    c.client_urls.assign(m.clienturls().begin(), m.clienturls().end());
    c.is_learner = m.islearner();
    out.push_back(std::move(c));
  }
  return out;
}

Result<MemberListing> ToListing(const pb::ResponseHeader& header,
                                const google::protobuf::RepeatedPtrField<pb::Member>& members) {
  auto checked = ToMembers(members);
  if (!checked.ok()) return checked.status();
  return MemberListing{header.cluster_id(), header.member_id(), std::move(*checked)};
}

// The end of the range of keys that start with `prefix`, as etcd wants it.
std::string PrefixEnd(std::string prefix) {
  while (!prefix.empty()) {
    if (static_cast<unsigned char>(prefix.back()) < 0xff) {
      prefix.back() = static_cast<char>(prefix.back() + 1);
      return prefix;
    }
    prefix.pop_back();
  }
  return std::string(1, '\0');
}

// One endpoint: its channel, or why there cannot be one (bad URL, unreadable TLS file).
struct Target {
  std::string endpoint;
  std::shared_ptr<grpc::Channel> channel;
  Status error;
};

Target MakeTarget(const std::string& endpoint, const TlsFiles& tls, bool bounded_window = false) {
  Target t{endpoint, nullptr, Status::Ok()};
  std::string address = endpoint;
  bool secure = tls.enabled();
  if (auto pos = endpoint.find("://"); pos != std::string::npos) {
    std::string scheme = endpoint.substr(0, pos);
    if (scheme != "http" && scheme != "https") {
      t.error = Status::InvalidArgument(fmt::format("etcd endpoint {}: scheme must be http or https", endpoint));
      return t;
    }
    secure = scheme == "https";
    address = endpoint.substr(pos + 3);
  }
  // etcd's advertised client URLs may end in "/"; gRPC wants host:port only.
  if (!address.empty() && address.back() == '/') address.pop_back();
  if (address.empty() || address.find('/') != std::string::npos) {
    t.error = Status::InvalidArgument(fmt::format("etcd endpoint {}: want http(s)://host:port", endpoint));
    return t;
  }
  std::shared_ptr<grpc::ChannelCredentials> creds = grpc::InsecureChannelCredentials();
  if (secure) {
    grpc::SslCredentialsOptions opts;
    for (auto [path, pem] :
         {std::pair{&tls.trusted_ca_file, &opts.pem_root_certs}, std::pair{&tls.cert_file, &opts.pem_cert_chain},
          std::pair{&tls.key_file, &opts.pem_private_key}}) {
      if (path->empty()) continue;
      auto text = ReadFile(*path);
      if (!text.ok()) {
        t.error = Status::InvalidArgument(fmt::format("etcd endpoint {}: {}", endpoint, text.status().message()));
        return t;
      }
      *pem = std::move(*text);
    }
    creds = grpc::SslCredentials(opts);
  }
  grpc::ChannelArguments args;
  // Retries are this client's decision: gRPC's own would resend changes.
  args.SetInt(GRPC_ARG_ENABLE_RETRIES, 0);
  // A client lives for one init or one upkeep tick: reconnect soon after etcd (re)starts.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  // A snapshot is streamed faster than it is compressed: without BDP probing the HTTP/2 window
  // stays at its 64 KiB default, so gRPC never buffers megabytes of it ahead of the reader.
  if (bounded_window) args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  t.channel = grpc::CreateCustomChannel(address, creds, args);
  return t;
}

class GrpcEtcdClient : public EtcdClient {
 public:
  explicit GrpcEtcdClient(const EtcdClientOptions& options) : options_(options) {
    for (const auto& endpoint : options_.endpoints) targets_.push_back(MakeTarget(endpoint, options_.tls));
  }

  Result<MemberListing> MemberList() override {
    pb::MemberListRequest req;
    pb::MemberListResponse resp;
    // Without "hasleader": a member that lost quorum still shows its view, as etcdctl does.
    Status st =
        Call<pb::Cluster>("MemberList", Kind::kRead, Targets(), /*require_leader=*/false,
                          [&](pb::Cluster::Stub& s, grpc::ClientContext* c) { return s.MemberList(c, req, &resp); });
    if (!st.ok()) return st;
    return ToListing(resp.header(), resp.members());
  }

  Result<MemberListing> MemberListLinearizable() override {
    pb::RangeRequest read;
    // One key no one writes: the read is only for its linearizability (etcd serves it once the member
    // has applied the leader's commit index as of the read).
    read.set_key(std::string(1, '\0'));
    pb::MemberListResponse resp;
    Status st = Call<pb::KV>(
        "linearizable MemberList", Kind::kRead, Targets(), /*require_leader=*/true,
        [&](pb::KV::Stub& s, grpc::ClientContext* c, const std::shared_ptr<grpc::Channel>& channel) {
          pb::RangeResponse ignored;
          grpc::Status read_st = s.Range(c, read, &ignored);
          if (!read_st.ok()) return read_st;
          // The same member, which has now applied every change committed before the read.
          grpc::ClientContext list;
          list.set_deadline(c->deadline());
          return pb::Cluster::NewStub(channel)->MemberList(&list, pb::MemberListRequest(), &resp);
        });
    if (!st.ok()) return st;
    return ToListing(resp.header(), resp.members());
  }

  Result<MemberListing> MemberAdd(const std::vector<std::string>& peer_urls, bool is_learner,
                                  MemberId* added) override {
    pb::MemberAddRequest req;
    for (const auto& u : peer_urls) req.add_peerurls(u);
    req.set_islearner(is_learner);
    pb::MemberAddResponse resp;
    Status st =
        Call<pb::Cluster>("MemberAdd", Kind::kChange, Targets(), /*require_leader=*/true,
                          [&](pb::Cluster::Stub& s, grpc::ClientContext* c) { return s.MemberAdd(c, req, &resp); });
    if (!st.ok()) return st;
    if (added != nullptr) *added = resp.member().id();
    return ToListing(resp.header(), resp.members());
  }

  Status MemberRemove(MemberId id) override {
    pb::MemberRemoveRequest req;
    req.set_id(id);
    pb::MemberRemoveResponse resp;
    return Call<pb::Cluster>(
        fmt::format("MemberRemove {}", IdToHex(id)), Kind::kChange, Targets(), /*require_leader=*/true,
        [&](pb::Cluster::Stub& s, grpc::ClientContext* c) { return s.MemberRemove(c, req, &resp); });
  }

  Status MemberPromote(MemberId id) override {
    pb::MemberPromoteRequest req;
    req.set_id(id);
    pb::MemberPromoteResponse resp;
    return Call<pb::Cluster>(
        fmt::format("MemberPromote {}", IdToHex(id)), Kind::kChange, Targets(), /*require_leader=*/true,
        [&](pb::Cluster::Stub& s, grpc::ClientContext* c) { return s.MemberPromote(c, req, &resp); });
  }

  Status MemberUpdate(MemberId id, const std::vector<std::string>& peer_urls) override {
    pb::MemberUpdateRequest req;
    req.set_id(id);
    for (const auto& u : peer_urls) req.add_peerurls(u);
    pb::MemberUpdateResponse resp;
    return Call<pb::Cluster>(
        fmt::format("MemberUpdate {}", IdToHex(id)), Kind::kChange, Targets(), /*require_leader=*/true,
        [&](pb::Cluster::Stub& s, grpc::ClientContext* c) { return s.MemberUpdate(c, req, &resp); });
  }

  Result<EndpointStatus> EndpointStatusOf(const std::string& endpoint) override {
    auto known =
        std::find_if(targets_.begin(), targets_.end(), [&](const Target& t) { return t.endpoint == endpoint; });
    Target other;
    if (known == targets_.end()) other = MakeTarget(endpoint, options_.tls);
    Target* target = known == targets_.end() ? &other : &*known;
    pb::StatusRequest req;
    pb::StatusResponse resp;
    // Without "hasleader": a member without a leader is exactly what the caller wants to see.
    Status st = Call<pb::Maintenance>(
        "Status", Kind::kRead, {target}, /*require_leader=*/false,
        [&](pb::Maintenance::Stub& s, grpc::ClientContext* c) { return s.Status(c, req, &resp); });
    if (!st.ok()) return st;
    EndpointStatus out;
    out.endpoint = endpoint;
    out.member_id = resp.header().member_id();
    out.leader = resp.leader();
    out.raft_index = resp.raftindex();
    out.raft_term = resp.raftterm();
    out.raft_applied_index = resp.raftappliedindex();
    out.db_size = resp.dbsize();
    out.db_size_in_use = resp.dbsizeinuse();
    out.revision = resp.header().revision();
    out.is_learner = resp.islearner();
    out.version = resp.version();
    out.errors.assign(resp.errors().begin(), resp.errors().end());
    return out;
  }

  Status Put(const std::string& key, const std::string& value) override {
    pb::PutRequest req;
    req.set_key(key);
    req.set_value(value);
    pb::PutResponse resp;
    return Call<pb::KV>("Put " + key, Kind::kChange, Targets(), /*require_leader=*/true,
                        [&](pb::KV::Stub& s, grpc::ClientContext* c) { return s.Put(c, req, &resp); });
  }

  Result<std::optional<std::string>> Get(const std::string& key) override {
    pb::RangeRequest req;
    req.set_key(key);
    pb::RangeResponse resp;
    Status st = Call<pb::KV>("Range " + key, Kind::kRead, Targets(), /*require_leader=*/true,
                             [&](pb::KV::Stub& s, grpc::ClientContext* c) { return s.Range(c, req, &resp); });
    if (!st.ok()) return st;
    if (resp.kvs_size() == 0) return std::optional<std::string>();
    return std::optional<std::string>(resp.kvs(0).value());
  }

  Result<std::vector<KeyValue>> GetPrefix(const std::string& prefix) override {
    std::vector<KeyValue> out;
    pb::RangeRequest req;
    req.set_key(prefix);
    req.set_range_end(PrefixEnd(prefix));
    req.set_limit(kRangePage);
    while (true) {
      pb::RangeResponse resp;
      Status st = Call<pb::KV>("Range " + prefix + "*", Kind::kRead, Targets(), /*require_leader=*/true,
                               [&](pb::KV::Stub& s, grpc::ClientContext* c) { return s.Range(c, req, &resp); });
      if (!st.ok()) return st;
      for (const auto& kv : resp.kvs()) out.push_back({kv.key(), kv.value(), kv.create_revision()});
      if (!resp.more() || resp.kvs_size() == 0) return out;
      req.set_key(resp.kvs(resp.kvs_size() - 1).key() + std::string(1, '\0'));
    }
  }

  Result<bool> PutIfAbsent(const std::string& key, const std::string& value) override {
    pb::TxnRequest req;
    auto* cmp = req.add_compare();
    cmp->set_key(key);
    cmp->set_target(pb::Compare::CREATE);
    cmp->set_result(pb::Compare::EQUAL);
    cmp->set_create_revision(0);
    auto* put = req.add_success()->mutable_request_put();
    put->set_key(key);
    put->set_value(value);
    pb::TxnResponse resp;
    Status st = Call<pb::KV>("Txn put-if-absent " + key, Kind::kChange, Targets(), /*require_leader=*/true,
                             [&](pb::KV::Stub& s, grpc::ClientContext* c) { return s.Txn(c, req, &resp); });
    if (!st.ok()) return st;
    return resp.succeeded();
  }

  Result<std::vector<EtcdAlarm>> AlarmList() override {
    pb::AlarmRequest req;
    req.set_action(pb::AlarmRequest::GET);
    req.set_alarm(pb::NONE);
    pb::AlarmResponse resp;
    Status st =
        Call<pb::Maintenance>("Alarm list", Kind::kRead, Targets(), /*require_leader=*/true,
                              [&](pb::Maintenance::Stub& s, grpc::ClientContext* c) { return s.Alarm(c, req, &resp); });
    if (!st.ok()) return st;
    std::vector<EtcdAlarm> out;
    for (const auto& a : resp.alarms()) {
      if (a.alarm() == pb::NOSPACE) out.push_back({a.memberid(), AlarmKind::kNoSpace});
      if (a.alarm() == pb::CORRUPT) out.push_back({a.memberid(), AlarmKind::kCorrupt});
    }
    return out;
  }

  Status AlarmDisarm(const EtcdAlarm& alarm) override {
    pb::AlarmRequest req;
    req.set_action(pb::AlarmRequest::DEACTIVATE);
    req.set_memberid(alarm.member_id);
    req.set_alarm(alarm.kind == AlarmKind::kNoSpace ? pb::NOSPACE : pb::CORRUPT);
    pb::AlarmResponse resp;
    return Call<pb::Maintenance>(
        fmt::format("Alarm disarm {} of {}", AlarmName(alarm.kind), IdToHex(alarm.member_id)), Kind::kChange, Targets(),
        /*require_leader=*/true,
        [&](pb::Maintenance::Stub& s, grpc::ClientContext* c) { return s.Alarm(c, req, &resp); });
  }

  Status Compact(int64_t revision) override {
    pb::CompactionRequest req;
    req.set_revision(revision);
    req.set_physical(true);
    pb::CompactionResponse resp;
    return Call<pb::KV>(fmt::format("Compact {}", revision), Kind::kChange, Targets(), /*require_leader=*/true,
                        [&](pb::KV::Stub& s, grpc::ClientContext* c) { return s.Compact(c, req, &resp); });
  }

  Status Defragment(const std::string& endpoint, std::chrono::milliseconds timeout) override {
    Target target = MakeTarget(endpoint, options_.tls);
    pb::DefragmentResponse resp;
    return Call<pb::Maintenance>(
        "Defragment", Kind::kChange, {&target}, /*require_leader=*/false,
        [&](pb::Maintenance::Stub& s, grpc::ClientContext* c) {
          return s.Defragment(c, pb::DefragmentRequest(), &resp);
        },
        timeout);
  }

 private:
  std::vector<Target*> Targets() {
    std::vector<Target*> out;
    for (auto& t : targets_) out.push_back(&t);
    return out;
  }

  // Tries the targets in turn, in rounds with backoff for reads, all within options_.timeout (or the
  // call's own `timeout`).
  template <typename Service, typename Rpc>
  Status Call(const std::string& what, Kind kind, const std::vector<Target*>& targets, bool require_leader, Rpc&& rpc,
              std::optional<std::chrono::milliseconds> timeout = std::nullopt) {
    if (targets.empty()) return Status::InvalidArgument(fmt::format("{}: no etcd endpoints given", what));
    for (const Target* t : targets) {
      if (!t->error.ok()) return t->error;
    }
    std::vector<grpc::Channel*> channels;
    for (Target* t : targets) channels.push_back(t->channel.get());
    const Cancellation* cancel = options_.cancel.get();
    ChannelWatch clock(std::move(channels), cancel);
    const Clock::TimePoint deadline = std::min(clock.Now() + timeout.value_or(options_.timeout), options_.deadline);
    Backoff backoff(clock, kFirstBackoff, kMaxBackoff, deadline);
    while (true) {
      std::vector<std::string> failures;
      for (size_t i = 0; i < targets.size(); ++i) {
        if (Cancelled(cancel)) return Stopped(what);
        Target& t = *targets[i];
        auto now = clock.Now();
        auto attempt_deadline = now + (deadline - now) / static_cast<int>(targets.size() - i);
        bool ready = WaitReady(*t.channel, ForGrpc(attempt_deadline), cancel);
        if (Cancelled(cancel)) return Stopped(what);
        if (!ready && clock.Now() >= attempt_deadline) {
          failures.push_back(fmt::format("{}: no connection within {} ms", t.endpoint,
                                         std::chrono::duration_cast<milliseconds>(attempt_deadline - now).count()));
          continue;
        }
        grpc::ClientContext ctx;
        ctx.set_deadline(ForGrpc(attempt_deadline));
        // Fail at once on a broken connection rather than wait for it to come back: the next
        // endpoint may answer, and a change that fails so was certainly not sent.
        ctx.set_wait_for_ready(false);
        if (require_leader) ctx.AddMetadata("hasleader", "true");
        if (!options_.user.empty()) {
          Status authed = Authenticate(t, attempt_deadline);
          if (authed.IsInvalidArgument()) return authed;
          if (!authed.ok()) {
            failures.push_back(authed.message());
            continue;
          }
          ctx.AddMetadata("token", auth_token_);
        }
        auto stub = Service::NewStub(t.channel);
        auto cancels_call = cancel != nullptr ? options_.cancel->OnCancel([&ctx] { ctx.TryCancel(); })
                                              : Cancellation::Registration();
        grpc::Status st;
        if constexpr (std::is_invocable_v<Rpc, typename Service::Stub&, grpc::ClientContext*,
                                          const std::shared_ptr<grpc::Channel>&>) {
          st = rpc(*stub, &ctx, t.channel);  // calls that must stay on one member
        } else {
          st = rpc(*stub, &ctx);
        }
        if (st.ok()) return Status::Ok();
        // A change cancelled in flight may have been made: said so, as for one not answered.
        if (Cancelled(cancel)) return kind == Kind::kChange ? OutcomeUnknown(st, t.endpoint, what) : Stopped(what);
        if (!auth_token_.empty() && st.error_message().find("invalid auth token") != std::string::npos) {
          // etcd forgets a token after its TTL (5 idle minutes) or a restart; it refused the call
          // unread, so the next round asks again with a new one.
          auth_token_.clear();
          failures.push_back(fmt::format("{}: {}", t.endpoint, FirstLine(st)));
          continue;
        }
        bool broken = ConnectionBroken(st);
        bool unanswered = broken || st.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
        bool never_sent = broken && !ready;
        bool retryable = unanswered || st.error_code() == grpc::StatusCode::UNAVAILABLE;
        if (never_sent || RefusedUnread(st) || (kind == Kind::kRead && retryable)) {
          failures.push_back(fmt::format("{}: {}", t.endpoint, FirstLine(st)));
          continue;
        }
        if (unanswered || MaybeDone(st)) return OutcomeUnknown(st, t.endpoint, what);
        return FromGrpc(st, t.endpoint, what);
      }
      // A change is never sent again; a read is, after the pause, while time is left for it.
      if (kind == Kind::kChange || backoff.Wait() != Backoff::kRetry || clock.Now() >= deadline) {
        return Status::Unavailable(fmt::format("{}: no etcd endpoint answered: {}", what, fmt::join(failures, "; ")));
      }
    }
  }

  // The token of options_.user, asked of `t` once and kept while etcd takes it. A refusal of the
  // user or password is InvalidArgument (the operator fixes them), naming the user, never the password.
  Status Authenticate(Target& t, Clock::TimePoint deadline) {
    if (!auth_token_.empty()) return Status::Ok();
    pb::AuthenticateRequest req;
    req.set_name(options_.user);
    req.set_password(options_.password);
    pb::AuthenticateResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(ForGrpc(deadline));
    grpc::Status st = pb::Auth::NewStub(t.channel)->Authenticate(&ctx, req, &resp);
    if (st.error_code() == grpc::StatusCode::INVALID_ARGUMENT ||
        st.error_code() == grpc::StatusCode::FAILED_PRECONDITION) {
      return Status::InvalidArgument(fmt::format("Authenticate as user '{}' at {}: {}: check the user and password",
                                                 Printable(options_.user, 64), t.endpoint, FirstLine(st)));
    }
    if (!st.ok()) return FromGrpc(st, t.endpoint, "Authenticate");
    auth_token_ = resp.token();
    return Status::Ok();
  }

  EtcdClientOptions options_;
  std::vector<Target> targets_;
  std::string auth_token_;
};

}  // namespace

std::string AlarmName(AlarmKind kind) { return kind == AlarmKind::kNoSpace ? "NOSPACE" : "CORRUPT"; }

Result<SnapshotHeader> StreamSnapshot(const EtcdClientOptions& options, const std::string& endpoint,
                                      const SnapshotSink& sink) {
  Target target = MakeTarget(endpoint, options.tls, /*bounded_window=*/true);
  if (!target.error.ok()) return target.error;
  const auto deadline = SystemClock::now() + options.timeout;
  auto unavailable = [&](const std::string& why) {
    return Status::Unavailable(fmt::format("snapshot of {}: {}", endpoint, why));
  };
  if (!WaitReady(*target.channel, deadline, nullptr)) return unavailable("no connection");
  auto stub = pb::Maintenance::NewStub(target.channel);
  SnapshotHeader header;
  header.endpoint = endpoint;
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(deadline);
    pb::StatusResponse status;
    grpc::Status st = stub->Status(&ctx, pb::StatusRequest(), &status);
    if (!st.ok()) return FromGrpc(st, endpoint, "Status before a snapshot");
    header.cluster_id = status.header().cluster_id();
    header.member_id = status.header().member_id();
    header.revision = status.header().revision();
    header.version = Printable(status.version(), 64);
  }
  grpc::ClientContext ctx;
  ctx.set_deadline(deadline);
  auto reader = stub->Snapshot(&ctx, pb::SnapshotRequest());
  pb::SnapshotResponse piece;
  bool ended = false;  // etcd's last piece says nothing remains
  Status sunk = Status::Ok();
  while (reader->Read(&piece)) {
    sunk = sink(piece.blob());
    if (!sunk.ok()) {
      ctx.TryCancel();
      while (reader->Read(&piece)) {
      }
      break;
    }
    ended = piece.remaining_bytes() == 0;
  }
  grpc::Status st = reader->Finish();
  if (!sunk.ok()) return sunk;
  if (!st.ok()) {
    if (st.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
      return unavailable(fmt::format("not done within {} ms", options.timeout.count()));
    }
    return FromGrpc(st, endpoint, "Snapshot");
  }
  if (!ended) return unavailable("the stream ended before etcd said it was whole");
  return header;
}

std::unique_ptr<EtcdClient> MakeEtcdClient(const EtcdClientOptions& options) {
  return std::make_unique<GrpcEtcdClient>(options);
}

}  // namespace quorate
