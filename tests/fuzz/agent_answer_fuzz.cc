// A peer agent's Describe answer, as protobuf bytes off the wire: whatever it holds, the report made
// of it carries only printable text.
#include "agent/agent.h"
#include "fuzz.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace quorate;
  AgentReport report = ReportFromWireForTest("127.0.0.2:2382", fuzz::Text(data, size));
  if (!IsPrintable(report.token) || !IsPrintable(report.error)) std::abort();
  return 0;
}
