#include "analysis/stream_table.h"

#include <algorithm>
#include <deque>
#include <limits>
#include <memory>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "reading/capture_reader.h"
#include "analysis/process_info.h"
#include "reading/capture_scan.h"
#include "analysis/decode.h"
#include "reading/decoded_frames.h"
#include "reading/frame_decode.h"
#include "analysis/op_message.h"
#include "analysis/stream_pass.h"
#include "analysis/stream_rows.h"
#include "common/wire/wire.h"

namespace torchprof {

namespace {

using stream::ConnPass;
using stream::NameState;
using stream::Overtaken;
using stream::Refusal;
using stream::Rows;
using stream::StartEnd;
using stream::Stats;

// A frame read and not yet handed to the pass that follows the scan: decoded, or (one
// read before the first pass turned into the scan) to be decoded again.
struct HeldFrame {
  bool decoded = false;
  DecodedFrames::Frame frame;
  int64_t latest = std::numeric_limits<int64_t>::min();  // its thread's latest time once it was read
};

// How far a first pass reads ahead before it tells a step (the frames it read are read
// again, by the pass that follows it, when it does; past this it goes on as a first
// pass), and the decoded frames a scan holds for the pass following it, whether or not
// the steps they fall in are known (a step found later may then take the connection to
// two passes).
constexpr size_t kMaxReadAheadSlots = (size_t{32} << 20) / wire::kSlotSize;
constexpr size_t kMaxHeldBytes = size_t{8} << 20;

void feed(ConnPass& pass, const DecodedFrames::Frame& frame) {
  if (frame.ok) {
    pass.frame(frame.header, frame.raw);
  } else {
    pass.bad_frame();
  }
}

// Feeds a connection's frames, decoded in order on this thread, to `pass`.
void read_frames(CaptureReader& reader, const ConnInput& conn, ConnPass& pass) {
  DecodedFrames frames(reader, conn.frames, DecodedFrames::Mode::kInline);
  while (const DecodedFrames::Frame* frame = frames.next()) feed(pass, *frame);
  pass.finish();
}

// Reads a connection's frames with its first pass, reading ahead when `ahead`: once
// the first pass tells a step marker (the step written when it ended, as the Python
// bootstrap writes them, or the pop of a ProfilerStep range) within its first
// kMaxReadAheadSlots, it turns into a scan, and a second pass follows it from the first
// frame, reading each once the steps it falls in are known. Returns that pass once it
// finished; null when `first` read the whole connection as a first pass. Throws
// Overtaken when the scan found what the following pass had read past: the connection
// then takes two passes.
std::unique_ptr<ConnPass> first_read(CaptureReader& reader, const ConnInput& conn, size_t process,
                                     const StepMarker& marker, const AnalysisOptions& options, ConnPass& first,
                                     bool ahead) {
  if (!ahead) {
    read_frames(reader, conn, first);
    return nullptr;
  }
  DecodedFrames frames(reader, conn.frames, DecodedFrames::Mode::kInline);
  first.read_ahead();
  std::unique_ptr<ConnPass> follow;
  // The frames the first pass read before it turned into the scan, decoded again as the
  // pass following it reaches them (both decoders are inline: they use the reader in turn).
  std::vector<FrameRef> read_before;
  std::optional<DecodedFrames> again;
  size_t read_slots = 0;
  std::deque<HeldFrame> held;
  std::vector<std::vector<uint8_t>> spare;  // buffers of frames handed on, to decode into
  size_t held_bytes = 0;
  size_t steps = 0;
  int64_t known_until = std::numeric_limits<int64_t>::min();  // the end of the latest step
  auto hand_on = [&] {
    for (; steps < first.scanned_steps().size(); ++steps) {
      Step s = first.scanned_steps()[steps];
      s.index = static_cast<int>(steps);
      s.action = options.schedule ? schedule_action(*options.schedule, s.index) : StepAction::kRecord;
      known_until = s.start_ns + s.dur_ns;
      follow->add_step(s);
    }
    if (first.open_start_ends() == 0) follow->deal_start_ends();
  };
  auto follow_up = [&](bool all) {
    while (!held.empty()) {
      HeldFrame& h = held.front();
      const bool unpaired = first.open_start_ends() != 0;
      if (unpaired || h.latest > known_until) {
        if (!all && held_bytes <= kMaxHeldBytes) return;
        if (unpaired) throw Overtaken{"a start/end range stays open longer than the frames held"};
      }
      feed(*follow, h.decoded ? h.frame : *again->next());
      if (h.decoded) {
        held_bytes -= h.frame.raw.size();
        spare.push_back(std::move(h.frame.raw));
      }
      held.pop_front();
    }
  };
  size_t k = 0;  // the frame's index in conn.frames
  for (DecodedFrames::Frame* frame = frames.next(); frame != nullptr; frame = frames.next(), ++k) {
    if (!follow) {
      feed(first, *frame);
      if (!first.reading_ahead()) continue;
      HeldFrame& h = held.emplace_back();
      h.latest = first.latest(frame->header.tid);
      read_slots += conn.frames[k].slots;
      if (first.scanned_steps().empty()) {
        if (read_slots > kMaxReadAheadSlots) {
          first.stop_reading_ahead();
          held.clear();
        }
        continue;
      }
      first.become_scan();
      follow = std::make_unique<ConnPass>(conn, process, marker, first);
      read_before.assign(conn.frames.begin(), conn.frames.begin() + static_cast<std::ptrdiff_t>(k + 1));
      again.emplace(reader, read_before, DecodedFrames::Mode::kInline);
    } else {
      if (frame->ok) first.scan(frame->header, frame->raw);
      HeldFrame& h = held.emplace_back();
      h.decoded = true;
      h.latest = first.latest(frame->header.tid);
      std::swap(h.frame, *frame);  // the next frame is decoded into a spare buffer
      if (!spare.empty()) {
        frame->raw.swap(spare.back());
        spare.pop_back();
      }
      held_bytes += h.frame.raw.size();
    }
    hand_on();
    follow_up(false);
  }
  first.finish();
  if (!follow) return nullptr;
  hand_on();
  follow_up(true);
  follow->finish();
  return follow;
}

// torch renames ProfilerStep#N to ProfilerStep* before grouping; so does analysis.
std::string event_row_name(const std::string& name) {
  return name.starts_with(kStepNamePrefix) ? std::string(kStepRowName) : name;
}

// A range's row: a cpu_op row when it is a PyTorch op, else an nvtx row.
void add_range_row(const ConnPass& pass, uint32_t id, uint16_t domain, const Stats& st, bool group_by_input_shape,
                   Rows& rows) {
  if (st.calls == 0) return;
  if (std::optional<OpInfo> op = pass.op_of(id, domain)) {
    OpStats row = op_row(*op, group_by_input_shape);
    row.name = event_row_name(op->name);
    rows.add(std::move(row), st);
  } else {
    rows.add("nvtx", event_row_name(pass.final_text(id)), st);
  }
}

// Adds a pass's counted names to the rows, by the name analysis gives their row.
void add_rows(const ConnPass& pass, bool group_by_input_shape, Rows& rows) {
  const std::vector<NameState>& names = pass.names();
  for (uint32_t id = 0; id < names.size(); ++id) {
    const NameState& n = names[id];
    if (n.range.calls == 0 && n.api < 0 && n.kernel < 0) continue;
    add_range_row(pass, id, 0, n.range, group_by_input_shape, rows);
    const Stats& api = pass.side_stats(n.api);
    const Stats& kernel = pass.side_stats(n.kernel);
    const std::string text = pass.final_text(id);
    rows.add("cuda_api", event_row_name(text), api);
    if (kernel.calls != 0) rows.add("kernel", demangle(text), kernel, pass.final_text(kernel.mangled));
  }
  for (const ConnPass::DomainRange& d : pass.domain_slots()) {
    add_range_row(pass, d.id, d.domain, d.stats, group_by_input_shape, rows);
  }
  for (const auto& [key, st] : pass.domain_ranges()) {
    add_range_row(pass, static_cast<uint32_t>(key >> 16), static_cast<uint16_t>(key & 0xffff), st,
                  group_by_input_shape, rows);
  }
  for (const auto& [kind, name, st] : pass.copy_rows()) rows.add(kind, name, st);
}

}  // namespace

std::optional<StreamedTable> stream_table(const std::string& capture_path, const AnalysisOptions& options,
                                          std::string* why, bool read_ahead_steps) {
  const StepMarker marker(options.step_marker);
  CaptureReader reader(capture_path);
  StreamedTable out;
  Run& run = out.run;
  const ScanResult scanned = scan_capture(reader);
  apply_run_info(scanned, run);
  run.truncated = reader.truncated();
  run.truncated_at = reader.truncated_at();
  auto refuse = [&](std::string reason) -> std::optional<StreamedTable> {
    if (why) *why = std::move(reason);
    return std::nullopt;
  };
  if (options.capture_range.kind != CaptureRange::Kind::kNone) return refuse("a capture range is set");
  std::unordered_set<int> pids;
  for (const auto& conn : scanned.conns) {
    if (!pids.insert(conn->hello.pid).second) return refuse("a process has two images (fork, then exec)");
  }

  Rows rows;
  out.passes = 1;
  try {
    for (size_t p = 0; p < scanned.conns.size(); ++p) {
      const ConnInput& conn = *scanned.conns[p];
      Process& proc = run.processes.emplace_back();
      apply_identity(conn, proc);
      Process markers;
      std::vector<Step> steps;
      std::vector<StartEnd> start_ends;
      size_t name_count = 0;
      {  // the first pass's names and rows are let go before the second
        std::optional<ConnPass> first_pass;
        std::unique_ptr<ConnPass> follow;
        for (bool ahead = read_ahead_steps;;) {
          first_pass.emplace(conn, p, marker, nullptr);
          try {
            follow = first_read(reader, conn, p, marker, options, *first_pass, ahead);
            break;
          } catch (const Overtaken&) {
            ahead = false;  // from the start, in two passes
          }
        }
        if (follow) {  // read once, the steps found as it went
          follow->report(proc, &*first_pass);
          if (conn.bye) apply_bye(*conn.bye, proc);
          run.has_gpu = run.has_gpu || follow->has_gpu();
          out.events += follow->events();
          out.gpu_records += follow->gpu_records();
          add_rows(*follow, options.group_by_input_shape, rows);
          continue;
        }
        ConnPass& first = *first_pass;
        first.report(proc);
        if (conn.bye) apply_bye(*conn.bye, proc);
        run.has_gpu = run.has_gpu || first.has_gpu();
        out.events += first.events();
        out.gpu_records += first.gpu_records();
        if (first.events() == 0) continue;
        markers.events_list = first.markers();
        if (markers.events_list.empty()) {
          // The whole process is one step, holding every event.
          const bool counted = !options.schedule || recorded(schedule_action(*options.schedule, 0));
          if (!counted) continue;
          if (first.start_ends().empty()) {
            add_rows(first, options.group_by_input_shape, rows);
            continue;
          }
          steps.push_back(first.process_span());
          steps.back().action = StepAction::kRecordAndSave;
        }
        start_ends = first.take_start_ends();
        name_count = first.names().size();
      }
      if (!markers.events_list.empty()) {
        for (const Event& e : markers.events_list) {
          if (e.kind == EventKind::kMark) return refuse("a step marker is a mark");
        }
        std::vector<int32_t> order(markers.events_list.size());
        for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int32_t>(i);
        steps = steps_of_markers(markers, order, options.schedule);
      }
      ConnPass second(conn, p, marker, &steps, &start_ends);
      second.expect_names(name_count);
      read_frames(reader, conn, second);
      add_rows(second, options.group_by_input_shape, rows);
      out.passes = 2;
    }
  } catch (const Refusal& r) {
    return refuse(r.why);
  }
  apply_launcher_view(run, scanned);
  for (Process& proc : run.processes) {
    run.dropped_events += proc.dropped;
    run.cupti_dropped += proc.cupti_dropped;
    note_buffer_losses(proc);
    if (!proc.loss_note.empty()) run.loss_notes.push_back("pid " + std::to_string(proc.pid) + ": " + proc.loss_note);
    for (const std::string& n : proc.gpu_notices) run.gpu_notices.push_back("pid " + std::to_string(proc.pid) + ": " + n);
  }
  run.ops = rows.take();
  for (const OpStats& op : run.ops) {
    if (op.self_cuda_ns != 0 || op.cuda_total_ns != 0) run.has_gpu = true;
  }
  return out;
}

}  // namespace torchprof
