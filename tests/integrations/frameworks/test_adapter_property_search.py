"""The property search of ``tests/test_property_search.py`` through the four framework adapters' own inputs:
sentence-transformers' columns, the HF Trainer's pooled outputs and view labels, open_clip's features and
``logit_scale``, Lightning's two-view batch. Random strategies, row counts (0, 1, ragged), widths, scales from
float32's subnormal range to 1e30, NaN rows and malformed labels: each case either equals the same adapter in
float64 on unscaled inputs (every loss but AMCL's is scale-invariant; open_clip's features must be unit rows, so a
scaled one is refused) or raises one ValueError / TypeError line. Never NaN, inf or another exception."""

from __future__ import annotations

import random
import warnings
from types import SimpleNamespace
from typing import Any

import pytest
import torch

import cl_plugins as clp
from tests.test_property_search import SCALES, _degenerate

ADAPTERS = ("sentence_transformers", "hf_trainer", "open_clip", "lightning")
ROWS = (0, 1, 2, 3, 7)
NEEDS = {"sentence_transformers": "sentence_transformers", "lightning": "lightning"}


def _cases(count: int = 120, seed: int = 4949) -> list[tuple]:
    rng = random.Random(seed)
    names = clp.available_losses()
    return [(rng.choice(ADAPTERS), rng.choice(names), rng.choice(ROWS), rng.choice((1, 2, 8)), rng.choice(SCALES),
             rng.choice((torch.float32, torch.float64)), rng.random() < 0.1, rng.choice(("good", "good", "bad")),
             rng.randrange(10**6)) for _ in range(count)]  # fmt: skip


def _build(adapter: str, name: str, dim: int) -> Any:
    torch.manual_seed(0)  # AMCL's heads: the same in the case and its reference
    if adapter == "sentence_transformers":
        from cl_plugins.integrations.frameworks.sentence_transformers import StrategyRankingLoss

        return StrategyRankingLoss(torch.nn.Identity(), name).loss_from_embeddings
    if adapter == "hf_trainer":
        from cl_plugins.integrations.frameworks.hf_trainer import StrategyLossFunc

        return StrategyLossFunc(name, feature_dim=dim)
    if adapter == "open_clip":
        from cl_plugins.integrations.frameworks.open_clip import StrategyClipLoss

        return StrategyClipLoss(name)
    from cl_plugins.integrations.frameworks.lightning import ContrastiveModule

    module = ContrastiveModule(torch.nn.Identity(), clp.build_host_loss(name, host_tau=0.1, feature_dim=dim))
    module.log = lambda *args, **kwargs: None  # outside a Trainer
    return module


def _inputs(adapter: str, n: int, dim: int, shape: str, gen: torch.Generator) -> tuple[list[torch.Tensor], Any]:
    """The float64 tensors a case scales, and how to call the adapter with them."""
    z = [torch.randn(n, dim, generator=gen, dtype=torch.float64) for _ in range(3)]
    if adapter == "sentence_transformers":  # "bad": a ragged negative column
        cols = [z[0], z[1]] + ([z[2][: max(n - 1, 0)]] if shape == "bad" else [z[2]])
        return cols, lambda fn, t: fn(t)
    if adapter == "hf_trainer":  # "bad": one row's view label wrong
        labels = torch.tensor([0] * n + [1] * n)
        if shape == "bad" and n:
            labels[0] = 1
        return z[:2], lambda fn, t: fn(SimpleNamespace(last_hidden_state=torch.cat(t)[:, None, :]), labels)
    if adapter == "open_clip":  # unit rows, as open_clip's models return them; "bad": texts of another width
        z = [torch.nn.functional.normalize(x, dim=1) for x in (z[0], z[1][:, :-1] if shape == "bad" else z[1])]
        return z, lambda fn, t: fn(t[0], t[1], torch.tensor(14.3))
    second = (lambda t: t[1][:, :-1]) if shape == "bad" else (lambda t: t[1])  # "bad": views of other widths
    return z[:2], lambda fn, t: fn.training_step((t[0], second(t)), 0)


def _value_and_grads(fn: Any, call: Any, tensors: list[torch.Tensor]) -> tuple[float, list[torch.Tensor]]:
    leaves = [t.clone().requires_grad_() for t in tensors]
    torch.manual_seed(0)  # AMCL's heads
    value = call(fn, leaves)
    grads = torch.autograd.grad(value, leaves, allow_unused=True)
    return float(value.detach()), [g if g is not None else torch.zeros_like(t) for g, t in zip(grads, leaves)]


@pytest.mark.parametrize("adapter,name,n,dim,scale,dtype,nan,shape,seed", _cases())
def test_the_reference_value_or_one_clear_line(adapter, name, n, dim, scale, dtype, nan, shape, seed):
    pytest.importorskip(NEEDS.get(adapter, "torch"))
    warnings.simplefilter("ignore")
    gen = torch.Generator().manual_seed(seed)
    try:
        fn, reference_fn = (_build(adapter, name, dim) for _ in range(2))
    except ValueError as err:  # a strategy the adapter cannot host (AMCL's heads in a similarity seam)
        assert "\n" not in str(err)
        return
    tensors, call = _inputs(adapter, n, dim, shape, gen)
    scaled = [(t * scale).to(dtype) for t in tensors]
    if nan and n:
        scaled[0][0, 0] = float("nan")
    try:
        value, grads = _value_and_grads(fn, call, scaled)
    except (ValueError, TypeError) as err:
        assert "\n" not in str(err).strip(), str(err)
        return
    assert not nan or n == 0, "a NaN input gave a value"
    assert shape == "good", f"the malformed input ({shape}) gave {value}"
    assert adapter != "open_clip" or scale == 1.0, f"open_clip took rows of norm {scale}"
    assert all(torch.isfinite(g).all() for g in grads) and value == value and abs(value) != float("inf")
    if _degenerate(name, dtype, scale, dim):
        return
    # AMCL's heads project the raw features (its loss depends on their scale): its reference is the scaled input
    own_heads = clp.owns_projection_head(name)
    reference_in = [t.to(dtype).double() for t in scaled] if own_heads else [t.to(torch.float64) for t in tensors]
    expected, expected_grads = _value_and_grads(reference_fn, call, reference_in)
    scale = 1.0 if own_heads else scale
    tol = 1e-3 if dtype == torch.float32 else 1e-9
    assert value == pytest.approx(expected, rel=tol, abs=tol)
    for g, e in zip(grads, expected_grads):
        torch.testing.assert_close(g.double() * scale, e, rtol=max(tol, 1e-2 if dtype == torch.float32 else 0),
                                   atol=max(tol, 1e-2 if dtype == torch.float32 else 0))  # fmt: skip
