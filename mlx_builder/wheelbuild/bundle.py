"""Everything a build reads, planned in memory (SourcePlan) or written to one
self-contained, deterministic ``.tar.gz`` (a bundle) for hosts with no network.

Bundle layout, under one top directory ``mlx-<label>/``::

    bundle.json        format, label, target, provenance, dependencies, options
    mlx/...            the patched MLX tree (tracked + untracked-not-ignored files)
    deps/<name>/...    each FetchContent dependency the target needs
    wheels/*.whl       MLX's pure-Python build requirements (setuptools, ...), when
                       they could be downloaded: an offline host whose Python lacks
                       them builds in a venv made from these

Deterministic: members sorted, mtime 0, uid/gid 0, no user names, modes 644
or 755, gzip header without name or time; the same inputs give the same bytes.
bundle.json lists every file under mlx/, deps/ and wheels/ with its sha256
and size (``files``; their total is ``unpacked_bytes``); the archive's own
sha256 is written beside it as ``<bundle>.sha256`` (sha256sum's format), the
two staged and renamed together under the lock of ``--out``.

``open_bundle`` checks the archive's sha256 against ``--sha256`` and the
``.sha256`` file beside it, reads the whole gzip stream (its CRC catches
corruption), checks every member before writing it (``_extract``), unpacks
into a temporary folder, verifies every file against
bundle.json (nothing missing, nothing extra, every hash), and only then moves
it into place under ``<work>/bundles/<sha16>``; a failed check leaves nothing
behind, so the same command cannot build from it on a second try.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import re
import shutil
import sys
import tarfile
import tempfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mlx_builder import __version__, faults, locks, outputs, process
from mlx_builder.console import err_console
from mlx_builder.errors import (
    BuildError,
    BundleError,
    DepsError,
    HashMismatchError,
    LockError,
    TargetError,
)
from mlx_builder.settings import DEFAULT_MLX_REPO, Settings
from mlx_builder.source.gitops import run_git
from mlx_builder.source.tree import read_build_requires, read_upstream_version
from mlx_builder.wheelbuild.archives import content_sha256
from mlx_builder.wheelbuild.deps import DepsPlan, ResolvedDep, needed, resolve
from mlx_builder.wheelbuild.manifest import Provenance, make_label, provenance_from_tree
from mlx_builder.wheelbuild.targets import TargetSet, parse_targets

BUNDLE_JSON = "bundle.json"
WHEELS_DIR = "wheels"
TOOLCHAIN_DIR = "toolchain"     # the registry build environment's wheels (--with-toolchain)
FORMAT = "mlx-builder-bundle"
SCHEMA = 2                      # 2: bundle.json lists every file with its sha256
_DONE = ".unpacked"
SHA_SUFFIX = ".sha256"
_PARTS = ("mlx", "deps", WHEELS_DIR, TOOLCHAIN_DIR)


# The upstream_ref of a plan built from a source directory as it is (--source).
LOCAL_TREE = "local-tree"


@dataclass(frozen=True)
class SourcePlan:
    src: Path
    targets: TargetSet
    provenance: Provenance
    deps: DepsPlan
    label: str
    bundle_sha256: str | None = None
    wheels_dir: Path | None = None       # build-requirement wheels carried by a bundle
    toolchain_dir: Path | None = None    # the CUDA build environment's wheels, if carried


# ----------------------------------------------------------------- planning

def canonical_url(settings: Settings) -> str:
    """The upstream URL for provenance; a local mirror names its origin."""
    repo = settings.mlx_repo
    if re.match(r"^[a-z+]+://|^git@", repo):
        return repo
    if not os.path.isdir(repo):
        return DEFAULT_MLX_REPO
    res = run_git(repo, "config", "--get", "remote.origin.url", check=False)
    url = res.out.strip()
    return url if res.rc == 0 and url and not os.path.exists(url) else DEFAULT_MLX_REPO


def plan_from_tree(settings: Settings, tree: Any, targets: TargetSet, *,
                   refresh: bool = False) -> SourcePlan:
    """From an apply.PreparedTree, or a plain MLX source directory."""
    if hasattr(tree, "applied"):
        path = Path(tree.path)
        prov = provenance_from_tree(tree, read_upstream_version(path), canonical_url(settings))
    else:
        path = Path(tree)
        res = run_git(path, "rev-parse", "HEAD", check=False)
        commit = res.out.strip() if res.rc == 0 else "0" * 40
        prov = Provenance(canonical_url(settings), LOCAL_TREE, commit,
                          read_upstream_version(path),
                          extra={"note": "built from a source directory, not a series"})
    deps = resolve(settings, path, targets, refresh=refresh)
    return SourcePlan(path, targets, prov, deps, make_label(prov, targets.tag))


def prepare(settings: Settings, mlx_ref: str, target_spec: str, *,
            series_name: str | None = None) -> tuple[Any, TargetSet]:
    """Parse the target (TargetError before any work), then apply the series
    for its backend; ``cuda`` (upstream's set) is read from the tree."""
    targets = parse_targets(target_spec)
    from mlx_builder.source.apply import prepare_tree
    tree = prepare_tree(settings, mlx_ref, series_name=series_name,
                        target=targets.patch_target, tree_name=targets.tag)
    if targets.spec == "cuda":
        targets = parse_targets(target_spec, source=Path(tree.path))
    return tree, targets


def tree_files(root: Path) -> list[str]:
    """Files of an MLX tree: git's tracked + untracked-not-ignored, else a walk."""
    res = run_git(root, "ls-files", "-z", "--cached", "--others", "--exclude-standard",
                  check=False, binary=True)
    if res.rc == 0 and (Path(root) / ".git").exists():
        names = [n for n in res.data.decode().split("\0") if n]
        return sorted({n for n in names if os.path.lexists(Path(root) / n)})
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in (".git", "build", "dist")]
        out += [os.path.relpath(os.path.join(dirpath, f), root) for f in filenames]
    return sorted(out)


# ----------------------------------------------------------------- writing

def fetch_build_wheels(settings: Settings, src: Path, dest: Path) -> list[Path]:
    """Download MLX's [build-system] requirements as wheels (cmake excluded: the
    build uses the cmake on PATH). Empty when offline or when pip cannot."""
    reqs = [r for r in read_build_requires(src)
            if not r.replace(" ", "").lower().startswith("cmake")]
    if settings.offline or not reqs:
        return []
    dest.mkdir(parents=True, exist_ok=True)
    proc = process.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps",
                        "--only-binary=:all:", "-d", str(dest), *reqs], check=False)
    if not proc.ok:
        err_console.print("note: build-requirement wheels not added to the bundle: "
                          + (proc.stderr.strip().splitlines() or [proc.failure or "pip failed"])[-1],
                          markup=False)
        return []
    return sorted(dest.glob("*.whl"))


def _bundle_json(plan: SourcePlan) -> dict[str, Any]:
    return {
        "format": FORMAT, "schema": SCHEMA, "tool": f"mlx-builder {__version__}",
        "label": plan.label, "target": plan.targets.to_json(),
        "provenance": plan.provenance.to_json(),
        "disabled_options": list(plan.deps.disabled),
        "skipped_dependencies": list(plan.deps.skipped),
        "dependencies": [{**d.to_json(), "path": f"deps/{d.name}"} for d in plan.deps.deps],
    }


def _add(tf: tarfile.TarFile, arcname: str, path: Path | None, data: bytes | None = None) -> None:
    info = tarfile.TarInfo(arcname)
    info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
    if path is not None and path.is_symlink():
        info.type, info.linkname, info.mode = tarfile.SYMTYPE, os.readlink(path), 0o777
        tf.addfile(info)
        return
    if data is None:
        assert path is not None
        data = path.read_bytes()
        info.mode = 0o755 if os.access(path, os.X_OK) else 0o644
    else:
        info.mode = 0o644
    info.size = len(data)
    tf.addfile(info, io.BytesIO(data))


def write_bundle(settings: Settings, tree: Any, targets: TargetSet, out: Path, *,
                 plan: SourcePlan | None = None, with_wheels: bool = True,
                 toolchain: Any = None) -> Path:
    """Write the bundle for ``tree`` + ``targets``; ``out`` may be a directory.
    ``toolchain`` (a buildenv.EnvSpec) adds the registry build environment's
    wheels, so a node without network makes that environment from the bundle."""
    src = Path(tree.path) if hasattr(tree, "applied") else Path(tree)
    with locks.tree_lock(settings, src):
        return _write_bundle(settings, tree, targets, Path(out), plan, with_wheels, toolchain)


def _write_bundle(settings: Settings, tree: Any, targets: TargetSet, out: Path,
                  plan: SourcePlan | None, with_wheels: bool, toolchain: Any) -> Path:
    plan = plan or plan_from_tree(settings, tree, targets)
    top = "mlx-" + re.sub(r"[^A-Za-z0-9._-]+", "_", plan.label)
    out = Path(out)
    if not out.name.endswith((".tar.gz", ".tgz")):
        if out.exists() and not out.is_dir():
            raise BuildError(f"--out {out} is a file",
                             "--out takes a folder, or a bundle file name ending in .tar.gz",
                             "pass a folder (it is created) or NAME.tar.gz")
        out = out / f"{top}.tar.gz"        # a directory
    elif out.is_dir():
        raise BuildError(f"--out {out} is a folder with a bundle's name", "",
                         "pass another name, or the folder's parent")
    outputs.check_out_dir(out.parent, "--out")
    with locks.output_lock(settings, out):
        outputs.remove_leftovers(out)
        out.with_name(out.name + ".part").unlink(missing_ok=True)   # older versions' name
        outputs.remove_leftovers(out.with_name(out.name + SHA_SUFFIX))
        _write_locked(settings, plan, top, out, with_wheels, toolchain)
    return out


def _write_locked(settings: Settings, plan: SourcePlan, top: str, out: Path,
                  with_wheels: bool, toolchain: Any) -> None:
    for dep in plan.deps.deps:
        if dep.sha256 and content_sha256(dep.path) != dep.sha256:
            raise DepsError(f"the cached {dep.name} {dep.pin} changed after it was checked",
                            f"its files in {dep.path} no longer hash to {dep.sha256[:12]}…",
                            "run again: a damaged cache entry is fetched anew")
    members: list[tuple[str, Path | None, bytes | None]] = []
    for rel in tree_files(plan.src):
        members.append((f"{top}/mlx/{rel}", plan.src / rel, None))
    for dep in plan.deps.deps:
        for path in sorted(dep.path.rglob("*")):
            if path.is_file() or path.is_symlink():
                rel = path.relative_to(dep.path).as_posix()
                members.append((f"{top}/deps/{dep.name}/{rel}", path, None))
    with tempfile.TemporaryDirectory(prefix="mlxb-wheels-") as wtmp:
        wheels = fetch_build_wheels(settings, plan.src, Path(wtmp)) if with_wheels else []
        members += [(f"{top}/{WHEELS_DIR}/{w.name}", w, None) for w in wheels]
        data = _bundle_json(plan)
        data["build_wheels"] = [w.name for w in wheels]
        if toolchain is not None:
            from mlx_builder.process import StepRunner
            from mlx_builder.wheelbuild.buildenv import download_wheels
            runner = StepRunner(settings.logs_dir / f"bundle-toolchain-{os.getpid()}")
            tc_wheels = download_wheels(toolchain, Path(wtmp) / TOOLCHAIN_DIR, runner)
            members += [(f"{top}/{TOOLCHAIN_DIR}/{w.name}", w, None) for w in tc_wheels]
            data["toolchain"] = {"cuda_major": toolchain.cuda_major,
                                 "platform": toolchain.target.name,
                                 "pins": list(toolchain.pins),
                                 "wheels": [w.name for w in tc_wheels]}
        data["files"] = {arc.split("/", 1)[1]: _file_entry(path)
                         for arc, path, _ in members if path is not None}
        total = sum(e.get("size", 0) for e in data["files"].values())
        data["unpacked_bytes"] = total
        meta = json.dumps(data, indent=1, sort_keys=True).encode() + b"\n"
        members.append((f"{top}/{BUNDLE_JSON}", None, meta))
        members.sort(key=lambda m: m[0])
        side = out.with_name(out.name + SHA_SUFFIX)
        with outputs.staging(f"cannot write the bundle {out}") as staged:
            tmp = outputs.stage_path(out)
            staged.append((tmp, out))
            with open(tmp, "wb") as raw, \
                    gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0,
                                  compresslevel=9) as gz, \
                    tarfile.open(fileobj=gz, mode="w", format=tarfile.GNU_FORMAT) as tf:
                for arcname, src, blob in members:
                    _add(tf, arcname, src, blob)
            staged.append((outputs.stage_bytes(side, f"{file_sha256(tmp)}  {out.name}\n"
                                               .encode()), side))
            # The old sidecar goes first: a run stopped between the renames
            # leaves a bundle without a hash beside it, never one with the
            # hash of the bundle it replaced.
            outputs.commit(staged, remove_first=[side])


def _file_entry(path: Path) -> dict[str, Any]:
    if path.is_symlink():
        return {"link": os.readlink(path)}
    return {"sha256": file_sha256(path), "exec": os.access(path, os.X_OK),
            "size": path.stat().st_size}


# ----------------------------------------------------------------- reading

def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise ValueError(f"the key {key!r} appears twice")
        seen[key] = value
    return seen


def parse_bundle_json(text: bytes | str) -> Any:
    """bundle.json's JSON, refusing a key given twice (two readers could
    take different values)."""
    return json.loads(text, object_pairs_hook=_no_duplicate_keys)


def read_bundle_json(path: Path) -> dict[str, Any]:
    """bundle.json of a bundle file, without unpacking the rest."""
    try:
        with tarfile.open(path) as tf:
            found = [m for m in tf if m.name.count("/") == 1
                     and m.name.endswith("/" + BUNDLE_JSON)]
            if len(found) > 1:
                raise BundleError(f"bundle {path.name} holds {BUNDLE_JSON} twice",
                                  "a reader could take either of them",
                                  "remake the bundle with `mlx-builder bundle`")
            stream = tf.extractfile(found[0]) if found and found[0].isfile() else None
            if stream is not None:
                data = parse_bundle_json(stream.read())
                check_bundle_json(data, str(path))
                return data
    except (OSError, EOFError, tarfile.TarError, ValueError, zlib.error) as exc:
        raise BundleError(f"cannot read bundle {path}", str(exc),
                          "is the file a complete bundle? remake it with "
                          "`mlx-builder bundle`") from None
    raise BundleError(f"{path} is not an mlx-builder bundle", f"no top-level {BUNDLE_JSON}",
                      "pass a file `mlx-builder bundle` wrote")


def _need(ok: bool, where: str, what: str) -> None:
    if not ok:
        raise BundleError(f"{where}: bundle.json has the wrong shape", what,
                          "make the bundle with `mlx-builder bundle` (this version)")


def check_bundle_json(data: Any, where: str) -> None:
    """Every field open_bundle and inspect read, with its type."""
    _need(isinstance(data, dict), where, f"a JSON object expected, got {type(data).__name__}")
    _need(data.get("format") == FORMAT and isinstance(data.get("schema"), int), where,
          f"format {data.get('format')!r} schema {data.get('schema')!r}")
    _need(data["schema"] in (1, SCHEMA), where,
          f"schema {data['schema']} (this mlx-builder reads 1 and {SCHEMA})")
    target = data.get("target")
    _need(isinstance(target, dict) and isinstance(target.get("spec"), str)
          and isinstance(target.get("backend"), str)
          and isinstance(target.get("archs", []), list), where,
          "target must be an object with spec, backend and archs")
    _need(isinstance(data.get("provenance"), dict)
          and isinstance(data["provenance"].get("upstream_commit"), str), where,
          "provenance must be an object with upstream_commit")
    for key in ("disabled_options", "skipped_dependencies", "build_wheels"):
        _need(isinstance(data.get(key, []), list)
              and all(isinstance(v, str) for v in data.get(key, [])), where,
              f"{key} must be a list of strings")
    deps = data.get("dependencies", [])
    _need(isinstance(deps, list), where, "dependencies must be a list")
    for dep in deps:
        _need(isinstance(dep, dict) and all(isinstance(dep.get(k), str)
                                            for k in ("name", "pin", "path")), where,
              f"a dependency needs name, pin and path strings: {dep!r}"[:200])
        _need(_safe_rel(dep["path"]) and dep["path"].startswith("deps/"), where,
              f"dependency path {dep['path']!r} is not a folder under deps/")
    tc = data.get("toolchain")
    _need(tc is None or (isinstance(tc, dict) and isinstance(tc.get("wheels"), list)
                         and all(isinstance(w, str) for w in tc["wheels"])), where,
          "toolchain must be an object with a list of wheel names")
    if data["schema"] >= 2:
        files = data.get("files")
        _need(isinstance(files, dict), where, "files must be an object")
        for rel, entry in files.items():
            _need(_safe_rel(rel) and rel.split("/", 1)[0] in _PARTS, where,
                  f"file {rel!r} is not under {', '.join(_PARTS)}")
            _need(isinstance(entry, dict) and (
                isinstance(entry.get("sha256"), str) or isinstance(entry.get("link"), str)),
                where, f"file {rel!r} has neither sha256 nor link")


def _safe_rel(rel: str) -> bool:
    parts = rel.split("/")
    return bool(rel) and not rel.startswith("/") and all(p not in ("", ".", "..") for p in parts)


def normalize_sha256(text: str) -> str:
    value = text.strip().lower().removeprefix("sha256:")
    if not re.fullmatch(r"[0-9a-f]{64}", value):
        raise BundleError(f"{text!r} is not a sha256", "expected 64 hex digits",
                          "pass the hash `mlx-builder bundle` printed (or sha256sum's)")
    return value


def check_archive(path: Path, expect: str | None = None) -> str:
    """The bundle's sha256, checked against ``expect`` (--sha256) and the
    ``.sha256`` file beside it."""
    sha = file_sha256(path)
    side = path.with_name(path.name + SHA_SUFFIX)
    wanted = [("--sha256", normalize_sha256(expect))] if expect else []
    if side.is_file():
        words = side.read_text(errors="replace").split()
        if not words:
            raise BundleError(f"{side} is empty", "it should hold the bundle's sha256",
                              "remake the bundle, or delete the file and pin with --sha256")
        wanted.append((side.name, normalize_sha256(words[0])))
    for source, value in wanted:
        if value != sha:
            raise HashMismatchError(
                f"bundle {path.name} does not match its sha256 ({source})",
                f"file sha256 {sha} != {value}",
                "the file was changed or truncated after it was made: copy it again "
                "from where `mlx-builder bundle` wrote it")
    if not wanted:
        err_console.print(f"note: {path.name} is not pinned (no --sha256 and no "
                          f"{side.name}); checking it against its own bundle.json only",
                          markup=False)
    return sha


def _read_whole_gzip(path: Path) -> None:
    """Decompress to the end: the gzip trailer's CRC and length catch a
    corrupted or truncated stream that tarfile, which stops at the tar end
    marker, would not notice."""
    try:
        with gzip.open(path, "rb") as gz:
            while gz.read(1 << 20):
                pass
    except (OSError, EOFError, zlib.error) as exc:
        raise BundleError(f"bundle {path.name} is corrupt", f"gzip: {exc}",
                          "copy it again from where `mlx-builder bundle` wrote it") from None


def unpack(settings: Settings, path: Path, expect_sha256: str | None = None) -> tuple[Path, str]:
    """Check, unpack and verify once per bundle hash; returns (top directory,
    bundle sha256). Only a verified bundle ever reaches its final folder."""
    sha = check_archive(path, expect_sha256)
    pinned = bool(expect_sha256) or path.with_name(path.name + SHA_SUFFIX).is_file()
    dest = settings.worktrees_dir / "bundles" / sha[:16]
    with locks.bundle_lock(settings, dest):
        if not (dest / _DONE).is_file():
            dest.parent.mkdir(parents=True, exist_ok=True)
            _remove_killed_unpacks(dest.parent)
            if not pinned:
                # A matching pinned sha256 covers every byte already; only an
                # unpinned bundle needs the gzip trailer's CRC read.
                _read_whole_gzip(path)
            data = read_bundle_json(path)
            tmp = Path(tempfile.mkdtemp(prefix=f".unpack-{sha[:16]}-", dir=dest.parent))
            try:
                try:
                    with tarfile.open(path) as tf:
                        _extract(tf, tmp, data, path.name)
                except OSError as exc:
                    if outputs.is_disk_error(exc):
                        raise outputs.disk_error(
                            exc, f"cannot unpack bundle {path.name} into {dest.parent}"
                        ) from None
                    raise BundleError(f"cannot unpack bundle {path.name}", str(exc),
                                      "copy it again, or remake it") from None
                except (EOFError, tarfile.TarError, zlib.error) as exc:
                    raise BundleError(f"cannot unpack bundle {path.name}", str(exc),
                                      "copy it again, or remake it") from None
                faults.point("bundle-unpacked")
                _verify(_top(tmp, path), pinned=pinned)
                (tmp / _DONE).write_text(sha + "\n")
                if dest.exists():
                    shutil.rmtree(dest)
                tmp.rename(dest)
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
    return _top(dest, path), sha


def _remove_killed_unpacks(folder: Path) -> None:
    """Remove the unpack folders of killed runs: each one whose bundle's lock
    is free (a run unpacking it now holds that lock)."""
    for stale in sorted(folder.glob(".unpack-*-*")):
        key = stale.name.split("-")[1]
        try:
            with locks.beside(folder / key, f"bundle folder {folder / key}", True):
                shutil.rmtree(stale, ignore_errors=True)
        except LockError:
            continue


def _unsafe(bundle: str, member: str, why: str) -> BundleError:
    return BundleError(f"bundle {bundle}: refusing the unsafe member {member!r}", why,
                       "the bundle was not made by `mlx-builder bundle` or was changed "
                       "after; remake it, or copy it again from where it was made; "
                       "nothing was unpacked")


def _extract(tf: tarfile.TarFile, dest: Path, data: dict[str, Any], bundle: str) -> None:
    """Unpack a bundle's members into ``dest``, each checked before a byte of
    it is written: one top folder holding bundle.json once, no member twice,
    only regular files, folders and symbolic links, links that stay inside
    the top folder and do not lead to other links, nothing below a link, and
    (schema 2) only the files bundle.json lists, each no larger than listed."""
    members = tf.getmembers()
    tops = {m.name.split("/", 1)[0] for m in members}
    if len(tops) != 1:
        raise BundleError(f"bundle {bundle} is not an mlx-builder bundle",
                          f"it has {len(tops)} top-level entries: "
                          + ", ".join(sorted(tops)[:5]),
                          "pass a file `mlx-builder bundle` wrote")
    top = tops.pop()
    listed: dict[str, dict] | None = data.get("files") if data["schema"] >= 2 else None
    rels: dict[str, tarfile.TarInfo] = {}
    for m in members:
        rel = m.name[len(top) + 1:].rstrip("/") if m.name != top else ""
        if not m.name.startswith(top + "/") and m.name != top:
            raise _unsafe(bundle, m.name, "outside the bundle's top folder")
        if rel and not _safe_rel(rel):
            raise _unsafe(bundle, m.name, "an absolute path, '.', '..' or an empty part")
        if rel in rels:
            raise _unsafe(bundle, m.name, "it appears twice in the archive")
        rels[rel] = m
    links = {rel for rel, m in rels.items() if m.issym()}
    total = 0
    bound = data.get("unpacked_bytes")
    for rel, m in rels.items():
        if not rel:
            continue
        parts = rel.split("/")
        under = ["/".join(parts[:i]) for i in range(1, len(parts))]
        if any(u in links for u in under):
            raise _unsafe(bundle, m.name, "it lies below a symbolic link")
        if "/" not in rel and not m.isdir() and rel != BUNDLE_JSON:
            raise _unsafe(bundle, m.name, f"a file beside {BUNDLE_JSON}; a bundle has only "
                          "the folders " + ", ".join(_PARTS) + " there")
        if m.isdir():
            continue
        if not (m.isfile() or m.issym()):
            raise _unsafe(bundle, m.name, "not a regular file, folder or symbolic link "
                          "(hard link, device or fifo)")
        if rel == BUNDLE_JSON:
            continue
        if listed is not None:
            entry = listed.get(rel)
            if entry is None:
                raise BundleError(f"bundle {bundle} does not match its {BUNDLE_JSON}",
                                  f"{rel}: not in {BUNDLE_JSON}",
                                  "the bundle was changed after it was made: remake it "
                                  "with `mlx-builder bundle`; nothing was unpacked")
            size = entry.get("size")
            if m.isfile() and isinstance(size, int) and m.size > size:
                raise BundleError(f"bundle {bundle} does not match its {BUNDLE_JSON}",
                                  f"{rel}: {m.size} bytes, {BUNDLE_JSON} lists {size}",
                                  "the bundle was changed after it was made: remake it "
                                  "with `mlx-builder bundle`; nothing was unpacked")
        if m.issym():
            if os.path.isabs(m.linkname):
                raise _unsafe(bundle, m.name, f"a link to the absolute path {m.linkname!r}")
            problem = _link_problem(rel, m.linkname, links)
            if problem:
                raise _unsafe(bundle, m.name, f"a link to {m.linkname!r}, {problem}")
        total += m.size if m.isfile() else 0
        if isinstance(bound, int) and total > bound:
            raise _unsafe(bundle, m.name, f"the files add up to more than the {bound} bytes "
                          f"{BUNDLE_JSON} lists")
    for rel, m in sorted(rels.items()):
        target = dest / top / rel if rel else dest / top
        if m.isdir():
            target.mkdir(parents=True, exist_ok=True)
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        if m.issym():
            os.symlink(m.linkname, target)
            continue
        src = tf.extractfile(m)
        assert src is not None       # a regular file always has data
        with src, open(target, "xb") as out:
            shutil.copyfileobj(src, out)
        os.chmod(target, 0o755 if m.mode & 0o111 else 0o644)


def _link_problem(rel: str, linkname: str, links: set[str]) -> str:
    """Why the link ``rel`` -> ``linkname`` is unsafe ("" when it is not):
    followed one part at a time, as the file system will, it must stay in
    the top folder and pass through no other link."""
    parts = rel.split("/")[:-1]
    for part in linkname.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if not parts:
                return "which leads outside the bundle"
            parts.pop()
            continue
        parts.append(part)
        if "/".join(parts) in links:
            return "which leads through another link"
    return ""


def _top(folder: Path, path: Path) -> Path:
    tops = [p for p in folder.iterdir() if p.is_dir()]
    if len(tops) != 1 or not (tops[0] / BUNDLE_JSON).is_file():
        raise BundleError(f"{path} is not an mlx-builder bundle",
                          f"no single top folder with {BUNDLE_JSON}",
                          "pass a file `mlx-builder bundle` wrote")
    return tops[0]


def _load_json(top: Path) -> dict[str, Any]:
    try:
        data = parse_bundle_json((top / BUNDLE_JSON).read_bytes())
    except (OSError, ValueError) as exc:
        raise BundleError(f"cannot read {BUNDLE_JSON} of the bundle", str(exc)) from None
    check_bundle_json(data, top.name)
    return data


def _verify(top: Path, pinned: bool = False) -> None:
    """Every file under mlx/, deps/ and wheels/ against bundle.json."""
    data = _load_json(top)
    if data["schema"] < 2 and not pinned:
        raise BundleError(
            f"bundle {top.name} lists no per-file hashes",
            "it was made by an older mlx-builder (bundle schema 1): its mlx/ and "
            "wheels/ cannot be verified",
            "remake it with `mlx-builder bundle`, or pin this file with --sha256 "
            "HASH if you trust it")
    if data["schema"] >= 2:
        listed: dict[str, dict] = data["files"]
        found = {p.relative_to(top).as_posix(): p for p in sorted(top.rglob("*"))
                 if (p.is_file() or p.is_symlink()) and p != top / BUNDLE_JSON}
        problems = [f"{rel}: not in bundle.json" for rel in sorted(set(found) - set(listed))]
        problems += [f"{rel}: missing" for rel in sorted(set(listed) - set(found))]
        for rel in sorted(set(found) & set(listed)):
            want, path = listed[rel], found[rel]
            if "link" in want:
                if not path.is_symlink() or os.readlink(path) != want["link"]:
                    problems.append(f"{rel}: not the link bundle.json lists")
            elif path.is_symlink() or file_sha256(path) != want.get("sha256"):
                problems.append(f"{rel}: sha256 differs from bundle.json")
        if problems:
            raise BundleError(
                f"bundle {top.name} does not match its bundle.json ({len(problems)} files)",
                "; ".join(problems[:5]) + (" …" if len(problems) > 5 else ""),
                "the bundle was changed after it was made: remake it with "
                "`mlx-builder bundle`; nothing was unpacked")
    for dep in data.get("dependencies", []):
        got = content_sha256(top / dep["path"])
        if dep.get("sha256") and got != dep["sha256"]:
            raise BundleError(f"bundle dependency {dep['name']} does not match bundle.json",
                              f"content sha256 {got[:16]}… != {dep['sha256'][:16]}…",
                              "recreate the bundle with `mlx-builder bundle`")


def open_bundle(settings: Settings, path: Path, targets: TargetSet | None = None,
                expect_sha256: str | None = None) -> SourcePlan:
    """A SourcePlan from a bundle; ``targets`` may override the bundle's own
    when the bundle holds its patches (same backend) and dependencies.
    ``expect_sha256`` pins the archive (``--sha256``)."""
    top, sha = unpack(settings, Path(path), expect_sha256)
    data = _load_json(top)
    src = top / "mlx"
    own = parse_targets(data["target"]["spec"], source=src)
    targets = targets or own
    if targets.patch_target != own.patch_target:
        raise TargetError(f"this bundle was made for {own.spec}; it cannot build {targets.spec}",
                          f"it carries the patches for {own.patch_target} builds only",
                          f"make a bundle with --target {targets.spec}")
    deps = tuple(ResolvedDep(d["name"], d["pin"], top / d["path"], d.get("source", ""),
                             "bundle", d.get("ref"), d.get("commit"), d.get("sha256", ""))
                 for d in data.get("dependencies", []))
    if targets.spec != own.spec:
        have = {d.name.lower() for d in deps}
        decls, _, _ = needed(src, targets)
        lacking = [d.name for d, need in decls if need and d.name.lower() not in have]
        if lacking:
            raise DepsError(f"the bundle lacks {', '.join(lacking)} needed by {targets.spec}",
                            f"it was made for {own.spec}",
                            f"make a bundle with --target {targets.spec}")
    try:
        prov = Provenance.from_json(data["provenance"])
    except (TypeError, ValueError) as exc:
        raise BundleError(f"{path}: bundle.json has the wrong shape",
                          f"provenance: {exc}", "remake the bundle") from None
    plan_deps = DepsPlan(deps, tuple(data.get("disabled_options", [])),
                         tuple(data.get("skipped_dependencies", [])))
    wheels = top / WHEELS_DIR
    tc_dir = top / TOOLCHAIN_DIR
    return SourcePlan(src, targets, prov, plan_deps, make_label(prov, targets.tag), sha,
                      wheels if wheels.is_dir() else None,
                      tc_dir if tc_dir.is_dir() else None)

