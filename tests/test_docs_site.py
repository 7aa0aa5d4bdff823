"""The documentation site builds strictly: every guide in the navigation, every link and anchor resolved, every
public name of ``cl_plugins`` and ``cl_plugins.integrations`` in the API reference, rendered from its docstring."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

from tests import ROOT

sys.path.insert(0, str(ROOT / "scripts"))
import api_pages  # noqa: E402


def test_the_api_reference_is_current():
    for name, text in api_pages.pages().items():
        assert (ROOT / "docs" / "api" / name).read_text(encoding="utf-8") == text, (
            f"docs/api/{name} is stale: run python scripts/api_pages.py")


def test_the_api_reference_names_every_public_name():
    import cl_plugins
    import cl_plugins.integrations as integrations

    core = (ROOT / "docs" / "api" / "cl_plugins.md").read_text(encoding="utf-8")
    adapters = (ROOT / "docs" / "api" / "integrations.md").read_text(encoding="utf-8")
    assert not [n for n in cl_plugins.__all__ if f"## `{n}`" not in core]
    assert not [n for n in integrations.exports() if f"## `{n}`" not in adapters]


@pytest.mark.skipif(importlib.util.find_spec("mkdocstrings") is None, reason="pip install -e '.[docs]'")
def test_the_site_builds_strictly(tmp_path):
    out = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                         capture_output=True, text=True, cwd=ROOT, timeout=600)  # fmt: skip
    assert out.returncode == 0, out.stderr[-4000:]
    page = (tmp_path / "site" / "api" / "cl_plugins" / "index.html").read_text(encoding="utf-8")
    assert "Instantiate the loss registered as" in page  # build_loss's docstring, rendered
    adapters = (tmp_path / "site" / "api" / "integrations" / "index.html").read_text(encoding="utf-8")
    assert "Replace SimCSE's" in adapters  # patch_simcse's, read from integrations/ (scripts/griffe_layout.py)
