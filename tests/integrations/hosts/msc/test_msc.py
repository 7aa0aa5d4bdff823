"""MSC: parity of the patched loss with MSC's formula, the anomaly score and ROC-AUC against hand-computed answers."""

from __future__ import annotations

import types

import pytest
import torch
import torch.nn.functional as F

from cl_plugins.integrations.hosts.msc.patch import MSCContrastiveLoss, patch_msc
from cl_plugins.integrations.hosts.msc.scoring import knn_anomaly_score, roc_auc


def msc_formula(out_1: torch.Tensor, out_2: torch.Tensor, temp: float = 0.25) -> torch.Tensor:
    """MSC's ``contrastive_loss`` as its paper and code define it: explicit exp, diagonal removed, positive kept."""
    out_1, out_2 = F.normalize(out_1, dim=-1), F.normalize(out_2, dim=-1)
    b = out_1.shape[0]
    out = torch.cat([out_1, out_2])
    sim = torch.exp(out @ out.T / temp)
    off_diagonal = ~torch.eye(2 * b, dtype=torch.bool)
    denominator = sim[off_diagonal].view(2 * b, 2 * b - 1).sum(dim=1)
    pos = torch.exp((out_1 * out_2).sum(dim=-1) / temp).repeat(2)
    return (-torch.log(pos / denominator)).mean()


def _shifted(b: int = 16, d: int = 32, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    center = F.normalize(torch.randn(d, generator=gen, dtype=torch.float64), dim=0) * 0.8
    z1 = F.normalize(torch.randn(b, d, generator=gen, dtype=torch.float64), dim=1) - center
    z2 = F.normalize(torch.randn(b, d, generator=gen, dtype=torch.float64), dim=1) - center
    return z1.requires_grad_(), z2.requires_grad_()


def test_infonce_at_025_is_mscs_loss_with_gradients():
    z1, z2 = _shifted()
    ours = MSCContrastiveLoss("infonce")(z1, z2)
    ref = msc_formula(z1, z2)
    torch.testing.assert_close(ours, ref, rtol=1e-10, atol=1e-12)
    g_ours = torch.autograd.grad(ours, (z1, z2))
    g_ref = torch.autograd.grad(msc_formula(z1, z2), (z1, z2))
    for a, b in zip(g_ours, g_ref, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-12)


def msc_module() -> types.ModuleType:
    """The seam of MSC's ``main.py`` as the tests see it (MSC's code is research-only licensed, not a fixture):
    ``run_step`` resolves ``contrastive_loss`` from the module's globals, as ``run_epoch`` does, and ``utils.Model``
    is the model class ``main`` builds."""
    msc = types.ModuleType("main")
    msc.contrastive_loss = msc_formula
    msc.utils = types.SimpleNamespace(Model=type("Model", (torch.nn.Module,), {}))
    exec("def run_step(a, b):\n    return contrastive_loss(a, b)\n", msc.__dict__)
    return msc


def test_patch_replaces_the_module_global_that_run_epoch_resolves():
    msc = msc_module()
    z1, z2 = _shifted(seed=1)
    before = msc.run_step(z1, z2)
    with patch_msc(msc, "temperature_free") as handle:
        model = msc.utils.Model()  # built after the patch: holds the loss
        assert model.cl_plugins_loss is handle.losses[0]
        assert not torch.allclose(before, msc.run_step(z1, z2))
        with pytest.raises(RuntimeError, match="already patched"):
            patch_msc(msc, "infonce")
    assert msc.contrastive_loss is msc_formula and "__init__" not in vars(msc.utils.Model)
    with patch_msc(msc, "infonce"):
        torch.testing.assert_close(msc.run_step(z1, z2), before, rtol=1e-10, atol=1e-12)
    with pytest.raises(AttributeError, match="contrastive_loss"):
        patch_msc(types.ModuleType("other"))


def test_knn_anomaly_score_known_answer():
    train = torch.tensor([[0.0, 0.0], [1.0, 0.0], [0.0, 2.0]])
    test = torch.tensor([[0.0, 0.0], [1.0, 1.0]])
    # squared distances: row 0 -> 0, 1, 4 (two nearest: 0 + 1); row 1 -> 2, 1, 2 (1 + 2)
    torch.testing.assert_close(knn_anomaly_score(train, test, k=2), torch.tensor([1.0, 3.0], dtype=torch.float64))
    torch.testing.assert_close(knn_anomaly_score(train, test, k=1), torch.tensor([0.0, 1.0], dtype=torch.float64))
    with pytest.raises(ValueError, match="k must be"):
        knn_anomaly_score(train, test, k=4)


def test_roc_auc_known_answers_and_sklearn():
    assert roc_auc(torch.tensor([0, 0, 1, 1]), torch.tensor([0.1, 0.4, 0.35, 0.8])) == pytest.approx(0.75)
    assert roc_auc(torch.tensor([0, 1]), torch.tensor([1.0, 1.0])) == pytest.approx(0.5)  # a tie counts one half
    assert roc_auc(torch.tensor([1, 1, 0]), torch.tensor([3.0, 2.0, 1.0])) == 1.0
    assert roc_auc(torch.tensor([1, 0]), torch.tensor([0.0, 1.0])) == 0.0
    from sklearn.metrics import roc_auc_score

    gen = torch.Generator().manual_seed(0)
    labels = torch.randint(0, 2, (300,), generator=gen)
    scores = torch.randint(0, 30, (300,), generator=gen).double()  # many ties
    assert roc_auc(labels, scores) == pytest.approx(roc_auc_score(labels.numpy(), scores.numpy()), abs=1e-12)
    with pytest.raises(ValueError, match="both classes"):
        roc_auc(torch.zeros(3), torch.rand(3))
    with pytest.raises(ValueError, match="NaN"):
        roc_auc(torch.tensor([0, 1]), torch.tensor([0.0, float("nan")]))


def test_amcl_in_msc_needs_the_feature_size():
    with pytest.raises(ValueError, match="dim="):
        MSCContrastiveLoss("amcl")
    z1, z2 = _shifted()
    assert torch.isfinite(MSCContrastiveLoss("amcl", dim=32)(z1.float(), z2.float()))
