// The command line: a table of commands, each parsing its flags and returning an exit code.
#pragma once

namespace quorate {

int RunCli(int argc, char** argv);

}  // namespace quorate
