#include "quorate/etcd_client.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <grpcpp/grpcpp.h>
#include <nlohmann/json.hpp>

#include "etcd_rpc.grpc.pb.h"
#include "quorate/fs.h"
#include "quorate/table.h"

namespace quorate {
namespace {

namespace pb = etcdserverpb;

std::string Slurp(const std::string& path) {
  if (path.empty()) return {};
  auto text = ReadFile(path);
  return text.ok() ? *text : std::string();
}

bool Contains(const std::string& text, const char* needle) { return text.find(needle) != std::string::npos; }

// etcd's words decide what the caller should do; the gRPC code alone is too coarse.
Status FromGrpc(const grpc::Status& st, const std::string& endpoint, const std::string& call) {
  std::string msg = fmt::format("{} at {}: {}", call, endpoint, st.error_message());
  const std::string& text = st.error_message();
  if (Contains(text, "member not found")) return Status::NotFound(msg);
  if (Contains(text, "Peer URLs already exists")) return Status::FailedPrecondition(msg);
  if (Contains(text, "unhealthy cluster") || Contains(text, "in sync with leader") ||
      Contains(text, "too many learner") || Contains(text, "not ready") || Contains(text, "no leader") ||
      Contains(text, "leader changed") || Contains(text, "timed out")) {
    return Status::Unavailable(msg);
  }
  switch (st.error_code()) {
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::DEADLINE_EXCEEDED:
    case grpc::StatusCode::CANCELLED:
      return Status::Unavailable(msg);
    case grpc::StatusCode::INVALID_ARGUMENT:
      return Status::InvalidArgument(msg);
    case grpc::StatusCode::NOT_FOUND:
      return Status::NotFound(msg);
    case grpc::StatusCode::FAILED_PRECONDITION:
      return Status::FailedPrecondition(msg);
    default:
      return Status::Internal(msg);
  }
}

// A call that never reached a server may go to the next endpoint, whatever it is.
bool NeverReachedServer(const grpc::Status& st) {
  return st.error_code() == grpc::StatusCode::UNAVAILABLE && !Contains(st.error_message(), "etcdserver:");
}

std::vector<ClusterMember> ToMembers(const google::protobuf::RepeatedPtrField<pb::Member>& members) {
  std::vector<ClusterMember> out;
  for (const auto& m : members) {
    ClusterMember c;
    c.id = m.id();
    c.name = m.name();
    c.peer_urls.assign(m.peerurls().begin(), m.peerurls().end());
    c.client_urls.assign(m.clienturls().begin(), m.clienturls().end());
    c.is_learner = m.islearner();
    out.push_back(std::move(c));
  }
  return out;
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

class GrpcEtcdClient : public EtcdClient {
 public:
  explicit GrpcEtcdClient(EtcdClientOptions options) : options_(std::move(options)) {
    for (const auto& endpoint : options_.endpoints) channels_.push_back(MakeChannel(endpoint));
  }

  Result<MemberListing> MemberList() override {
    pb::MemberListRequest req;
    pb::MemberListResponse resp;
    std::string answered;
    auto st = Call<pb::Cluster>("MemberList", &answered, [&](pb::Cluster::Stub& s, grpc::ClientContext* c) {
      return s.MemberList(c, req, &resp);
    });
    if (!st.ok()) return st;
    return MemberListing{resp.header().cluster_id(), resp.header().member_id(), ToMembers(resp.members())};
  }

  Result<MemberListing> MemberAdd(const std::vector<std::string>& peer_urls, bool is_learner,
                                  MemberId* added) override {
    pb::MemberAddRequest req;
    for (const auto& u : peer_urls) req.add_peerurls(u);
    req.set_islearner(is_learner);
    pb::MemberAddResponse resp;
    std::string answered;
    auto st = Call<pb::Cluster>("MemberAdd", &answered, [&](pb::Cluster::Stub& s, grpc::ClientContext* c) {
      return s.MemberAdd(c, req, &resp);
    });
    if (!st.ok()) return st;
    if (added != nullptr) *added = resp.member().id();
    return MemberListing{resp.header().cluster_id(), resp.header().member_id(), ToMembers(resp.members())};
  }

  Status MemberRemove(MemberId id) override {
    pb::MemberRemoveRequest req;
    req.set_id(id);
    pb::MemberRemoveResponse resp;
    std::string answered;
    return Call<pb::Cluster>("MemberRemove", &answered, [&](pb::Cluster::Stub& s, grpc::ClientContext* c) {
      return s.MemberRemove(c, req, &resp);
    });
  }

  Status MemberPromote(MemberId id) override {
    pb::MemberPromoteRequest req;
    req.set_id(id);
    pb::MemberPromoteResponse resp;
    std::string answered;
    return Call<pb::Cluster>("MemberPromote", &answered, [&](pb::Cluster::Stub& s, grpc::ClientContext* c) {
      return s.MemberPromote(c, req, &resp);
    });
  }

  Status MemberUpdate(MemberId id, const std::vector<std::string>& peer_urls) override {
    pb::MemberUpdateRequest req;
    req.set_id(id);
    for (const auto& u : peer_urls) req.add_peerurls(u);
    pb::MemberUpdateResponse resp;
    std::string answered;
    return Call<pb::Cluster>("MemberUpdate", &answered, [&](pb::Cluster::Stub& s, grpc::ClientContext* c) {
      return s.MemberUpdate(c, req, &resp);
    });
  }

  Result<EndpointStatus> EndpointStatusOf(const std::string& endpoint) override {
    auto channel = MakeChannel(endpoint);
    auto stub = pb::Maintenance::NewStub(channel);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + options_.timeout);
    pb::StatusRequest req;
    pb::StatusResponse resp;
    grpc::Status st = stub->Status(&ctx, req, &resp);
    if (!st.ok()) return FromGrpc(st, endpoint, "Status");
    EndpointStatus out;
    out.endpoint = endpoint;
    out.member_id = resp.header().member_id();
    out.leader = resp.leader();
    out.raft_index = resp.raftindex();
    out.raft_term = resp.raftterm();
    out.raft_applied_index = resp.raftappliedindex();
    out.db_size = resp.dbsize();
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
    std::string answered;
    return Call<pb::KV>("Put", &answered, [&](pb::KV::Stub& s, grpc::ClientContext* c) { return s.Put(c, req, &resp); });
  }

  Result<std::optional<std::string>> Get(const std::string& key) override {
    pb::RangeRequest req;
    req.set_key(key);
    pb::RangeResponse resp;
    std::string answered;
    auto st = Call<pb::KV>("Range", &answered, [&](pb::KV::Stub& s, grpc::ClientContext* c) {
      return s.Range(c, req, &resp);
    });
    if (!st.ok()) return st;
    if (resp.kvs_size() == 0) return std::optional<std::string>();
    return std::optional<std::string>(resp.kvs(0).value());
  }

  Result<std::vector<KeyValue>> GetPrefix(const std::string& prefix) override {
    std::vector<KeyValue> out;
    std::string from = prefix;
    const std::string end = PrefixEnd(prefix);
    while (true) {
      pb::RangeRequest req;
      req.set_key(from);
      req.set_range_end(end);
      req.set_limit(500);
      pb::RangeResponse resp;
      std::string answered;
      auto st = Call<pb::KV>("Range", &answered, [&](pb::KV::Stub& s, grpc::ClientContext* c) {
        return s.Range(c, req, &resp);
      });
      if (!st.ok()) return st;
      for (const auto& kv : resp.kvs()) out.push_back({kv.key(), kv.value(), kv.create_revision()});
      if (!resp.more() || resp.kvs_size() == 0) return out;
      from = resp.kvs(resp.kvs_size() - 1).key() + std::string(1, '\0');
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
    std::string answered;
    auto st = Call<pb::KV>("Txn", &answered, [&](pb::KV::Stub& s, grpc::ClientContext* c) {
      return s.Txn(c, req, &resp);
    });
    if (!st.ok()) return st;
    return resp.succeeded();
  }

 private:
  std::shared_ptr<grpc::Channel> MakeChannel(const std::string& endpoint) {
    std::string target = endpoint;
    bool secure = target.rfind("https://", 0) == 0;
    if (auto pos = target.find("://"); pos != std::string::npos) target = target.substr(pos + 3);
    std::shared_ptr<grpc::ChannelCredentials> creds = grpc::InsecureChannelCredentials();
    if (secure) {
      grpc::SslCredentialsOptions opts;
      opts.pem_root_certs = Slurp(options_.tls.trusted_ca_file);
      opts.pem_private_key = Slurp(options_.tls.key_file);
      opts.pem_cert_chain = Slurp(options_.tls.cert_file);
      creds = grpc::SslCredentials(opts);
    }
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_ENABLE_RETRIES, 0);
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
    return grpc::CreateCustomChannel(target, creds, args);
  }

  template <typename Service, typename Fn>
  Status Call(const char* name, std::string* answered, Fn&& fn) {
    if (channels_.empty()) return Status::InvalidArgument("no etcd endpoints given");
    std::vector<std::string> failures;
    for (size_t i = 0; i < channels_.size(); ++i) {
      auto stub = Service::NewStub(channels_[i]);
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + options_.timeout);
      grpc::Status st = fn(*stub, &ctx);
      if (st.ok()) {
        *answered = options_.endpoints[i];
        return Status::Ok();
      }
      bool next = NeverReachedServer(st) || st.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
      if (!next || i + 1 == channels_.size()) {
        if (failures.empty()) return FromGrpc(st, options_.endpoints[i], name);
        failures.push_back(fmt::format("{}: {}", options_.endpoints[i], st.error_message()));
        return Status::Unavailable(fmt::format("{}: no endpoint answered ({})", name, fmt::join(failures, "; ")));
      }
      failures.push_back(fmt::format("{}: {}", options_.endpoints[i],
                                     st.error_code() == grpc::StatusCode::UNAVAILABLE ? "not answering" : st.error_message()));
    }
    return Status::Internal("unreachable");
  }

  EtcdClientOptions options_;
  std::vector<std::shared_ptr<grpc::Channel>> channels_;
};

std::string Joined(const std::vector<std::string>& v) { return fmt::format("{}", fmt::join(v, ",")); }

}  // namespace

std::unique_ptr<EtcdClient> MakeEtcdClient(const EtcdClientOptions& options) {
  return std::make_unique<GrpcEtcdClient>(options);
}

std::string FormatMemberList(const MemberListing& listing, OutputFormat format) {
  if (format == OutputFormat::kJson) {
    nlohmann::json members = nlohmann::json::array();
    for (const auto& m : listing.members) {
      members.push_back({{"id", IdToHex(m.id)},
                         {"name", m.name},
                         {"peerURLs", m.peer_urls},
                         {"clientURLs", m.client_urls},
                         {"isLearner", m.is_learner}});
    }
    return nlohmann::json{{"clusterID", IdToHex(listing.cluster_id)}, {"members", members}}.dump(2) + "\n";
  }
  std::vector<std::vector<std::string>> rows;
  for (const auto& m : listing.members) {
    rows.push_back({IdToHex(m.id), m.started() ? "started" : "unstarted", m.name, Joined(m.peer_urls),
                    Joined(m.client_urls), m.is_learner ? "true" : "false"});
  }
  if (format == OutputFormat::kTable) {
    return RenderTable({"ID", "STATUS", "NAME", "PEER ADDRS", "CLIENT ADDRS", "IS LEARNER"}, rows);
  }
  std::string out;
  for (const auto& r : rows) out += fmt::format("{}\n", fmt::join(r, ", "));
  return out;
}

}  // namespace quorate
