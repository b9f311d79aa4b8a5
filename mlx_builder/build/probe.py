"""One toolchain check's result, and the helpers checks use to probe tools."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence


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


def run(argv: Sequence[str], env: Mapping[str, str] | None = None,
         cwd: Path | None = None, timeout: float = 60) -> tuple[int, str]:
    try:
        proc = subprocess.run([str(a) for a in argv], capture_output=True,
                              text=True, errors="replace", env=dict(env or os.environ),
                              cwd=cwd, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return 127, str(exc)
    return proc.returncode, proc.stdout + proc.stderr


def which(name: str, env: Mapping[str, str]) -> str | None:
    return shutil.which(name, path=env.get("PATH", os.defpath))


def version_tuple(text: str | None) -> tuple[int, ...]:
    if not text:
        return ()
    return tuple(int(x) for x in re.findall(r"\d+", text)[:3])


def fmt(v: Sequence[int]) -> str:
    return ".".join(str(x) for x in v)
