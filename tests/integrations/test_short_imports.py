"""Every adapter imports in one line from ``cl_plugins.integrations``, and importing the package loads nothing heavy."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import cl_plugins.integrations as integrations
from cl_plugins.integrations.hosts import hosts, patch_targets
from tests import ROOT

NAMES = sorted(integrations.exports())


@pytest.mark.parametrize("name", NAMES)
def test_every_short_name_resolves_to_its_adapter(name):
    module, attribute = integrations.exports()[name]
    value = getattr(integrations, name)
    assert value is getattr(__import__(module, fromlist=[attribute]), attribute)
    assert name in dir(integrations)


def test_every_patch_framework_adapter_and_command_has_a_short_name():
    names = set(NAMES)
    assert {function for _, function in patch_targets().values()} <= names
    assert {"StrategyClipLoss", "StrategyRankingLoss", "CachedStrategyRankingLoss", "StrategyLossFunc",
            "StrategyTrainerCallback", "StrategyLightningCallback", "ContrastiveModule", "PyGCLLoss"} <= names
    commands = {f"run_{c.name.replace('-', '_')}" for host in hosts().values() for c in host.commands}
    assert commands <= names
    with pytest.raises(AttributeError, match="no attribute 'patch_nothing'"):
        integrations.patch_nothing  # noqa: B018


def test_importing_the_package_and_listing_its_names_stays_light():
    code = ("import json, sys, cl_plugins.integrations as i; i.exports(); "
            "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in "
            "{'torch', 'transformers', 'torch_geometric', 'lightning', 'open_clip', 'sentence_transformers'})))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert json.loads(out.stdout) == []
