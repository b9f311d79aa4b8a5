"""The package's shape: no import cycles, stages import only downward, every
module imports on its own, and only process.py starts programs.

The graph is read with ``ast`` from every module under mlx_builder/, with
imports inside functions counted as well (a lazy import is still a
dependency; it only moves the moment it fails).
"""

from __future__ import annotations

import ast
import functools
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "mlx_builder"
WORKERS = PACKAGE / "verify" / "workers"

# Lowest first: a module may import its own layer and the ones below.
# prebuilt sits below verify only because nightly asks install which GPU is here;
# nothing in prebuilt needs verify.
LAYERS = ("core", "source", "wheelbuild", "prebuilt", "verify", "commands", "cli")


@functools.cache
def parsed(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"))


# Data the package ships, not modules of it: the GPU suite (pytest files run
# against a built wheel; they import MLX and their own helpers by name).
SUITES = PACKAGE / "suites"


def modules() -> dict[str, Path]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if SUITES in path.parents:
            continue
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def imports(path: Path, known: dict[str, Path]) -> set[str]:
    """The mlx_builder modules ``path`` imports (``from P import m`` counts
    as the module P.m when there is one, else as P)."""
    out = set()
    for node in ast.walk(parsed(path)):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.split(".")[0] == "mlx_builder"}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module \
                and node.module.split(".")[0] == "mlx_builder":
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                out.add(sub if sub in known else node.module)
    return out


def graph() -> dict[str, set[str]]:
    known = modules()
    return {name: imports(path, known) - {name} for name, path in known.items()}


def layer(module: str) -> str:
    parts = module.split(".")
    if len(parts) > 1 and parts[1] in LAYERS:
        return parts[1]
    if parts[1:] in (["__main__"], ["cli"]):
        return "cli"
    return "core"


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One cycle as a path (first node repeated at the end), or None."""
    state: dict[str, int] = {}       # 1 on the stack, 2 done
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt):], nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(edges):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def test_the_graph_sees_the_package():
    edges = graph()
    assert {"mlx_builder.process", "mlx_builder.source.gitops", "mlx_builder.wheelbuild.wheel",
            "mlx_builder.verify.bench", "mlx_builder.prebuilt.install", "mlx_builder.cli"} <= set(edges)
    assert "mlx_builder.wheelbuild.toolchain" in edges["mlx_builder.wheelbuild.wheel"]
    assert "mlx_builder.commands" in edges["mlx_builder.cli"]


def test_find_cycle_reports_a_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) is None


def test_no_import_cycles():
    cycle = find_cycle(graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_stages_import_only_their_own_layer_and_below():
    bad = [f"{mod} ({layer(mod)}) imports {dep} ({layer(dep)})"
           for mod, deps in graph().items() for dep in sorted(deps)
           if LAYERS.index(layer(dep)) > LAYERS.index(layer(mod))]
    assert not bad, "\n".join(bad)


def test_only_process_starts_programs():
    """Every command goes through process.py (git through gitops.run_git,
    which gitpython runs)."""
    bad = []
    for name, path in modules().items():
        for node in ast.walk(parsed(path)):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            if any(n.split(".")[0] in ("subprocess", "pty") for n in names) \
                    or (isinstance(node, ast.Attribute) and node.attr in ("system", "popen") \
                    and isinstance(node.value, ast.Name) and node.value.id == "os"):
                bad.append(f"{name}:{node.lineno}")
    assert [b for b in bad if not b.startswith("mlx_builder.process:")] == []


ISOLATED = r"""
import importlib, json, sys, traceback
failed = {}
for name in json.loads(sys.argv[1]):
    for loaded in [m for m in sys.modules if m == "mlx_builder" or m.startswith("mlx_builder.")]:
        del sys.modules[loaded]
    sys.modules.pop("_common", None)
    try:
        importlib.import_module(name)
    except BaseException:
        failed[name] = traceback.format_exc(limit=3)
print(json.dumps(failed))
"""


def test_every_module_imports_on_its_own():
    """Each module, imported first into a fresh set of mlx_builder modules,
    needs nothing imported before it (one interpreter for all: the
    third-party imports are shared). The bench workers import their sibling
    ``_common`` as scripts do, so their folder is on the path."""
    names = sorted(modules())
    path = os.pathsep.join(p for p in (str(WORKERS), os.environ.get("PYTHONPATH")) if p)
    proc = subprocess.run([sys.executable, "-c", ISOLATED, json.dumps(names)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": path})
    assert proc.returncode == 0, proc.stderr
    failed = json.loads(proc.stdout.strip().splitlines()[-1])
    assert failed == {}, "\n".join(f"{k}:\n{v}" for k, v in failed.items())
