"""The README's usage example runs as written."""

from __future__ import annotations

import re

from tests import ROOT

README = ROOT / "README.md"


def test_readme_python_blocks_run():
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    assert blocks, "README has no python example"
    for block in blocks:
        exec(compile(block, str(README), "exec"), {})


def test_readme_test_command_is_what_ci_runs():
    ci = (README.parent / ".ci" / "run").read_text()
    assert "python -m pytest -q" in README.read_text()
    assert ci.strip().splitlines()[-1] == "python -m pytest -q"
