// The command line: a table of commands, each parsing its flags and returning an exit code.
#pragma once

namespace quorate {

// The whole program, process set-up included (gRPC's resolver, SIGPIPE): main() is this alone.
int RunCli(int argc, char** argv);

}  // namespace quorate
