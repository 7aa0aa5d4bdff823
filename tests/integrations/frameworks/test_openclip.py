"""``StrategyClipLoss`` against the real open_clip ``ClipLoss`` (../shared/upstream/open_clip): values and the
gradients of the features and of ``logit_scale``, in one process and in 2 gloo processes under each
``local_loss`` / ``gather_with_grad`` setting."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import cl_plugins as clp
from cl_plugins.integrations.frameworks.open_clip import StrategyClipLoss
from cl_plugins.integrations.frameworks.open_clip.loss import follows_host_tau
from tests.dist_utils import run_distributed
from tests.integrations.upstream import open_clip_loss

N, D = 6, 5


def _inputs(seed: int = 0, n: int = N) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    image = F.normalize(torch.randn(n, D, generator=g, dtype=torch.float64), dim=1)
    text = F.normalize(image + 0.7 * torch.randn(n, D, generator=g, dtype=torch.float64), dim=1)
    return image, text, torch.tensor(1 / 0.07, dtype=torch.float64)


def _loss_and_grads(loss, image, text, scale, **kw):
    leaves = [t.clone().requires_grad_() for t in (image, text, scale)]
    value = loss(*leaves, **kw)
    value = value["contrastive_loss"] if isinstance(value, dict) else value
    return value.detach(), torch.autograd.grad(value, leaves)


@pytest.mark.parametrize("output_dict", [False, True])
def test_infonce_is_clip_loss(output_dict, device):
    image, text, scale = (t.to(device) for t in _inputs())  # pytest --device cuda: both on the GPU
    theirs = _loss_and_grads(open_clip_loss().ClipLoss(), image, text, scale, output_dict=output_dict)
    ours = _loss_and_grads(StrategyClipLoss("infonce"), image, text, scale, output_dict=output_dict)
    torch.testing.assert_close(ours[0], theirs[0], rtol=1e-12, atol=1e-12)
    for a, b in zip(ours[1], theirs[1]):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)


def test_logit_bias_changes_nothing():
    image, text, scale = _inputs()
    bias = torch.tensor(-3.0, dtype=torch.float64)
    theirs = open_clip_loss().ClipLoss()(image, text, scale, bias)
    torch.testing.assert_close(StrategyClipLoss()(image, text, scale, bias), theirs, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(theirs, open_clip_loss().ClipLoss()(image, text, scale), rtol=1e-12, atol=1e-12)


def test_who_owns_the_temperature():
    image, text, scale = _inputs()
    for name in clp.available_losses():
        if clp.owns_projection_head(name):
            with pytest.raises(ValueError, match="before a projection head"):
                StrategyClipLoss(name)
            continue
        loss = StrategyClipLoss(name)
        assert loss.owner == ("model" if follows_host_tau(name) else "strategy")
        s, leaf = scale.clone().requires_grad_(), image.clone().requires_grad_()
        value = loss(leaf, text, s)
        assert torch.isfinite(value)
        grad = torch.autograd.grad(value, [leaf, s], allow_unused=True)[1]
        assert (grad is None) == (loss.owner == "strategy"), name
    with pytest.raises(ValueError, match="logit_scale='strategy'"):
        StrategyClipLoss("macl", logit_scale="model")
    with pytest.raises(ValueError, match="use_horovod"):
        StrategyClipLoss(use_horovod=True)


def test_a_learned_temperature_is_kept_out_of_weight_decay():
    loss = StrategyClipLoss("learnable")
    groups = clp.param_groups(loss, weight_decay=0.1)
    assert [p for g in groups if g["weight_decay"] == 0.0 for p in g["params"]] == list(loss.parameters())


def _rank(rank, world, local_loss, gather_with_grad):
    import torch.distributed as dist

    image, text, scale = _inputs(seed=1, n=2 * N)
    rows = slice(rank * N, (rank + 1) * N)
    settings = dict(local_loss=local_loss, gather_with_grad=gather_with_grad, rank=rank, world_size=world)
    out = []
    for loss in (open_clip_loss().ClipLoss(**settings), StrategyClipLoss("infonce", **settings)):
        out.append(_loss_and_grads(loss, image[rows], text[rows], scale))
    dist.barrier()
    return out


@pytest.mark.distributed
@pytest.mark.parametrize("local_loss", [False, True])
@pytest.mark.parametrize("gather_with_grad", [False, True])
def test_two_processes_match_clip_loss(local_loss, gather_with_grad):
    for (theirs, ours) in run_distributed(_rank, local_loss, gather_with_grad):
        torch.testing.assert_close(ours[0], theirs[0], rtol=1e-12, atol=1e-12)
        for a, b in zip(ours[1], theirs[1]):
            torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize(("scale", "named"), [(-10.0, "finite positive"), (0.0, "finite positive"),
                                              (float("nan"), "finite positive"), (float("inf"), "finite positive"),
                                              (1e9, r"tau \(1 / logit_scale\) must be a temperature"),
                                              (torch.ones(2), "must be a scalar")])  # fmt: skip
def test_a_per_call_logit_scale_outside_the_temperature_range_is_refused(scale, named):
    """open_clip hands the temperature to every call: it is checked every call, as a built loss's τ is once."""
    img, txt = (F.normalize(torch.randn(4, 8), dim=1) for _ in range(2))
    with pytest.raises(ValueError, match=named) as info:
        StrategyClipLoss("infonce")(img, txt, torch.as_tensor(scale))
    assert "\n" not in str(info.value)
    assert torch.isfinite(StrategyClipLoss("infonce")(img, txt, torch.tensor(100.0)))


MALFORMED = [((4, 8), (4, 6), "the same shape"), ((4, 8), (3, 8), "the same shape"), ((4,), (4,), r"shape \[N, D\]"),
             ((0, 8), (0, 8), "is empty")]  # fmt: skip


@pytest.mark.parametrize(("image", "text", "named"), MALFORMED)
def test_malformed_features_get_one_line(image, text, named):
    with pytest.raises(ValueError, match=named) as info:
        StrategyClipLoss("infonce")(torch.randn(*image), torch.randn(*text), torch.tensor(14.0))
    assert "\n" not in str(info.value)
