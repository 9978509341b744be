#include "quorate/log.h"

#include <chrono>

#include <grpc/support/log.h>
#include <nlohmann/json.hpp>
#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_sinks.h>

#include "core/json.h"
#include "quorate/text.h"

namespace quorate {
namespace {

// Log lines carry names, URLs and errors that peers and servers sent: escaped and cut, so no line
// break forges a record and no escape sequence reaches the operator's terminal.
constexpr size_t kMaxLogBytes = 8192;

// %* in the text pattern: the message, made printable.
class PrintablePayload : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&, spdlog::memory_buf_t& dest) override {
    std::string text = Printable(std::string_view(msg.payload.data(), msg.payload.size()), kMaxLogBytes);
    dest.append(text.data(), text.data() + text.size());
  }
  std::unique_ptr<custom_flag_formatter> clone() const override { return std::make_unique<PrintablePayload>(); }
};

// A pattern cannot escape quotes in messages; build each line as a real JSON object instead.
class JsonFormatter : public spdlog::formatter {
 public:
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    auto micros = std::chrono::duration_cast<std::chrono::microseconds>(msg.time.time_since_epoch()).count();
    nlohmann::json line = {
        {"ts", static_cast<double>(micros) / 1e6},
        {"level", std::string(spdlog::level::to_string_view(msg.level).data(),
                              spdlog::level::to_string_view(msg.level).size())},
        {"msg", Printable(std::string_view(msg.payload.data(), msg.payload.size()), kMaxLogBytes)},
    };
    std::string text = JsonText(line) + "\n";
    dest.append(text.data(), text.data() + text.size());
  }
  std::unique_ptr<spdlog::formatter> clone() const override { return std::make_unique<JsonFormatter>(); }
};

// gRPC writes its own multi-line diagnostics to stderr; quorate reports what failed itself, so
// gRPC's view is a detail for --log-level debug.
void ForwardGrpcLog(gpr_log_func_args* args) { spdlog::debug("grpc: {}", args->message); }

}  // namespace

void InitLogging(const std::string& format, const std::string& level) {
  auto logger = std::make_shared<spdlog::logger>("quorate", std::make_shared<spdlog::sinks::stderr_sink_mt>());
  if (format == "json") {
    logger->set_formatter(std::make_unique<JsonFormatter>());
  } else {
    auto formatter = std::make_unique<spdlog::pattern_formatter>();
    formatter->add_flag<PrintablePayload>('*').set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ %*");
    logger->set_formatter(std::move(formatter));
  }
  logger->set_level(spdlog::level::from_str(level.empty() ? "info" : level));
  logger->flush_on(spdlog::level::debug);
  spdlog::set_default_logger(logger);
  gpr_set_log_function(ForwardGrpcLog);
}

}  // namespace quorate
