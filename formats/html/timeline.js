// report.html's timeline (formats/html_report.cpp embeds it before report.js): one row per
// track (CPU thread, CUDA API of a thread, GPU stream), overlapping slices stacked in
// lanes; wheel zooms around the pointer, drag pans. A label is drawn whole, or shortened
// with an ellipsis to what fits, or not at all; the tooltip always has the full name.
(function () {
  "use strict";

  var TRACK_COLORS = { cpu: "#3b6fd8", cuda_api: "#c77d1a", gpu: "#2f9e6b" };
  var CAT = ["range", "mark", "CUDA API", "kernel", "memcpy", "memset", "sync"];

  // `text` as drawn in `width` px: whole, or a prefix and "…", or "" when not even two
  // characters fit. Counts what it did in `stats`.
  function fitText(ctx, text, width, stats) {
    if (width <= 0) return "";
    if (ctx.measureText(text).width <= width) { stats.whole++; return text; }
    var lo = 0, hi = text.length;
    while (lo < hi) {
      var mid = (lo + hi + 1) >> 1;
      if (ctx.measureText(text.slice(0, mid) + "\u2026").width <= width) lo = mid; else hi = mid - 1;
    }
    if (lo < 2) { stats.hidden++; return ""; }
    stats.shortened++;
    return text.slice(0, lo) + "\u2026";
  }
  // Draws `text` at (x, y) if it fits in `width`; records any label wider than its room.
  function drawLabel(ctx, text, x, y, width, stats) {
    var shown = fitText(ctx, text, width, stats);
    if (!shown) return;
    if (ctx.measureText(shown).width > width + 0.5) stats.overflow++;
    ctx.fillText(shown, x, y);
  }

  function legend(u) {
    var box = u.el("div", "legend timeline-legend");
    box.id = "tp-timeline-legend";
    function item(style, text, cls) {
      var s = u.el("span"), i = u.el("i", cls || null);
      for (var k in style) i.style[k] = style[k];
      s.appendChild(i);
      s.appendChild(document.createTextNode(text));
      box.appendChild(s);
    }
    item({ background: TRACK_COLORS.cpu }, "CPU thread", "stripe");
    item({ background: TRACK_COLORS.cuda_api }, "its CUDA API calls", "stripe");
    item({ background: TRACK_COLORS.gpu }, "GPU stream", "stripe");
    item({ background: "linear-gradient(90deg,#e9a3a3,#a3c4e9,#b5e3a1)" }, "a slice's colour is its name's");
    item({ background: "#667085" }, "mark (an instant)", "mark");
    item({ background: "rgba(59,111,216,0.18)", border: "1px dashed rgba(59,111,216,0.55)" }, "recorded step");
    item({ background: "rgba(0,0,0,0.07)", border: "1px dashed rgba(59,111,216,0.55)" }, "step not recorded");
    item({ background: "rgba(46,160,67,0.75)" }, "capture window", "bar");
    return box;
  }

  window.TorchprofTimeline = function (root, D, u) {
    var c = u.card(root, "Timeline");
    c.id = "tp-timeline-card";
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
    bar.appendChild(u.el("span", "hint", "wheel: zoom \u00b7 drag: pan \u00b7 double-click: whole run \u00b7 " +
      "hover: full name"));
    c.appendChild(bar);
    c.appendChild(legend(u));
    var wrap = u.el("div", "timeline-wrap"), canvas = u.el("canvas"), tip = u.el("div", "tooltip");
    canvas.id = "tp-timeline";
    wrap.appendChild(canvas);
    wrap.appendChild(tip);
    c.appendChild(wrap);
    var note = u.el("div", "note");
    c.appendChild(note);

    var S = D.slices, N = S.length / 6, GUTTER = 250, AXIS = 26, LANE = 16, PAD = 8;
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
    var labels = { whole: 0, shortened: 0, hidden: 0, overflow: 0 };
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
      labels = { whole: 0, shortened: 0, hidden: 0, overflow: 0 };
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
        if (wid > 16) {
          ctx.fillStyle = "#1d2330";
          drawLabel(ctx, D.names[S[o + 2]], x0 + 3, yy + (LANE - 2) / 2 + 0.5, Math.min(wid, w - x0) - 6, labels);
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
        ctx.fillStyle = "rgba(30,110,45,1)";
        drawLabel(ctx, "window " + w.id + " (" + w.source + ")", x0 + 3, AXIS + 5, x1 - x0 - 6, labels);
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
        var left = Math.max(x0, GUTTER), room = Math.min(x1, g.w) - left - 6;
        if (room > 14) {
          ctx.fillStyle = "#3b6fd8";
          drawLabel(ctx, s.name, left + 3, 14, room, labels);
        }
      });
    }
    function drawGutter(ctx, g) {
      ctx.fillStyle = "#f8f9fb"; ctx.fillRect(0, 0, GUTTER, g.h);
      ctx.strokeStyle = "#e3e6ec";
      ctx.beginPath(); ctx.moveTo(GUTTER - 0.5, 0); ctx.lineTo(GUTTER - 0.5, g.h); ctx.stroke();
      ctx.font = "11.5px system-ui, sans-serif";
      ctx.textBaseline = "middle";
      tracks.forEach(function (t) {
        ctx.beginPath(); ctx.moveTo(0, t.y + t.h - 0.5); ctx.lineTo(g.w, t.y + t.h - 0.5); ctx.stroke();
        ctx.fillStyle = TRACK_COLORS[t.info.kind] || "#999"; ctx.fillRect(6, t.y + 5, 3, t.h - 10);
        ctx.fillStyle = "#1d2330";
        drawLabel(ctx, t.info.name, 14, t.y + Math.min(t.h / 2, LANE / 2 + PAD / 2), GUTTER - 22, labels);
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
    function show(lines, x, yy) {
      tip.innerHTML = "";
      tip.appendChild(u.el("div", null, lines[0]));
      if (lines[1]) tip.appendChild(u.el("div", "k", lines[1]));
      tip.style.display = "block";
      tip.style.left = Math.min(x + 14, canvas.clientWidth - 300) + "px";
      tip.style.top = (yy + 16) + "px";
    }
    function hover(x, yy) {
      if (x < GUTTER) {
        var tr = trackAt(yy);
        if (tr) show([tr.info.name, tr.info.kind === "gpu" ? "GPU stream" : tr.info.kind === "cuda_api" ?
          "CUDA API calls of this thread" : "CPU thread"], x, yy); else tip.style.display = "none";
        return;
      }
      var hit = find(x, yy);
      if (hit < 0) { tip.style.display = "none"; return; }
      var o = 6 * hit;
      show([D.names[S[o + 2]], CAT[S[o + 3]] + " \u00b7 " + u.fmtTime(S[o + 5]) + " \u00b7 at " + u.fmtTime(S[o + 4])], x, yy);
    }
    function trackAt(yy) {
      var t = null;
      tracks.forEach(function (tr) { if (yy >= tr.y && yy < tr.y + tr.h) t = tr; });
      return t;
    }
    function find(x, yy) {
      var t = trackAt(yy);
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
    return {
      card: c,
      drawn: function () { return drawn; },
      labels: function () { return labels; },
    };
  };
})();
