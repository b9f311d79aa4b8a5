"""MLX's FetchContent dependencies: which a build needs, a local cache, and
the CMake arguments that make the build use it with no network.

The list comes from the checked-out CMake files (``cmakeparse``), never from
a table here. Sources, in order: the cache (``<cache>/deps/<name>-<pin>``);
a local git repository, directory or archive the user names with
``Settings.dep_sources`` / ``MLX_BUILDER_DEP_<NAME>=PATH[@REF]`` (NAME is the
FetchContent name or the repository's name, ``-`` written ``_``); the
upstream URL or git repository when online.

What build-facts.md taught about layouts is applied when exporting a git
tree: a ``SOURCE_SUBDIR`` dependency keeps that subdirectory (NVTX ``c``,
cutlass ``include``: snapshots lack cutlass' large files elsewhere); json and
cudnn-frontend keep what their CMake reads; cccl's git tree is rearranged
into its release-zip layout (one ``include/`` holding cuda, nv, cub, thrust);
git submodules (nanobind's ``ext/robin_map``) come from their own named
source or their upstream URL.
"""

from __future__ import annotations

import ast
import hashlib
import io
import json
import os
import platform
import re
import shutil
import tarfile
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from mlx_builder import faults, locks, outputs
from mlx_builder.console import err_console
from mlx_builder.errors import DepsError, FetchError
from mlx_builder.settings import Settings, dep_env_var
from mlx_builder.source.gitops import GitResult, run_git
from mlx_builder.wheelbuild.archives import META, content_sha256, download, extract_archive, safe_extract
from mlx_builder.wheelbuild.cmakeparse import Declaration, effective, evaluate, parse_tree
from mlx_builder.wheelbuild.targets import TargetSet

_LICENSE = re.compile(r"^(LICEN[CS]E|COPYING|NOTICE)", re.I)
KEEP_BY_REPO = {
    "nlohmann/json": ("CMakeLists.txt", "cmake", "include", "single_include",
                      "meson.build", "nlohmann_json.natvis"),
    "nvidia/cudnn-frontend": ("CMakeLists.txt", "cmake", "include",
                              "cudnn_frontend-config.cmake.in"),
    "nvidia/cccl": ("libcudacxx/include", "cub/cub", "thrust/thrust"),
}


# ----------------------------------------------------------------- what a build needs

def repo_slug(decl: Declaration) -> str | None:
    m = re.search(r"github\.com/([^/]+)/([^/]+?)(?:\.git)?(?:/|$)",
                  decl.git_repository or decl.url or "")
    return f"{m.group(1)}/{m.group(2)}".lower() if m else None


def pin(decl: Declaration) -> str:
    if decl.git_tag:
        return decl.git_tag
    m = re.search(r"/releases/download/([^/]+)/", decl.url or "") or \
        re.search(r"/archive/(?:refs/tags/)?([^/]+?)\.(?:zip|tar\.gz)$", decl.url or "")
    if m:
        return m.group(1)
    return "url-" + hashlib.sha256((decl.url or decl.name).encode()).hexdigest()[:12]


def setup_py_defines(tree: Path) -> dict[str, str]:
    """The ``-DNAME=ON|OFF`` literals of setup.py's first ``cmake_args = [...]``
    list: what MLX's setup.py passes to every build."""
    try:
        module = ast.parse((Path(tree) / "setup.py").read_text(encoding="utf-8"))
    except (OSError, SyntaxError):
        return {}
    for node in ast.walk(module):
        if (isinstance(node, ast.Assign) and isinstance(node.value, ast.List)
                and any(isinstance(t, ast.Name) and t.id == "cmake_args" for t in node.targets)):
            found = [re.fullmatch(r"-D(\w+)=(ON|OFF)", e.value) for e in node.value.elts
                     if isinstance(e, ast.Constant) and isinstance(e.value, str)]
            return {m.group(1): m.group(2) for m in found if m}
    return {}


def platform_values(system: str | None = None) -> dict[str, str]:
    system = system or platform.system()
    flag = lambda on: "1" if on else "0"   # noqa: E731
    return {"CMAKE_SYSTEM_NAME": system, "CMAKE_SYSTEM_PROCESSOR": platform.machine(),
            "WIN32": flag(system == "Windows"), "MSVC": flag(system == "Windows"),
            "APPLE": flag(system == "Darwin"), "CMAKE_HOST_APPLE": flag(system == "Darwin"),
            "UNIX": flag(system != "Windows")}


def _defines(args: Iterable[str]) -> dict[str, str]:
    out = {}
    for a in args:
        m = re.match(r"-D([A-Za-z0-9_]+)(?::\w+)?=(.*)$", a)
        if m:
            out[m.group(1)] = m.group(2)
    return out


def needed(tree: Path, targets: TargetSet, extra_args: Iterable[str] = (),
           system: str | None = None
           ) -> tuple[list[tuple[Declaration, bool | None]], dict[str, str], set[str]]:
    """Each effective declaration with True (needed), None (maybe) or False."""
    decls, options = parse_tree(tree)
    # A wheel is the Python bindings: setup.py always builds them.
    fixed = {"MLX_BUILD_PYTHON_BINDINGS": "ON", **setup_py_defines(tree),
             **_defines(targets.cmake_args()),
             **_defines(extra_args)}
    values = {**options, **platform_values(system), **fixed}
    out = []
    for decl in effective(decls):
        need = evaluate(decl.conditions, values) if decl.reached else False
        if decl.source_dir:
            need = False                    # a local sub-project, nothing to fetch
        out.append((decl, need))
    return out, options, set(fixed)


def disable_switch(decl: Declaration, options: Mapping[str, str],
                   fixed: set[str]) -> str | None:
    """An ON-by-default option guarding ``decl`` that the build may turn off."""
    for negated, toks in reversed(decl.conditions):
        if (not negated and len(toks) == 1 and not toks[0].quoted
                and toks[0].value in options and toks[0].value not in fixed
                and options[toks[0].value].upper() == "ON"):
            return toks[0].value
    return None


# ----------------------------------------------------------------- plan

@dataclass(frozen=True)
class ResolvedDep:
    name: str
    pin: str
    path: Path
    source: str            # upstream URL or repository
    via: str               # 'cache' | 'local git repo' | 'directory' | 'archive' | 'download' | 'git clone' | 'bundle'
    ref: str | None = None
    commit: str | None = None
    sha256: str = ""

    def to_json(self) -> dict:
        return {"name": self.name, "pin": self.pin, "source": self.source,
                "via": self.via, "ref": self.ref, "commit": self.commit,
                "sha256": self.sha256}


@dataclass(frozen=True)
class DepsPlan:
    deps: tuple[ResolvedDep, ...]
    disabled: tuple[str, ...] = ()       # options turned OFF: their dependency is unavailable
    skipped: tuple[str, ...] = ()        # 'name: why' for declarations left alone

    def cmake_args(self) -> list[str]:
        args = ["-DFETCHCONTENT_FULLY_DISCONNECTED=ON"]
        args += [f"-DFETCHCONTENT_SOURCE_DIR_{d.name.upper()}={d.path}" for d in self.deps]
        args += [f"-D{opt}=OFF" for opt in self.disabled]
        return args


def resolve(settings: Settings, tree: Path, targets: TargetSet, *,
            refresh: bool = False, allow_disable: bool = True,
            extra_args: Iterable[str] = ()) -> DepsPlan:
    """Fill the cache for everything ``targets`` needs and plan the CMake args."""
    decls, options, fixed = needed(tree, targets, extra_args)
    got, disabled, skipped = [], [], []
    for decl, need in decls:
        if need is False:
            skipped.append(f"{decl.name}: not needed ({decl.condition_text()})")
            continue
        try:
            got.append(fill(settings, decl, refresh=refresh))
        except (DepsError, FetchError) as exc:
            switch = disable_switch(decl, options, fixed)
            if need is None:
                skipped.append(f"{decl.name}: maybe needed, unavailable ({exc.what})")
                err_console.print(f"warning: {decl.name} unavailable ({exc.what}); "
                                  "the build may still need it", markup=False)
            elif switch and allow_disable:
                disabled.append(switch)
                err_console.print(f"warning: {decl.name} unavailable ({exc.what}); "
                                  f"building with -D{switch}=OFF", markup=False)
            else:
                raise
    return DepsPlan(tuple(got), tuple(disabled), tuple(skipped))


# ----------------------------------------------------------------- filling the cache

def source_for(settings: Settings, decl: Declaration) -> str | None:
    keys = [decl.name.lower()]
    slug = repo_slug(decl)
    if slug:
        keys.append(slug.split("/")[1])
    for key in keys:
        for variant in (key, key.replace("-", "_")):
            if variant in settings.dep_sources:
                return settings.dep_sources[variant]
    return None


def _split_ref(spec: str) -> tuple[str, str | None]:
    if "@" in spec and not os.path.exists(spec):
        base, _, ref = spec.rpartition("@")
        if base:
            return base, ref
    return spec, None


def cache_path(settings: Settings, decl: Declaration) -> Path:
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", pin(decl))
    return settings.deps_dir / f"{decl.name}-{slug}"


def fill(settings: Settings, decl: Declaration, *, refresh: bool = False) -> ResolvedDep:
    """The cache entry of ``decl``, fetched when missing, damaged or ``refresh``.

    The entry's lock is held throughout, so two runs never fill one entry at
    once; an entry is used only when its files still hash to the content
    sha256 recorded when it was filled."""
    dest = cache_path(settings, decl)
    with locks.deps_lock(settings, dest):
        outputs.remove_leftovers(dest)                 # a killed run's scratch folder
        for old in dest.parent.glob(f".{decl.name}-" + "?" * 8) if dest.parent.is_dir() else ():
            shutil.rmtree(old, ignore_errors=True)     # the same, from earlier versions
        if not refresh:
            cached, damage = _cached(dest, decl)
            if cached is not None:
                return cached
            if damage:
                err_console.print(f"note: the cache entry of {decl.name} {pin(decl)} is damaged "
                                  f"({damage}); fetching it again", markup=False)
        try:
            return _fill(settings, decl, dest)
        except DepsError as exc:
            if not refresh and dest.exists():
                exc.why = (exc.why + "; " if exc.why else "") + \
                    f"the cached copy in {dest} is damaged and was not used"
            raise


def _cached(dest: Path, decl: Declaration) -> tuple[ResolvedDep | None, str]:
    """(the verified cache entry, "") or (None, what is wrong with it)."""
    meta = dest / META
    if not meta.is_file():
        return None, ("its record " + META + " is missing") if dest.exists() else ""
    try:
        data = json.loads(meta.read_text(encoding="utf-8"))
        if not isinstance(data, dict) or not all(
                isinstance(data.get(k), str) for k in ("pin", "sha256")):
            raise ValueError("not an object with pin and sha256 strings")
    except (OSError, ValueError) as exc:
        return None, f"its record {META} is unreadable: {exc}"[:200]
    if data["pin"] != pin(decl):
        return None, ""
    got = content_sha256(dest)
    if got != data["sha256"]:
        return None, (f"its files hash to {got[:12]}…, not the {data['sha256'][:12]}… "
                      "recorded when it was filled")
    text = lambda k: data[k] if isinstance(data.get(k), str) else None   # noqa: E731
    return ResolvedDep(decl.name, data["pin"], dest, text("source") or "",
                       text("via") or "cache", text("ref"), text("commit"),
                       data["sha256"]), ""


def _fill(settings: Settings, decl: Declaration, dest: Path) -> ResolvedDep:
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=outputs.part_prefix(dest), dir=dest.parent))
    try:
        via, ref, commit = _populate(settings, decl, tmp / "src")
        _adapt_layout(decl, tmp / "src")
        digest = content_sha256(tmp / "src")
        upstream = decl.git_repository or decl.url or ""
        record = {"name": decl.name, "pin": pin(decl), "source": upstream, "via": via,
                  "ref": ref, "commit": commit, "sha256": digest}
        (tmp / "src" / META).write_text(json.dumps(record, indent=1) + "\n")
        faults.point("dep-fetched")
        if dest.exists():
            shutil.rmtree(dest)
        (tmp / "src").rename(dest)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    err_console.print(f"deps: {decl.name} {pin(decl)} <- {via}"
                      + (f" {ref}" if ref and ref != pin(decl) else "")
                      + (f" ({commit[:12]})" if commit else ""), markup=False)
    return ResolvedDep(decl.name, pin(decl), dest, upstream, via, ref, commit, digest)


def _populate(settings: Settings, decl: Declaration, out: Path
              ) -> tuple[str, str | None, str | None]:
    named = source_for(settings, decl)
    keep = keep_paths(decl)
    if named:
        location, ref = _split_ref(named)
        path = Path(location).expanduser()
        if path.is_dir() and _is_git(path):
            ref = ref or _git_ref_for(decl)
            commit = export_git(settings, path, ref, out, keep, decl.name)
            return "local git repo", ref, commit
        if path.is_dir():
            shutil.copytree(path, out, symlinks=True,
                            ignore=shutil.ignore_patterns(".git", META))
            _trim(out, keep)
            return "directory", ref, None
        if path.is_file():
            extract_archive(path, out)
            _trim(out, keep)
            return "archive", ref, None
        raise DepsError(f"the source named for {decl.name} does not exist: {location}",
                        "it comes from dep_sources / MLX_BUILDER_DEP_*",
                        "point it at a git repository, a directory or an archive")
    if settings.offline:
        env = dep_env_var(decl.name)
        raise DepsError(f"{decl.name} {pin(decl)} is not in the cache and this run is offline",
                        f"cache: {cache_path(settings, decl)}",
                        f"set {env}=<git repo or dir>[@ref], run `mlx-builder deps` "
                        "where the network is reachable, or build from a bundle")
    if decl.git_repository:
        with tempfile.TemporaryDirectory(prefix="clone-", dir=out.parent) as tmp:
            clone = clone_repo(decl.git_repository, decl.git_tag, Path(tmp) / "repo")
            commit = export_git(settings, clone, "HEAD", out, keep, decl.name)
        return "git clone", decl.git_tag, commit
    if decl.url:
        with tempfile.TemporaryDirectory(prefix="download-", dir=out.parent) as tmp:
            name = decl.url.rstrip("/").rsplit("/", 1)[-1] or "download"
            archive = download(decl.url, Path(tmp) / name)
            extract_archive(archive, out)
        return "download", None, None
    raise DepsError(f"{decl.name} declares neither URL nor GIT_REPOSITORY")


def keep_paths(decl: Declaration) -> tuple[str, ...] | None:
    if decl.source_subdir:
        return (decl.source_subdir,)
    return KEEP_BY_REPO.get(repo_slug(decl) or "")


def _git_ref_for(decl: Declaration) -> str:
    ref = decl.git_tag or pin(decl)
    if ref.startswith("url-"):
        raise DepsError(f"cannot tell which ref of the repository to use for {decl.name}",
                        f"it is declared by URL {decl.url}",
                        "name the ref: MLX_BUILDER_DEP_<NAME>=<repo>@<tag>")
    return ref


# ----------------------------------------------------------------- git

def _git(repo: Path, *args: str, check: bool = True, binary: bool = False) -> GitResult:
    res = run_git(repo, *args, check=False, binary=binary)
    if check and res.rc != 0:
        raise DepsError(f"git {' '.join(args[:2])} failed in {repo}", res.err.strip()[:300])
    return res


def _is_git(path: Path) -> bool:
    return _git(path, "rev-parse", "--git-dir", check=False).rc == 0


def resolve_commit(repo: Path, ref: str, what: str) -> str:
    cands = [ref, f"refs/tags/{ref}", f"v{ref}", ref[1:] if ref.startswith("v") else None]
    for cand in filter(None, cands):
        proc = _git(repo, "rev-parse", "--verify", "--quiet", f"{cand}^{{commit}}", check=False)
        if proc.rc == 0:
            return proc.out.strip()
    tags = _git(repo, "tag", "--sort=-v:refname", check=False).out.split()[:6]
    raise DepsError(f"{what}: {repo} has no ref {ref!r}",
                    f"its newest tags: {', '.join(tags) or 'none'}",
                    f"name a ref that serves: {dep_env_var(what)}"
                    f"={repo}@<tag>")


def export_git(settings: Settings, repo: Path, ref: str, out: Path,
               keep: tuple[str, ...] | None, what: str) -> str:
    """Write ``repo`` at ``ref`` (only ``keep`` + licences, if given) to ``out``."""
    commit = resolve_commit(repo, ref, what)
    paths: list[str] = []
    if keep:
        top = _git(repo, "ls-tree", "--name-only", commit).out.split()
        paths = [k for k in keep
                 if _git(repo, "cat-file", "-e", f"{commit}:{k}", check=False).rc == 0]
        paths += [t for t in top if _LICENSE.match(t)]
    data = _git(repo, "archive", "--format=tar", commit, "--", *paths, binary=True).data
    out.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(data)) as tf:
        safe_extract(tf, out)
    for sub_path, sha, url in _submodules(repo, commit):
        if paths and not any(sub_path == p or sub_path.startswith(p + "/") for p in paths):
            continue
        _fill_submodule(settings, sub_path, sha, url, out / sub_path, what)
    return commit


def _submodules(repo: Path, commit: str) -> list[tuple[str, str, str]]:
    links = [ln.split(None, 3) for ln in
             _git(repo, "ls-tree", "-r", commit).out.splitlines() if ln.startswith("160000")]
    if not links:
        return []
    cfg = _git(repo, "config", "--blob", f"{commit}:.gitmodules", "--get-regexp",
               r"submodule\..*\.(path|url)", check=False).out.splitlines()
    entries: dict[str, dict[str, str]] = {}
    for line in cfg:
        key, _, value = line.partition(" ")
        name, _, field = key[len("submodule."):].rpartition(".")
        entries.setdefault(name, {})[field] = value
    urls = {e.get("path"): e.get("url", "") for e in entries.values()}
    return [(path, sha, urls.get(path, "")) for _, _, sha, path in links]


def _fill_submodule(settings: Settings, sub_path: str, sha: str, url: str,
                    dest: Path, parent: str) -> None:
    repo_name = url.rstrip("/").rsplit("/", 1)[-1].removesuffix(".git").lower()
    keys = [repo_name, repo_name.replace("-", "_"), Path(sub_path).name.lower()]
    named = next((settings.dep_sources[k] for k in keys if k in settings.dep_sources), None)
    if dest.exists():
        shutil.rmtree(dest)
    if named:
        location, _ = _split_ref(named)
        export_git(settings, Path(location).expanduser(), sha, dest, None, repo_name)
        return
    if settings.offline:
        raise DepsError(f"{parent} needs its git submodule {sub_path} ({url} @ {sha[:12]})",
                        "submodules are not in `git archive` output and this run is offline",
                        f"set {dep_env_var(repo_name)}="
                        "<a clone of that repository>")
    # The clone goes inside the entry's scratch folder, like the entry's own
    # clones and downloads: a killed run leaves it where the next run cleans.
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="submodule-", dir=dest.parent) as tmp:
        clone = clone_repo(url, sha, Path(tmp) / "repo")
        export_git(settings, clone, sha, dest, None, repo_name)


def clone_repo(url: str, ref: str | None, dest: Path) -> Path:
    # Added to the environment by run_git: never prompt, give up on a stalled fetch.
    env = {"GIT_TERMINAL_PROMPT": "0", "GIT_HTTP_LOW_SPEED_LIMIT": "1000",
           "GIT_HTTP_LOW_SPEED_TIME": "60"}
    dest.mkdir(parents=True, exist_ok=True)
    steps = [["init", "-q"], ["fetch", "-q", "--depth", "1", url, ref or "HEAD"],
             ["checkout", "-q", "FETCH_HEAD"]]
    for step in steps:
        proc = run_git(dest, *step, env=env, check=False)
        if proc.rc != 0:
            raise FetchError(f"cannot fetch {url} {ref or ''}".strip(),
                             proc.err.strip()[:300],
                             "check the network, or name a local source with "
                             "MLX_BUILDER_DEP_<NAME>")
    return dest


# ----------------------------------------------------------------- archives and layout

def _trim(root: Path, keep: tuple[str, ...] | None) -> None:
    if not keep:
        return
    if not any((root / k).exists() for k in keep):
        return                          # not the git layout (e.g. a release archive)
    wanted = {Path(k).parts[0] for k in keep}
    for child in root.iterdir():
        if child.name not in wanted and not _LICENSE.match(child.name):
            shutil.rmtree(child) if child.is_dir() else child.unlink()


def _adapt_layout(decl: Declaration, root: Path) -> None:
    """cccl's git tree -> its release layout (one include/ dir, no CMake project)."""
    if repo_slug(decl) != "nvidia/cccl" or not (root / "libcudacxx" / "include").is_dir():
        return
    inc = root / "include"
    inc.mkdir(exist_ok=True)
    for child in (root / "libcudacxx" / "include").iterdir():
        child.rename(inc / child.name)
    for name in ("cub", "thrust"):
        if (root / name / name).is_dir():
            (root / name / name).rename(inc / name)
    for child in list(root.iterdir()):
        if child.name != "include" and not _LICENSE.match(child.name):
            shutil.rmtree(child) if child.is_dir() else child.unlink()
