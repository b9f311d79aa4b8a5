"""One toolchain check's result, and the helpers checks use to probe tools
(``query`` runs them through the process layer)."""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from mlx_builder import process


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    required: bool
    version: str | None = None
    detail: str = ""
    fix: str = ""
    path: str | None = None

    @property
    def status(self) -> str:
        return "ok" if self.ok else ("FAIL" if self.required else "warn")


def query(argv: Sequence[str], env: Mapping[str, str] | None = None,
          cwd: Path | None = None, timeout: float = 60) -> tuple[int, str]:
    """Ask a tool about itself: (exit code, stdout + stderr); 127 and the
    reason when it cannot run or does not answer within ``timeout``."""
    res = process.run(argv, env=env or None, cwd=cwd, timeout=timeout, check=False)
    return (127, res.failure) if res.failure else (res.returncode, res.output)


def which(name: str, env: Mapping[str, str]) -> str | None:
    return shutil.which(name, path=env.get("PATH", os.defpath))


def version_tuple(text: str | None) -> tuple[int, ...]:
    if not text:
        return ()
    return tuple(int(x) for x in re.findall(r"\d+", text)[:3])


def fmt(v: Sequence[int]) -> str:
    return ".".join(str(x) for x in v)
