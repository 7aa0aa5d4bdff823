"""Put a cl-plugins strategy into the original MABEL code (``training/model.py``).

MABEL's ``BertForMabel`` calls the module-level ``cl_init`` when built and ``cl_forward`` at every
training step; :func:`patch_mabel` replaces both (the contract of ``docs/patching.md``):

.. code-block:: python

    import model as mabel_model                              # MABEL's training/model.py
    from cl_plugins.integrations.hosts.mabel.patch import patch_mabel
    from cl_plugins.integrations.modalities.text.cl_forward import enable_modern_transformers
    enable_modern_transformers(mabel_model)                  # transformers >= 4.30 (MABEL's cl_init)
    handle = patch_mabel(mabel_model, "temperature_free")    # before train.py builds the model

MABEL's ``ModelArguments`` has no ``temp``: ``softmax_temp`` is the temperature of the contrastive
and of the alignment term, ``align_temp`` the alignment term's *weight*. The strategy takes
``softmax_temp`` as its host temperature and is registered as ``model.cl_plugins_loss``. The a1
alignment term keeps a constant temperature, ``align_tau`` (default: ``softmax_temp``, which makes
the patch equal MABEL's loss for ``infonce``): swapping the strategy there would rescale the term
(it grows as 1/τ²), and temperature-free has no τ at all. The MLM term is MABEL's. The six-sentence
variant with hard negatives and the ``a2`` / ``a3`` alignment variants (not used in the paper) raise
``NotImplementedError``. Under ``torch.distributed`` (training only, as MABEL) both terms see the
global batch; see :func:`cl_plugins.integrations.patching.host_gradient` for ``global_batch``.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

import cl_plugins as clp
from cl_plugins.arguments import strict_flags
from cl_plugins.integrations.hosts.mabel.model import alignment_loss
from cl_plugins.integrations.modalities.text.cl_forward import patch_cl_module
from cl_plugins.integrations.patching import PatchHandle, gathering, host_gradient


def _embed(cls: nn.Module, encoder: nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor,
           token_type_ids: torch.Tensor | None, k: int) -> torch.Tensor:  # fmt: skip
    kwargs: dict[str, Any] = dict(input_ids=input_ids[:, k], attention_mask=attention_mask[:, k], return_dict=True)
    if token_type_ids is not None:
        kwargs["token_type_ids"] = token_type_ids[:, k]
    z = cls.pooler(attention_mask[:, k], encoder(**kwargs))
    return cls.mlp(z) if cls.pooler_type == "cls" else z


def _mlm_loss(cls: nn.Module, encoder: nn.Module, mlm_input_ids: torch.Tensor, mlm_labels: torch.Tensor,
              attention_mask: torch.Tensor, token_type_ids: torch.Tensor | None,
              **encoder_kwargs: Any) -> torch.Tensor:  # fmt: skip
    length = mlm_input_ids.size(-1)
    out = encoder(mlm_input_ids.view(-1, length), attention_mask=attention_mask.view(-1, length),
                  token_type_ids=None if token_type_ids is None else token_type_ids.view(-1, length),
                  return_dict=True, **encoder_kwargs)  # fmt: skip
    scores = cls.lm_head(out.last_hidden_state)
    return F.cross_entropy(scores.view(-1, cls.config.vocab_size), mlm_labels.reshape(-1))


@strict_flags
def make_cl_forward(handle: PatchHandle, global_batch: bool = False, align_tau: float | None = None) -> Any:
    """A drop-in for MABEL's ``cl_forward`` that takes its contrastive loss from ``handle``."""

    def cl_forward(cls: nn.Module, encoder: nn.Module, input_ids: torch.Tensor | None = None,
                   attention_mask: torch.Tensor | None = None, token_type_ids: torch.Tensor | None = None,
                   position_ids: Any = None, head_mask: Any = None, inputs_embeds: Any = None, labels: Any = None,
                   output_attentions: Any = None, output_hidden_states: Any = None, return_dict: Any = None,
                   mlm_input_ids: torch.Tensor | None = None, mlm_labels: torch.Tensor | None = None,
                   linear: Any = None, bin_mask: Any = None) -> Any:  # fmt: skip
        from transformers.modeling_outputs import SequenceClassifierOutput

        args = cls.model_args
        if input_ids is None or attention_mask is None or input_ids.size(1) != 4:
            raise NotImplementedError("the patch covers MABEL's 4-sentence batches (no hard negatives)")
        if args.a2_loss or args.a3_loss:
            raise NotImplementedError("the patch covers MABEL's a1 alignment term only")
        views = [_embed(cls, encoder, input_ids, attention_mask, token_type_ids, k) for k in range(4)]
        orig_z0, orig_z1, aug_z0, aug_z1 = views
        total = None
        if args.cl_loss:
            fn = handle.loss_of(cls)
            with gathering(fn, cls.training):
                total = fn(torch.cat([orig_z0, aug_z0]), torch.cat([orig_z1, aug_z1]))
        if args.a1_loss:
            if cls.training:  # MABEL gathers in training only
                views = [clp.gather_with_grad(v)[0] for v in views]
            align = alignment_loss(*views, temperature=float(align_tau or args.softmax_temp))
            total = align if total is None else total + args.align_temp * align  # align_temp: the weight
        if total is not None:
            total = host_gradient(total, global_batch)
        if mlm_input_ids is not None and mlm_labels is not None:
            mlm = args.mlm_weight * _mlm_loss(
                cls, encoder, mlm_input_ids, mlm_labels, attention_mask, token_type_ids, position_ids=position_ids,
                head_mask=head_mask, inputs_embeds=inputs_embeds, output_attentions=output_attentions,
            )  # fmt: skip
            total = mlm if total is None else total + mlm
        return SequenceClassifierOutput(loss=total, hidden_states=None, attentions=None)

    return cl_forward


@strict_flags
def patch_mabel(
    target: ModuleType | nn.Module,
    loss: str | nn.Module = "infonce",
    *,
    global_batch: bool = False,
    align_tau: float | None = None,
    **loss_args: Any,
) -> PatchHandle:
    """Replace MABEL's ``cl_init`` and ``cl_forward`` so that its models train with ``loss``.

    Args:
        target: MABEL's ``training/model.py`` module, or a ``BertForMabel`` already built (it gets
            its loss at once).
        loss: a registry name (built per model: host τ = ``model_args.softmax_temp``,
            ``cross_view`` layout, AMCL on the hidden size) or a built ``cross_view`` loss (shared).
        global_batch: under ``torch.distributed``, the exact global-batch gradient instead of
            MABEL's own 1/W scale (default: False, MABEL's scale).
        align_tau: the a1 alignment term's constant temperature (default: ``softmax_temp``).
        **loss_args: the strategy's parameters (they win over the host mapping).
    """
    return patch_cl_module("patch_mabel", target, None, loss, "softmax_temp",
                           lambda handle: make_cl_forward(handle, global_batch, align_tau), loss_args)  # fmt: skip
