#include <csignal>
#include <cstdlib>

#include "cli/cli.h"

int main(int argc, char** argv) {
  // gRPC's own c-ares resolver ignores /etc/hosts (and Kubernetes hostAliases); peers must resolve
  // the way etcd and the rest of the system do. An operator's explicit choice still wins.
  setenv("GRPC_DNS_RESOLVER", "native", /*overwrite=*/0);
  // OpenSSL writes to its socket with write(2), so a server that closed a TLS connection first
  // (an API server, S3, etcd) would kill quorate with SIGPIPE instead of failing that one call with
  // EPIPE. etcd is spawned with every signal back at its default.
  std::signal(SIGPIPE, SIG_IGN);
  return quorate::RunCli(argc, argv, quorate::kBuildCommit);
}
