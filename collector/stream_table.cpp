#include "collector/stream_table.h"

#include <algorithm>
#include <limits>
#include <memory>
#include <regex>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "collector/capture_reader.h"
#include "collector/capture_scan.h"
#include "collector/decode.h"
#include "collector/decoded_frames.h"
#include "collector/frame_decode.h"
#include "collector/op_message.h"
#include "collector/stream_pass.h"
#include "collector/stream_rows.h"
#include "formats/outputs.h"
#include "formats/wire/wire.h"

namespace torchprof {

namespace {

using stream::ConnPass;
using stream::NameState;
using stream::Refusal;
using stream::Rows;
using stream::StartEnd;
using stream::Stats;

// Feeds a connection's frames, decoded in order on this thread, to `pass`.
void read_frames(CaptureReader& reader, const ConnInput& conn, ConnPass& pass) {
  DecodedFrames frames(reader, conn.frames, DecodedFrames::Mode::kInline);
  while (const DecodedFrames::Frame* frame = frames.next()) {
    if (frame->ok) {
      pass.frame(frame->header, frame->raw);
    } else {
      pass.bad_frame();
    }
  }
  pass.finish();
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
  for (const auto& [key, st] : pass.domain_ranges()) {
    add_range_row(pass, static_cast<uint32_t>(key >> 16), static_cast<uint16_t>(key & 0xffff), st,
                  group_by_input_shape, rows);
  }
  for (const auto& [kind, name, st] : pass.copy_rows()) rows.add(kind, name, st);
}

}  // namespace

std::optional<StreamedTable> stream_table(const std::string& capture_path, const AnalysisOptions& options,
                                          std::string* why) {
  const std::regex marker = step_marker_regex(options.step_marker);
  CaptureReader reader(capture_path);
  StreamedTable out;
  Run& run = out.run;
  const ScanResult scanned = scan_capture(reader, run);
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
        ConnPass first(conn, p, marker, nullptr);
        read_frames(reader, conn, first);
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
  for (const Process& proc : run.processes) {
    run.dropped_events += proc.dropped;
    run.cupti_dropped += proc.cupti_dropped;
    for (const std::string& n : proc.gpu_notices) run.gpu_notices.push_back("pid " + std::to_string(proc.pid) + ": " + n);
  }
  run.ops = rows.take();
  for (const OpStats& op : run.ops) {
    if (op.self_cuda_ns != 0 || op.cuda_total_ns != 0) run.has_gpu = true;
  }
  return out;
}

}  // namespace torchprof
