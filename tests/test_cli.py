"""The command line: commands, output, and exit codes."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from gitfixture import git, tree_digest

from mlx_builder import errors
from mlx_builder.cli import cli, hoist_global_options, main


@pytest.fixture
def run(isolated_env, upstream, capsys):
    """Run ``mlx-builder ARGS`` against the fixture upstream; return
    (exit code, stdout, stderr)."""
    isolated_env.setenv("MLX_BUILDER_MLX_REPO", str(upstream.path))
    isolated_env.setenv("MLX_BUILDER_PATCHES", str(upstream.patches_dir))
    isolated_env.setenv("MLX_BUILDER_CACHE", str(upstream.root / "cache"))
    isolated_env.setenv("MLX_BUILDER_WORK", str(upstream.root / "work"))

    def invoke(*args: str) -> tuple[int, str, str]:
        with pytest.raises(SystemExit) as exc:
            main(list(args))
        out = capsys.readouterr()
        return exc.value.code, out.out, out.err

    return invoke


def test_help_lists_core_commands(run):
    code, out, _ = run("--help")
    assert code == 0
    for name in ("apply", "status", "export", "checkout"):
        assert f"  {name} " in out


def test_exit_codes_are_distinct():
    classes = [c for c in vars(errors).values() if isinstance(c, type)
               and issubclass(c, errors.MlxBuilderError)]
    codes = [c.exit_code for c in classes]
    assert len(codes) == len(set(codes)) and len(classes) >= 10


def test_status_json(run, upstream):
    code, out, _ = run("status", "--json")
    assert code == 0
    data = json.loads(out)
    assert data["upstream"] == str(upstream.path)
    assert [r["series"] for r in data["reports"]] == ["v0.1", "v0.2", "main", "main"]
    assert [r["kind"] for r in data["reports"]][2:] == ["commit", "branch"]
    assert {p["state"] for r in data["reports"] for p in r["patches"]} == {"applies"}
    code, out, _ = run("status", "--mlx", "0.2.0", "--target", "cuda", "--json")
    [report] = json.loads(out)["reports"]
    assert (report["series"], report["commit"]) == ("v0.2", upstream.commits["v0.2.0"])
    assert [p["target"] for p in report["patches"]] == ["all", "cuda"]


def test_status_table_and_conflict_exit(run, upstream):
    code, out, _ = run("status")
    assert code == 0 and "mlx-builder patch status" in out and "v0.1.0" in out
    upstream.commit({"mlx/attention.cpp": ("attention_line_20 = 20;", "x();")},
                    "conflict")
    code, out, err = run("status", "--mlx", "main", "--json")
    assert code == 13
    patches = json.loads(out)["reports"][0]["patches"]
    assert patches[1]["state"] == "conflicts"
    assert patches[1]["conflicts"][0] == {
        "file": "mlx/attention.cpp", "line": 17,
        "hunk": "#1 @@ -17,7 +17,7 @@"}
    assert "0010-chunked-sdpa-fallback.patch" in err


def test_apply_prints_tree_and_conflict_is_atomic(run, upstream, tmp_path):
    dest = tmp_path / "wt"
    code, out, _ = run("apply", "--mlx", "main", "--dest", str(dest))
    assert code == 0
    assert f"work tree: {dest}" in out
    assert upstream.commits["main"] in out and "series:    main [all]" in out
    assert out.count("  applied  ") == 3
    before = tree_digest(dest)
    upstream.commit({"mlx/backend/cuda/sdpa.cu": ("cuda_line_10 = 10;", "y();")},
                    "conflict")
    code, out, err = run("apply", "--mlx", "main", "--dest", str(dest))
    assert code == 13
    assert "0020-cuda-tiled-flash-attention.patch" in err
    assert "mlx/backend/cuda/sdpa.cu:7" in err
    assert tree_digest(dest) == before
    code, out, _ = run("apply", "--mlx", "main", "--target", "metal", "--json",
                       "--dest", str(tmp_path / "metal"))
    assert code == 0
    assert json.loads(out)["applied"] == [
        "0001-metal-steel-attention-bd256.patch", "0010-chunked-sdpa-fallback.patch"]


@pytest.mark.parametrize("args, code", [
    (("apply", "--mlx", "0.9.9"), 11),
    (("apply", "--mlx", "0.1.0", "--series", "nope"), 12),
    (("apply", "--mlx", "0.1.0", "--target", "rocm"), 2),
])
def test_apply_errors(run, args, code):
    got, _, err = run(*args)
    assert got == code
    assert err.strip()


def test_apply_unsupported_version(run, upstream):
    git(upstream.path, "tag", "v0.0.5", upstream.commits["v0.1.0"])
    code, _, err = run("apply", "--mlx", "0.0.5")
    assert code == 12 and "no patch series covers MLX v0.0.5" in err
    assert "v0.1: versions >=0.1.0,<0.2" in err


def test_apply_dirty_exit(run, tmp_path):
    dest = tmp_path / "wt"
    assert run("apply", "--mlx", "0.1.0", "--dest", str(dest))[0] == 0
    (dest / "README.md").write_text("mine\n")
    code, _, err = run("apply", "--mlx", "0.1.0", "--dest", str(dest))
    assert code == 14 and "README.md" in err


def test_export_check(run, tmp_path):
    dest = tmp_path / "wt"
    run("apply", "--mlx", "0.1.0", "--dest", str(dest))
    code, out, _ = run("export", "--series", "v0.1", "--from", str(dest), "--check")
    assert code == 0 and "up to date: 3 patch(es)" in out
    git(dest, "commit", "-q", "--amend", "-m", "cuda: renamed subject")
    code, _, err = run("export", "--series", "v0.1", "--from", str(dest), "--check")
    assert code == 20
    assert "missing from branch: 0020-cuda-tiled-flash-attention.patch" in err
    assert "extra (not in index.toml): 0011-cuda-renamed-subject.patch" in err


def test_checkout(run, upstream, tmp_path):
    code, out, _ = run("checkout")
    assert code == 0 and upstream.commits["main"] in out and "tags:   2" in out
    code, out, _ = run("checkout", "--mlx", "0.1.0", "--dest", str(tmp_path / "c"))
    assert code == 0
    assert git(tmp_path / "c", "rev-parse", "HEAD") == upstream.commits["v0.1.0"]


def _truncate_at_file_boundary(path):
    """Cut a patch before its last ``diff --git``: git would still apply it
    (one file fewer), so only the recorded sha256 can tell."""
    text = path.read_text()
    cut = text.rindex("\ndiff --git ")
    assert text.count("\ndiff --git ") >= 2
    path.write_text(text[:cut + 1])


@pytest.mark.parametrize("args", [
    ("status",),
    ("status", "--mlx", "0.1.0"),
    ("apply", "--mlx", "0.1.0"),
    ("bundle", "--mlx", "0.1.0", "--target", "cpu", "--out", "BUNDLES"),
    ("export", "--series", "v0.1", "--from", "TREE", "--check"),
])
def test_truncated_patch_is_refused(run, upstream, tmp_path, args):
    tree = tmp_path / "tree"
    assert run("apply", "--mlx", "0.1.0", "--dest", str(tree))[0] == 0
    patch = upstream.patches_dir / "v0.1" / "0020-cuda-tiled-flash-attention.patch"
    _truncate_at_file_boundary(patch)
    before = tree_digest(upstream.root)
    args = tuple(str(tmp_path / "b") if a == "BUNDLES" else
                 str(tree) if a == "TREE" else a for a in args)
    code, _out, err = run(*args)
    assert code == errors.SeriesError.exit_code
    assert "v0.1/0020-cuda-tiled-flash-attention.patch does not match its " \
           "sha256" in err
    assert tree_digest(upstream.root) == before


@pytest.mark.parametrize("given, meant", [
    (["build", "--target", "cpu", "-v"], ["-v", "build", "--target", "cpu"]),
    (["status", "-q", "--json"], ["-q", "status", "--json"]),
    (["install", "--dry-run", "--offline", "-j", "3", "--jobs=2", "-vv"],
     ["--offline", "-j", "3", "--jobs=2", "-vv", "install", "--dry-run"]),
    (["--cache-dir", "c", "index", "d", "--config", "x.toml"],
     ["--cache-dir", "c", "--config", "x.toml", "index", "d"]),
    # a value of the command's own option is never taken for a global flag
    (["install", "--pip-arg", "-v", "--mlx", "-q"], ["install", "--pip-arg", "-v", "--mlx", "-q"]),
    (["test", "w.whl", "--", "-v"], ["test", "w.whl", "--", "-v"]),
    (["-j4", "nightly", "--targets", "cpu"], ["-j4", "nightly", "--targets", "cpu"]),
    (["nosuchcommand", "-v"], ["nosuchcommand", "-v"]),
])
def test_global_options_after_the_command_are_moved_before_it(given, meant):
    assert hoist_global_options(cli, given) == meant


def test_verbose_after_the_command_takes_effect(tmp_path):
    res = CliRunner().invoke(cli, ["--cache-dir", str(tmp_path), "index", str(tmp_path), "-q",
                                   "-v"])
    assert isinstance(res.exception, errors.ConfigError) and "-v and -q together" in str(res.exception)
