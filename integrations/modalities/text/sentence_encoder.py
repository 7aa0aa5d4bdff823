"""A sentence encoder for evaluation: ``encoder(sentences) -> np.ndarray``, a padding-free variant, its loading
from a saved folder (:func:`load_encoder`), and the fingerprint that keys its cached embeddings
(:mod:`cl_plugins.integrations.evaluation.senteval.embedding_cache`)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import torch

from cl_plugins.integrations.evaluation.senteval.embedding_cache import model_fingerprint
from cl_plugins.integrations.modalities.text.config import POOLERS
from cl_plugins.integrations.modalities.text.encoder import HEAD_WEIGHTS, SimCSEModel, check_model_path, pretrained
from cl_plugins.integrations.runs import saved_model

#: tokens per batch of :meth:`SentenceEncoder.encode_unpadded` (rows = this // sentence length)
UNPADDED_TOKENS = 8192


@dataclass
class SentenceEncoder:
    """Embeddings of a :class:`SimCSEModel` in eval mode, as SimCSE's evaluation batcher computes them.

    Args:
        model: the model (its pooler and MLP rule decide the embedding).
        tokenizer: its tokenizer.
        batch_size: sentences per forward pass of :meth:`__call__` (default: 128, SentEval's).
        max_length: truncate to this many tokens (default: None, no truncation, as SimCSE).
        settings: what else decides the embedding (pooler, head), recorded in the fingerprint.
    """

    model: SimCSEModel
    tokenizer: Any
    batch_size: int = 128
    max_length: int | None = None
    settings: dict[str, Any] = field(default_factory=dict)

    def __call__(self, sentences: Sequence[str]) -> np.ndarray:
        with torch.inference_mode():
            out = self.model.encode(list(sentences), self.tokenizer, batch_size=self.batch_size,
                                    max_length=self.max_length)  # fmt: skip
        return out.numpy()

    def encode_unpadded(self, sentences: Sequence[str]) -> np.ndarray:
        """Embeddings computed in batches of equal token count, so no sentence is padded, in a canonical order
        (token count, then text): the same set of sentences gives the same bits in any input order. Against another
        batch composition an embedding can differ in its last bits (the matrix kernels depend on the batch shape),
        the order of SentEval's own padding noise."""
        sentences = list(sentences)
        # tokenised once: within a batch of equal token count the ids stack without padding
        tokens = self.tokenizer(sentences, truncation=self.max_length is not None, max_length=self.max_length)
        by_length: dict[int, list[int]] = defaultdict(list)
        for i, ids in enumerate(tokens["input_ids"]):
            by_length[len(ids)].append(i)
        out = np.zeros((len(sentences), self.model.encoder.config.hidden_size), dtype=np.float32)
        device = next(self.model.parameters()).device
        was_training = self.model.training
        self.model.eval()
        with torch.inference_mode():
            for length, rows in sorted(by_length.items()):
                rows = sorted(rows, key=sentences.__getitem__)
                step = max(1, UNPADDED_TOKENS // length)
                for start in range(0, len(rows), step):
                    chunk = rows[start : start + step]
                    batch = {k: torch.tensor([v[i] for i in chunk], device=device) for k, v in tokens.items()}
                    emb = self.model.embed(batch["input_ids"], batch["attention_mask"], batch.get("token_type_ids"))
                    out[chunk] = emb.float().cpu().numpy()
        self.model.train(was_training)
        return out

    @cached_property
    def fingerprint(self) -> str:
        """Hash of the weights, tokenizer and every setting above (the embedding cache's key)."""
        return model_fingerprint(self.model, self.tokenizer, batch_size=self.batch_size, max_length=self.max_length,
                                 **self.settings)  # fmt: skip


#: the trainers whose saved models are sentence encoders
TEXT_TRAINERS = ("simcse", "mabel")


class _NoLoss(torch.nn.Module):
    def forward(self, *args: Any, **kwargs: Any) -> torch.Tensor:
        raise RuntimeError("this model was loaded for evaluation only")


def load_encoder(
    path: str | Path,
    pooler: str | None = None,
    batch_size: int = 128,
    max_length: int | None = None,
    device: str = "cpu",
) -> SentenceEncoder:
    """An ``encode(list[str]) -> np.ndarray`` callable for the model in ``path`` (with a cache fingerprint)."""
    from transformers import AutoModel, AutoTokenizer

    settings = trained_settings(Path(path))
    check_model_path(str(path))
    path = Path(path)
    chosen = pooler or settings.get("pooler", "cls_before_pooler")
    if chosen not in POOLERS:
        raise ValueError(f"--pooler must be one of {list(POOLERS)}, got {chosen!r}")
    head = settings.get("head", "simcse")
    model = SimCSEModel(pretrained(AutoModel, path), _NoLoss(), pooler=chosen,
                        mlp_only_train=settings.get("mlp_only_train", False), head=head)  # fmt: skip
    if model.mlp is not None:
        if not (path / HEAD_WEIGHTS).exists():
            raise FileNotFoundError(f"pooler 'cls' needs the head {path / HEAD_WEIGHTS}; use --pooler "
                                    "cls_before_pooler for a checkpoint without one")  # fmt: skip
        weights = saved_model.read_weights(path / HEAD_WEIGHTS, "sentence encoder's head")
        saved_model.load_into(model.mlp, weights, path / HEAD_WEIGHTS, f"{head} head")
    model.to(device).eval()
    tokenizer = pretrained(AutoTokenizer, path)
    settings = {"pooler": chosen, "mlp_only_train": model.mlp_only_train, "head": head}
    return SentenceEncoder(model, tokenizer, batch_size, max_length, settings)


def trained_settings(path: Path) -> dict[str, Any]:
    """The pooler and head a folder of our text trainers was trained with; {} for any other Hugging Face folder."""
    if not saved_model.is_saved_model(path):
        return {}
    return saved_model.read_info(path, TEXT_TRAINERS, "sentence encoder").model
