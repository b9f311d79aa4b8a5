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
``open_bundle`` unpacks once per bundle hash under ``<work>/bundles/`` and
checks every dependency's content hash against bundle.json.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mlx_builder import __version__
from mlx_builder.archives import content_sha256, safe_extract
from mlx_builder.console import err_console
from mlx_builder.deps import DepsPlan, ResolvedDep, needed, resolve
from mlx_builder.errors import DepsError, TargetError, WheelError
from mlx_builder.manifest import Provenance, make_label, provenance_from_tree
from mlx_builder.mlxtree import read_build_requires, read_upstream_version
from mlx_builder.settings import DEFAULT_MLX_REPO, Settings
from mlx_builder.targets import TargetSet, parse_targets

BUNDLE_JSON = "bundle.json"
WHEELS_DIR = "wheels"
TOOLCHAIN_DIR = "toolchain"     # the registry build environment's wheels (--with-toolchain)
FORMAT = "mlx-builder-bundle"
SCHEMA = 1
_DONE = ".unpacked"


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
    proc = subprocess.run(["git", "-C", repo, "config", "--get", "remote.origin.url"],
                          capture_output=True, text=True)
    url = proc.stdout.strip()
    return url if proc.returncode == 0 and url and not os.path.exists(url) else DEFAULT_MLX_REPO


def plan_from_tree(settings: Settings, tree: Any, targets: TargetSet, *,
                   refresh: bool = False) -> SourcePlan:
    """From an apply.PreparedTree, or a plain MLX source directory."""
    if hasattr(tree, "applied"):
        path = Path(tree.path)
        prov = provenance_from_tree(tree, read_upstream_version(path), canonical_url(settings))
    else:
        path = Path(tree)
        proc = subprocess.run(["git", "-C", str(path), "rev-parse", "HEAD"],
                              capture_output=True, text=True)
        commit = proc.stdout.strip() if proc.returncode == 0 else "0" * 40
        prov = Provenance(canonical_url(settings), "local-tree", commit,
                          read_upstream_version(path),
                          extra={"note": "built from a source directory, not a series"})
    deps = resolve(settings, path, targets, refresh=refresh)
    return SourcePlan(path, targets, prov, deps, make_label(prov, targets.tag))


def prepare(settings: Settings, mlx_ref: str, target_spec: str, *,
            series_name: str | None = None) -> tuple[Any, TargetSet]:
    """Parse the target (TargetError before any work), then apply the series
    for its backend; ``cuda`` (upstream's set) is read from the tree."""
    targets = parse_targets(target_spec)
    from mlx_builder.apply import prepare_tree
    tree = prepare_tree(settings, mlx_ref, series_name=series_name,
                        target=targets.patch_target)
    if targets.spec == "cuda":
        targets = parse_targets(target_spec, source=Path(tree.path))
    return tree, targets


def tree_files(root: Path) -> list[str]:
    """Files of an MLX tree: git's tracked + untracked-not-ignored, else a walk."""
    proc = subprocess.run(["git", "-C", str(root), "ls-files", "-z", "--cached",
                           "--others", "--exclude-standard"], capture_output=True)
    if proc.returncode == 0 and (Path(root) / ".git").exists():
        names = [n for n in proc.stdout.decode().split("\0") if n]
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
    proc = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps",
                           "--only-binary=:all:", "-d", str(dest), *reqs],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        err_console.print("note: build-requirement wheels not added to the bundle: "
                          + (proc.stderr.strip().splitlines() or ["pip failed"])[-1],
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
    plan = plan or plan_from_tree(settings, tree, targets)
    top = "mlx-" + re.sub(r"[^A-Za-z0-9._-]+", "_", plan.label)
    out = Path(out)
    if not out.name.endswith((".tar.gz", ".tgz")):
        out = out / f"{top}.tar.gz"        # a directory
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
            from mlx_builder.buildenv import download_wheels
            from mlx_builder.runner import StepRunner
            runner = StepRunner(settings.logs_dir / f"bundle-toolchain-{os.getpid()}")
            tc_wheels = download_wheels(toolchain, Path(wtmp) / TOOLCHAIN_DIR, runner)
            members += [(f"{top}/{TOOLCHAIN_DIR}/{w.name}", w, None) for w in tc_wheels]
            data["toolchain"] = {"cuda_major": toolchain.cuda_major,
                                 "platform": toolchain.target.name,
                                 "pins": list(toolchain.pins),
                                 "wheels": [w.name for w in tc_wheels]}
        meta = json.dumps(data, indent=1, sort_keys=True).encode() + b"\n"
        members.append((f"{top}/{BUNDLE_JSON}", None, meta))
        members.sort(key=lambda m: m[0])
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_name(out.name + ".part")
        with open(tmp, "wb") as raw, \
                gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=9) as gz, \
                tarfile.open(fileobj=gz, mode="w", format=tarfile.GNU_FORMAT) as tf:
            for arcname, path, blob in members:
                _add(tf, arcname, path, blob)
        tmp.replace(out)
    return out


# ----------------------------------------------------------------- reading

def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def read_bundle_json(path: Path) -> dict[str, Any]:
    """bundle.json of a bundle file, without unpacking the rest."""
    try:
        with tarfile.open(path) as tf:
            for member in tf:
                if member.name.count("/") == 1 and member.name.endswith("/" + BUNDLE_JSON):
                    return json.loads(tf.extractfile(member).read())
    except (OSError, tarfile.TarError, ValueError) as exc:
        raise WheelError(f"cannot read bundle {path}", str(exc)) from None
    raise WheelError(f"{path} is not an mlx-builder bundle", f"no top-level {BUNDLE_JSON}")


def unpack(settings: Settings, path: Path) -> tuple[Path, str]:
    """Unpack once per bundle hash; returns (top directory, bundle sha256)."""
    sha = file_sha256(path)
    dest = settings.worktrees_dir / "bundles" / sha[:16]
    if not (dest / _DONE).is_file():
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".unpack-", dir=dest.parent))
        try:
            with tarfile.open(path) as tf:
                safe_extract(tf, tmp)
            (tmp / _DONE).write_text(sha + "\n")
            if dest.exists():
                shutil.rmtree(dest)
            tmp.rename(dest)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        fresh = True
    else:
        fresh = False
    tops = [p for p in dest.iterdir() if p.is_dir()]
    if len(tops) != 1 or not (tops[0] / BUNDLE_JSON).is_file():
        raise WheelError(f"{path} is not an mlx-builder bundle", f"no top-level {BUNDLE_JSON}")
    if fresh:
        _verify(tops[0])
    return tops[0], sha


def _verify(top: Path) -> None:
    data = json.loads((top / BUNDLE_JSON).read_text())
    for dep in data.get("dependencies", []):
        got = content_sha256(top / dep["path"])
        if dep.get("sha256") and got != dep["sha256"]:
            raise DepsError(f"bundle dependency {dep['name']} does not match bundle.json",
                            f"content sha256 {got[:16]}… != {dep['sha256'][:16]}…",
                            "recreate the bundle with `mlx-builder bundle`")


def open_bundle(settings: Settings, path: Path, targets: TargetSet | None = None) -> SourcePlan:
    """A SourcePlan from a bundle; ``targets`` may override the bundle's own
    when the bundle holds its patches (same backend) and dependencies."""
    top, sha = unpack(settings, Path(path))
    data = json.loads((top / BUNDLE_JSON).read_text())
    if data.get("format") != FORMAT or data.get("schema") != SCHEMA:
        raise WheelError(f"{path}: unsupported bundle format",
                         f"format {data.get('format')!r} schema {data.get('schema')!r}",
                         "make the bundle with this mlx-builder version")
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
    prov = Provenance.from_json(data["provenance"])
    plan_deps = DepsPlan(deps, tuple(data.get("disabled_options", [])),
                         tuple(data.get("skipped_dependencies", [])))
    wheels = top / WHEELS_DIR
    tc_dir = top / TOOLCHAIN_DIR
    return SourcePlan(src, targets, prov, plan_deps, make_label(prov, targets.tag), sha,
                      wheels if wheels.is_dir() else None,
                      tc_dir if tc_dir.is_dir() else None)

