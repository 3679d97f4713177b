// The engine against the reference model (reference_analysis.h) on random captures:
// several processes and threads, nested ranges in two domains, marks, step ranges,
// start/end ranges, CUDA API calls and GPU records, names defined late or never, lost
// frames, unterminated ranges, ties. Wherever interval nesting is unambiguous the
// engine's table must be the reference's, row for row and in the same order; on every
// capture the table must not depend on what else the engine was asked to feed.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <random>
#include <string>

#include "analysis/analysis.h"
#include "analysis/engine.h"
#include "analysis/schedule.h"
#include "analysis_capture_builder.h"
#include "engine_test_util.h"
#include "reference_analysis.h"

namespace torchprof {

using capture::ChunkType;
using test::CaptureBuilder;
using test::Slots;
using wire::Kind;

namespace {

constexpr uint64_t kMono = 1000;
constexpr uint64_t kReal = 1'700'000'000'000'000'000;

std::string hello(int pid) { return test::hello_body(pid, 1, kMono, kReal, "/bin/app", {"app"}, "node1", {}); }

// Writes each thread's frames in order, the threads interleaved at random; `tid_of`
// names a thread's index, `lose` drops a frame (its sequence number then shows a gap).
void write_interleaved(CaptureBuilder& b, uint32_t conn, const std::vector<std::vector<Slots>>& frames,
                       const std::function<int(int)>& pick, const std::function<uint32_t(size_t)>& tid_of,
                       const std::function<bool(uint32_t)>& lose) {
  std::vector<size_t> next(frames.size(), 0);
  size_t left = 0;
  for (const auto& f : frames) left += f.size();
  while (left > 0) {
    const auto t = static_cast<size_t>(pick(static_cast<int>(frames.size())));
    if (next[t] >= frames[t].size()) continue;
    const auto seq = static_cast<uint32_t>(next[t]);
    if (!lose(seq)) b.chunk(ChunkType::kFrame, conn, test::frame_body(tid_of(t), seq, frames[t][next[t]]));
    ++next[t];
    --left;
  }
}

// The random captures' outcome; `kind` counts the compared ones with a row of that kind.
struct RandomCaptures {
  explicit RandomCaptures(std::string row_kind) : kind(std::move(row_kind)) {}

  void check(int c, const std::string& path, const AnalysisOptions& options) {
    INFO("capture " << c);
    EngineOutputs everything;
    everything.timeline = 100;
    everything.stats = true;
    everything.folded = true;
    const Run full = analyse_capture_file(path, options, everything);
    const Run table = analyse_capture_file(path, options, table_only_outputs());
    CHECK(test::table_text(table.ops) == test::table_text(full.ops));
    const test::ReferenceResult reference = test::reference_analysis(path, options);
    if (!reference.unambiguous) {
      ++ambiguous[reference.ambiguity];
      return;
    }
    ++compared;
    const std::vector<std::string> engine_rows = test::table_text(full.ops);
    const std::vector<std::string> reference_rows = test::table_text(reference.ops);
    std::string first_difference;
    for (size_t i = 0; i < std::max(engine_rows.size(), reference_rows.size()) && first_difference.empty(); ++i) {
      const std::string a = i < engine_rows.size() ? engine_rows[i] : "(none)";
      const std::string b = i < reference_rows.size() ? reference_rows[i] : "(none)";
      if (a != b) first_difference = "row " + std::to_string(i) + ": engine " + a + " | reference " + b;
    }
    INFO(first_difference);
    CHECK(engine_rows == reference_rows);
    if (engine_rows != reference_rows && std::getenv("TORCHPROF_KEEP_MISMATCH") != nullptr) {
      std::filesystem::copy_file(path, "/tmp/mismatch_" + std::to_string(c) + ".tprof",
                                 std::filesystem::copy_options::overwrite_existing);
    }
    for (const OpStats& op : full.ops) {
      if (op.kind == kind && op.calls > 0) {
        ++with_kind;
        break;
      }
    }
  }

  std::string summary(int captures) const {
    std::string out = "compared " + std::to_string(compared) + " of " + std::to_string(captures) + ", " +
                      std::to_string(with_kind) + " with " + kind + " rows";
    for (const auto& [why, count] : ambiguous) out += "; " + std::to_string(count) + " " + why;
    return out;
  }

  std::string kind;
  int compared = 0;
  int with_kind = 0;
  std::map<std::string, int> ambiguous;
};

}  // namespace

// Random captures: several processes and threads, nested ranges in two domains, marks,
// step ranges, names defined late or never, lost frames, unterminated ranges, ties.
TEST_CASE("engine: random NVTX captures give the reference's table") {
  std::mt19937 rng(20261130);
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<uint32_t>(n)); };
  RandomCaptures outcome("cpu_op");
  const int kCaptures = 150;
  for (int c = 0; c < kCaptures; ++c) {
    CaptureBuilder b;
    const int processes = 1 + pick(2);
    for (int p = 0; p < processes; ++p) {
      const auto conn = static_cast<uint32_t>(p + 1);
      b.chunk(ChunkType::kHello, conn, hello(100 + p));
      const int threads = 1 + pick(3);
      std::vector<std::vector<Slots>> frames(static_cast<size_t>(threads));
      const int names = 2 + pick(6);
      for (int t = 0; t < threads; ++t) {
        uint64_t ts = 1000 + static_cast<uint64_t>(pick(50));
        std::vector<uint16_t> open;  // domains of the open ranges
        Slots cur;
        if (t == 0) {
          // Plain names, and messages of PyTorch ops (emit_nvtx's, the bootstrap's,
          // malformed ones); domain 1 is sometimes the bootstrap's ops domain.
          static const char* const kOps[] = {"aten::mm, seq = 4, sizes = [[2, 3], [3, 4]]",
                                             "aten::mm, seq = 5, sizes = [[1, 1], [1, 1]]",
                                             "aten::add, stack = a.py(3): f; b.py(9): g",
                                             "aten::add, seq = x",
                                             "ProfilerStep#9, seq = 2"};
          for (int n = 1; n <= names; ++n) {
            if (pick(8) == 0) continue;
            std::string text = n <= 2 ? "ProfilerStep#" + std::to_string(n) : "op" + std::to_string(n % 4);
            if (n > 2 && pick(3) == 0) text = kOps[pick(5)];
            cur.str(static_cast<uint32_t>(n), text);
          }
          if (pick(2) == 0) {
            cur.str(static_cast<uint32_t>(names + 2), pick(2) == 0 ? "torchprof.ops" : "mine");
            cur.rec(Kind::kDomain, static_cast<uint32_t>(names + 2), 0, 0, 0, 1);
          }
        }
        int step = 0;
        const int records = 5 + pick(60);
        for (int r = 0; r < records; ++r) {
          ts += static_cast<uint64_t>(pick(4000) == 0 ? 0 : 1 + pick(20));
          const int what = pick(10);
          if (what < 4 || open.empty()) {
            const uint16_t domain = pick(6) == 0 ? 1 : 0;
            uint32_t name = static_cast<uint32_t>(3 + pick(names));
            if (t == 0 && open.empty() && pick(3) == 0) name = static_cast<uint32_t>(1 + (step++ % 2));
            cur.push(name, ts, domain);
            open.push_back(domain);
          } else if (what < 8) {
            // Mostly the innermost range's domain; sometimes the other one.
            const uint16_t domain = pick(300) == 0 ? static_cast<uint16_t>(1 - open.back()) : open.back();
            cur.pop(ts, domain);
            for (auto it = open.rbegin(); it != open.rend(); ++it) {
              if (*it == domain) {
                open.erase(std::next(it).base());
                break;
              }
            }
          } else if (what == 8) {
            cur.rec(Kind::kMark, static_cast<uint32_t>(pick(30) == 0 ? 1 : 3 + pick(names - 1)), ts);
          } else {
            frames[static_cast<size_t>(t)].push_back(cur);
            cur = Slots();
          }
        }
        if (pick(4) == 0) cur.rec(Kind::kDropped, 0, 0, static_cast<uint64_t>(pick(9)), 100);
        frames[static_cast<size_t>(t)].push_back(cur);
      }
      // A late definition from thread 1 (when there is one), interleaved frames, a lost one.
      if (threads > 1) frames[1].back().str(static_cast<uint32_t>(names + 1), "late");
      write_interleaved(
          b, conn, frames, pick, [](size_t t) { return static_cast<uint32_t>(t + 1); },
          [&](uint32_t seq) { return pick(25) == 0 && seq > 0; });
      if (pick(3) != 0) b.chunk(ChunkType::kBye, conn, test::bye_body(wire::ExitKind::kExit, 0, 50, 3, 9000));
      b.chunk(ChunkType::kConnClosed, conn, "");
    }
    const std::string path = b.save("stream_random.tprof");
    AnalysisOptions options;
    if (pick(2) == 0) options.schedule = parse_schedule("wait=1,warmup=1,active=1", nullptr, nullptr);
    options.group_by_input_shape = pick(2) == 0;
    outcome.check(c, path, options);
  }
  // The property holds on a good share of the captures, not only on refusals.
  CHECK(outcome.compared >= kCaptures / 4);
  CHECK(outcome.with_kind >= kCaptures / 10);
  MESSAGE("random NVTX captures: " << outcome.summary(kCaptures));
}

// Random captures with start/end ranges: steps written whole once they ended (meeting,
// overlapping or apart by a few nanoseconds, in the bootstrap's domain or the default
// one), ranges started and ended as the thread goes (some ended on another thread,
// whose frames may come first, some never), ends without a start, among ranges, marks
// and API calls with their kernels.
TEST_CASE("engine: random start/end captures give the reference's table") {
  std::mt19937 rng(20261130);
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<uint32_t>(n)); };
  RandomCaptures outcome("nvtx");
  const int kCaptures = 150;
  int with_steps = 0;
  for (int c = 0; c < kCaptures; ++c) {
    CaptureBuilder b;
    b.chunk(ChunkType::kHello, 1, hello(100));
    const int threads = 1 + pick(2);
    // One frame list per thread, then the activity thread's, then a thread that only
    // ends ranges others started.
    std::vector<std::vector<Slots>> frames(static_cast<size_t>(threads) + 2);
    Slots activity;
    Slots ender;
    uint64_t next_id = 1;
    uint64_t next_corr = 1;
    bool steps = false;
    for (int t = 0; t < threads; ++t) {
      uint64_t ts = 1000 + static_cast<uint64_t>(pick(50));
      Slots cur;
      if (t == 0) {
        // The steps' names have the largest ids: a step's range may open before any
        // record naming it is read.
        cur.str(31, "ProfilerStep#0").str(32, "ProfilerStep#1").str(3, "fwd").str(4, "bwd").str(5, "load")
            .str(6, "cudaLaunchKernel").str(7, "_Z4gemmv").str(20, "torchprof").rec(Kind::kDomain, 20, 0, 0, 0, 1);
      }
      // What is open, innermost last: 0 for a push, else a start/end range's id.
      std::vector<uint64_t> open;
      uint64_t step_start = ts;
      uint32_t step = 0;
      const uint16_t step_domain = pick(3) == 0 ? 0 : 1;
      std::vector<uint64_t> started;  // start/end ranges of this thread not ended yet
      auto close_open = [&] {  // innermost first
        for (; !open.empty(); open.pop_back()) {
          ts += static_cast<uint64_t>(1 + pick(5));
          if (open.back() == 0) {
            cur.pop(ts);
          } else {
            cur.rec(Kind::kEnd, 0, ts, open.back());
            started.erase(std::find(started.begin(), started.end(), open.back()));
          }
        }
        ts += static_cast<uint64_t>(5 + pick(5));
      };
      const int records = 10 + pick(70);
      for (int r = 0; r < records; ++r) {
        ts += static_cast<uint64_t>(pick(3000) == 0 ? 0 : 1 + pick(20));
        const int what = pick(14);
        if (what < 3 || (open.empty() && what < 5)) {
          cur.push(static_cast<uint32_t>(3 + pick(2)), ts);
          open.push_back(0);
        } else if (what < 5 && (open.back() == 0 || pick(40) == 0)) {
          cur.pop(ts);
          auto push = std::find(open.rbegin(), open.rend(), 0);
          if (push != open.rend()) open.erase(std::next(push).base());
        } else if (what < 7) {
          const uint64_t corr = next_corr++;
          cur.api(6, ts, ts + 2 + static_cast<uint64_t>(pick(10)), corr);
          if (pick(3) != 0) activity.kernel(7, ts + 5, ts + 5 + static_cast<uint64_t>(pick(90)), corr, 7);
          ts += 12;
        } else if (what == 7) {
          // A step ends now, mostly with what it holds; the bootstrap writes it whole.
          // Its start is the last one's end, as the two clocks' distance, read twice,
          // places it: a few nanoseconds either way, now and then more.
          if (pick(60) != 0) close_open();
          uint64_t start = step > 0 ? step_start + static_cast<uint64_t>(pick(7)) - 3 : step_start;
          if (step > 0 && pick(8) == 0) start = step_start - static_cast<uint64_t>(pick(30));
          const uint64_t id = next_id++;
          cur.rec(Kind::kStart, 31 + step % 2, start, id, 0, step_domain).rec(Kind::kEnd, 0, ts, id, 0, step_domain);
          step_start = ts;
          ts += 4;  // what comes next is a few nanoseconds away, mostly
          ++step;
          steps = true;
        } else if (what == 8) {
          started.push_back(next_id);
          open.push_back(next_id);
          cur.rec(Kind::kStart, 5, ts, next_id++);
        } else if (what == 9 && !started.empty()) {
          // The innermost when it is one, on this thread; else any, on another thread
          // (and now and then here, crossing what is open).
          uint64_t id = open.back();
          const bool elsewhere = pick(4) == 0 || (id == 0 && pick(30) != 0);
          if (id == 0 || elsewhere) id = started[static_cast<size_t>(pick(static_cast<int>(started.size())))];
          if (elsewhere) {
            ender.rec(Kind::kEnd, 0, ts + static_cast<uint64_t>(pick(40)), id);
          } else {
            cur.rec(Kind::kEnd, 0, ts, id);
          }
          started.erase(std::find(started.begin(), started.end(), id));
          open.erase(std::find(open.begin(), open.end(), id));
        } else if (what == 10) {
          cur.rec(Kind::kMark, 4, ts);
        } else if (what == 11 && pick(5) == 0) {
          cur.rec(Kind::kEnd, 0, ts, 100000 + static_cast<uint64_t>(pick(5)));  // no start
        } else if (what == 12) {
          frames[static_cast<size_t>(t)].push_back(cur);
          cur = Slots();
        }
      }
      if (pick(10) != 0) close_open();  // else the thread stops with what it left open
      frames[static_cast<size_t>(t)].push_back(cur);
    }
    frames[static_cast<size_t>(threads)].push_back(activity);
    frames.back().push_back(ender);
    with_steps += steps ? 1 : 0;
    write_interleaved(
        b, 1, frames, pick,
        [&](size_t t) { return t < static_cast<size_t>(threads) ? static_cast<uint32_t>(t + 1) : 90u + static_cast<uint32_t>(t); },
        [](uint32_t) { return false; });
    b.chunk(ChunkType::kBye, 1, test::bye_body(wire::ExitKind::kExit, 0, 50, 0, 90000));
    const std::string path = b.save("stream_random_start_end.tprof");
    AnalysisOptions options;
    if (pick(3) == 0) {
      options.step_marker = "^never$";
    } else if (pick(3) == 0) {
      options.schedule = parse_schedule("wait=1,warmup=0,active=1", nullptr, nullptr);
    }
    outcome.check(c, path, options);
  }
  CHECK(outcome.compared >= kCaptures / 3);
  MESSAGE("random start/end captures: " << outcome.summary(kCaptures) << "; " << with_steps << " with steps");
}

// Random captures with CUDA API calls (runtime calls holding driver calls, calls under
// ranges and outside them) and the activity thread's GPU records: kernels, graph
// launches (several kernels per call), copies, memsets, syncs, memory, records of
// unknown calls and of no call, written before or after the calls they name.
TEST_CASE("engine: random GPU captures give the reference's table") {
  std::mt19937 rng(20261201);
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<uint32_t>(n)); };
  RandomCaptures outcome("kernel");
  const int kCaptures = 150;
  for (int c = 0; c < kCaptures; ++c) {
    CaptureBuilder b;
    b.chunk(ChunkType::kHello, 1, hello(100));
    const int threads = 1 + pick(2);
    std::vector<std::vector<Slots>> frames(static_cast<size_t>(threads) + 1);  // the last: activity
    Slots names;
    names.str(1, "ProfilerStep#1").str(2, "ProfilerStep#2").str(3, "fwd").str(4, "bwd")
        .str(10, "cudaLaunchKernel").str(11, "cuLaunchKernel").str(12, "cudaMemcpyAsync")
        .str(20, "_Z4gemmv").str(21, "relu_kernel");
    std::vector<uint64_t> correlations;
    uint64_t next_corr = 1;
    Slots activity;
    auto gpu_for = [&](uint64_t corr, uint64_t at) {
      const int n = pick(5) == 0 ? 2 + pick(3) : 1;  // a graph launch now and then
      for (int k = 0; k < n; ++k) {
        const uint64_t start = at + 5 + static_cast<uint64_t>(pick(200));
        const uint64_t end = start + static_cast<uint64_t>(pick(50));
        switch (pick(6)) {
          case 0: activity.copy(Kind::kMemcpy, start, end, corr, 64, 7, 1, 1, 3); break;
          case 1: activity.copy(Kind::kMemset, start, end, corr, 64, 7, 0, 0, 3); break;
          case 2: activity.with_extra(Kind::kSync, 0, start, end, corr, 0, wire::GpuSyncExtra{}); break;
          case 3: activity.memory(pick(2) == 0, start, 0x1000, 64, corr); break;
          default: activity.kernel(static_cast<uint32_t>(20 + pick(2)), start, end, corr, 7); break;
        }
      }
      if (pick(4) == 0) {
        frames.back().push_back(activity);
        activity = Slots();
      }
    };
    for (int t = 0; t < threads; ++t) {
      uint64_t ts = 1000 + static_cast<uint64_t>(pick(50));
      int depth = 0;
      int step = 0;
      Slots cur = t == 0 ? names : Slots();
      const int records = 5 + pick(60);
      for (int r = 0; r < records; ++r) {
        ts += static_cast<uint64_t>(1 + pick(30));
        const int what = pick(12);
        if (what < 3 || (depth == 0 && what < 6)) {
          uint32_t name = static_cast<uint32_t>(3 + pick(2));
          if (t == 0 && depth == 0 && pick(2) == 0) name = static_cast<uint32_t>(1 + (step++ % 2));
          cur.push(name, ts);
          ++depth;
        } else if (what < 6) {
          cur.pop(ts);
          --depth;
        } else if (what < 10) {
          const uint64_t enter = ts;
          const uint64_t exit = enter + 2 + static_cast<uint64_t>(pick(20));
          const uint64_t corr = pick(15) == 0 ? 0 : next_corr++;
          if (pick(3) == 0) {  // a runtime call that makes a driver call, written first
            const uint64_t inner = next_corr++;
            cur.api(11, enter + 1, exit - 1, inner, 307, Kind::kCudaDriver);
            if (pick(2) == 0) gpu_for(inner, enter);
          }
          cur.api(static_cast<uint32_t>(pick(4) == 0 ? 12 : 10), enter, exit, corr);
          if (corr != 0 && pick(6) != 0) gpu_for(corr, enter);
          ts = exit + static_cast<uint64_t>(pick(3));
        } else if (what == 10) {
          if (pick(3) == 0) gpu_for(pick(2) == 0 ? 0 : 100000 + static_cast<uint64_t>(pick(10)), ts);
        } else {
          frames[static_cast<size_t>(t)].push_back(cur);
          cur = Slots();
        }
      }
      frames[static_cast<size_t>(t)].push_back(cur);
    }
    frames.back().push_back(activity);
    // Frames interleaved at random: GPU records may come before their calls.
    write_interleaved(
        b, 1, frames, pick, [&](size_t t) { return t + 1 == frames.size() ? 99u : static_cast<uint32_t>(t + 1); },
        [](uint32_t) { return false; });
    b.chunk(ChunkType::kBye, 1, test::bye_body(wire::ExitKind::kExit, 0, 50, 0, 90000));
    const std::string path = b.save("stream_random_gpu.tprof");
    AnalysisOptions options;
    if (pick(2) == 0) options.schedule = parse_schedule("wait=1,warmup=0,active=1", nullptr, nullptr);
    outcome.check(c, path, options);
  }
  CHECK(outcome.compared >= kCaptures / 2);
  CHECK(outcome.with_kind >= kCaptures / 4);
  MESSAGE("random GPU captures: " << outcome.summary(kCaptures));
}

}  // namespace torchprof
