"""A batch in which no anchor has a negative (a batch of one, every label the same under a ``label_policy``) has
a defined loss for the standard forms: each anchor's log-sum-exp runs over its positive
alone and equals the positive's logit, so every term is 0 with zero gradient (a training run stopped on
such a batch). The forms whose denominator holds no positive (decoupled, FlatNCE) refuse it, and so does
``strict=True``; ``from_similarity`` counts a row without negatives 0 and computes the others as without it."""

from __future__ import annotations

import pytest
import torch

import cl_plugins as clp

D = 6


def _build(name: str, **options: object) -> clp.ContrastiveLoss:
    cls = clp.get_loss_class(name)
    dim = {cls.feature_dim_arg: D} if cls.feature_dim_arg else {}
    torch.manual_seed(0)
    return clp.build_host_loss(name, host_tau=0.2, **dim, **options)


def _defined(loss_fn: clp.ContrastiveLoss) -> bool:
    return loss_fn.defined_without_negatives and not loss_fn.decoupled


#: (options, rows of each view, call arguments, anchors): batches in which no anchor has a negative
BATCHES = {
    "simclr-one": ({}, 1, {}, 2),
    "cross_view-one": ({"layout": "cross_view"}, 1, {}, 1),
    "cross_view-symmetric-one": ({"layout": "cross_view", "symmetric": True}, 1, {}, 2),
    "simclr-exclude": ({"label_policy": "exclude"}, 4, {"labels": torch.full((4,), 3)}, 8),
    "simclr-supcon": ({"label_policy": "positives_out"}, 4, {"labels": torch.zeros(4, dtype=torch.long)}, 8),
    "cross_view-exclude": ({"layout": "cross_view", "label_policy": "exclude"}, 3, {"labels": torch.ones(3).long()}, 3),
}
def _buildable(name: str, options: dict) -> bool:
    """The strategy takes these options (AMCL does not take label_policy='positives_out' yet)."""
    try:
        _build(name, **options)
    except ValueError:
        return False
    return True


CASES = [(name, batch) for name in clp.available_losses() for batch in BATCHES if _buildable(name, BATCHES[batch][0])]


@pytest.mark.parametrize(("name", "batch"), CASES, ids=["-".join(c) for c in CASES])
@pytest.mark.parametrize("reduction", ["mean", "none"])
def test_a_batch_without_negatives_is_zero_with_zero_gradients_or_refused(name, batch, reduction):
    options, n, call, anchors = BATCHES[batch]
    loss_fn = _build(name, reduction=reduction, **options)
    z1, z2 = (torch.randn(n, D, dtype=torch.float64, requires_grad=True) for _ in range(2))
    loss_fn = loss_fn.double()
    if not _defined(loss_fn):
        with pytest.raises(ValueError, match="no positive in its denominator") as info:
            loss_fn(z1, z2, **call)
        assert "\n" not in str(info.value)
        return
    loss = loss_fn(z1, z2, **call)
    assert loss.shape == ((anchors,) if reduction == "none" else ())
    assert torch.equal(loss.detach(), torch.zeros_like(loss))
    loss.sum().backward()
    for t in (z1, z2, *loss_fn.parameters()):  # every parameter gets a gradient (DDP waits for each), all zero
        assert t.grad is not None and torch.equal(t.grad, torch.zeros_like(t.grad))
    assert loss_fn.stats["rows_without_negative"] == anchors and loss_fn.stats["loss"] == 0.0
    with pytest.raises(ValueError, match="refused under strict=True") as info:
        _build(name, strict=True, **options).double()(z1, z2, **call)
    assert "\n" not in str(info.value)


def test_a_queue_without_negatives_for_some_anchors_only_is_still_refused():
    loss_fn = clp.build_loss("infonce", layout="queue", label_policy="exclude")
    z1, z2, queue = torch.randn(3, D), torch.randn(3, D), torch.randn(5, D)
    with pytest.raises(ValueError, match="an anchor of label 2 has no negative"):
        loss_fn(z1, z2, queue=queue, labels=torch.tensor([2, 0, 1]), queue_labels=torch.full((5,), 2))
    assert loss_fn(z1, z2, queue=queue, labels=torch.full((3,), 2), queue_labels=torch.full((5,), 2)) == 0


@pytest.mark.parametrize("average", ["row", "pair"])
@pytest.mark.parametrize("name", [n for n in clp.available_losses() if n != "amcl"])  # AMCL takes no sim matrix
def test_from_similarity_counts_a_row_without_negatives_zero(name, average):
    g = torch.Generator().manual_seed(0)
    sim = (torch.rand(5, 7, generator=g, dtype=torch.float64) * 1.8 - 0.9).requires_grad_()
    pos = torch.zeros(5, 7, dtype=torch.bool)
    pos[torch.arange(5), torch.arange(5)] = True
    pos[0, 6] = True  # two positives in row 0
    neg = ~pos
    neg[1] = False  # row 1: its positive only
    neg[3, :] = False
    neg[3, 5] = True  # row 3: one negative
    keep = torch.tensor([True, False, True, True, True])
    loss_fn = _build(name, reduction="none").double()
    if not _defined(loss_fn):
        with pytest.raises(ValueError, match=r"rows \[1\] have no negative"):
            loss_fn.from_similarity(sim, pos, neg, average=average)
        return
    got = loss_fn.from_similarity(sim, pos, neg, average=average)
    expected = _build(name, reduction="none").double().from_similarity(sim[keep], pos[keep], neg[keep],
                                                                       average=average)  # fmt: skip
    items = keep if average == "row" else keep.repeat_interleave(pos.sum(dim=1))
    assert got.shape == items.shape and torch.equal(got[~items].detach(), torch.zeros(int((~items).sum())))
    torch.testing.assert_close(got[items], expected, rtol=1e-12, atol=1e-12)
    assert loss_fn.stats["rows_without_negative"] == 1.0
    (grad,) = torch.autograd.grad(got.sum(), sim)
    assert torch.equal(grad[1], torch.zeros(7, dtype=torch.float64))
    mean = _build(name).double().from_similarity(sim, pos, neg, average=average)
    torch.testing.assert_close(mean, got.sum() / items.numel(), rtol=1e-12, atol=1e-12)  # the zeros count
