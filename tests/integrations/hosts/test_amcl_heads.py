"""AMCL's C heads replace each host's projection head (on the backbone features), centred on the host's τ;
``--host_head`` keeps the host's head. Checked through the builder each trainer itself calls.

MSC and DCRec have no projection head: AMCL's heads sit on their features already (test_msc.py,
test_dcrec_model.py).
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

import cl_plugins as clp
from cl_plugins.integrations.modalities.text.testing import make_tiny_bert

pytest.importorskip("transformers")
pytest.importorskip("torch_geometric")


@pytest.fixture(scope="module")
def bert_dir(tmp_path_factory):
    return make_tiny_bert(tmp_path_factory.mktemp("amcl_heads") / "bert", mlm=True)


def _amcl(loss: nn.Module, dim: int, tau: float) -> None:
    assert isinstance(loss, clp.AMCLLoss) and loss.form == "anchor"
    assert loss.dim == dim and loss.tau == pytest.approx(tau)


def test_only_strategies_with_their_own_heads_replace_the_host_head():
    for name in clp.available_losses():
        assert clp.owns_projection_head(name) == clp.get_loss_class(name).replaces_projection_head
        assert not clp.owns_projection_head(name, keep_host_head=True)


@pytest.mark.parametrize("host_head", [False, True])
def test_graphcl_tu(host_head):
    from cl_plugins.integrations.hosts.graph.graphcl_tu import TUConfig, build_model

    model = build_model(TUConfig(loss="amcl", hidden=8, host_head=host_head), num_features=3)
    width = model.encoder.embedding_dim
    _amcl(model.loss_fn, width, 0.2)
    assert isinstance(model.head, nn.Identity) != host_head


@pytest.mark.parametrize("host_head", [False, True])
def test_graphcl_transfer(host_head):
    from cl_plugins.integrations.hosts.graph.graphcl_transfer import TransferConfig, build_pretrain_model

    model = build_pretrain_model(TransferConfig(loss="amcl", emb_dim=16, host_head=host_head))
    _amcl(model.loss_fn, 16, 0.1)
    assert isinstance(model.head, nn.Identity) != host_head


@pytest.mark.parametrize("host_head", [False, True])
def test_grace(host_head):
    from torch_geometric.data import Data

    from cl_plugins.integrations.hosts.graph.grace import GraceConfig, build_model

    model = build_model(GraceConfig(dataset="Cora", loss="amcl", host_head=host_head), num_features=5)
    _amcl(model.loss_fn, 128, 0.4)
    assert (model.fc1 is not None) == host_head
    edges = torch.tensor([[0, 1, 2, 3], [1, 2, 3, 0]])
    assert torch.isfinite(model(Data(x=torch.randn(4, 5), edge_index=edges)))


@pytest.mark.parametrize("host_head", [False, True])
def test_vision(host_head):
    from cl_plugins.integrations.hosts.vision.train import VisionConfig, build_model

    model = build_model(VisionConfig(loss="amcl", width=8, host_head=host_head))
    _amcl(model.loss_fn, 128 if host_head else model.backbone.feature_dim, 0.1)
    assert isinstance(model.head, nn.Identity) != host_head


@pytest.mark.parametrize("host_head", [False, True])
def test_simcse_and_mabel_drop_their_mlp(bert_dir, host_head):
    from cl_plugins.integrations.hosts.mabel.train import MabelConfig
    from cl_plugins.integrations.hosts.mabel.train import build_model as build_mabel
    from cl_plugins.integrations.modalities.text.config import TrainConfig
    from cl_plugins.integrations.modalities.text.trainer import build_model

    simcse = build_model(TrainConfig(model=str(bert_dir), train_file="", loss="amcl", host_head=host_head))
    mabel = build_mabel(MabelConfig(model=str(bert_dir), loss="amcl", host_head=host_head))
    for model, tau in ((simcse, 0.05), (mabel, 0.05)):
        _amcl(model.loss_fn, model.encoder.config.hidden_size, tau)
        assert (model.mlp is not None) == host_head
        assert (model.head == "none") != host_head
