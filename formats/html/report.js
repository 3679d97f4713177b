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
    root.appendChild(facts);
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
      grid.appendChild(el("div", "label", name));
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
    var B = O.breakdown, parts = B.parts, legend = el("div", "legend");
    parts.forEach(function (p) {
      var s = el("span"), i = el("i");
      i.style.background = PART_COLORS[p];
      s.appendChild(i);
      s.appendChild(document.createTextNode(PART_LABELS[p] + " " + (B.pct[p] || 0).toFixed(1) + "%"));
      legend.appendChild(s);
    });
    c.appendChild(el("div", "note", "Step time breakdown: each moment of a step counted once, in the order " +
      "kernel > memcpy > memset > CUDA runtime > DataLoader > CPU exec > other (as TensorBoard's profiler plugin)."));
    c.appendChild(legend);
    var grid = el("div", "bars"), avg = {};
    parts.forEach(function (p) { avg[p] = B.avg[p + "_ns"]; });
    grid.appendChild(el("div", "label", "average of " + O.steps + " step" + (O.steps === 1 ? "" : "s")));
    var a = stackedBar(parts, avg, B.avg.dur_ns);
    a.appendChild(el("span", "value", fmtTime(B.avg.dur_ns)));
    grid.appendChild(a);
    var multi = D.meta.processes.length > 1;
    B.steps.slice(0, 200).forEach(function (s) {
      grid.appendChild(el("div", "label", (multi ? "pid " + s.pid + " " : "") + (s.name || "whole process")));
      var vals = {};
      parts.forEach(function (p) { vals[p] = s[p + "_ns"]; });
      var bar = stackedBar(parts, vals, s.dur_ns);
      bar.appendChild(el("span", "value", fmtTime(s.dur_ns)));
      grid.appendChild(bar);
    });
    c.appendChild(grid);
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

  function renderMemory(root, D) {
    if (!D.memory.length) return;
    var c = card(root, "Device memory over time");
    var wrap = el("div", "chart"), canvas = el("canvas");
    wrap.appendChild(canvas);
    var legend = el("div", "legend");
    c.appendChild(legend);
    c.appendChild(wrap);
    var series = D.memory.map(function (s) {
      var label = (D.meta.processes.length > 1 ? "pid " + s.pid + " " : "") + "GPU " + s.device;
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

  function main() {
    var D = JSON.parse(document.getElementById("tp-data").textContent);
    var root = document.getElementById("tp-root");
    root.textContent = "";
    renderHeader(root, D);
    renderWarnings(root, D);
    var recommendations = renderOverview(root, D);
    var timeline = window.TorchprofTimeline(root, D, { el: el, card: card, fmtTime: fmtTime, hashColor: hashColor,
      niceStep: niceStep, setupCanvas: setupCanvas });
    var grid = el("div", D.meta.has_gpu ? "grid2" : "grid1");
    root.appendChild(grid);
    renderBars(grid, "Top ops by self CPU time", D.top_ops, null, "No CPU ops were recorded.");
    if (D.meta.has_gpu) {
      renderBars(grid, "Top GPU kernels and copies by self CUDA time", D.top_kernels, null,
        "No GPU work in the recorded steps.");
    }
    renderGpuSteps(root, D);
    renderMemory(root, D);
    var tableRows = renderTable(root, D);
    if (errors.length) return;
    statusEl.setAttribute("data-timeline-events", String(timeline.drawn()));
    statusEl.setAttribute("data-timeline-tracks", String(D.tracks.length));
    statusEl.setAttribute("data-table-rows", String(tableRows));
    statusEl.setAttribute("data-recommendations", String(recommendations));
    statusEl.setAttribute("data-status", "ok");
    document.title = document.title.replace(/^torchprof/, "torchprof report");
  }

  // The timeline: one row per track (CPU thread, CUDA API of a thread, GPU stream),
  // overlapping slices stacked in lanes; wheel zooms around the pointer, drag pans.
  window.TorchprofTimeline = function (root, D, u) {
    var c = u.card(root, "Timeline");
    var bar = u.el("div", "toolbar"), select = u.el("select"), reset = u.el("button", null, "Show all");
    select.appendChild(new Option("Whole run", "-1"));
    D.steps.forEach(function (s, i) {
      var label = (D.meta.processes.length > 1 ? "pid " + s.pid + " \u00b7 " : "") + (s.name || "whole process") +
        (s.recorded ? "" : " (" + s.action + ")") + " \u00b7 " + u.fmtTime(s.dur);
      select.appendChild(new Option(label, String(i)));
    });
    bar.appendChild(u.el("span", null, "Step"));
    bar.appendChild(select);
    bar.appendChild(reset);
    bar.appendChild(u.el("span", "hint", "wheel: zoom \u00b7 drag: pan \u00b7 double-click: whole run"));
    c.appendChild(bar);
    var wrap = u.el("div", "timeline-wrap"), canvas = u.el("canvas"), tip = u.el("div", "tooltip");
    canvas.id = "tp-timeline";
    wrap.appendChild(canvas);
    wrap.appendChild(tip);
    c.appendChild(wrap);
    var note = u.el("div", "note");
    c.appendChild(note);

    var S = D.slices, N = S.length / 6, GUTTER = 250, AXIS = 26, LANE = 16, PAD = 8;
    var CAT = ["range", "mark", "CUDA API", "kernel", "memcpy", "memset", "sync"];
    var tracks = D.tracks.map(function (t) { return { info: t, first: 0, count: 0, maxDur: 0, y: 0, h: 0 }; });
    // The view spans the events and steps; the run itself lasts longer (start-up, drain).
    var end = N || D.steps.length ? 1 : Math.max(D.meta.duration_ns, 1);
    for (var i = 0; i < N; i++) {
      var t = tracks[S[6 * i]];
      if (t.count === 0) t.first = i;
      t.count++;
      t.maxDur = Math.max(t.maxDur, S[6 * i + 5]);
      end = Math.max(end, S[6 * i + 4] + S[6 * i + 5]);
    }
    D.steps.forEach(function (s) { end = Math.max(end, s.start + s.dur); });
    var y = AXIS;
    tracks.forEach(function (t) { t.y = y; t.h = t.info.lanes * LANE + PAD; y += t.h; });
    var height = Math.max(y + 4, 120), colors = {}, view = { t0: 0, t1: end }, drawn = 0;
    note.textContent = N + " events on " + tracks.length + " rows" +
      (D.omitted_slices ? "; " + D.omitted_slices + " more events not shown (the shortest)" : "") + ".";
    if (!tracks.length) note.textContent = "No events were recorded.";

    function color(nameIdx, cat) {
      var key = nameIdx * 8 + cat;
      // Numbered names (ProfilerStep#3, layer_12) share a colour.
      if (!colors[key]) colors[key] = u.hashColor(D.names[nameIdx].replace(/[#_]?\d+$/, "") + (cat >= 3 ? "#gpu" : ""), cat === 2);
      return colors[key];
    }
    // First slice of track t that may reach into [t0, ...): starts are sorted per track.
    function firstVisible(t, t0) {
      var lo = t.first, hi = t.first + t.count, from = t0 - t.maxDur;
      while (lo < hi) { var mid = (lo + hi) >> 1; if (S[6 * mid + 4] < from) lo = mid + 1; else hi = mid; }
      return lo;
    }
    function draw() {
      var g = u.setupCanvas(canvas, height), ctx = g.ctx, w = g.w, scale = (w - GUTTER) / (view.t1 - view.t0);
      function X(ns) { return GUTTER + (ns - view.t0) * scale; }
      ctx.fillStyle = "#fff"; ctx.fillRect(0, 0, w, g.h);
      tracks.forEach(function (t, k) {
        ctx.fillStyle = k % 2 ? "#fafbfc" : "#ffffff"; ctx.fillRect(GUTTER, t.y, w - GUTTER, t.h);
      });
      drawSteps(ctx, X, g);
      drawWindows(ctx, X, g);
      drawn = 0;
      ctx.font = "11px system-ui, sans-serif";
      ctx.textBaseline = "middle";
      tracks.forEach(function (t) { drawn += drawTrack(ctx, t, X, w); });
      drawGutter(ctx, g);
      drawAxis(ctx, X, w);
    }
    function drawTrack(ctx, t, X, w) {
      var count = 0, lastPx = [], stop = t.first + t.count;
      for (var i = firstVisible(t, view.t0); i < stop; i++) {
        var o = 6 * i, start = S[o + 4];
        if (start > view.t1) break;
        var x0 = X(start), x1 = X(start + S[o + 5]);
        if (x1 < GUTTER) continue;
        x0 = Math.max(x0, GUTTER);
        var lane = S[o + 1], px = Math.floor(x0), wid = x1 - x0;
        if (wid < 1 && lastPx[lane] === px) continue;
        lastPx[lane] = px;
        var cat = S[o + 3], yy = t.y + PAD / 2 + lane * LANE;
        ctx.fillStyle = color(S[o + 2], cat);
        if (cat === 1) { ctx.fillRect(x0 - 1, yy, 2, LANE - 2); count++; continue; }
        ctx.fillRect(x0, yy, Math.max(wid, 1), LANE - 2);
        count++;
        if (wid > 36) {
          ctx.save(); ctx.beginPath(); ctx.rect(x0, yy, Math.min(wid, w - x0), LANE - 2); ctx.clip();
          ctx.fillStyle = "#1d2330"; ctx.fillText(D.names[S[o + 2]], x0 + 3, yy + (LANE - 2) / 2 + 0.5);
          ctx.restore();
        }
      }
      return count;
    }
    // On-demand capture windows: a green bar along the top, "window N" when it fits.
    function drawWindows(ctx, X, g) {
      (D.capture_windows || []).forEach(function (w) {
        var x0 = Math.max(X(w.start), GUTTER), x1 = Math.min(X(w.start + w.dur), g.w);
        if (x1 < GUTTER || x0 > g.w) return;
        ctx.fillStyle = "rgba(46,160,67,0.75)";
        ctx.fillRect(x0, AXIS, Math.max(x1 - x0, 1), 4);
        if (x1 - x0 > 70) {
          ctx.fillStyle = "rgba(30,110,45,1)";
          ctx.fillText("window " + w.id + " (" + w.source + ")", x0 + 3, AXIS + 5);
        }
      });
    }
    function drawSteps(ctx, X, g) {
      ctx.font = "10.5px system-ui, sans-serif";
      ctx.textBaseline = "top";
      D.steps.forEach(function (s, k) {
        var x0 = X(s.start), x1 = X(s.start + s.dur);
        if (x1 < GUTTER || x0 > g.w) return;
        ctx.fillStyle = s.recorded ? (k % 2 ? "rgba(59,111,216,0.05)" : "rgba(59,111,216,0.09)") : "rgba(0,0,0,0.035)";
        ctx.fillRect(Math.max(x0, GUTTER), AXIS, Math.min(x1, g.w) - Math.max(x0, GUTTER), g.h - AXIS);
        ctx.strokeStyle = "rgba(59,111,216,0.55)";
        ctx.setLineDash([4, 3]);
        [x0, x1].forEach(function (x) {
          if (x < GUTTER || x > g.w) return;
          ctx.beginPath(); ctx.moveTo(Math.round(x) + 0.5, AXIS); ctx.lineTo(Math.round(x) + 0.5, g.h); ctx.stroke();
        });
        ctx.setLineDash([]);
        if (x1 - x0 > 50) {
          ctx.save(); ctx.beginPath(); ctx.rect(Math.max(x0, GUTTER), 13, x1 - Math.max(x0, GUTTER), 13); ctx.clip();
          ctx.fillStyle = "#3b6fd8"; ctx.fillText(s.name, Math.max(x0, GUTTER) + 3, 14);
          ctx.restore();
        }
      });
    }
    function drawGutter(ctx, g) {
      ctx.fillStyle = "#f8f9fb"; ctx.fillRect(0, 0, GUTTER, g.h);
      ctx.strokeStyle = "#e3e6ec";
      ctx.beginPath(); ctx.moveTo(GUTTER - 0.5, 0); ctx.lineTo(GUTTER - 0.5, g.h); ctx.stroke();
      ctx.font = "11.5px system-ui, sans-serif";
      ctx.textBaseline = "middle";
      var kindColor = { cpu: "#3b6fd8", cuda_api: "#c77d1a", gpu: "#2f9e6b" };
      tracks.forEach(function (t) {
        ctx.beginPath(); ctx.moveTo(0, t.y + t.h - 0.5); ctx.lineTo(g.w, t.y + t.h - 0.5); ctx.stroke();
        ctx.fillStyle = kindColor[t.info.kind] || "#999"; ctx.fillRect(6, t.y + 5, 3, t.h - 10);
        ctx.save(); ctx.beginPath(); ctx.rect(0, t.y, GUTTER - 6, t.h); ctx.clip();
        ctx.fillStyle = "#1d2330"; ctx.fillText(t.info.name, 14, t.y + Math.min(t.h / 2, LANE / 2 + PAD / 2));
        ctx.restore();
      });
    }
    function drawAxis(ctx, X, w) {
      ctx.fillStyle = "#ffffff"; ctx.fillRect(GUTTER, 0, w - GUTTER, 12);
      ctx.strokeStyle = "#c9ced8"; ctx.fillStyle = "#667085"; ctx.font = "10.5px system-ui, sans-serif";
      ctx.textBaseline = "top"; ctx.textAlign = "left";
      var step = u.niceStep(view.t1 - view.t0, Math.max(2, (w - GUTTER) / 110));
      for (var t = Math.ceil(view.t0 / step) * step; t <= view.t1; t += step) {
        var x = Math.round(X(t)) + 0.5;
        ctx.beginPath(); ctx.moveTo(x, 0); ctx.lineTo(x, 6); ctx.stroke();
        ctx.fillText(u.fmtTime(t), x + 3, 1);
      }
      ctx.beginPath(); ctx.moveTo(GUTTER, AXIS - 0.5); ctx.lineTo(w, AXIS - 0.5); ctx.stroke();
    }

    var pending = false;
    function redraw() { if (!pending) { pending = true; requestAnimationFrame(function () { pending = false; draw(); }); } }
    function timeAt(x) { return view.t0 + (x - GUTTER) * (view.t1 - view.t0) / (canvas.clientWidth - GUTTER); }
    function setView(t0, t1) {
      var span = Math.max(t1 - t0, 100), margin = end * 0.05;
      t0 = Math.max(t0, -margin); t1 = t0 + span;
      if (t1 > end + margin) { t1 = end + margin; t0 = Math.max(-margin, t1 - span); }
      view.t0 = t0; view.t1 = t1;
      redraw();
    }
    canvas.addEventListener("wheel", function (e) {
      e.preventDefault();
      var x = e.offsetX;
      if (x < GUTTER) return;
      var at = timeAt(x), f = Math.exp((e.deltaMode === 1 ? 30 : 1) * e.deltaY * 0.0016);
      setView(at - (at - view.t0) * f, at + (view.t1 - at) * f);
    }, { passive: false });
    var drag = null;
    canvas.addEventListener("mousedown", function (e) { drag = { x: e.clientX, t0: view.t0, t1: view.t1 }; canvas.classList.add("dragging"); });
    window.addEventListener("mouseup", function () { drag = null; canvas.classList.remove("dragging"); });
    window.addEventListener("mousemove", function (e) {
      if (!drag) return;
      var dt = (e.clientX - drag.x) * (drag.t1 - drag.t0) / (canvas.clientWidth - GUTTER);
      setView(drag.t0 - dt, drag.t1 - dt);
    });
    canvas.addEventListener("dblclick", function () { select.value = "-1"; setView(0, end); });
    reset.addEventListener("click", function () { select.value = "-1"; setView(0, end); });
    select.addEventListener("change", function () {
      var s = D.steps[Number(select.value)];
      if (!s) { setView(0, end); return; }
      var m = Math.max(s.dur * 0.03, 1000);
      setView(s.start - m, s.start + s.dur + m);
    });
    canvas.addEventListener("mousemove", function (e) { if (!drag) hover(e.offsetX, e.offsetY); });
    canvas.addEventListener("mouseleave", function () { tip.style.display = "none"; });
    function hover(x, yy) {
      var hit = x >= GUTTER ? find(x, yy) : -1;
      if (hit < 0) { tip.style.display = "none"; return; }
      var o = 6 * hit;
      tip.innerHTML = "";
      tip.appendChild(u.el("div", null, D.names[S[o + 2]]));
      var info = u.el("div", "k", CAT[S[o + 3]] + " \u00b7 " + u.fmtTime(S[o + 5]) + " \u00b7 at " + u.fmtTime(S[o + 4]));
      tip.appendChild(info);
      tip.style.display = "block";
      tip.style.left = Math.min(x + 14, canvas.clientWidth - 300) + "px";
      tip.style.top = (yy + 16) + "px";
    }
    function find(x, yy) {
      var t = null;
      tracks.forEach(function (tr) { if (yy >= tr.y && yy < tr.y + tr.h) t = tr; });
      if (!t) return -1;
      var lane = Math.floor((yy - t.y - PAD / 2) / LANE), at = timeAt(x), slop = 2 * (view.t1 - view.t0) / canvas.clientWidth;
      var best = -1, stop = t.first + t.count;
      for (var i = firstVisible(t, at - slop); i < stop; i++) {
        var o = 6 * i;
        if (S[o + 4] > at + slop) break;
        if (S[o + 1] === lane && S[o + 4] - slop <= at && S[o + 4] + S[o + 5] + slop >= at) best = i;
      }
      return best;
    }
    draw();
    window.addEventListener("resize", redraw);
    return { drawn: function () { return drawn; } };
  };

  try {
    main();
  } catch (e) {
    fail((e && e.stack) || e);
  }
})();
