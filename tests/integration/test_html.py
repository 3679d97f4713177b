"""report.html end to end: a program runs under torchprof-run, the page it leaves is
checked offline (self-contained, its data matches table.txt) and then loaded in headless
Chromium: the page's script must finish without errors (it says so in #tp-status), draw
timeline events and fill the table with table.txt's rows, and a screenshot must show
more than a blank page.

Chromium is required (scripts/setup.sh --tests installs it); TP_CHROMIUM names another binary.
A copy of each screenshot is kept as $TP_TMP_DIR/report_<scenario>.png."""

import html
import json
import os
import re
import shutil
import struct
import subprocess
import zlib

import tp
from tp import check, check_eq

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--enable-logging=stderr", "--v=0",
                  "--virtual-time-budget=5000"]


def chromium():
    path = os.environ.get("TP_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
    check(os.access(path, os.X_OK),
          f"Chromium is required for the report.html test and was not found ({path}); "
          "install it with scripts/setup.sh --tests (apt-get install chromium) or set TP_CHROMIUM")
    return path


def run_chromium(page, extra, what):
    profile = tp.fresh_dir("chromium_profile")
    if not any(a.startswith("--window-size=") for a in extra):
        extra = ["--window-size=1400,1000"] + extra
    argv = [chromium()] + CHROMIUM_FLAGS + [f"--user-data-dir={profile}"] + extra + ["file://" + page]
    proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                          timeout=120)
    err = proc.stderr.decode("utf-8", "replace")
    check_eq(proc.returncode, 0, f"exit code of chromium ({what}); stderr:\n{err[-3000:]}")
    console = [line for line in err.splitlines() if "CONSOLE" in line or "Uncaught" in line]
    check(not console, f"the page wrote to the console ({what}):\n" + "\n".join(console[:20]))
    return proc.stdout.decode("utf-8", "replace")


# ---------------------------------------------------------------------------
# The file itself


def page_data(text):
    m = re.search(r'<script type="application/json" id="tp-data">(.*?)</script>', text, re.S)
    check(m, "report.html has no <script type=\"application/json\" id=\"tp-data\">")
    try:
        return json.loads(m.group(1))
    except ValueError as e:
        raise tp.CheckFailed(f"the data block of report.html is not valid JSON: {e}")


def check_self_contained(text):
    check(text.startswith("<!DOCTYPE html>"), "report.html does not start with <!DOCTYPE html>")
    for pattern, what in [(r"<script[^>]*\ssrc\s*=", "an external script"),
                          (r"<link\b", "a <link> element"),
                          (r"<img\b", "an image"),
                          (r"@import", "a CSS @import"),
                          (r"url\(\s*['\"]?(https?:|//)", "a CSS url() to the network"),
                          (r"https?://", "a network address"),
                          (r"\bfetch\(|XMLHttpRequest", "a network request")]:
        m = re.search(pattern, text)
        check(not m, f"report.html must be self-contained but has {what}: {text[max(0, m.start() - 60):m.end() + 60]!r}"
              if m else "")
    check(text.count("</script>") == 2, f"report.html should have 2 <script> elements, has {text.count('</script>')}")


def parse_table_txt(result):
    """(columns, rows as lists of cells) of table.txt. Lenient about widths (a header
    may be wider than its column); the Name cell is the first column's width."""
    lines = result.table.split("\n")
    rule = lines[0]
    check(re.fullmatch(r"(-+  )+", rule), f"table.txt does not start with a rule: {rule!r}")
    name_width = len(rule.split("  ")[0])
    columns = re.split(r"\s{2,}", lines[1].strip())
    rows = []
    for line in lines[3:]:
        if line == rule:
            break
        rows.append([line[:name_width].strip()] + line[name_width:].split())
    return columns, rows


def torch_display(name):
    return name if len(name) < 52 else name[:52] + "..."


def check_data(result, data):
    slices = data["slices"]
    check(len(slices) % 6 == 0 and slices, "timeline slices missing or not 6 numbers each")
    n = len(slices) // 6
    tracks = data["tracks"]
    for i in range(n):
        track, lane, name, cat, start, dur = slices[6 * i:6 * i + 6]
        check(0 <= track < len(tracks), f"slice {i}: track {track} out of range")
        check(0 <= lane < tracks[track]["lanes"], f"slice {i}: lane {lane} >= lanes of its track")
        check(0 <= name < len(data["names"]), f"slice {i}: name {name} out of range")
        check(dur >= 0 and start >= 0, f"slice {i}: start {start} / dur {dur}")
    events = sum(p["events"] for p in result.summary["processes"])
    gpu = data["meta"]["gpu_events"]
    check_eq(n + data["omitted_slices"], events + gpu, "timeline slices + omitted = CPU events + GPU records")
    table_rows = data["table"]["rows"]
    header, txt_rows = parse_table_txt(result)
    check_eq(data["table"]["columns"], header, "the page's table columns against table.txt")
    check_eq([torch_display(r["cells"][0]) for r in table_rows], [r[0] for r in txt_rows],
             "the page's table rows (names, in order) against table.txt")
    for page_row, txt_row in zip(table_rows, txt_rows):
        check_eq(page_row["cells"][1:], txt_row[1:], f"cells of row {page_row['cells'][0]!r}")
    check_eq(len(data["steps"]), sum(p["steps"] for p in result.summary["processes"]), "steps in the page")
    return n


# ---------------------------------------------------------------------------
# In the browser


def status_attrs(dom):
    m = re.search(r'<div id="tp-status"([^>]*)>', dom)
    check(m, "no #tp-status element in the DOM Chromium dumped")
    return {k: html.unescape(v) for k, v in re.findall(r'([\w-]+)="([^"]*)"', m.group(1))}


def check_dom(dom, table_rows, expect_sections):
    attrs = status_attrs(dom)
    check_eq(attrs.get("data-status"), "ok", "#tp-status data-status (the page's script reports errors there)")
    drawn = int(attrs.get("data-timeline-events", "0"))
    check(drawn > 0, f"the timeline drew no events (data-timeline-events={drawn})")
    check_eq(int(attrs.get("data-table-rows", "-1")), table_rows, "table rows the page shows")
    m = re.search(r'<table class="ops" id="tp-table">.*?<tbody>(.*?)</tbody>', dom, re.S)
    check(m, "no operator table in the DOM")
    check_eq(m.group(1).count("<tr>"), table_rows, "<tr> rows in the operator table")
    check('<canvas id="tp-timeline"' in dom, "no timeline canvas in the DOM")
    for title in expect_sections:
        check(f"<h2>{title}</h2>" in dom, f"section {title!r} missing from the page")
    return drawn


def png_pixels(path, max_rows=None):
    """(width, height, bytes per pixel, rows) of an 8-bit RGB/RGBA PNG, stdlib only; with
    `max_rows`, only the rows above it are decoded."""
    with open(path, "rb") as f:
        data = f.read()
    check(data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG")
    pos, idat, header = 8, b"", None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    width, height, depth, color_type, _, _, interlace = header
    check(depth == 8 and color_type in (2, 6) and interlace == 0,
          f"unexpected PNG format depth={depth} color_type={color_type} interlace={interlace}")
    bpp = 4 if color_type == 6 else 3
    raw = zlib.decompress(idat)
    stride = width * bpp
    rows, prev = [], bytearray(stride)
    for y in range(height if max_rows is None else min(height, max_rows)):
        kind = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for x in range(stride):
            a = line[x - bpp] if x >= bpp else 0
            b = prev[x]
            c = prev[x - bpp] if x >= bpp else 0
            if kind == 1:
                line[x] = (line[x] + a) & 255
            elif kind == 2:
                line[x] = (line[x] + b) & 255
            elif kind == 3:
                line[x] = (line[x] + (a + b) // 2) & 255
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return width, height, bpp, rows


def check_screenshot(path):
    check(os.path.isfile(path), f"Chromium wrote no screenshot at {path}")
    size = os.path.getsize(path)
    check(size > 20_000, f"screenshot {path} is only {size} bytes")
    width, height, bpp, rows = png_pixels(path)
    check_eq((width, height), (1400, 1000), "screenshot size")
    colours = set()
    for y in range(0, height, 4):
        row = rows[y]
        for x in range(0, width * bpp, 4 * bpp):
            colours.add(row[x:x + 3])
    check(len(colours) > 50, f"screenshot has only {len(colours)} distinct colours: a blank or broken page")
    return len(colours)


# ---------------------------------------------------------------------------
# Scenarios


def check_report(result, scenario, expect_sections=()):
    page = result.file("report.html")
    check(os.path.isfile(page), f"no report.html in {result.out_dir}")
    with open(page, encoding="utf-8") as f:
        text = f.read()
    check_self_contained(text)
    data = page_data(text)
    slices = check_data(result, data)
    dom = run_chromium(page, ["--dump-dom"], "dump-dom")
    table_rows = len(data["table"]["rows"])
    drawn = check_dom(dom, table_rows, ("Timeline", "Top ops by self CPU time") + tuple(expect_sections))
    shot = os.path.join(result.out_dir, "report.png")
    run_chromium(page, [f"--screenshot={shot}"], "screenshot")
    colours = check_screenshot(shot)
    keep = os.path.join(os.environ.get("TP_TMP_DIR") or os.path.dirname(result.out_dir), f"report_{scenario}.png")
    shutil.copyfile(shot, keep)
    print(f"{scenario}: {slices} slices, {drawn} drawn, {table_rows} table rows, {colours} colours; "
          f"screenshot {keep}")
    return data


def demo():
    result = tp.profile("demo_train", options=["--row-limit", "0"])
    data = check_report(result, "demo")
    check(not data["meta"]["has_gpu"], "demo_train has no GPU data")


def report_again():
    """torchprof report writes report.html too, and honours --row-limit there as in table.txt."""
    first = tp.profile("demo_train")
    again = tp.fresh_dir("report_again")
    result = tp.run_report([first.out_dir, "-o", again, "--row-limit", "5", "-q"])
    check_eq(result.rc, 0, "exit code of torchprof report")
    result.out_dir = again
    data = check_report(result, "report_again")
    check_eq(len(data["table"]["rows"]), 5, "rows with --row-limit 5")


def warnings_banner():
    """Warnings (here torch's about a schedule with warmup=0) reach the banner."""
    result = tp.profile("nvtx_steps", options=["--schedule", "wait=1,warmup=0,active=2"])
    page = result.file("report.html")
    with open(page, encoding="utf-8") as f:
        data = page_data(f.read())
    summary_warnings = result.summary.get("warnings", [])
    check(summary_warnings, "expected summary.json to carry a warning for this schedule")
    for w in summary_warnings:
        check(w in data["warnings"], f"warning {w!r} is not in the page's banner: {data['warnings']}")
    dom = run_chromium(page, ["--dump-dom"], "dump-dom")
    check('id="tp-warnings"' in dom, "the warnings banner is missing from the page")
    check_eq(status_attrs(dom).get("data-status"), "ok", "#tp-status data-status")


def fake_cupti():
    path = os.environ.get("TP_FAKE_CUPTI_LIB") or tp.lib_path("fake_cupti/libfake_cupti.so")
    check(os.path.isfile(path), f"fake libcupti not built: {path}")
    return path


def run_gpu(workload, name=None):
    out_dir = os.path.join(tp.fresh_dir("html_gpu_" + (name or workload)), "out")
    env = dict(os.environ, TORCHPROF_CUPTI_LIB=fake_cupti())
    env.pop("FAKE_CUPTI_FAIL", None)
    result = tp.run_tool(["-o", out_dir, "--", tp.bin_path("gpu_workload"), workload], timeout=120, env=env)
    result.out_dir = out_dir
    check_eq(result.rc, 0, "exit code of torchprof-run gpu_workload " + workload)
    return result


def gpu():
    result = run_gpu("steps")
    data = check_report(result, "gpu", ("GPU busy and idle per step", "Top GPU kernels and copies by self CUDA time"))
    check(data["meta"]["has_gpu"], "gpu_workload steps: has_gpu")
    check({t["kind"] for t in data["tracks"]} >= {"cpu", "cuda_api", "gpu"},
          f"track kinds: {[t['kind'] for t in data['tracks']]}")
    check_eq(len(data["gpu_steps"]), 4, "GPU busy/idle rows (one per step)")
    for s in data["gpu_steps"]:
        # Each step runs _Z7forwardPf 500us and _Z8backwardPf 1000us.
        check_eq(s["busy"], 1_500_000, f"busy ns of {s['step']}")
        check(s["idle"] >= 0, f"idle ns of {s['step']}")
    kernels = {k["name"] for k in data["top_kernels"]}
    check(len(kernels) == 2, f"top kernels: {kernels}")


def gpu_memory():
    result = run_gpu("memory")
    data = check_report(result, "gpu_memory", ("Memory over time",))
    points = [p for s in data["memory"] for p in s["points"]]
    check(points, "no memory points in the page")
    check_eq(max(p[1] for p in points), 6291456, "peak of the memory series (b + c)")
    check_eq(points[-1][1], 0, "memory at the end")


def overview():
    """The overview comes first: the recommendations of summary.json, the breakdown bars."""
    result = run_gpu("loader")
    page = result.file("report.html")
    with open(page, encoding="utf-8") as f:
        data = page_data(f.read())
    check_eq(data["overview"], result.summary["overview"], "the page's overview against summary.json's")
    dom = run_chromium(page, ["--dump-dom"], "dump-dom")
    attrs = status_attrs(dom)
    check_eq(attrs.get("data-status"), "ok", "#tp-status data-status")
    check_eq(attrs.get("data-recommendations"), "1", "recommendations shown")
    check("<h2>Overview</h2>" in dom, "no Overview section")
    check(dom.find('id="tp-overview"') < dom.find('id="tp-timeline"'), "the overview comes before the timeline")
    check('<li data-id="dataloader">DataLoader takes ' in dom, "the DataLoader recommendation is on the page")


# ---------------------------------------------------------------------------
# As a person sees it: measured in the screenshot's pixels


def page_layout(page, size, fragment=""):
    """The page's #tp-status attributes, its geometry (step bars, legend swatches) decoded,
    at window `size` (width, height)."""
    dom = run_chromium(page + fragment, ["--dump-dom", f"--window-size={size[0]},{size[1]}"], "dump-dom")
    attrs = status_attrs(dom)
    check_eq(attrs.get("data-status"), "ok", "#tp-status data-status")
    for key in ("data-step-bars", "data-legends", "data-timeline-labels"):
        attrs[key] = json.loads(attrs.get(key, "null"))
    return dom, attrs


def screenshot(page, size, name, fragment="", rows=None):
    shot = os.path.join(tp.fresh_dir("shot"), name + ".png")
    run_chromium(page + fragment, [f"--screenshot={shot}", f"--window-size={size[0]},{size[1]}"], "screenshot")
    keep = os.path.join(os.environ.get("TP_TMP_DIR") or tp.fresh_dir("keep"), f"report_{name}.png")
    shutil.copyfile(shot, keep)
    print(f"screenshot {keep}")
    return png_pixels(shot, rows)


def pixel(image, x, y):
    _, _, bpp, rows = image
    return tuple(rows[y][x * bpp:x * bpp + 3])


TRACK_BG = (0xf0, 0xf2, 0xf5)  # .bars .track


def filled_width(image, bar):
    """Pixels of the bar's row, one pixel below its top (above the value's text), that are
    not the empty track's colour."""
    y = bar["y"] + 1
    return sum(1 for x in range(bar["x"], bar["x"] + bar["w"])
               if max(abs(a - b) for a, b in zip(pixel(image, x, y), TRACK_BG)) > 12)


def check_bars_scaled(image, bars, what):
    """Each step's bar is as long as its step: measured widths in the ratio of the
    durations, within 2% (and a pixel of rounding)."""
    check(len(bars) >= 3, f"{what}: step bars on the page: {bars}")
    longest = max(b["dur"] for b in bars)
    widths = [filled_width(image, b) for b in bars]
    full = bars[0]["w"]
    for bar, width in zip(bars, widths):
        expected = full * bar["dur"] / longest
        check(abs(width - expected) <= 0.02 * expected + 1,
              f"{what}: bar of a {bar['dur']} ns step is {width} px wide, expected {expected:.1f} "
              f"(longest step {longest} ns fills {full} px); all widths {widths}")
    return widths


def css_rgb(text):
    m = re.fullmatch(r"rgba?\((\d+), (\d+), (\d+)(?:, ([\d.]+))?\)", text)
    if not m or (m.group(4) is not None and float(m.group(4)) < 1):
        return None  # gradients and translucent swatches: not one colour to look for
    return tuple(int(m.group(i)) for i in (1, 2, 3))


def check_legends(image, legends, at_least, what):
    """Every opaque legend swatch shows its colour at its centre."""
    seen = 0
    for g in legends:
        colour = css_rgb(g["color"])
        if colour is None or g["y"] + g["h"] >= len(image[3]):
            continue
        got = pixel(image, g["x"] + g["w"] // 2, g["y"] + g["h"] // 2)
        check(max(abs(a - b) for a, b in zip(got, colour)) <= 10,
              f"{what}: legend swatch at {g} shows {got}, not {colour}")
        seen += 1
    check(seen >= at_least, f"{what}: {seen} legend swatches found in the image, expected {at_least} or more")


def check_no_clipping(attrs, what):
    check_eq(attrs.get("data-clipped"), "0", f"{what}: labels cut off without a tooltip")
    labels = attrs["data-timeline-labels"]
    check_eq(labels["overflow"], 0, f"{what}: timeline labels wider than their room ({labels})")


# Steps of 48 to 61 ms: a busy wait and a kernel each, steps of different lengths.
STEP_SCRIPT = ";".join(f"range:ProfilerStep#{i}{{busy:{busy}ms;kernel:_Z4stepPf:{kern}ms;sync}}"
                       for i, (busy, kern) in enumerate([(40, 8), (52, 9), (30, 20), (45, 3)]))


def step_bars():
    """A GPU run: the overview first, its step bars as long as their steps, legends drawn."""
    result = run_gpu(STEP_SCRIPT, "step_bars")
    page = result.file("report.html")
    dom, attrs = page_layout(page, (1400, 1400))
    check(dom.find('id="tp-overview"') < dom.find('id="tp-timeline"'), "with GPU work the overview comes first")
    bars = attrs["data-step-bars"]
    durs = [b["dur"] for b in bars[1:]]
    check(len(durs) == 4 and max(durs) > 1.15 * min(durs), f"steps of different lengths: {durs}")
    image = screenshot(page, (1400, 1400), "step_bars", rows=max(b["y"] for b in bars) + 40)
    widths = check_bars_scaled(image, bars, "GPU run")
    check_legends(image, attrs["data-legends"], 7, "GPU run")
    check_no_clipping(attrs, "GPU run")
    print(f"step bars {widths} px for {[b['dur'] for b in bars]} ns")


def cpu_only():
    """A CPU-only run: the timeline first, the all-CPU breakdown folded away (open with
    #breakdown, then its bars are as long as their steps), legends present."""
    result = tp.profile("demo_train", [8, 0.5])
    page = result.file("report.html")
    dom, attrs = page_layout(page, (1400, 1000))
    check(dom.find('id="tp-timeline"') < dom.find('id="tp-overview"'), "without GPU work the timeline comes first")
    check('<details id="tp-breakdown-fold">' in dom, "the breakdown is folded (a closed <details>)")
    check_eq(attrs["data-step-bars"], [], "step bars visible while folded")
    summary = re.search(r'<details id="tp-breakdown-fold"><summary>(.*?)</summary>', dom)
    share = summary and re.search(r"DataLoader (\d+\.\d)%", summary.group(1))
    # The share itself depends on how far the loader thread runs ahead on a loaded
    # machine; the fold must show the figure summary.json has.
    expected = result.summary["overview"]["breakdown"]["pct"]["dataloader"]
    check(share and abs(float(share.group(1)) - expected) <= 0.05,
          f"the fold's summary shows the DataLoader share {expected:.1f}%: {summary and summary.group(1)}")
    image = screenshot(page, (1400, 1000), "cpu_only")
    check_legends(image, attrs["data-legends"], 3, "CPU-only run, timeline legend")
    check_no_clipping(attrs, "CPU-only run")
    dom, attrs = page_layout(page, (1400, 1600), "#breakdown")
    bars = attrs["data-step-bars"]
    image = screenshot(page, (1400, 1600), "cpu_only_breakdown", "#breakdown", rows=max(b["y"] for b in bars) + 40)
    check_bars_scaled(image, bars, "CPU-only run, unfolded")


def process_tree():
    """fork and exec: the children under their parent, the exec'd image with what it came
    from, each with its command line and exit code."""
    result = tp.profile("nvtx_fork_exec", [2, 2, 2, 2])
    page = result.file("report.html")
    with open(page, encoding="utf-8") as f:
        data = page_data(f.read())
    procs = {p["pid"]: p for p in data["meta"]["processes"]}
    check_eq(len(procs), 3, "processes in the page")
    parent = [p for p in procs.values() if p["ppid"] not in procs]
    check_eq(len(parent), 1, f"one root process: {procs}")
    exec_child = [p for p in procs.values() if p["exec_from"]]
    check_eq(len(exec_child), 1, f"one process that exec'd: {procs}")
    check("--exec-child" in exec_child[0]["cmdline"], f"the exec'd image's command line {exec_child[0]['cmdline']}")
    dom, attrs = page_layout(page, (1400, 1400))
    check_eq(attrs.get("data-process-levels"), "2", "levels of the process tree")
    for p in procs.values():
        level = "0" if p is parent[0] else "1"
        check(f'<li data-pid="{p["pid"]}" data-level="{level}">' in dom, f"pid {p['pid']} at level {level}")
    check_eq(dom.count("exit code 0"), 3, "an exit code for each process")
    check("exec'd from: " in dom, "the exec'd process names the image it came from")
    screenshot(page, (1400, 1400), "fork_exec")
    check_no_clipping(attrs, "fork/exec run")


def empty_run():
    """A program that records nothing: the page says so, and what to do, instead of
    empty charts."""
    out_dir = os.path.join(tp.fresh_dir("html_empty"), "out")
    result = tp.run_tool(["-o", out_dir, "--", "ls", "/"])
    check_eq(result.rc, 0, "exit code of torchprof-run ls")
    page = os.path.join(out_dir, "report.html")
    dom, attrs = page_layout(page, (1400, 1000))
    m = re.search(r'<div class="banner empty" id="tp-empty">(.*?)</div>', dom, re.S)
    check(m, "no 'Nothing to show' banner")
    check("nvtxRangePushA" in html.unescape(m.group(1)), f"banner says what to do: {m.group(1)}")
    check('id="tp-timeline"' not in dom, "an empty timeline on a page with nothing to show")
    check("Nothing was recorded: `ls` ran for " in html.unescape(m.group(1)), f"banner, capitalised: {m.group(1)}")
    box = json.loads(attrs["data-empty"])
    check(box["y"] < 300 and box["w"] > 1000, f"the banner is near the top, across the page: {box}")
    image = screenshot(page, (1400, 1000), "empty")
    check_eq(pixel(image, box["x"] + 4, box["y"] + box["h"] // 2), (0xee, 0xf3, 0xfd), "the banner's colour on screen")
    check_no_clipping(attrs, "empty run")


def modules():
    """--with-modules: the module view, each instance once, indented by its depth, in the
    order summary.json gives them."""
    from test_python import clean_env, run_py, script

    r = run_py([script("modules_model.py"), "2"], options=["--with-modules"],
               env=clean_env(XDG_CACHE_HOME=tp.fresh_dir("cache")), timeout=300)
    dom, attrs = page_layout(r.file("report.html"), (1400, 1000))
    rows = r.summary["modules"]
    check_eq(attrs.get("data-module-rows"), str(len(rows)), "module view rows")
    table = dom[dom.find('id="tp-modules"'):]
    cells = re.findall(r'<td data-depth="(\d+)"[^>]*style="padding-left: (\d+)px;"[^>]*>([^<]*)</td>', table)
    check_eq([(name, int(depth)) for depth, _, name in cells], [(m["name"], m["depth"]) for m in rows],
             "module names and depths, in summary.json's order")
    check(all(int(px) == 6 + 14 * int(depth) for depth, px, _ in cells), f"indented by depth: {cells[:4]}")


SCENARIOS = {"modules": modules, "demo": demo, "report_again": report_again, "warnings": warnings_banner,
             "gpu": gpu, "gpu_memory": gpu_memory, "overview": overview, "step_bars": step_bars,
             "cpu_only": cpu_only, "process_tree": process_tree, "empty_run": empty_run}

if __name__ == "__main__":
    raise SystemExit(tp.main(SCENARIOS))
