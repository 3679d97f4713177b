#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/errors.h"
#include "pipeline/check.h"

namespace torchprof {

namespace {

RunData checked_run() {
  RunData run;
  run.source = "out";
  run.command = {"./train", "--fast"};
  run.exit_code = 0;
  run.events = 1200;
  run.dropped_events = 3;
  run.processes = 1;
  run.step_dur_ns = {100'000'000, 131'200'000, 162'400'000};
  run.marked_steps = 3;
  run.peak_memory_bytes = 3LL << 30;
  OpStats mm;
  mm.name = "aten::mm";
  mm.kind = "cpu_op";
  mm.calls = 4;
  mm.cpu_total_ns = 8'000'000;
  mm.self_cpu_ns = 6'000'000;
  run.ops.push_back(mm);
  return run;
}

CheckResult check_one(const RunData& run, const std::string& bound, bool is_max = true) {
  const std::vector<CheckResult> r = run_checks(run, {parse_bound(bound, is_max)});
  REQUIRE(r.size() == 1);
  return r[0];
}

}  // namespace

TEST_CASE("parse_quantity reads times, sizes, percentages and plain numbers") {
  CHECK(parse_quantity("120ms")->value == doctest::Approx(120e6));
  CHECK(parse_quantity("120ms")->unit == Unit::kTime);
  CHECK(parse_quantity("2.5s")->value == doctest::Approx(2.5e9));
  CHECK(parse_quantity("300us")->value == doctest::Approx(300e3));
  CHECK(parse_quantity("40ns")->value == doctest::Approx(40));
  CHECK(parse_quantity("1GB")->value == doctest::Approx(1073741824.0));
  CHECK(parse_quantity("1GB")->unit == Unit::kBytes);
  CHECK(parse_quantity("512MiB")->value == doctest::Approx(512.0 * 1048576));
  CHECK(parse_quantity("100B")->value == doctest::Approx(100));
  CHECK(parse_quantity("5%")->unit == Unit::kPercent);
  CHECK(parse_quantity("42")->unit == Unit::kNone);
  CHECK(parse_quantity("42")->value == doctest::Approx(42));
  CHECK_FALSE(parse_quantity(""));
  CHECK_FALSE(parse_quantity("ms"));
  CHECK_FALSE(parse_quantity("abc"));
  CHECK_FALSE(parse_quantity("12xs"));
  CHECK_FALSE(parse_quantity("1.5.2s"));
}

TEST_CASE("parse_bound splits METRIC=VALUE and rejects malformed bounds") {
  const CheckBound b = parse_bound("step_time_avg=120ms", /*is_max=*/true);
  CHECK(b.metric == "step_time_avg");
  CHECK(b.limit_text == "120ms");
  CHECK(b.limit.value == doctest::Approx(120e6));
  CHECK_THROWS_AS(parse_bound("step_time_avg", true), InputError);
  CHECK_THROWS_AS(parse_bound("step_time_avg=", true), InputError);
  CHECK_THROWS_AS(parse_bound("=5", true), InputError);
  CHECK_THROWS_AS(parse_bound("events=lots", false), InputError);
}

TEST_CASE("a breached --max names the metric, its value and the limit") {
  const RunData run = checked_run();
  const CheckResult r = check_one(run, "step_time_avg=120ms");
  CHECK_FALSE(r.passed);
  CHECK(r.message == "step_time_avg 131.200ms > 120ms");
  CHECK(check_one(run, "step_time_avg=140ms").passed);
  CHECK_FALSE(check_one(run, "step_time_max=150ms").passed);
  CHECK(check_one(run, "step_time_min=100ms").passed);  // equal is within a max
  CHECK(check_one(run, "step_time_p50=131200000").passed);
}

TEST_CASE("--min fails below the limit") {
  const RunData run = checked_run();
  const CheckResult r = check_one(run, "events=2000", /*is_max=*/false);
  CHECK_FALSE(r.passed);
  CHECK(r.message == "events 1200 < 2000");
  CHECK(check_one(run, "events=1000", false).passed);
  CHECK(check_one(run, "steps=3", false).passed);
}

TEST_CASE("counts, exit code, memory and ops") {
  const RunData run = checked_run();
  CHECK_FALSE(check_one(run, "dropped_events=0").passed);
  CHECK(check_one(run, "exit_code=0").passed);
  CHECK_FALSE(check_one(run, "peak_memory_bytes=2GB").passed);
  CHECK(check_one(run, "memory.peak_bytes=4GB").passed);
  CHECK(check_one(run, "peak_memory_bytes=2GB").message == "peak_memory_bytes 3GB > 2GB");
  CHECK(check_one(run, "op:aten::mm:cpu_total_ns=8ms").passed);
  CHECK_FALSE(check_one(run, "op:aten::mm:cpu_total_ns=7ms").passed);
  CHECK(check_one(run, "op:aten::mm:calls=4").passed);
  CHECK(metric_value(run, "op:aten::mm:cpu_avg_ns").value == doctest::Approx(2'000'000));
}

TEST_CASE("a limit on an op the run does not have is broken, whatever the bound") {
  RunData run = checked_run();
  const CheckResult r = check_one(run, "op:missing:calls=3");
  CHECK_FALSE(r.passed);
  CHECK(r.message.find("has no op named 'missing'") != std::string::npos);
  CHECK_FALSE(check_one(run, "op:missing:cpu_total_ns=1").passed);
}

TEST_CASE("unknown metrics, missing data and unit mismatches are input errors") {
  RunData run = checked_run();
  CHECK_THROWS_AS(check_one(run, "bogus=1"), InputError);
  CHECK_THROWS_AS(check_one(run, "op:aten::mm:bogus=1"), InputError);
  CHECK_THROWS_AS(check_one(run, "gpu_busy_ns=1ms"), InputError);  // no GPU data
  CHECK_THROWS_AS(check_one(run, "step_time_avg=1GB"), InputError);
  CHECK_THROWS_AS(check_one(run, "events=5ms"), InputError);
  run.step_dur_ns.clear();
  CHECK_THROWS_AS(check_one(run, "step_time_avg=1s"), InputError);
}

TEST_CASE("GPU idle share") {
  RunData run = checked_run();
  run.has_gpu = true;
  run.gpu_busy_ns = 75;
  run.gpu_idle_ns = 25;
  CHECK(metric_value(run, "gpu_idle_pct").value == doctest::Approx(25.0));
  CHECK(metric_value(run, "gpu_busy_pct").value == doctest::Approx(75.0));
  CHECK_FALSE(check_one(run, "gpu_idle_pct=20%").passed);
  CHECK(check_one(run, "gpu_idle_pct=30").passed);
  CHECK(check_one(run, "gpu_busy_ns=75").passed);
}

TEST_CASE("render_checks lists every check and the verdict") {
  const RunData run = checked_run();
  const auto results = run_checks(run, {parse_bound("step_time_avg=120ms", true), parse_bound("events=10", false)});
  const std::string table = render_checks(run, results, "table");
  CHECK(table.find("FAIL  step_time_avg 131.200ms > 120ms") != std::string::npos);
  CHECK(table.find("pass  events 1200 >= 10") != std::string::npos);
  CHECK(table.find("1 of 2 checks failed") != std::string::npos);
  const std::string md = render_checks(run, results, "markdown");
  CHECK(md.find("| `step_time_avg` | 131.200ms | max 120ms | **FAIL** |") != std::string::npos);
  CHECK(render_checks(run, results, "json").find("\"passed\": false") != std::string::npos);
}

TEST_CASE("GITHUB_STEP_SUMMARY gets markdown appended") {
  namespace fs = std::filesystem;
  const fs::path path = fs::temp_directory_path() / ("torchprof_step_summary_" + std::to_string(::getpid()) + ".md");
  fs::remove(path);
  ::unsetenv("GITHUB_STEP_SUMMARY");
  CHECK(append_github_step_summary("ignored") == "");
  CHECK_FALSE(fs::exists(path));
  ::setenv("GITHUB_STEP_SUMMARY", path.c_str(), 1);
  CHECK(append_github_step_summary("first") == "");
  CHECK(append_github_step_summary("second") == "");
  const std::string md = render_run_markdown(checked_run(), {"", 5});
  ::setenv("GITHUB_STEP_SUMMARY", "/nonexistent/dir/summary.md", 1);
  CHECK(append_github_step_summary("x") != "");
  ::unsetenv("GITHUB_STEP_SUMMARY");
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  CHECK(text.str() == "first\nsecond\n");
  fs::remove(path);
  CHECK(md.find("### torchprof: `./train --fast`") != std::string::npos);
  CHECK(md.find("| aten::mm |") != std::string::npos);
}

}  // namespace torchprof
