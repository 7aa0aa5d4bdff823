"""Measured parity of every patch with the real upstream code (``../shared/upstream``), float64, ``infonce``.

Prints a markdown table: the largest error relative to the scale, max |ours - theirs| / max |theirs|, of the
loss and of all parameter gradients taken together (a parameter whose gradient is numerically zero, ~1e-17,
would otherwise show its rounding as a relative error of order 1), one process, and under 2 gloo
processes with DDP (host scale vs the unpatched run, ``global_batch=True`` vs one process on the global
batch). Uses the test suite's fixtures:

    python tests/reports/patch_parity.py
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from cl_plugins.integrations.hosts import patch_targets  # noqa: E402
from cl_plugins.integrations.hosts.dcrec.patch import patch_dcrec  # noqa: E402
from cl_plugins.integrations.hosts.graph.patch import (  # noqa: E402
    patch_grace,
    patch_graphcl_transfer,
    patch_graphcl_tu,
    patch_pygcl,
)
from cl_plugins.integrations.hosts.mabel.patch import patch_mabel  # noqa: E402
from cl_plugins.integrations.hosts.msc.patch import patch_msc  # noqa: E402
from cl_plugins.integrations.hosts.simcse.patch import patch_simcse  # noqa: E402
from tests.dist_utils import run_distributed  # noqa: E402
from tests.integrations import upstream  # noqa: E402
from tests.integrations.hosts import test_patch_distributed as distributed  # noqa: E402
from tests.integrations.hosts.graph import test_graph_patch as graph  # noqa: E402
from tests.integrations.hosts.mabel import test_mabel_patch as mabel  # noqa: E402
from tests.integrations.hosts.msc import test_msc as msc  # noqa: E402
from tests.integrations.hosts.simcse import test_simcse_patch as simcse  # noqa: E402


def rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).abs().max() / b.abs().max().clamp_min(1e-300))


def rel_all(ours: list[torch.Tensor], theirs: list[torch.Tensor]) -> float:
    assert len(ours) == len(theirs)
    return rel(torch.cat([g.flatten() for g in ours]), torch.cat([g.flatten() for g in theirs]))


def grads(model: torch.nn.Module, value: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
    params = [p for n, p in model.named_parameters() if not n.startswith("cl_plugins_loss.")]
    pairs = zip(params, torch.autograd.grad(value, params, allow_unused=True), strict=True)
    return value.detach(), [torch.zeros_like(p) if g is None else g for p, g in pairs]


def compare(model: torch.nn.Module, patch, step) -> tuple[float, float]:  # noqa: ANN001
    loss_o, g_o = grads(model, step(model))
    with patch(model, "infonce"):
        loss_p, g_p = grads(model, step(model))
    return rel(loss_p, loss_o), rel_all(g_p, g_o)


def _inputs_compare(step, patched, inputs: tuple[torch.Tensor, ...]) -> tuple[float, float]:  # noqa: ANN001
    """``step(*inputs)`` unpatched and inside the ``patched()`` context: the loss and the inputs' gradients."""
    loss_o = step(*inputs)
    g_o = torch.autograd.grad(loss_o, inputs)
    with patched():
        loss_p = step(*inputs)
        g_p = torch.autograd.grad(loss_p, inputs)
    return rel(loss_p.detach(), loss_o.detach()), rel_all(list(g_p), list(g_o))


def _simcse() -> dict[str, tuple[float, float]]:
    rows = {}
    for which in ("github", "pypi"):
        module = simcse.simcse_module(which)
        ids, mask = simcse.make_batch(3)
        rows[f"SimCSE ({which}, cls, hard negative 0.5)"] = compare(
            simcse.make_model(module, hard_negative_weight=0.5), patch_simcse,
            lambda m, ids=ids, mask=mask: m(input_ids=ids, attention_mask=mask).loss)  # fmt: skip
    return rows


def _mabel() -> dict[str, tuple[float, float]]:
    batch, mlm_batch = mabel.make_batch()
    model = mabel.make_model(cl_loss=True, a1_loss=True, do_mlm=True)
    return {"MABEL (contrastive + a1 + MLM)": compare(model, patch_mabel, lambda m: m(**batch, **mlm_batch).loss)}


def _graphcl_tu() -> dict[str, tuple[float, float]]:
    torch.manual_seed(0)
    model = upstream.graphcl_tu().simclr(8, 2).double()
    return {"GraphCL TU (loss_cal)": compare(model, patch_graphcl_tu, graph.graphcl_tu_step)}


def _graphcl_transfer() -> dict[str, tuple[float, float]]:
    torch.manual_seed(0)
    model = upstream.graphcl_transfer().graphcl(graph.StandInGNN()).double()
    return {"GraphCL transfer (loss_cl)": compare(model, patch_graphcl_transfer, graph.graphcl_transfer_step)}


def _grace() -> dict[str, tuple[float, float]]:
    return {"GRACE (loss, batch_size 0)": compare(graph.grace_model(), patch_grace, graph.grace_step),
            "GRACE (loss, batch_size 3)": compare(graph.grace_model(), patch_grace,
                                                  lambda m: graph.grace_step(m, True, 3))}  # fmt: skip


def _pygcl() -> dict[str, tuple[float, float]]:
    losses, models = graph._import_pygcl()
    contrast = models.DualBranchContrast(losses.InfoNCE(tau=0.2), mode="L2L", intraview_negs=True)
    inputs = tuple(t.requires_grad_() for t in graph._pair(16))
    # exclude_self=False keeps PyGCL's anchor-with-itself negative: its own loss (the default drops it, GRACE's)
    row = _inputs_compare(lambda a, b: contrast(h1=a, h2=b),
                          lambda: patch_pygcl(contrast, "infonce", exclude_self=False), inputs)  # fmt: skip
    return {"PyGCL (DualBranchContrast InfoNCE, τ 0.2, L2L, intra-view negatives, exclude_self=False)": row}


def _msc() -> dict[str, tuple[float, float]]:
    module = msc.msc_module()  # MSC's formula: its code is research-only licensed, not a fixture
    row = _inputs_compare(module.run_step, lambda: patch_msc(module, "infonce"), msc._shifted(seed=1))
    return {"MSC (contrastive_loss, τ 0.25; its formula)": row}


def _dcrec() -> dict[str, tuple[float, float]]:
    layer = upstream.dcrec_layers().CLLayer(16, tau=0.2).double()
    inputs = tuple(torch.randn(24, 16, dtype=torch.float64, requires_grad=True) for _ in range(2))
    row = _inputs_compare(lambda a, b: layer.vanilla_loss(a, b).sum(), lambda: patch_dcrec(layer, "infonce"), inputs)
    return {"DCRec (vanilla_loss, τ 0.2; upstream adds 1e-8 in the log)": row}


#: registry patch target -> its measured rows; every target the host registry declares has one
ROWS = {"simcse": _simcse, "mabel": _mabel, "graphcl_tu": _graphcl_tu, "graphcl_transfer": _graphcl_transfer,
        "grace": _grace, "pygcl": _pygcl, "msc": _msc, "dcrec": _dcrec}


def single_process() -> dict[str, tuple[float, float]]:
    """Every patch target of the host registry, in its order."""
    missing = sorted(set(patch_targets()) - set(ROWS))
    if missing:
        raise SystemExit(f"the host registry declares patch targets this report does not measure: {missing}")
    rows: dict[str, tuple[float, float]] = {}
    for target in patch_targets():
        torch.manual_seed(0)
        rows.update(ROWS[target]())
    return rows


def two_processes() -> dict[str, tuple[float, float]]:
    rows = {}
    for target in distributed.TARGETS:
        ranks = run_distributed(distributed._worker, target, world=2)
        model, _, step = distributed.TARGETS[target](None)
        single = distributed._grads(model, step)
        names = sorted(single)
        host = max(rel_all([r["host"][n] for n in names], [r["original"][n] for n in names]) for r in ranks)
        glob = max(rel_all([r["global_batch"][n] for n in names], [single[n] for n in names]) for r in ranks)
        rows[target] = (host, glob)
    return rows


def main() -> None:
    torch.manual_seed(0)
    print("| target, one process | loss | all parameter gradients |\n|---|---:|---:|")
    for name, (loss, grad) in single_process().items():
        print(f"| {name} | {loss:.1e} | {grad:.1e} |")
    print("\n| target, 2 processes (DDP) | host scale vs unpatched | global_batch vs 1 process |\n|---|---:|---:|")
    for name, (host, glob) in two_processes().items():
        print(f"| {name} | {host:.1e} | {glob:.1e} |")


if __name__ == "__main__":
    main()
