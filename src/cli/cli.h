// The command line: a table of commands, each parsing its flags and returning an exit code.
#pragma once

#include <string_view>

namespace quorate {

// The whole program, process set-up included (gRPC's resolver, SIGPIPE): main() is this alone.
// `build_commit`: the commit the binary was built from, which `quorate version` prints.
int RunCli(int argc, char** argv, std::string_view build_commit);

// Defined in the executable's generated commit.cc (src/cli/commit.cc.in).
extern const char* const kBuildCommit;

}  // namespace quorate
