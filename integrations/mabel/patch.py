"""Put a cl-plugins strategy into the original MABEL code through its module-level ``cl_forward``.

MABEL's ``training/train.py`` imports ``BertForMabel`` from the top-level module ``model``, whose
``forward`` calls the module-global ``cl_forward(cls, encoder, input_ids, ...)``. Replacing that
function swaps the contrastive term while the alignment term keeps a constant τ (swapping only
``cls.c_sim`` would rescale both):

.. code-block:: python

    import model as mabel_model                     # MABEL's training/model.py
    from integrations.mabel.patch import patch_mabel
    patch_mabel(mabel_model, "temperature_free")    # before the Trainer is built

The strategy takes MABEL's ``--temp`` as its host temperature and is registered on the model
as ``cl_plugins_loss`` at its first forward; pass ``model=`` to build it at once (needed for
strategies with parameters, so that the Trainer's optimizer sees them). The alignment term uses
``align_temp`` (default: MABEL's ``--temp``, which makes the patch equal MABEL's loss for
``infonce`` at that τ). The six-sentence variant with hard negatives and the ``a2`` / ``a3``
alignment variants (not used in the paper) raise ``NotImplementedError``.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

import cl_plugins as clp
from integrations.common.host_loss import build_host_loss

from .model import alignment_loss


def _attach(cls: nn.Module, loss: str, loss_args: dict[str, Any]) -> nn.Module:
    if not hasattr(cls, "cl_plugins_loss"):
        args = dict(loss_args)
        if loss == "amcl":
            args.setdefault("dim", cls.config.hidden_size)
        cls.add_module("cl_plugins_loss", build_host_loss(loss, host_tau=float(cls.model_args.temp),
                                                          layout="cross_view", **args))  # fmt: skip
        cls.cl_plugins_loss.to(next(cls.parameters()).device)
    return cls.cl_plugins_loss


def make_cl_forward(loss: str = "infonce", align_temp: float | None = None, **loss_args: Any) -> Callable[..., Any]:
    """A drop-in for MABEL's ``cl_forward`` with the strategy ``loss``."""

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
        if getattr(args, "a2_loss", False) or getattr(args, "a3_loss", False):
            raise NotImplementedError("the patch covers MABEL's a1 alignment term only")

        def embed(k: int) -> torch.Tensor:
            kwargs = dict(input_ids=input_ids[:, k], attention_mask=attention_mask[:, k], return_dict=True)
            if token_type_ids is not None:
                kwargs["token_type_ids"] = token_type_ids[:, k]
            z = cls.pooler(attention_mask[:, k], encoder(**kwargs))
            return cls.mlp(z) if cls.pooler_type == "cls" else z

        orig_z0, orig_z1, aug_z0, aug_z1 = (embed(k) for k in range(4))
        c_loss = a_loss = None
        if args.cl_loss:
            fn = _attach(cls, loss, loss_args)
            c_loss = fn(torch.cat([orig_z0, aug_z0]), torch.cat([orig_z1, aug_z1]))
        if args.a1_loss:
            gathered = [clp.gather_with_grad(t)[0] for t in (orig_z0, orig_z1, aug_z0, aug_z1)]
            a_loss = alignment_loss(*gathered, temperature=float(align_temp or args.temp))
        if c_loss is not None and a_loss is not None:
            total = args.align_temp * a_loss + c_loss  # MABEL's align_temp is the alignment weight
        else:
            total = c_loss if c_loss is not None else a_loss
        if mlm_input_ids is not None and mlm_labels is not None:
            length = mlm_input_ids.size(-1)
            out = encoder(mlm_input_ids.view(-1, length), attention_mask=attention_mask.view(-1, length),
                          token_type_ids=None if token_type_ids is None else token_type_ids.view(-1, length),
                          return_dict=True)  # fmt: skip
            scores = cls.lm_head(out.last_hidden_state)
            mlm = F.cross_entropy(scores.view(-1, cls.config.vocab_size), mlm_labels.view(-1))
            total = args.mlm_weight * mlm if total is None else total + args.mlm_weight * mlm
        return SequenceClassifierOutput(loss=total, hidden_states=None, attentions=None)

    return cl_forward


def patch_mabel(
    module: ModuleType | Any, loss: str = "infonce", *, model: nn.Module | None = None,
    align_temp: float | None = None, **loss_args: Any,
) -> Callable[[], None]:  # fmt: skip
    """Replace ``module.cl_forward`` (MABEL's ``training/model.py``); returns an undo function."""
    if not callable(getattr(module, "cl_forward", None)):
        raise TypeError(f"{module!r} has no cl_forward: pass MABEL's training/model.py module")
    original = module.cl_forward
    module.cl_forward = make_cl_forward(loss, align_temp, **loss_args)
    if model is not None:
        _attach(model, loss, loss_args)

    def undo() -> None:
        module.cl_forward = original

    return undo
