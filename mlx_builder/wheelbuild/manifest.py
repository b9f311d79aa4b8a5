"""Version labels and the provenance manifest inside each wheel.

Label: ``<upstream version>+mlxb.<commit12>.<patchhash8>.<target>``, e.g.
``0.32.2+mlxb.846d176227a0.1f3a9c0e.cu13.90a`` (PEP 440 local version; the
target keeps wheels of one source for different targets apart in a
wheelhouse: ``cu13.90a``, ``cu12.80x121a``, ``cu13.all`` for upstream's set,
``cpu``, ``metal``). A CUDA label names the CUDA major the wheel was built
with, because a CUDA 13 wheel needs a driver that a CUDA 12 one does not
(``cu90a`` without a major is the form of wheels built before this).

The manifest is ``mlx/_mlx_builder_manifest.json`` in the wheel (so it is
also installed next to the package). Flat keys other tools read: ``version``,
``target``, ``backend``, ``archs`` (MLX_CUDA_ARCHITECTURES entries),
``upstream_url``, ``upstream_commit``, ``series``; the rest is detail.
Adding it rewrites RECORD with fresh sha256 digests and sizes.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import json
import re
import zipfile
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version

from mlx_builder import __version__, distinfo
from mlx_builder.errors import WheelError

MANIFEST_PATH = "mlx/_mlx_builder_manifest.json"
MANIFEST_SUFFIX = "_mlx_builder_manifest.json"
SCHEMA = 1
_LABEL = re.compile(r"^(?P<base>[^+]+)\+mlxb\.(?P<commit>[0-9a-f]{12})\."
                    r"(?P<patches>[0-9a-f]{8})(?:\.(?P<target>[a-z0-9]+(?:\.[a-z0-9]+)?))?$")
_CUDA_TARGET = re.compile(r"^cu(?P<major>\d{2})\.")


@dataclass(frozen=True)
class Provenance:
    upstream_url: str
    upstream_ref: str
    upstream_commit: str
    upstream_version: str
    series: str | None = None
    series_base: str | None = None
    patches: tuple[Mapping[str, str], ...] = ()
    patch_set_hash: str = ""
    extra: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["patches"] = [dict(p) for p in self.patches]
        data["extra"] = dict(self.extra)
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Provenance:
        known = {k: data[k] for k in cls.__dataclass_fields__ if k in data}
        known["patches"] = tuple(dict(p) for p in known.get("patches", ()))
        known["extra"] = dict(known.get("extra", {}))
        return cls(**known)


def patch_hash(patches: Iterable[Any]) -> str:
    from mlx_builder.source.series import patch_set_hash
    return patch_set_hash(list(patches))


def provenance_from_tree(tree: Any, upstream_version: str,
                         upstream_url: str | None = None) -> Provenance:
    """From apply.PreparedTree (duck-typed: path, upstream_url, base_commit,
    ref, series, applied)."""
    applied = tuple(tree.applied)
    patches = tuple({"file": p.file, "sha256": p.sha256, "target": p.target,
                     "upstream": p.upstream} for p in applied)
    extra = {}
    skipped = tuple(getattr(tree, "skipped", ()) or ())
    if skipped:
        extra["skipped_merged_upstream"] = [p.file for p in skipped]
    return Provenance(
        upstream_url=upstream_url or tree.upstream_url,
        upstream_ref=tree.ref.ref, upstream_commit=tree.base_commit,
        upstream_version=upstream_version, series=tree.series.name,
        series_base=tree.series.base, patches=patches,
        patch_set_hash=patch_hash(applied), extra=extra)


def label_target(target_tag: str, cuda_major: int | None = None) -> str:
    """The label's target part: ``cu90a`` with CUDA 13 is ``cu13.90a``,
    upstream's set (``cuda``) ``cu13.all``; cpu and metal stay as they are."""
    if cuda_major is None or not target_tag.startswith("cu"):
        return target_tag
    arch = "all" if target_tag == "cuda" else target_tag[2:]
    return f"cu{cuda_major}.{arch}"


def make_label(prov: Provenance, target_tag: str, cuda_major: int | None = None) -> str:
    label = (f"{prov.upstream_version}+mlxb.{prov.upstream_commit[:12]}."
             f"{(prov.patch_set_hash or patch_hash(()))[:8]}."
             f"{label_target(target_tag, cuda_major)}")
    try:
        Version(label)
    except InvalidVersion:
        raise WheelError(f"cannot form a PEP 440 version from {label!r}",
                         "the upstream version or target tag is unusual") from None
    return label


def parse_label(version: str) -> dict[str, str] | None:
    """{'base','commit','patches','target'} of one of our labels (and
    'cuda_major' when the target names one), else None."""
    m = _LABEL.match(version)
    if not m:
        return None
    found = {k: v for k, v in m.groupdict().items() if v}
    major = _CUDA_TARGET.match(found.get("target", ""))
    if major:
        found["cuda_major"] = major["major"]
    return found


def build_manifest(*, version: str, prov: Provenance, targets: Any,
                   toolchain: Mapping[str, str], dependencies: Iterable[Mapping],
                   disabled_options: Iterable[str] = (),
                   runtime_requires: Iterable[str] = (), requires_source: str = "",
                   gpu_code: Mapping[str, Any] | None = None,
                   cmake_args: Iterable[str] = (), built_from: str = "tree",
                   name: str = "mlx", bundle_sha256: str | None = None,
                   platform: Mapping[str, Any] | None = None,
                   cuda_major: int | None = None) -> dict[str, Any]:
    extra: dict[str, Any] = {"bundle_sha256": bundle_sha256} if bundle_sha256 else {}
    if cuda_major is not None:
        extra["cuda_major"] = cuda_major
    return {**extra,
        "schema": SCHEMA, "tool": f"mlx-builder {__version__}", "name": name,
        "version": version,
        "upstream_url": prov.upstream_url, "upstream_ref": prov.upstream_ref,
        "upstream_commit": prov.upstream_commit,
        "upstream_version": prov.upstream_version,
        "series": prov.series, "series_base": prov.series_base,
        "patch_set_hash": prov.patch_set_hash,
        "patches": [dict(p) for p in prov.patches],
        "target": targets.spec, "backend": targets.backend,
        "archs": list(targets.cuda_archs), "sass_required": list(targets.sass_archs),
        "gpu_code": dict(gpu_code or {}),
        "cmake_args": list(cmake_args), "disabled_options": list(disabled_options),
        "dependencies": [dict(d) for d in dependencies],
        "toolchain": dict(toolchain),
        "runtime_requires": list(runtime_requires), "requires_source": requires_source,
        "built_from": built_from, "provenance_extra": dict(prov.extra),
        "platform": dict(platform or {}),
    }


# ----------------------------------------------------------------- wheels

def read_manifest(wheel: Path) -> dict[str, Any]:
    """The manifest inside ``wheel``; WheelError if missing or unreadable."""
    try:
        with zipfile.ZipFile(wheel) as zf:
            names = [n for n in zf.namelist() if n.endswith(MANIFEST_SUFFIX)]
            if not names:
                raise WheelError(f"{Path(wheel).name} has no mlx-builder manifest",
                                 f"no member {MANIFEST_PATH}",
                                 "only wheels built by mlx-builder carry one")
            data = json.loads(zf.read(names[0]))
    except (OSError, zipfile.BadZipFile, ValueError) as exc:
        raise WheelError(f"cannot read the manifest of {Path(wheel).name}", str(exc),
                         "is the file a complete wheel?") from None
    check_manifest(data, Path(wheel).name)
    return data


_MANIFEST_TYPES = {"version": str, "cuda_major": int, "target": str, "backend": str, "archs": list,
                   "upstream_commit": str, "patches": list, "dependencies": list,
                   "toolchain": dict, "gpu_code": dict, "runtime_requires": list}


def check_manifest(data: Any, where: str) -> None:
    """A manifest is a JSON object whose keys other code reads have their types."""
    bad = (f"a JSON object expected, got {type(data).__name__}"
           if not isinstance(data, dict) else
           next((f"{k} must be a {t.__name__}, got {type(data[k]).__name__}"
                 for k, t in _MANIFEST_TYPES.items()
                 if data.get(k) is not None and not isinstance(data[k], t)), None))
    if bad is None and isinstance(data, dict):
        bad = next(("patches/dependencies entries must be objects with file/name"
                    for key, name in (("patches", "file"), ("dependencies", "name"))
                    for p in data.get(key) or []
                    if not isinstance(p, dict) or not isinstance(p.get(name), str)), None)
    if bad:
        raise WheelError(f"the mlx-builder manifest of {where} has the wrong shape", bad,
                         "rebuild the wheel with `mlx-builder build`")


def record_hash(data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
    return "sha256=" + digest.decode()


# Upstream's `mlx` names its backend packages as extras (mlx[cuda13] pulls
# mlx-cuda-13, and mlx-lm[cuda13] asks for mlx[cuda13]). Our wheel carries its
# backend itself, so it declares the same extras with nothing in them: pip and
# uv then take mlx[cuda13] from our wheel alone, quietly, and never pull an
# upstream backend that would overwrite our libmlx.so.
BACKEND_EXTRAS = ("cpu", "cuda", "cuda12", "cuda13")


def _add_requires(metadata: bytes, requires: Iterable[str], extras: Iterable[str] = ()) -> bytes:
    text = metadata.decode("utf-8")
    head, sep, body = text.partition("\n\n")
    have = set(re.findall(r"^Requires-Dist: (.+)$", head, re.M))
    provided = set(re.findall(r"^Provides-Extra: (.+)$", head, re.M))
    extra = "".join(f"Requires-Dist: {r}\n" for r in requires if r not in have)
    extra += "".join(f"Provides-Extra: {e}\n" for e in extras if e not in provided)
    if not extra:
        return metadata
    head = head.rstrip("\n") + "\n" + extra.rstrip("\n")
    return (head + (sep or "\n") + body).encode("utf-8")


def inject(wheel: Path, out: Path, *, manifest: Mapping[str, Any],
           requires: Iterable[str] = (), extras: Iterable[str] = ()) -> Path:
    """Copy ``wheel`` to ``out`` with the manifest added, Requires-Dist
    extended, ``extras`` declared (empty), and RECORD rewritten to match
    every member."""
    extras = tuple(extras)
    try:
        src = zipfile.ZipFile(wheel)
    except (OSError, zipfile.BadZipFile) as exc:
        raise WheelError(f"cannot open {wheel}", str(exc)) from None
    with src:
        infos = src.infolist()
        metadata = distinfo.member(src, "METADATA")
        if metadata is None:
            raise WheelError(f"{wheel.name} has no .dist-info/METADATA")
        dist_info = metadata.split("/")[0]
        record_name = f"{dist_info}/RECORD"
        payload: list[tuple[zipfile.ZipInfo, bytes]] = []
        stamp = src.getinfo(metadata).date_time
        manifest_bytes = (json.dumps(manifest, indent=1, sort_keys=True) + "\n").encode()
        added = False
        for info in infos:
            if info.filename == record_name or info.filename.endswith(MANIFEST_SUFFIX):
                continue
            if not added and info.filename.startswith(dist_info + "/"):
                new = zipfile.ZipInfo(MANIFEST_PATH, date_time=stamp)
                new.external_attr = 0o644 << 16
                new.compress_type = zipfile.ZIP_DEFLATED
                payload.append((new, manifest_bytes))
                added = True
            data = src.read(info)
            if info.filename == metadata:
                data = _add_requires(data, requires, extras)
            payload.append((info, data))
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerows([(i.filename, record_hash(d), len(d)) for i, d in payload])
    writer.writerow((record_name, "", ""))
    rec = zipfile.ZipInfo(record_name, date_time=stamp)
    rec.external_attr = 0o644 << 16
    rec.compress_type = zipfile.ZIP_DEFLATED
    payload.append((rec, buf.getvalue().encode()))
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".part")
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as dst:
        for info, data in payload:
            dst.writestr(info, data, compress_type=zipfile.ZIP_DEFLATED)
    tmp.replace(out)
    return out


def verify_record(wheel: Path) -> list[str]:
    """Members whose RECORD line is missing or wrong (empty list: all good);
    ValueError for a wheel without a RECORD or with one that is not one."""
    problems = []
    with zipfile.ZipFile(wheel) as zf:
        rec_name = distinfo.member(zf, "RECORD")
        if rec_name is None:
            raise ValueError("no .dist-info/RECORD")
        rows = {}
        try:
            table = list(csv.reader(io.StringIO(zf.read(rec_name).decode())))
        except csv.Error as exc:
            raise ValueError(f"RECORD is not CSV: {exc}") from None
        for row in table:
            if row and len(row) != 3:
                raise ValueError(f"RECORD row {','.join(row)[:80]!r} has {len(row)} "
                                 "columns, not 3")
            if row:
                rows[row[0]] = (row[1], row[2])
        for name in zf.namelist():
            if name == rec_name or name.endswith("/"):
                continue
            data = zf.read(name)
            if rows.get(name) != (record_hash(data), str(len(data))):
                problems.append(name)
        problems += [p for p in rows if p not in zf.namelist()]
    return problems
