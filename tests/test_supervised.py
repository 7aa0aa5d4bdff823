"""``label_policy="positives_out"`` / ``"positives_in"`` / ``"positives_pair"``: supervised contrastive learning in
Khosla et al.'s two forms (L_out, L_in) and pytorch-metric-learning's per-pair form, for every strategy (from the
registry) on every layout and kernel:
against loop references in float64 (tests/reference.py), the kernels against the dense path with many tiles,
against pytorch-metric-learning's own losses, and the refusals."""

from __future__ import annotations

import math

import pytest
import torch

import cl_plugins as clp
from cl_plugins.kernels import fused, listed_cosines, streaming
from cl_plugins.labels import LabelPolicy, Labels
from tests import reference as ref
from tests.test_reference import LABELS, LAYOUTS, QUEUE_LABELS, STRATEGIES, _inputs, _reference, _registry_name

LAYOUT_IDS = [f"{a}{'-sym' if b else ''}" for a, b in LAYOUTS]
KERNELS = ["dense", "fused", "stream"]
NOT_AMCL = [k for k in STRATEGIES if _registry_name(k) != "amcl"]


@pytest.fixture
def many_tiles(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tiles of 2 x 3, fused chunks of one row, pair chunks of 4: every kernel crosses many boundaries."""
    monkeypatch.setattr(streaming, "tile_sizes", lambda rows, cols, device=None: (min(rows, 2), min(cols, 3)))
    monkeypatch.setattr(fused, "CHUNK_ELEMENTS", 1)
    monkeypatch.setattr(listed_cosines, "CHUNK_PAIRS", 4)


def _ours(key: str, layout: str, extra: dict, kernel: str, form: str, inputs=None):  # type: ignore[no-untyped-def]
    z1, z2, queue = inputs or _inputs()
    loss_fn = clp.build_loss(_registry_name(key), layout=layout, reduction="none", kernel=kernel,
                             label_policy=f"positives_{form}", **extra, **STRATEGIES[key][0]).double()  # fmt: skip
    call = dict(queue=queue, queue_labels=QUEUE_LABELS) if layout == "queue" else {}
    return loss_fn, loss_fn(z1, z2, labels=LABELS, **call), (z1, z2, queue)


def _assert_grads_equal(a: torch.Tensor, b: torch.Tensor, inputs, rtol: float = 1e-9) -> None:  # type: ignore[no-untyped-def]
    for x, y in zip(torch.autograd.grad(a.sum(), inputs), torch.autograd.grad(b.sum(), inputs)):
        torch.testing.assert_close(x, y, rtol=rtol, atol=rtol / 100)


@pytest.mark.parametrize("form", ["out", "pair"])
@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("layout,extra", LAYOUTS, ids=LAYOUT_IDS)
@pytest.mark.parametrize("key", NOT_AMCL)
def test_every_positive_pair_against_the_reference(key, layout, extra, kernel, form, many_tiles):
    """"out" and "pair": each positive pair is the strategy's own loss with that positive and, as negatives, the
    other labels' candidates ("pair") or every other candidate ("out"): the strategy's reference on those pairs,
    averaged per anchor ("out", Khosla's 1 / |P(a)|) or listed per pair ("pair"), values and gradients."""
    loss_fn, ours, (z1, z2, queue) = _ours(key, layout, extra, kernel, form)
    anchors = ref.labelled_anchors(layout, z1, z2, extra.get("symmetric", False), queue, LABELS, QUEUE_LABELS)
    groups, rows = ref.label_pair_groups(anchors, form)
    values = _reference(key, loss_fn, groups)
    expected = ref.row_means(values, rows) if form == "out" else values
    torch.testing.assert_close(ours, expected, rtol=1e-10, atol=1e-12)
    # "out" takes another positive out of its label's sum (one LSE per anchor), which loses its relative precision
    # times the weight of that positive over its label's others: here MACL's τ clamps to 0.01 (logits span 200)
    _assert_grads_equal(ours, expected, (z1, z2), 1e-6 if (key, form) == ("macl_simcse", "out") else 1e-9)


def _logit(key: str, loss_fn: clp.ContrastiveLoss):  # type: ignore[no-untyped-def]
    """The strategy's logit of a cosine, written from the papers (tests/reference.py)."""
    kwargs = STRATEGIES[key][0]
    if key == "temperature_free":
        return lambda s: torch.log((1 + s.clamp(-1 + 1e-6, 1 - 1e-6)) / (1 - s.clamp(-1 + 1e-6, 1 - 1e-6)))
    if key.startswith("dystress"):
        profile = dict(tmin=kwargs.get("tau_min", 0.07), tmax=kwargs.get("tau_max", 0.2),
                       profile=kwargs.get("profile", "cosine"), shift=kwargs.get("shift", 0.0),
                       k=kwargs.get("scale", 1.0))  # fmt: skip
        return lambda s: s / ref.dystress_tau(float(s.detach()), **profile)
    if key == "learnable":  # the parameter stores log(tau) in its own precision
        tau = loss_fn.tau.detach()
    else:
        tau = 0.5 if key == "cosine_schedule" else kwargs.get("tau", 0.2)  # the schedule starts at tau_max
    return lambda s: s / tau


IN_FORM = ["infonce", "learnable", "cosine_schedule", "temperature_free", "dystress", "dystress_shifted",
           "dystress_linear", "dystress_exponential", "dystress_monotone"]  # fmt: skip


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("layout,extra", LAYOUTS, ids=LAYOUT_IDS)
@pytest.mark.parametrize("key", IN_FORM)
def test_l_in_against_the_reference(key, layout, extra, kernel, many_tiles):
    """"in": -log((1/|P|) sum_P e^l / sum_{P+N} e^l) per anchor, for every strategy that is a logit map."""
    loss_fn, ours, (z1, z2, queue) = _ours(key, layout, extra, kernel, "in")
    anchors = ref.labelled_anchors(layout, z1, z2, extra.get("symmetric", False), queue, LABELS, QUEUE_LABELS)
    expected = ref.supcon_in(anchors, _logit(key, loss_fn))
    torch.testing.assert_close(ours, expected, rtol=1e-10, atol=1e-12)
    _assert_grads_equal(ours, expected, (z1, z2))


@pytest.mark.parametrize("kernel", ["fused", "stream"])
@pytest.mark.parametrize("layout,extra", LAYOUTS, ids=LAYOUT_IDS)
@pytest.mark.parametrize("key", [k for k in NOT_AMCL if k not in IN_FORM and k != "dcl_vmf"])
def test_l_in_of_the_other_strategies_equals_the_dense_path(key, layout, extra, kernel, many_tiles):
    """"in" for the strategies with a loss of their own (MACL, dual temperature, DCL, FlatNCE) on d = LSE_N -
    LSE_P: the kernels equal the dense path (float64, values and gradients)."""
    _, ours, inputs = _ours(key, layout, extra, kernel, "in")
    _, dense, _ = _ours(key, layout, extra, "dense", "in", inputs)
    torch.testing.assert_close(ours, dense, rtol=1e-10, atol=1e-12)
    _assert_grads_equal(ours, dense, inputs[:2])


def test_an_anchor_alone_in_its_label_keeps_its_own_positive():
    """Label 2 has one pair: its anchors' sums over their label's other candidates are empty (-inf) on every
    kernel, and the loss is InfoNCE with the other labels as negatives (finite, with finite gradients)."""
    for kernel in KERNELS:
        for form in ("out", "in", "pair"):
            loss_fn, ours, (z1, z2, _) = _ours("infonce", "simclr", {}, kernel, form)
            lone = [3, 8] if form != "pair" else [3, 8]  # anchors of pair 3 (label 2), both views
            u = torch.nn.functional.normalize(torch.cat([z1, z2]), dim=1)
            y = LABELS.repeat(2)
            for a in lone:
                partner = (a + 5) % 10
                logits = torch.cat([u[a] @ u[partner][None].T, u[a] @ u[y != y[a]].T]) / 0.2
                torch.testing.assert_close(ours[a], torch.logsumexp(logits, 0) - logits[0], rtol=1e-12, atol=1e-12)
            grads = torch.autograd.grad(ours.sum(), (z1, z2))
            assert all(torch.isfinite(g).all() for g in grads)


def test_the_statistics_are_over_every_positive_pair_and_the_negatives():
    """MACL's alignment is the mean cosine of every positive pair (its τ follows it); DySTreSS's mean τ is over
    the negatives (the other labels' candidates), on each kernel."""
    z1, z2, _ = _inputs()
    anchors = ref.labelled_anchors("simclr", z1, z2, labels=LABELS)
    every_pair = torch.stack([s for an in anchors[0] for s in an.positives]).mean()
    negatives = [s for an in anchors[0] for s in an.negatives]
    for kernel in KERNELS:
        macl = clp.build_loss("macl", label_policy="positives_out", kernel=kernel).double()
        macl(z1, z2, labels=LABELS)
        assert math.isclose(macl.stats["batch_alignment"], float(every_pair.detach()), rel_tol=1e-12)
        assert math.isclose(macl.stats["tau_mean"], float(macl.temperature(every_pair.detach())), rel_tol=1e-12)
        dystress = clp.build_loss("dystress", label_policy="positives_out", kernel=kernel).double()
        dystress(z1, z2, labels=LABELS)
        taus = [ref.dystress_tau(float(s.detach()), 0.07, 0.2) for s in negatives]
        assert math.isclose(dystress.stats["tau_mean"], sum(taus) / len(taus), rel_tol=1e-10)
        assert math.isclose(dystress.stats["tau_min"], min(taus), rel_tol=1e-10)


@pytest.mark.parametrize("form", ["out", "in", "pair"])
def test_one_label_per_pair_is_the_unlabelled_loss(form):
    """Every pair of its own label: all three forms are the layout's InfoNCE."""
    z1, z2, _ = _inputs()
    labelled = clp.build_loss("macl", label_policy=f"positives_{form}", reduction="none").double()
    plain = clp.build_loss("macl", reduction="none").double()
    torch.testing.assert_close(labelled(z1, z2, labels=torch.arange(5)), plain(z1, z2), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(
    ("build", "named"),
    [
        (dict(label_policy="positives_mean"), "label_policy must be one of"),
        (dict(label_policy="same_label"), "label_policy must be one of"),
        # the arguments label_policy= replaced are refused with a line naming it (nothing released: no aliases)
        (dict(exclude="same_label"), "exclude= is gone: .*label_policy='exclude'"),
        (dict(positives="label"), "positives= is gone: .*label_policy='positives_out'"),
        (dict(positives="label", positive_form="in"), "is gone: .*label_policy='positives_in'"),
    ],
)
def test_arguments_that_cannot_be_used_get_one_line(build, named):
    with pytest.raises(ValueError, match=named) as info:
        clp.build_loss("infonce", **build)
    assert "\n" not in str(info.value)


def test_amcl_and_weighted_dcl_in_form_refuse():
    with pytest.raises(ValueError, match="amcl does not take labels as positives"):
        clp.build_loss("amcl", dim=4, label_policy="positives_out")
    with pytest.raises(ValueError, match="one term per anchor"):
        clp.build_loss("dcl", sigma=0.5, label_policy="positives_in")


def test_a_call_without_labels_names_the_policy():
    z1, z2, _ = _inputs()
    with pytest.raises(ValueError, match="label_policy='positives_out'.*labels=None"):
        clp.build_loss("infonce", label_policy="positives_out")(z1, z2)


def test_the_pair_listing_builds_no_matrix_and_matches_the_masks():
    """The other positives come from the sorted candidate labels: equal to the [A, M] mask's entries."""
    g = torch.Generator().manual_seed(3)
    y = torch.randint(0, 7, (40,), generator=g)
    z = torch.randn(40, 4, generator=g)
    labels = Labels(y, None, LabelPolicy("positives_out"))
    block = clp.layouts.build_blocks("simclr", z, z.clone(), gather=False, labels=labels)[0]
    rows, cols = block.label_pairs()
    ys = y.repeat(2)
    mask = ys[:, None] == ys[None, :]
    mask[torch.arange(80), torch.arange(80)] = False
    mask[torch.arange(80), block.pos_cols] = False
    assert sorted(zip(rows.tolist(), cols.tolist())) == sorted(map(tuple, mask.nonzero().tolist()))


@pytest.mark.parametrize("form", ["out", "pair"])
def test_pytorch_metric_learnings_losses_on_both_views(form):
    """pytorch-metric-learning on the 2N embeddings with each pair's label twice: its ``SupConLoss`` (L_out per
    anchor, averaged over the anchors with a positive: every one here, each has its other view) is
    ``label_policy="positives_out"`` and its ``NTXentLoss`` (every positive pair one term, averaged over the pairs) is
    ``label_policy="positives_pair"``, in the SimCLR layout: values and gradients, float64."""
    from pytorch_metric_learning import losses

    g = torch.Generator().manual_seed(5)
    z1, z2 = (torch.randn(12, 6, generator=g, dtype=torch.float64, requires_grad=True) for _ in range(2))
    y = torch.tensor([0, 1, 2, 0, 1, 3, 0, 4, 2, 1, 5, 6])
    peer_loss = losses.SupConLoss(temperature=0.1) if form == "out" else losses.NTXentLoss(temperature=0.1)
    peer = peer_loss(torch.cat([z1, z2]), y.repeat(2))
    peer_grads = torch.autograd.grad(peer, (z1, z2))
    for kernel in KERNELS:
        ours = clp.build_loss("infonce", tau=0.1, label_policy=f"positives_{form}", kernel=kernel)(
            z1, z2, labels=y)  # fmt: skip
        torch.testing.assert_close(ours, peer, rtol=1e-12, atol=1e-12)
        for a, b in zip(torch.autograd.grad(ours, (z1, z2)), peer_grads):
            torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)


def _hard_negative_groups(z1, z2, hard, form):  # type: ignore[no-untyped-def]
    """SimCSE's layout with labels, by loops: the other keys of another label and every hard negative are the
    negatives (a hard negative has no label: always a negative, its own anchor's with the bias); ``form`` None is
    ``label_policy="exclude"``, "pair" lists every same-label key as a positive."""
    y = [int(v) for v in LABELS]
    own, others = [], []
    for i in range(len(y)):
        negatives = [ref.cos(z1[i], z2[j]) for j in range(len(y)) if y[j] != y[i]]
        negatives += [ref.cos(z1[i], h) for h in hard]
        hard_index = len(negatives) - len(y) + i
        own.append(ref.Anchor(ref.cos(z1[i], z2[i]), negatives, hard_index))
        if form == "pair":
            others += [ref.Anchor(ref.cos(z1[i], z2[j]), negatives, hard_index) for j in range(len(y))
                       if j != i and y[j] == y[i]]  # fmt: skip
    return [own + others]


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("option", [{"label_policy": "exclude"}, {"label_policy": "positives_pair"}])
def test_hard_negatives_are_negatives_whatever_the_labels(option, kernel):
    z1, z2, _ = _inputs()
    hard = torch.randn(5, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(9), requires_grad=True)
    loss_fn = clp.build_loss("infonce", tau=0.2, layout="cross_view", hard_negative_weight=0.3, reduction="none",
                             kernel=kernel, **option).double()  # fmt: skip
    ours = loss_fn(z1, z2, hard_negatives=hard, labels=LABELS)
    form = option["label_policy"].partition("_")[2] or None
    expected = ref.infonce(_hard_negative_groups(z1, z2, hard, form), 0.2, hard_weight=0.3)
    torch.testing.assert_close(ours, expected, rtol=1e-10, atol=1e-12)
    _assert_grads_equal(ours, expected, (z1, z2, hard))
