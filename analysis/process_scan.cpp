#include "analysis/process_scan.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <optional>
#include <tuple>
#include <utility>

#include "analysis/capture_range.h"
#include "analysis/capture_windows.h"
#include "analysis/op_message.h"
#include "analysis/range_pairing.h"
#include "reading/decoded_frames.h"
#include "reading/frame_decode.h"

namespace torchprof {

namespace {

constexpr int64_t kMaxTs = std::numeric_limits<int64_t>::max();
constexpr int64_t kMinTs = std::numeric_limits<int64_t>::min();

// A range or mark whose name may make it a step marker or a capture-range window.
struct Candidate {
  int64_t start = 0;
  int64_t end = 0;
  uint64_t seq = 0;    // its start's place among its thread's events
  uint32_t tid = 0;
  uint32_t conn = 0;
  uint32_t name = 0;
  uint16_t domain = 0;
  bool mark = false;
  int32_t start_end = -1;  // its index among its connection's start/end ranges (one on its thread)
};

struct ScanThread {
  uint64_t seq = 0;
  uint32_t next_frame = 0;  // the frame number expected next (a gap: frames were lost)
  int64_t last = kMinTs;  // its latest record time
  // Open ranges per NVTX domain (decode pairs a pop with its domain's last push): the
  // candidate each is, or -1.
  std::vector<std::pair<uint16_t, std::vector<int32_t>>> stacks;
  std::vector<int32_t>& stack(uint16_t domain) {
    for (auto& [d, s] : stacks) {
      if (d == domain) return s;
    }
    return stacks.emplace_back(domain, std::vector<int32_t>()).second;
  }
};

// How a name decides what it may be: known once its text and its domain's name are.
struct NameTest {
  const StepMarker& marker;
  const CaptureRange& range;

  // The name an event of this text and domain is shown as: an op's own name for a
  // PyTorch op range, else the text.
  static std::string shown(const std::string& text, const std::string& domain_name, bool mark) {
    if (mark) return text;
    std::optional<OpInfo> op = op_of_range(text, domain_name);
    return op ? op->name : text;
  }
  bool is_marker(const std::string& name) const { return marker.matches(name); }
  bool is_window(const std::string& name, const std::string& domain_name, bool mark) const {
    if (mark || range.kind != CaptureRange::Kind::kNvtx || name != range.nvtx_name) return false;
    return range.nvtx_domain.empty() || domain_name == range.nvtx_domain;
  }
};

class ConnScanner {
 public:
  ConnScanner(const ConnInput& conn, uint32_t index, ConnScan& out, std::vector<Candidate>& candidates,
              Process& proc, const NameTest& test)
      : conn_(conn), index_(index), out_(out), candidates_(candidates), proc_(proc), test_(test) {}

  void frame(const wire::FrameHeader& fh, const std::vector<uint8_t>& raw) {
    ScanThread& thread = threads_[fh.tid];
    current_ = &thread;
    if (fh.seq > thread.next_frame) close_across_gap(thread);  // as the second pass does
    thread.next_frame = fh.seq + 1;
    bool after_start = false;  // the record before was a kStart of this frame
    for_each_record(raw, [&](const wire::Record& r, const uint8_t* extra, size_t extra_bytes) {
      const bool was_start = after_start;
      after_start = false;
      switch (static_cast<wire::Kind>(r.kind)) {
        case wire::Kind::kString:
          out_.defs.strings[r.name].assign(reinterpret_cast<const char*>(extra),
                                           std::min<uint64_t>(r.a, extra_bytes));
          ++definitions_;
          break;
        case wire::Kind::kDomain:
          out_.defs.domains[r.domain] = r.name;
          ++definitions_;
          break;
        case wire::Kind::kCategory:
          out_.defs.categories[category_key(r.domain, static_cast<uint32_t>(r.a))] = r.name;
          break;
        case wire::Kind::kPush:
        case wire::Kind::kOpBegin: {
          const int64_t ts = touch(r.ts);
          out_.any_event = true;
          const uint64_t seq = thread.seq++;
          thread.stack(r.domain).push_back(may_match(r.name, r.domain, false) ? candidate(fh.tid, seq, ts, r.name, r.domain, false)
                                                                              : -1);
          break;
        }
        case wire::Kind::kPop:
        case wire::Kind::kOpEnd: {
          const int64_t ts = touch(r.ts);
          std::vector<int32_t>& stack = thread.stack(r.domain);
          if (stack.empty()) break;
          if (stack.back() >= 0) candidates_[static_cast<size_t>(stack.back())].end = ts;
          stack.pop_back();
          break;
        }
        case wire::Kind::kMark: {
          const int64_t ts = touch(r.ts);
          out_.any_event = true;
          const uint64_t seq = thread.seq++;
          if (may_match(r.name, r.domain, true)) candidate(fh.tid, seq, ts, r.name, r.domain, true);
          break;
        }
        case wire::Kind::kStart:
          start(r, fh.tid, thread);
          after_start = true;
          break;
        case wire::Kind::kEnd: {
          const int64_t ts = touch(r.ts);
          if (std::optional<uint32_t> open = pairing_.end(r.a, ts, fh.tid)) end(*open, ts, fh.tid);
          break;
        }
        case wire::Kind::kPayload:
          if (was_start) {
            out_.start_ends.back().attr = r.a;
            out_.start_ends.back().payload = r.b;
          }
          break;
        case wire::Kind::kThreadStart:
        case wire::Kind::kTensorAlloc:
        case wire::Kind::kTensorFree: touch(r.ts); break;
        case wire::Kind::kCudaRuntime:
        case wire::Kind::kCudaDriver: {
          touch_call(r);
          out_.any_event = true;
          ++thread.seq;
          break;
        }
        case wire::Kind::kCudaApiActivity: {
          if (extra_bytes < sizeof(wire::GpuApiExtra)) break;
          wire::GpuApiExtra x{};
          std::memcpy(&x, extra, sizeof x);
          const auto [start_ts, end_ts] = touch_call(r);
          out_.any_event = true;
          out_.activity_calls[x.tid].push_back({start_ts, end_ts, r.b, r.name, r.domain, x.driver != 0});
          break;
        }
        case wire::Kind::kCaptureWindow:
          proc_.capture_toggles.push_back({record_epoch_ns(conn_.hello, r.ts), static_cast<uint32_t>(r.a), r.b == 1,
                                           static_cast<uint16_t>(r.domain)});
          break;
        case wire::Kind::kCudaProfiler:
          proc_.profiler_toggles.push_back({gpu_epoch_ns(conn_.hello, r.ts), fh.tid, r.a == 1});
          break;
        case wire::Kind::kKernel:
        case wire::Kind::kMemcpy:
        case wire::Kind::kMemset:
        case wire::Kind::kSync:
          gpu(r, extra, extra_bytes);
          break;
        case wire::Kind::kMemory:
          if (extra_bytes >= sizeof(wire::GpuMemoryExtra)) {
            out_.any_gpu = true;
            gpu_span(gpu_epoch_ns(conn_.hello, r.ts), gpu_epoch_ns(conn_.hello, r.ts));
          }
          break;
        default:
          break;
      }
    });
  }

  // Frames of the thread were lost: what it has open ends at its last time before them.
  void close_across_gap(ScanThread& thread) {
    for (auto& [domain, stack] : thread.stacks) {
      for (int32_t c : stack) {
        if (c < 0) continue;
        Candidate& cand = candidates_[static_cast<size_t>(c)];
        cand.end = std::max(cand.start, thread.last);
      }
      stack.clear();
    }
  }

  // Ranges never ended: pushes end at their thread's last time (their candidates do),
  // start/end ranges at the image's end.
  void finish(int64_t& first, int64_t& last) {
    const int64_t image_end = this->image_end();
    for (const auto& [index, se] : pairing_.open()) {
      StartEndRange& r = out_.start_ends[se];
      r.end_ns = std::max(r.start_ns, image_end);
      r.end_tid = r.tid;
    }
    out_.waiting_ends = pairing_.waiting_ends();
    for (auto& [tid, calls] : out_.activity_calls) order_activity_calls(calls);
    for (auto& [tid, thread] : threads_) {
      for (auto& [domain, stack] : thread.stacks) {
        for (int32_t c : stack) {
          if (c < 0) continue;
          Candidate& cand = candidates_[static_cast<size_t>(c)];
          cand.end = std::max(cand.start, thread.last);
        }
      }
    }
    if (first_ != kMaxTs) first = std::min(first, first_);
    if (gpu_first_ != kMaxTs) first = std::min(first, gpu_first_);
    if (last_ != kMinTs || conn_.bye) last = std::max({last, image_end, gpu_last_});
  }

  // One thread's API calls from activity records: the driver calls a runtime call made
  // are its internals and go (as the callbacks never record them); the rest in the order
  // the callbacks would have written them, each at its end, a call after those it holds.
  static void order_activity_calls(std::vector<ApiCall>& calls) {
    std::sort(calls.begin(), calls.end(), [](const ApiCall& a, const ApiCall& b) {
      return a.start_ns != b.start_ns ? a.start_ns < b.start_ns : a.end_ns > b.end_ns;
    });
    int64_t runtime_end = kMinTs;  // the end of the runtime call open at this start
    size_t kept = 0;
    for (const ApiCall& c : calls) {
      if (c.driver && c.end_ns <= runtime_end) continue;
      if (!c.driver) runtime_end = std::max(runtime_end, c.end_ns);
      calls[kept++] = c;
    }
    calls.resize(kept);
    std::stable_sort(calls.begin(), calls.end(), [](const ApiCall& a, const ApiCall& b) {
      return a.end_ns != b.end_ns ? a.end_ns < b.end_ns : a.start_ns > b.start_ns;
    });
  }

  // Start/end ranges that may be step markers or windows, as candidates.
  void start_end_candidates() {
    for (const SeqStart& s : se_seq_) {
      const StartEndRange& r = out_.start_ends[s.index];
      if (!may_match(r.name, r.domain, false)) continue;
      const int32_t c = candidate(r.tid, s.seq, r.start_ns, r.name, r.domain, false, r.end_ns);
      if (r.on_thread()) candidates_[static_cast<size_t>(c)].start_end = static_cast<int32_t>(s.index);
    }
  }

 private:
  struct SeqStart {
    uint32_t index = 0;
    uint64_t seq = 0;
  };

  int64_t touch(uint64_t raw) { return touch_epoch(record_epoch_ns(conn_.hello, raw)); }
  // An API call's record (ts = start, a = end): its start and end, both touched.
  std::pair<int64_t, int64_t> touch_call(const wire::Record& r) {
    const int64_t start = touch(r.ts);
    return {start, touch_epoch(std::max(start, record_epoch_ns(conn_.hello, r.a)))};
  }
  int64_t touch_epoch(int64_t ts) {
    first_ = std::min(first_, ts);
    last_ = std::max(last_, ts);
    current_->last = std::max(current_->last, ts);
    return ts;
  }

  int64_t image_end() const {
    int64_t end = last_;
    if (conn_.bye && conn_.bye->mono_ns != 0) end = std::max(end, record_epoch_ns(conn_.hello, conn_.bye->mono_ns));
    return end;
  }

  void gpu_span(int64_t start, int64_t end) {
    gpu_first_ = std::min(gpu_first_, start);
    gpu_last_ = std::max(gpu_last_, end);
  }

  void gpu(const wire::Record& r, const uint8_t* extra, size_t extra_bytes) {
    const auto kind = static_cast<wire::Kind>(r.kind);
    const size_t need = kind == wire::Kind::kKernel ? sizeof(wire::GpuKernelExtra)
                        : kind == wire::Kind::kSync ? sizeof(wire::GpuSyncExtra)
                                                    : sizeof(wire::GpuCopyExtra);
    if (extra_bytes < need || r.ts == 0 || r.a == 0) return;  // too short, or without times: not decoded
    out_.any_gpu = true;
    const int64_t start = gpu_epoch_ns(conn_.hello, r.ts);
    gpu_span(start, std::max(start, gpu_epoch_ns(conn_.hello, r.a)));
    if (kind == wire::Kind::kKernel) {
      wire::GpuKernelExtra x;
      std::memcpy(&x, extra, sizeof x);
      out_.context_device.emplace(x.context, r.domain);
    } else if (kind != wire::Kind::kSync) {
      wire::GpuCopyExtra x;
      std::memcpy(&x, extra, sizeof x);
      out_.context_device.emplace(x.context, r.domain);
    }
  }

  // Whether a range or mark of this name may be a step marker or a window: not when its
  // text and its domain's name are known and neither matches (decided once per name until
  // the next definition; a name not defined yet may still match).
  bool may_match(uint32_t name, uint16_t domain, bool mark) {
    const uint64_t key = (uint64_t{name} << 17) | (uint64_t{domain} << 1) | (mark ? 1 : 0);
    auto [it, fresh] = decided_.try_emplace(key, Decided{});
    Decided& d = it->second;
    if (!fresh && d.definitions == definitions_) return d.may;
    d.definitions = definitions_;
    auto text = out_.defs.strings.find(name);
    if (name != 0 && text == out_.defs.strings.end()) return d.may = true;
    std::string domain_name;
    if (domain != 0) {
      auto dom = out_.defs.domains.find(domain);
      if (dom == out_.defs.domains.end()) return d.may = true;
      if (dom->second != 0) {
        auto dtext = out_.defs.strings.find(dom->second);
        if (dtext == out_.defs.strings.end()) return d.may = true;
        domain_name = dtext->second;
      }
    }
    const std::string shown = NameTest::shown(name == 0 ? std::string() : text->second, domain_name, mark);
    return d.may = test_.is_marker(shown) || test_.is_window(shown, domain_name, mark);
  }

  int32_t candidate(uint32_t tid, uint64_t seq, int64_t ts, uint32_t name, uint16_t domain, bool mark,
                    int64_t end = kMinTs) {
    candidates_.push_back({ts, end == kMinTs ? ts : end, seq, tid, index_, name, domain, mark, -1});
    return static_cast<int32_t>(candidates_.size() - 1);
  }

  void start(const wire::Record& r, uint32_t tid, ScanThread& thread) {
    const int64_t ts = touch(r.ts);
    out_.any_event = true;
    const auto index = static_cast<uint32_t>(out_.start_ends.size());
    StartEndRange& se = out_.start_ends.emplace_back();
    se.start_ns = se.end_ns = ts;
    se.attr = r.b;  // a start carries its range id in a, its attribute in b
    se.tid = se.end_tid = tid;
    se.name = r.name;
    se.domain = r.domain;
    se_seq_.push_back({index, thread.seq++});
    if (std::optional<RangePairing::End> e = pairing_.start(r.a, index)) end(index, e->ts, e->tid);
  }

  void end(uint32_t index, int64_t ts, uint32_t tid) {
    StartEndRange& se = out_.start_ends[index];
    se.end_ns = std::max(se.start_ns, ts);
    se.end_tid = tid;
    se.ended = true;
  }

 public:
 private:
  const ConnInput& conn_;
  uint32_t index_;
  ConnScan& out_;
  std::vector<Candidate>& candidates_;
  Process& proc_;
  std::unordered_map<uint32_t, ScanThread> threads_;
  ScanThread* current_ = nullptr;  // the thread of the frame being read
  std::vector<SeqStart> se_seq_;
  RangePairing pairing_;
  const NameTest& test_;
  struct Decided {
    uint64_t definitions = 0;
    bool may = true;
  };
  std::unordered_map<uint64_t, Decided> decided_;
  uint64_t definitions_ = 0;  // strings and domains defined so far
  int64_t first_ = kMaxTs;
  int64_t last_ = kMinTs;
  int64_t gpu_first_ = kMaxTs;
  int64_t gpu_last_ = kMinTs;
};

// The text of string `id` of a connection once all of it was read ("" for 0).
std::string final_text(const ConnDefinitions& defs, uint32_t id) {
  if (id == 0) return {};
  auto it = defs.strings.find(id);
  return it != defs.strings.end() ? it->second : stand_in_text(id);
}

std::string final_domain(const ConnDefinitions& defs, uint16_t domain) {
  if (domain == 0) return {};
  auto it = defs.domains.find(domain);
  if (it == defs.domains.end() || it->second == 0) return {};
  auto text = defs.strings.find(it->second);
  return text != defs.strings.end() ? text->second : std::string();
}

}  // namespace

ProcessScan scan_process(CaptureReader& reader, const std::vector<const ConnInput*>& conns,
                         const AnalysisOptions& options, const StepMarker& marker, Process& proc) {
  ProcessScan scan;
  std::vector<Candidate> candidates;
  int64_t first = kMaxTs;
  int64_t last = kMinTs;
  bool any_event = false;
  bool any_record = false;
  const NameTest test{marker, options.capture_range};
  for (size_t c = 0; c < conns.size(); ++c) {
    ConnScan& out = scan.conns.emplace_back();
    ConnScanner scanner(*conns[c], static_cast<uint32_t>(c), out, candidates, proc, test);
    DecodedFrames frames(reader, conns[c]->frames, DecodedFrames::Mode::kInline);
    while (const DecodedFrames::Frame* frame = frames.next()) {
      if (!frame->ok) continue;
      scanner.frame(frame->header, frame->raw);
    }
    scanner.finish(first, last);
    scanner.start_end_candidates();
    any_event = any_event || out.any_event;
    any_record = any_record || out.any_event || out.any_gpu;
  }
  scan.start_ns = first != kMaxTs ? first : 0;
  scan.end_ns = last != kMinTs ? last : 0;
  std::stable_sort(proc.profiler_toggles.begin(), proc.profiler_toggles.end(),
                   [](const ProfilerToggle& x, const ProfilerToggle& y) { return x.ts_ns < y.ts_ns; });

  // Which candidates are step markers and which windows, with every name known.
  std::vector<std::pair<int64_t, int64_t>> nvtx_ranges;
  std::vector<std::string> shown(candidates.size());
  for (size_t i = 0; i < candidates.size(); ++i) {
    const Candidate& cand = candidates[i];
    const ConnDefinitions& defs = scan.conns[cand.conn].defs;
    const std::string domain = final_domain(defs, cand.domain);
    shown[i] = NameTest::shown(final_text(defs, cand.name), domain, cand.mark);
    if (test.is_window(shown[i], domain, cand.mark)) nvtx_ranges.emplace_back(cand.start, cand.end);
  }
  scan.windows = capture_windows(options.capture_range, proc.profiler_toggles, std::move(nvtx_ranges));
  const bool ranged = options.capture_range.kind == CaptureRange::Kind::kCudaProfilerApi ||
                      options.capture_range.kind == CaptureRange::Kind::kNvtx;
  std::vector<size_t> found;
  for (size_t i = 0; i < candidates.size(); ++i) {
    if (!test.is_marker(shown[i])) continue;
    if (ranged && !inside_windows(scan.windows, candidates[i].start)) continue;
    found.push_back(i);
  }
  // In start order; equal starts in the order of their threads, then of their starts.
  std::sort(found.begin(), found.end(), [&](size_t x, size_t y) {
    const Candidate& a = candidates[x];
    const Candidate& b = candidates[y];
    return std::tie(a.start, a.conn, a.tid, a.seq) < std::tie(b.start, b.conn, b.tid, b.seq);
  });
  std::vector<MarkerEvent> marker_events;
  for (size_t i : found) {
    const Candidate& c = candidates[i];
    marker_events.push_back({c.start, c.end, c.tid, c.mark, c.start_end >= 0, shown[i]});
  }
  // A step range that ends inside the next one of its thread ends where that one begins,
  // for the pass (its nesting, its trace event) as for the step.
  untangle_step_ranges(marker_events);
  for (size_t k = 0; k < found.size(); ++k) {
    const Candidate& c = candidates[found[k]];
    if (c.start_end < 0) continue;
    StartEndRange& se = scan.conns[c.conn].start_ends[static_cast<size_t>(c.start_end)];
    se.end_ns = std::max(se.start_ns, std::min(se.end_ns, marker_events[k].end_ns));
  }
  // A process that sent GPU records alone (TORCHPROF_TRACE=gpu) gets its whole-run step too:
  // its kernels are rows, though no range or call of its own holds them.
  const bool recorded = ranged ? any_event && !scan.windows.empty() : any_record;
  scan.steps = steps_of_markers(marker_events, scan.start_ns, scan.end_ns, recorded, options.schedule);
  if (!proc.capture_toggles.empty()) {
    proc.steps = scan.steps;
    proc.start_ns = scan.start_ns;
    proc.end_ns = scan.end_ns;
    apply_capture_windows(proc, any_record);
    scan.steps = proc.steps;
  }
  return scan;
}

}  // namespace torchprof
