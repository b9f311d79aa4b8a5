"""status: applies / conflicts (file:line) / already upstream."""

from __future__ import annotations

import git as gitpython
from gitfixture import PatchSpec, git
from rich.console import Console

from mlx_builder.source.series import find_series, load_index
from mlx_builder.source.status import check_patches, render_table, series_status, status_report, to_json


def _states(upstream, commit, series="main", target="all"):
    repo = gitpython.Repo(upstream.path)
    index = load_index(upstream.patches_dir)
    return series_status(repo, find_series(index, series), commit, target)


def test_all_apply_at_base(upstream):
    states = _states(upstream, upstream.commits["main_base"])
    assert [s.state for s in states] == ["applies"] * 3
    assert not any(s.three_way or s.conflicts for s in states)


def test_conflict_names_file_line_and_hunk(upstream):
    head = upstream.commit({"mlx/attention.cpp": ("attention_line_19 = 19;\n"
                                                  "attention_line_20 = 20;",
                                                  "rewritten();")}, "rewrite")
    before = git(upstream.path, "status", "--porcelain")
    states = _states(upstream, head)
    assert [s.state for s in states] == ["applies", "conflicts", "applies"]
    [conflict] = states[1].conflicts
    assert (conflict.file, conflict.line) == ("mlx/attention.cpp", 17)
    assert states[1].where().startswith("mlx/attention.cpp:17 (hunk #1 @@ -17,7")
    assert git(upstream.path, "status", "--porcelain") == before


def test_missing_file_is_a_conflict(upstream):
    upstream.git("rm", "-q", "mlx/backend/metal/sdpa.metal")
    upstream.git("commit", "-q", "-m", "drop metal")
    states = _states(upstream, upstream.git("rev-parse", "HEAD"))
    assert states[0].state == "conflicts"
    assert states[0].conflicts[0].file == "mlx/backend/metal/sdpa.metal"
    assert states[0].conflicts[0].line is None


def test_upstream_by_reverse_apply(upstream):
    head = upstream.commit({"mlx/backend/metal/sdpa.metal": (
        "metal_line_10 = 10;", "metal_line_10 = 256; // bd=256")}, "merged")
    states = _states(upstream, head)
    assert [s.state for s in states] == ["upstream", "applies", "applies"]
    assert states[0].detail == "reverse-applies"


def test_upstream_when_empty_after_three_way(upstream):
    head = upstream.commit({"mlx/backend/metal/sdpa.metal": (
        "metal_line_10 = 10;\nmetal_line_11 = 11;\nmetal_line_12 = 12;",
        "metal_line_10 = 256; // bd=256\nmetal_line_11 = 11;\n"
        "metal_line_12 = 12; // reworded upstream")}, "merged differently")
    states = _states(upstream, head)
    assert states[0].state == "upstream"
    assert states[0].detail == "empty after 3-way merge"


def test_three_way_applies(upstream):
    head = upstream.commit({"mlx/attention.cpp": (
        "attention_line_23 = 23;", "attention_line_23 = 23; // context moved")},
        "context change")
    states = _states(upstream, head)
    assert states[1].state == "applies" and states[1].three_way


def test_later_patches_see_earlier_ones(upstream):
    upstream.add_series("stacked", "v0.1.0", ">=0.1.9,<0.1.10", [
        PatchSpec("0001-first.patch", "all", "first",
                  {"README.md": ("# fixture mlx", "# first")}),
        PatchSpec("0002-second.patch", "all", "second",
                  {"README.md": ("# first", "# second")})])
    states = _states(upstream, upstream.commits["v0.1.0"], series="stacked")
    assert [s.state for s in states] == ["applies", "applies"]
    # alone, the second patch does not apply to the base
    repo = gitpython.Repo(upstream.path)
    stacked = find_series(load_index(upstream.patches_dir), "stacked")
    alone = check_patches(repo, upstream.commits["v0.1.0"], stacked.patches[1:])
    assert alone[0].state == "conflicts"


def test_report_every_series_and_moved_main(upstream):
    upstream.commit({"README.md": ("more", "more, newer")}, "newer main")
    reports = status_report(upstream.settings())
    seen = [(r.series.name, r.ref.kind, r.ref.ref) for r in reports]
    assert seen == [("v0.1", "tag", "v0.1.0"), ("v0.2", "tag", "v0.2.0"),
                    ("main", "commit", upstream.commits["main_base"]),
                    ("main", "branch", "main")]
    assert all(r.ok for r in reports)
    data = to_json(reports, "fixture")
    assert data["reports"][0]["patches"][0]["state"] == "applies"
    assert data["reports"][3]["version"] == "0.2.1"
    console = Console(record=True, width=200)
    console.print(render_table(reports))
    text = console.export_text()
    assert "0020-cuda-tiled-flash-attention.patch" in text and "v0.2.0" in text


def test_report_one_ref(upstream):
    [report] = status_report(upstream.settings(), "0.2.0", target="metal")
    assert report.series.name == "v0.2"
    assert [s.patch.target for s in report.statuses] == ["metal", "all"]


def test_patch_shared_at_offsets_applies_as_is_at_each_base(upstream):
    """0010 of v0.1 shared with a series whose base has two more lines above
    its hunk: it applies there at an offset, without a 3-way merge."""
    upstream.commit({"mlx/attention.cpp": ("attention_line_1 = 1;\n",
                                           "attention_line_1 = 1;\nextra();\n"
                                           "extra();\n")},
                    "shifted", tag="v0.1.1", branch="v0.1-fixes")
    upstream.add_series("v0.1.1", "v0.1.1", ">=0.1.1,<0.1.2")
    upstream.share("0010-chunked-sdpa-fallback.patch", ["v0.1", "v0.1.1"])
    for series, base in (("v0.1", "v0.1.0"), ("v0.1.1", "v0.1.1")):
        states = _states(upstream, upstream.commits[base], series=series)
        assert [(s.state, s.three_way) for s in states] == [("applies", False)] * 3
