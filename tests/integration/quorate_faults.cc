// quorate with a fault hook, for tests/integration/restore_killed_test.py only (never installed):
// QUORATE_TEST_KILL_AFTER_RESTORE_STEP=N kills the process with SIGKILL, nothing cleaned up, as a
// crash or an OOM kill would, right after the restore's Nth file step or rename (node/restore.h), so
// the test goes through every step by counting up until a run is no longer killed.
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "cli/cli.h"
#include "node/restore.h"

int main(int argc, char** argv) {
  const char* at = getenv("QUORATE_TEST_KILL_AFTER_RESTORE_STEP");
  const int kill_at = at != nullptr ? atoi(at) : 0;
  quorate::SetRestoreStepHookForTest([kill_at, count = 0](std::string_view step) mutable {
    if (++count != kill_at) return;
    std::string line = "killed after restore step " + std::to_string(count) + ": " + std::string(step) + "\n";
    (void)!write(STDERR_FILENO, line.data(), line.size());
    raise(SIGKILL);
  });
  return quorate::RunCli(argc, argv, "test build (quorate_faults)");
}
