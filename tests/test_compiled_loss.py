"""A loss compiled the way users compile it: ``torch.compile(loss, fullgraph=True)`` (no graph break at all) and a
small model's forward and loss compiled as one graph, against the same loss eagerly (values, input and parameter
gradients, ``stats``). CI compiles a sample that covers every registry strategy and every layout at least once;
``benchmarks/compiled_matrix.py`` runs the whole matrix (and CUDA graphs on a GPU)."""

from __future__ import annotations

import pytest
import torch

import cl_plugins as clp
from cl_plugins.kernels import triton_jit
from cl_plugins.labels import LABEL_POLICIES
from cl_plugins.registry import get_loss_class
from tests.test_host_syncs import LAYOUTS, call_loss, views

ORDER = list(LAYOUTS)


def sample() -> list[tuple[str, str]]:
    """Strategy i in layout i (mod the layouts), the next one it supports where it lacks that one; then each layout
    no strategy reached, with InfoNCE; then DySTreSS in SimCSE's layout (it once crashed the compiler there)."""
    cases = []
    for i, strategy in enumerate(clp.available_losses()):
        supported = [lay for lay in ORDER if LAYOUTS[lay][0]["layout"] in get_loss_class(strategy).layouts]
        cases.append((strategy, next(lay for lay in ORDER[i % len(ORDER) :] + ORDER if lay in supported)))
    cases += [("infonce", lay) for lay in ORDER if lay not in {c[1] for c in cases}]
    return cases + [("dystress", "hard_negatives")]


def grads(loss: torch.nn.Module, value: torch.Tensor, v: dict[str, torch.Tensor]) -> list[torch.Tensor]:
    params = [p for p in loss.parameters() if p.requires_grad]
    return list(torch.autograd.grad(value, [v["z1"], v["z2"], *params]))


@pytest.fixture(autouse=True)
def fresh_compiler():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


@pytest.mark.parametrize(("strategy", "layout"), sample())
def test_the_loss_compiles_whole_and_equals_eager(strategy: str, layout: str) -> None:
    arguments, call = LAYOUTS[layout]
    loss = clp.build_host_loss(strategy, host_tau=0.1, feature_dim=16, **arguments)
    compiled = torch.compile(loss, fullgraph=True)
    for seed in (0, 1):  # a second batch reuses the graph
        v = views(seed=seed)
        got = compiled(v["z1"], v["z2"], **{k: v["extra"] for k in call})
        got_stats = loss.stats
        want = call_loss(loss, call, v)
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
        for g, w in zip(grads(loss, got, v), grads(loss, want, v), strict=True):
            torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-6)
        assert got_stats.keys() == loss.stats.keys() and got_stats.get("tau_mean", 0) == pytest.approx(
            loss.stats.get("tau_mean", 0), rel=1e-5
        )


@pytest.mark.parametrize("layout", ["simclr", "clip", "queue"])
@pytest.mark.parametrize("policy", LABEL_POLICIES)
def test_a_labelled_loss_compiles_whole(policy: str, layout: str) -> None:
    """With ``label_policy="exclude"`` as every loss; with labels as positives, whose number of same-label pairs is
    data (one host read eagerly), under ``capture_scalar_outputs`` (and the dynamic shapes it implies): values and
    gradients equal eager."""
    arguments, call = LAYOUTS[layout]
    loss = clp.build_host_loss("macl", host_tau=0.1, label_policy=policy, **arguments)
    v = views()
    labelled = {"labels": torch.tensor([0, 1, 2] * 4), **({"queue_labels": torch.arange(12) % 5} if call else {})}
    extra = {**{name: v["extra"] for name in call}, **labelled}
    data_sized = {} if policy == "exclude" else {"capture_scalar_outputs": True,
                                                 "capture_dynamic_output_shape_ops": True}  # fmt: skip
    with torch._dynamo.config.patch(**data_sized):
        got = torch.compile(loss, fullgraph=True)(v["z1"], v["z2"], **extra)
        got_grads = grads(loss, got, v)
    want = loss(v["z1"], v["z2"], **extra)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    for g, w in zip(got_grads, grads(loss, want, v), strict=True):
        torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("strategy", ["learnable", "amcl"])
def test_a_model_and_its_loss_compile_as_one_graph(strategy: str) -> None:
    """The training step as users compile it: encoder and loss in one graph, backward through it; the parameters'
    gradients (the encoder's and the loss's own, a learned temperature) equal eager's."""
    torch.manual_seed(0)
    encoder = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 16))
    loss = clp.build_host_loss(strategy, host_tau=0.1, feature_dim=16)
    params = [*encoder.parameters(), *(p for p in loss.parameters() if p.requires_grad)]

    def step(x1: torch.Tensor, x2: torch.Tensor) -> torch.Tensor:
        return loss(encoder(x1), encoder(x2))

    x1, x2 = torch.randn(12, 16), torch.randn(12, 16)
    got = torch.compile(step, fullgraph=True)(x1, x2)
    got_grads = torch.autograd.grad(got, params)
    want = step(x1, x2)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    for g, w in zip(got_grads, torch.autograd.grad(want, params), strict=True):
        torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-6)


def test_a_bad_batch_compiled_gives_nan_with_zero_gradient_and_its_error_follows() -> None:
    loss = clp.build_host_loss("infonce", host_tau=0.1)
    compiled = torch.compile(loss, fullgraph=True)
    v = views()
    compiled(v["z1"], v["z2"])  # compiled on a good batch first
    with torch.no_grad():
        v["z1"][2] = float("inf")
    value = compiled(v["z1"], v["z2"])
    assert torch.isnan(value)
    assert all((g == 0).all() for g in grads(loss, value, v))
    with pytest.raises(ValueError, match="z1 contains NaN or inf"):
        _ = loss.stats
    good = views(seed=1)
    assert torch.isfinite(compiled(good["z1"], good["z2"]))



def test_a_compiled_call_keeps_its_checks_in_lists_of_its_own() -> None:
    """A call's input checks go to lists made in that call: appending to the lists the last call left would make
    the compiled graph hand each check out again, to be replayed on them after every call."""
    loss = clp.build_host_loss("infonce", host_tau=0.1)
    compiled = torch.compile(loss, fullgraph=True)
    v = views()
    compiled(v["z1"], v["z2"])
    left = (loss.deferred_checks._flags, loss.deferred_checks._explains)
    compiled(v["z1"], v["z2"])
    assert left == ([], [])

#: the Triton kernels' operators, each backend and each kind of argument once: a block against itself, both CLIP
#: directions from one backward, one direction with a map, its statistic and a hard negative's bias, a ratio (dual
#: temperature's second scale), a queue, labels
TRITON_CASES = [("infonce", "simclr", None), ("learnable", "clip", None), ("dystress", "hard_negatives", None),
                ("dual_temperature", "cross_view", None), ("temperature_free", "queue", None),
                ("macl", "simclr", "exclude")]  # fmt: skip


@pytest.mark.skipif(not triton_jit.usable_on(torch.device("cpu")), reason="Triton's interpreter is not here")
@pytest.mark.parametrize(("strategy", "layout", "policy"), TRITON_CASES)
def test_the_triton_kernels_compile_as_operators(strategy: str, layout: str, policy: str | None) -> None:
    """``kernel="triton"`` (under Triton's interpreter here) compiles whole: its launches are ``torch.library``
    operators, no graph break; values, gradients and ``stats`` equal eager's."""
    arguments, call = LAYOUTS[layout]
    loss = clp.build_host_loss(strategy, host_tau=0.1, feature_dim=16, kernel="triton", label_policy=policy,
                               **arguments)  # fmt: skip
    v = views()
    extra = {**{name: v["extra"] for name in call}, **({"labels": torch.tensor([0, 1, 2] * 4)} if policy else {})}
    got = torch.compile(loss, fullgraph=True)(v["z1"], v["z2"], **extra)
    got_stats, got_grads = loss.stats, grads(loss, got, v)
    want = loss(v["z1"], v["z2"], **extra)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    for g, w in zip(got_grads, grads(loss, want, v), strict=True):
        torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-6)
    assert got_stats == pytest.approx(loss.stats, rel=1e-5)
    assert loss.kernel_health.usable("triton")  # served by Triton's kernels, none failed over to streaming
