"""DCRec's model pieces: the CLLayer patch against DCRec's own formula, the KL term, the encoder, the weights."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import cl_plugins as clp
from cl_plugins.integrations.hosts.dcrec.graphs import similarity_graph, transition_graph
from cl_plugins.integrations.hosts.dcrec.model import DCRec, DCRecGraphs, build_dcrec_loss, dcrec_kl
from cl_plugins.integrations.hosts.dcrec.patch import DCRecCLLayer, patch_dcrec
from cl_plugins.integrations.hosts.dcrec.sequence_encoder import SequenceEncoder, dropout
from tests.integrations import upstream


def real_cl_layer():
    return upstream.dcrec_layers().CLLayer


@pytest.mark.parametrize("tau", [1.0, 0.8, 0.2])
@pytest.mark.parametrize("built", ["before", "after"])
def test_patch_matches_the_real_vanilla_loss(tau, built):
    """DCRec's own CLLayer (pinned commit): values within its 1e-8 inside the log, gradients to 1e-10."""
    CLLayer = real_cl_layer()
    torch.manual_seed(0)
    z1 = torch.randn(24, 16, dtype=torch.float64, requires_grad=True)
    z2 = torch.randn(24, 16, dtype=torch.float64, requires_grad=True)
    layer = CLLayer(16, tau=tau).double()
    ref = layer.vanilla_loss(z1, z2)
    g_ref = torch.autograd.grad(ref.sum(), (z1, z2))
    with patch_dcrec(layer if built == "before" else CLLayer, "infonce"):
        if built == "after":
            layer = CLLayer(16, tau=tau).double()
        assert isinstance(layer.cl_plugins_loss, torch.nn.Module) and layer.cl_plugins_loss.tau == tau
        ours = layer.vanilla_loss(z1, z2)
        g_ours = torch.autograd.grad(ours.sum(), (z1, z2))
    assert ours.shape == (24,)  # per row, never reduced
    # identical up to DCRec's 1e-8 inside the log: |Δ| <= 1e-8 / ratio; its gradient is 1/(1 + 1e-8/ratio) of ours
    ratio = torch.exp(-ours.detach())
    assert ((ours - ref).abs() <= 1.01e-8 / ratio + 1e-12).all()
    exact = -torch.log(torch.softmax(F.normalize(z1) @ F.normalize(z2).T / tau, dim=1).diag())
    torch.testing.assert_close(ours, exact, rtol=1e-12, atol=1e-12)
    g_exact = torch.autograd.grad(exact.sum(), (z1, z2))
    for a, b, c in zip(g_ours, g_ref, g_exact, strict=True):
        torch.testing.assert_close(a, c, rtol=1e-10, atol=1e-12)  # exactly InfoNCE without the epsilon
        # DCRec's: each row's gradient is r/(r + 1e-8) of ours, so the difference is within 1e-8/r of the scale
        bound = 1.01e-8 / float(ratio.min()) * float(a.abs().max()) * 4
        assert float((a - b).abs().max()) <= bound
    assert "vanilla_loss" in vars(CLLayer) and not hasattr(layer, "cl_plugins_loss")
    torch.testing.assert_close(layer.vanilla_loss(z1, z2), ref, rtol=0, atol=0)


def test_layer_built_before_the_patch_gets_its_loss_at_the_first_call():
    CLLayer = real_cl_layer()
    layer = CLLayer(8, tau=1.0)
    with patch_dcrec(CLLayer, "learnable"), pytest.warns(UserWarning, match="built before the patch"):
        value = layer.vanilla_loss(torch.randn(5, 8), torch.randn(5, 8))
    assert value.shape == (5,)


def test_patch_other_strategies_and_parameters():
    CLLayer = real_cl_layer()
    with patch_dcrec(CLLayer, "amcl"):
        layer = CLLayer(8, tau=1.0)
        names = [n for n, _ in layer.named_parameters()]
    assert any(n.startswith("cl_plugins_loss.") for n in names)  # built in __init__: Adam sees them
    torch.manual_seed(1)
    z1, z2 = torch.randn(10, 8), torch.randn(10, 8)
    free = DCRecCLLayer(8, loss="temperature_free").vanilla_loss(z1, z2)
    s = F.normalize(z1) @ F.normalize(z2).T
    logits = 2 * torch.atanh(s.clamp(-1 + 1e-6, 1 - 1e-6))
    torch.testing.assert_close(free, -torch.log_softmax(logits, dim=1).diag(), rtol=1e-4, atol=1e-4)
    with pytest.raises(TypeError, match="vanilla_loss"):
        patch_dcrec(nn.Linear, "infonce")


def test_dcrec_kl_is_cal_kl_1():
    torch.manual_seed(0)
    target = torch.rand(7, dtype=torch.float64) * 0.6
    target[0] = 0.0
    weights = torch.rand(7, dtype=torch.float64)
    t = torch.log(target.clamp_min(1e-8) + 1e-8)
    q = torch.log_softmax(weights + 1e-8, dim=0)
    expected = (t.exp() * (t - q)).sum() / 7
    torch.testing.assert_close(dcrec_kl(target, weights), expected)


def test_encoder_ignores_padding_and_dropout_law():
    torch.manual_seed(0)
    emb = nn.Embedding(10, 8, padding_idx=0)
    enc = SequenceEncoder(8, max_length=6, hidden_dropout=0.0, attn_dropout=0.0)
    enc.eval()
    short = enc(torch.tensor([[3, 5, 7]]), emb)[0, 2]
    padded = enc(torch.tensor([[3, 5, 7, 0, 0, 0]]), emb)[0, 2]
    torch.testing.assert_close(short, padded, rtol=1e-5, atol=1e-5)
    x = torch.ones(200_000)
    y = dropout(x, 0.3, True)
    assert torch.allclose(y.unique(), torch.tensor([0.0, 1 / 0.7])) and abs(float((y == 0).float().mean()) - 0.3) < 0.01
    assert dropout(x, 0.3, False) is x


def tiny_model(loss: str = "infonce", seed: int = 0) -> tuple[DCRec, tuple[torch.Tensor, ...]]:
    torch.manual_seed(seed)
    sequences = [[1, 2, 3, 4], [2, 3, 5], [5, 6, 1], [6, 7, 2, 3], [4, 4, 7]]
    adj, user_edges = transition_graph(sequences, 8)
    graphs = DCRecGraphs(adj, similarity_graph(sequences, 8, 2), user_edges)
    model = DCRec(8, graphs, build_dcrec_loss(loss, 1.0, 16), hidden_size=16, inner_size=32, max_length=5)
    item_seq = torch.tensor([[1, 2, 3, 0, 0], [2, 3, 0, 0, 0], [5, 0, 0, 0, 0], [6, 7, 2, 0, 0], [4, 4, 0, 0, 0]])
    batch = (item_seq, torch.tensor([3, 2, 1, 3, 2]), torch.tensor([4, 5, 6, 3, 7]), torch.arange(5))
    return model, batch


@pytest.mark.parametrize("loss", clp.available_losses())
def test_forward_terms_and_gradients(loss):
    model, batch = tiny_model(loss)
    total = model(batch)
    terms = model.last_terms
    assert math.isfinite(total.item()) and total.item() == pytest.approx(sum(terms.values()), rel=1e-5)
    assert terms["ce"] > 0 and terms["kl"] != 0
    total.backward()
    for name in ("item_embedding.weight", "attn_weights", "attn", "encoder.blocks.0.query.weight"):
        grad = dict(model.named_parameters())[name].grad
        assert grad is not None and torch.isfinite(grad).all() and grad.abs().sum() > 0, name


def test_conformity_weights_and_cl_term():
    model, batch = tiny_model()
    model.eval()  # no dropout: the CL term can be rebuilt from the parts
    item_seq, seq_len, target, users = batch
    last = item_seq[torch.arange(5), seq_len - 1]
    adj_all = model.graph_view(model.train_graphs.transition)
    w = model.conformity_weights(users, last, adj_all, adj_all[last])
    assert w.min().item() == pytest.approx(0.0, abs=1e-7) and w.mean().item() == pytest.approx(model.weight_mean)
    torch.manual_seed(3)
    model(batch)
    sim_all = model.graph_view(model.train_graphs.similarity)
    mainstream = torch.where(seq_len == 1, torch.full_like(w, 0.5), w)
    seq = model.sequence_view(item_seq, seq_len)
    l1, l2 = model.loss_fn(seq, adj_all[last]), model.loss_fn(adj_all[last], sim_all[last])
    cl = model.cl_weight * (mainstream * l1 + (mainstream.max() - mainstream) * l2).mean()
    assert model.last_terms["cl"] == pytest.approx(cl.item(), rel=1e-5)


def test_scores_are_dot_products():
    model, batch = tiny_model()
    model.set_eval_graphs(model.train_graphs)
    tables = model.graph_tables()
    rep = model.represent(batch[0], batch[1], tables)
    full = model.score_all(rep)
    cands = torch.tensor([[1, 2], [3, 4], [5, 6], [7, 1], [2, 2]])
    torch.testing.assert_close(model.score_candidates(rep, cands), full.gather(1, cands))
    with pytest.raises(ValueError, match="seq_len"):
        model((batch[0], torch.zeros(5, dtype=torch.long), batch[2], batch[3]))
