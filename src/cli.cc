#include "quorate/cli.h"

namespace quorate {

int RunCli(int, char**) { return 0; }

}  // namespace quorate
