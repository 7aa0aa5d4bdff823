"""A loss's forward and backward never stop the host: counted through the profiler on the CPU, which records the
same host reads (``aten::_local_scalar_dense``, data-sized ``aten::nonzero``) a GPU would wait
on; the input checks still raise, deferred (:mod:`cl_plugins.deferred`); the kernels' bound on the logits, read
from what the host knows, holds."""

from __future__ import annotations

import math

import pytest
import torch
from torch.profiler import ProfilerActivity, profile

import cl_plugins as clp
from cl_plugins import deferred
from cl_plugins.kernels import contract, dispatch, halves
from cl_plugins.labels import LABEL_POLICIES
from cl_plugins.registry import get_loss_class

#: ``bool(t)`` and ``.item()`` both end in ``_local_scalar_dense`` (one event per read); ``nonzero`` sizes its output
#: from the data
SYNCS = ("aten::_local_scalar_dense", "aten::nonzero")
#: every layout a user builds, as (arguments, call)
LAYOUTS = {
    "simclr": ({"layout": "simclr"}, {}),
    "grace": ({"layout": "grace"}, {}),
    "cross_view": ({"layout": "cross_view"}, {}),
    "clip": ({"layout": "cross_view", "symmetric": True}, {}),
    "hard_negatives": ({"layout": "cross_view", "hard_negative_weight": 0.5}, {"hard_negatives": True}),
    "queue": ({"layout": "queue"}, {"queue": True}),
}


@pytest.fixture(autouse=True)
def as_on_a_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """The path a GPU takes: on the CPU a kernel's bound is read from the values (the host is the device there)."""
    monkeypatch.setattr(contract, "BOUND_FROM_VALUES_ON_CPU", False)


def views(n: int = 12, d: int = 16, seed: int = 0) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return {k: torch.randn(n, d, generator=g, requires_grad=k in ("z1", "z2")) for k in ("z1", "z2", "extra")}


def build(strategy: str, layout: str, **kwargs) -> tuple[torch.nn.Module, dict]:
    arguments, call = LAYOUTS[layout]
    loss = clp.build_host_loss(strategy, host_tau=0.1, feature_dim=16, **arguments, **kwargs)
    return loss, call


def call_loss(loss: torch.nn.Module, call: dict, v: dict[str, torch.Tensor]) -> torch.Tensor:
    extra = {name: v["extra"] for name in call}
    return loss(v["z1"], v["z2"], **extra)


#: the reads of a CPU tensor that reach no aten operation, so no profiler event (on a GPU each is a copy that waits),
#: and ``new_tensor`` of host data (on a GPU a copy from pageable memory, which waits too: found by the H200's sync
#: debug mode, which the CPU profiler cannot see)
READS = ("tolist", "item", "__bool__", "__int__", "__float__", "new_tensor")


def syncs(fn) -> int:
    """Host reads of one call of ``fn``: the profiler's sync events, and the Python-level reads of :data:`READS`."""
    calls = []
    with pytest.MonkeyPatch.context() as patch:
        for name in READS:
            original = getattr(torch.Tensor, name)
            patch.setattr(torch.Tensor, name, lambda self, *a, _o=original, _n=name: calls.append(_n) or _o(self, *a))
        original_tensor = torch.tensor
        patch.setattr(torch, "tensor", lambda *a, **k: calls.append("tensor") or original_tensor(*a, **k))
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            fn()
    return sum(e.name in SYNCS for e in prof.events()) + len(calls)


def test_the_count_sees_every_kind_of_read() -> None:
    t = torch.ones(3)
    for read in (lambda: bool(t.any()), lambda: t.sum().item(), lambda: t.tolist(), lambda: float(t[0]),
                 lambda: t.nonzero(), lambda: t.new_tensor(2.0), lambda: torch.tensor(2.0)):  # fmt: skip
        assert syncs(read) >= 1
    assert syncs(lambda: t + 1) == 0


def supported(layouts: list[str]) -> list[tuple[str, str]]:
    """(strategy, layout) for every registry strategy and each of ``layouts`` it supports."""
    return [(s, lay) for s in clp.available_losses() for lay in layouts
            if LAYOUTS[lay][0]["layout"] in get_loss_class(s).layouts]  # fmt: skip


@pytest.mark.parametrize(("strategy", "layout"), supported(list(LAYOUTS)))
def test_forward_and_backward_never_stop_the_host(strategy: str, layout: str) -> None:
    loss, call = build(strategy, layout)
    v = views()
    call_loss(loss, call, v).backward()  # the first call may set things up (lazy modules, kernels' health)
    assert syncs(lambda: call_loss(loss, call, v).backward()) == 0


@pytest.mark.parametrize("kernel", ["dense", "stream"])
@pytest.mark.parametrize("strategy", ["infonce", "macl", "dystress", "temperature_free"])
def test_no_sync_on_the_other_kernels(strategy: str, kernel: str) -> None:
    loss, call = build(strategy, "clip", kernel=kernel)
    v = views()
    assert syncs(lambda: call_loss(loss, call, v).backward()) == 0


@pytest.mark.parametrize("strategy", ["infonce", "macl", "dystress"])
def test_no_sync_on_the_kernel_by_halves(strategy: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """SimCLR's block against itself streams by halves on the CPU from N 2,048: taken here at N 12."""
    monkeypatch.setattr(dispatch, "HALVES_FROM_ELEMENTS", 0)
    calls = []
    original = halves._HalvesNegativeLSE.apply
    monkeypatch.setattr(halves._HalvesNegativeLSE, "apply", lambda *a: calls.append(1) or original(*a))
    loss, call = build(strategy, "simclr")
    v = views()
    assert syncs(lambda: call_loss(loss, call, v).backward()) == 0 and calls


def labelled(layout: str, y: list[int]) -> dict[str, torch.Tensor]:
    """The label arguments of a call of ``layout`` with pair labels ``y`` (a queue's rows labelled 0..4)."""
    extra = {"labels": torch.tensor(y)}
    if layout == "queue":
        extra["queue_labels"] = torch.arange(len(y)) % 5
    return extra


#: labels with several pairs per label, every anchor with negatives
MIXED = [0, 1, 2, 0, 1, 2, 0, 1, 2, 3, 3, 4]


@pytest.mark.parametrize("policy", LABEL_POLICIES)
@pytest.mark.parametrize(("strategy", "layout"), [(s, lay) for s, lay in supported(list(LAYOUTS))
                                                  if s in ("infonce", "macl", "dystress", "dual_temperature")])
def test_labels_never_stop_the_host_but_to_count_their_positives(strategy: str, layout: str, policy: str) -> None:
    """Excluding same-label candidates reads nothing; labels as positives read their number of pairs once per
    call (their list is sized by it; CLIP's two directions share one list)."""
    loss, call = build(strategy, layout, label_policy=policy)
    v = views()
    arguments = {**{n: v["extra"] for n in call}, **labelled(layout, MIXED)}
    run = lambda: loss(v["z1"], v["z2"], **arguments).backward()  # noqa: E731
    run()
    assert syncs(run) == (0 if policy == "exclude" else 1)


@pytest.mark.parametrize("layout", ["simclr", "clip", "queue"])
def test_labels_that_leave_every_anchor_without_negatives_give_zero_without_a_sync(layout: str) -> None:
    """Every anchor and candidate of one label: the loss is 0 with zero gradients (decided on the device), stats
    say so; under strict=True the refusal follows, deferred."""
    v = views()
    same = [7] * 12
    call = {n: v["extra"] for n in LAYOUTS[layout][1]}
    extra = labelled(layout, same)
    if layout == "queue":
        extra["queue_labels"] = torch.full((12,), 7)
    loss, _ = build("macl", layout, label_policy="positives_out")
    value = loss(v["z1"], v["z2"], **call, **extra)
    value.backward()
    assert value.item() == 0.0 and (v["z1"].grad == 0).all() and (v["z2"].grad == 0).all()
    assert loss.stats == {"rows_without_negative": float(24 if layout in ("simclr", "clip") else 12), "loss": 0.0}
    excluding, _ = build("macl", layout, label_policy="exclude")
    assert syncs(lambda: excluding(v["z1"], v["z2"], **call, **extra).backward()) == 0
    assert excluding.stats["rows_without_negative"] == loss.stats["rows_without_negative"]
    strict, _ = build("macl", layout, label_policy="exclude", strict=True)
    with pytest.raises(ValueError, match="every anchor and candidate has label 7: no anchor has a negative; "
                                         "refused under strict=True"):  # fmt: skip
        strict(v["z1"], v["z2"], **call, **extra)


def test_labels_that_leave_some_anchors_without_negatives_raise_deferred(device_still_busy: None) -> None:
    loss, call = build("infonce", "queue", label_policy="exclude")
    v = views()
    extra = {"labels": torch.tensor([7] + [1] * 11), "queue_labels": torch.full((12,), 7)}
    value = loss(v["z1"], v["z2"], queue=v["extra"], **extra)
    assert torch.isnan(value)
    with pytest.raises(ValueError, match="an anchor of label 7 has no negative"):
        _ = loss.stats


class _NotYet:
    """A CUDA event as the host sees it while the device is still busy: done only once waited on."""

    def __init__(self) -> None:
        self.done = False

    def query(self) -> bool:
        return self.done

    def synchronize(self) -> None:
        self.done = True


@pytest.fixture
def device_still_busy(monkeypatch: pytest.MonkeyPatch) -> None:
    """The deferred checks as on a GPU: the flags reach the host after the call has returned."""

    def seal(self: deferred.DeferredChecks, flags: torch.Tensor) -> None:
        self._sealed = deferred._Sealed(flags.clone(), _NotYet(), self._explains)

    monkeypatch.setattr(deferred.DeferredChecks, "_seal", seal)


@pytest.mark.parametrize("strategy", clp.available_losses())
def test_a_bad_batch_gives_nan_with_zero_gradient_then_its_error(strategy: str, device_still_busy: None) -> None:
    loss, call = build(strategy, "simclr")
    params = [p for p in loss.parameters() if p.requires_grad]
    v = views()
    with torch.no_grad():
        v["z1"][3, 5] = float("nan")
    value = call_loss(loss, call, v)
    assert torch.isnan(value)
    value.backward()
    for t in (v["z1"], v["z2"], *params):
        assert t.grad is None or (t.grad == 0).all(), "a bad batch must leave the weights where they are"
    name = "h1" if strategy == "amcl" else "z1"
    with pytest.raises(ValueError, match=f"{name} contains NaN or inf"):
        call_loss(loss, call, views(seed=1))  # the next call raises the last one's error
    assert torch.isfinite(call_loss(loss, call, views(seed=1)))  # and then works again


def test_a_bad_batch_without_negatives_still_raises(device_still_busy: None) -> None:
    """A batch of one row has no negative (the loss is 0 there): its NaN row's error still follows."""
    loss = clp.build_host_loss("infonce", host_tau=0.1)
    z = torch.full((1, 4), float("nan"))
    assert torch.isnan(loss(z, torch.ones(1, 4)))
    with pytest.raises(ValueError, match="z1 contains NaN or inf"):
        loss(torch.randn(4, 4), torch.randn(4, 4))


def test_the_error_raises_when_stats_are_read(device_still_busy: None) -> None:
    loss = clp.build_host_loss("macl", host_tau=0.1, feature_dim=16)
    v = views()
    with torch.no_grad():
        v["z2"][0] = 0.0
    assert torch.isnan(loss(v["z1"], v["z2"]))
    with pytest.raises(ValueError, match="z2 has all-zero rows \\[0\\]"):
        _ = loss.stats


def test_a_good_batch_is_unchanged_by_the_deferred_checks(device_still_busy: None) -> None:
    v = views()
    reference = clp.build_host_loss("infonce", host_tau=0.1, check_inputs=False)(v["z1"], v["z2"])
    assert torch.equal(clp.build_host_loss("infonce", host_tau=0.1)(v["z1"], v["z2"]), reference)


@pytest.mark.parametrize(("strategy", "layout"), supported(["simclr", "clip", "queue"]))
def test_the_kernels_bound_holds(strategy: str, layout: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every request's bound, read from the host's knowledge alone, is at least its largest |logit|, with the
    temperatures pushed to their floors (a bound too low would overflow the kernels' sums unseen)."""
    loss, call = build(strategy, layout)
    with torch.no_grad():
        for name, p in loss.named_parameters():
            p.fill_(-50.0 if "log_tau" in name else 50.0) if p.dim() == 0 else p.mul_(50.0)
    seen = []
    run = dispatch.run

    def checked(request):
        if request.network is None and request.logit_map is None and request.bound is not None:
            a = request.anchors.double() * (request.scale.double() if torch.is_tensor(request.scale) else request.scale)
            largest = (a @ request.candidates.double().T).abs().max().item()
            seen.append(largest)
            assert largest <= request.bound, (largest, request.bound)
        return run(request)

    monkeypatch.setattr(dispatch, "run", checked)
    v = views(n=64)
    with torch.no_grad():
        v["z2"].copy_(v["z1"])  # cosines of 1: the bound is reached
    if strategy == "learnable":
        loss.clamp_()
    call_loss(loss, call, v)
    assert all(math.isfinite(x) for x in seen)


def test_on_the_cpu_a_learned_temperature_keeps_the_bounded_plans(monkeypatch: pytest.MonkeyPatch) -> None:
    """Eagerly on the CPU the bound is read from the values: a learned tau of 0.07 (not its floor of 0.01) keeps
    the sums without a running maximum, and SimCLR's block streams by halves."""
    monkeypatch.setattr(contract, "BOUND_FROM_VALUES_ON_CPU", True)
    monkeypatch.setattr(dispatch, "HALVES_FROM_ELEMENTS", 0)
    calls = []
    original = halves._HalvesNegativeLSE.apply
    monkeypatch.setattr(halves._HalvesNegativeLSE, "apply", lambda *a: calls.append(1) or original(*a))
    loss, call = build("learnable", "simclr")
    call_loss(loss, call, views())
    assert calls


@pytest.mark.parametrize("layout", ["simclr", "clip"])
def test_the_layouts_columns_built_once_serve_training_after_inference(layout: str) -> None:
    """The positive and excluded columns are built once per batch size (fewer operations per call); made first
    under ``torch.inference_mode`` they still serve a later call whose backward saves them."""
    arguments, _ = LAYOUTS[layout]
    loss = clp.build_host_loss("infonce", host_tau=0.1, **arguments)
    n = 37  # a size no other test builds first
    with torch.inference_mode():
        loss(torch.randn(n, 8), torch.randn(n, 8))
    z1 = torch.randn(n, 8, requires_grad=True)
    loss(z1, torch.randn(n, 8)).backward()
    assert torch.isfinite(z1.grad).all()
