#include "cli/run_info.h"

#include <unistd.h>

#include <chrono>
#include <climits>

#include <nlohmann/json.hpp>

namespace torchprof::cli {

std::string run_info_json(const RunInfo& info, const OutputOptions& options) {
  nlohmann::json j;
  j["command"] = info.command;
  j["program"] = info.program;
  j["host"] = info.host;
  j["start_real_ns"] = info.start_real_ns;
  j["cwd"] = info.cwd;
  j["launcher_pid"] = info.launcher_pid;
  j["version"] = TORCHPROF_VERSION;
  j["options"] = {{"output", info.output},
                  {"schedule", options.schedule},
                  {"step_marker", options.step_marker},
                  {"capture_range", options.capture_range},
                  {"worker_name", options.worker_name},
                  {"gzip", options.gzip},
                  {"sort", options.sort},
                  {"row_limit", options.row_limit}};
  // Invalid UTF-8 in an argument must not lose the whole chunk.
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string outside_tools_json(const std::vector<OutsideTool>& outside) {
  nlohmann::json tools = nlohmann::json::array();
  for (const OutsideTool& t : outside) tools.push_back({{"variable", t.variable}, {"library", t.value}, {"tool", t.name}});
  return nlohmann::json{{"outside_tools", tools}}.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string run_end_json(const TargetStatus& status, int64_t end_real_ns, uint32_t connections, int pid) {
  nlohmann::json j;
  j["pid"] = pid;
  j["exit_code"] = status.exit_code;
  j["signal"] = status.signal ? nlohmann::json(*status.signal) : nlohmann::json(nullptr);
  j["end_real_ns"] = end_real_ns;
  j["connections"] = connections;
  return j.dump();
}

int64_t real_now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string host_name() {
  char buf[HOST_NAME_MAX + 1] = {};
  if (::gethostname(buf, sizeof(buf) - 1) != 0) return "localhost";
  return buf;
}

}  // namespace torchprof::cli
