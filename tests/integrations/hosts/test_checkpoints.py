"""Published checkpoints load: Hu et al.'s / GraphCL's molecule GIN (the real upstream class's state dict, in
each way it is published, saved "on a GPU") gives our MoleculeGIN the upstream forward; torchvision ResNets
saved on a GPU load on CPU."""

from __future__ import annotations

import contextlib
import sys
import types
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from cl_plugins.integrations.hosts.graph.checkpoints import load_molecule_gin, molecule_gin_state

pytest.importorskip("torch_geometric")

from cl_plugins.integrations.hosts.graph.encoders import MoleculeGIN  # noqa: E402
from tests.integrations import upstream  # noqa: E402


@contextlib.contextmanager
def saved_as_if_on_gpu() -> Iterator[None]:
    """``torch.save`` records every storage as living on ``cuda:0`` (what a GPU run writes)."""
    original = torch.serialization.location_tag
    torch.serialization.location_tag = lambda storage: "cuda:0"
    try:
        yield
    finally:
        torch.serialization.location_tag = original


def upstream_gnn(monkeypatch: pytest.MonkeyPatch, layers: int = 3, dim: int = 16) -> torch.nn.Module:
    """GraphCL's (= Hu et al.'s) ``GNN``, runnable on PyG 2 with shims: PyG inspects the message signature in
    ``sys.modules["model"]`` (the upstream file's name), ``add_self_loops`` now returns (edge_index, attr) and
    ``propagate`` no longer takes the aggregation as its first argument."""
    from torch_geometric.nn import MessagePassing
    from torch_geometric.utils import add_self_loops

    cls = upstream.graphcl_transfer().GNN
    module = types.ModuleType("model")
    module.__dict__.update(cls.__init__.__globals__)
    monkeypatch.setitem(sys.modules, "model", module)
    gnn = cls(layers, dim, JK="last", drop_ratio=0.0, gnn_type="gin")
    def loops(ei, num_nodes):
        return add_self_loops(ei, num_nodes=num_nodes)[0]

    monkeypatch.setitem(type(gnn.gnns[0]).forward.__globals__, "add_self_loops", loops)
    for conv in gnn.gnns:
        conv.propagate = lambda aggr, edge_index, _c=conv, **kw: MessagePassing.propagate(_c, edge_index, **kw)
    return gnn


def molecule_batch(n: int = 12, m: int = 20, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    x = torch.stack([torch.randint(0, 119, (n,), generator=g), torch.randint(0, 3, (n,), generator=g)], 1)
    edge_index = torch.randint(0, n, (2, m), generator=g)
    edge_attr = torch.stack([torch.randint(0, 4, (m,), generator=g), torch.randint(0, 3, (m,), generator=g)], 1)
    return x, edge_index, edge_attr


def layouts(state: dict[str, torch.Tensor]) -> dict[str, object]:
    """The ways the published files hold the GNN: bare (pretrain-gnns' model_gin/*.pth, GraphCL's
    models_graphcl/*.pth), inside GNN_graphpred, inside DataParallel."""
    head = {"graph_pred_linear.weight": torch.zeros(1, 16), "graph_pred_linear.bias": torch.zeros(1)}
    return {"bare": state, "graphpred": {**{f"gnn.{k}": v for k, v in state.items()}, **head},
            "dataparallel": {f"module.{k}": v for k, v in state.items()}}  # fmt: skip


@pytest.mark.parametrize("layout", ["bare", "graphpred", "dataparallel"])
def test_upstream_gin_checkpoint_gives_the_upstream_forward(layout: str, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    torch.manual_seed(0)
    theirs = upstream_gnn(monkeypatch)
    for bn in theirs.batch_norms:  # non-trivial running statistics, so that they must be carried over
        bn.running_mean.uniform_(-1, 1), bn.running_var.uniform_(0.5, 2)
    theirs.eval()
    path = tmp_path / "model_gin.pth"
    with saved_as_if_on_gpu():
        torch.save(layouts(theirs.state_dict())[layout], path)
    with pytest.raises(RuntimeError, match="CUDA"):
        torch.load(path, weights_only=True)  # what used to happen
    with pytest.warns(UserWarning, match="3 rows"):
        state = load_molecule_gin(path)
    ours = MoleculeGIN(num_layers=3, emb_dim=16)
    ours.load_state_dict(state, strict=True)
    ours.eval()
    x, edge_index, edge_attr = molecule_batch()
    with torch.no_grad():
        assert torch.allclose(ours(x, edge_index, edge_attr), theirs(x, edge_index, edge_attr), atol=1e-6)
    assert torch.equal(state["chirality.weight"][3], state["chirality.weight"][0])


def test_our_own_files_and_bad_inputs(tmp_path: Path) -> None:
    ours = MoleculeGIN(num_layers=2, emb_dim=8).state_dict()
    assert molecule_gin_state({"gnn": ours, "config": {}}).keys() == ours.keys()
    assert molecule_gin_state(ours).keys() == ours.keys()
    with pytest.raises(ValueError, match="not a molecule GIN: keys"):
        molecule_gin_state({"fc.weight": torch.zeros(1)})
    gcn = {"x_embedding1.weight": torch.zeros(120, 8), "x_embedding2.weight": torch.zeros(3, 8),
           "gnns.0.linear.weight": torch.zeros(8, 8)}  # fmt: skip
    with pytest.raises(ValueError, match="'gnns.0.linear.weight' is not part of Hu et al.'s GIN"):
        molecule_gin_state(gcn)
    (tmp_path / "cut.pth").write_bytes(b"PK\x03\x04 truncated")
    with pytest.raises(ValueError, match="is not a readable pre-trained molecule GIN"):
        load_molecule_gin(tmp_path / "cut.pth")


def test_gpu_saved_torchvision_resnet_loads_on_cpu(tmp_path: Path) -> None:
    from cl_plugins.integrations.modalities.images.resnet import build_resnet, load_torchvision_weights

    source = build_resnet("resnet18")
    with saved_as_if_on_gpu():
        torch.save(source.state_dict(), tmp_path / "r18.pth")
    target = build_resnet("resnet18")
    load_torchvision_weights(target, tmp_path / "r18.pth")
    for name, value in source.state_dict().items():
        if name in target.state_dict():
            assert torch.equal(target.state_dict()[name], value), name
