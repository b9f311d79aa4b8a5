"""A small git "upstream MLX" with tags and patch series, for tests.

The fixtures that serve it (``upstream``, ``make_upstream``, ``isolated_env``)
are in tests/conftest.py; the helpers here are imported with
``from gitfixture import git, tree_digest, PatchSpec, Upstream`` (a module
name of its own: mlx_builder/suites/sdpa has another conftest).

The default fixture (built once per session, copied per test):

* upstream repo ``<tmp>/upstream`` (non-bare, branch ``main``) with
  ``mlx/version.h``, ``mlx/attention.cpp``, ``mlx/backend/cuda/sdpa.cu``,
  ``mlx/backend/metal/sdpa.metal``, ``README.md``, 40 numbered lines each;
* tags ``v0.1.0`` and ``v0.2.0`` (changes attention.cpp line 3), then on main
  ``main_base`` (version.h 0.2.1) and ``main`` (a README change);
* ``<tmp>/patches/index.toml`` with series ``v0.1`` (>=0.1.0,<0.2, base
  v0.1.0), ``v0.2`` (>=0.2.0,<0.3, base v0.2.0) and ``main`` (base
  main_base), each with 0001-metal (metal, sdpa.metal line 10), 0010-chunked
  (all, attention.cpp line 20) and 0020-cuda (cuda, sdpa.cu line 10 plus a
  new file mlx/backend/cuda/tiled.cu).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from mlx_builder.settings import Settings
from mlx_builder.source.series import without_offsets

IDENTITY = {
    "GIT_AUTHOR_NAME": "Fixture Author", "GIT_AUTHOR_EMAIL": "author@example.com",
    "GIT_COMMITTER_NAME": "Fixture Author",
    "GIT_COMMITTER_EMAIL": "author@example.com",
    "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1",
}
FORMAT_PATCH = ["format-patch", "-1", "--stdout", "--zero-commit",
                "--no-signature", "--no-stat", "--full-index", "--no-numbered",
                "--no-renames", "--diff-algorithm=myers"]
TRAILERS = ("Origin: mlx-builder tests\nForwarded: not-needed\n"
            "Bug: https://example.com/bug/1")


def git(cwd: Path, *args: str, date: str = "2024-01-01T00:00:00+00:00",
        check: bool = True, strip: bool = True) -> str:
    """Run git with a fixed identity and date; return stdout (stripped)."""
    env = {**os.environ, **IDENTITY, "GIT_AUTHOR_DATE": date,
           "GIT_COMMITTER_DATE": date}
    res = subprocess.run(["git", *args], cwd=cwd, env=env, text=True,
                         capture_output=True)
    if check and res.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed: {res.stderr}")
    return res.stdout.strip() if strip else res.stdout


def numbered(prefix: str, n: int = 40) -> str:
    return "".join(f"{prefix}_line_{i} = {i};\n" for i in range(1, n + 1))


def version_h(version: str) -> str:
    major, minor, patch = version.split(".")
    return (f"#pragma once\n#define MLX_VERSION_MAJOR {major}\n"
            f"#define MLX_VERSION_MINOR {minor}\n"
            f"#define MLX_VERSION_PATCH {patch}\n")


def tree_digest(path: Path) -> str:
    """Hash of every file under ``path`` (tracked, untracked, ignored) plus
    HEAD and all refs, so any change to the tree or its branches shows."""
    digest = hashlib.sha256()
    for file in sorted(p for p in Path(path).rglob("*")
                       if ".git" not in p.relative_to(path).parts):
        rel = file.relative_to(path).as_posix()
        digest.update(rel.encode() + b"\0")
        if file.is_file():
            digest.update(file.read_bytes())
    if (Path(path) / ".git").exists():
        digest.update(git(path, "rev-parse", "HEAD", check=False).encode())
        digest.update(git(path, "symbolic-ref", "-q", "HEAD", check=False).encode())
        digest.update(git(path, "for-each-ref").encode())
    return digest.hexdigest()


Edit = Mapping[str, "tuple[str | None, str]"]


@dataclass
class PatchSpec:
    """One patch: ``edits`` maps path -> (old text or None for a new file,
    new text); the first occurrence of old is replaced."""

    file: str
    target: str
    subject: str
    edits: Edit
    body: str = "Why: tests need a patch here."
    upstream: str = "not-forwarded"
    trailers: bool = True


def apply_edits(worktree: Path, edits: Edit) -> None:
    for rel, (old, new) in edits.items():
        path = worktree / rel
        if old is None:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(new)
            continue
        text = path.read_text()
        assert old in text, f"{old!r} not in {rel}"
        path.write_text(text.replace(old, new, 1))


DEFAULT_SPECS = (
    PatchSpec("0001-metal-steel-attention-bd256.patch", "metal",
              "metal: steel attention for head_dim 256",
              {"mlx/backend/metal/sdpa.metal":
               ("metal_line_10 = 10;", "metal_line_10 = 256; // bd=256")}),
    PatchSpec("0010-chunked-sdpa-fallback.patch", "all",
              "sdpa: query-chunked fallback",
              {"mlx/attention.cpp":
               ("attention_line_20 = 20;", "attention_line_20 = chunked(20);")}),
    PatchSpec("0020-cuda-tiled-flash-attention.patch", "cuda",
              "cuda: tiled flash attention for head_dim 129-512",
              {"mlx/backend/cuda/sdpa.cu":
               ("cuda_line_10 = 10;", "cuda_line_10 = tiled(10);"),
               "mlx/backend/cuda/tiled.cu": (None, "// tiled kernel\n")}),
)


@dataclass
class Upstream:
    root: Path
    commits: dict[str, str] = field(default_factory=dict)
    series: list[dict] = field(default_factory=list)
    common: list[dict] = field(default_factory=list)

    @property
    def path(self) -> Path:
        return self.root / "upstream"

    @property
    def patches_dir(self) -> Path:
        return self.root / "patches"

    def git(self, *args: str, **kw) -> str:
        return git(self.path, *args, **kw)

    def settings(self, **overrides) -> Settings:
        values = dict(mlx_repo=str(self.path), cache_dir=self.root / "cache",
                      work_dir=self.root / "work",
                      patches_dir=self.patches_dir, jobs=1)
        values.update(overrides)
        return Settings(**values)

    def commit(self, edits: Edit, message: str, *, tag: str | None = None,
               branch: str = "main", label: str | None = None) -> str:
        """Commit ``edits`` on ``branch`` (created from HEAD if missing)."""
        exists = self.git("rev-parse", "-q", "--verify", f"refs/heads/{branch}",
                          check=False)
        born = self.git("rev-parse", "-q", "--verify", "HEAD", check=False)
        if exists or not born:
            self.git("checkout", "-q", branch) if born else None
        else:
            self.git("checkout", "-q", "-b", branch)
        apply_edits(self.path, edits)
        self.git("add", "-A")
        self.git("commit", "-q", "-m", message)
        sha = self.git("rev-parse", "HEAD")
        if tag:
            self.git("tag", tag)
        self.commits[label or tag or message] = sha
        if branch != "main":
            self.git("checkout", "-q", "main")
        return sha

    def make_patch(self, series_dir: Path, base: str, specs: list[PatchSpec],
                   applies: str) -> list[dict]:
        """Commit ``specs`` in order on a scratch clone at ``base`` and write
        each as a format-patch file in ``series_dir``."""
        scratch = self.root / f"scratch-{series_dir.name}"
        shutil.rmtree(scratch, ignore_errors=True)
        git(self.root, "clone", "-q", str(self.path), str(scratch))
        git(scratch, "checkout", "-q", "-b", "work", base)
        series_dir.mkdir(parents=True, exist_ok=True)
        entries = []
        for n, spec in enumerate(specs):
            apply_edits(scratch, spec.edits)
            body = spec.body
            if spec.trailers:
                body += "\n\n" + TRAILERS
            git(scratch, "add", "-A")
            git(scratch, "commit", "-q", "-m", f"{spec.subject}\n\n{body}",
                date=f"2024-02-0{n + 1}T10:00:00+00:00")
            text = git(scratch, *FORMAT_PATCH, "HEAD", strip=False)
            (series_dir / spec.file).write_text(text)
            entries.append({"file": spec.file, "target": spec.target,
                            "upstream": spec.upstream})
        shutil.rmtree(scratch)
        return entries

    def add_series(self, name: str, base: str, versions: str,
                   specs: list[PatchSpec] | tuple = DEFAULT_SPECS,
                   description: str = "") -> None:
        is_tag = bool(self.git("tag", "-l", base))
        base_rev = base if is_tag else self.commits.get(base, base)
        entries = self.make_patch(self.patches_dir / name, base_rev,
                                  list(specs), versions)
        self.series.append({"name": name, "base": base_rev,
                            "versions": versions,
                            "description": description or f"series {name}",
                            "patches": entries})
        self.write_index()

    def share(self, file: str, names: list[str]) -> None:
        """Make ``file`` (the same change in the series ``names``: identical
        but for where its hunks start and its blob ids) a common patch, with
        the text of ``names[0]``: moved to patches/common/, index schema 2."""
        entries = [p for s in self.series if s["name"] in names
                   for p in s["patches"] if p.get("file") == file]
        texts = {without_offsets((self.patches_dir / n / file).read_text())
                 for n in names}
        assert len(texts) == 1 and len(entries) == len(names), file
        (self.patches_dir / "common").mkdir(exist_ok=True)
        (self.patches_dir / names[0] / file).rename(
            self.patches_dir / "common" / file)
        for name in names[1:]:
            (self.patches_dir / name / file).unlink()
        self.common.append({**entries[0], "series": list(names)})
        for s in self.series:
            if s["name"] in names:
                s["patches"] = [{"common": file} if p.get("file") == file else p
                                for p in s["patches"]]
        self.write_index()

    def write_index(self) -> None:
        lines = [f"schema = {2 if self.common else 1}", ""]
        for c in self.common:
            series = ", ".join(f'"{n}"' for n in c["series"])
            lines += ["[[common]]", f'file = "{c["file"]}"',
                      f'target = "{c["target"]}"',
                      f'upstream = "{c["upstream"]}"', f"series = [{series}]", ""]
        for s in self.series:
            lines += ["[[series]]", f'name = "{s["name"]}"',
                      f'base = "{s["base"]}"', f'versions = "{s["versions"]}"',
                      f'description = "{s["description"]}"', ""]
            for p in s["patches"]:
                if "common" in p:
                    lines += ["[[series.patches]]", f'common = "{p["common"]}"', ""]
                    continue
                lines += ["[[series.patches]]", f'file = "{p["file"]}"',
                          f'target = "{p["target"]}"',
                          f'upstream = "{p["upstream"]}"', ""]
        self.patches_dir.mkdir(parents=True, exist_ok=True)
        (self.patches_dir / "index.toml").write_text("\n".join(lines))
        self.write_sums()

    def write_sums(self) -> None:
        """patches/SHA256SUMS over every patch file (as export writes it)."""
        lines = sorted(
            f"{hashlib.sha256(p.read_bytes()).hexdigest()}  "
            f"{p.relative_to(self.patches_dir).as_posix()}\n"
            for p in self.patches_dir.glob("*/*.patch"))
        (self.patches_dir / "SHA256SUMS").write_text("".join(lines))


def build_upstream(root: Path, with_series: bool = True) -> Upstream:
    up = Upstream(root)
    up.path.mkdir(parents=True)
    git(up.path, "init", "-q", "-b", "main")
    files = {"mlx/version.h": (None, version_h("0.1.0")),
             "mlx/attention.cpp": (None, numbered("attention")),
             "mlx/backend/cuda/sdpa.cu": (None, numbered("cuda")),
             "mlx/backend/metal/sdpa.metal": (None, numbered("metal")),
             "README.md": (None, "# fixture mlx\n")}
    up.commit(files, "initial import", tag="v0.1.0")
    up.commit({"mlx/attention.cpp": ("attention_line_3 = 3;",
                                     "attention_line_3 = 3; // v0.2"),
               "mlx/version.h": ("MINOR 1", "MINOR 2")},
              "release 0.2.0", tag="v0.2.0")
    up.commit({"mlx/version.h": ("PATCH 0", "PATCH 1")}, "start 0.2.1",
              label="main_base")
    up.commit({"README.md": ("# fixture mlx\n", "# fixture mlx\n\nmore\n")},
              "readme", label="main")
    if with_series:
        up.add_series("v0.1", "v0.1.0", ">=0.1.0,<0.2")
        up.add_series("v0.2", "v0.2.0", ">=0.2.0,<0.3")
        up.add_series("main", "main_base", "main")
    return up


