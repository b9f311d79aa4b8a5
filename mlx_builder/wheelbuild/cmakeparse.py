"""Read MLX's FetchContent dependencies from its CMake files.

A small CMake reader, not an interpreter: it tokenises commands, follows
``add_subdirectory``/``include`` from the top-level CMakeLists.txt while
keeping the stack of enclosing ``if``/``elseif``/``else`` conditions, expands
``${VAR}`` from plain ``set()`` calls, and records every
``FetchContent_Declare`` with the conditions under which it is reached. Files
never reached from the top (examples, stand-alone sub-projects) are read too
and marked unreached. ``evaluate`` judges a condition three-valued (True,
False, None = cannot tell) against known option values.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_VAR = re.compile(r"\$\{([A-Za-z0-9_.+-]+)\}")
_KEYWORDS = {"URL", "URL_HASH", "URL_MD5", "GIT_REPOSITORY", "GIT_TAG",
             "GIT_SHALLOW", "GIT_SUBMODULES", "GIT_PROGRESS", "SOURCE_SUBDIR",
             "SOURCE_DIR", "BINARY_DIR", "EXCLUDE_FROM_ALL", "SYSTEM",
             "FIND_PACKAGE_ARGS", "OVERRIDE_FIND_PACKAGE", "DOWNLOAD_EXTRACT_TIMESTAMP",
             "PATCH_COMMAND", "UPDATE_COMMAND", "CONFIGURE_COMMAND", "BUILD_COMMAND",
             "INSTALL_COMMAND", "DOWNLOAD_NO_EXTRACT", "TLS_VERIFY", "HTTP_HEADER"}
_DIR_VARS = ("CMAKE_CURRENT_LIST_DIR", "CMAKE_CURRENT_SOURCE_DIR")
_ROOT_VARS = ("PROJECT_SOURCE_DIR", "CMAKE_SOURCE_DIR", "mlx_SOURCE_DIR")


@dataclass(frozen=True)
class Arg:
    value: str
    quoted: bool = False


@dataclass(frozen=True)
class Command:
    name: str            # lower-case
    args: tuple[Arg, ...]
    line: int


Clause = tuple[bool, tuple[Arg, ...]]      # (negated, condition tokens)


@dataclass(frozen=True)
class Declaration:
    name: str
    file: str                         # relative to the tree root
    line: int
    url: str | None = None
    git_repository: str | None = None
    git_tag: str | None = None
    source_subdir: str | None = None
    source_dir: str | None = None
    conditions: tuple[Clause, ...] = ()
    reached: bool = True

    @property
    def upper(self) -> str:
        return self.name.upper()

    def condition_text(self) -> str:
        if not self.reached:
            return "(not reached from the top-level CMakeLists.txt)"
        parts = []
        for neg, toks in self.conditions:
            text = " ".join(f'"{a.value}"' if a.quoted else a.value for a in toks)
            parts.append(f"NOT ({text})" if neg else text)
        return " AND ".join(parts) or "always"


# ----------------------------------------------------------------- tokeniser

def tokenize(text: str) -> list[Command]:
    """Commands of a CMake file; comments and bracket arguments handled."""
    out: list[Command] = []
    i, n, line = 0, len(text), 1
    while True:
        i, line = _skip_blank(text, i, line)
        if i >= n:
            return out
        m = _IDENT.match(text, i)
        if not m:
            i += 1
            continue
        j = m.end()
        while j < n and text[j] in " \t":
            j += 1
        if j >= n or text[j] != "(":
            i = m.end()
            continue
        start_line = line
        args, i, line = _args(text, j + 1, line)
        out.append(Command(m.group(0).lower(), tuple(args), start_line))


def _skip_blank(text: str, i: int, line: int) -> tuple[int, int]:
    """Past whitespace and comments, counting newlines."""
    n = len(text)
    while i < n:
        if text[i] == "\n":
            line += 1
            i += 1
        elif text[i].isspace():
            i += 1
        elif text[i] == "#":
            i, line = _skip_comment(text, i, line)
        else:
            break
    return i, line


def _skip_comment(text: str, i: int, line: int) -> tuple[int, int]:
    m = re.match(r"#\[(=*)\[", text[i:])
    if m:
        end = text.find("]" + m.group(1) + "]", i)
        end = len(text) if end < 0 else end + len(m.group(1)) + 2
    else:
        end = text.find("\n", i)
        end = len(text) if end < 0 else end
    return end, line + text.count("\n", i, end)


def _args(text: str, i: int, line: int) -> tuple[list[Arg], int, int]:
    args: list[Arg] = []
    depth, n = 0, len(text)
    while True:
        i, line = _skip_blank(text, i, line)
        if i >= n:
            break
        c = text[i]
        if c == "(":
            depth += 1
            args.append(Arg("("))
            i += 1
        elif c == ")":
            if depth == 0:
                return args, i + 1, line
            depth -= 1
            args.append(Arg(")"))
            i += 1
        elif c == '"':
            j, buf = i + 1, []
            while j < n and text[j] != '"':
                if text[j] == "\\" and j + 1 < n:
                    buf.append(text[j + 1] if text[j + 1] in '"\\$;' else text[j:j + 2])
                    j += 2
                    continue
                buf.append(text[j])
                j += 1
            value = "".join(buf)
            line += value.count("\n")
            args.append(Arg(value, True))
            i = j + 1
        elif c == "[" and (bracket := re.match(r"\[(=*)\[", text[i:])):
            eq = bracket.group(1)
            end = text.find("]" + eq + "]", i)
            end = n if end < 0 else end
            value = text[i + len(eq) + 2:end]
            line += value.count("\n")
            args.append(Arg(value, True))
            i = end + len(eq) + 2
        else:
            j = i
            while j < n and not text[j].isspace() and text[j] not in '()"#':
                j += 1 + (text[j] == "\\")
            args.append(Arg(text[i:j]))
            i = j
    return args, i, line


# ----------------------------------------------------------------- walking the tree

@dataclass
class _Walk:
    root: Path
    variables: dict[str, str] = field(default_factory=dict)
    options: dict[str, str] = field(default_factory=dict)
    decls: list[Declaration] = field(default_factory=list)
    visited: set[Path] = field(default_factory=set)

    def expand(self, value: str, here: Path) -> str:
        def sub(m: re.Match) -> str:
            name = m.group(1)
            if name in _DIR_VARS:
                return str(here)
            if name in _ROOT_VARS:
                return str(self.root)
            return self.variables.get(name, m.group(0))
        return _VAR.sub(sub, value)


def _frames_to_clauses(frames: list[list]) -> tuple[Clause, ...]:
    out: list[Clause] = []
    for prior, current in frames:
        out += [(True, p) for p in prior]
        if current is not None:
            out.append((False, current))
    return tuple(out)


def _visit(walk: _Walk, path: Path, inherited: tuple[Clause, ...], reached: bool) -> None:
    path = path.resolve()
    if path in walk.visited or not path.is_file():
        return
    walk.visited.add(path)
    here = path.parent
    rel = str(path.relative_to(walk.root.resolve()))
    frames: list[list] = []        # [prior conditions, current condition or None]
    for cmd in tokenize(path.read_text(encoding="utf-8", errors="replace")):
        args = tuple(Arg(walk.expand(a.value, here), a.quoted) for a in cmd.args)
        if cmd.name == "if":
            frames.append([[], args])
        elif cmd.name == "elseif" and frames:
            frames[-1][0].append(frames[-1][1])
            frames[-1][1] = args
        elif cmd.name == "else" and frames:
            if frames[-1][1] is not None:
                frames[-1][0].append(frames[-1][1])
            frames[-1][1] = None
        elif cmd.name == "endif" and frames:
            frames.pop()
        elif cmd.name == "option" and len(args) >= 1:
            walk.options.setdefault(args[0].value,
                                    args[2].value if len(args) > 2 else "OFF")
        elif cmd.name == "set" and len(args) >= 2:
            values = [a.value for a in args[1:]
                      if a.value not in ("CACHE", "PARENT_SCOPE", "FORCE")]
            walk.variables[args[0].value] = values[0] if values else ""
        elif cmd.name in ("add_subdirectory", "include") and args:
            target = Path(args[0].value)
            if cmd.name == "include":
                if target.suffix != ".cmake":
                    target = walk.root / "cmake" / f"{args[0].value}.cmake"
            else:
                target = target / "CMakeLists.txt"
            if not target.is_absolute():
                target = here / target
            if "${" not in str(target):
                _visit(walk, target, inherited + _frames_to_clauses(frames), reached)
        elif cmd.name == "fetchcontent_declare" and args:
            walk.decls.append(_declaration(args, rel, cmd.line,
                                           inherited + _frames_to_clauses(frames), reached))


def _declaration(args: tuple[Arg, ...], rel: str, line: int,
                 conds: tuple[Clause, ...], reached: bool) -> Declaration:
    fields_: dict[str, list[str]] = {}
    key = None
    for a in args[1:]:
        if not a.quoted and a.value in _KEYWORDS:
            key = a.value
            fields_.setdefault(key, [])
        elif key:
            fields_[key].append(a.value)

    def one(k: str) -> str | None:
        vals = fields_.get(k)
        return vals[0] if vals else None
    return Declaration(name=args[0].value, file=rel, line=line, url=one("URL"),
                       git_repository=one("GIT_REPOSITORY"), git_tag=one("GIT_TAG"),
                       source_subdir=one("SOURCE_SUBDIR"), source_dir=one("SOURCE_DIR"),
                       conditions=conds, reached=reached)


def parse_tree(root: Path) -> tuple[list[Declaration], dict[str, str]]:
    """All FetchContent declarations of an MLX tree, plus its option() defaults.

    Walk order is CMake's for the reached files, so for a name declared twice
    the first declaration (the one CMake uses) comes first.
    """
    root = Path(root)
    walk = _Walk(root)
    _visit(walk, root / "CMakeLists.txt", (), True)
    for path in sorted(list(root.rglob("CMakeLists.txt")) + list(root.rglob("*.cmake"))):
        if any(part in (".git", "build", "_deps") for part in path.relative_to(root).parts):
            continue
        _visit(walk, path, (), False)
    return walk.decls, dict(walk.options)


def effective(decls: Iterable[Declaration]) -> list[Declaration]:
    """One declaration per name: the first one reached (CMake's rule)."""
    seen: dict[str, Declaration] = {}
    for d in sorted(decls, key=lambda d: not d.reached):
        seen.setdefault(d.name.lower(), d)
    return list(seen.values())


# ----------------------------------------------------------------- conditions

_FALSE = {"0", "OFF", "NO", "FALSE", "N", "IGNORE", "NOTFOUND", ""}
_TRUE = {"1", "ON", "YES", "TRUE", "Y"}
_UNARY = {"EXISTS", "COMMAND", "POLICY", "TARGET", "TEST", "IS_DIRECTORY",
          "IS_SYMLINK", "IS_ABSOLUTE", "IS_READABLE", "IS_WRITABLE", "IS_EXECUTABLE"}
_BINARY = {"STREQUAL", "STRLESS", "STRGREATER", "MATCHES", "EQUAL", "LESS",
           "GREATER", "LESS_EQUAL", "GREATER_EQUAL", "STRLESS_EQUAL",
           "STRGREATER_EQUAL", "VERSION_EQUAL", "VERSION_LESS", "VERSION_GREATER",
           "VERSION_LESS_EQUAL", "VERSION_GREATER_EQUAL", "IN_LIST", "PATH_EQUAL",
           "IS_NEWER_THAN"}


def _truth(value: str) -> bool | None:
    up = value.upper()
    if up in _TRUE:
        return True
    if up in _FALSE or up.endswith("-NOTFOUND"):
        return False
    try:
        return float(value) != 0
    except ValueError:
        return None


def _not(v: bool | None) -> bool | None:
    return None if v is None else not v


class _Eval:
    def __init__(self, toks: tuple[Arg, ...], values: Mapping[str, str]) -> None:
        self.toks, self.values, self.i = list(toks), values, 0

    def peek(self) -> Arg | None:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def take(self) -> Arg:
        tok = self.toks[self.i]
        self.i += 1
        return tok

    def kw(self, word: str) -> bool:
        tok = self.peek()
        if tok is not None and not tok.quoted and tok.value == word:
            self.i += 1
            return True
        return False

    def parse_or(self) -> bool | None:
        vals = [self.parse_and()]
        while self.kw("OR"):
            vals.append(self.parse_and())
        if any(v is True for v in vals):
            return True
        return None if any(v is None for v in vals) else False

    def parse_and(self) -> bool | None:
        vals = [self.parse_not()]
        while self.kw("AND"):
            vals.append(self.parse_not())
        if any(v is False for v in vals):
            return False
        return None if any(v is None for v in vals) else True

    def parse_not(self) -> bool | None:
        if self.kw("NOT"):
            return _not(self.parse_not())
        return self.parse_primary()

    def expand(self, value: str) -> str | None:
        names = _VAR.findall(value)
        if any(n not in self.values for n in names):
            return None
        return _VAR.sub(lambda m: self.values[m.group(1)], value)

    def operand(self, tok: Arg) -> str | None:
        value = self.expand(tok.value)
        if tok.quoted or value is None or value != tok.value:
            return value
        if value in self.values:
            return self.values[value]
        return None if _IDENT.fullmatch(value) and value.upper() not in _TRUE | _FALSE \
            else value

    def parse_primary(self) -> bool | None:
        tok = self.peek()
        if tok is None:
            return None
        if not tok.quoted and tok.value == "(":
            self.take()
            val = self.parse_or()
            self.kw(")")
            return val
        if self.kw("DEFINED"):
            name = self.take().value if self.peek() else ""
            return True if name in self.values else None
        if not tok.quoted and tok.value in _UNARY:
            self.take()
            if self.peek():
                self.take()
            return None
        left = self.take()
        nxt = self.peek()
        if nxt is not None and not nxt.quoted and nxt.value in _BINARY:
            op = self.take().value
            right = self.take() if self.peek() else Arg("")
            a, b = self.operand(left), self.operand(right)
            if a is None or b is None:
                return None
            if op == "STREQUAL":
                return a == b
            if op == "MATCHES":
                try:
                    return re.search(b, a) is not None
                except re.error:
                    return None
            return None
        if left.quoted or "${" in left.value:
            value = self.expand(left.value)
            return None if value is None else _truth(value)
        if left.value in self.values:
            return _truth(self.values[left.value])
        up = left.value.upper()
        if up in _TRUE or up in _FALSE:
            return up in _TRUE
        if re.fullmatch(r"-?\d+(\.\d+)?", left.value):
            return float(left.value) != 0
        return None


def evaluate(conditions: Iterable[Clause], values: Mapping[str, str]) -> bool | None:
    """AND of the clauses, three-valued: False beats None beats True."""
    result: bool | None = True
    for negated, toks in conditions:
        v = _Eval(toks, values).parse_or()
        v = _not(v) if negated else v
        if v is False:
            return False
        if v is None:
            result = None
    return result
