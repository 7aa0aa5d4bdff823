"""What the documentation names exists: every repository path, every ``cl-plugins`` subcommand, and every flag
given to one of our commands or scripts in a code span or block (checked against that program's ``--help``)."""

from __future__ import annotations

import functools
import itertools
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests import ROOT

DOCS = sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md"]
PATH = re.compile(r"(?<![\w/.-])((?:cl_plugins|tests|benchmarks|examples|docs|scripts|\.ci)/[\w./{},*<>-]*[\w}*>])")
#: paths in another repository that the documentation names with its owner ("PyGCL's examples/GRACE.py")
ELSEWHERE = {"examples/GRACE.py"}
CODE = re.compile(r"```.*?```|`[^`\n]+`", re.S)
PROGRAM = re.compile(r"cl-plugins ([a-z][a-z-]*)|((?:examples|benchmarks|scripts|tests/reports)/[\w/]+\.py)")
FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9_]*(?:-[a-z0-9_]+)*")


def _expand(path: str) -> list[str]:
    found = re.search(r"\{([^{}]*)\}", path)
    if found is None:
        return [path]
    return list(itertools.chain.from_iterable(_expand(path[: found.start()] + alt + path[found.end() :])
                                              for alt in found.group(1).split(",")))  # fmt: skip


def _code_lines(doc: Path) -> list[str]:
    """Every line of every code span and block, continuation lines joined."""
    lines = []
    for block in CODE.findall(doc.read_text(encoding="utf-8")):
        lines += block.strip("`").replace("\\\n", " ").splitlines()
    return lines


@functools.cache
def _flags(program: str) -> frozenset[str]:
    """The flags ``program`` (a subcommand, or a script's path) lists in its ``--help``."""
    cmd = [sys.executable, "-m", "cl_plugins.integrations.console", program] if "/" not in program else \
        [sys.executable, str(ROOT / program)]  # fmt: skip
    out = subprocess.run([*cmd, "--help"], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert out.returncode == 0, f"{program} --help: {out.stderr[-500:]}"
    return frozenset(FLAG.findall(out.stdout))


@pytest.mark.parametrize("doc", DOCS, ids=[d.name for d in DOCS])
def test_every_path_a_document_names_exists(doc):
    missing = []
    for raw in PATH.findall(doc.read_text(encoding="utf-8")):
        if "<" in raw or "*" in raw or raw in ELSEWHERE:
            continue
        missing += [p for p in _expand(raw.split("::")[0].rstrip(".")) if not (ROOT / p).exists()]
    assert not missing, f"{doc.name} names {missing}"


@pytest.mark.parametrize("doc", DOCS, ids=[d.name for d in DOCS])
def test_every_command_and_flag_a_document_gives_exists(doc):
    from cl_plugins.integrations.console import commands

    wrong = []
    for line in _code_lines(doc):
        found = PROGRAM.search(line)
        if found is None:
            continue
        command, script = found.groups()
        if command is not None and command not in commands():
            wrong.append(f"cl-plugins {command}")
            continue
        program = command or script
        if script is not None and not (ROOT / script).is_file():
            continue  # the path test names it
        given = FLAG.findall(line[found.end() :])
        wrong += [f"{program} {flag}" for flag in given if flag not in _flags(program)]
    assert not wrong, f"{doc.name} gives {wrong}"
