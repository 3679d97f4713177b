#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "analysis/analysis.h"
#include "analysis/engine.h"
#include "analysis/merge.h"
#include "analysis/rank_steps.h"
#include "common/errors.h"
#include "formats/rank_table.h"
#include "formats/summary_json.h"
#include "process_capture.h"

namespace torchprof {

namespace {

constexpr int64_t kMs = 1'000'000;

// A process with marked steps of the given durations (ms), recorded unless `actions` says otherwise.
Process ranked(int pid, std::optional<int> rank, std::vector<int64_t> step_ms, int input = 0,
               std::vector<StepAction> actions = {}) {
  Process p;
  p.pid = pid;
  p.rank = rank;
  p.host = "h" + std::to_string(input);
  p.worker = p.host + "_" + std::to_string(pid);
  p.input = input;
  int64_t t = 1000;
  for (size_t k = 0; k < step_ms.size(); ++k) {
    Step& s = p.steps.emplace_back();
    s.index = static_cast<int>(k);
    s.name = "ProfilerStep#" + std::to_string(k);
    s.start_ns = t;
    s.dur_ns = step_ms[k] * kMs;
    s.marker = true;
    s.action = k < actions.size() ? actions[k] : StepAction::kRecord;
    t += s.dur_ns;
  }
  return p;
}

const RankStepRow& row_of(const RankReport& r, int rank) {
  for (const RankStepRow& row : r.rows) {
    if (row.rank == rank) return row;
  }
  FAIL("no row for rank " << rank);
  return r.rows.front();
}

}  // namespace

TEST_CASE("rank steps: median") {
  CHECK(median_ns({}) == 0);
  CHECK(median_ns({5}) == 5);
  CHECK(median_ns({9, 1, 5}) == 5);
  CHECK(median_ns({4, 1, 3, 2}) == 2);  // (2 + 3) / 2 in integers
  CHECK(median_ns({10, 20}) == 15);
}

TEST_CASE("rank steps: one row per rank, statistics, the slow rank flagged") {
  Run run;
  run.processes.push_back(ranked(10, 0, {10, 10, 10, 10}));
  run.processes.push_back(ranked(11, 1, {20, 22, 18, 20}, 1));  // twice as slow
  run.processes.push_back(ranked(12, 2, {10, 12, 8, 10}, 2));
  const RankReport r = compute_rank_report(run, 10.0);
  REQUIRE(r.rows.size() == 3);
  CHECK(r.by_rank);
  CHECK(r.rows[0].rank == 0);
  CHECK(r.rows[1].rank == 1);
  CHECK(r.rows[2].rank == 2);
  const RankStepRow& slow = row_of(r, 1);
  CHECK(slow.steps == 4);
  CHECK(slow.mean_ns == 20 * kMs);
  CHECK(slow.median_ns == 20 * kMs);
  CHECK(slow.min_ns == 18 * kMs);
  CHECK(slow.max_ns == 22 * kMs);
  CHECK(slow.total_ns == 80 * kMs);
  CHECK(slow.pids == std::vector<int>{11});
  CHECK(slow.label == "1");
  CHECK(r.median_mean_ns == 10 * kMs);
  CHECK(slow.vs_fastest == doctest::Approx(2.0));
  CHECK(slow.vs_median == doctest::Approx(2.0));
  CHECK(slow.slowest);
  CHECK(slow.straggler);
  for (int rank : {0, 2}) {
    CHECK_FALSE(row_of(r, rank).slowest);
    CHECK_FALSE(row_of(r, rank).straggler);
    CHECK(row_of(r, rank).vs_fastest == doctest::Approx(1.0));
  }
  // Per step: rank 1 is the slowest of every step.
  REQUIRE(r.steps.size() == 4);
  for (const StepSpread& s : r.steps) {
    CHECK(s.rows == 3);
    CHECK(r.rows[s.slowest_row].rank == 1);
  }
  CHECK(r.steps[2].fastest_ns == 8 * kMs);
  CHECK(r.steps[2].median_ns == 10 * kMs);
  CHECK(r.steps[2].slowest_ns == 18 * kMs);
  CHECK(r.steps[2].vs_median == doctest::Approx(1.8));
  CHECK(slow.slowest_steps == 4);
  CHECK(row_of(r, 0).slowest_steps == 0);
  CHECK(r.warnings.empty());
}

TEST_CASE("rank steps: the threshold decides who is a straggler; equal ranks flag nobody") {
  Run run;
  run.processes.push_back(ranked(1, 0, {100}));
  run.processes.push_back(ranked(2, 1, {100}));
  run.processes.push_back(ranked(3, 2, {109}));
  RankReport r = compute_rank_report(run, 10.0);
  CHECK(row_of(r, 2).slowest);          // the slowest, but within 10% of the median
  CHECK_FALSE(row_of(r, 2).straggler);
  r = compute_rank_report(run, 5.0);
  CHECK(row_of(r, 2).straggler);
  CHECK(r.threshold_pct == 5.0);

  Run same;
  same.processes.push_back(ranked(1, 0, {50, 50}));
  same.processes.push_back(ranked(2, 1, {50, 50}));
  r = compute_rank_report(same, 10.0);
  for (const RankStepRow& row : r.rows) {
    CHECK_FALSE(row.slowest);
    CHECK_FALSE(row.straggler);
    CHECK(row.slowest_steps == 0);
  }

  Run alone;
  alone.processes.push_back(ranked(1, 0, {50, 80}));
  r = compute_rank_report(alone, 10.0);
  REQUIRE(r.rows.size() == 1);
  CHECK_FALSE(r.rows[0].slowest);
  CHECK(r.steps.empty());  // a step needs two rows to compare
}

TEST_CASE("rank steps: only recorded steps; marked steps win over a helper's implicit step") {
  Run run;
  using A = StepAction;
  run.processes.push_back(ranked(1, 0, {500, 10, 10}, 0, {A::kWarmup, A::kRecord, A::kRecordAndSave}));
  run.processes.push_back(ranked(2, 1, {500, 30, 30}, 1, {A::kWarmup, A::kRecord, A::kRecordAndSave}));
  // A helper of rank 1 (same input) without markers: one implicit step of the whole process.
  Process helper;
  helper.pid = 3;
  helper.rank = 1;
  helper.input = 1;
  helper.worker = "h1_3";
  helper.steps.push_back(Step{.index = 0, .start_ns = 0, .dur_ns = 9000 * kMs});
  run.processes.push_back(helper);
  const RankReport r = compute_rank_report(run, 10.0);
  REQUIRE(r.rows.size() == 2);
  CHECK(row_of(r, 0).steps == 2);
  CHECK(row_of(r, 0).mean_ns == 10 * kMs);
  CHECK(row_of(r, 1).steps == 2);
  CHECK(row_of(r, 1).mean_ns == 30 * kMs);
  CHECK(row_of(r, 1).pids == std::vector<int>{2});
  REQUIRE(r.steps.size() == 2);
  CHECK(r.steps[0].index == 1);
  CHECK(r.steps[1].index == 2);
}

TEST_CASE("rank steps: workers without a rank; the same rank in two inputs; world size checks") {
  Run plain;
  plain.processes.push_back(ranked(7, std::nullopt, {10, 10}));
  plain.processes.push_back(ranked(8, std::nullopt, {40, 40}, 1));
  RankReport r = compute_rank_report(plain, 10.0);
  REQUIRE(r.rows.size() == 2);
  CHECK_FALSE(r.by_rank);
  CHECK(r.rows[1].label == "h1_8");
  CHECK(r.rows[1].slowest);
  CHECK(r.rows[1].vs_fastest == doctest::Approx(4.0));
  CHECK(r.warnings.empty());

  Run twice;
  twice.inputs = {RunInput{.label = "a"}, RunInput{.label = "b"}};
  twice.processes.push_back(ranked(1, 0, {10}, 0));
  twice.processes.push_back(ranked(2, 0, {10}, 1));
  for (Process& p : twice.processes) p.world_size = 4;
  r = compute_rank_report(twice, 10.0);
  REQUIRE(r.rows.size() == 2);
  CHECK(r.rows[0].label == "0@h0_1");
  CHECK(r.rows[1].label == "0@h1_2");
  REQUIRE(r.warnings.size() == 2);
  CHECK(r.warnings[0] == "rank 0 is in 2 inputs (a, b); each keeps a row of its own");
  CHECK(r.warnings[1] == "no recorded steps from ranks 1, 2, 3 of world size 4");

  Run disagree;
  disagree.processes.push_back(ranked(1, 0, {10}, 0));
  disagree.processes.push_back(ranked(2, 1, {10}, 1));
  disagree.processes[0].world_size = 2;
  disagree.processes[1].world_size = 4;
  r = compute_rank_report(disagree, 10.0);
  REQUIRE(r.warnings.size() == 1);
  CHECK(r.warnings[0] == "the processes disagree on the world size (2, 4)");
}

TEST_CASE("merge: ops add up, processes keep their input, repeated runs are refused") {
  // A run of one process on host "node" with `calls` steps of 90 ns from `start`, each
  // holding a "work" range; every run names its worker node_1: traces must stay apart.
  auto analysed = [](int pid, uint64_t start, int calls) {
    test::Slots s;
    s.str(100, "work");
    for (uint32_t k = 0; k < static_cast<uint32_t>(calls); ++k) {
      const uint64_t t = start + k * 100;
      s.str(k + 1, "ProfilerStep#" + std::to_string(k)).push(k + 1, t).push(100, t + 10).pop(t + 50).pop(t + 90);
    }
    const std::string path = test::Captures()
                                 .run_info(R"({"command":["./train"],"host":"node"})")
                                 .process(pid, {"TORCHPROF_WORKER_NAME=node_1"}, "node")
                                 .frame(static_cast<uint32_t>(pid), s)
                                 .save("merge_" + std::to_string(pid) + "_" + std::to_string(start) + ".tprof");
    return analyse_capture_file(path, AnalysisOptions{});
  };
  std::vector<Run> runs;
  runs.push_back(analysed(1, 1000, 3));
  runs.push_back(analysed(2, 5000, 4));
  const Run merged = merge_runs(std::move(runs), {{"out_0", "out_0/capture.tprof"}, {"out_1", "out_1/capture.tprof"}});
  REQUIRE(merged.inputs.size() == 2);
  CHECK(merged.inputs[1].label == "out_1");
  CHECK(merged.inputs[1].processes == 1);
  REQUIRE(merged.processes.size() == 2);
  CHECK(merged.processes[0].input == 0);
  CHECK(merged.processes[1].input == 1);
  CHECK(merged.processes[0].worker == "node_1");
  CHECK(merged.processes[1].worker == "node_1_in1");
  uint64_t work_calls = 0;
  uint64_t step_calls = 0;
  for (const OpStats& op : merged.ops) {
    if (op.name == "work") work_calls = op.calls;
    if (op.name == "ProfilerStep*") step_calls = op.calls;
  }
  CHECK(work_calls == 7);
  CHECK(step_calls == 7);

  std::vector<Run> again;
  again.push_back(analysed(1, 1000, 3));
  again.push_back(analysed(1, 1000, 3));
  CHECK_THROWS_WITH_AS(merge_runs(std::move(again), {{"a", "a"}, {"b", "b"}}),
                       "a and b hold the same run (host node, pid 1): give each run once", InputError);
}

TEST_CASE("rank table: text flags the slow rank; JSON and summary.json carry the rows") {
  Run run;
  run.inputs = {RunInput{.label = "out_0"}, RunInput{.label = "out_1"}};
  run.processes.push_back(ranked(10, 0, {10, 10}, 0));
  run.processes.push_back(ranked(11, 1, {30, 30}, 1));
  const RankReport r = compute_rank_report(run, 10.0);
  const std::string text = render_rank_text(r, 100);
  std::string slow_line;
  std::string fast_line;
  for (size_t pos = 0, end; pos < text.size(); pos = end + 1) {
    end = text.find('\n', pos);
    const std::string line = text.substr(pos, end - pos);
    if (line.starts_with("Slowest")) continue;  // the verdict names the worker and mean too
    if (line.find("h1_11") != std::string::npos && line.find("30.000ms") != std::string::npos) slow_line = line;
    if (line.find("h0_10") != std::string::npos && line.find("10.000ms") != std::string::npos) fast_line = line;
  }
  CHECK(slow_line.find("<< slowest, straggler") != std::string::npos);
  CHECK(slow_line.find("3.00x") != std::string::npos);
  CHECK(fast_line.find("<<") == std::string::npos);
  CHECK(text.find("Slowest rank: 1 (h1_11), mean step 30.000ms, 3.00x the fastest rank") != std::string::npos);
  CHECK(text.find("Slowest rank per step") != std::string::npos);
  CHECK(render_rank_text(r, 1).find("1 more steps in summary.json") != std::string::npos);

  const nlohmann::json j = nlohmann::json::parse(render_summary_json(run, {}, "", &r));
  REQUIRE(j["ranks"]["rows"].size() == 2);
  CHECK(j["ranks"]["rows"][1]["rank"] == 1);
  CHECK(j["ranks"]["rows"][1]["straggler"] == true);
  CHECK(j["ranks"]["slowest"] == nlohmann::json::array({"1"}));
  CHECK(j["ranks"]["steps"][0]["slowest_rank"] == 1);
  CHECK(j["ranks"]["steps"][0]["dur_ns"] == nlohmann::json::array({10 * kMs, 30 * kMs}));
  CHECK(j["inputs"][1]["path"] == "out_1");
  CHECK(j["processes"][1]["input"] == 1);
  CHECK(j["processes"][1]["rank"] == 1);

  const std::string csv = render_rank_csv(r);
  CHECK(csv.find("\n1,h1_11,h1,1,2,30000.000,30000.000,30000.000,30000.000,3.0000,1.5000,2,1,1\n") !=
        std::string::npos);

  // A single run's summary.json has no merged keys.
  Run single;
  single.processes.push_back(ranked(10, 0, {10}));
  const nlohmann::json s = nlohmann::json::parse(render_summary_json(single));
  CHECK_FALSE(s.contains("ranks"));
  CHECK_FALSE(s.contains("inputs"));
  CHECK_FALSE(s["processes"][0].contains("input"));
  CHECK(s["processes"][0]["world_size"].is_null());
}

namespace {

// Four steps of 100 ms on every rank, each holding one all_reduce that ends at the same
// moment everywhere (+ the rank's clock offset); `late` starts it `late_ms` after the others.
Process ddp_rank(int pid, int rank, int late, int64_t late_ms, int64_t offset_ns, CollectiveSource source) {
  Process p = ranked(pid, rank, {100, 100, 100, 100}, rank);
  for (Step& s : p.steps) s.start_ns += offset_ns;  // the same clock as its collectives
  for (int k = 0; k < 4; ++k) {
    const int64_t end = 1000 + (k + 1) * 100 * kMs - 5 * kMs + offset_ns;
    const int64_t arrive = rank == late ? end - 10 * kMs : end - 10 * kMs - late_ms * kMs;
    const char* name = source == CollectiveSource::kBackend ? "gloo:all_reduce" : "c10d::allreduce_";
    p.collectives.push_back({Name(name), arrive, end, 9610, source});
    // c10d's op on the calling thread returns at once: no wait to see in it.
    if (source == CollectiveSource::kBackend) {
      p.collectives.push_back({Name("c10d::allreduce_"), arrive - 1000, arrive, -1, CollectiveSource::kC10dOp});
    }
  }
  return p;
}

}  // namespace

TEST_CASE("rank collectives: the rank the others wait for is the straggler, with step times equal") {
  Run run;
  for (int r = 0; r < 4; ++r) run.processes.push_back(ddp_rank(20 + r, r, /*late=*/2, 40, 0, CollectiveSource::kBackend));
  const RankReport report = compute_rank_report(run, 10.0);
  CHECK(report.straggler_by == "collective waits");
  for (const RankStepRow& row : report.rows) {
    REQUIRE(row.collectives.has_value());
    CHECK(row.collectives->source == "backend records");
    CHECK(row.collectives->matched == 4);
    CHECK(row.straggler == (row.rank == 2));
    CHECK(row.mean_ns == 100 * kMs);  // step time cannot tell
  }
  const RankCollectives& late = *row_of(report, 2).collectives;
  const RankCollectives& other = *row_of(report, 0).collectives;
  CHECK(late.last_arrivals == 4);
  CHECK(late.wait_ns == 0);
  CHECK(other.wait_ns == 4 * 40 * kMs);
  CHECK(late.waited_on_ns == 3 * 4 * 40 * kMs);
  CHECK(late.late_ns == 4 * 40 * kMs);  // the median of four starts: the three early ones
  CHECK(other.late_ns == 0);
  REQUIRE(late.by_name.size() == 1);
  CHECK(late.by_name[0].name == "gloo:all_reduce");
  CHECK(late.by_name[0].calls == 4);
  CHECK(late.by_name[0].in_elems == 4 * 9610);
  const std::string text = render_rank_text(report, 10);
  CHECK(text.find("Straggler: rank 2 (h2_22): 40.000ms per step later than the median rank") != std::string::npos);
  CHECK(text.find("arrived last in 4 of 4") != std::string::npos);
  const nlohmann::ordered_json j = rank_report_json(report);
  CHECK(j["straggler_by"] == "collective waits");
  CHECK(j["stragglers"] == nlohmann::ordered_json::array({"2"}));
  CHECK(j["rows"][2]["collectives"]["waited_on_ns"] == 3 * 4 * 40 * kMs);
}

TEST_CASE("rank collectives: clock offsets between hosts are taken from the ends") {
  Run run;
  // Rank 3's host is 2.5 s ahead: uncorrected, it would arrive last every time.
  const int64_t offsets[] = {0, 0, 0, 2'500 * kMs};
  for (int r = 0; r < 4; ++r) {
    run.processes.push_back(ddp_rank(20 + r, r, /*late=*/1, 30, offsets[r], CollectiveSource::kC10dOp));
  }
  const RankReport report = compute_rank_report(run, 10.0);
  CHECK(report.straggler_by == "collective waits");
  CHECK(row_of(report, 3).collectives->clock_offset_ns == 2'500 * kMs);
  CHECK(row_of(report, 1).straggler);
  CHECK_FALSE(row_of(report, 3).straggler);
  CHECK(row_of(report, 1).collectives->source == "c10d ops");
}

TEST_CASE("rank collectives: no straggler when nobody keeps the others waiting long") {
  Run run;
  for (int r = 0; r < 4; ++r) run.processes.push_back(ddp_rank(20 + r, r, /*late=*/0, 1, 0, CollectiveSource::kBackend));
  const RankReport report = compute_rank_report(run, 10.0);
  CHECK(report.straggler_by == "collective waits");
  for (const RankStepRow& row : report.rows) CHECK_FALSE(row.straggler);  // 1 ms of a 100 ms step
  CHECK(render_rank_text(report, 10).find("No straggler: no rank came to the collectives later") != std::string::npos);
}

TEST_CASE("rank collectives: names as Kineto gives them, elements from shapes") {
  CHECK(kineto_collective_name("gloo:all_reduce") == "allreduce");
  CHECK(kineto_collective_name("nccl:_all_gather_base") == "_allgather_base");
  CHECK(kineto_collective_name("c10d::allreduce_") == "allreduce");
  CHECK(kineto_collective_name("c10d::barrier") == "barrier");
  CHECK(kineto_collective_name("aten::add") == "");
  CHECK(shape_elements("[[9610]]") == 9610);
  CHECK(shape_elements("[[2, 3], [4], []]") == 10);
  CHECK(shape_elements("[[], [], []]") == -1);
  CHECK(shape_elements("") == -1);
  CHECK(is_nccl_kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"));
  CHECK(is_nccl_kernel("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)"));
  CHECK_FALSE(is_nccl_kernel("void at::native::vectorized_elementwise_kernel"));
}

}  // namespace torchprof

namespace torchprof {

TEST_CASE("a collective's dtype is its first tensor's, as c10 names the ScalarType") {
  CHECK(collective_dtype(R"(["float"])") == "Float");
  CHECK(collective_dtype(R"(["", "Scalar", "c10::BFloat16", "float"])") == "BFloat16");
  CHECK(collective_dtype(R"(["ScalarList", "long int"])") == "Long");
  CHECK(collective_dtype(R"(["c10::Float8_e4m3fn"])") == "Float8_e4m3fn");
  CHECK(collective_dtype(R"(["Scalar", ""])").empty());
  CHECK(collective_dtype("").empty());
  CHECK(collective_dtype(R"(["unterminated)").empty());
}

}  // namespace torchprof
