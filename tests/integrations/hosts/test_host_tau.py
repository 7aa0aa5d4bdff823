"""Every adapter, run with ``--loss infonce`` and no loss arguments, trains at its host's temperature.

Each check goes through the builder the adapter's trainer itself calls, from the adapter's default
configuration (only the fields without a default are given).
"""

from __future__ import annotations

import pytest
import torch

import cl_plugins as clp
from cl_plugins.integrations.modalities.text.testing import make_tiny_bert

pytest.importorskip("transformers")
pytest.importorskip("torch_geometric")


@pytest.fixture(scope="module")
def bert_dir(tmp_path_factory):
    return make_tiny_bert(tmp_path_factory.mktemp("host_tau") / "bert", mlm=True)


def _tau(loss: torch.nn.Module) -> float:
    assert isinstance(loss, clp.InfoNCELoss), type(loss)
    return float(loss.tau)


def test_simcse_trains_at_its_temp(bert_dir):
    from cl_plugins.integrations.modalities.text.config import TrainConfig
    from cl_plugins.integrations.modalities.text.trainer import build_strategy

    assert _tau(build_strategy(TrainConfig(model=str(bert_dir), train_file=""))) == 0.05  # SimCSE's --temp
    assert _tau(build_strategy(TrainConfig(model=str(bert_dir), train_file="", temp=0.1))) == 0.1


def test_mabel_trains_at_its_softmax_temp(bert_dir):
    from cl_plugins.integrations.hosts.mabel.train import MabelConfig, build_model

    assert _tau(build_model(MabelConfig(model=str(bert_dir), loss="infonce")).loss_fn) == 0.05


def test_graphcl_tu_trains_at_02():
    from cl_plugins.integrations.hosts.graph.graphcl_tu import TUConfig, build_model

    assert _tau(build_model(TUConfig(), num_features=3).loss_fn) == 0.2


def test_graphcl_transfer_trains_at_01():
    from cl_plugins.integrations.hosts.graph.graphcl_transfer import TransferConfig, build_pretrain_model

    assert _tau(build_pretrain_model(TransferConfig()).loss_fn) == 0.1


@pytest.mark.parametrize("dataset,tau", [("Cora", 0.4), ("CiteSeer", 0.9)])  # GRACE's config.yaml
def test_grace_trains_at_the_datasets_tau(dataset, tau):
    from cl_plugins.integrations.hosts.graph.grace import GraceConfig, build_model

    assert _tau(build_model(GraceConfig(dataset=dataset), num_features=5).loss_fn) == pytest.approx(tau)


def test_vision_trains_at_01():
    from cl_plugins.integrations.hosts.vision.train import VisionConfig, build_model

    assert _tau(build_model(VisionConfig(width=8)).loss_fn) == 0.1


def test_msc_trains_at_025():
    from cl_plugins.integrations.hosts.msc.anomaly import MSCConfig
    from cl_plugins.integrations.hosts.msc.patch import MSCContrastiveLoss

    config = MSCConfig()
    assert _tau(MSCContrastiveLoss(config.loss, config.tau, 512, **config.loss_args).loss_fn) == 0.25


@pytest.mark.parametrize("dataset,tau", [("ml-100k", 0.8), ("beauty", 1.0)])  # run_DCRec.py's presets
def test_dcrec_trains_at_its_cl_temp(dataset, tau):
    from cl_plugins.integrations.hosts.dcrec.configs import DCRecConfig, preset_for
    from cl_plugins.integrations.hosts.dcrec.model import build_dcrec_loss

    config = DCRecConfig(dataset=dataset)
    assert _tau(build_dcrec_loss(config.loss, preset_for(dataset)["cl_temp"], 64, **config.loss_args)) == tau
