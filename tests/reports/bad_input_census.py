"""A census of bad input: how the core and the framework adapters answer it, counted as OK (the right value),
clear (one ValueError / TypeError line), unclear (a traceback of another kind, a multi-line message, or a valid
input refused), silently wrong (a value that is not the float64 reference's, or a value for an input that has
none) — the classes of an earlier review. Crashes and hangs under several processes are the 2-process tests' part.

The cases: the seeded property searches of the core (``tests/test_property_search.py``) and of the adapters
(``tests/integrations/frameworks/test_adapter_property_search.py``), widened, and the cases that review lists by
name. Run it
on two trees to compare them (the census file and the adapters' test module copied into the older one)::

    python tests/reports/bad_input_census.py [--core 1000 --adapters 600] [--json out.json]
"""

from __future__ import annotations

import argparse
import collections
import json
import pickle
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the tree this file is in, tests/ included

CLASSES = ("OK", "clear", "unclear", "silently wrong")
#: how the property searches' assertions about a returned value begin (the others are about the error's text)
SILENT = ("Scalars are not close", "Tensor-likes are not close", "a ragged", "a NaN input", "the malformed input",
          "open_clip took", "assert ")  # fmt: skip


def outcome(run: Callable[[], Any], expect_error: bool, check: Callable[[Any], bool] = lambda v: True) -> str:
    """The class of what ``run()`` did, for an input that should give an error (``expect_error``) or a value that
    ``check`` accepts."""
    try:
        value = run()
    except (ValueError, TypeError) as err:
        return "clear" if expect_error and "\n" not in str(err).strip() else "unclear"
    except Exception:  # another exception type is a traceback, not an answer
        return "unclear"
    if expect_error:
        return "silently wrong"
    return "OK" if check(value) else "silently wrong"


def core_cases(count: int) -> collections.Counter:
    from tests import test_property_search as search

    counts: collections.Counter = collections.Counter()
    for case in search._cases(count, seed=2049):
        counts[_classify(search.test_the_reference_value_or_one_clear_line, case)] += 1
    return counts


def adapter_cases(count: int) -> collections.Counter:
    from tests.integrations.frameworks import test_adapter_property_search as search

    counts: collections.Counter = collections.Counter()
    for case in search._cases(count, seed=2049):
        counts[_classify(search.test_the_reference_value_or_one_clear_line, case)] += 1
    return counts


def _classify(test: Callable[..., None], case: tuple) -> str:
    """A property-search case through its test: passing is "OK or clear" (the test accepts the reference's value or
    one clear line, and does not say which), a failed assertion says which class went wrong."""
    try:
        test(*case)
        return "OK or clear"
    except AssertionError as err:
        return "silently wrong" if str(err).startswith(SILENT) else "unclear"
    except BaseException as err:  # noqa: BLE001 - skips (a framework missing) and anything unexpected
        return "skipped" if type(err).__name__ == "Skipped" else "unclear"


def named_cases() -> dict[str, str]:
    """The cases by name, each through the real entry point."""
    import cl_plugins as clp

    z = torch.randn(8, 4)
    tiny = (torch.randn(8, 4) * 1e-40).float()
    cases: dict[str, tuple] = {
        "subnormal float32 rows": (lambda: clp.build_loss("infonce")(tiny, tiny.clone()), True),
        "from_similarity(pos_mask=None)": (lambda: clp.build_loss("infonce").from_similarity(z @ z.T / 4, None), True),
        "an empty batch": (lambda: clp.build_loss("macl")(z[:0], z[:0]), True),
        "FeatureQueue(size=True)": (lambda: clp.FeatureQueue(True, 4), True),
        "FeatureQueue(dim=True)": (lambda: clp.FeatureQueue(8, True), True),
        "set_epoch_length(nan)": (lambda: clp.set_epoch_length(clp.build_loss("cosine_schedule"), float("nan")), True),
        "AMCL on bf16 features": (lambda: clp.build_loss("amcl", dim=4)(z.bfloat16(), z.bfloat16() + 0.1), False),
        "pickle after a step": (lambda: pickle.loads(pickle.dumps(_stepped(clp.build_loss("macl"), z))), False),
    }
    cases |= _adapter_named_cases(z)
    # a case is (run, expect_error) or (run, check): a value that ``check`` must accept
    return {name: outcome(run, False, how) if callable(how) else outcome(run, how)
            for name, (run, how) in cases.items()}  # fmt: skip


def _stepped(loss_fn: Any, z: torch.Tensor) -> Any:
    loss_fn(z.clone().requires_grad_(), z + 0.1).backward()
    return loss_fn


def _adapter_named_cases(z: torch.Tensor) -> dict[str, tuple]:
    cases: dict[str, tuple] = {}
    try:
        from cl_plugins.integrations.frameworks.open_clip import StrategyClipLoss
    except Exception:  # noqa: BLE001
        return cases
    u = torch.nn.functional.normalize(z, dim=1)
    for scale in (-10.0, 0.0, float("nan")):
        cases[f"open_clip logit_scale={scale}"] = (lambda s=scale: StrategyClipLoss("infonce")(u, u, torch.tensor(s)),
                                                   True)  # fmt: skip
    cases["open_clip rows of norm 1e-14"] = (lambda: StrategyClipLoss("macl")(u * 1e-14, u * 1e-14, 14.3), True)
    try:
        from cl_plugins.integrations.frameworks.sentence_transformers import StrategyRankingLoss
    except Exception:  # noqa: BLE001
        return cases
    def st(**kw: Any) -> StrategyRankingLoss:
        return StrategyRankingLoss(torch.nn.Identity(), "infonce", **kw)

    cases["sentence-transformers scale=0"] = (lambda: st(scale=0), True)
    cases["sentence-transformers unequal columns"] = (lambda: st().loss_from_embeddings([z, z[:5]]), True)
    reference = float(st().loss_from_embeddings([z.double(), z.double() + 0.1]))
    tiny = (lambda: st().loss_from_embeddings([z * 1e-14, (z + 0.1) * 1e-14]),
            lambda v: abs(float(v) - reference) < 1e-4)  # fmt: skip
    cases["sentence-transformers rows of 1e-14"] = tiny
    return cases


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--core", type=int, default=1000, help="core property-search cases (default: 1000)")
    p.add_argument("--adapters", type=int, default=600, help="adapter property-search cases (default: 600)")
    p.add_argument("--json", help="write the counts here")
    args = p.parse_args(argv)
    warnings.simplefilter("ignore")
    named = named_cases()
    result = {"core": dict(core_cases(args.core)), "adapters": dict(adapter_cases(args.adapters)),
              "named": dict(collections.Counter(named.values())), "named_cases": named}  # fmt: skip
    print(json.dumps(result, indent=1))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    return result


if __name__ == "__main__":
    main()
