// Reads an etcd member's peer endpoint GET /members, which etcd answers before any quorum exists:
// the cluster ID (header X-Etcd-Cluster-ID) and the members, with client URLs only for those that
// have started. This is how quorate learns that a cluster exists when no etcd API answers yet. And
// GET /version: the version each peer runs and the cluster's, for the upgrade rules.
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "core/cluster.h"
#include "core/etcd_version.h"
#include "quorate/status.h"
#include "quorate/tls.h"
#include "tls/cert.h"

namespace quorate {

// Unavailable only when nothing answers (refused, closed, or silent until the timeout): the one
// outcome that means "no etcd runs there". InvalidArgument naming the URL and what it answered when
// something answers, but not as etcd does (HTTP error, not JSON, no cluster ID, a name or URL etcd
// would refuse, a body over 1 MiB, an answer not whole within the timeout, a failed TLS handshake):
// callers must treat that as unknown, never as "no cluster". `timeout` bounds the whole call,
// connecting to the last byte. For https the server is verified against trusted_ca_file (the
// system roots when empty) and the peer certificate and key are presented.
Result<ClusterView> ProbeMembers(const std::string& peer_url, const TlsFiles& peer_tls,
                                 std::chrono::milliseconds timeout);

// The body of GET /members and its cluster ID header, checked; `source` names them in errors.
Result<ClusterView> ParseMembersAnswer(const std::string& body, const std::string& cluster_id_header,
                                       const std::string& source);

// GET /version on a peer URL, with the outcomes of ProbeMembers.
Result<VersionAnswer> ProbeVersion(const std::string& peer_url, const TlsFiles& peer_tls,
                                   std::chrono::milliseconds timeout);

// The body of GET /version, checked: {"etcdserver":"3.5.30","etcdcluster":"3.5.0"} (3.6 adds
// "storage", which is not read); `source` names it in errors.
Result<VersionAnswer> ParseVersionAnswer(const std::string& body, const std::string& source);

// When the certificate a member presents on its peer URL expires, read from a TLS handshake (the
// client certificate of `peer_tls` presented when given, though etcd sends its own before it asks
// for one): for `member list`. InvalidArgument for an http URL; Unavailable when nothing answers.
Result<WallTime> ProbePeerCertNotAfter(const std::string& peer_url, const TlsFiles& peer_tls,
                                       std::chrono::milliseconds timeout);

}  // namespace quorate
