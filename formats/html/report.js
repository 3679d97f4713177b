(function () {
  "use strict";
  // The page reports its own health in #tp-status (data-status="ok" or "error: ...") so
  // that a headless browser can check it with --dump-dom.
  var statusEl = document.getElementById("tp-status");
  var errors = [];
  function fail(message) {
    errors.push(String(message));
    statusEl.setAttribute("data-status", "error: " + errors.join(" | "));
    document.title = "torchprof: error";
    var root = document.getElementById("tp-root");
    if (root) {
      var box = el("div", "banner error");
      box.appendChild(el("h2", null, "This report hit a script error"));
      box.appendChild(el("div", null, String(message)));
      root.insertBefore(box, root.firstChild);
    }
  }
  window.addEventListener("error", function (e) { fail(e.message || "error"); });
  window.addEventListener("unhandledrejection", function (e) { fail("unhandled rejection: " + e.reason); });
  var consoleError = console.error;
  console.error = function () {
    fail(Array.prototype.join.call(arguments, " "));
    consoleError.apply(console, arguments);
  };

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = text;
    return e;
  }
  function fmtTime(ns) {
    var a = Math.abs(ns);
    if (a >= 1e9) return (ns / 1e9).toFixed(a >= 1e10 ? 2 : 3) + " s";
    if (a >= 1e6) return (ns / 1e6).toFixed(a >= 1e8 ? 1 : a >= 1e7 ? 2 : 3) + " ms";
    if (a >= 1e3) return (ns / 1e3).toFixed(a >= 1e5 ? 1 : a >= 1e4 ? 2 : 3) + " us";
    return Math.round(ns) + " ns";
  }
  function fmtBytes(b) {
    var units = ["B", "KiB", "MiB", "GiB", "TiB"], i = 0, v = b;
    while (Math.abs(v) >= 1024 && i < units.length - 1) { v /= 1024; i++; }
    return (i === 0 ? v.toFixed(0) : v.toFixed(v >= 100 ? 0 : 1)) + " " + units[i];
  }
  function hashColor(text, light) {
    var h = 2166136261;
    for (var i = 0; i < text.length; i++) { h ^= text.charCodeAt(i); h = Math.imul(h, 16777619); }
    var hue = (h >>> 0) % 360;
    return "hsl(" + hue + "," + (light ? "55%" : "58%") + "," + (light ? "78%" : "62%") + ")";
  }
  function niceStep(span, count) {
    var raw = span / Math.max(1, count), p = Math.pow(10, Math.floor(Math.log10(raw))), m = raw / p;
    return (m < 1.5 ? 1 : m < 3.5 ? 2 : m < 7.5 ? 5 : 10) * p;
  }
  function setupCanvas(canvas, cssHeight) {
    var dpr = window.devicePixelRatio || 1, w = canvas.clientWidth || canvas.parentNode.clientWidth || 800;
    canvas.style.height = cssHeight + "px";
    canvas.width = Math.round(w * dpr);
    canvas.height = Math.round(cssHeight * dpr);
    var ctx = canvas.getContext("2d");
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    return { ctx: ctx, w: w, h: cssHeight };
  }
  function card(root, title) {
    var c = el("section", "card");
    if (title) c.appendChild(el("h2", null, title));
    root.appendChild(c);
    return c;
  }

  function renderHeader(root, D) {
    var m = D.meta, h = el("header");
    h.appendChild(el("h1", null, "torchprof report"));
    h.appendChild(el("div", "cmd", (m.command || []).join(" ")));
    root.appendChild(h);
    var facts = el("ul", "facts");
    function fact(k, v) { var li = el("li"); li.appendChild(el("b", null, k + " ")); li.appendChild(document.createTextNode(v)); facts.appendChild(li); }
    fact("exit code", String(m.exit_code));
    fact("duration", fmtTime(m.duration_ns));
    fact("host", m.host || "?");
    fact("processes", String(m.processes.length));
    fact("CPU events", String(m.events));
    if (m.has_gpu) fact("GPU records", String(m.gpu_events));
    fact("steps", String(D.steps.length));
    if (D.capture_windows && D.capture_windows.length) fact("capture windows", String(D.capture_windows.length));
    fact("started", new Date(m.start_unix_ns / 1e6).toISOString().replace("T", " ").replace("Z", " UTC"));
    if (D.traces && D.traces.length) fact("traces", D.traces.length + " in traces/ (see Traces, below)");
    root.appendChild(facts);
  }

  // Why there is nothing to show, and what to do (formats/empty_result.h).
  function renderEmpty(root, D) {
    if (!D.empty_result || !D.empty_result.length) return;
    var box = el("div", "banner empty");
    box.id = "tp-empty";
    box.appendChild(el("h2", null, "Nothing to show"));
    D.empty_result.forEach(function (line) {
      box.appendChild(el("p", null, /^torchprof/.test(line) ? line : line.charAt(0).toUpperCase() + line.slice(1)));
    });
    root.appendChild(box);
  }

  function renderWarnings(root, D) {
    if (!D.warnings.length) return;
    var box = el("div", "banner warn");
    box.id = "tp-warnings";
    box.appendChild(el("h2", null, "Data may be incomplete"));
    var ul = el("ul");
    D.warnings.forEach(function (w) { ul.appendChild(el("li", null, w)); });
    box.appendChild(ul);
    root.appendChild(box);
  }

  function renderBars(root, title, items, color, empty) {
    var c = card(root, title);
    if (!items.length) { c.appendChild(el("div", "muted", empty)); return c; }
    var max = items.reduce(function (a, it) { return Math.max(a, it.value); }, 1);
    var grid = el("div", "bars");
    items.forEach(function (it) {
      var label = el("div", "label", it.name);
      label.title = it.name + " (" + it.kind + ", " + it.calls + " calls)";
      var track = el("div", "track"), fill = el("div", "fill");
      fill.style.width = (100 * it.value / max).toFixed(2) + "%";
      fill.style.background = color || hashColor(it.name);
      track.appendChild(fill);
      track.appendChild(el("span", "value", fmtTime(it.value) + "  \u00b7  " + it.calls + " calls"));
      grid.appendChild(label);
      grid.appendChild(track);
    });
    c.appendChild(grid);
    return c;
  }

  function renderGpuSteps(root, D) {
    if (!D.gpu_steps.length) return;
    var c = card(root, "GPU busy and idle per step");
    var legend = el("div", "legend");
    legend.innerHTML = "<span><i style=\"background:var(--busy)\"></i>busy (merged kernel time)</span>" +
      "<span><i style=\"background:var(--idle)\"></i>idle (step window without kernels)</span>";
    c.appendChild(legend);
    var multi = D.meta.processes.length > 1, max = 1;
    D.gpu_steps.forEach(function (s) { max = Math.max(max, s.busy + s.idle); });
    var grid = el("div", "bars");
    D.gpu_steps.forEach(function (s) {
      var name = (multi ? "pid " + s.pid + " " : "") + (s.step || "whole process") + " \u00b7 GPU " + s.device;
      var label = el("div", "label", name);
      label.title = name;
      grid.appendChild(label);
      var track = el("div", "track"), busy = el("div", "fill busy"), idle = el("div", "fill idle");
      var total = s.busy + s.idle;
      busy.style.width = (100 * s.busy / max).toFixed(2) + "%";
      idle.style.left = busy.style.width;
      idle.style.width = (100 * s.idle / max).toFixed(2) + "%";
      track.appendChild(busy);
      track.appendChild(idle);
      track.appendChild(el("span", "value", "busy " + fmtTime(s.busy) + " \u00b7 idle " + fmtTime(s.idle) +
        " (" + (total ? (100 * s.busy / total).toFixed(1) : "0.0") + "% busy)"));
      grid.appendChild(track);
    });
    c.appendChild(grid);
  }

  // The overview: the step time breakdown (average, then per step), GPU idle causes per
  // device and the recommendations, each with the figure behind it.
  var PART_COLORS = { kernel: "#2f9e6b", memcpy: "#3b6fd8", memset: "#7b5cd6", cuda_runtime: "#e0a526",
    dataloader: "#d8553b", cpu_exec: "#8c96a8", other: "#d8dce3" };
  var PART_LABELS = { kernel: "Kernel", memcpy: "Memcpy", memset: "Memset", cuda_runtime: "CUDA runtime",
    dataloader: "DataLoader", cpu_exec: "CPU exec", other: "Other" };
  function stackedBar(parts, values, total) {
    var track = el("div", "track stacked"), left = 0;
    parts.forEach(function (p) {
      var v = values[p] || 0;
      if (!total || v <= 0) return;
      var seg = el("div", "fill");
      seg.style.left = (100 * left / total).toFixed(3) + "%";
      seg.style.width = (100 * v / total).toFixed(3) + "%";
      seg.style.background = PART_COLORS[p] || "#999";
      seg.title = (PART_LABELS[p] || p) + ": " + fmtTime(v) + " (" + (100 * v / total).toFixed(1) + "%)";
      track.appendChild(seg);
      left += v;
    });
    return track;
  }
  // A step's bar is as long as the step: the longest step (or the average, when longer)
  // fills the track, every other one its share of it.
  function stepRows(grid, parts, rows, longest) {
    rows.forEach(function (r) {
      var label = el("div", "label", r.label);
      label.title = r.label + ": " + fmtTime(r.dur);
      grid.appendChild(label);
      var track = el("div", "track stacked");
      track.setAttribute("data-dur", String(r.dur));
      var bar = stackedBar(parts, r.values, r.dur);
      bar.className = "scaled";
      bar.style.width = (100 * r.dur / longest).toFixed(3) + "%";
      track.appendChild(bar);
      track.appendChild(el("span", "value", fmtTime(r.dur)));
      grid.appendChild(track);
    });
  }
  function breakdownLegend(parts, B) {
    var legend = el("div", "legend");
    legend.id = "tp-breakdown-legend";
    parts.forEach(function (p) {
      var s = el("span"), i = el("i");
      i.style.background = PART_COLORS[p];
      s.appendChild(i);
      s.appendChild(document.createTextNode(PART_LABELS[p] + " " + (B.pct[p] || 0).toFixed(1) + "%"));
      legend.appendChild(s);
    });
    return legend;
  }
  function breakdownRows(D, O) {
    var B = O.breakdown, parts = B.parts, multi = D.meta.processes.length > 1, rows = [], avg = {};
    parts.forEach(function (p) { avg[p] = B.avg[p + "_ns"]; });
    rows.push({ label: "average of " + O.steps + " step" + (O.steps === 1 ? "" : "s"), values: avg, dur: B.avg.dur_ns });
    B.steps.slice(0, 200).forEach(function (s) {
      var vals = {};
      parts.forEach(function (p) { vals[p] = s[p + "_ns"]; });
      rows.push({ label: (multi ? "pid " + s.pid + " " : "") + (s.name || "whole process"), values: vals, dur: s.dur_ns });
    });
    return rows;
  }
  // The overview: the recommendations, the step time breakdown (average, then per step,
  // bars as long as the steps), GPU idle causes per device. On a run without GPU work the
  // breakdown is all CPU time: it is folded away behind a one-line summary.
  function renderOverview(root, D) {
    var O = D.overview;
    if (!O || !O.steps) return 0;
    var c = card(root, "Overview");
    c.id = "tp-overview";
    var recs = el("ul", "recs");
    recs.id = "tp-recommendations";
    if (!O.recommendations.length) recs.appendChild(el("li", "muted", "No recommendation: no figure crosses its threshold."));
    O.recommendations.forEach(function (r) {
      var li = el("li", null, r.text);
      li.setAttribute("data-id", r.id);
      recs.appendChild(li);
    });
    c.appendChild(recs);
    var B = O.breakdown, parts = B.parts, holder = c;
    if (!D.meta.has_gpu) {
      var fold = el("details"), summary = el("summary");
      fold.id = "tp-breakdown-fold";
      var shares = parts.filter(function (p) { return (B.pct[p] || 0) > 0; }).map(function (p) {
        return PART_LABELS[p] + " " + B.pct[p].toFixed(1) + "%";
      });
      summary.textContent = "Step time breakdown of " + O.steps + " step" + (O.steps === 1 ? "" : "s") +
        " (no GPU work in this run): " + (shares.join(" \u00b7 ") || "no time") + ", mean " + fmtTime(B.avg.dur_ns);
      fold.appendChild(summary);
      fold.open = location.hash === "#breakdown";
      c.appendChild(fold);
      holder = fold;
    }
    holder.appendChild(el("div", "note", "Step time breakdown: each moment of a step counted once, in the order " +
      "kernel > memcpy > memset > CUDA runtime > DataLoader > CPU exec > other (as TensorBoard's profiler plugin). " +
      "Each bar is as long as its step."));
    holder.appendChild(breakdownLegend(parts, B));
    var grid = el("div", "bars");
    grid.id = "tp-breakdown";
    var rows = breakdownRows(D, O);
    stepRows(grid, parts, rows, rows.reduce(function (a, r) { return Math.max(a, r.dur); }, 1));
    holder.appendChild(grid);
    var multi = D.meta.processes.length > 1;
    O.devices.forEach(function (d) {
      var w = d.steps_ns || 1;
      function share(v) { return (100 * v / w).toFixed(1) + "%"; }
      c.appendChild(el("div", "note", "GPU " + d.device + (multi ? " of pid " + d.pid : "") + ": kernels " +
        share(d.kernel_busy_ns) + " of step time, busy " + share(d.busy_ns) + " with copies; idle " +
        share(d.idle_ns) + " (host wait " + share(d.host_wait_ns) + ", kernel wait " + share(d.kernel_wait_ns) +
        ", other " + share(d.other_ns) + ", as HolisticTraceAnalysis splits it)"));
    });
    return O.recommendations.length;
  }

  function signalName(n) {
    var names = { 1: "SIGHUP", 2: "SIGINT", 3: "SIGQUIT", 4: "SIGILL", 6: "SIGABRT", 7: "SIGBUS", 8: "SIGFPE",
      9: "SIGKILL", 11: "SIGSEGV", 13: "SIGPIPE", 14: "SIGALRM", 15: "SIGTERM" };
    return names[n] ? names[n] + " (" + n + ")" : "signal " + n;
  }
  function endText(p) {
    if (p.exit_signal !== null && p.exit_signal !== undefined) return "killed by " + signalName(p.exit_signal);
    if (p.exit_code !== null && p.exit_code !== undefined) return "exit code " + p.exit_code;
    return "end not known";
  }
  // Processes as a tree: each under the process that started it, with its command line,
  // the images it exec'd from, and how it ended.
  function renderProcesses(root, D) {
    var P = D.meta.processes;
    if (!P.length) return 0;
    var c = card(root, "Processes");
    c.id = "tp-processes";
    var byPid = {}, children = {}, roots = [];
    P.forEach(function (p) { byPid[p.input + ":" + p.pid] = p; });
    P.forEach(function (p) {
      var parent = byPid[p.input + ":" + p.ppid];
      if (parent && parent !== p) (children[p.input + ":" + p.ppid] = children[p.input + ":" + p.ppid] || []).push(p);
      else roots.push(p);
    });
    var depth = 0;
    function node(p, level) {
      depth = Math.max(depth, level);
      var li = el("li");
      li.setAttribute("data-pid", String(p.pid));
      li.setAttribute("data-level", String(level));
      var head = el("div", "proc");
      head.appendChild(el("span", "pid", "pid " + p.pid));
      var cmd = el("code", "cmdline", (p.cmdline && p.cmdline.length ? p.cmdline : [p.exe]).join(" "));
      cmd.title = p.exe;
      head.appendChild(cmd);
      var end = el("span", "end" + (p.exit_signal || p.exit_code ? " bad" : ""), endText(p));
      head.appendChild(end);
      li.appendChild(head);
      (p.exec_from || []).slice().reverse().forEach(function (argv) {
        li.appendChild(el("div", "exec", "exec'd from: " + argv.join(" ")));
      });
      li.appendChild(el("div", "pfacts", p.events + " events on " + p.threads + " thread" + (p.threads === 1 ? "" : "s") +
        (p.gpu_events ? ", " + p.gpu_events + " GPU records" : "") + ", " + p.steps + " step" +
        (p.steps === 1 ? "" : "s") + (p.dropped ? ", " + p.dropped + " events lost" : "") + ", " + fmtTime(p.dur)));
      var kids = children[p.input + ":" + p.pid];
      if (kids) {
        var ul = el("ul");
        kids.forEach(function (k) { ul.appendChild(node(k, level + 1)); });
        li.appendChild(ul);
      }
      return li;
    }
    var tree = el("ul", "ptree");
    roots.forEach(function (p) { tree.appendChild(node(p, 0)); });
    c.appendChild(tree);
    return depth + 1;
  }

  // Where the traces are and what opens them.
  function renderTraces(root, D) {
    var c = card(root, "Traces: open in Perfetto, TensorBoard or HTA");
    c.id = "tp-traces";
    if (!D.traces || !D.traces.length) {
      c.appendChild(el("div", "muted", "No trace files were written for this report."));
      return;
    }
    var ul = el("ul", "files");
    D.traces.slice(0, 50).forEach(function (t) { ul.appendChild(el("li", null, t)); });
    if (D.traces.length > 50) ul.appendChild(el("li", "muted", (D.traces.length - 50) + " more in traces/"));
    c.appendChild(ul);
    var how = el("ul", "how");
    [["Perfetto", "open ui.perfetto.dev in a browser and drop a trace file onto it (nothing leaves the browser)"],
     ["TensorBoard", "pip install torch-tb-profiler (in a virtual environment), then tensorboard --logdir traces/ " +
      "(run beside this page) and open the PYTORCH_PROFILER tab"],
     ["HTA", "pip install HolisticTraceAnalysis, then TraceAnalysis(trace_dir=\"traces/\")"]].forEach(function (r) {
      var li = el("li");
      li.appendChild(el("b", null, r[0] + ": "));
      li.appendChild(document.createTextNode(r[1]));
      how.appendChild(li);
    });
    c.appendChild(how);
  }

  // What this report does not show: lost events (the banner at the top has them too),
  // steps outside the schedule, the timeline's shortest events.
  function renderLeftOut(root, D) {
    var c = card(root, "Left out of this report");
    c.id = "tp-left-out";
    var items = (D.left_out || []).slice();
    if (D.dropped_events) items.unshift(D.dropped_events + " events were lost before they reached torchprof " +
      "(counted; see the banner at the top and docs/reliability.md).");
    if (!items.length) items.push("Nothing: no event was lost, every step was recorded and the timeline draws every event.");
    var ul = el("ul");
    items.forEach(function (t) { ul.appendChild(el("li", null, t)); });
    c.appendChild(ul);
  }

  function renderMemory(root, D) {
    if (!D.memory.length) return;
    var c = card(root, "Memory over time");
    var wrap = el("div", "chart"), canvas = el("canvas");
    wrap.appendChild(canvas);
    var legend = el("div", "legend");
    c.appendChild(legend);
    c.appendChild(wrap);
    var series = D.memory.map(function (s) {
      var label = (D.meta.processes.length > 1 ? "pid " + s.pid + " " : "") + (s.label || "GPU " + s.device);
      var color = hashColor(label + "#mem");
      var item = el("span"), sw = el("i");
      sw.style.background = color;
      item.appendChild(sw);
      item.appendChild(document.createTextNode(label));
      legend.appendChild(item);
      return { color: color, points: s.points };
    });
    function draw() {
      var g = setupCanvas(canvas, 220), ctx = g.ctx, left = 70, right = g.w - 12, top = 10, bottom = g.h - 24;
      var tMin = Infinity, tMax = -Infinity, yMax = 1;
      series.forEach(function (s) {
        s.points.forEach(function (p) { tMin = Math.min(tMin, p[0]); tMax = Math.max(tMax, p[0]); yMax = Math.max(yMax, p[1]); });
      });
      // The span of the memory events, with a margin so that the first and last steps show.
      var pad = Math.max((tMax - tMin) * 0.05, 1000);
      tMin = Math.max(0, tMin - pad); tMax += pad;
      yMax *= 1.08;
      function X(t) { return left + (right - left) * (t - tMin) / (tMax - tMin); }
      function Y(v) { return bottom - (bottom - top) * v / yMax; }
      ctx.font = "11px system-ui, sans-serif";
      ctx.fillStyle = "#667085";
      ctx.strokeStyle = "#e3e6ec";
      var ys = niceStep(yMax, 4);
      for (var v = 0; v <= yMax; v += ys) {
        ctx.beginPath(); ctx.moveTo(left, Y(v) + 0.5); ctx.lineTo(right, Y(v) + 0.5); ctx.stroke();
        ctx.textAlign = "right"; ctx.fillText(fmtBytes(v), left - 6, Y(v) + 4);
      }
      var xs = niceStep(tMax - tMin, 8);
      ctx.textAlign = "center";
      for (var t = Math.ceil(tMin / xs) * xs; t <= tMax; t += xs) ctx.fillText(fmtTime(t), X(t), g.h - 8);
      series.forEach(function (s) {
        ctx.strokeStyle = s.color; ctx.lineWidth = 1.6; ctx.beginPath();
        var last = 0;
        ctx.moveTo(X(tMin), Y(0));
        s.points.forEach(function (p) { ctx.lineTo(X(p[0]), Y(last)); ctx.lineTo(X(p[0]), Y(p[1])); last = p[1]; });
        ctx.lineTo(X(tMax), Y(last));
        ctx.stroke();
      });
      ctx.lineWidth = 1;
    }
    draw();
    window.addEventListener("resize", draw);
  }

  function renderTable(root, D) {
    var T = D.table, c = card(root, "Operators (as table.txt, sorted by " + T.sort_by + ")");
    var scroll = el("div", "table-scroll"), table = el("table", "ops");
    table.id = "tp-table";
    var thead = el("thead"), hr = el("tr"), tbody = el("tbody");
    var rows = T.rows.slice(), sortCol = -1, ths = [];
    T.columns.forEach(function (name, i) {
      var th = el("th", null, name);
      th.title = "sort by " + name;
      th.addEventListener("click", function () { sortBy(i); });
      ths.push(th);
      hr.appendChild(th);
    });
    thead.appendChild(hr);
    function fill() {
      tbody.textContent = "";
      rows.forEach(function (r) {
        var tr = el("tr");
        r.cells.forEach(function (cell, i) {
          var td = el("td");
          if (i === 0) { td.appendChild(el("span", "kind", r.kind)); td.appendChild(document.createTextNode(cell)); td.title = cell; }
          else td.textContent = cell;
          tr.appendChild(td);
        });
        tbody.appendChild(tr);
      });
    }
    function sortBy(i) {
      sortCol = i;
      rows.sort(function (a, b) {
        return i === 0 ? String(a.raw[0]).localeCompare(String(b.raw[0])) : b.raw[i] - a.raw[i];
      });
      ths.forEach(function (th, k) { th.className = k === sortCol ? "sorted" : ""; });
      fill();
    }
    fill();
    table.appendChild(thead);
    table.appendChild(tbody);
    scroll.appendChild(table);
    c.appendChild(scroll);
    var trailer = el("div", "trailer");
    T.trailer.forEach(function (line) { trailer.appendChild(el("div", null, line)); });
    c.appendChild(trailer);
    return rows.length;
  }

  // The module view (--with-modules): each nn.Module instance, indented by its depth,
  // with its calls, direct ops and host and device time, in all and self.
  function renderModules(root, D) {
    if (!D.modules || !D.modules.length) return 0;
    var c = card(root, "Modules (nn.Module calls)");
    var scroll = el("div", "table-scroll"), table = el("table", "ops");
    table.id = "tp-modules";
    var hr = el("tr");
    ["Module", "Calls", "Ops", "Host total", "Host self", "Device total", "Device self"].forEach(function (h) {
      hr.appendChild(el("th", null, h));
    });
    var thead = el("thead"), tbody = el("tbody");
    thead.appendChild(hr);
    D.modules.forEach(function (m) {
      var tr = el("tr"), name = el("td", null, m.name);
      name.style.paddingLeft = (6 + 14 * m.depth) + "px";
      name.setAttribute("data-depth", String(m.depth));
      name.title = "pid " + m.pid;
      tr.appendChild(name);
      tr.appendChild(el("td", null, String(m.occurrences)));
      tr.appendChild(el("td", null, String(m.operators)));
      [m.host_ns, m.self_host_ns, m.device_ns, m.self_device_ns].forEach(function (ns) {
        tr.appendChild(el("td", null, fmtTime(ns)));
      });
      tbody.appendChild(tr);
    });
    table.appendChild(thead);
    table.appendChild(tbody);
    scroll.appendChild(table);
    c.appendChild(scroll);
    return D.modules.length;
  }

  // Where the page's bars and legends are, in page pixels, for the tests' screenshots
  // (tests/integration/test_html.py measures them in the image).
  function rect(e) {
    var r = e.getBoundingClientRect();
    return { x: Math.round(r.left + window.scrollX), y: Math.round(r.top + window.scrollY),
             w: Math.round(r.width), h: Math.round(r.height) };
  }
  function geometry() {
    var bars = [];
    document.querySelectorAll("#tp-breakdown .track").forEach(function (t) {
      if (t.checkVisibility && !t.checkVisibility()) return;  // folded away
      var g = rect(t);
      g.dur = Number(t.getAttribute("data-dur"));
      bars.push(g);
    });
    var legends = [];
    document.querySelectorAll(".legend i").forEach(function (i) {
      if (i.checkVisibility && !i.checkVisibility()) return;
      var g = rect(i);
      if (g.w > 0 && g.h > 0) { g.color = getComputedStyle(i).backgroundColor; legends.push(g); }
    });
    // Text cut off without a tooltip to show it whole.
    var clipped = 0;
    document.querySelectorAll(".label, .facts li, summary, .proc code, table.ops td:first-child").forEach(function (e) {
      if (e.scrollWidth > e.clientWidth + 1 && !e.title) clipped++;
    });
    var empty = document.getElementById("tp-empty");
    return { bars: bars, legends: legends, clipped: clipped, empty: empty ? rect(empty) : null };
  }

  function main() {
    var D = JSON.parse(document.getElementById("tp-data").textContent);
    var root = document.getElementById("tp-root");
    root.textContent = "";
    renderHeader(root, D);
    renderEmpty(root, D);
    renderWarnings(root, D);
    var u = { el: el, card: card, fmtTime: fmtTime, hashColor: hashColor, niceStep: niceStep, setupCanvas: setupCanvas };
    // With GPU work the overview leads; without, the timeline does (the breakdown is all CPU).
    var recommendations = 0, timeline;
    var nothing = !D.tracks.length && D.empty_result && D.empty_result.length;
    if (nothing) {
      timeline = { drawn: function () { return 0; }, labels: function () { return { overflow: 0 }; } };
    } else if (D.meta.has_gpu) {
      recommendations = renderOverview(root, D);
      timeline = window.TorchprofTimeline(root, D, u);
    } else {
      timeline = window.TorchprofTimeline(root, D, u);
      recommendations = renderOverview(root, D);
    }
    var levels = renderProcesses(root, D);
    var grid = el("div", D.meta.has_gpu ? "grid2" : "grid1");
    root.appendChild(grid);
    if (!nothing) renderBars(grid, "Top ops by self CPU time", D.top_ops, null, "No CPU ops were recorded.");
    if (D.meta.has_gpu) {
      renderBars(grid, "Top GPU kernels and copies by self CUDA time", D.top_kernels, null,
        "No GPU work in the recorded steps.");
    }
    renderGpuSteps(root, D);
    renderMemory(root, D);
    var tableRows = renderTable(root, D);
    var moduleRows = renderModules(root, D);
    renderTraces(root, D);
    renderLeftOut(root, D);
    if (errors.length) return;
    var labels = timeline.labels(), geo = geometry();
    statusEl.setAttribute("data-timeline-events", String(timeline.drawn()));
    statusEl.setAttribute("data-timeline-tracks", String(D.tracks.length));
    statusEl.setAttribute("data-timeline-labels", JSON.stringify(labels));
    statusEl.setAttribute("data-table-rows", String(tableRows));
    statusEl.setAttribute("data-module-rows", String(moduleRows));
    statusEl.setAttribute("data-recommendations", String(recommendations));
    statusEl.setAttribute("data-process-levels", String(levels));
    statusEl.setAttribute("data-step-bars", JSON.stringify(geo.bars));
    statusEl.setAttribute("data-legends", JSON.stringify(geo.legends));
    statusEl.setAttribute("data-clipped", String(geo.clipped + labels.overflow));
    if (geo.empty) statusEl.setAttribute("data-empty", JSON.stringify(geo.empty));
    statusEl.setAttribute("data-status", "ok");
    document.title = document.title.replace(/^torchprof/, "torchprof report");
  }

  try {
    main();
  } catch (e) {
    fail((e && e.stack) || e);
  }
})();
