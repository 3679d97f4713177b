#include "reference_analysis.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>
#include <tuple>
#include <unordered_map>

#include "analysis/gpu_decode.h"
#include "analysis/op_message.h"
#include "analysis/process_scan.h"
#include "reading/capture_reader.h"
#include "reading/capture_scan.h"
#include "reading/decoded_frames.h"
#include "reading/frame_decode.h"

namespace torchprof::test {

namespace {

struct Ev {
  int64_t start = 0;
  int64_t end = 0;
  uint32_t tid = 0;
  uint64_t seq = 0;            // read order within the process
  std::string shown;           // the op's name for op ranges, else the text
  std::optional<OpInfo> op;
  bool mark = false;
  bool api = false;
  bool nests = true;           // false: marks and start/end ranges ended on another thread
  bool unended = false;        // closed at the end of its thread (or image)
  bool start_end = false;      // a start/end range
  uint64_t correlation = 0;
  int parent = -1;
  int step = -1;
  int64_t children = 0;
  int child_count = 0;  // direct children (ranges and API calls)
};

struct Gpu {
  GpuKind kind = GpuKind::kKernel;
  std::string row;     // the row's name (demangled kernel, Kineto's copy names)
  std::string mangled;
  int64_t start = 0;
  int64_t end = 0;
  uint64_t correlation = 0;
  uint64_t seq = 0;
};

struct Proc {
  std::vector<Ev> events;
  std::vector<Gpu> gpu;
  int64_t first = INT64_MAX;
  int64_t last = INT64_MIN;
  bool any_event = false;
};

std::string text_of(const std::unordered_map<uint32_t, std::string>& strings, uint32_t id) {
  if (id == 0) return {};
  auto it = strings.find(id);
  return it != strings.end() ? it->second : stand_in_text(id);
}

// One connection's records into whole events of `proc`; false when it makes interval
// nesting ambiguous (`why` says how).
void read_conn(CaptureReader& reader, const ConnInput& conn, Proc& proc, ReferenceResult& out) {
  auto ambiguous = [&](const std::string& why) {
    if (out.unambiguous) out.ambiguity = why;
    out.unambiguous = false;
  };
  // Every definition first: a name may be defined after its use.
  std::unordered_map<uint32_t, std::string> strings;
  std::unordered_map<uint16_t, uint32_t> domains;
  {
    DecodedFrames frames(reader, conn.frames);
    while (const DecodedFrames::Frame* f = frames.next()) {
      if (!f->ok) continue;
      for_each_record(f->raw, [&](const wire::Record& r, const uint8_t* extra, size_t bytes) {
        if (r.kind == static_cast<uint8_t>(wire::Kind::kString)) {
          strings[r.name].assign(reinterpret_cast<const char*>(extra), std::min<uint64_t>(r.a, bytes));
        } else if (r.kind == static_cast<uint8_t>(wire::Kind::kDomain)) {
          domains[r.domain] = r.name;
        }
      });
    }
  }
  auto domain_text = [&](uint16_t d) { return d == 0 || !domains.count(d) ? std::string() : text_of(strings, domains[d]); };
  auto make = [&](uint32_t name, uint16_t domain, bool mark) {
    Ev e;
    const std::string text = text_of(strings, name);
    if (!mark) e.op = op_of_range(text, domain_text(domain));
    e.shown = e.op ? e.op->name : text;
    e.mark = mark;
    return e;
  };
  std::map<std::pair<uint32_t, uint16_t>, std::vector<size_t>> stacks;
  std::map<uint64_t, size_t> open_starts;                     // range id -> event
  std::map<uint64_t, std::pair<int64_t, uint32_t>> early_ends;  // range id -> (ts, tid)
  std::unordered_map<uint32_t, int64_t> thread_last;
  std::unordered_map<uint32_t, int64_t> thread_order;  // latest push/pop/mark/start/end time read
  int64_t image_last = INT64_MIN;
  const size_t first_event = proc.events.size();
  auto touch = [&](uint32_t tid, int64_t t) {
    int64_t& l = thread_last.try_emplace(tid, INT64_MIN).first->second;
    l = std::max(l, t);
    image_last = std::max(image_last, t);
    proc.first = std::min(proc.first, t);
  };
  auto in_order = [&](uint32_t tid, int64_t t) {
    int64_t& o = thread_order.try_emplace(tid, INT64_MIN).first->second;
    if (t < o) ambiguous("a thread's records go back in time");
    o = std::max(o, t);
  };
  uint64_t seq = proc.events.size() + proc.gpu.size();
  std::unordered_map<uint32_t, uint32_t> next_frame;
  DecodedFrames frames(reader, conn.frames);
  while (const DecodedFrames::Frame* f = frames.next()) {
    if (!f->ok) continue;
    const uint32_t tid = f->header.tid;
    // Frames of this thread were lost: its open pushes end at its last time before them.
    uint32_t& expected = next_frame.try_emplace(tid, 0).first->second;
    if (f->header.seq > expected) {
      for (auto& [key, s] : stacks) {
        if (key.first != tid) continue;
        for (size_t i : s) {
          proc.events[i].end = std::max(proc.events[i].start, thread_last[tid]);
          proc.events[i].unended = true;
        }
        s.clear();
      }
    }
    expected = f->header.seq + 1;
    for_each_record(f->raw, [&](const wire::Record& r, const uint8_t* extra, size_t bytes) {
      const int64_t ts = record_epoch_ns(conn.hello, r.ts);
      switch (static_cast<wire::Kind>(r.kind)) {
        case wire::Kind::kPush: {
          touch(tid, ts);
          in_order(tid, ts);
          Ev e = make(r.name, r.domain, false);
          e.start = e.end = ts;
          e.tid = tid;
          e.seq = seq++;
          stacks[{tid, r.domain}].push_back(proc.events.size());
          proc.events.push_back(std::move(e));
          break;
        }
        case wire::Kind::kPop: {
          touch(tid, ts);
          in_order(tid, ts);
          auto& s = stacks[{tid, r.domain}];
          if (s.empty()) break;
          proc.events[s.back()].end = ts;
          s.pop_back();
          break;
        }
        case wire::Kind::kMark: {
          touch(tid, ts);
          in_order(tid, ts);
          Ev e = make(r.name, r.domain, true);
          e.start = e.end = ts;
          e.tid = tid;
          e.seq = seq++;
          e.nests = false;
          proc.events.push_back(std::move(e));
          break;
        }
        case wire::Kind::kStart: {
          touch(tid, ts);
          Ev e = make(r.name, r.domain, false);
          e.start_end = true;
          e.start = e.end = ts;
          e.tid = tid;
          e.seq = seq++;
          if (auto w = early_ends.find(r.a); w != early_ends.end()) {
            e.end = std::max(ts, w->second.first);
            e.nests = w->second.second == tid;
            early_ends.erase(w);
          } else {
            open_starts[r.a] = proc.events.size();
          }
          proc.events.push_back(std::move(e));
          break;
        }
        case wire::Kind::kEnd: {
          touch(tid, ts);
          if (auto o = open_starts.find(r.a); o != open_starts.end()) {
            Ev& e = proc.events[o->second];
            e.end = std::max(e.start, ts);
            e.nests = e.tid == tid;
            open_starts.erase(o);
          } else {
            early_ends[r.a] = {ts, tid};
          }
          break;
        }
        case wire::Kind::kThreadStart: touch(tid, ts); break;
        case wire::Kind::kCudaRuntime:
        case wire::Kind::kCudaDriver: {
          const int64_t end = std::max(ts, record_epoch_ns(conn.hello, r.a));
          touch(tid, ts);
          touch(tid, end);
          if (auto o = thread_order.find(tid); o != thread_order.end() && ts < o->second) {
            ambiguous("a range begins or ends inside an API call");
          }
          Ev e;
          e.shown = text_of(strings, r.name);
          e.api = true;
          e.start = ts;
          e.end = end;
          e.tid = tid;
          e.seq = seq++;
          e.correlation = r.b;
          proc.events.push_back(std::move(e));
          break;
        }
        case wire::Kind::kKernel:
        case wire::Kind::kMemcpy:
        case wire::Kind::kMemset:
        case wire::Kind::kSync: {
          const auto kind = static_cast<wire::Kind>(r.kind);
          const size_t need = kind == wire::Kind::kKernel ? sizeof(wire::GpuKernelExtra)
                              : kind == wire::Kind::kSync ? sizeof(wire::GpuSyncExtra)
                                                          : sizeof(wire::GpuCopyExtra);
          if (bytes < need || r.ts == 0 || r.a == 0) break;
          Gpu g;
          g.start = gpu_epoch_ns(conn.hello, r.ts);
          g.end = std::max(g.start, gpu_epoch_ns(conn.hello, r.a));
          g.correlation = r.b;
          g.seq = seq++;
          if (kind == wire::Kind::kKernel) {
            g.mangled = text_of(strings, r.name);
            g.row = demangle(g.mangled);
          } else if (kind == wire::Kind::kSync) {
            g.kind = GpuKind::kSync;
          } else {
            wire::GpuCopyExtra x;
            std::memcpy(&x, extra, sizeof x);
            g.kind = kind == wire::Kind::kMemcpy ? GpuKind::kMemcpy : GpuKind::kMemset;
            g.row = kind == wire::Kind::kMemcpy ? memcpy_row_name(x.copy_kind, x.src_kind, x.dst_kind)
                                                : memset_row_name(x.dst_kind);
          }
          proc.first = std::min(proc.first, g.start);
          proc.last = std::max(proc.last, g.end);
          proc.gpu.push_back(std::move(g));
          break;
        }
        case wire::Kind::kMemory:
          if (bytes >= sizeof(wire::GpuMemoryExtra)) {
            const int64_t t = gpu_epoch_ns(conn.hello, r.ts);
            proc.first = std::min(proc.first, t);
            proc.last = std::max(proc.last, t);
          }
          break;
        default: break;
      }
    });
  }
  int64_t image_end = image_last;
  if (conn.bye && conn.bye->mono_ns != 0) image_end = std::max(image_end, record_epoch_ns(conn.hello, conn.bye->mono_ns));
  // Ranges never ended: pushes end at their thread's last time, starts at the image's end.
  for (auto& [key, s] : stacks) {
    for (size_t i : s) {
      proc.events[i].end = std::max(proc.events[i].start, thread_last[key.first]);
      proc.events[i].unended = true;
    }
  }
  for (auto& [id, i] : open_starts) {
    proc.events[i].end = std::max(proc.events[i].start, image_end);
    proc.events[i].unended = true;
  }
  if (image_last != INT64_MIN || conn.bye) proc.last = std::max(proc.last, image_end);
  proc.any_event = proc.any_event || proc.events.size() > first_event;
}

// Interval nesting of one process's events: a range's parent is the innermost range of
// its thread that holds it (one that only overlaps it is not). Two ranges that span the
// same time, or share an endpoint where one of them is empty, make the nesting a matter
// of order.
void nest(Proc& proc, ReferenceResult& out) {
  auto ambiguous = [&](const std::string& why) {
    if (out.unambiguous) out.ambiguity = why;
    out.unambiguous = false;
  };
  std::vector<size_t> order(proc.events.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const Ev& x = proc.events[a];
    const Ev& y = proc.events[b];
    return std::make_tuple(x.tid, x.start, -x.end, x.seq) < std::make_tuple(y.tid, y.start, -y.end, y.seq);
  });
  for (size_t oi = 0; oi < order.size(); ++oi) {
    Ev& e = proc.events[order[oi]];
    for (size_t pj = 0; pj < order.size(); ++pj) {
      const Ev& p = proc.events[order[pj]];
      if (pj == oi || p.tid != e.tid || !p.nests || !e.nests) continue;
      const bool holds = p.start <= e.start && e.end <= p.end;
      if (p.start == e.start && p.end == e.end) ambiguous("two ranges of a thread span the same time");
      // Ranges never ended close at the end, innermost first: their ties are no question.
      const bool touch = p.start == e.start || p.end == e.end || p.end == e.start || p.start == e.end;
      if (touch && ((p.start == p.end && !p.unended) || (e.start == e.end && !e.unended))) {
        ambiguous("an empty range at another's endpoint");
      }
      // The innermost holder: the latest to start among those that hold it.
      if (holds && pj < oi && (e.parent < 0 || proc.events[static_cast<size_t>(e.parent)].start <= p.start)) {
        e.parent = static_cast<int>(order[pj]);
      }
    }
    if (e.mark) {
      for (const Ev& p : proc.events) {
        if (p.tid == e.tid && p.nests && (p.start == e.start || (p.end == e.start && !p.unended))) {
          ambiguous("a mark at a range's endpoint");
        }
      }
    }
  }
  for (const Ev& e : proc.events) {
    if (e.parent >= 0 && !e.mark) {
      proc.events[static_cast<size_t>(e.parent)].children += e.end - e.start;
      ++proc.events[static_cast<size_t>(e.parent)].child_count;
    }
  }
}

int step_at(const std::vector<Step>& steps, int64_t t) {
  int found = -1;
  for (size_t k = 0; k < steps.size(); ++k) {
    if (steps[k].start_ns <= t && t <= steps[k].start_ns + steps[k].dur_ns) found = static_cast<int>(k);
  }
  return found;
}

std::string row_name(const std::string& name) {
  return name.starts_with(kStepNamePrefix) ? std::string(kStepRowName) : name;
}

}  // namespace

ReferenceResult reference_analysis(const std::string& capture_path, const AnalysisOptions& options) {
  ReferenceResult out;
  CaptureReader reader(capture_path);
  const ScanResult scan = scan_capture(reader);
  std::vector<int> pids;
  std::map<int, Proc> procs;
  for (const auto& conn : scan.conns) {
    if (!procs.count(conn->hello.pid)) pids.push_back(conn->hello.pid);
    read_conn(reader, *conn, procs[conn->hello.pid], out);
  }
  const StepMarker marker(options.step_marker);
  std::vector<std::pair<std::string, OpStats>> rows;  // key, row: in order of first use
  auto row = [&](OpStats key) -> OpStats& {
    const std::string k = op_row_key(key, key.name);
    for (auto& [rk, r] : rows) {
      if (rk == k) return r;
    }
    rows.emplace_back(k, std::move(key));
    return rows.back().second;
  };
  for (int pid : pids) {
    Proc& proc = procs[pid];
    std::vector<Ev*> markers;
    for (Ev& e : proc.events) {
      if (!e.api && marker.matches(e.shown)) markers.push_back(&e);
    }
    std::stable_sort(markers.begin(), markers.end(), [](const Ev* a, const Ev* b) {
      return std::make_tuple(a->start, a->tid, a->seq) < std::make_tuple(b->start, b->tid, b->seq);
    });
    std::vector<MarkerEvent> marker_events;
    for (const Ev* m : markers) {
      marker_events.push_back({m->start, m->end, m->tid, m->mark, m->start_end && m->nests, m->shown});
    }
    // Step ranges of a thread that intersect: the earlier ends where the later begins.
    untangle_step_ranges(marker_events);
    for (size_t k = 0; k < markers.size(); ++k) markers[k]->end = marker_events[k].end_ns;
    nest(proc, out);
    const int64_t start = proc.first == INT64_MAX ? 0 : proc.first;
    const int64_t end = proc.last == INT64_MIN ? 0 : proc.last;
    const std::vector<Step> steps = steps_of_markers(marker_events, start, end, proc.any_event, options.schedule);
    // Without a schedule what lies outside every step counts too (the whole run).
    auto counted = [&](int k) {
      if (k < 0) return !options.schedule && !steps.empty();
      return recorded(steps[static_cast<size_t>(k)].action);
    };
    for (Ev& e : proc.events) e.step = step_at(steps, e.start);
    std::vector<size_t> order(proc.events.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      const Ev& x = proc.events[a];
      const Ev& y = proc.events[b];
      return std::make_tuple(x.tid, x.start, -x.end, x.seq) < std::make_tuple(y.tid, y.start, -y.end, y.seq);
    });
    // GPU time for the ranges around each launching call.
    std::map<uint64_t, size_t> calls;
    for (size_t i : order) {
      if (proc.events[i].api && proc.events[i].correlation != 0) calls.emplace(proc.events[i].correlation, i);
    }
    std::vector<int64_t> self_cuda(proc.events.size(), 0), cuda_total(proc.events.size(), 0);
    std::vector<int> gpu_step(proc.gpu.size(), -1);
    for (size_t g = 0; g < proc.gpu.size(); ++g) {
      const Gpu& r = proc.gpu[g];
      auto call = calls.find(r.correlation);
      if (call == calls.end()) {
        gpu_step[g] = step_at(steps, r.start);
        continue;
      }
      const Ev& api = proc.events[call->second];
      gpu_step[g] = api.step;
      if (r.kind == GpuKind::kSync) continue;
      // Self CUDA for the innermost range that holds the call, CUDA total for each one.
      int innermost = -1;
      for (size_t i = 0; i < proc.events.size(); ++i) {
        const Ev& h = proc.events[i];
        if (h.api || !h.nests || h.tid != api.tid || h.start > api.start || api.end > h.end) continue;
        cuda_total[i] += r.end - r.start;
        if (innermost < 0 || proc.events[static_cast<size_t>(innermost)].start <= h.start) innermost = static_cast<int>(i);
      }
      if (innermost >= 0) self_cuda[static_cast<size_t>(innermost)] += r.end - r.start;
    }
    auto key_of = [&](const Ev& e) {
      OpStats key;
      if (e.op) {
        key = op_row(*e.op, options.group_by_input_shape);
      } else {
        key.kind = e.api ? "cuda_api" : "nvtx";
      }
      key.name = row_name(e.shown);
      return key;
    };
    for (size_t i : order) {
      const Ev& e = proc.events[i];
      if (e.mark || !counted(e.step)) continue;
      const int64_t self = std::max<int64_t>(0, e.end - e.start - e.children);
      // torch's table: an op that is its parent op's only child, of the same name, is one
      // call with it, the child's self time the parent's.
      if (e.op && e.parent >= 0) {
        const Ev& p = proc.events[static_cast<size_t>(e.parent)];
        if (p.op && p.shown == e.shown && p.child_count == 1 && counted(p.step)) {
          row(key_of(p)).self_cpu_ns += self;
          // Its GPU time stays in its own row (the engine reads it after the call closed).
          if (self_cuda[i] != 0 || cuda_total[i] != 0) {
            OpStats& own = row(key_of(e));
            own.self_cuda_ns += self_cuda[i];
            own.cuda_total_ns += cuda_total[i];
          }
          continue;
        }
      }
      OpStats& r = row(key_of(e));
      r.self_cpu_ns += self;
      ++r.calls;
      r.cpu_total_ns += e.end - e.start;
      r.self_cuda_ns += self_cuda[i];
      r.cuda_total_ns += cuda_total[i];
    }
    std::vector<size_t> gorder(proc.gpu.size());
    for (size_t i = 0; i < gorder.size(); ++i) gorder[i] = i;
    std::stable_sort(gorder.begin(), gorder.end(), [&](size_t a, size_t b) {
      return std::make_pair(proc.gpu[a].start, proc.gpu[a].seq) < std::make_pair(proc.gpu[b].start, proc.gpu[b].seq);
    });
    for (size_t g : gorder) {
      const Gpu& r = proc.gpu[g];
      if (r.kind == GpuKind::kSync || !counted(gpu_step[g])) continue;
      OpStats key;
      key.kind = r.kind == GpuKind::kKernel ? "kernel" : r.kind == GpuKind::kMemcpy ? "memcpy" : "memset";
      key.name = r.row;
      OpStats& o = row(std::move(key));
      if (o.calls == 0) o.mangled = r.mangled;
      ++o.calls;
      o.self_cuda_ns += r.end - r.start;
      o.cuda_total_ns += r.end - r.start;
    }
  }
  for (auto& [k, r] : rows) out.ops.push_back(std::move(r));
  return out;
}

}  // namespace torchprof::test
