"""Errors a user can act on.

Every error says what failed, why, and what to do next, and carries its own
exit code so scripts can tell failures apart. Codes are stable: add new ones,
never renumber.
"""

from __future__ import annotations

from dataclasses import dataclass


class MlxBuilderError(Exception):
    """An error without a code of its own.

    The base class: subclasses set ``exit_code``."""

    exit_code = 1

    def __init__(self, what: str, why: str = "", next_step: str = "") -> None:
        super().__init__(what)
        self.what = what
        self.why = why
        self.next_step = next_step

    def render(self) -> str:
        lines = [f"error: {self.what}"]
        if self.why:
            lines.append(f"  why: {self.why}")
        if self.next_step:
            lines.append(f"  next: {self.next_step}")
        return "\n".join(lines)


class ConfigError(MlxBuilderError):
    """A bad setting: config file, environment variable or option value."""

    exit_code = 10


class RefError(MlxBuilderError):
    """A version, tag, branch or commit that does not resolve."""

    exit_code = 11


class SeriesError(MlxBuilderError):
    """No patch series covers the requested MLX version, or the index is bad."""

    exit_code = 12


class PatchConflictError(MlxBuilderError):
    """A patch does not apply (file, line and hunk are named); nothing changed."""

    exit_code = 13

    def __init__(self, what: str, why: str = "", next_step: str = "",
                 conflicts: list[Conflict] | None = None) -> None:
        super().__init__(what, why, next_step)
        self.conflicts = conflicts or []


class DirtyTreeError(MlxBuilderError):
    """A work tree holds uncommitted changes we refuse to overwrite."""

    exit_code = 14


class ToolchainError(MlxBuilderError):
    """A compiler, CUDA/cuDNN, CMake or other build tool is missing or too old."""

    exit_code = 15


class TargetError(MlxBuilderError):
    """Unknown build target, or a target this host cannot build."""

    exit_code = 16


class BuildError(MlxBuilderError):
    """The MLX build failed, or the wheel lacks the SASS it was built for."""

    exit_code = 17


class FetchError(MlxBuilderError):
    """Network or mirror access failed (clone, fetch, dependency download)."""

    exit_code = 18


class NoGpuError(MlxBuilderError):
    """A GPU was needed and none is visible."""

    exit_code = 19


class StaleExportError(MlxBuilderError):
    """``export --check`` found patches on disk that differ from the branch."""

    exit_code = 20


class TestFailureError(MlxBuilderError):
    """``mlx-builder test``: a part of the test run failed."""

    exit_code = 21


class DepsError(MlxBuilderError):
    """A FetchContent dependency that cannot be found, fetched or verified."""

    exit_code = 22


class WheelError(MlxBuilderError):
    """A wheel that is missing, malformed or lacks our manifest."""

    exit_code = 23


class RegressionError(MlxBuilderError):
    """Nightly: a patch that applied before now conflicts, or a build/test failed."""

    exit_code = 24


class InterpreterError(MlxBuilderError):
    """A Python interpreter named by --python that does not exist or cannot run."""

    exit_code = 25


class MlxImportError(MlxBuilderError):
    """``import mlx.core`` fails in the interpreter asked to run MLX code."""

    exit_code = 26


class UnpatchedMlxError(MlxBuilderError):
    """MLX ran SDPA but printed no routing decisions: no routing trace patch."""

    exit_code = 27


class RouteParseError(MlxBuilderError):
    """A ``[mlx-sdpa-route]`` line that does not follow the trace format."""

    exit_code = 28


class RouteProbeError(MlxBuilderError):
    """The SDPA route probe died, or every one of its cases failed."""

    exit_code = 29


class LockError(MlxBuilderError):
    """Another mlx-builder run holds a work tree, build folder, mirror or output
    (a bundle's --out, a dependency cache entry, an index folder, the patches
    folder during export; ``--no-wait`` fails fast instead of waiting)."""

    exit_code = 30


class HashMismatchError(MlxBuilderError):
    """A wheel or bundle whose sha256 differs from the one it was published with."""

    exit_code = 31


class ForeignTreeError(MlxBuilderError):
    """A directory mlx-builder did not make, named where it would write a work tree."""

    exit_code = 32


class FileSystemError(MlxBuilderError):
    """A file or folder that cannot be read or written (read-only cache, a file
    where a folder should be, a full disk)."""

    exit_code = 33


class BundleError(MlxBuilderError):
    """A bundle that fails verification (a file, the archive's sha256 or its
    gzip stream), holds an unsafe member or is not a bundle of a supported shape."""

    exit_code = 34


class GitError(MlxBuilderError):
    """A git command that failed (the command, its directory and git's last
    line of error are named)."""

    exit_code = 35


class DriverTooOldError(MlxBuilderError):
    """``install``: the NVIDIA driver is too old for the CUDA major of every wheel that fits.

    CUDA 12 wheels need driver 525.60.13 or newer, CUDA 13 wheels 580.65.06."""

    exit_code = 40


class ConflictingPackageError(MlxBuilderError):
    """``install``: upstream's mlx-cuda-*, mlx-cpu or mlx-metal is installed (``--replace-upstream``).

    They own mlx/lib/libmlx.so, which our wheel writes too."""

    exit_code = 41


class Terminated(BaseException):
    """SIGTERM or SIGHUP arrived (see signals.py); like KeyboardInterrupt, not
    an error of the user's making, so not an MlxBuilderError."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"terminated by signal {signum}")
        self.signum = signum


def exit_codes() -> list[tuple[int, str, str]]:
    """(code, class name, first docstring line) for every error class."""
    found: list[type[MlxBuilderError]] = [MlxBuilderError, *_subclasses(MlxBuilderError)]
    rows = {(c.exit_code, c.__name__, (c.__doc__ or "").strip().splitlines()[0])
            for c in found}
    return sorted(rows)


def _subclasses(cls: type[MlxBuilderError]) -> list[type[MlxBuilderError]]:
    out: list[type[MlxBuilderError]] = []
    for sub in cls.__subclasses__():
        out += [sub, *_subclasses(sub)]
    return out


def exit_codes_markdown() -> str:
    """docs/exit-codes.md (`python -m mlx_builder.errors > docs/exit-codes.md`)."""
    lines = ["# Exit codes", "",
             "Generated from `mlx_builder/errors.py` by `python -m mlx_builder.errors`;",
             "tests/test_docs.py checks that this file matches. Codes are stable.", "",
             "| code | error | when |", "|---|---|---|", "| 0 | | success |"]
    click_row = "| 2 | (click) | a bad command line: unknown option, missing argument |"
    for code, name, doc in exit_codes():
        if code > 2 and click_row not in lines:
            lines.append(click_row)
        lines.append(f"| {code} | `{name}` | {doc.replace('``', '`')} |")
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class Conflict:
    """Where a patch failed to apply."""

    patch: str
    file: str
    line: int | None = None
    hunk: str = ""

    def describe(self) -> str:
        where = self.file if self.line is None else f"{self.file}:{self.line}"
        hunk = f" (hunk {self.hunk})" if self.hunk else ""
        return f"{self.patch}: {where}{hunk}"


if __name__ == "__main__":  # pragma: no cover
    print(exit_codes_markdown(), end="")
