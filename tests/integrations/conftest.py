"""Real-data tests need the data pack: ``CL_PLUGINS_DATA`` or ``../shared/data`` beside the repo."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests import ROOT


def _data_root() -> Path | None:
    env = os.environ.get("CL_PLUGINS_DATA")
    for candidate in ([Path(env)] if env else []) + [ROOT.parent / "shared" / "data"]:
        if (candidate / "MANIFEST.md").exists():
            return candidate
    return None


@pytest.fixture(scope="session")
def data_root() -> Path:
    root = _data_root()
    if root is None:
        pytest.skip("data pack not found: set CL_PLUGINS_DATA")
    os.environ["CL_PLUGINS_DATA"] = str(root)
    return root
