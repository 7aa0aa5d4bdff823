"""The Hugging Face ``Trainer`` adapter on a tiny BERT: InfoNCE parity with a cross-entropy written out, a learned
temperature trained without weight decay, and the per-step hook."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import cl_plugins as clp
from cl_plugins.integrations.modalities.text.testing import make_tiny_bert

pytest.importorskip("transformers")

ROWS = [
    {"anchor": "the man plays music", "positive": "a man sings", "negative": "the cat sits"},
    {"anchor": "a dog runs in the city", "positive": "the dog walks", "negative": "she reads a book"},
    {"anchor": "the woman cooks food", "positive": "a mother cooks", "negative": "a red car"},
    {"anchor": "the boy swims in the river", "positive": "a child swims", "negative": "the old house"},
]


@pytest.fixture(scope="module")
def bert_dir(tmp_path_factory):
    return make_tiny_bert(tmp_path_factory.mktemp("hf_trainer") / "bert", dropout=0.0)


def _model_and_tokenizer(bert_dir):
    from transformers import AutoModel, AutoTokenizer

    torch.manual_seed(0)
    return AutoModel.from_pretrained(bert_dir), AutoTokenizer.from_pretrained(bert_dir)


@pytest.mark.parametrize("with_negative", [False, True])
def test_infonce_equals_cross_entropy_over_scaled_cosines(bert_dir, with_negative, device):
    from cl_plugins.integrations.frameworks.hf_trainer import StrategyLossFunc, ViewCollator

    model, tokenizer = _model_and_tokenizer(bert_dir)
    model = model.double().to(device)  # pytest --device cuda: on the GPU
    rows = ROWS if with_negative else [{k: r[k] for k in ("anchor", "positive")} for r in ROWS]
    batch = {k: v.to(device) for k, v in ViewCollator(tokenizer)(rows).items()}
    labels = batch.pop("labels")
    outputs = model(**batch)
    ours = StrategyLossFunc("infonce", host_tau=0.05)(outputs, labels)
    z = F.normalize(outputs.last_hidden_state[:, 0], dim=-1)
    a, candidates = z[labels == 0], z[labels != 0]  # positives, then the hard negatives
    expected = F.cross_entropy(a @ candidates.T / 0.05, torch.arange(len(a), device=device))
    torch.testing.assert_close(ours, expected, rtol=1e-12, atol=1e-12)
    params = [p for name, p in model.named_parameters() if not name.startswith("pooler.")]  # [CLS] skips the pooler
    for g1, g2 in zip(torch.autograd.grad(ours, params, retain_graph=True), torch.autograd.grad(expected, params)):
        torch.testing.assert_close(g1, g2, rtol=1e-9, atol=1e-12)


def _train(bert_dir, tmp_path, loss: str, steps: int = 3, batch: int = 4, accumulate: int = 1, **loss_args):
    from transformers import Trainer, TrainingArguments

    from cl_plugins.integrations.frameworks.hf_trainer import (
        StrategyLossFunc,
        StrategyTrainerCallback,
        ViewCollator,
        strategy_optimizer,
    )

    model, tokenizer = _model_and_tokenizer(bert_dir)
    loss_func = StrategyLossFunc(loss, host_tau=0.05, **loss_args).attach(model)
    args = TrainingArguments(output_dir=str(tmp_path), per_device_train_batch_size=batch, max_steps=steps,
                             gradient_accumulation_steps=accumulate,
                             learning_rate=1e-2, weight_decay=0.1, remove_unused_columns=False, report_to=[],
                             save_strategy="no", logging_steps=1, use_cpu=True)  # fmt: skip
    optimizer = strategy_optimizer(model, args)
    trainer = Trainer(model=model, args=args, train_dataset=ROWS, data_collator=ViewCollator(tokenizer),
                      compute_loss_func=loss_func, optimizers=(optimizer, None),
                      callbacks=[StrategyTrainerCallback()])  # fmt: skip
    trainer.train()
    return loss_func.loss_fn, optimizer


def test_a_learned_temperature_trains_without_weight_decay(bert_dir, tmp_path):
    loss_fn, optimizer = _train(bert_dir, tmp_path, "learnable")
    group = next(g for g in optimizer.param_groups if any(p is loss_fn.log_tau for p in g["params"]))
    assert group["weight_decay"] == 0.0
    assert float(loss_fn.log_tau.detach()) != pytest.approx(float(torch.log(torch.tensor(0.05))))


def test_the_per_step_hook_runs(bert_dir, tmp_path):
    loss_fn, _ = _train(bert_dir, tmp_path, "cosine_schedule", steps=3)
    assert int(loss_fn.step_count) == 3


def test_a_schedule_in_epochs_learns_the_optimizer_steps_of_an_epoch(bert_dir, tmp_path):
    # 4 rows in batches of 1, 3 per step: the Trainer steps after batch 3 and after the short last one
    loss_fn, _ = _train(bert_dir, tmp_path, "cosine_schedule", steps=3, batch=1, accumulate=3, period=4,
                        period_unit="epoch")  # fmt: skip
    assert loss_fn.steps_per_epoch == 2 and int(loss_fn.step_count) == 3
    assert loss_fn.temperature() == pytest.approx(loss_fn.tau_min + 0.5 * (loss_fn.tau_max - loss_fn.tau_min))


def test_views_are_checked(bert_dir):
    from cl_plugins.integrations.frameworks.hf_trainer import StrategyLossFunc, ViewCollator

    _, tokenizer = _model_and_tokenizer(bert_dir)
    with pytest.raises(ValueError, match="'anchor' and 'positive'"):
        ViewCollator(tokenizer)([{"text": "a"}])
    with pytest.raises(ValueError, match="ViewCollator"):
        StrategyLossFunc()(None, None)
    mixed = [{"anchor": "a", "positive": "b"}, {"anchor": "c", "positive": "d", "negative": "e"}]
    for rows in (mixed, mixed[::-1]):  # a hard negative is never dropped, nor a row left without one
        with pytest.raises(ValueError, match=r"rows \[1\] of the batch do not have the views of row 0"):
            ViewCollator(tokenizer)(rows)
    for bad in ([], [{"anchor": "a", "positive": None}]):
        with pytest.raises(ValueError, match="non-empty list of rows|must be a text"):
            ViewCollator(tokenizer)(bad)
    assert clp.get_loss_class("learnable")  # the strategies above exist in the registry


def test_a_label_column_excludes_same_label_rows_from_the_negatives(bert_dir):
    """Rows with an integer ``label``: the collator stacks views and classes, the loss passes each pair's class as
    ``labels=`` (rows 0 and 2 share a class, so neither is the other's negative)."""
    from cl_plugins.integrations.frameworks.hf_trainer import StrategyLossFunc, ViewCollator

    model, tokenizer = _model_and_tokenizer(bert_dir)
    model = model.double()
    rows = [{"anchor": r["anchor"], "positive": r["positive"], "label": c} for r, c in zip(ROWS, (0, 1, 0, 2))]
    batch = ViewCollator(tokenizer)(rows)
    labels = batch.pop("labels")
    assert labels.tolist() == [[0, 0, 0, 0, 1, 1, 1, 1], [0, 1, 0, 2, 0, 1, 0, 2]]
    outputs = model(**batch)
    ours = StrategyLossFunc("macl", host_tau=0.05, label_policy="exclude")(outputs, labels)
    z = outputs.last_hidden_state[:, 0]
    core = clp.build_host_loss("macl", host_tau=0.05, layout="cross_view", label_policy="exclude")
    torch.testing.assert_close(ours, core(z[:4], z[4:], labels=torch.tensor([0, 1, 0, 2])), rtol=1e-12, atol=1e-12)
    unlabelled = StrategyLossFunc("macl", host_tau=0.05)(outputs, labels[0])
    assert abs(float(ours.detach()) - float(unlabelled.detach())) > 1e-6
    supervised = StrategyLossFunc("macl", host_tau=0.05, label_policy="positives_out")(outputs, labels)
    core = clp.build_host_loss("macl", host_tau=0.05, layout="cross_view", label_policy="positives_out")
    torch.testing.assert_close(supervised, core(z[:4], z[4:], labels=torch.tensor([0, 1, 0, 2])), rtol=1e-12,
                               atol=1e-12)  # fmt: skip
    with pytest.raises(ValueError, match="no use for them"):
        StrategyLossFunc("macl", host_tau=0.05)(outputs, labels)
    with pytest.raises(ValueError, match="integer label in every row"):
        ViewCollator(tokenizer)([{**rows[0], "label": "cat"}, rows[1]])
