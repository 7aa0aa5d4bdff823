"""Every boolean argument of every adapter takes a bool only: walked from the signatures of every public function
and class of ``cl_plugins.integrations`` (a parameter annotated ``bool``), each refuses what truthiness would read
as a boolean ("false" as True) in one line naming it, before anything else runs. The strategies' own booleans are
walked from the registry (``tests/test_bad_input.py``)."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import warnings
from collections.abc import Callable
from typing import Any

import pytest

import cl_plugins.integrations as integrations
from cl_plugins.arguments import ArgumentTypeError, flag_parameters

#: internal helpers with a boolean parameter that no user passes (the trainers' and the command lines' own), and
#: test support; everything else with a ``bool`` parameter is an adapter a user calls
INTERNAL = {
    "data.catalogue": "the data command's own functions (argparse hands them bools)",
    "patching": "the patch kit's helpers, called by the patches with their checked flags",
    "runs.atomic": "file helpers of the run core",
    "command_line": "command-line plumbing",
    "runs.guard": "the guard's claim, built by the guard",
    "runs.saved_model.first_difference": "a comparison helper",
    "hosts.dcrec.sequence_encoder.dropout": "a functional layer called with module.training",
    "hosts.graph.augment.perturb_edges": "an augmentation's internal step",
    "hosts.simcse.train_then_evaluate.wiki_file": "the script's own data path",
    "modalities.text.testing.make_tiny_bert": "test support",
}
NOT_BOOLS = ("false", "0", "no", 0, 1, 0.5)


def _walk() -> list[tuple[str, Callable[..., Any], str]]:
    found = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for info in pkgutil.walk_packages(integrations.__path__, "cl_plugins.integrations."):
            module = importlib.import_module(info.name)
            short = info.name.removeprefix("cl_plugins.integrations.")
            for name, obj in vars(module).items():
                if name.startswith("_") or getattr(obj, "__module__", None) != module.__name__:
                    continue
                if not (inspect.isclass(obj) or inspect.isfunction(obj)):
                    continue
                where = f"{short}.{name}"
                if short in INTERNAL or where in INTERNAL:
                    continue
                signature_of = obj.__init__ if inspect.isclass(obj) else obj
                found += [(where, obj, flag) for flag in flag_parameters(signature_of)]
    return found


FLAGS = _walk()


def test_the_walk_finds_the_adapters():
    where = {w for w, _, _ in FLAGS}
    assert {"frameworks.open_clip.loss.StrategyClipLoss", "hosts.simcse.patch.patch_simcse",
            "hosts.graph.patch.PyGCLLoss", "runs.training.Plan", "modalities.text.config.TrainConfig"} <= where
    assert len(FLAGS) >= 60


@pytest.mark.parametrize(("where", "obj", "flag"), FLAGS, ids=[f"{w}:{f}" for w, _, f in FLAGS])
def test_every_adapter_boolean_refuses_a_non_bool_in_one_line(where, obj, flag):
    for bad in NOT_BOOLS:
        with pytest.raises(ArgumentTypeError, match=f"^{flag} must be True") as info:
            obj(**{flag: bad})
        assert "\n" not in str(info.value)
