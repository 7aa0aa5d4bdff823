"""Every recipe of docs/patching.md, run verbatim against the real upstream seam files.

Each recipe is executed where its docs say it goes (in the namespace of the upstream script, or with the
upstream modules importable under the names the scripts use); then a host model is built as the script
builds it, trains one step with an optimizer over its parameters, and the handle is undone.
"""

from __future__ import annotations

import contextlib
import re
import sys
import types
from collections.abc import Iterator

import pytest
import torch

import cl_plugins as clp

pytest.importorskip("torch_geometric")
pytest.importorskip("transformers")

from tests import ROOT
from tests.integrations import upstream  # noqa: E402
from tests.integrations.hosts.graph import test_graph_patch as graph  # noqa: E402
from tests.integrations.hosts.mabel import test_mabel_patch as mabel  # noqa: E402
from tests.integrations.hosts.msc import test_msc as msc  # noqa: E402
from tests.integrations.hosts.simcse import test_simcse_patch as simcse  # noqa: E402

DOC = ROOT / "docs" / "patching.md"


def recipes() -> dict[str, str]:
    blocks = re.findall(r"```python\n# recipe: (\w+)\n(.*?)```", DOC.read_text(), flags=re.S)
    return dict(blocks)


@contextlib.contextmanager
def importable(**modules: types.ModuleType) -> Iterator[None]:
    """Make upstream modules importable under the names the research scripts use (dots as '__')."""
    names = {k.replace("__", "."): v for k, v in modules.items()}
    saved = {k: sys.modules.get(k) for k in names}
    sys.modules.update(names)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                sys.modules.pop(k, None)
            else:
                sys.modules[k] = v


def run(recipe: str, namespace: dict) -> dict:
    exec(compile(recipe, f"docs/patching.md:{recipe.splitlines()[0]}", "exec"), namespace)
    return namespace


@contextlib.contextmanager
def recipe(name: str, namespace: dict | None = None, **modules: types.ModuleType) -> Iterator[dict]:
    """Run the docs' recipe ``name`` (``modules`` importable, in ``namespace``); its patch is undone afterwards."""
    with importable(**modules):
        ns = run(recipes()[name], dict(namespace or {}))
    try:
        yield ns
    finally:
        ns["handle"].undo()


def train_one_step(model: torch.nn.Module, loss_value) -> None:
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    value = loss_value()
    assert torch.isfinite(value)
    value.backward()
    optimizer.step()
    clp.after_optimizer_step(model)


def test_every_declared_patch_target_has_a_recipe_and_a_test():
    import importlib

    from cl_plugins.integrations.hosts import patch_targets

    targets = patch_targets()  # what the hosts declare in their host.py
    assert set(recipes()) == set(targets)
    for target, (host, function) in targets.items():
        patch = importlib.import_module(f"cl_plugins.integrations.hosts.{host}.patch")
        assert callable(getattr(patch, function)), target
        assert callable(globals().get(f"test_{target}_recipe")), f"no test runs the {target} recipe"


def test_simcse_recipe():
    models = upstream.simcse_github()
    with recipe("simcse", simcse=upstream.stub("simcse", models=models), simcse__models=models):
        model = simcse.make_model(models)
        assert isinstance(model.cl_plugins_loss, clp.MACLLoss)
        ids, mask = simcse.make_batch()
        train_one_step(model, lambda: model(input_ids=ids, attention_mask=mask).loss)


def test_mabel_recipe():
    module = upstream.mabel()
    with recipe("mabel", model=module):
        model = mabel.make_model(cl_loss=True, a1_loss=True)
        assert isinstance(model.cl_plugins_loss, clp.TemperatureFreeLoss)
        batch, _ = mabel.make_batch()
        train_one_step(model, lambda: model(**batch).loss)


def test_graphcl_tu_recipe():
    gsimclr = upstream.graphcl_tu()
    with recipe("graphcl_tu", dict(vars(gsimclr))):  # gsimclr.py's own globals, as under __main__
        model = gsimclr.simclr(hidden_dim=8, num_gc_layers=2).double()
        assert isinstance(model.cl_plugins_loss, clp.MACLLoss) and model.cl_plugins_loss.tau0 == 0.2
        train_one_step(model, lambda: graph.graphcl_tu_step(model))


def test_graphcl_transfer_recipe():
    pretrain = upstream.graphcl_transfer()
    with recipe("graphcl_transfer", dict(vars(pretrain))):
        model = pretrain.graphcl(graph.StandInGNN()).double()
        assert isinstance(model.cl_plugins_loss, clp.DySTreSSLoss)
        train_one_step(model, lambda: graph.graphcl_transfer_step(model))


def test_grace_recipe():
    grace = upstream.grace()
    with recipe("grace", {"Model": grace.Model, "Encoder": grace.Encoder}):  # train.py's imports
        model = graph.grace_model()
        assert isinstance(model.cl_plugins_loss, clp.TemperatureFreeLoss)
        train_one_step(model, lambda: graph.grace_step(model))


def test_dcrec_recipe():
    layers = upstream.dcrec_layers()
    recbole = upstream.stub("recbole", model=upstream.stub("recbole.model", layers=layers))
    with recipe("dcrec", recbole=recbole, recbole__model=recbole.model, recbole__model__layers=layers):
        layer = layers.CLLayer(16, tau=0.5).double()
        assert isinstance(layer.cl_plugins_loss, clp.MACLLoss) and layer.cl_plugins_loss.tau0 == 0.5
        z1, z2 = torch.randn(8, 16, dtype=torch.float64, requires_grad=True), torch.randn(8, 16, dtype=torch.float64)
        train_one_step(layer, lambda: layer.vanilla_loss(z1, z2).mean())
        assert z1.grad is not None


def test_msc_recipe():
    module = msc.msc_module()
    with recipe("msc", main=module):
        model = module.utils.Model()
        model.backbone = torch.nn.Linear(6, 10)
        x = torch.randn(8, 6)
        train_one_step(model, lambda: module.run_step(model.backbone(x), model.backbone(x + 0.1)))
        assert isinstance(model.cl_plugins_loss, clp.LearnableTemperatureLoss)


def test_pygcl_recipe():
    losses, models = graph._import_pygcl()
    encoder_model = torch.nn.Linear(6, 8)
    names = {"DualBranchContrast": models.DualBranchContrast, "L": losses, "Adam": torch.optim.Adam,
             "encoder_model": encoder_model}  # fmt: skip
    with recipe("pygcl", names) as ns:
        contrast, optimizer = ns["contrast_model"], ns["optimizer"]
        before = contrast.cl_plugins_loss.log_tau.detach().clone()
        x = torch.randn(10, 6)
        contrast(h1=encoder_model(x), h2=encoder_model(x + 0.1)).backward()
        optimizer.step()
        assert not torch.equal(before, contrast.cl_plugins_loss.log_tau.detach())
