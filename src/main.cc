#include <cstdlib>

#include "quorate/cli.h"

int main(int argc, char** argv) {
  // gRPC's own c-ares resolver ignores /etc/hosts (and Kubernetes hostAliases); peers must resolve
  // the way etcd and the rest of the system do. An operator's explicit choice still wins.
  setenv("GRPC_DNS_RESOLVER", "native", /*overwrite=*/0);
  return quorate::RunCli(argc, argv);
}
