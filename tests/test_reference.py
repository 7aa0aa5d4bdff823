"""Every strategy against the loop-based float64 reference, for each layout: value and gradient."""

from __future__ import annotations

import pytest
import torch

import cl_plugins as clp
from cl_plugins.losses.amcl import FORMS
from tests import reference as ref

N, D, K = 5, 4, 7
LAYOUTS = [
    ("simclr", {}),
    ("grace", {}),
    ("cross_view", {}),
    ("cross_view", {"symmetric": True}),
    ("queue", {}),
    ("queue", {"symmetric": True}),
]


def _inputs(seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    z1 = torch.randn(N, D, generator=g, dtype=torch.float64, requires_grad=True)
    z2 = torch.randn(N, D, generator=g, dtype=torch.float64, requires_grad=True)
    queue = torch.randn(K, D, generator=g, dtype=torch.float64)
    return z1, z2, queue


STRATEGIES = {
    "infonce": (dict(tau=0.2), lambda g: ref.infonce(g, 0.2)),
    "dcl": (dict(tau=0.2), lambda g: ref.infonce(g, 0.2, decoupled=True)),
    "dcl_vmf": (dict(tau=0.2, sigma=0.5), lambda g: ref.dclw(g, 0.2, 0.5)),
    "macl": (dict(tau0=0.1, alpha=0.5, a0=0.0), lambda g: ref.macl(g, 0.1, 0.5, 0.0)),
    "macl_simcse": (dict(tau0=0.05, alpha=2.0, a0=0.8), lambda g: ref.macl(g, 0.05, 2.0, 0.8)),
    "macl_no_reweight": (dict(tau0=0.1, alpha=0.5, reweight=False), lambda g: ref.macl(g, 0.1, 0.5, 0.0, False)),
    "dual_temperature": (dict(tau_alpha=0.1, tau_beta=1.0), lambda g: ref.dual_temperature(g, 0.1, 1.0)),
    "temperature_free": (dict(), lambda g: ref.temperature_free(g)),
    "dystress": (dict(tau_min=0.07, tau_max=0.2), lambda g: ref.dystress(g, 0.07, 0.2)),
    "dystress_shifted": (
        dict(tau_min=0.1, tau_max=0.2, profile="shifted", shift=-0.4, scale=0.7),
        lambda g: ref.dystress(g, 0.1, 0.2, "shifted", -0.4, 0.7),
    ),
    "dystress_linear": (dict(profile="linear"), lambda g: ref.dystress(g, 0.07, 0.2, "linear")),
    "dystress_exponential": (dict(profile="exponential"), lambda g: ref.dystress(g, 0.07, 0.2, "exponential")),
    "dystress_monotone": (dict(profile="monotone"), lambda g: ref.dystress(g, 0.07, 0.2, "monotone")),
    "flatnce": (dict(tau=0.2), lambda g: ref.flatnce(g, 0.2)),
    "learnable": (dict(init_tau=0.3), lambda g: ref.infonce(g, 0.3)),
    "cosine_schedule": (dict(tau_min=0.1, tau_max=0.5, period=10), lambda g: ref.infonce(g, 0.5)),
}


def _registry_name(key: str) -> str:
    for name in clp.available_losses():
        if key == name or key.startswith(name + "_"):
            return name
    raise KeyError(key)


def _reference(key: str, loss_fn: clp.ContrastiveLoss, groups):
    if key == "learnable":  # the parameter stores log(tau) in its own precision
        return ref.infonce(groups, loss_fn.tau.detach())
    return STRATEGIES[key][1](groups)


def _grads(loss, tensors):
    return torch.autograd.grad(loss, tensors)


@pytest.mark.parametrize("layout,extra", LAYOUTS, ids=[f"{a}{'-sym' if b else ''}" for a, b in LAYOUTS])
@pytest.mark.parametrize("key", list(STRATEGIES))
def test_strategy_matches_reference(key, layout, extra):
    kwargs, reference = STRATEGIES[key]
    name = _registry_name(key)
    z1, z2, queue = _inputs()
    loss_fn = clp.build_loss(name, layout=layout, reduction="none", **extra, **kwargs).double()
    call = dict(queue=queue) if layout == "queue" else {}
    ours = loss_fn(z1, z2, **call)

    groups = ref.enumerate_layout(layout, z1, z2, symmetric=extra.get("symmetric", False), queue=queue)
    if key.startswith("macl"):
        expected = torch.cat([reference([g]) for g in groups])  # A is per call direction
    else:
        expected = _reference(key, loss_fn, groups)
    torch.testing.assert_close(ours, expected, rtol=1e-10, atol=1e-10)

    g_ours = _grads(ours.mean(), (z1, z2))
    g_ref = _grads(expected.mean(), (z1, z2))
    for a, b in zip(g_ours, g_ref):
        torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-11)


@pytest.mark.parametrize("key", sorted(STRATEGIES))
def test_hard_negatives_match_reference(key):
    kwargs, _ = STRATEGIES[key]
    z1, z2, _ = _inputs(1)
    hard = torch.randn(N, D, dtype=torch.float64, requires_grad=True)
    loss_fn = clp.build_loss(_registry_name(key), layout="cross_view", reduction="none", **kwargs).double()
    ours = loss_fn(z1, z2, hard_negatives=hard)
    groups = ref.enumerate_layout("cross_view", z1, z2, hard=hard)
    torch.testing.assert_close(ours, _reference(key, loss_fn, groups), rtol=1e-10, atol=1e-10)


def test_hard_negative_weight_is_a_logit_bias():
    z1, z2, _ = _inputs(2)
    hard = torch.randn(N, D, dtype=torch.float64)
    loss_fn = clp.build_loss("infonce", tau=0.05, layout="cross_view", hard_negative_weight=0.3, reduction="none")
    ours = loss_fn(z1, z2, hard_negatives=hard)
    expected = ref.infonce(ref.enumerate_layout("cross_view", z1, z2, hard=hard), 0.05, hard_weight=0.3)
    torch.testing.assert_close(ours, expected, rtol=1e-10, atol=1e-10)


#: per form, arguments away from the defaults (a box of moderate temperatures, a top-k below the negatives)
AMCL_FORMS = {
    "anchor": dict(tau=0.3, tau_range=3.0),
    "eq2.1": dict(eta=0.05, iota=1.0, beta=0.1),
    "mle": dict(eta=0.05, iota=1.0, beta=0.1, chunk_elements=16),  # several chunks in the pair MLP
    "topk": dict(eta=0.05, iota=1.0, beta=0.1, topk=3),
}


def test_every_amcl_form_has_a_reference_case():
    assert set(AMCL_FORMS) == set(FORMS)


@pytest.mark.parametrize("layout", ["simclr", "cross_view"])
@pytest.mark.parametrize("form", list(AMCL_FORMS))
@pytest.mark.parametrize("decoupled", [True, False])
@pytest.mark.parametrize("kernel", ["auto", "dense"])
@pytest.mark.filterwarnings("ignore:amcl form")
def test_amcl_matches_reference(layout, form, decoupled, kernel):
    if form == "topk" and not decoupled:
        pytest.skip("the top-k form keeps the positive out of the denominator")
    torch.manual_seed(0)
    loss_fn = clp.build_loss("amcl", dim=6, heads=2, proj_dim=3, hidden=8, temperature_hidden=5, form=form,
                             layout=layout, decoupled=decoupled, reduction="none", share_temperature_mlp=False,
                             kernel=kernel,
                             **AMCL_FORMS[form]).double()  # fmt: skip
    if form == "anchor":  # its last layer starts at zero (every anchor at tau): give each anchor its own
        for net in loss_fn.temperature_nets:
            torch.nn.init.normal_(net.second.weight)
    h1 = torch.randn(N, 6, dtype=torch.float64, requires_grad=True)
    h2 = torch.randn(N, 6, dtype=torch.float64, requires_grad=True)
    ours = loss_fn(h1, h2)
    expected = ref.amcl(loss_fn, h1, h2, layout, decoupled)
    torch.testing.assert_close(ours, expected, rtol=1e-10, atol=1e-10)
    params = [h1, h2, *loss_fn.parameters()]
    for a, b in zip(_grads(ours.sum(), params), _grads(expected.sum(), params)):
        torch.testing.assert_close(a, b, rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("layout", ["simclr", "cross_view"])
@pytest.mark.parametrize("form", list(AMCL_FORMS))
@pytest.mark.parametrize("decoupled", [True, False])
@pytest.mark.parametrize("kernel", ["auto", "dense", "stream"])
@pytest.mark.filterwarnings("ignore:amcl form")
def test_amcl_excludes_same_label_candidates(layout, form, decoupled, kernel):
    """``label_policy="exclude"`` in every AMCL form: its reference with the anchor's label left out of the
    negatives (the positive stays in the denominator unless decoupled), values and every parameter's gradient."""
    if form == "topk" and not decoupled:
        pytest.skip("the top-k form keeps the positive out of the denominator")
    torch.manual_seed(0)
    loss_fn = clp.build_loss("amcl", dim=6, heads=2, proj_dim=3, hidden=8, temperature_hidden=5, form=form,
                             layout=layout, decoupled=decoupled, reduction="none", share_temperature_mlp=False,
                             kernel=kernel, label_policy="exclude", **AMCL_FORMS[form]).double()  # fmt: skip
    if form == "anchor":
        for net in loss_fn.temperature_nets:
            torch.nn.init.normal_(net.second.weight)
    h1 = torch.randn(N, 6, dtype=torch.float64, requires_grad=True)
    h2 = torch.randn(N, 6, dtype=torch.float64, requires_grad=True)
    ours = loss_fn(h1, h2, labels=LABELS)
    expected = ref.amcl(loss_fn, h1, h2, layout, decoupled, labels=LABELS)
    torch.testing.assert_close(ours, expected, rtol=1e-10, atol=1e-10)
    params = [h1, h2, *loss_fn.parameters()]
    for a, b in zip(_grads(ours.sum(), params), _grads(expected.sum(), params)):
        torch.testing.assert_close(a, b, rtol=1e-8, atol=1e-10)


def test_from_similarity_multi_positive_matches_reference():
    """A row with several positives averages its per-positive losses (others not negatives)."""
    g = torch.Generator().manual_seed(3)
    sim = (torch.rand(4, 6, generator=g, dtype=torch.float64) * 2 - 1).requires_grad_()
    pos = torch.zeros(4, 6, dtype=torch.bool)
    pos[0, [0, 2]] = True
    pos[1, 1] = True
    pos[2, [3, 4, 5]] = True
    pos[3, 0] = True
    neg = ~pos
    neg[1, 5] = False  # ignored entry
    tau = 0.3
    ours = clp.build_loss("infonce", tau=tau, reduction="none").from_similarity(sim, pos, neg)
    expected = []
    for a in range(4):
        negs = [sim[a, j] / tau for j in range(6) if neg[a, j]]
        per_pos = [-ref._log_softmax_pos(sim[a, p] / tau, negs) for p in range(6) if pos[a, p]]
        expected.append(torch.stack(per_pos).mean())
    torch.testing.assert_close(ours, torch.stack(expected), rtol=1e-12, atol=1e-12)


def test_from_similarity_equals_forward():
    z1, z2, _ = _inputs(4)
    loss_fn = clp.build_loss("macl", layout="simclr")
    z = torch.nn.functional.normalize(torch.cat([z1, z2]), dim=1)
    sim = z @ z.T
    n2 = 2 * N
    pos = torch.zeros(n2, n2, dtype=torch.bool)
    pos[torch.arange(n2), (torch.arange(n2) + N) % n2] = True
    neg = ~pos & ~torch.eye(n2, dtype=torch.bool)
    torch.testing.assert_close(loss_fn.from_similarity(sim, pos, neg), loss_fn(z1, z2), rtol=1e-12, atol=1e-12)


def test_reductions():
    z1, z2, _ = _inputs(5)
    per = clp.build_loss("infonce", reduction="none")(z1, z2)
    assert per.shape == (2 * N,)
    torch.testing.assert_close(clp.build_loss("infonce")(z1, z2), per.mean())
    torch.testing.assert_close(clp.build_loss("infonce", reduction="sum")(z1, z2), per.sum())


def test_macl_stays_finite_where_the_official_snippet_overflows():
    """P_pos rounding to 1 makes 1 / (1 - P) infinite even in float64; the limit is 1."""
    pos = torch.tensor([[0.9], [0.2]], dtype=torch.float64)
    neg = torch.tensor([[-0.5, -0.6], [0.1, -0.3]], dtype=torch.float64)
    official = ref.macl_official(pos, neg, 0.01, 0.0, 0.0)
    assert not torch.isfinite(official[0])  # the snippet breaks on the confident anchor
    sim = torch.cat([pos, neg], dim=1)
    pos_mask = torch.zeros_like(sim, dtype=torch.bool)
    pos_mask[:, 0] = True
    ours = clp.build_loss("macl", tau0=0.01, alpha=0.0, reduction="none").from_similarity(sim, pos_mask)
    assert torch.isfinite(ours).all()
    torch.testing.assert_close(ours[0], torch.tensor(1.0, dtype=torch.float64))
    torch.testing.assert_close(ours[1], official[1])


def test_every_registered_strategy_has_a_reference():
    """A new strategy fails here until it has a float64 loop reference above (AMCL: its own tests below)."""
    covered = {_registry_name(key) for key in STRATEGIES} | {"amcl"}
    assert set(clp.available_losses()) <= covered


def test_from_similarity_averages_by_row_or_by_pair():
    """Rows with 1, 3, 2 and 1 positives: the row average and pytorch-metric-learning's pair average differ."""
    g = torch.Generator().manual_seed(3)
    sim = torch.rand(4, 6, generator=g, dtype=torch.float64) * 2 - 1
    pos = torch.zeros(4, 6, dtype=torch.bool)
    for row, cols in enumerate(([0], [1, 2, 3], [4, 5], [2])):
        pos[row, cols] = True
    tau = 0.2
    terms = [[float(-sim[a, p] / tau + torch.logsumexp(torch.cat([sim[a, p:p + 1], sim[a][~pos[a]]]) / tau, 0))
              for p in pos[a].nonzero().flatten()] for a in range(4)]  # fmt: skip
    by_row = sum(sum(t) / len(t) for t in terms) / 4
    by_pair = sum(sum(t) for t in terms) / 7
    loss = clp.build_loss("infonce", tau=tau)
    assert float(loss.from_similarity(sim, pos)) == pytest.approx(by_row, rel=1e-12)
    assert float(loss.from_similarity(sim, pos, average="pair")) == pytest.approx(by_pair, rel=1e-12)
    assert abs(by_row - by_pair) > 1e-3
    each = clp.build_loss("infonce", tau=tau, reduction="none")
    assert each.from_similarity(sim, pos).shape == (4,) and each.from_similarity(sim, pos, average="pair").shape == (7,)
    with pytest.raises(ValueError, match="average must be one of"):
        loss.from_similarity(sim, pos, average="anchor")


def _lightly_dclw(out0: torch.Tensor, out1: torch.Tensor, tau: float, sigma: float) -> torch.Tensor:
    """lightly's ``DCLWLoss`` as its source writes it (``negative_mises_fisher_weights`` and ``DCLLoss._loss``,
    both directions averaged), in float64: an independent formulation of the SimCLR layout."""
    out0, out1 = torch.nn.functional.normalize(out0, dim=1), torch.nn.functional.normalize(out1, dim=1)
    n = out0.shape[0]
    weight = 2 - n * torch.softmax((out0 * out1).sum(1).detach() / sigma, dim=0)

    def one(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        cross, own = a @ b.T / tau, a @ a.T / tau
        off = ~torch.eye(n, dtype=torch.bool)
        negatives = torch.cat([own[off].view(n, n - 1), cross[off].view(n, n - 1)], dim=1)
        return (-torch.diagonal(cross) * weight + torch.logsumexp(negatives, dim=1)).mean()

    return (one(out0, out1) + one(out1, out0)) / 2


@pytest.mark.parametrize("kernel", ["dense", "fused", "stream"])
def test_dclw_is_lightlys_formula(kernel):
    g = torch.Generator().manual_seed(5)
    z1, z2 = (torch.randn(7, 4, generator=g, dtype=torch.float64, requires_grad=True) for _ in range(2))
    ours = clp.build_loss("dcl", tau=0.2, sigma=0.5, kernel=kernel).double()(z1, z2)
    theirs = _lightly_dclw(z1, z2, 0.2, 0.5)
    torch.testing.assert_close(ours, theirs, rtol=1e-12, atol=1e-12)
    for a, b in zip(torch.autograd.grad(ours, (z1, z2)), torch.autograd.grad(theirs, (z1, z2))):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)
    plain = clp.build_loss("dcl", tau=0.2).double()(z1, z2)
    assert abs(float(plain.detach()) - float(ours.detach())) > 1e-3  # the weights change the loss
    stats = clp.build_loss("dcl", tau=0.2, sigma=0.5).double()
    stats(z1, z2)
    assert stats.stats["weight_min"] < 1 < stats.stats["weight_max"]


LABELS = torch.tensor([0, 1, 0, 2, 1])  # pairs 0 and 2 share a label, as do 1 and 4
QUEUE_LABELS = torch.tensor([0, 3, 1, 2, 2, 0, 4])


@pytest.mark.parametrize("kernel", ["dense", "fused", "stream"])
@pytest.mark.parametrize("layout,extra", LAYOUTS, ids=[f"{a}{'-sym' if b else ''}" for a, b in LAYOUTS])
@pytest.mark.parametrize("key", [k for k in STRATEGIES if _registry_name(k) != "amcl"])
def test_same_label_candidates_are_no_negatives(key, layout, extra, kernel):
    """``label_policy="exclude"``: every strategy on every kernel equals its reference on the labelled layouts
    (written as loops that skip same-label candidates), values and gradients in float64."""
    kwargs, _ = STRATEGIES[key]
    z1, z2, queue = _inputs()
    loss_fn = clp.build_loss(_registry_name(key), layout=layout, reduction="none", kernel=kernel,
                             label_policy="exclude", **extra, **kwargs).double()  # fmt: skip
    call = dict(queue=queue, queue_labels=QUEUE_LABELS) if layout == "queue" else {}
    ours = loss_fn(z1, z2, labels=LABELS, **call)
    groups = ref.enumerate_layout(layout, z1, z2, symmetric=extra.get("symmetric", False), queue=queue,
                                  labels=LABELS, queue_labels=QUEUE_LABELS)  # fmt: skip
    expected = _reference(key, loss_fn, groups)
    torch.testing.assert_close(ours, expected, rtol=1e-10, atol=1e-12)
    for a, b in zip(_grads(ours.sum(), (z1, z2)), _grads(expected.sum(), (z1, z2))):
        torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-11)


@pytest.mark.parametrize(
    ("build", "call", "named"),
    [
        (dict(), dict(labels=LABELS), "labels= go with a label_policy"),
        (dict(label_policy="exclude"), dict(), "every call of such a loss passes labels="),
        (dict(label_policy="exclude"), dict(labels=LABELS[:3]), "one label per pair \\(5\\)"),
        (dict(label_policy="exclude"), dict(labels=LABELS.float()), "integer labels"),
        (dict(label_policy="exclude", strict=True), dict(labels=torch.zeros(5, dtype=torch.long)), "no anchor has a "
         "negative; refused under strict=True"),
        (dict(label_policy="exclude", layout="queue"), dict(labels=LABELS), "needs queue_labels="),
        (dict(label_policy="exclude", layout="queue"),
         dict(labels=LABELS, queue_labels=torch.zeros(7, dtype=torch.long)), "has no negative"),
        (dict(label_policy="exclude"), dict(labels=LABELS, queue_labels=QUEUE_LABELS), "does not use queue_labels"),
        (dict(label_policy="exclude", layout="queue"), dict(labels=LABELS, queue_labels=QUEUE_LABELS[:6]),
         "one label per queue row \\(7\\)"),
    ],
)
def test_labels_that_cannot_be_used_get_one_line(build, call, named):
    z1, z2, queue = _inputs()
    call = dict(call)
    if build.get("layout") == "queue":
        call["queue"] = queue
    with pytest.raises((ValueError, TypeError), match=named) as info:
        clp.build_loss("macl", **build).double()(z1, z2, **call)
    assert "\n" not in str(info.value)


def test_the_label_policy_is_checked_at_construction():
    with pytest.raises(ValueError, match="label_policy must be one of"):
        clp.build_loss("infonce", label_policy="label")


def test_a_labelled_queue_keeps_its_keys_labels_for_exclude_same_label():
    """FeatureQueue(labels=True) stores each key's label (first in, first out, as its keys); the queue layout
    then excludes the stored keys of the anchor's label, equal to the loop reference."""
    torch.manual_seed(0)
    queue = clp.FeatureQueue(6, D, gather_distributed=False, labels=True)
    assert queue.get_labels().tolist() == [-1] * 6  # the random initial keys carry no label
    keys = torch.randn(8, D, dtype=torch.float64)
    queue.enqueue(keys[:4], torch.tensor([0, 1, 2, 0]))
    queue.enqueue(keys[4:], torch.tensor([3, 1, 4, 2]))  # wraps: the last 6 stay
    assert queue.get_labels().tolist() == [4, 2, 2, 0, 3, 1] and int(queue.ptr) == 2  # slots 4, 5, 0, 1
    z1, z2, _ = _inputs()
    loss_fn = clp.build_loss("macl", layout="queue", label_policy="exclude", reduction="none").double()
    ours = loss_fn(z1, z2, queue=queue.get().double(), labels=LABELS, queue_labels=queue.get_labels())
    groups = ref.enumerate_layout("queue", z1, z2, queue=queue.get().double(), labels=LABELS,
                                  queue_labels=queue.get_labels())  # fmt: skip
    torch.testing.assert_close(ours, _reference("macl", loss_fn, groups), rtol=1e-10, atol=1e-12)
    with pytest.raises(ValueError, match="pass enqueue\\(keys, labels=...\\)"):
        queue.enqueue(keys[:2])
    with pytest.raises(ValueError, match="stores no labels"):
        clp.FeatureQueue(6, D).get_labels()


def test_pytorch_metric_learnings_labelled_ntxent_through_from_similarity():
    """docs/strategies.md: pytorch-metric-learning's NT-Xent with labels (each same-label pair one term, the other
    labels' samples its negatives, averaged over pairs) as masks, against the terms written out."""
    g = torch.Generator().manual_seed(11)
    features = torch.randn(8, 5, generator=g, dtype=torch.float64, requires_grad=True)
    labels = torch.tensor([0, 1, 0, 2, 1, 0, 2, 1])
    z = torch.nn.functional.normalize(features, dim=1)
    sim = z @ z.T
    same = labels[:, None] == labels[None, :]
    own = torch.eye(8, dtype=torch.bool)
    pml = clp.build_loss("infonce", tau=0.1).from_similarity(sim, same & ~own, ~same, average="pair")
    terms = [-(sim[a, p] / 0.1 - torch.logsumexp(torch.cat([sim[a, p:p + 1], sim[a][~same[a]]]) / 0.1, 0))
             for a in range(8) for p in range(8) if same[a, p] and a != p]  # fmt: skip
    expected = torch.stack(terms).mean()
    torch.testing.assert_close(pml, expected, rtol=1e-12, atol=1e-12)
    for a, b in zip(torch.autograd.grad(pml, features, retain_graph=True), torch.autograd.grad(expected, features)):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)
