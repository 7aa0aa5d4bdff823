"""A sentence encoder for evaluation: ``encoder(sentences) -> np.ndarray``, a padding-free variant, and the
fingerprint that keys its cached embeddings (:mod:`cl_plugins.integrations.senteval.embedding_cache`)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
import torch

from cl_plugins.integrations.senteval.embedding_cache import model_fingerprint

from .model import SimCSEModel

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
