"""The repository stays a product: no large files, docs/ holds reference pages
and the performance data only, and product text carries no work-log or
tracker numbers (what a reader of this repository cannot look up)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MAX_BYTES = 1 << 20
# A numbered reference to our own work log or tracker: the word session or
# issue followed by a number, "#12" (not git's "hunk #1" / "#1 @@", not
# owner/repo#123), a results folder, a device-call script name like s27d.sh.
TRACKER = re.compile(r"\b(?:session|issue)s? [0-9]+"
                     r"|(?<![\w/&])(?<!hunk )#[0-9]+\b(?! @@)"
                     r"|docs/results/"
                     r"|\bs[0-9]{2}[a-z]\.sh\b", re.IGNORECASE)
THIS = "tests/test_repository.py"   # names the patterns it looks for


def tracked() -> list[str]:
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True,
                             check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    return [p for p in out.decode().split("\0") if p and (ROOT / p).is_file()]


def findings(paths: list[str]) -> list[str]:
    out = []
    for path in paths:
        try:
            text = (ROOT / path).read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue  # binary
        for number, line in enumerate(text.splitlines(), 1):
            for match in TRACKER.finditer(line):
                out.append(f"{path}:{number}: {match.group(0)!r}")
    return out


def test_no_tracked_file_is_over_1_mib():
    large = [f"{p} ({(ROOT / p).stat().st_size} bytes)" for p in tracked()
             if (ROOT / p).stat().st_size > MAX_BYTES]
    assert not large, "keep large files out of git: " + ", ".join(large)


def test_docs_holds_reference_pages_and_the_performance_data_only():
    stray = []
    for path in (p for p in tracked() if p.startswith("docs/")):
        parts = path.split("/")
        if len(parts) == 2 and parts[1].endswith(".md"):
            continue
        if len(parts) == 3 and parts[1] == "perf" and re.fullmatch(r"[a-z0-9-]+\.(json|png)", parts[2]):
            continue
        stray.append(path)
    assert not stray, ("docs/ holds the reference pages (docs/*.md) and the "
                       "performance data (docs/perf/<gpu>.json and .png); per-run "
                       "results belong elsewhere: " + ", ".join(stray[:20]))


def test_product_text_has_no_work_log_or_tracker_numbers():
    paths = [p for p in tracked() if p != THIS]
    found = findings(paths)
    assert not found, ("say what and why instead of a work-log or tracker "
                       "number:\n" + "\n".join(found))


# The positive examples are assembled so that this file itself stays clean for
# plain greps of the same kind.
SESSION, ISSUE = "sess" + "ion", "Iss" + "ue"


@pytest.mark.parametrize("text,hit", [
    (f"{ISSUE} 6's bound", True), (f"{SESSION}s 12-14", True), ("see #12", True),
    ("docs/results/h200/x.md", True), ("bash s27d.sh", True),
    ("hunk #1 @@ -7,7", False), ('"#1 @@ -17,7 +17,7 @@"', False), ("ml-explore/mlx#4506", False),
    ("an issue with 3 parts", False), ("sm_90a", False), ("&#10003;", False)])
def test_the_pattern_finds_tracker_numbers_only(text, hit):
    assert bool(TRACKER.search(text)) is hit
