"""Bad input gives a clear TypeError / ValueError naming the argument; nothing turns into NaN."""

from __future__ import annotations

import pytest
import torch

import cl_plugins as clp
from cl_plugins import layouts


def _z(n=4, d=3, **kw):
    return torch.randn(n, d, **kw)


@pytest.mark.parametrize("name", [n for n in clp.available_losses() if n != "amcl"])
def test_common_input_errors(name):
    f = clp.build_loss(name)
    with pytest.raises(ValueError, match="same shape"):
        f(_z(4), _z(5))
    with pytest.raises(TypeError, match="dtype"):
        f(_z(), _z().double())
    with pytest.raises(ValueError, match="NaN or inf"):
        f(torch.full((4, 3), float("nan")), _z())
    z = _z()
    z[2] = 0
    with pytest.raises(ValueError, match="all-zero rows \\[2\\]"):
        f(_z(), z)
    with pytest.raises(ValueError, match="at least 2"):  # a batch of one: refused on request (its loss is 0)
        clp.build_loss(name, strict=True)(_z(1), _z(1))
    with pytest.raises(TypeError, match="torch.Tensor"):
        f([[1.0, 2.0]], _z())
    with pytest.raises(ValueError, match="\\[N, D\\]"):
        f(torch.randn(4, 3, 2), torch.randn(4, 3, 2))
    with pytest.raises(TypeError, match="floating"):
        f(torch.ones(4, 3, dtype=torch.long), torch.ones(4, 3, dtype=torch.long))


def test_device_mismatch_is_named():
    meta = torch.empty(4, 3, device="meta")
    with pytest.raises(ValueError, match="device|meta"):
        clp.validation.check_same(_z(), meta, ("z1", "z2"))


def test_from_similarity_errors():
    f = clp.build_loss("infonce")
    sim = torch.rand(3, 4) * 2 - 1
    pos = torch.zeros(3, 4, dtype=torch.bool)
    pos[:, 0] = True
    with pytest.raises(ValueError, match="rows \\[1\\] of pos_mask have no positive"):
        p = pos.clone()
        p[1, 0] = False
        f.from_similarity(sim, p)
    with pytest.raises(ValueError, match="no negative; refused under strict=True"):
        neg = ~pos
        neg[2] = False
        clp.build_loss("infonce", strict=True).from_similarity(sim, pos, neg)
    with pytest.raises(ValueError, match="overlap"):
        f.from_similarity(sim, pos, torch.ones(3, 4, dtype=torch.bool))
    with pytest.raises(TypeError, match="torch.bool"):
        f.from_similarity(sim, pos.int())
    with pytest.raises(ValueError, match="shape of sim"):
        f.from_similarity(sim, pos[:2])
    with pytest.raises(ValueError, match="not logits"):
        f.from_similarity(sim / 0.1, pos)
    with pytest.raises(ValueError, match="NaN or inf"):
        f.from_similarity(torch.full((3, 4), float("nan")), pos)


def test_unknown_name_lists_valid_ones():
    with pytest.raises(ValueError, match="valid names are: amcl, cosine_schedule"):
        clp.build_loss("infonec")


def test_unknown_argument_lists_accepted_ones():
    with pytest.raises(TypeError, match="accepts: tau"):
        clp.build_loss("infonce", temperature=0.1)


@pytest.mark.parametrize(
    "name,kwargs,match",
    [
        ("infonce", dict(tau=0.0), "tau must be a finite number > 0"),
        ("infonce", dict(tau=-0.1), "tau must"),
        ("infonce", dict(tau=float("nan")), "tau must"),
        ("dcl", dict(tau=0), "tau must"),
        ("macl", dict(tau0=0), "tau0 must"),
        ("macl", dict(alpha=-1), "alpha must"),
        ("macl", dict(a0=2.0), "a0"),
        ("macl", dict(min_tau=0), "min_tau must"),
        ("macl", dict(decoupled=True), "reweight"),
        ("dystress", dict(tau_min=0.3, tau_max=0.2), "tau_min .* must not exceed tau_max"),
        ("dystress", dict(tau_min=0), "tau_min must"),
        ("dystress", dict(profile="sine"), "profile must be one of"),
        ("dystress", dict(shift=-0.4), "profile='shifted'"),
        ("dystress", dict(profile="shifted", scale=0), "scale must"),
        ("dual_temperature", dict(tau_beta=0), "tau_beta must"),
        ("dual_temperature", dict(decoupled=True), "decoupled"),
        ("temperature_free", dict(eps=0), "eps must lie in"),
        ("temperature_free", dict(eps=0.7), "eps must lie in"),
        ("learnable", dict(init_tau=0.001, min_tau=0.01), "init_tau"),
        ("cosine_schedule", dict(tau_min=1.0, tau_max=0.5), "must not exceed"),
        ("cosine_schedule", dict(period=0), "period must"),
        ("cosine_schedule", dict(period_unit="epochs"), "period_unit must be one of"),
        ("cosine_schedule", dict(period_unit="epoch", steps_per_epoch=0), "steps_per_epoch must be a positive int"),
        ("cosine_schedule", dict(period_unit="epoch", steps_per_epoch=2.5), "steps_per_epoch must be a positive int"),
        ("amcl", dict(dim=8, form="eq2.1", eta=0), "eta must"),
        ("amcl", dict(dim=8, form="mle", iota=-1), "iota must"),
        ("amcl", dict(dim=8, form="topk", beta=-1), "beta must"),
        ("amcl", dict(dim=8, form="eq2.1", beta=float("nan")), "beta must"),
        ("amcl", dict(dim=8, beta=0.1), "form='anchor' has no beta"),
        ("amcl", dict(dim=8, form="mle", topk=5), "topk belongs to form='topk'"),
        ("amcl", dict(dim=8, form="topk", decoupled=False), "drop decoupled=False"),
        ("amcl", dict(dim=8, tau_range=0.5), "tau_range must"),
        ("amcl", dict(dim=8, tau=0), "tau must"),
        ("macl", dict(alpha=float("inf")), "alpha must"),
        ("macl", dict(a0=float("nan")), "a0 must"),
        ("dystress", dict(profile="shifted", shift=float("nan")), "shift must"),
        ("amcl", dict(dim=0), "dim must"),
        ("amcl", dict(dim=8, form="soft"), "form must be one of"),
        ("amcl", dict(dim=8, layout="queue"), "queue"),
        ("infonce", dict(layout="clip"), "layout must be one of"),
        ("infonce", dict(reduction="avg"), "reduction must be one of"),
        ("dcl", dict(decoupled=False), "decoupled by definition"),
    ],
)
def test_invalid_parameters(name, kwargs, match):
    with pytest.raises((ValueError, TypeError), match=match):
        clp.build_loss(name, **kwargs)


def test_layout_argument_errors():
    with pytest.raises(ValueError, match="needs queue="):
        clp.build_loss("infonce", layout="queue")(_z(), _z())
    with pytest.raises(ValueError, match="already uses both views"):
        clp.build_loss("infonce", symmetric=True)(_z(), _z())
    with pytest.raises(ValueError, match="hard_negatives must have the shape"):
        clp.build_loss("infonce", layout="cross_view")(_z(), _z(), hard_negatives=_z(3))
    with pytest.raises(ValueError, match="queue must have 3 features"):
        clp.build_loss("infonce", layout="queue")(_z(), _z(), queue=_z(10, 5))
    with pytest.raises(ValueError, match="no hard_negatives"):
        clp.build_loss("infonce", layout="cross_view", hard_negative_weight=1.0)(_z(), _z())
    # a batch of one works when hard negatives supply the negative
    out = clp.build_loss("infonce", layout="cross_view")(_z(1), _z(1), hard_negatives=_z(1))
    assert torch.isfinite(out)


def test_amcl_input_errors():
    f = clp.build_loss("amcl", dim=8, heads=1, proj_dim=4, hidden=8)
    with pytest.raises(ValueError, match="h1 must have 8 features"):
        f(_z(4, 5), _z(4, 5))
    with pytest.raises(TypeError, match="backbone features"):
        f.from_similarity(torch.zeros(2, 2), torch.eye(2, dtype=torch.bool))


def test_queue_module():
    q = clp.FeatureQueue(size=5, dim=3)
    keys = torch.randn(3, 3)
    q.enqueue(keys)
    torch.testing.assert_close(q.get()[:3], torch.nn.functional.normalize(keys, dim=1))
    q.enqueue(torch.randn(4, 3))
    assert int(q.ptr) == 2
    fresh = clp.FeatureQueue(size=5, dim=3)
    fresh.load_state_dict(q.state_dict())
    torch.testing.assert_close(fresh.get(), q.get())
    with pytest.raises(ValueError, match="keys must have shape"):
        q.enqueue(torch.randn(2, 4))


@pytest.mark.parametrize(
    ("call", "named"),
    [
        (lambda: clp.build_loss("infonce").from_similarity(torch.rand(4, 6), None), "pos_mask is required"),
        (lambda: clp.FeatureQueue(size=True, dim=8), "size must be an integer >= 1, got True"),
        (lambda: clp.FeatureQueue(size=4, dim=True), "dim must be an integer >= 1, got True"),
        (lambda: clp.FeatureQueue(size=4.0, dim=8), "size must be an integer"),
        (lambda: clp.build_loss("cosine_schedule").step(2.5), "n must be an integer >= 0, got 2.5"),
        (lambda: clp.build_loss("cosine_schedule").step(float("nan")), "n must be an integer >= 0"),
        (lambda: clp.build_loss("cosine_schedule").step(-1), "n must be an integer >= 0, got -1"),
    ],
)  # fmt: skip
def test_edge_arguments_get_one_line_errors(call, named):
    """Cases that used to end in a traceback from inside torch."""
    with pytest.raises((ValueError, TypeError), match=named) as info:
        call()
    assert "\n" not in str(info.value)


def test_sentence_transformers_scale_must_be_a_positive_number():
    pytest.importorskip("sentence_transformers")
    from cl_plugins.integrations.frameworks.sentence_transformers import StrategyRankingLoss

    for scale in (0, -20.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="scale must be a finite number > 0"):
            StrategyRankingLoss(torch.nn.Linear(2, 2), "infonce", scale=scale)


def test_hostile_api_inputs_get_one_line():
    """Tracebacks or lines that named nothing, found by the survey."""
    loss_fn = clp.build_loss("infonce", label_policy="exclude")
    with pytest.raises(ValueError, match="labels is on meta but the features are on cpu") as info:
        loss_fn(_z(), _z(), labels=torch.zeros(4, dtype=torch.long, device="meta"))
    with pytest.raises(ValueError, match=r"sim has no entries \(shape \(0, 4\)\)"):
        clp.build_loss("infonce").from_similarity(torch.empty(0, 4), torch.zeros(0, 4, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"not a macl loss's as built \(missing \[\], unexpected \['log_tau'\]"):
        clp.build_loss("macl").load_state_dict(clp.build_loss("learnable").state_dict())
    small, large = (clp.build_loss("amcl", dim=d) for d in (4, 6))
    with pytest.raises(ValueError, match=r"not a amcl loss's as built .*shapes \['heads.0.0.weight"):
        small.load_state_dict(large.state_dict())
    assert "\n" not in str(info.value)
    clp.build_loss("learnable").load_state_dict(clp.build_loss("learnable", init_tau=0.3).state_dict())  # loads


NOT_BOOLS = ("false", "False", "0", "no", "maybe", 0, 1, 2, 0.5, None)


@pytest.mark.parametrize("name", clp.available_losses())
def test_every_boolean_argument_takes_true_or_false_only(name):
    """Each boolean argument the registry's signatures declare refuses what truthiness would read as a boolean
    ("false" as True), in one line naming it; True and False pass its check."""
    from cl_plugins.registry import flag_arguments

    cls = clp.get_loss_class(name)
    base = {cls.feature_dim_arg: 8} if cls.feature_dim_arg else {}
    flags = flag_arguments(cls)
    assert {"symmetric", "strict", "check_inputs", "gather_distributed", "compile_maps"} <= set(flags)
    for flag in flags:
        optional = flag in ("compile_maps", "decoupled", "share_temperature_mlp")
        for bad in NOT_BOOLS:
            if bad is None and optional:
                continue
            with pytest.raises(ValueError, match=flag) as info:  # flatnce refuses decoupled= whatever its value
                clp.build_loss(name, **base, **{flag: bad})
            assert "\n" not in str(info.value)
        for good in (True, False):
            try:
                clp.build_loss(name, **base, **{flag: good})
            except ValueError as exc:  # another rule of the strategy's may refuse it: not this check
                assert "must be True" not in str(exc)


def test_the_queue_and_the_host_mapping_take_booleans_only():
    for bad in ("false", 1):
        with pytest.raises(ValueError, match="labels must be True or False"):
            clp.FeatureQueue(8, 4, labels=bad)
        with pytest.raises(ValueError, match="gather_distributed must be True or False"):
            clp.FeatureQueue(8, 4, gather_distributed=bad)
        with pytest.raises(ValueError, match="host_decoupled must be True or False"):
            clp.build_host_loss("infonce", host_tau=0.1, host_decoupled=bad)
        with pytest.raises(ValueError, match="keep_host_head must be True or False"):
            clp.owns_projection_head("amcl", keep_host_head=bad)


def test_the_command_line_reads_boolean_words():
    from cl_plugins.integrations.command_line import parse_loss_args

    words = ["reweight=false", "adaptive=No", "strict=TRUE", "symmetric=yes", "detach=1", "tau0=1", "profile=x"]
    assert parse_loss_args(words) == {"reweight": False, "adaptive": False, "strict": True, "symmetric": True,
                                      "detach": 1, "tau0": 1, "profile": "x"}  # fmt: skip
    parsed = parse_loss_args(["detach=1", "strict=0", "tau_min=1"], "dystress")
    assert parsed == {"detach": True, "strict": False, "tau_min": 1} and type(parsed["tau_min"]) is int
    with pytest.raises(ValueError, match="reweight must be True or False, got 'maybe'"):
        clp.build_loss("macl", **parse_loss_args(["reweight=maybe"], "macl"))


def test_a_queue_of_another_size_is_refused_in_one_line():
    with pytest.raises(ValueError, match=r"not a FeatureQueue\(16, 4, labels=False\)'s .*queue \(8, 4\) for \(16, 4\)"):
        clp.FeatureQueue(16, 4).load_state_dict(clp.FeatureQueue(8, 4).state_dict())
    with pytest.raises(ValueError, match="unexpected \\['labels'\\]"):
        clp.FeatureQueue(8, 4).load_state_dict(clp.FeatureQueue(8, 4, labels=True).state_dict())
    clp.FeatureQueue(8, 4).load_state_dict(clp.FeatureQueue(8, 4).state_dict())


@pytest.mark.parametrize("layout", [{"layout": "simclr"}, {"layout": "cross_view", "symmetric": True}])
def test_the_views_in_one_pass_or_one_by_one_give_the_same_loss_and_errors(layout, monkeypatch):
    """Two small views are checked and normalised in one pass over their stacked rows (``layouts.unit_views``),
    larger ones one by one: the same value and gradients, and each error names its view and its rows in it."""

    def run(z1, z2, joined):
        monkeypatch.setattr(layouts, "JOIN_VIEWS_MAX", 1 << 16 if joined else 0)
        z1, z2 = z1.clone().requires_grad_(), z2.clone().requires_grad_()
        value = clp.build_loss("infonce", **layout)(z1 * 1e-20, z2)  # rows of any scale
        return [value, *torch.autograd.grad(value, [z1, z2])]

    z1, z2 = _z(6, 5, dtype=torch.float64), _z(6, 5, dtype=torch.float64)
    for got, want in zip(run(z1, z2, True), run(z1, z2, False), strict=True):
        torch.testing.assert_close(got, want, rtol=1e-14, atol=1e-16)
    bad = _z(6, 5)
    bad[3] = 0
    for joined in (True, False):
        monkeypatch.setattr(layouts, "JOIN_VIEWS_MAX", 1 << 16 if joined else 0)
        loss = clp.build_loss("infonce", **layout)
        with pytest.raises(ValueError, match="z2 has all-zero rows \\[3\\]"):
            loss(_z(6, 5), bad)
        with pytest.raises(ValueError, match="z1 contains NaN"):  # the first view first
            loss(torch.full((6, 5), float("nan")), bad)
