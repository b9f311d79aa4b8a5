"""What an MLX source tree says about itself: version, build requirements,
CMake minimum, the CUDA runtime packages its release wheels declare; and the
one edit a build makes to a staged copy of its setup.py (the version hook).

MLX's setup.py computes its version from mlx/version.h plus ``.devDATE`` and
``+githash`` unless ``PYPI_RELEASE=1``; it passes the result to CMake as
``MLX_VERSION``, so ``mlx.core.__version__`` and the wheel agree. The hook
makes ``get_version()`` return ``$MLX_BUILDER_VERSION`` when that is set, so
our local label reaches both. It edits only the staged build copy, never the
work tree or the patch series.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from mlx_builder.errors import BuildError

VERSION_ENV = "MLX_BUILDER_VERSION"
HOOK_MARK = "# mlx-builder: version hook"
# Upstream main's lists (setup.py, toolkit 12 and 13), used when the tree's
# setup.py has none for the toolkit we build with (MLX < 0.31 knew only cu12).
FALLBACK_CUDA_REQUIRES = {
    12: ["nvidia-cudnn-cu12==9.*", "nvidia-nccl-cu12", "nvidia-cublas-cu12==12.9.*",
         "nvidia-cufft-cu12==11.4.*", "nvidia-cuda-nvrtc-cu12==12.9.*"],
    13: ["nvidia-cudnn-cu13==9.*", "nvidia-nccl-cu13", "nvidia-cublas==13.*",
         "nvidia-cufft==12.*", "nvidia-cuda-nvrtc==13.*", "nvidia-cuda-runtime==13.*"],
}


def read_upstream_version(tree: Path) -> str:
    tree = Path(tree)
    header = tree / "mlx" / "version.h"
    if header.is_file():
        parts = dict(re.findall(r"#define MLX_VERSION_(MAJOR|MINOR|PATCH)\s+(\d+)",
                                header.read_text()))
        if len(parts) == 3:
            return f"{parts['MAJOR']}.{parts['MINOR']}.{parts['PATCH']}"
    setup = tree / "setup.py"
    if setup.is_file():
        m = re.search(r"get_version\(\s*[\"'](\d+\.\d+\.\d+)[\"']\s*\)", setup.read_text())
        if m:
            return m.group(1)
    raise BuildError(f"cannot read MLX's version in {tree}",
                     "neither mlx/version.h nor setup.py names it",
                     "is this an MLX source tree?")


def read_build_requires(tree: Path) -> list[str]:
    path = Path(tree) / "pyproject.toml"
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError):
        return ["setuptools>=40.8.0"]
    return list(data.get("build-system", {}).get("requires", ["setuptools>=40.8.0"]))


def cmake_minimum(tree: Path) -> tuple[int, ...]:
    try:
        text = (Path(tree) / "CMakeLists.txt").read_text(encoding="utf-8")
    except OSError:
        return (3, 25)
    m = re.search(r"cmake_minimum_required\s*\(\s*VERSION\s+(\d+)\.(\d+)", text, re.I)
    return (int(m.group(1)), int(m.group(2))) if m else (3, 25)


def install_version_hook(tree: Path) -> None:
    """Make the staged setup.py's get_version() honour $MLX_BUILDER_VERSION."""
    setup = Path(tree) / "setup.py"
    text = setup.read_text(encoding="utf-8")
    if HOOK_MARK in text:
        return
    m = re.search(r"^def get_version\([^)]*\):[^\n]*\n", text, re.M)
    if not m:
        raise BuildError("cannot set the wheel version: setup.py has no get_version()",
                         f"looked in {setup}",
                         "this MLX version is not supported by mlx-builder's build")
    body = text[m.end():]
    indent = re.match(r"([ \t]+)", body)
    pad = indent.group(1) if indent else "    "
    hook = (f"{pad}{HOOK_MARK}\n"
            f"{pad}if __import__('os').environ.get('{VERSION_ENV}'):\n"
            f"{pad}    return __import__('os').environ['{VERSION_ENV}']\n")
    setup.write_text(text[:m.end()] + hook + body, encoding="utf-8")


# ----------------------------------------------------------------- CUDA runtime requirements

class _Unknown(Exception):
    pass


def _value(node: ast.AST, env: dict) -> Any:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        if node.id in env:
            return env[node.id]
        raise _Unknown(node.id)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return not _value(node.operand, env)
    if isinstance(node, ast.BoolOp):
        vals = [_value(v, env) for v in node.values]
        return all(vals) if isinstance(node.op, ast.And) else any(vals)
    if isinstance(node, ast.Compare) and len(node.ops) == 1:
        a, b = _value(node.left, env), _value(node.comparators[0], env)
        if isinstance(node.ops[0], ast.Eq):
            return a == b
        if isinstance(node.ops[0], ast.NotEq):
            return a != b
    if isinstance(node, ast.Call) and ast.unparse(node.func) == "platform.system":
        return env["__system__"]
    if isinstance(node, ast.JoinedStr):
        return "".join(str(_value(v.value if isinstance(v, ast.FormattedValue) else v, env))
                       for v in node.values)
    raise _Unknown(ast.unparse(node))


def _collect(stmts: list[ast.stmt], env: dict, out: list[str]) -> None:
    for st in stmts:
        if isinstance(st, ast.If):
            try:
                branch = st.body if _value(st.test, env) else st.orelse
            except _Unknown:
                continue
            _collect(branch, env, out)
        elif (isinstance(st, ast.AugAssign) and isinstance(st.target, ast.Name)
              and st.target.id == "install_requires" and isinstance(st.value, ast.List)):
            for elt in st.value.elts:
                try:
                    out.append(str(_value(elt, env)))
                except _Unknown:
                    pass
        elif (isinstance(st, ast.Expr) and isinstance(st.value, ast.Call)
              and ast.unparse(st.value.func) == "install_requires.append" and st.value.args):
            try:
                out.append(str(_value(st.value.args[0], env)))
            except _Unknown:
                pass


def cuda_runtime_requirements(tree: Path, toolkit: int, system: str = "Linux"
                              ) -> tuple[list[str], str]:
    """Runtime packages for a CUDA wheel, as MLX's setup.py declares them for its
    ``mlx-cuda-<toolkit>`` wheel; returns (requirements, where they came from)."""
    env = {"__name__": "__main__", "__system__": system, "build_backend": True,
           "build_frontend": False, "build_macos": False, "build_cuda": True,
           "build_stage": 2, "toolkit": toolkit}
    found: list[str] = []
    try:
        module = ast.parse((Path(tree) / "setup.py").read_text(encoding="utf-8"))
        _collect(module.body, env, found)
    except (OSError, SyntaxError):
        pass
    nvidia = [r for r in found if r.startswith("nvidia-")]
    suffixes = {int(m) for r in nvidia for m in re.findall(r"-cu(\d+)\b", r)}
    if nvidia and suffixes <= {toolkit}:
        return nvidia, "setup.py"
    fallback = FALLBACK_CUDA_REQUIRES.get(toolkit)
    if fallback is None:
        raise BuildError(f"no runtime package list for CUDA {toolkit}",
                         "MLX's setup.py and mlx-builder know CUDA 12 and 13",
                         "build with CUDA 12 or 13")
    return list(fallback), f"mlx-builder's copy of upstream main (setup.py lists none for CUDA {toolkit})"
