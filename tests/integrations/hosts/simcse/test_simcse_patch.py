"""patch_simcse on the real SimCSE models: GitHub ``simcse/models.py`` at the pinned commit and PyPI simcse==0.4.

Float64, tiny random BERT, dropout off: with ``infonce`` at SimCSE's τ the patched model's loss and every
parameter gradient equal the unpatched model's, for every pooler, hard negatives with weights and MLM.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

import cl_plugins as clp
from tests import reference as ref
from tests.integrations import upstream

transformers = pytest.importorskip("transformers")

from cl_plugins.integrations.hosts.simcse.patch import patch_simcse  # noqa: E402
from cl_plugins.integrations.modalities.text.cl_forward import enable_modern_transformers  # noqa: E402


def simcse_module(which: str):
    if which == "github":
        return upstream.simcse_github()
    return pytest.importorskip("simcse.models", reason="scripts/setup.sh installs simcse==0.4 --no-deps")


def make_model(module, pooler="cls", do_mlm=False, hard_negative_weight=0.0, seed=0):
    enable_modern_transformers(module)
    config = transformers.BertConfig(
        vocab_size=60, hidden_size=24, num_hidden_layers=2, num_attention_heads=2, intermediate_size=32,
        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, max_position_embeddings=32,
    )  # fmt: skip
    args = SimpleNamespace(pooler_type=pooler, temp=0.05, hard_negative_weight=hard_negative_weight, do_mlm=do_mlm,
                           mlp_only_train=False, mlm_weight=0.1)  # fmt: skip
    torch.manual_seed(seed)
    return module.BertForCL(config, model_args=args).double().train()


def make_batch(num_sent=2, seed=1, batch=6):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, 60, (batch, num_sent, 9), generator=g)
    mask = torch.ones_like(ids)
    mask[:, :, 7:] = 0
    mask[0, :, 5:] = 0
    return ids, mask


def loss_and_grads(model, ids, mask, **kw):
    loss = model(input_ids=ids, attention_mask=mask, **kw).loss
    params = [p for n, p in model.named_parameters() if not n.startswith("cl_plugins_loss.")]
    return loss.detach(), torch.autograd.grad(loss, params, allow_unused=True)


def assert_same(a, b, rtol=1e-10):
    (loss_a, grads_a), (loss_b, grads_b) = a, b
    torch.testing.assert_close(loss_a, loss_b, rtol=rtol, atol=1e-12)
    for x, y in zip(grads_a, grads_b, strict=True):
        assert (x is None) == (y is None)
        if x is not None:
            torch.testing.assert_close(x, y, rtol=rtol, atol=1e-12)


@pytest.mark.parametrize("which", ["github", "pypi"])
@pytest.mark.parametrize("pooler", ["cls", "cls_before_pooler", "avg", "avg_top2", "avg_first_last"])
# 0.5 is exact in float32, the dtype SimCSE builds its hard-negative weights in; (2, 0.5): SimCSE ignores
# the weight for two-sentence batches
@pytest.mark.parametrize("num_sent,weight", [(2, 0.0), (2, 0.5), (3, 0.0), (3, 0.5)])
def test_infonce_patch_reproduces_the_original(which, pooler, num_sent, weight):
    module = simcse_module(which)
    model = make_model(module, pooler, hard_negative_weight=weight)
    ids, mask = make_batch(num_sent)
    original = loss_and_grads(model, ids, mask)
    with patch_simcse(model, "infonce") as handle:  # a model built before the patch: the target
        assert isinstance(model.cl_plugins_loss, clp.InfoNCELoss) and model.cl_plugins_loss.tau == 0.05
        assert_same(loss_and_grads(model, ids, mask), original)
    assert not handle.losses and not hasattr(model, "cl_plugins_loss")


@pytest.mark.parametrize("which", ["github", "pypi"])
def test_mlm_term_and_a_model_built_after_the_patch(which):
    module = simcse_module(which)
    ids, mask = make_batch()
    labels = torch.full_like(ids, -100)
    labels[:, :, 2] = ids[:, :, 2]
    mlm_ids = ids.clone()
    mlm_ids[:, :, 2] = 3
    kw = dict(mlm_input_ids=mlm_ids, mlm_labels=labels)
    original = loss_and_grads(make_model(module, do_mlm=True), ids, mask, **kw)
    with patch_simcse(module, "infonce"):
        model = make_model(module, do_mlm=True)  # same seed: same weights
        assert "cl_plugins_loss" in dict(model.named_children())
        assert_same(loss_and_grads(model, ids, mask, **kw), original)


def test_undo_restores_the_original_functions_bit_for_bit():
    module = upstream.simcse_github()
    enable_modern_transformers(module)
    before = (module.cl_forward, module.cl_init, vars(module).copy())
    handle = patch_simcse(module, "macl")
    assert module.cl_forward is not before[0] and module.cl_init is not before[1]
    with pytest.raises(RuntimeError, match="already patched"):
        patch_simcse(module, "infonce")
    handle.undo()
    assert module.cl_forward is before[0] and module.cl_init is before[1] and vars(module) == before[2]


def test_macl_patch_gives_the_macl_value():
    module = upstream.simcse_github()
    model = make_model(module)
    ids, mask = make_batch()
    with patch_simcse(model, clp.build_loss("macl", tau0=0.05, alpha=2.0, a0=0.8, min_tau=1e-6, layout="cross_view")):
        loss = model(input_ids=ids, attention_mask=mask).loss
    with torch.no_grad():  # MACL's official snippet on the same embeddings
        out = model.bert(ids.view(-1, 9), attention_mask=mask.view(-1, 9), return_dict=True)
        z = model.mlp(model.pooler(mask.view(-1, 9), out).view(6, 2, -1)).double()
        z1 = torch.nn.functional.normalize(z[:, 0], dim=1)
        z2 = torch.nn.functional.normalize(z[:, 1], dim=1)
        cos = z1 @ z2.T
        off = ~torch.eye(6, dtype=torch.bool)
        expected = ref.macl_official(cos.diag()[:, None], cos[off].view(6, 5), 0.05, 2.0, 0.8).mean()
    assert float(loss.detach()) == pytest.approx(float(expected), rel=1e-10)


def test_patch_refuses_a_symmetric_layout_and_a_wrong_target():
    with pytest.raises(ValueError, match="cross_view"):
        patch_simcse(upstream.simcse_github(), clp.build_loss("infonce"))
    with pytest.raises(TypeError, match="target"):
        patch_simcse("simcse.models")


def test_a_weight_not_exact_in_float32_differs_by_simcses_own_rounding():
    """SimCSE builds the hard-negative weights with torch.tensor (float32): 0.3 becomes 0.30000001192..."""
    model = make_model(upstream.simcse_github(), hard_negative_weight=0.3)
    ids, mask = make_batch(3)
    original = model(input_ids=ids, attention_mask=mask).loss.detach()
    with patch_simcse(model, "infonce"):
        patched = model(input_ids=ids, attention_mask=mask).loss.detach()
    rounding = abs(float(torch.tensor(0.3, dtype=torch.float32)) - 0.3)
    assert 0 < abs(float(patched - original)) <= rounding
