"""The per-pair temperature network's kernel (``cl_plugins.kernels.pair_network``): reached through the dispatcher
whatever the loss's ``kernel=``, and equal to the same logits computed densely with autograd in float64 (values,
every input's gradient, the temperatures' statistics), over several chunks, with excluded columns and labels."""

from __future__ import annotations

import pytest
import torch

from cl_plugins.kernels import dispatch, pair_network
from cl_plugins.kernels.contract import KernelChoice, PairNetwork, Request
from cl_plugins.labels import BlockLabels, label_policy

FLOOR, SPAN, BETA, PROJ = 0.05, 0.5, 0.1, 4


def _inputs() -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(5)
    a, c = (torch.nn.functional.normalize(torch.randn(n, 4, generator=g, dtype=torch.float64), dim=1) for n in (7, 9))
    pa, pb = torch.randn(7, 3, generator=g, dtype=torch.float64), torch.randn(9, 3, generator=g, dtype=torch.float64)
    w, w0 = torch.randn(3, generator=g, dtype=torch.float64), torch.randn((), generator=g, dtype=torch.float64)
    return [t.requires_grad_() for t in (a, c, pa, pb, w, w0)]


def _dense(a, c, pa, pb, w, w0, skip):  # type: ignore[no-untyped-def]
    """The logits as written, [A, M] at once; ``skip`` [A, M] True off the terms."""
    tau = FLOOR + SPAN * torch.sigmoid((pa[:, None, :] + pb[None]).relu() @ w + w0)
    logits = (a @ c.T) / tau - BETA * (0.5 * PROJ * torch.log(tau) + 1 / tau)
    return torch.logsumexp(logits.masked_fill(skip, float("-inf")), dim=1), tau[~skip]


@pytest.mark.parametrize("labelled", [False, True], ids=["plain", "labels"])
def test_the_kernel_equals_the_dense_logits(labelled: bool) -> None:
    inputs = _inputs()
    exclude = torch.tensor([[i % 9] for i in range(7)])
    kept = torch.tensor([(i + 1) % 9 for i in range(7)])
    labels = None
    skip = torch.zeros(7, 9, dtype=torch.bool)
    skip[torch.arange(7), exclude[:, 0]] = True
    if labelled:
        y_a, y_c = torch.arange(7) % 3, torch.arange(9) % 3
        labels = BlockLabels(y_a, y_c, label_policy("exclude"))
        same = y_a[:, None] == y_c[None, :]
        same[torch.arange(7), kept] = False  # each row's kept column stays a term under its label
        skip |= same
    stats: list[torch.Tensor] = []
    network = PairNetwork(*inputs[2:], FLOOR, SPAN, BETA, PROJ, chunk_elements=20, kept=kept if labelled else None,
                          on_stats=lambda *s: stats.extend(s))  # fmt: skip
    request = Request(inputs[0], inputs[1], exclude, labels=labels, network=network, choice=KernelChoice("stream"))
    (ours,) = dispatch.run(request)
    weights = torch.linspace(0.5, 1.5, 7, dtype=torch.float64)
    grads = torch.autograd.grad((ours * weights).sum(), inputs)
    reference, taus = _dense(*inputs, skip)
    expected = torch.autograd.grad((reference * weights).sum(), inputs)
    torch.testing.assert_close(ours, reference, rtol=1e-12, atol=1e-12)
    for got, want in zip(grads, expected, strict=True):
        torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(torch.stack(stats), torch.stack([taus.sum(), taus.min(), taus.max()]).detach())


@pytest.mark.parametrize("kernel", ["dense", "fused", "stream", "triton"])
def test_its_logits_have_no_other_kernel(kernel: str) -> None:
    a = torch.randn(3, 4)
    network = PairNetwork(torch.zeros(3, 2), torch.zeros(3, 2), torch.zeros(2), torch.zeros(()), FLOOR, SPAN, BETA,
                          PROJ, chunk_elements=64)  # fmt: skip
    request = Request(a, a, network=network, choice=KernelChoice(kernel))
    assert dispatch.backends(request) == [pair_network.BACKEND]
    plain = Request(a, a, choice=KernelChoice(kernel))
    assert pair_network.BACKEND not in dispatch.backends(plain) and not pair_network.BACKEND.accepts(plain)
