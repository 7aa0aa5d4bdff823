"""The SimCSE feasibility run's re-initialisation and verdict rule, on a tiny random BERT."""

from __future__ import annotations

import pytest
import torch

from benchmarks import simcse_reinit


def test_reinit_resets_the_layers_and_keeps_the_embeddings() -> None:
    transformers = pytest.importorskip("transformers")
    config = transformers.BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                                     intermediate_size=32, initializer_range=0.5)  # fmt: skip
    model = transformers.BertModel(config)
    with torch.no_grad():
        for p in model.parameters():
            p.fill_(0.3)
    embeddings = {k: v.clone() for k, v in model.embeddings.state_dict().items()}
    simcse_reinit.reinit_layers(model, config.initializer_range, seed=1)
    assert all(torch.equal(v, embeddings[k]) for k, v in model.embeddings.state_dict().items())
    dense = model.encoder.layer[0].attention.self.query
    assert torch.equal(dense.bias, torch.zeros_like(dense.bias))
    assert dense.weight.std().item() == pytest.approx(0.5, rel=0.2)  # normal(0, initializer_range)
    norm = model.encoder.layer[1].output.LayerNorm
    assert torch.equal(norm.weight, torch.ones_like(norm.weight)) and torch.equal(
        norm.bias, torch.zeros_like(norm.bias)
    )
    again = transformers.BertModel(config)
    simcse_reinit.reinit_layers(again, config.initializer_range, seed=1)
    assert torch.equal(
        again.encoder.layer[1].intermediate.dense.weight, model.encoder.layer[1].intermediate.dense.weight
    )


def test_the_verdict_needs_a_margin_over_the_bag_of_embeddings() -> None:
    levels = {"bag_of_embeddings": 60.0}
    assert simcse_reinit.verdict(levels, 60.0 + simcse_reinit.MARGIN).startswith("runnable")
    assert simcse_reinit.verdict(levels, 61.0).startswith("not runnable here")
    assert simcse_reinit.verdict(levels, 40.0).startswith("not runnable here")
