"""The sentence-transformers description of a saved text encoder, so that ``SentenceTransformer(path)`` embeds
sentences exactly as our evaluator does: with the pooler (and head) the model was trained and evaluated with.

Written by hand (no sentence-transformers needed to train or save) in the layout sentence-transformers reads:
``modules.json``, ``sentence_bert_config.json`` and one folder per module after the transformer.

=====================================  ==========================================================
evaluation pooler                      modules
=====================================  ==========================================================
``cls_before_pooler``; ``cls`` whose   ``Pooling("cls")``
head is used only in training
``cls`` with SimCSE's head             ``Pooling("cls")``, ``Dense(tanh)``
``cls`` with MABEL's head              ``Pooling("cls")``, ``Dense(tanh)``, ``Dense(identity)``
``avg``                                ``Pooling("mean")``
``avg_top2``                           ``WeightedLayerPooling`` (last two layers, equal weights), ``Pooling("mean")``
``avg_first_last``                     ``WeightedLayerPooling`` (embeddings and last layer), ``Pooling("mean")``
=====================================  ==========================================================

Shapes:
    the head's ``Linear`` layers are [H, H]; ``WeightedLayerPooling``'s weights [num_layers + 1 - start].
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from torch import nn

_TYPES = {name: f"sentence_transformers.models.{name}" for name in ("Transformer", "Pooling", "Dense",
                                                                     "WeightedLayerPooling")}  # fmt: skip
_ACTIVATIONS = {"tanh": "torch.nn.modules.activation.Tanh", "identity": "torch.nn.modules.linear.Identity"}


def _pooling(hidden: int, mode: str) -> tuple[str, dict[str, Any], dict[str, torch.Tensor]]:
    return "Pooling", {"word_embedding_dimension": hidden, "pooling_mode": mode, "include_prompt": True}, {}


def _dense(layer: nn.Linear, activation: str) -> tuple[str, dict[str, Any], dict[str, torch.Tensor]]:
    config = {"in_features": layer.in_features, "out_features": layer.out_features, "bias": True,
              "activation_function": _ACTIVATIONS[activation]}  # fmt: skip
    return "Dense", config, {"linear.weight": layer.weight, "linear.bias": layer.bias}


def _layers(hidden: int, num_layers: int, weights: list[float], start: int) -> tuple[str, dict, dict]:
    config = {"word_embedding_dimension": hidden, "layer_start": start, "num_hidden_layers": num_layers}
    return "WeightedLayerPooling", config, {"layer_weights": torch.tensor(weights)}


def head_layers(head: nn.Module) -> list[tuple[nn.Linear, str]]:
    """A SimCSE (``dense`` + tanh) or MABEL (``dense1`` + tanh, ``dense2``) head as (Linear, activation) steps."""
    if hasattr(head, "dense"):
        return [(head.dense, "tanh")]
    return [(head.dense1, "tanh"), (head.dense2, "identity")]


def modules_after_encoder(pooler: str, head: nn.Module | None, hidden: int, num_layers: int) -> list[tuple]:
    """(type, config, weights) of each module after the transformer, for the evaluation-time ``pooler`` and
    ``head`` (None when the head is not used at evaluation)."""
    if pooler in ("cls", "cls_before_pooler"):
        steps = [_dense(layer, act) for layer, act in head_layers(head)] if head is not None else []
        return [_pooling(hidden, "cls"), *steps]
    if pooler == "avg":
        return [_pooling(hidden, "mean")]
    if pooler == "avg_top2":
        return [_layers(hidden, num_layers, [1.0, 1.0], num_layers - 1), _pooling(hidden, "mean")]
    if pooler == "avg_first_last":
        ends = [1.0] + [0.0] * (num_layers - 1) + [1.0]
        return [_layers(hidden, num_layers, ends, 0), _pooling(hidden, "mean")]
    raise ValueError(f"no sentence-transformers pooling for pooler {pooler!r}")


def write_modules(folder: Path, pooler: str, head: nn.Module | None, encoder_config: Any) -> None:
    """Add the sentence-transformers files to a saved encoder ``folder`` (a Hugging Face model folder)."""
    from cl_plugins.integrations.runs.saved_model import write_weights

    hidden, num_layers = encoder_config.hidden_size, encoder_config.num_hidden_layers
    modules = [{"idx": 0, "name": "0", "path": "", "type": _TYPES["Transformer"]}]
    for idx, (kind, config, weights) in enumerate(modules_after_encoder(pooler, head, hidden, num_layers), 1):
        sub = folder / f"{idx}_{kind}"
        sub.mkdir()
        (sub / "config.json").write_text(json.dumps(config, indent=2))
        if weights:  # in float32 whatever the training precision, the dtype sentence-transformers builds them in
            write_weights({k: v.float() for k, v in weights.items()}, sub / "model.safetensors")
        modules.append({"idx": idx, "name": str(idx), "path": sub.name, "type": _TYPES[kind]})
    (folder / "modules.json").write_text(json.dumps(modules, indent=2))
    layered = pooler in ("avg_top2", "avg_first_last")
    transformer = {"config_kwargs": {"output_hidden_states": True}} if layered else {}
    (folder / "sentence_bert_config.json").write_text(json.dumps(transformer, indent=2))
