// The tests against a real etcd 3.4 (tests/support/etcd_node.h): a doctest binary of their own,
// meson suite 'etcd', that exits 77 (meson's "skipped"), saying why, when etcd is not on PATH.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>

#include "../support/programs.h"

int main(int argc, char** argv) {
  if (quorate::FindProgram("etcd").empty()) {
    std::printf("SKIP: etcd is not on PATH (Debian: apt-get install etcd-server, as scripts/deps does)\n");
    return 77;
  }
  doctest::Context context(argc, argv);
  return context.run();
}
