"""Git verbs, through gitpython: the cached upstream mirror, ref resolution,
work trees, dirty checks and patch checks in a scratch index.

Nothing here changes a work tree the caller did not ask for: patch checks run
in a throw-away bare repository whose object store borrows (read-only, via
``objects/info/alternates``) from the mirror, with its own index file.
"""

from __future__ import annotations

import difflib
import logging
import os
import re
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import git
from rich.progress import Progress, TaskID

from mlx_builder import signals
from mlx_builder.console import err_console, progress
from mlx_builder.errors import ConfigError, DirtyTreeError, FetchError, GitError, RefError
from mlx_builder.settings import Settings

logger = logging.getLogger(__name__)

# Every commit we create uses this committer, with the patch's author date, so
# the same series on the same base always gives the same commit hashes.
COMMITTER = ("mlx-builder", "mlx-builder@localhost")
BASE_REF = "refs/mlx-builder/base"
PREVIOUS_REF = "refs/mlx-builder/previous"     # the latest old tip
KEPT_PREFIX = "refs/mlx-builder/kept/"         # every old tip, by its commit
# Isolate from the user's global/system git config where output must be
# byte-stable (format-patch, commits).
ISOLATED_ENV = {"GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}

_VERSION_H = re.compile(r"#define\s+MLX_VERSION_(MAJOR|MINOR|PATCH)\s+(\d+)")
_CMAKE_VERSION = re.compile(r"set\(\s*MLX_VERSION\s+([0-9][0-9A-Za-z.+-]*)\s*\)")
_VERSION_ARG = re.compile(r"^v?\d+\.\d+(\.\d+)?([.-]?(rc|dev|post|a|b)\d*)?$")
_HEX = re.compile(r"^[0-9a-fA-F]{4,40}$")


@dataclass(frozen=True)
class ResolvedRef:
    ref: str          # canonical name: 'v0.32.1', 'main', a tag, or the commit
    commit: str       # full 40-hex commit
    kind: str         # 'version' | 'tag' | 'branch' | 'commit'
    version: str | None  # '0.32.1' for tags; from mlx/version.h otherwise

    @property
    def short(self) -> str:
        return self.commit[:9]

    def label(self) -> str:
        if self.kind == "commit":
            return self.short
        return f"{self.ref} ({self.short})"


@dataclass(frozen=True)
class GitResult:
    rc: int
    out: str
    err: str
    data: bytes = b""     # stdout as bytes, for run_git(..., binary=True)

    @property
    def ok(self) -> bool:
        return self.rc == 0

    @property
    def text(self) -> str:
        return "\n".join(t for t in (self.out, self.err) if t)


def run_git(where: git.Repo | Path | str, *args: str,
            env: Mapping[str, str] | None = None, check: bool = True,
            strip: bool = True, binary: bool = False) -> GitResult:
    """Run ``git args`` in ``where`` (a repo or a directory) via gitpython:
    the one way this tool runs git.

    Output is in the C locale; ``binary`` keeps stdout as bytes (``git
    archive``). ``check`` raises GitError on a non-zero exit.
    """
    cwd = repo_dir(where) if isinstance(where, git.Repo) else str(where)
    logger.debug("git %s (in %s)", " ".join(args), cwd)
    runner = git.Git(cwd)
    rc, out, err = runner.execute(
        ["git", *args], with_extended_output=True, with_exceptions=False,
        env=dict(env or {}), strip_newline_in_stdout=strip and not binary,
        stdout_as_string=not binary)
    err = _as_text(err)
    if binary:
        result = GitResult(rc, "", err, out if isinstance(out, bytes) else b"")
    else:
        result = GitResult(rc, _as_text(out), err)
    if rc != 0 and signals.pending():
        signals.checkpoint()       # git died of the signal we hold: raise that
    if check and rc != 0:
        raise GitError(
            f"git {' '.join(args[:3])} failed (exit {rc}) in {cwd}",
            _last_line(err or result.out),
            "run the command by hand in that directory to see the full error")
    return result


def repo_dir(repo: git.Repo) -> str:
    """Where to run git for ``repo``: its work tree, or for a bare repository
    (gitpython misreads one without core.bare in its config) the git dir."""
    top = repo.working_tree_dir
    if top and (Path(top) / ".git").exists():
        return str(top)
    return str(repo.git_dir)


# ---------------------------------------------------------------- mirror

def is_local_repo(location: str) -> Path | None:
    """The path of ``location`` when it names a local directory, else None."""
    if "://" in location or re.match(r"^[\w.-]+@[\w.-]+:", location):
        return None
    path = Path(location).expanduser()
    return path.resolve() if path.is_dir() else None


class _RichGitProgress(git.RemoteProgress):
    """Feeds gitpython's fetch progress into a rich progress bar."""

    def __init__(self, prog: Progress, task: TaskID) -> None:
        super().__init__()
        self._prog, self._task = prog, task

    def update(self, op_code: int, cur_count: str | float, max_count: str | float | None = None,
               message: str = "") -> None:
        stage = {self.COUNTING: "counting", self.COMPRESSING: "compressing",
                 self.RECEIVING: "receiving", self.RESOLVING: "resolving",
                 self.CHECKING_OUT: "checking out"}.get(
                     op_code & self.OP_MASK, "fetching")
        self._prog.update(self._task, description=f"mlx mirror: {stage}",
                          completed=float(cur_count),
                          total=float(max_count) if max_count else None)


def _fetch(repo: git.Repo, what: str) -> None:
    origin = repo.remote("origin")
    with progress(what) as (prog, task):
        origin.fetch(progress=_RichGitProgress(prog, task), prune=True,
                     tags=True)


def ensure_mirror(settings: Settings) -> git.Repo:
    """The upstream repository to read refs and objects from.

    A local directory in ``settings.mlx_repo`` is used as it is (never written
    to). A URL is mirrored as a bare repository under ``settings.mirror_dir``:
    cloned on first use (atomically, with progress), fetched on later uses
    unless ``settings.offline``.
    """
    local = is_local_repo(settings.mlx_repo)
    if local is not None:
        try:
            return git.Repo(local)
        except (git.InvalidGitRepositoryError, git.NoSuchPathError):
            raise FetchError(
                f"{local} is not a git repository",
                "--mlx-repo / MLX_BUILDER_MLX_REPO names a directory",
                "point it at an MLX clone or bare mirror, or at a URL") from None
    scheme = settings.mlx_repo.split("::", 1)[0].lower() if "::" in settings.mlx_repo else ""
    if scheme in ("ext", "fd"):
        raise ConfigError(f"--mlx-repo uses git's {scheme}:: transport",
                          f"{settings.mlx_repo!r} would run a command, not fetch a repository",
                          "name MLX by a URL (https://, ssh://, git@…) or a local path")
    from mlx_builder import locks
    with locks.mirror_lock(settings):
        return _cached_mirror(settings)


def _cached_mirror(settings: Settings) -> git.Repo:
    mirror = settings.mirror_dir
    if mirror.parent.is_dir():     # left by a clone that was killed
        for stale in mirror.parent.glob(mirror.name + ".*.partial"):
            shutil.rmtree(stale, ignore_errors=True)
    if mirror.is_dir() and not any(mirror.iterdir()):
        mirror.rmdir()                 # an empty folder: no mirror yet
    if mirror.is_dir():
        try:
            repo = git.Repo(mirror)
        except git.InvalidGitRepositoryError:
            raise FetchError(f"the MLX mirror {mirror} is not a git repository",
                             "something other than mlx-builder wrote that folder",
                             f"remove {mirror} (it is cloned again) or pass another "
                             "--cache-dir") from None
        origin = repo.remote("origin")
        if origin.url != settings.mlx_repo:
            origin.set_url(settings.mlx_repo)
        if not settings.offline:
            try:
                _fetch(repo, "mlx mirror: fetching")
            except git.GitCommandError as exc:
                err_console.print(
                    f"warning: fetch from {settings.mlx_repo} failed; using the "
                    f"cached mirror as it is ({_last_line(exc.stderr)})")
        return repo
    if settings.offline:
        raise FetchError(
            f"no cached MLX mirror at {mirror} and offline mode is on",
            "the first use needs to clone upstream MLX",
            "run once online, or set --mlx-repo to a local MLX clone")
    return _clone_mirror(settings.mlx_repo, mirror)


def _clone_mirror(url: str, mirror: Path) -> git.Repo:
    mirror.parent.mkdir(parents=True, exist_ok=True)
    partial = Path(tempfile.mkdtemp(prefix=mirror.name + ".", suffix=".partial",
                                    dir=mirror.parent))
    try:
        repo = git.Repo.init(partial, bare=True)
        repo.create_remote("origin", url)
        with repo.config_writer() as cfg:
            cfg.set_value('remote "origin"', "fetch",
                          "+refs/heads/*:refs/heads/*")
            cfg.add_value('remote "origin"', "fetch",
                          "+refs/tags/*:refs/tags/*")
        _fetch(repo, f"cloning {url}")
    except (git.GitCommandError, git.exc.UnsafeProtocolError,
            git.exc.UnsafeOptionError) as exc:
        shutil.rmtree(partial, ignore_errors=True)
        raise FetchError(
            f"cannot clone MLX from {url}",
            _last_line(getattr(exc, "stderr", None)) or str(exc),
            "check the URL and network, or set --mlx-repo to a local clone"
        ) from None
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    partial.rename(mirror)
    return git.Repo(mirror)


def _last_line(text: str | None) -> str:
    lines = [ln.strip() for ln in (text or "").splitlines() if ln.strip()]
    return lines[-1] if lines else ""


def _as_text(value: str | bytes | None) -> str:
    if isinstance(value, bytes):
        return value.decode(errors="replace")
    return value or ""


def objects_dir(repo: git.Repo) -> Path:
    return Path(repo.common_dir).resolve() / "objects"


# ---------------------------------------------------------------- refs

def _names(repo: git.Repo, prefix: str) -> list[str]:
    res = run_git(repo, "for-each-ref", "--format=%(refname)", prefix,
                  check=False)
    return [ln[len(prefix):] for ln in res.out.splitlines() if ln]


def tag_names(repo: git.Repo) -> list[str]:
    return _names(repo, "refs/tags/")


def branch_names(repo: git.Repo) -> list[str]:
    names = _names(repo, "refs/heads/")
    remote = [n.split("/", 1)[1] for n in _names(repo, "refs/remotes/")
              if "/" in n and not n.endswith("/HEAD")]
    return sorted(set(names) | set(remote))


def rev_commit(repo: git.Repo | Path | str, rev: str) -> str | None:
    res = run_git(repo, "rev-parse", "--verify", "--quiet",
                  "--end-of-options", f"{rev}^{{commit}}", check=False)
    return res.out.strip() if res.ok and res.out.strip() else None


def read_version(repo: git.Repo, commit: str) -> str | None:
    """MLX's version at ``commit``: mlx/version.h, else CMakeLists.txt."""
    res = run_git(repo, "show", f"{commit}:mlx/version.h", check=False)
    if res.ok:
        parts = dict(_VERSION_H.findall(res.out))
        if {"MAJOR", "MINOR", "PATCH"} <= parts.keys():
            return f"{parts['MAJOR']}.{parts['MINOR']}.{parts['PATCH']}"
    res = run_git(repo, "show", f"{commit}:CMakeLists.txt", check=False)
    if res.ok:
        match = _CMAKE_VERSION.search(res.out)
        if match:
            return match.group(1)
    return None


def resolve_ref(repo: git.Repo, ref: str) -> ResolvedRef:
    """Resolve a version ('0.32.1' -> tag 'v0.32.1'), tag, branch or commit."""
    ref = ref.strip()
    if not ref:
        raise RefError("empty MLX ref", "", "pass --mlx VERSION|main|TAG|COMMIT")
    tags = tag_names(repo)
    if _VERSION_ARG.match(ref) and not ref.startswith("v"):
        tag = f"v{ref}"
        if tag in tags:
            return ResolvedRef(tag, _must(repo, f"refs/tags/{tag}"), "version",
                               ref)
    if ref in tags:
        commit = _must(repo, f"refs/tags/{ref}")
        version = ref[1:] if _VERSION_ARG.match(ref) and ref.startswith("v") \
            else read_version(repo, commit)
        return ResolvedRef(ref, commit, "tag", version)
    branches = branch_names(repo)
    if ref in branches:
        head = rev_commit(repo, f"refs/heads/{ref}") or _remote_branch(repo, ref)
        if head:
            return ResolvedRef(ref, head, "branch", read_version(repo, head))
    found = rev_commit(repo, ref) if not ref.startswith("-") else None
    if found:
        return ResolvedRef(found, found, "commit", read_version(repo, found))
    near = difflib.get_close_matches(ref, tags + branches, n=5, cutoff=0.6)
    if _VERSION_ARG.match(ref):
        near = difflib.get_close_matches(
            ref if ref.startswith("v") else f"v{ref}", tags, n=5, cutoff=0.6)
    raise RefError(
        f"MLX ref {ref!r} does not resolve in {repo.common_dir}",
        ("near matches: " + ", ".join(near)) if near else
        "no tag, branch or commit has that name",
        "pass a version (0.32.1), main, a tag or a commit; without --offline "
        "the mirror is fetched first" if _HEX.match(ref) or near == [] else
        "use one of the near matches")


def _remote_branch(repo: git.Repo, name: str) -> str | None:
    for remote in _names(repo, "refs/remotes/"):
        if remote.split("/", 1)[-1] == name:
            return rev_commit(repo, f"refs/remotes/{remote}")
    return None


def _must(repo: git.Repo, rev: str) -> str:
    commit = rev_commit(repo, rev)
    if commit is None:
        raise RefError(f"{rev} does not point at a commit")
    return commit


def is_ancestor(repo: git.Repo, ancestor: str, commit: str) -> bool:
    res = run_git(repo, "merge-base", "--is-ancestor", ancestor, commit,
                  check=False)
    return res.rc == 0


# ---------------------------------------------------------------- work trees

def dirty_paths(path: Path) -> list[str]:
    """Modified, staged or untracked (not ignored) paths of a work tree."""
    res = run_git(path, "status", "--porcelain=v1", "--untracked-files=all",
                  "--ignore-submodules=none")
    return [ln[3:] for ln in res.out.splitlines() if ln.strip()]


def ensure_clean(path: Path) -> None:
    dirty = dirty_paths(path)
    if dirty:
        shown = ", ".join(dirty[:8]) + (" …" if len(dirty) > 8 else "")
        raise DirtyTreeError(
            f"work tree {path} has uncommitted changes ({len(dirty)} paths)",
            f"refusing to overwrite: {shown}",
            "commit or stash them (git -C <tree> stash -u), or pass another "
            "--dest")


def is_work_tree(path: Path) -> bool:
    res = run_git(path, "rev-parse", "--is-inside-work-tree", check=False)
    top = run_git(path, "rev-parse", "--show-toplevel", check=False)
    return (res.ok and res.out.strip() == "true" and
            Path(top.out.strip()).resolve() == path.resolve())


def init_work_tree(dest: Path, mirror: git.Repo, upstream_url: str) -> git.Repo:
    """A new, empty repository at ``dest`` that borrows the mirror's objects.

    The tree shares objects through ``objects/info/alternates`` (no copy), so
    the mirror must stay where it is while the tree is in use.
    """
    dest.mkdir(parents=True, exist_ok=True)
    repo = git.Repo.init(dest)
    link_objects(repo, mirror)
    repo.create_remote("upstream", upstream_url)
    return repo


def link_objects(repo: git.Repo, mirror: git.Repo) -> None:
    """Let ``repo`` read the mirror's objects (idempotent)."""
    info = objects_dir(repo) / "info"
    info.mkdir(parents=True, exist_ok=True)
    alternates = info / "alternates"
    source = str(objects_dir(mirror))
    lines = alternates.read_text().splitlines() if alternates.exists() else []
    if source not in lines:
        alternates.write_text("\n".join([*lines, source]) + "\n")


def checkout_branch(repo: git.Repo, branch: str, commit: str) -> str | None:
    """Point ``branch`` at ``commit`` and check it out (tree must be clean).

    Returns the commit the tree was on when it held work that ``commit``
    does not: HEAD when it had moved past the branch (commits made on a
    detached HEAD or another branch), else the branch's previous tip. Every
    such commit is kept as ``refs/mlx-builder/kept/<commit>`` (the one
    returned also as ``refs/mlx-builder/previous``), so no committed work is
    lost however often the tree is re-pointed.
    """
    old = rev_commit(repo, f"refs/heads/{branch}")
    head = rev_commit(repo, "HEAD")
    moved = [c for c in dict.fromkeys((old, head)) if c and c != commit]
    for kept in moved:
        run_git(repo, "update-ref", KEPT_PREFIX + kept, kept)
    previous = None
    if head in moved and not (old and _is_ancestor(repo, head, old)):
        previous = head
    elif old in moved:
        previous = old
    if previous:
        run_git(repo, "update-ref", PREVIOUS_REF, previous)
    run_git(repo, "checkout", "-q", "-f", "-B", branch, commit)
    run_git(repo, "update-ref", BASE_REF, commit)
    return previous


def _is_ancestor(repo: git.Repo, commit: str, of: str) -> bool:
    return run_git(repo, "merge-base", "--is-ancestor", commit, of, check=False).rc == 0


def commit_env(author: str, email: str, date: str) -> dict[str, str]:
    """Identity and dates for a reproducible commit."""
    return {**ISOLATED_ENV,
            "GIT_AUTHOR_NAME": author, "GIT_AUTHOR_EMAIL": email,
            "GIT_AUTHOR_DATE": date, "GIT_COMMITTER_NAME": COMMITTER[0],
            "GIT_COMMITTER_EMAIL": COMMITTER[1], "GIT_COMMITTER_DATE": date}


# ---------------------------------------------------------------- checks

class ScratchIndex:
    """A throw-away index on top of ``commit`` for checking patches.

    Lives in a temporary bare repository that reads the mirror's objects; the
    mirror and every work tree stay untouched. Use as a context manager.
    """

    def __init__(self, repo: git.Repo, commit: str) -> None:
        self.repo = repo
        self.commit = commit
        self._tmp: Path | None = None

    def __enter__(self) -> ScratchIndex:
        self._tmp = Path(tempfile.mkdtemp(prefix="mlxb-check-"))
        scratch = self._tmp / "scratch.git"
        run_git(self._tmp, "init", "-q", "--bare", str(scratch))
        (scratch / "objects" / "info").mkdir(parents=True, exist_ok=True)
        (scratch / "objects" / "info" / "alternates").write_text(
            str(objects_dir(self.repo)) + "\n")
        self.env = {**ISOLATED_ENV, "GIT_DIR": str(scratch),
                    "GIT_INDEX_FILE": str(self._tmp / "index")}
        self._git("read-tree", self.commit)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)

    def _git(self, *args: str, check: bool = True) -> GitResult:
        assert self._tmp is not None, "use ScratchIndex as a context manager"
        return run_git(self._tmp, *args, env=self.env, check=check)

    def apply(self, patch: Path, *, check: bool = False, reverse: bool = False,
              three_way: bool = False) -> GitResult:
        args = ["apply", "--cached", "-v"]
        args += ["--check"] if check else []
        args += ["-R"] if reverse else []
        args += ["--3way"] if three_way else []
        return self._git(*args, str(patch), check=False)

    def tree(self) -> str | None:
        res = self._git("write-tree", check=False)
        return res.out.strip() if res.ok else None

    def reset(self, tree: str) -> None:
        self._git("read-tree", tree)


def format_patch(repo: git.Repo, commit: str, number: int = 1,
                 context: int = 3) -> tuple[str, str]:
    """One commit as (file name, patch text), with nothing that churns
    between exports: zero From hash, no signature, no diffstat, full blob ids,
    no numbering in the subject, no renames, a fixed diff algorithm and no
    user or system git config. ``context`` is the number of context lines."""
    with tempfile.TemporaryDirectory(prefix="mlxb-export-") as tmp:
        res = run_git(
            repo, "format-patch", "-1", "-o", tmp, f"--start-number={number}",
            "--zero-commit", "--no-signature", "--no-stat", "--full-index",
            "--no-numbered", "--no-renames", "--diff-algorithm=myers",
            "--no-color", "--subject-prefix=PATCH", "--no-thread",
            "--no-cover-letter", "--no-attach", "--encode-email-headers",
            f"-U{context}", commit, env=ISOLATED_ENV)
        path = Path(res.out.strip().splitlines()[-1])
        return path.name, path.read_bytes().decode("utf-8", "surrogateescape")
