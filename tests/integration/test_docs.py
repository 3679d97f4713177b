"""The documentation against the project: README.md stays short (<= 250 lines of <= 100
characters), every relative link of README.md and docs/ leads to a file and heading that
exist, no file of the repository points outside it, and the README's quick start prints
what the README shows when it is run."""

import os
import re
import subprocess
import tempfile

import tp
from tp import check, check_eq

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))


def read(rel):
    with open(os.path.join(ROOT, rel), encoding="utf-8") as f:
        return f.read()


def doc_files():
    docs = sorted(os.path.join("docs", n) for n in os.listdir(os.path.join(ROOT, "docs")) if n.endswith(".md"))
    return ["README.md"] + docs


def anchors(text):
    """GitHub's heading ids: lower case, punctuation dropped, spaces to hyphens."""
    out = set()
    in_code = False
    for line in text.splitlines():
        if line.startswith("```"):
            in_code = not in_code
        m = None if in_code else re.match(r"#+ (.*)", line)
        if m:
            out.add(re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-"))
    return out


def readme_size():
    lines = read("README.md").splitlines()
    check(len(lines) <= 250, f"README.md has {len(lines)} lines (at most 250)")
    long = [(i + 1, len(line)) for i, line in enumerate(lines) if len(line) > 100]
    check(not long, f"README.md lines longer than 100 characters (line, length): {long}")
    for name in ("gpu.md", "python.md", "outputs.md", "performance.md", "reliability.md", "design.md"):
        check(os.path.isfile(os.path.join(ROOT, "docs", name)), f"docs/{name} is missing")


def links():
    checked = 0
    for rel in doc_files():
        text = read(rel)
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+://", target) or target.startswith("mailto:"):
                continue
            path, _, anchor = target.partition("#")
            dest = os.path.normpath(os.path.join(ROOT, os.path.dirname(rel), path)) if path else os.path.join(ROOT, rel)
            check(dest.startswith(ROOT + os.sep), f"{rel}: link {target} leads outside the repository")
            check(os.path.exists(dest), f"{rel}: link {target}: no such file")
            if anchor:
                check(dest.endswith(".md"), f"{rel}: link {target}: an anchor into a file that is not markdown")
                with open(dest, encoding="utf-8") as f:
                    check(anchor in anchors(f.read()), f"{rel}: link {target}: no heading #{anchor} there")
            checked += 1
    check(checked >= 15, f"only {checked} links checked")
    print(f"{checked} links checked")


def stands_alone():
    """No tracked file names the material beside the repository (its shared/ folder)."""
    proc = subprocess.run(["git", "-C", ROOT, "grep", "-n", "-I", r"\.\./" + "shared"], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, timeout=60)
    if proc.returncode == 128:
        print("not a git checkout: skipped")
        return
    check_eq(proc.stdout.decode(), "", "files that point outside the repository")


def quick_start():
    """The README's quick start, run as written (build/bin is the build's bin directory):
    the demo's line, the table's rows in the README's order, and the files it names."""
    text = read("README.md")
    block = re.search(r"## Quick start\n\n```console\n(.*?)```", text, re.S)
    check(block, "README.md has no ```console block under ## Quick start")
    lines = block.group(1).splitlines()
    check(lines[0].startswith("$ "), f"first line of the quick start: {lines[0]!r}")
    argv = lines[0][2:].split()
    argv = [tp.bin_path(a[len("build/bin/"):]) if a.startswith("build/bin/") else a for a in argv]
    cwd = tempfile.mkdtemp(prefix="quick_start.", dir=tp.fresh_dir("docs"))
    proc = subprocess.run(argv, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    check_eq(proc.returncode, 0, f"exit code of {' '.join(argv)}: {proc.stderr.decode()[-2000:]}")
    check_eq(proc.stdout.decode(), lines[1] + "\n", "the demo's output line, as the README shows it")
    shown = [line.split()[0] for line in lines if re.match(r"\s+\S+\s+\d+\.\d\d%", line)]
    got = [line.split()[0] for line in proc.stderr.decode().splitlines() if re.match(r"\s+\S+\s+\d+\.\d\d%", line)]
    check_eq(sorted(got), sorted(shown), "the table's rows against the README's")
    check("Self CPU time total: " in proc.stderr.decode(), "no trailer line")
    what = re.search(r"## What to open\n\n```\n(.*?)```", text, re.S)
    check(what, "README.md has no file list under ## What to open")
    for line in what.group(1).splitlines():
        path = line.split()[0]
        check(os.path.exists(os.path.join(cwd, path)), f"the README names {path}, which the quick start did not make")


SCENARIOS = {"readme_size": readme_size, "links": links, "stands_alone": stands_alone, "quick_start": quick_start}

if __name__ == "__main__":
    raise SystemExit(tp.main(SCENARIOS))
