"""Make the original SimCSE code (``simcse.models``) train with a cl-plugins loss.

SimCSE's ``BertForCL`` / ``RobertaForCL`` call the module-level ``simcse.models.cl_forward`` at
run time, so replacing that function switches every model, existing ones included::

    from integrations.simcse.patch import patch_simcse
    import cl_plugins as clp

    handle = patch_simcse(clp.build_loss("macl", tau0=0.05, alpha=2.0, a0=0.8, layout="cross_view"))
    ...  # train with SimCSE's models as before
    handle.undo()

The replacement keeps the original signature and behaviour (flattening, pooler, MLP for the
``cls`` pooler, hard negatives with ``model_args.hard_negative_weight``, MLM term with
``model_args.mlm_weight``). Under ``torch.distributed`` the loss gathers embeddings itself, with
gradient through every rank's rows (the original kept gradient only for local rows).
``logits`` of the output is the raw cosine matrix [N, N] (or [N, 2N] with hard negatives).

:func:`enable_modern_transformers` lets the original models be built on transformers >= 4.30,
where their ``cl_init`` calls the removed ``init_weights`` path.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn


def _forward_with(loss_fn: nn.Module):  # type: ignore[no-untyped-def]
    def cl_forward(
        cls,
        encoder,
        input_ids=None,
        attention_mask=None,
        token_type_ids=None,
        position_ids=None,
        head_mask=None,
        inputs_embeds=None,
        labels=None,
        output_attentions=None,
        output_hidden_states=None,
        return_dict=None,
        mlm_input_ids=None,
        mlm_labels=None,
    ):
        from transformers.modeling_outputs import SequenceClassifierOutput

        return_dict = return_dict if return_dict is not None else cls.config.use_return_dict
        batch_size, num_sent, length = input_ids.shape
        attention_mask = attention_mask.view(-1, length)
        if token_type_ids is not None:
            token_type_ids = token_type_ids.view(-1, length)
        hidden_needed = cls.model_args.pooler_type in ("avg_top2", "avg_first_last")
        outputs = encoder(
            input_ids.view(-1, length),
            attention_mask=attention_mask,
            token_type_ids=token_type_ids,
            position_ids=position_ids,
            head_mask=head_mask,
            inputs_embeds=inputs_embeds,
            output_attentions=output_attentions,
            output_hidden_states=True if hidden_needed else False,
            return_dict=True,
        )
        z = cls.pooler(attention_mask, outputs).view(batch_size, num_sent, -1)
        if cls.pooler_type == "cls":
            z = cls.mlp(z)
        z1, z2 = z[:, 0], z[:, 1]
        z3 = z[:, 2] if num_sent == 3 else None
        loss_fn.hard_negative_weight = float(getattr(cls.model_args, "hard_negative_weight", 0.0) or 0.0)
        loss = loss_fn(z1, z2, hard_negatives=z3)
        if mlm_input_ids is not None and mlm_labels is not None:
            mlm_outputs = encoder(
                mlm_input_ids.view(-1, length),
                attention_mask=attention_mask,
                token_type_ids=token_type_ids,
                return_dict=True,
            )
            scores = cls.lm_head(mlm_outputs.last_hidden_state)
            mlm_loss = F.cross_entropy(scores.view(-1, cls.config.vocab_size), mlm_labels.view(-1))
            loss = loss + cls.model_args.mlm_weight * mlm_loss
        with torch.no_grad():
            n1, n2 = F.normalize(z1.float(), dim=-1), F.normalize(z2.float(), dim=-1)
            logits = n1 @ n2.T
            if z3 is not None:
                logits = torch.cat([logits, n1 @ F.normalize(z3.float(), dim=-1).T], dim=1)
        if not return_dict:
            return (loss, logits) + tuple(outputs[2:])
        return SequenceClassifierOutput(
            loss=loss, logits=logits, hidden_states=outputs.hidden_states, attentions=outputs.attentions
        )

    cl_forward.loss_fn = loss_fn  # type: ignore[attr-defined]
    return cl_forward


@dataclass
class PatchHandle:
    module: Any
    original: Any

    def undo(self) -> None:
        self.module.cl_forward = self.original


def patch_simcse(loss_fn: nn.Module, module: Any = None) -> PatchHandle:
    """Replace ``simcse.models.cl_forward`` by one that uses ``loss_fn`` (a ``cross_view`` loss).

    ``module`` defaults to the importable ``simcse.models`` (PyPI ``simcse==0.4`` or a checkout).
    Returns a handle whose ``undo()`` restores the original.
    """
    if getattr(loss_fn, "layout", "cross_view") != "cross_view":
        raise ValueError(
            f"SimCSE contrasts z1 against z2 in one direction: build the loss with "
            f"layout='cross_view' (got {loss_fn.layout!r})"
        )
    if module is None:
        import simcse.models as module  # noqa: PLC0415
    handle = PatchHandle(module, module.cl_forward)
    module.cl_forward = _forward_with(loss_fn)
    return handle


def enable_modern_transformers(module: Any = None) -> None:
    """Let SimCSE's ``cl_init`` run on transformers >= 4.30 (it calls ``init_weights`` instead of
    ``post_init``): skip that call and run ``post_init`` instead. Idempotent."""
    if module is None:
        import simcse.models as module  # noqa: PLC0415
    if getattr(module.cl_init, "_cl_plugins_shim", False):
        return
    original = module.cl_init

    def cl_init(cls, config):  # type: ignore[no-untyped-def]
        saved = cls.init_weights
        cls.init_weights = lambda: None
        try:
            original(cls, config)
        finally:
            cls.init_weights = saved
        cls.post_init()

    cl_init._cl_plugins_shim = True  # type: ignore[attr-defined]
    module.cl_init = cl_init
