"""The recipes of docs/frameworks.md run as written (a tiny BERT as ``model_dir``)."""

from __future__ import annotations

import re

import pytest

from cl_plugins.integrations.modalities.text.testing import make_tiny_bert
from tests import ROOT

DOC = ROOT / "docs" / "frameworks.md"
NEEDS = {"sentence_transformers": "sentence_transformers", "hf_trainer": "transformers", "lightning": "lightning",
         "open_clip": "torch"}  # fmt: skip


def recipes() -> dict[str, str]:
    return dict(re.findall(r"```python\n# recipe: (\w+)\n(.*?)```", DOC.read_text(), flags=re.S))


def test_every_framework_has_a_recipe():
    assert set(recipes()) == set(NEEDS)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return str(make_tiny_bert(tmp_path_factory.mktemp("recipes") / "bert"))


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("name", list(NEEDS))
def test_recipe_runs(name, model_dir, tmp_path):
    pytest.importorskip(NEEDS[name])
    exec(compile(recipes()[name], f"docs/frameworks.md ({name})", "exec"), {"model_dir": model_dir,
                                                                             "out_dir": str(tmp_path)})  # fmt: skip
