"""The patch contract (docs/patching.md) for every target: the loss is a registered submodule of the host model,
so learned temperatures are in ``host.parameters()``, move with ``.to(torch.float64)``, are in ``state_dict()``,
and change after one optimizer step over ``host.parameters()``; ``clp.after_optimizer_step(host)`` keeps them in range.
"""

from __future__ import annotations

import types

import pytest
import torch

import cl_plugins as clp

pytest.importorskip("torch_geometric")
pytest.importorskip("transformers")

from cl_plugins.integrations.hosts import hosts  # noqa: E402
from cl_plugins.integrations.hosts.dcrec.patch import patch_dcrec  # noqa: E402
from cl_plugins.integrations.hosts.graph.patch import patch_grace, patch_graphcl_transfer, patch_graphcl_tu, patch_pygcl  # noqa: E402
from cl_plugins.integrations.hosts.mabel.patch import patch_mabel  # noqa: E402
from cl_plugins.integrations.hosts.msc.patch import patch_msc  # noqa: E402
from cl_plugins.integrations.hosts.simcse.patch import patch_simcse  # noqa: E402
from tests.integrations import upstream  # noqa: E402
from tests.integrations.hosts.graph import test_graph_patch as graph  # noqa: E402
from tests.integrations.hosts.mabel import test_mabel_patch as mabel  # noqa: E402
from tests.integrations.hosts.msc import test_msc as msc  # noqa: E402
from tests.integrations.hosts.simcse import test_simcse_patch as simcse  # noqa: E402


def _simcse():
    model = simcse.make_model(upstream.simcse_github()).float()
    ids, mask = simcse.make_batch()
    return model, patch_simcse, lambda m: m(input_ids=ids, attention_mask=mask).loss, {}


def _mabel():
    model = mabel.make_model(cl_loss=True, a1_loss=True).float()
    batch, _ = mabel.make_batch()
    return model, patch_mabel, lambda m: m(**batch).loss, {}


def _graphcl_tu():
    model = upstream.graphcl_tu().simclr(hidden_dim=8, num_gc_layers=2)
    return model, patch_graphcl_tu, lambda m: graph.graphcl_tu_step(m), {}


def _graphcl_transfer():
    model = upstream.graphcl_transfer().graphcl(graph.StandInGNN())
    return model, patch_graphcl_transfer, graph.graphcl_transfer_step, {}


def _grace():
    return graph.grace_model().float(), patch_grace, graph.grace_step, {}


def _dcrec():
    layer = upstream.dcrec_layers().CLLayer(16, tau=0.5)
    z1, z2 = torch.randn(12, 16), torch.randn(12, 16)
    return layer, patch_dcrec, lambda m: m.vanilla_loss(z1.to(m.fc1.weight), z2.to(m.fc1.weight)).mean(), {}


def _msc():
    module = msc.msc_module()
    model = torch.nn.Module()
    model.backbone = torch.nn.Linear(6, 10)
    x = torch.randn(8, 6)
    def step(m):
        return module.contrastive_loss(m.backbone(x.to(m.backbone.weight)), m.backbone(x.to(m.backbone.weight) + 0.1))

    def patch(target, loss, **kw):
        return patch_msc(module, loss, model=target, feature_dim=10, **kw)

    return model, patch, step, {}


def _pygcl():
    losses, models = graph._import_pygcl()
    contrast = models.DualBranchContrast(losses.InfoNCE(tau=0.2), mode="L2L", intraview_negs=True)
    h1, h2 = torch.randn(10, 8), torch.randn(10, 8)
    def step(m):
        return m(h1=h1.to(m.cl_plugins_loss.log_tau), h2=h2.to(m.cl_plugins_loss.log_tau))

    return contrast, patch_pygcl, step, {}


TARGETS = {"simcse": _simcse, "mabel": _mabel, "graphcl_tu": _graphcl_tu, "graphcl_transfer": _graphcl_transfer,
           "grace": _grace, "dcrec": _dcrec, "msc": _msc, "pygcl": _pygcl}  # fmt: skip


def test_every_registered_patch_target_has_a_case():
    """The hosts declare their patch targets (``host.py``); a target added there fails here until it has a case."""
    assert set(TARGETS) == {target for host in hosts().values() for target in host.patches or {}}


def _cases():
    for target in TARGETS:
        for loss in ("learnable", "amcl"):
            if target == "pygcl" and loss == "amcl":
                continue  # AMCL's heads need the embeddings; PyGCL hands the loss similarities only
            yield target, loss


@pytest.mark.parametrize("target,loss", list(_cases()))
def test_learned_temperatures_are_host_parameters_and_train(target, loss):
    torch.manual_seed(0)
    host, patch, step, kwargs = TARGETS[target]()
    host.train()
    with patch(host, loss, **kwargs) as handle:
        attached = host.cl_plugins_loss
        own = list(attached.parameters())
        assert own and handle.losses == [attached]
        ids = {id(p) for p in host.parameters()}
        assert all(id(p) in ids for p in own)
        assert any(k.startswith("cl_plugins_loss.") for k in host.state_dict())
        host.to(torch.float64)
        assert all(p.dtype == torch.float64 for p in attached.parameters())
        before = [p.detach().clone() for p in attached.parameters()]
        optimizer = torch.optim.SGD(host.parameters(), lr=0.5)
        step(host).backward()
        optimizer.step()
        clp.after_optimizer_step(host)
        after = list(attached.parameters())
        assert any(not torch.equal(a, b) for a, b in zip(before, after, strict=True)), "no loss parameter changed"
        if loss == "learnable":
            with torch.no_grad():
                attached.log_tau.fill_(-20.0)  # far below log(min_tau)
            handle.after_optimizer_step()
            assert float(attached.tau.detach()) == pytest.approx(attached.min_tau)
    assert not hasattr(host, "cl_plugins_loss")


def test_a_handle_is_a_context_manager_and_refuses_a_second_patch():
    grace = upstream.grace()
    saved = dict(vars(grace.Model))
    with patch_grace(grace.Model, "infonce"):
        with pytest.raises(RuntimeError, match="already patched"):
            patch_grace(grace.Model, "macl")
    assert dict(vars(grace.Model)) == saved
    with pytest.raises(TypeError, match="target"):
        patch_grace(types.SimpleNamespace(), "infonce")
