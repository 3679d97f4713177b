#include <doctest/doctest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "common/errors.h"
#include "pipeline/diff.h"

namespace torchprof {

namespace {

OpStats cpu_op(const std::string& name, int64_t total_ns, int64_t self_ns, uint64_t calls = 1) {
  OpStats op;
  op.name = name;
  op.kind = "nvtx";
  op.calls = calls;
  op.cpu_total_ns = total_ns;
  op.self_cpu_ns = self_ns;
  return op;
}

// A run of `steps` marked steps of `step_ns`; every op's times are per step × steps.
RunData run_of(const std::string& source, int steps, const std::vector<OpStats>& per_step,
               int64_t step_ns = 10'000'000) {
  RunData run;
  run.source = source;
  for (int k = 0; k < steps; ++k) run.step_dur_ns.push_back(step_ns);
  run.marked_steps = static_cast<uint64_t>(steps);
  for (OpStats op : per_step) {
    const int n = std::max(steps, 1);
    op.calls *= static_cast<uint64_t>(n);
    op.cpu_total_ns *= n;
    op.self_cpu_ns *= n;
    op.cuda_total_ns *= n;
    op.self_cuda_ns *= n;
    run.ops.push_back(op);
  }
  return run;
}

std::vector<OpStats> base_ops() {
  return {cpu_op("forward", 4'000'000, 4'000'000), cpu_op("backward", 6'000'000, 6'000'000),
          cpu_op("tiny", 10'000, 10'000)};
}

const DiffRow& row(const DiffResult& d, const std::string& name) {
  auto it = std::find_if(d.rows.begin(), d.rows.end(), [&](const DiffRow& r) { return r.name == name; });
  REQUIRE_MESSAGE(it != d.rows.end(), "no row " << name);
  return *it;
}

}  // namespace

TEST_CASE("parse_duration_ns reads units and rejects garbage") {
  CHECK(parse_duration_ns("100us") == 100'000);
  CHECK(parse_duration_ns("2ms") == 2'000'000);
  CHECK(parse_duration_ns("1.5s") == 1'500'000'000);
  CHECK(parse_duration_ns("300ns") == 300);
  CHECK(parse_duration_ns("42") == 42);
  CHECK(parse_duration_ns("0") == 0);
  CHECK_FALSE(parse_duration_ns(""));
  CHECK_FALSE(parse_duration_ns("ms"));
  CHECK_FALSE(parse_duration_ns("1x"));
  CHECK_FALSE(parse_duration_ns("-1ms"));
  CHECK_FALSE(parse_duration_ns("1.2.3ms"));
}

TEST_CASE("format_signed_time_ns signs the delta") {
  CHECK(format_signed_time_ns(1'500'000) == "+1.500ms");
  CHECK(format_signed_time_ns(-20'000) == "-20.000us");
  CHECK(format_signed_time_ns(0) == "0.000us");
}

TEST_CASE("identical runs show no regression") {
  const DiffResult d = compute_diff(run_of("a", 10, base_ops()), run_of("b", 10, base_ops()), {});
  CHECK(d.metric == "cpu_time_total");
  CHECK(d.per_step);
  CHECK(d.regressions.empty());
  for (const DiffRow& r : d.rows) CHECK_MESSAGE(r.status == DiffStatus::kSame, r.name);
  CHECK(d.total.status == DiffStatus::kSame);
}

TEST_CASE("an op 1.5x slower regresses and is named; the threshold is strict") {
  std::vector<OpStats> slow = base_ops();
  slow[0].cpu_total_ns = slow[0].self_cpu_ns = 6'000'000;
  const DiffResult d = compute_diff(run_of("a", 10, base_ops()), run_of("b", 10, slow), {});
  const DiffRow& fwd = row(d, "forward");
  CHECK(fwd.status == DiffStatus::kRegressed);
  CHECK(fwd.before == doctest::Approx(4'000'000));
  CHECK(fwd.after == doctest::Approx(6'000'000));
  CHECK(*fwd.delta_pct() == doctest::Approx(50.0));
  CHECK(d.rows.front().name == "forward");  // largest absolute delta first
  REQUIRE_FALSE(d.regressions.empty());
  const bool named = std::any_of(d.regressions.begin(), d.regressions.end(),
                                 [](const std::string& r) { return r.find("forward (nvtx)") == 0; });
  CHECK(named);
  CHECK(row(d, "backward").status == DiffStatus::kSame);

  DiffOptions loose;
  loose.threshold_pct = 50.0;  // exactly +50% is not beyond 50%
  const DiffResult l = compute_diff(run_of("a", 10, base_ops()), run_of("b", 10, slow), loose);
  CHECK(row(l, "forward").status == DiffStatus::kSame);
  CHECK(l.regressions.empty());
}

TEST_CASE("faster ops show as improved, not regressed") {
  std::vector<OpStats> fast = base_ops();
  fast[1].cpu_total_ns = fast[1].self_cpu_ns = 3'000'000;
  const DiffResult d = compute_diff(run_of("a", 4, base_ops()), run_of("b", 4, fast), {});
  CHECK(row(d, "backward").status == DiffStatus::kImproved);
  CHECK(d.total.status == DiffStatus::kImproved);
  CHECK(d.regressions.empty());
}

TEST_CASE("rows below --min-time in both runs are not judged") {
  std::vector<OpStats> after = base_ops();
  after[2].cpu_total_ns = after[2].self_cpu_ns = 30'000;  // tiny triples, still tiny
  DiffOptions options;
  options.min_time_ns = 100'000;
  const DiffResult d = compute_diff(run_of("a", 5, base_ops()), run_of("b", 5, after), options);
  CHECK(row(d, "tiny").status == DiffStatus::kNotJudged);
  CHECK(d.regressions.empty());
  const DiffResult strict = compute_diff(run_of("a", 5, base_ops()), run_of("b", 5, after), {});
  CHECK(row(strict, "tiny").status == DiffStatus::kRegressed);
  CHECK(strict.regressions.size() == 1);
}

TEST_CASE("10 steps against 20 compare per step") {
  const DiffResult d = compute_diff(run_of("a", 10, base_ops()), run_of("b", 20, base_ops()), {});
  CHECK(d.per_step);
  CHECK(d.before_steps == 10);
  CHECK(d.after_steps == 20);
  CHECK(row(d, "forward").before == doctest::Approx(4'000'000));
  CHECK(row(d, "forward").after == doctest::Approx(4'000'000));
  CHECK(d.regressions.empty());
  CHECK(render_diff(d, "table", 0).find("per step") != std::string::npos);

  // Without step markers in one run the totals are compared as they are.
  RunData unmarked = run_of("c", 20, base_ops());
  unmarked.marked_steps = 0;
  const DiffResult raw = compute_diff(run_of("a", 10, base_ops()), unmarked, {});
  CHECK_FALSE(raw.per_step);
  CHECK(row(raw, "forward").status == DiffStatus::kRegressed);
}

TEST_CASE("new ops are marked and no regression; vanished ones marked and a regression from --min-time on") {
  std::vector<OpStats> after = base_ops();
  after[2] = cpu_op("fresh", 5'000'000, 5'000'000);
  DiffOptions options;
  options.threshold_pct = 1000;  // only presence matters here
  const DiffResult d = compute_diff(run_of("a", 3, base_ops()), run_of("b", 3, after), options);
  CHECK(row(d, "fresh").status == DiffStatus::kNew);
  CHECK(row(d, "fresh").before == 0);
  CHECK_FALSE(row(d, "fresh").delta_pct());
  CHECK(row(d, "tiny").status == DiffStatus::kGone);
  REQUIRE(d.regressions.size() == 1);
  CHECK(d.regressions[0].find("tiny (nvtx): ") == 0);
  CHECK(d.regressions[0].find("not in the after-run") != std::string::npos);
  options.min_time_ns = 20'000;  // tiny took 10us a step: below the floor, not judged
  CHECK(compute_diff(run_of("a", 3, base_ops()), run_of("b", 3, after), options).regressions.empty());
  const std::string table = render_diff(d, "table", 0);
  CHECK(table.find("+new") != std::string::npos);
  CHECK(table.find("-gone") != std::string::npos);
}

TEST_CASE("an after-run with under half the events (per step) regresses") {
  RunData before = run_of("a", 4, base_ops());
  RunData after = run_of("b", 2, base_ops());
  before.events = 4000;
  after.events = 900;  // 450 a step against 1000
  DiffOptions options;
  options.threshold_pct = 1000;
  DiffResult d = compute_diff(before, after, options);
  REQUIRE(d.regressions.size() == 1);
  CHECK(d.regressions[0] == "events: 1000 -> 450 per step (the after-run recorded less than half as many events)");
  after.events = 1200;  // 600 a step: fewer, not collapsed
  CHECK(compute_diff(before, after, options).regressions.empty());
  after.events = 0;
  CHECK(compute_diff(before, after, options).regressions.size() == 1);
}

TEST_CASE("rows are keyed by name and kind; ProfilerStep#N folds") {
  RunData before = run_of("a", 2, {cpu_op("x", 1000, 1000)});
  RunData after = before;
  after.ops[0].kind = "kernel";
  after.ops[0].cuda_total_ns = after.ops[0].self_cuda_ns = 1000;
  after.has_gpu = true;
  before.ops.push_back(cpu_op("ProfilerStep#0", 5000, 0));
  before.ops.push_back(cpu_op("ProfilerStep#1", 5000, 0));
  after.ops.push_back(cpu_op("ProfilerStep#0", 5000, 0));
  const DiffResult d = compute_diff(before, after, {});
  CHECK(d.metric == "cpu_time_total");  // only one run has GPU data
  const auto kinds = std::count_if(d.rows.begin(), d.rows.end(), [](const DiffRow& r) { return r.name == "x"; });
  CHECK(kinds == 2);
  CHECK(row(d, "ProfilerStep*").status != DiffStatus::kNew);
  CHECK(row(d, "ProfilerStep*").before == doctest::Approx(5000));  // 10000 over 2 steps
}

TEST_CASE("metric choice and incomparable inputs") {
  RunData a = run_of("a", 2, base_ops());
  RunData b = run_of("b", 2, base_ops());
  DiffOptions cuda;
  cuda.metric = "cuda_time_total";
  CHECK_THROWS_AS(compute_diff(a, b, cuda), InputError);
  DiffOptions unknown;
  unknown.metric = "bogus";
  CHECK_THROWS_AS(compute_diff(a, b, unknown), InputError);
  a.has_gpu = b.has_gpu = true;
  CHECK(compute_diff(a, b, {}).metric == "cuda_time_total");
  DiffOptions count;
  count.metric = "count";
  const DiffResult c = compute_diff(a, b, count);
  CHECK_FALSE(c.time_metric);
  CHECK(c.total.before == doctest::Approx(3.0));  // calls per step over three ops
}

TEST_CASE("step_time compares step statistics") {
  DiffOptions options;
  options.metric = "step_time";
  const DiffResult d = compute_diff(run_of("a", 4, base_ops(), 10'000'000),
                                    run_of("b", 8, base_ops(), 12'000'000), options);
  CHECK(d.total.before == doctest::Approx(10'000'000));
  CHECK(d.total.after == doctest::Approx(12'000'000));
  CHECK(d.total.status == DiffStatus::kRegressed);
  CHECK(row(d, "step time max").status == DiffStatus::kRegressed);
  RunData none = run_of("c", 0, base_ops());
  none.step_dur_ns.clear();
  CHECK_THROWS_AS(compute_diff(run_of("a", 4, base_ops()), none, options), InputError);
}

TEST_CASE("quantile_ns interpolates like numpy") {
  CHECK(quantile_ns({1, 2, 3, 4}, 0.5) == doctest::Approx(2.5));
  CHECK(quantile_ns({5}, 0.9) == doctest::Approx(5));
  CHECK(quantile_ns({3, 1, 2}, 1.0) == doctest::Approx(3));
  CHECK(mean_ns({1, 2, 6}) == doctest::Approx(3));
}

TEST_CASE("every format renders the rows and the total") {
  std::vector<OpStats> slow = base_ops();
  slow[0].cpu_total_ns = slow[0].self_cpu_ns = 6'000'000;
  const DiffResult d = compute_diff(run_of("a", 10, base_ops()), run_of("b", 10, slow), {});
  const std::string md = render_diff(d, "markdown", 0);
  CHECK(md.find("| Name | Kind | Before | After | Delta | Delta % | Status |") != std::string::npos);
  CHECK(md.find("`forward`") != std::string::npos);
  CHECK(md.find("regression") != std::string::npos);
  const std::string csv = render_diff(d, "csv", 0);
  CHECK(csv.rfind("name,kind,before_ns_per_step,after_ns_per_step,delta_ns_per_step,delta_pct,status\n", 0) == 0);
  CHECK(csv.find("forward,nvtx,4000000,6000000,2000000,50,regressed") != std::string::npos);
  const auto j = nlohmann::json::parse(render_diff(d, "json", 1));
  CHECK(j["schema"] == "torchprof.diff/1");
  CHECK(j["rows"].size() == 1);
  CHECK(j["rows_not_shown"] == d.rows.size() - 1);
  CHECK(j["rows"][0]["name"] == "forward");
  CHECK(j["total"]["status"] == "regressed");
  const std::string table = render_diff(d, "table", 1);
  CHECK(table.find("more rows not shown") != std::string::npos);
  CHECK(table.find("+2.000ms") != std::string::npos);
  CHECK(table.find("+50.00%") != std::string::npos);
  CHECK_THROWS_AS(render_diff(d, "yaml", 0), InputError);
}

TEST_CASE("parse_summary reads summary.json and refuses what it is not") {
  const std::string good = R"({"schema":"torchprof.summary/1","command":["./app"],"exit_code":3,
    "dropped_events":2,"processes":[{"events":10},{"events":5}],
    "steps":[{"name":"ProfilerStep#0","dur_ns":100,"action":"record"},
             {"name":"ProfilerStep#1","dur_ns":300,"action":"record_and_save"},
             {"name":"ProfilerStep#2","dur_ns":900,"action":"none"}],
    "ops":[{"name":"k","kind":"kernel","calls":1,"self_cpu_ns":0,"cpu_total_ns":0,
            "self_cuda_ns":7,"cuda_total_ns":7}],
    "gpu":{"devices":[],"busy_ns":7,"idle_ns":3},
    "memory":{"peak_bytes_per_device":{"0":100,"1":400}}})";
  const RunData r = parse_summary(good, "s.json");
  CHECK(r.exit_code == 3);
  CHECK(r.dropped_events == 2);
  CHECK(r.events == 15);
  CHECK(r.processes == 2);
  CHECK(r.step_dur_ns == std::vector<int64_t>{100, 300});
  CHECK(r.marked_steps == 2);
  CHECK(r.has_gpu);
  CHECK(r.gpu_busy_ns == 7);
  CHECK(r.peak_memory_bytes == 400);
  CHECK(r.command == std::vector<std::string>{"./app"});

  CHECK_THROWS_WITH_AS(parse_summary("{not json", "x.json"), "x.json: malformed JSON", InputError);
  CHECK_THROWS_AS(parse_summary(R"({"schema":"torchprof.summary/2","ops":[]})", "x"), InputError);
  CHECK_THROWS_AS(parse_summary(R"({"ops":[]})", "x"), InputError);
  CHECK_THROWS_AS(parse_summary(R"({"schema":"torchprof.summary/1","ops":{}})", "x"), InputError);
  CHECK_THROWS_AS(parse_summary(R"({"schema":"torchprof.summary/1","ops":[{"calls":1}]})", "x"), InputError);
  CHECK_THROWS_AS(parse_summary(R"({"schema":"torchprof.summary/1"})", "x"), InputError);
}

TEST_CASE("load_run refuses missing paths with a reason") {
  CHECK_THROWS_WITH_AS(load_run("/nonexistent/torchprof/run"),
                       "cannot read /nonexistent/torchprof/run: no such file or directory", InputError);
}

}  // namespace torchprof
