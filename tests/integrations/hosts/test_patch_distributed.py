"""Patches under 2 gloo processes with different inputs per rank, on the real upstream code, wrapped in DDP.

By default a patched run's parameter gradients equal the unpatched upstream run's (the host's own scale:
SimCSE and MABEL gather without gradient, so they train at 1/W of the global-batch gradient; GraphCL
contrasts each process's batch). ``global_batch=True`` gives the single-process gradient of the global batch.
"""

from __future__ import annotations

import pytest
import torch
from torch.nn.parallel import DistributedDataParallel as DDP

from tests.dist_utils import run_distributed

pytest.importorskip("transformers")
pytest.importorskip("torch_geometric")

from cl_plugins.integrations.hosts.graph.patch import patch_graphcl_tu  # noqa: E402
from cl_plugins.integrations.hosts.mabel.patch import patch_mabel  # noqa: E402
from cl_plugins.integrations.hosts.simcse.patch import patch_simcse  # noqa: E402
from tests.integrations import upstream  # noqa: E402
from tests.integrations.hosts.graph import test_graph_patch as graph  # noqa: E402
from tests.integrations.hosts.mabel import test_mabel_patch as mabel  # noqa: E402
from tests.integrations.hosts.simcse import test_simcse_patch as simcse  # noqa: E402

WORLD = 2


def _simcse(rank: int | None):
    model = simcse.make_model(upstream.simcse_github(), hard_negative_weight=0.5)
    batches = [simcse.make_batch(num_sent=3, seed=10 + r, batch=3) for r in range(WORLD)]
    ids, mask = batches[rank] if rank is not None else [torch.cat(t) for t in zip(*batches, strict=True)]
    return model, patch_simcse, lambda m: m(input_ids=ids, attention_mask=mask).loss


def _mabel(rank: int | None):
    model = mabel.make_model(cl_loss=True, a1_loss=True, align_temp=0.3)
    batches = [mabel.make_batch(seed=10 + r, batch=3)[0] for r in range(WORLD)]
    batch = batches[rank] if rank is not None else {k: torch.cat([b[k] for b in batches]) for k in batches[0]}
    return model, patch_mabel, lambda m: m(**batch).loss


def _graphcl(rank: int | None):
    torch.manual_seed(0)
    # eval: GIN's BatchNorm uses running statistics, so each graph's embedding does not depend on its batch
    model = upstream.graphcl_tu().simclr(hidden_dim=8, num_gc_layers=2).double().eval()
    batches = []
    for r in range(WORLD):  # both views of a rank's 4 graphs in one forward (DDP wants one forward per backward)
        x, ei, batch = graph._graphs(seed=10 + r)
        x2 = x * 0.9 + 0.1 * torch.cos(3 * x)
        batches.append((torch.cat([x, x2]), torch.cat([ei, ei + x.size(0)], 1), torch.cat([batch, batch + 4])))

    def views(m, r):
        y = m(*batches[r], 8)
        return y[:4], y[4:]

    def step(m):
        inner = m.module if isinstance(m, DDP) else m
        if rank is not None:
            return inner.loss_cal(*views(m, rank))
        y1, y2 = zip(*(views(m, r) for r in range(WORLD)), strict=True)
        return inner.loss_cal(torch.cat(y1), torch.cat(y2))

    return model, patch_graphcl_tu, step


TARGETS = {"simcse": _simcse, "mabel": _mabel, "graphcl_tu": _graphcl}


def _grads(model, step):
    model.zero_grad()
    step(model).backward()
    inner = model.module if isinstance(model, DDP) else model
    return {n: p.grad.clone() for n, p in inner.named_parameters() if p.grad is not None}


def _worker(rank: int, world: int, target: str) -> dict[str, dict[str, torch.Tensor]]:
    out = {}
    for mode in ("original", "host", "global_batch"):
        model, patch, step = TARGETS[target](rank)
        handle = None if mode == "original" else patch(model, "infonce", global_batch=mode == "global_batch")
        ddp = DDP(model, find_unused_parameters=True)  # BERT's unused embeddings rows are fine; pooler is absent
        out[mode] = _grads(ddp, step)
        del ddp
        if handle is not None:
            handle.undo()
    return out


@pytest.mark.distributed
@pytest.mark.parametrize("target", list(TARGETS))
def test_host_scale_by_default_and_the_global_batch_on_request(target):
    ranks = run_distributed(_worker, target, world=WORLD)
    model, _, step = TARGETS[target](None)
    single = _grads(model, step)  # one process, the global batch, unpatched (= patched at infonce)
    host_factor = 1.0 / WORLD if target in ("simcse", "mabel") else None
    for rank in ranks:
        assert rank["original"].keys() == rank["host"].keys() == rank["global_batch"].keys()
        for name, g in rank["original"].items():
            torch.testing.assert_close(rank["host"][name], g, rtol=1e-10, atol=1e-13, msg=lambda m, n=name: f"{n}: {m}")
            torch.testing.assert_close(rank["global_batch"][name], single[name], rtol=1e-10, atol=1e-13,
                                       msg=lambda m, n=name: f"{n}: {m}")  # fmt: skip
            if host_factor is not None:  # what the docs say: the host trains at 1/W of the global-batch gradient
                torch.testing.assert_close(g, single[name] * host_factor, rtol=1e-10, atol=1e-13)
