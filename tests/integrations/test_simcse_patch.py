"""The patched original SimCSE (PyPI simcse==0.4) against the unpatched one, on a tiny random BERT."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

import cl_plugins as clp
from tests import reference as ref

simcse_models = pytest.importorskip("simcse.models")
transformers = pytest.importorskip("transformers")

from integrations.simcse.patch import enable_modern_transformers, patch_simcse  # noqa: E402


def _model(pooler="cls", do_mlm=False, hard_negative_weight=0.0):
    enable_modern_transformers()
    config = transformers.BertConfig(
        vocab_size=60,
        hidden_size=24,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=32,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        max_position_embeddings=32,
    )
    args = SimpleNamespace(
        pooler_type=pooler,
        temp=0.05,
        hard_negative_weight=hard_negative_weight,
        do_mlm=do_mlm,
        mlp_only_train=False,
        mlm_weight=0.1,
    )
    torch.manual_seed(0)
    model = simcse_models.BertForCL(config, model_args=args).double()  # parity to ~1e-10, not fp32 noise
    model.train()
    return model


def _batch(num_sent=2, seed=1):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, 60, (6, num_sent, 9), generator=g)
    mask = torch.ones_like(ids)
    mask[:, :, 7:] = 0
    mask[0, :, 5:] = 0
    return ids, mask


def _loss_and_grads(model, ids, mask, **kw):
    loss = model(input_ids=ids, attention_mask=mask, **kw).loss
    params = [p for p in model.parameters() if p.requires_grad]
    grads = torch.autograd.grad(loss, params, allow_unused=True)
    return loss.detach(), grads


@pytest.mark.parametrize("pooler", ["cls", "cls_before_pooler", "avg", "avg_top2", "avg_first_last"])
# 0.5 is exact in float32, the dtype SimCSE builds its hard-negative weights in
@pytest.mark.parametrize("num_sent,weight", [(2, 0.0), (3, 0.0), (3, 0.5)])
def test_infonce_patch_reproduces_the_original(pooler, num_sent, weight):
    model = _model(pooler, hard_negative_weight=weight)
    ids, mask = _batch(num_sent)
    loss_orig, grads_orig = _loss_and_grads(model, ids, mask)
    handle = patch_simcse(clp.build_loss("infonce", tau=0.05, layout="cross_view"))
    try:
        loss_new, grads_new = _loss_and_grads(model, ids, mask)
    finally:
        handle.undo()
    torch.testing.assert_close(loss_new, loss_orig, rtol=1e-10, atol=1e-12)
    for a, b in zip(grads_new, grads_orig):
        if a is None or b is None:
            assert a is None and b is None
        else:
            torch.testing.assert_close(a, b, rtol=1e-8, atol=1e-12)
    assert simcse_models.cl_forward is handle.original


def test_mlm_term_is_kept():
    model = _model(do_mlm=True)
    ids, mask = _batch()
    labels = torch.full_like(ids, -100)
    labels[:, :, 2] = ids[:, :, 2]
    mlm_ids = ids.clone()
    mlm_ids[:, :, 2] = 3
    loss_orig, _ = _loss_and_grads(model, ids, mask, mlm_input_ids=mlm_ids, mlm_labels=labels)
    handle = patch_simcse(clp.build_loss("infonce", tau=0.05, layout="cross_view"))
    try:
        loss_new, _ = _loss_and_grads(model, ids, mask, mlm_input_ids=mlm_ids, mlm_labels=labels)
    finally:
        handle.undo()
    torch.testing.assert_close(loss_new, loss_orig, rtol=1e-10, atol=1e-12)


def test_macl_patch_gives_the_macl_value():
    model = _model()
    ids, mask = _batch()
    handle = patch_simcse(clp.build_loss("macl", tau0=0.05, alpha=2.0, a0=0.8, min_tau=1e-6, layout="cross_view"))
    try:
        loss = model(input_ids=ids, attention_mask=mask).loss
    finally:
        handle.undo()
    with torch.no_grad():  # MACL's official snippet on the same embeddings
        out = model.bert(ids.view(-1, 9), attention_mask=mask.view(-1, 9), return_dict=True)
        z = model.mlp(model.pooler(mask.view(-1, 9), out).view(6, 2, -1)).double()
        z1 = torch.nn.functional.normalize(z[:, 0], dim=1)
        z2 = torch.nn.functional.normalize(z[:, 1], dim=1)
        cos = z1 @ z2.T
        off = ~torch.eye(6, dtype=torch.bool)
        expected = ref.macl_official(cos.diag()[:, None], cos[off].view(6, 5), 0.05, 2.0, 0.8).mean()
    assert float(loss) == pytest.approx(float(expected), rel=1e-10)


def test_patch_refuses_a_symmetric_layout():
    with pytest.raises(ValueError, match="cross_view"):
        patch_simcse(clp.build_loss("infonce"))
