"""The sentence-transformers adapter against the real ``MultipleNegativesRankingLoss`` and its cached form (value
and every parameter's gradient, with and without a hard-negative column), a learned temperature without weight
decay, and the per-step hook through the trainer."""

from __future__ import annotations

import pytest
import torch

import cl_plugins as clp
from cl_plugins.integrations.modalities.text.testing import make_tiny_bert

pytest.importorskip("sentence_transformers")

ANCHORS = ["the man plays music", "a dog runs in the city", "the woman cooks food", "the boy swims in the river",
           "a girl reads a book", "the old car is red"]  # fmt: skip
POSITIVES = ["a man sings", "the dog walks", "a mother cooks", "a child swims", "she reads", "a red car"]
NEGATIVES = ["the cat sits", "she reads a book", "a red car", "the old house", "a dog runs", "the man walks"]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return make_tiny_bert(tmp_path_factory.mktemp("st") / "bert", dropout=0.0)


def _model(model_dir, device: torch.device | str = "cpu"):
    from sentence_transformers import SentenceTransformer

    torch.manual_seed(0)
    return SentenceTransformer(str(model_dir), device=str(device)).double()


def _features(model, columns):
    def moved(f):
        return {k: v.to(model.device) if isinstance(v, torch.Tensor) else v for k, v in f.items()}

    return [moved(model.preprocess(list(texts))) for texts in columns]


def _value_and_grads(model, loss, columns):
    model.zero_grad()
    value = loss(_features(model, columns), None)
    value.backward()
    return value.detach(), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("cached", [False, True])
@pytest.mark.parametrize("with_negatives", [False, True])
def test_infonce_is_mnrl(model_dir, cached, with_negatives, device):
    from sentence_transformers.sentence_transformer.losses import (
        CachedMultipleNegativesRankingLoss,
        MultipleNegativesRankingLoss,
    )

    from cl_plugins.integrations.frameworks.sentence_transformers import CachedStrategyRankingLoss, StrategyRankingLoss

    columns = [ANCHORS, POSITIVES] + ([NEGATIVES] if with_negatives else [])
    model = _model(model_dir, device)  # pytest --device cuda: on the GPU
    if cached:
        theirs = CachedMultipleNegativesRankingLoss(model, mini_batch_size=2)
        ours = CachedStrategyRankingLoss(model, "infonce", mini_batch_size=2)
    else:
        theirs, ours = MultipleNegativesRankingLoss(model), StrategyRankingLoss(model, "infonce")
    v1, g1 = _value_and_grads(model, theirs, columns)
    v2, g2 = _value_and_grads(model, ours, columns)
    torch.testing.assert_close(v2, v1, rtol=1e-12, atol=1e-12)
    assert g1.keys() == g2.keys() and g1
    for name in g1:
        torch.testing.assert_close(g2[name], g1[name], rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("name", ["macl", "learnable", "dystress", "temperature_free"])
def test_the_cached_loss_equals_the_uncached_one(model_dir, name):
    from cl_plugins.integrations.frameworks.sentence_transformers import CachedStrategyRankingLoss, StrategyRankingLoss

    columns = [ANCHORS, POSITIVES, NEGATIVES]
    model = _model(model_dir)
    plain = StrategyRankingLoss(model, name).double()
    cached = CachedStrategyRankingLoss(model, plain.loss_fn, mini_batch_size=2)  # the same strategy object
    v1, g1 = _value_and_grads(model, plain, columns)
    loss_grads_1 = [p.grad.clone() for p in plain.loss_fn.parameters()]
    plain.loss_fn.zero_grad()
    v2, g2 = _value_and_grads(model, cached, columns)
    torch.testing.assert_close(v2, v1, rtol=1e-12, atol=1e-12)
    for key in g1:
        torch.testing.assert_close(g2[key], g1[key], rtol=1e-9, atol=1e-12)
    for a, b in zip([p.grad for p in plain.loss_fn.parameters()], loss_grads_1):
        torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-12)


def _train(model_dir, tmp_path, name: str, steps: int = 3):
    from sentence_transformers import SentenceTransformerTrainingArguments

    from cl_plugins.integrations.frameworks.sentence_transformers import CachedStrategyRankingLoss, StrategyTrainer

    datasets = pytest.importorskip("datasets")
    model = _model(model_dir).float()
    loss = CachedStrategyRankingLoss(model, name, mini_batch_size=2)
    data = datasets.Dataset.from_dict({"anchor": ANCHORS[:4] * steps, "positive": POSITIVES[:4] * steps})
    args = SentenceTransformerTrainingArguments(output_dir=str(tmp_path), per_device_train_batch_size=4,
                                                max_steps=steps, learning_rate=1e-2, weight_decay=0.1, report_to=[],
                                                save_strategy="no", use_cpu=True)  # fmt: skip
    trainer = StrategyTrainer(model=model, args=args, train_dataset=data, loss=loss)
    trainer.train()
    return loss.loss_fn, trainer


def test_a_learned_temperature_trains_without_weight_decay(model_dir, tmp_path):
    loss_fn, trainer = _train(model_dir, tmp_path, "learnable")
    group = next(g for g in trainer.optimizer.param_groups if any(p is loss_fn.log_tau for p in g["params"]))
    assert group["weight_decay"] == 0.0
    assert float(loss_fn.log_tau.detach()) != pytest.approx(float(torch.log(torch.tensor(0.05))))


def test_the_per_step_hook_runs(model_dir, tmp_path):
    loss_fn, _ = _train(model_dir, tmp_path, "cosine_schedule")
    assert int(loss_fn.step_count) == 3
    assert loss_fn.steps_per_epoch == 3  # 12 rows in batches of 4: told when training begins, for epoch schedules


def test_columns_of_unequal_length_are_refused(model_dir):
    """Row i of every column belongs to anchor i: a shorter column would pair an anchor with another row's text."""
    from cl_plugins.integrations.frameworks.sentence_transformers import StrategyRankingLoss

    loss = StrategyRankingLoss(_model(model_dir), "infonce")
    with pytest.raises(ValueError, match=r"different numbers of rows \[4, 3\]"):
        loss.loss_from_embeddings([torch.randn(4, 8), torch.randn(3, 8)])


def test_strategies_that_need_features_are_refused(model_dir):
    from cl_plugins.integrations.frameworks.sentence_transformers import StrategyRankingLoss

    for name in clp.available_losses():
        if clp.owns_projection_head(name):
            with pytest.raises(ValueError, match="heads on the embeddings"):
                StrategyRankingLoss(_model(model_dir), name)


def _rank(rank, world, model_dir, cached):
    from sentence_transformers.sentence_transformer.losses import (
        CachedMultipleNegativesRankingLoss,
        MultipleNegativesRankingLoss,
    )

    from cl_plugins.integrations.frameworks.sentence_transformers import CachedStrategyRankingLoss, StrategyRankingLoss

    rows = slice(rank * 3, (rank + 1) * 3)
    columns = [ANCHORS[rows], POSITIVES[rows], NEGATIVES[rows]]
    model = _model(model_dir)
    if cached:
        pair = (CachedMultipleNegativesRankingLoss(model, mini_batch_size=2, gather_across_devices=True),
                CachedStrategyRankingLoss(model, "infonce", mini_batch_size=2, gather_across_devices=True))  # fmt: skip
    else:
        pair = (MultipleNegativesRankingLoss(model, gather_across_devices=True),
                StrategyRankingLoss(model, "infonce", gather_across_devices=True))  # fmt: skip
    return [_value_and_grads(model, loss, columns) for loss in pair]


@pytest.mark.distributed
@pytest.mark.parametrize("cached", [False, True])
def test_gather_across_devices_is_mnrl_under_two_processes(model_dir, cached):
    from tests.dist_utils import run_distributed

    for (v1, g1), (v2, g2) in run_distributed(_rank, str(model_dir), cached):
        torch.testing.assert_close(v2, v1, rtol=1e-12, atol=1e-12)
        for name in g1:
            torch.testing.assert_close(g2[name], g1[name], rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("cached", [False, True])
def test_duplicate_texts_are_no_negatives(model_dir, cached):
    """``exclude_duplicates``: "a red car" is anchor 5's positive and also row 2's negative; anchor 5 then does
    not treat that negative as one. Equal to ``from_similarity`` with that column removed by hand; without
    duplicates in the batch it is MNRL's loss."""
    import torch.nn.functional as F
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss

    from cl_plugins.integrations.frameworks.sentence_transformers import CachedStrategyRankingLoss, StrategyRankingLoss

    model = _model(model_dir)
    build = (lambda **kw: CachedStrategyRankingLoss(model, "macl", mini_batch_size=2, **kw)) if cached else (
        lambda **kw: StrategyRankingLoss(model, "macl", **kw))  # fmt: skip
    columns = [ANCHORS, POSITIVES, NEGATIVES]
    value, grads = _value_and_grads(model, build(exclude_duplicates=True), columns)
    with torch.no_grad():
        a, p, n = (model.encode(list(c), convert_to_tensor=True).double() for c in columns)
    sim = F.normalize(a, dim=-1) @ F.normalize(torch.cat([p, n]), dim=-1).T
    pos = torch.eye(6, 12, dtype=torch.bool)
    neg = ~pos
    neg[5, 6 + 2] = False  # NEGATIVES[2] is POSITIVES[5]
    expected = clp.build_host_loss("macl", host_tau=0.05, layout="cross_view").from_similarity(sim, pos, neg)
    torch.testing.assert_close(value, expected.to(value.dtype), rtol=1e-9, atol=1e-9)
    assert abs(float(value) - float(_value_and_grads(model, build(), columns)[0])) > 1e-6
    theirs = _value_and_grads(model, MultipleNegativesRankingLoss(model), [ANCHORS, POSITIVES])
    ours = _value_and_grads(model, StrategyRankingLoss(model, "infonce", exclude_duplicates=True), [ANCHORS, POSITIVES])
    torch.testing.assert_close(ours[0], theirs[0], rtol=1e-12, atol=1e-12)
    assert grads


def _duplicates_rank(rank, world, model_dir):
    from cl_plugins.integrations.frameworks.sentence_transformers import StrategyRankingLoss

    rows = slice(rank * 3, (rank + 1) * 3)
    model = _model(model_dir)
    loss = StrategyRankingLoss(model, "macl", gather_across_devices=True, exclude_duplicates=True)
    return float(_value_and_grads(model, loss, [ANCHORS[rows], POSITIVES[rows], NEGATIVES[rows]])[0])


@pytest.mark.distributed
def test_duplicates_across_processes_are_no_negatives(model_dir):
    """"a red car" is rank 0's negative and rank 1's positive (row 5): the gathered text keys find it."""
    import torch.nn.functional as F

    from tests.dist_utils import run_distributed

    model = _model(model_dir)
    with torch.no_grad():
        a, p, n = (model.encode(list(c), convert_to_tensor=True).double() for c in (ANCHORS, POSITIVES, NEGATIVES))
    sim = F.normalize(a, dim=-1) @ F.normalize(torch.cat([p, n]), dim=-1).T
    pos = torch.eye(6, 12, dtype=torch.bool)
    neg = ~pos
    neg[5, 6 + 2] = False
    loss = clp.build_host_loss("macl", host_tau=0.05, layout="cross_view")
    expected = [float(loss.from_similarity(sim[r], pos[r], neg[r])) for r in (slice(0, 3), slice(3, 6))]
    assert run_distributed(_duplicates_rank, str(model_dir)) == pytest.approx(expected, rel=1e-9)
