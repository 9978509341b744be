#include "cli/cli.h"

int main(int argc, char** argv) { return quorate::RunCli(argc, argv, quorate::kBuildCommit); }
