"""Build targets and the MLX CMake arguments each one means.

Spellings: ``cuda-sm80``, ``cuda-sm86``, ``cuda-sm89``, ``cuda-sm90`` (built
as ``90a``), ``cuda-sm100`` (``100a``), ``cuda-sm120`` (``120a``),
``cuda-sm121`` (``121a``); an explicit suffix (``cuda-sm90a``) is accepted.
``cuda`` is the set upstream ships; ``cpu``; ``metal`` (macOS only). CUDA
targets combine with commas: ``cuda-sm90,cuda-sm121``.

``cuda`` comes from MLX's own setup.py when a source tree is given (the
``cuda_archs`` list it passes for its ``mlx-cuda-*`` release wheels); without
a tree it is the list of MLX v0.32.1 / main 846d176: 75-real, 80-real,
120a-real, 120-virtual and, on Linux, 90a-real, 100a-real, 121a-real.

For our own combinations every architecture is SASS-only (``-real``) except
the highest, which is CMake's plain form (SASS plus PTX), as upstream keeps
its last entry real and virtual. A single target is the plain form (one
front-end pass per file: the fastest build that also carries PTX).
"""

from __future__ import annotations

import ast
import platform
import re
from dataclasses import dataclass
from pathlib import Path

from mlx_builder.errors import TargetError
from mlx_builder.lists import comma_list

# Our named targets and the architecture each builds.
CUDA_TARGETS: dict[str, tuple[int, str]] = {
    "sm80": (80, ""), "sm86": (86, ""), "sm89": (89, ""), "sm90": (90, "a"),
    "sm100": (100, "a"), "sm120": (120, "a"), "sm121": (121, "a"),
}

# The oldest CUDA release that compiles each SASS architecture (base number;
# 'a' variants exist from the same release for 90 and later).
MIN_CUDA = {75: (10, 0), 80: (11, 0), 86: (11, 1), 87: (11, 4), 89: (11, 8),
            90: (12, 0), 100: (12, 8), 101: (12, 8), 103: (12, 9),
            110: (13, 0), 120: (12, 8), 121: (12, 9)}

UPSTREAM_DEFAULT = {
    "all": ("75-real", "80-real", "120a-real", "120-virtual"),
    "Linux": ("90a-real", "100a-real", "121a-real"),
}

_ARCH_ENTRY = re.compile(r"^(\d{2,3})([af]?)(?:-(real|virtual))?$")
_TARGET = re.compile(r"^cuda-sm(\d{2,3})([af]?)$")


@dataclass(frozen=True)
class ArchEntry:
    """One MLX_CUDA_ARCHITECTURES entry: ``90a``, ``80-real``, ``120-virtual``."""

    number: int
    suffix: str
    kind: str            # 'both' | 'real' | 'virtual'

    @classmethod
    def parse(cls, text: str) -> ArchEntry:
        m = _ARCH_ENTRY.match(text.strip())
        if not m:
            raise TargetError(f"bad CUDA architecture entry {text!r}",
                              "expected e.g. 90a, 80-real, 120-virtual")
        return cls(int(m.group(1)), m.group(2), m.group(3) or "both")

    @property
    def name(self) -> str:
        return f"{self.number}{self.suffix}"

    @property
    def cmake(self) -> str:
        return self.name if self.kind == "both" else f"{self.name}-{self.kind}"

    @property
    def has_sass(self) -> bool:
        return self.kind != "virtual"

    @property
    def min_cuda(self) -> tuple[int, int]:
        """Oldest CUDA that compiles it (family 'f' code arrived in 12.9)."""
        base = MIN_CUDA.get(self.number, (0, 0))
        return max(base, (12, 9)) if self.suffix == "f" else base


@dataclass(frozen=True)
class TargetSet:
    spec: str                       # normalised spelling, e.g. 'cuda-sm90'
    backend: str                    # 'cuda' | 'metal' | 'cpu'
    arch_entries: tuple[ArchEntry, ...] = ()

    @property
    def cuda_archs(self) -> tuple[str, ...]:
        """MLX_CUDA_ARCHITECTURES entries as CMake takes them ('90a', '80-real')."""
        return tuple(e.cmake for e in self.arch_entries)

    @property
    def sass_archs(self) -> tuple[str, ...]:
        """SASS that libmlx must contain: ('sm_80', 'sm_90a')."""
        return tuple(f"sm_{e.name}" for e in self.arch_entries if e.has_sass)

    @property
    def min_cuda(self) -> tuple[int, int]:
        return max((e.min_cuda for e in self.arch_entries), default=(0, 0))

    @property
    def patch_target(self) -> str:
        """The ``target`` argument for apply.prepare_tree / Series.for_target."""
        return self.backend

    @property
    def tag(self) -> str:
        """Short PEP 440 local-label segment naming the target."""
        if self.backend != "cuda":
            return self.backend
        if self.spec == "cuda":
            return "cuda"
        return "cu" + "x".join(e.name for e in self.arch_entries if e.has_sass)

    def cmake_args(self) -> list[str]:
        if self.backend == "cuda":
            return ["-DMLX_BUILD_CUDA=ON", "-DMLX_BUILD_METAL=OFF",
                    f"-DMLX_CUDA_ARCHITECTURES={';'.join(self.cuda_archs)}",
                    "-DMLX_LOAD_CUDA_LIBS_FROM_PYTHON=ON"]
        if self.backend == "metal":
            return ["-DMLX_BUILD_METAL=ON", "-DMLX_BUILD_CUDA=OFF"]
        return ["-DMLX_BUILD_CUDA=OFF", "-DMLX_BUILD_METAL=OFF"]

    def to_json(self) -> dict:
        return {"spec": self.spec, "backend": self.backend,
                "archs": list(self.cuda_archs), "sass": list(self.sass_archs)}


def upstream_cuda_archs(source: Path | None = None,
                        system: str | None = None) -> tuple[str, ...]:
    """The CUDA architectures MLX's setup.py builds its release wheels for."""
    system = system or platform.system()
    found = _archs_from_setup(Path(source) / "setup.py") if source else None
    if found is None:
        found = UPSTREAM_DEFAULT
    archs = list(found.get("all", ()))
    archs += list(found.get(system, ()))
    return tuple(archs)


def _archs_from_setup(setup_py: Path) -> dict[str, tuple[str, ...]] | None:
    """Lists assigned or added to ``cuda_archs`` in setup.py, by platform guard."""
    try:
        tree = ast.parse(setup_py.read_text(encoding="utf-8"))
    except (OSError, SyntaxError):
        return None
    out: dict[str, list[str]] = {}

    def strings(node: ast.AST) -> list[str] | None:
        if isinstance(node, ast.Call) and node.args:   # ";".join((...))
            node = node.args[0]
        if isinstance(node, (ast.List, ast.Tuple)):
            vals = [e.value for e in node.elts
                    if isinstance(e, ast.Constant) and isinstance(e.value, str)]
            return vals if len(vals) == len(node.elts) else None
        return None

    def visit(node: ast.AST, guard: str) -> None:
        for child in ast.iter_child_nodes(node):
            g = guard
            if isinstance(child, ast.If):
                src = ast.unparse(child.test)
                m = re.search(r"platform\.system\(\)\s*==\s*['\"](\w+)['\"]", src)
                if m:
                    g = m.group(1)
            if isinstance(child, (ast.Assign, ast.AugAssign)):
                targets = (child.targets if isinstance(child, ast.Assign)
                           else [child.target])
                if any(isinstance(t, ast.Name) and t.id == "cuda_archs"
                       for t in targets):
                    vals = strings(child.value)
                    if vals is not None:
                        out.setdefault(g, []).extend(vals)
            visit(child, g)

    visit(tree, "all")
    if not out:
        return None
    return {k: tuple(v) for k, v in out.items()}


def _arch_for(name: str) -> tuple[int, str]:
    m = _TARGET.match(name)
    if not m:
        raise TargetError(
            f"unknown build target {name!r}",
            f"targets are cpu, metal, cuda and cuda-<arch> with arch one of "
            f"{', '.join(CUDA_TARGETS)}",
            "pass e.g. --target cuda-sm90 or --target cuda-sm90,cuda-sm121")
    number, suffix = int(m.group(1)), m.group(2)
    known = CUDA_TARGETS.get(f"sm{number}")
    if known is None:
        raise TargetError(f"unsupported CUDA architecture sm_{number}{suffix}",
                          f"supported: {', '.join(CUDA_TARGETS)}",
                          "pick one of the supported cuda-sm targets")
    if suffix and number < 90:
        raise TargetError(f"sm_{number}{suffix} does not exist",
                          "arch-specific (a) and family (f) code start at sm_90",
                          f"use cuda-sm{number}")
    return number, suffix or known[1]


def _spelling(number: int, suffix: str) -> str:
    default = CUDA_TARGETS[f"sm{number}"][1]
    return f"cuda-sm{number}" + ("" if suffix == default else suffix)


def parse_targets(spec: str, *, source: Path | None = None,
                  system: str | None = None) -> TargetSet:
    """Parse ``--target``. ``source`` (an MLX tree) supplies upstream's ``cuda``
    set; ``system`` defaults to this host (metal needs Darwin)."""
    system = system or platform.system()
    parts = [p.lower() for p in comma_list(spec)]
    if not parts:
        raise TargetError("no build target given",
                          "a build needs one target",
                          "pass --target cuda-sm90, cuda, cpu or metal")
    if len(set(parts)) != len(parts):
        raise TargetError(f"target {spec!r} names a target twice")
    if len(parts) > 1 and not all(p.startswith("cuda-") for p in parts):
        raise TargetError(
            f"cannot combine {spec!r}",
            "only cuda-sm targets combine; cpu, metal and cuda stand alone",
            "build separate wheels, e.g. --target cpu then --target cuda-sm90")
    first = parts[0]
    if first == "metal":
        if system != "Darwin":
            raise TargetError(
                "the metal target builds only on macOS",
                f"this host runs {system}; Metal needs Xcode's metal compiler",
                "build metal on a Mac, or pick cpu or a cuda target here")
        return TargetSet("metal", "metal")
    if first == "cpu":
        return TargetSet("cpu", "cpu")
    if first == "cuda":
        entries = tuple(ArchEntry.parse(a)
                        for a in upstream_cuda_archs(source, system))
        return TargetSet("cuda", "cuda", entries)
    archs = sorted({_arch_for(p) for p in parts})
    if len({n for n, _ in archs}) != len(archs):
        raise TargetError(f"target {spec!r} names sm_{archs[0][0]} twice")
    entries = tuple(ArchEntry(n, sfx, "both" if i == len(archs) - 1 else "real")
                    for i, (n, sfx) in enumerate(archs))
    return TargetSet(",".join(_spelling(n, sfx) for n, sfx in archs),
                     "cuda", entries)
