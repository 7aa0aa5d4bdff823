"""Make the original SimCSE code (``simcse/models.py``) train with a cl-plugins loss.

SimCSE's ``BertForCL`` / ``RobertaForCL`` call the module-level ``cl_init`` when built and
``cl_forward`` at every training step; :func:`patch_simcse` replaces both (the contract of
``docs/patching.md``)::

    from simcse import models                       # a SimCSE checkout, or PyPI simcse==0.4
    from cl_plugins.integrations.hosts.simcse.patch import patch_simcse
    handle = patch_simcse(models, "macl")           # before train.py builds the model

The loss is built per model with SimCSE's ``--temp`` as the host temperature and registered as
``model.cl_plugins_loss``, so the Trainer's optimizer sees learned temperatures. The replacement
keeps the original signature and behaviour (flattening, pooler, MLP for the ``cls`` pooler, hard
negatives with ``model_args.hard_negative_weight``, which SimCSE ignores for two-sentence batches,
MLM term with ``model_args.mlm_weight``). Under ``torch.distributed`` (training only, as SimCSE)
the loss gathers embeddings; see :func:`cl_plugins.integrations.patching.host_gradient` for the
gradient scale (``global_batch``). ``logits`` of the output is the raw cosine matrix [N, N]
(or [N, 2N] with hard negatives), not divided by a temperature.

:func:`cl_plugins.integrations.modalities.text.cl_forward.enable_modern_transformers` lets the original models be
built on transformers >= 4.30, where their ``cl_init`` calls the removed ``init_weights`` path.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from cl_plugins.arguments import strict_flags
from cl_plugins.integrations.modalities.text.cl_forward import enable_modern_transformers, patch_cl_module
from cl_plugins.integrations.patching import PatchHandle, gathering, host_gradient

__all__ = ["enable_modern_transformers", "patch_simcse"]


def _views(cls: nn.Module, encoder: nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor,
           token_type_ids: torch.Tensor | None, **encoder_args: Any) -> tuple[torch.Tensor, Any]:
    """SimCSE's pooled (and, for ``cls``, projected) views [B, S, H] and the encoder's outputs."""
    batch_size, num_sent, length = input_ids.shape
    hidden_needed = cls.model_args.pooler_type in ("avg_top2", "avg_first_last")
    outputs = encoder(input_ids.view(-1, length), attention_mask=attention_mask, token_type_ids=token_type_ids,
                      output_hidden_states=True if hidden_needed else False, return_dict=True,
                      **encoder_args)  # fmt: skip
    z = cls.pooler(attention_mask, outputs).view(batch_size, num_sent, -1)
    return (cls.mlp(z) if cls.pooler_type == "cls" else z), outputs


def _mlm_loss(cls: nn.Module, encoder: nn.Module, mlm_input_ids: torch.Tensor, mlm_labels: torch.Tensor,
              attention_mask: torch.Tensor, token_type_ids: torch.Tensor | None) -> torch.Tensor:
    """SimCSE's auxiliary MLM cross-entropy (the same flattened mask and token types as the views)."""
    mlm_outputs = encoder(mlm_input_ids.view(-1, attention_mask.shape[-1]), attention_mask=attention_mask,
                          token_type_ids=token_type_ids, return_dict=True)  # fmt: skip
    scores = cls.lm_head(mlm_outputs.last_hidden_state)
    return F.cross_entropy(scores.view(-1, cls.config.vocab_size), mlm_labels.view(-1))


@torch.no_grad()
def _cosines(z1: torch.Tensor, z2: torch.Tensor, z3: torch.Tensor | None) -> torch.Tensor:
    """The logits SimCSE returns for monitoring: cosines of z1 with z2 (and with z3)."""
    n1, n2 = F.normalize(z1.float(), dim=-1), F.normalize(z2.float(), dim=-1)
    logits = n1 @ n2.T
    return logits if z3 is None else torch.cat([logits, n1 @ F.normalize(z3.float(), dim=-1).T], dim=1)


def _forward_with(handle: PatchHandle, global_batch: bool):  # type: ignore[no-untyped-def]
    def cl_forward(cls, encoder, input_ids=None, attention_mask=None, token_type_ids=None, position_ids=None,
                   head_mask=None, inputs_embeds=None, labels=None, output_attentions=None, output_hidden_states=None,
                   return_dict=None, mlm_input_ids=None, mlm_labels=None):  # fmt: skip
        from transformers.modeling_outputs import SequenceClassifierOutput

        return_dict = return_dict if return_dict is not None else cls.config.use_return_dict
        length = input_ids.shape[-1]
        attention_mask = attention_mask.view(-1, length)
        if token_type_ids is not None:
            token_type_ids = token_type_ids.view(-1, length)
        z, outputs = _views(cls, encoder, input_ids, attention_mask, token_type_ids, position_ids=position_ids,
                            head_mask=head_mask, inputs_embeds=inputs_embeds, output_attentions=output_attentions)
        z1, z2 = z[:, 0], z[:, 1]
        z3 = z[:, 2] if z.shape[1] == 3 else None
        loss_fn = handle.loss_of(cls)
        # SimCSE adds the weight only when a hard negative is there
        loss_fn.hard_negative_weight = 0.0 if z3 is None else float(cls.model_args.hard_negative_weight or 0.0)
        with gathering(loss_fn, cls.training):
            loss = host_gradient(loss_fn(z1, z2, hard_negatives=z3), global_batch)
        if mlm_input_ids is not None and mlm_labels is not None:
            mlm = _mlm_loss(cls, encoder, mlm_input_ids, mlm_labels, attention_mask, token_type_ids)
            loss = loss + cls.model_args.mlm_weight * mlm
        logits = _cosines(z1, z2, z3)
        if not return_dict:
            return (loss, logits) + tuple(outputs[2:])
        return SequenceClassifierOutput(
            loss=loss, logits=logits, hidden_states=outputs.hidden_states, attentions=outputs.attentions
        )

    return cl_forward


@strict_flags
def patch_simcse(
    target: ModuleType | nn.Module | None = None,
    loss: str | nn.Module = "infonce",
    *,
    global_batch: bool = False,
    **loss_args: Any,
) -> PatchHandle:
    """Replace SimCSE's ``cl_init`` and ``cl_forward`` so that the models train with ``loss``.

    Args:
        target: SimCSE's ``models`` module (default: the importable ``simcse.models``), or a
            ``BertForCL`` / ``RobertaForCL`` already built (it gets its loss at once).
        loss: a registry name (built per model: host τ = ``model_args.temp``, ``cross_view``
            layout, AMCL on the hidden size) or a built ``cross_view`` loss (shared).
        global_batch: under ``torch.distributed``, the exact global-batch gradient instead of
            SimCSE's own 1/W scale (default: False, SimCSE's scale).
        **loss_args: the strategy's parameters (they win over the host mapping).

    Returns:
        a :class:`~cl_plugins.integrations.patching.PatchHandle`.
    """
    return patch_cl_module("patch_simcse", target, "simcse.models", loss, "temp",
                           lambda handle: _forward_with(handle, global_batch), loss_args)  # fmt: skip
