"""patch_mabel on the real MABEL ``training/model.py`` with its real ``ModelArguments`` (pinned commit).

Float64, tiny random BERT, dropout off: with ``infonce`` at ``softmax_temp`` the patched model's loss and
every parameter gradient equal the unpatched model's for the contrastive term, the a1 alignment term,
both (weighted by ``align_temp``) and MLM.
"""

from __future__ import annotations

import pytest
import torch

import cl_plugins as clp
from tests.integrations import upstream

transformers = pytest.importorskip("transformers")

from cl_plugins.integrations.hosts.mabel.patch import patch_mabel  # noqa: E402
from cl_plugins.integrations.modalities.text.cl_forward import enable_modern_transformers  # noqa: E402


def make_model(pooler="cls", seed=0, **args):
    module = upstream.mabel()
    enable_modern_transformers(module)
    config = transformers.BertConfig(
        vocab_size=60, hidden_size=24, num_hidden_layers=2, num_attention_heads=2, intermediate_size=32,
        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, max_position_embeddings=32,
    )  # fmt: skip
    model_args = upstream.mabel_model_arguments()(model_name_or_path=None, pooler_type=pooler, **args)
    torch.manual_seed(seed)
    return module.BertForMabel(config, model_args=model_args).double().train()


def make_batch(seed=1, batch=5, length=9):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, 60, (batch, 4, length), generator=g)
    mask = torch.ones_like(ids)
    mask[:, :, 7:] = 0
    mask[1, :, 4:] = 0
    labels = torch.full_like(ids, -100)
    labels[:, :, 2] = ids[:, :, 2]
    mlm_ids = ids.clone()
    mlm_ids[:, :, 2] = 3
    return dict(input_ids=ids, attention_mask=mask), dict(mlm_input_ids=mlm_ids, mlm_labels=labels)


def loss_and_grads(model, batch):
    loss = model(**batch).loss
    params = [p for n, p in model.named_parameters() if not n.startswith("cl_plugins_loss.")]
    return loss.detach(), torch.autograd.grad(loss, params, allow_unused=True)


TERMS = {
    "contrastive": dict(cl_loss=True),
    "a1": dict(a1_loss=True),
    "contrastive+a1": dict(cl_loss=True, a1_loss=True, align_temp=0.3),
    "contrastive+a1+mlm": dict(cl_loss=True, a1_loss=True, do_mlm=True, mlm_weight=0.2),
}


@pytest.mark.parametrize("terms", list(TERMS))
@pytest.mark.parametrize("pooler", ["cls", "cls_before_pooler", "avg"])  # MABEL's avg_top2 / avg_first_last
def test_infonce_patch_reproduces_mabel(terms, pooler):  # never request hidden states: they fail upstream
    args = dict(TERMS[terms], softmax_temp=0.07)
    model = make_model(pooler, **args)
    batch, mlm = make_batch()
    batch = {**batch, **mlm} if args.get("do_mlm") else batch
    loss_o, grads_o = loss_and_grads(model, batch)
    with patch_mabel(model, "infonce"):
        assert model.cl_plugins_loss.tau == 0.07  # softmax_temp is the host τ (MABEL has no `temp`)
        loss_p, grads_p = loss_and_grads(model, batch)
    torch.testing.assert_close(loss_p, loss_o, rtol=1e-10, atol=1e-12)
    for a, b in zip(grads_p, grads_o, strict=True):
        assert (a is None) == (b is None)
        if a is not None:
            torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)


def test_model_built_after_the_patch_and_undo():
    module = upstream.mabel()
    enable_modern_transformers(module)
    before = (module.cl_forward, module.cl_init)
    batch, _ = make_batch()
    reference = make_model(cl_loss=True, a1_loss=True)(**batch).loss
    handle = patch_mabel(module, "infonce")
    model = make_model(cl_loss=True, a1_loss=True)
    assert isinstance(model.cl_plugins_loss, clp.InfoNCELoss)
    torch.testing.assert_close(model(**batch).loss, reference, rtol=1e-10, atol=1e-12)
    handle.undo()
    assert (module.cl_forward, module.cl_init) == before and not hasattr(model, "cl_plugins_loss")


def test_other_strategies_and_refusals():
    model = make_model(cl_loss=True, a1_loss=True)
    batch, _ = make_batch()
    with patch_mabel(model, "temperature_free"):
        free = model(**batch).loss
    assert torch.isfinite(free)
    with pytest.raises(TypeError, match="cl_init"):
        patch_mabel(torch.nn.Linear(2, 2))
    hard = make_model(cl_loss=True, a2_loss=True)
    with patch_mabel(hard, "infonce"), pytest.raises(NotImplementedError, match="a1"):
        hard(**batch)
