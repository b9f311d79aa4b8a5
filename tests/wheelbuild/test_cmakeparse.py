"""Reading FetchContent_Declare blocks and their conditions from CMake files."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from mlx_builder.wheelbuild.cmakeparse import Arg, effective, evaluate, parse_tree, tokenize

ROOT = r'''
cmake_minimum_required(VERSION 3.25)
option(FOO_BUILD_GPU "gpu" OFF)
option(FOO_BUILD_GGUF "gguf" ON)
option(FOO_BUILD_TESTS "tests" ON)
include(FetchContent)
#[[ FetchContent_Declare(commented GIT_REPOSITORY https://x/y.git GIT_TAG v0) ]]
# FetchContent_Declare(also_commented URL https://x/z.zip)
set(JSON_URL https://github.com/nlohmann/json/releases/download/v3.11.3/json.tar.xz)
FetchContent_Declare(json URL ${JSON_URL})
message(STATUS "a (parenthesised) string; FetchContent_Declare(fake)")
if(CMAKE_SYSTEM_NAME STREQUAL "Windows")
  FetchContent_Declare(winonly GIT_REPOSITORY https://github.com/a/win.git GIT_TAG v1)
elseif(FOO_BUILD_GPU)
  add_subdirectory(${CMAKE_CURRENT_SOURCE_DIR}/gpu)
else()
  FetchContent_Declare(
    nanobind
    GIT_REPOSITORY https://github.com/wjakob/nanobind.git
    GIT_TAG v2.15.0
    GIT_SHALLOW TRUE
    EXCLUDE_FROM_ALL)
endif()
if(FOO_BUILD_GGUF)
  FetchContent_Declare(gguflib GIT_REPOSITORY https://github.com/antirez/gguf-tools/
                       GIT_TAG 8fa6eb65236618e28fd7710a0fba565f7faa1848)
endif()
if(FOO_BUILD_TESTS)
  add_subdirectory(tests)
endif()
'''
GPU = '''
FetchContent_Declare(
  nvtx3
  GIT_REPOSITORY https://github.com/NVIDIA/NVTX.git
  GIT_TAG v3.1.1
  SOURCE_SUBDIR c EXCLUDE_FROM_ALL)
FetchContent_Declare(json URL https://example.com/other-json.tar.xz)
'''
TESTS = "FetchContent_Declare(doctest GIT_REPOSITORY https://github.com/onqtam/doctest.git GIT_TAG v2.4.12)\n"
EXAMPLE = "FetchContent_Declare(standalone SOURCE_DIR ${CMAKE_CURRENT_SOURCE_DIR}/..)\n"


def write_tree(root: Path) -> Path:
    for rel, text in {"CMakeLists.txt": ROOT, "gpu/CMakeLists.txt": GPU,
                      "tests/CMakeLists.txt": TESTS,
                      "examples/standalone/CMakeLists.txt": EXAMPLE}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def test_declarations_pins_and_walk_order(tmp_path):
    decls, options = parse_tree(write_tree(tmp_path))
    names = [d.name for d in decls]
    assert names == ["json", "winonly", "nvtx3", "json", "nanobind", "gguflib", "doctest",
                     "standalone"]
    assert "commented" not in names and "fake" not in names
    by = {d.name: d for d in effective(decls)}
    assert by["json"].url.endswith("v3.11.3/json.tar.xz")          # ${JSON_URL} expanded
    assert by["json"].file == "CMakeLists.txt"                     # first declaration wins
    assert (by["nvtx3"].git_tag, by["nvtx3"].source_subdir) == ("v3.1.1", "c")
    assert by["nvtx3"].file == "gpu/CMakeLists.txt"
    assert by["nanobind"].git_repository == "https://github.com/wjakob/nanobind.git"
    assert by["nanobind"].line == 17
    assert by["standalone"].source_dir and not by["standalone"].reached
    assert options == {"FOO_BUILD_GPU": "OFF", "FOO_BUILD_GGUF": "ON", "FOO_BUILD_TESTS": "ON"}


def test_conditions_follow_if_elseif_else_and_subdirectories(tmp_path):
    decls, options = parse_tree(write_tree(tmp_path))
    by = {d.name: d for d in effective(decls)}
    linux_cpu = {**options, "CMAKE_SYSTEM_NAME": "Linux", "FOO_BUILD_TESTS": "OFF"}
    linux_gpu = {**linux_cpu, "FOO_BUILD_GPU": "ON"}
    assert evaluate(by["winonly"].conditions, linux_cpu) is False
    assert evaluate(by["nanobind"].conditions, linux_cpu) is True
    assert evaluate(by["nanobind"].conditions, linux_gpu) is False     # the else branch
    assert evaluate(by["nvtx3"].conditions, linux_gpu) is True
    assert evaluate(by["nvtx3"].conditions, linux_cpu) is False
    assert evaluate(by["doctest"].conditions, linux_cpu) is False
    assert evaluate(by["gguflib"].conditions, linux_cpu) is True
    assert "NOT (CMAKE_SYSTEM_NAME" in by["nvtx3"].condition_text()
    assert "FOO_BUILD_GPU" in by["nvtx3"].condition_text()


def toks(text: str) -> tuple[Arg, ...]:
    return tokenize(f"if({text})")[0].args


@pytest.mark.parametrize("expr,values,want", [
    ("A", {"A": "ON"}, True), ("A", {"A": "OFF"}, False), ("A", {}, None),
    ("NOT A", {"A": "0"}, True), ("A AND B", {"A": "ON"}, None),
    ("A AND B", {"A": "OFF"}, False), ("A OR B", {"B": "YES"}, True),
    ("(A OR B) AND NOT C", {"A": "ON", "C": "OFF"}, True),
    ('${CMAKE_SYSTEM_NAME} MATCHES "Darwin"', {"CMAKE_SYSTEM_NAME": "Linux"}, False),
    ('${CMAKE_SYSTEM_NAME} MATCHES "Darwin"', {}, None),
    ('CMAKE_SYSTEM_NAME STREQUAL "Linux"', {"CMAKE_SYSTEM_NAME": "Linux"}, True),
    ("DEFINED X", {"X": ""}, True), ("EXISTS /etc", {}, None),
    ("X VERSION_GREATER 1.0", {"X": "2"}, None), ("ON", {}, True), ("0", {}, False),
    ('"${A}"', {"A": "FALSE"}, False),
])
def test_three_valued_conditions(expr, values, want):
    assert evaluate([(False, toks(expr))], values) is want


def test_tokenizer_lines_quotes_and_brackets():
    cmds = tokenize('a(x "y z" [=[raw ) text]=])\n\n# c\nB(\n  "q\\"r"\n)\n')
    assert [(c.name, c.line) for c in cmds] == [("a", 1), ("b", 4)]
    assert [a.value for a in cmds[0].args] == ["x", "y z", "raw ) text"]
    assert cmds[1].args[0] == Arg('q"r', True)


@pytest.mark.real_mlx
def test_real_mlx_main_declarations(tmp_path):
    repo = os.environ.get("MLX_BUILDER_MLX_REPO")
    if not repo or not Path(repo).exists():
        pytest.skip("needs a real MLX checkout: set MLX_BUILDER_MLX_REPO to a clone/mirror")
    ref = "846d176227a0ac13d2667e58d2bb68b322109ab0"
    archive = subprocess.run(["git", "-C", repo, "archive", ref], capture_output=True)
    if archive.returncode != 0:
        pytest.skip(f"MLX_BUILDER_MLX_REPO lacks commit {ref[:9]}")
    subprocess.run(["tar", "-x", "-C", str(tmp_path)], input=archive.stdout, check=True)
    decls, options = parse_tree(tmp_path)
    by = {d.name: d for d in effective(decls)}
    assert {"json", "fmt", "nanobind", "cccl", "nvtx3", "cudnn", "cutlass", "gguflib"} <= set(by)
    assert by["cutlass"].source_subdir == "include" and by["nvtx3"].source_subdir == "c"
    values = {**options, "CMAKE_SYSTEM_NAME": "Linux", "WIN32": "0", "MLX_BUILD_CUDA": "ON",
              "MLX_BUILD_METAL": "OFF", "MLX_BUILD_TESTS": "OFF",
              "MLX_BUILD_PYTHON_BINDINGS": "ON"}
    needed = {d.name for d in effective(decls) if d.reached and evaluate(d.conditions, values)}
    assert needed == {"json", "fmt", "nanobind", "cccl", "nvtx3", "cudnn", "cutlass", "gguflib"}
