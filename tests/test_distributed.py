"""Two gloo processes on CPU with different inputs equal the single-process global batch.

Convention (see cl_plugins.distributed): every rank returns the global loss value; the gradient
reaching rank r's inputs is world_size x the global gradient's slice, so that DDP's averaging
gives exactly the single-process parameter gradient (checked with real DDP below).
"""

from __future__ import annotations

import copy
import subprocess
import sys

import pytest
import torch
from torch.nn.parallel import DistributedDataParallel as DDP

import cl_plugins as clp
from tests import ROOT
from tests.dist_utils import run_distributed, split

pytestmark = pytest.mark.distributed

N, D, K = 8, 5, 6
CASES = [
    ("infonce", {}, "simclr", {}),
    ("infonce", {}, "cross_view", {}),
    ("infonce", {}, "cross_view", {"symmetric": True}),
    ("infonce", {"hard_negative_weight": 0.2}, "cross_view", {"hard": True}),
    ("infonce", {}, "queue", {"symmetric": True}),
    ("dcl", {}, "simclr", {}),
    ("dcl", {"sigma": 0.5}, "simclr", {}),  # DCLW: its weights' softmax spans the global batch
    ("dcl", {"sigma": 0.5, "kernel": "stream"}, "queue", {"symmetric": True}),
    ("macl", {}, "simclr", {}),
    ("macl", {"tau0": 0.05, "alpha": 2.0, "a0": 0.8}, "cross_view", {}),
    ("macl", {}, "queue", {}),
    ("dystress", {}, "simclr", {}),
    ("dystress", {}, "cross_view", {"symmetric": True}),
    ("dual_temperature", {}, "cross_view", {"symmetric": True}),
    ("dual_temperature", {}, "simclr", {}),
    ("temperature_free", {}, "simclr", {}),
    ("temperature_free", {}, "cross_view", {}),
    ("flatnce", {}, "simclr", {}),
    ("cosine_schedule", {}, "simclr", {}),
    # scalar temperatures on the streaming kernel (per-pair strategies and hard-negative biases stream by default)
    ("infonce", {"kernel": "stream"}, "simclr", {}),
    ("macl", {"kernel": "stream"}, "cross_view", {"symmetric": True}),
    ("dual_temperature", {"kernel": "stream"}, "simclr", {}),
    # label_policy="exclude": labels gathered with the candidates, so each rank excludes every rank's same-label rows
    ("macl", {"label_policy": "exclude"}, "simclr", {"labels": True}),
    ("dystress", {"label_policy": "exclude", "kernel": "stream"}, "cross_view", {"symmetric": True, "labels": True}),
    ("infonce", {"label_policy": "exclude", "kernel": "fused"}, "queue", {"labels": True}),
    # labels as positives: every rank's same-label rows are positives; "pair" averages over the global batch's pairs
    ("macl", {"label_policy": "positives_out"}, "simclr", {"labels": True}),
    ("dual_temperature", {"label_policy": "positives_in", "kernel": "stream"}, "cross_view",
     {"symmetric": True, "labels": True}),
    ("infonce", {"label_policy": "positives_pair", "kernel": "fused"}, "queue", {"labels": True}),
    ("dcl", {"sigma": 0.5, "label_policy": "positives_pair"}, "simclr", {"labels": True}),
    ("temperature_free", {"label_policy": "positives_out", "kernel": "stream"}, "simclr", {"labels": True}),
]
LABELS = torch.tensor([0, 1, 0, 2, 1, 3, 2, 0])  # N = 8 pairs
QUEUE_LABELS = torch.tensor([1, 0, 4, 2, 2, 3, 0, 5])  # the queue's 8 rows


def _data(seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(N, D, generator=g, dtype=torch.float64) for _ in range(4))


def _build(name, kwargs, layout, extra):
    sym = {"symmetric": True} if extra.get("symmetric") else {}  # (extra's "labels": passed in the call)
    return clp.build_loss(name, layout=layout, **sym, **kwargs).double()


def _call(loss_fn, z1, z2, hard, queue, extra, layout, rows=slice(None)):
    kw = {}
    if extra.get("labels"):
        kw["labels"] = LABELS[rows]
        if layout == "queue":
            kw["queue_labels"] = QUEUE_LABELS
    if extra.get("hard"):
        kw["hard_negatives"] = hard
    if layout == "queue":
        kw["queue"] = queue
    return loss_fn(z1, z2, **kw)


def _rank_losses(rank, world, uneven):
    z1, z2, hard, queue = _data()
    rows = split(N, world, uneven)[rank]
    out = []
    for name, kwargs, layout, extra in CASES:
        a = z1[rows].clone().requires_grad_()
        b = z2[rows].clone().requires_grad_()
        h = hard[rows].clone().requires_grad_()
        loss_fn = _build(name, kwargs, layout, extra)
        loss = _call(loss_fn, a, b, h, queue, extra, layout, rows)
        loss.backward()
        out.append((float(loss.detach()), a.grad, b.grad, h.grad if extra.get("hard") else None, loss_fn.stats))
    return out


@pytest.mark.parametrize("uneven", [False, True], ids=["even", "uneven"])
def test_every_strategy_equals_the_global_batch(uneven):
    results = run_distributed(_rank_losses, uneven)
    z1, z2, hard, queue = _data()
    slices = split(N, 2, uneven)
    for i, (name, kwargs, layout, extra) in enumerate(CASES):
        a, b, h = (t.clone().requires_grad_() for t in (z1, z2, hard))
        loss_fn = _build(name, kwargs, layout, extra)
        loss = _call(loss_fn, a, b, h, queue, extra, layout)
        loss.backward()
        for rank, sl in enumerate(slices):
            value, ga, gb, gh, stats = results[rank][i]
            label = f"{name}/{layout}/{extra} rank {rank}"
            assert value == pytest.approx(float(loss.detach()), rel=1e-12), label
            torch.testing.assert_close(ga, 2 * a.grad[sl], msg=label)
            torch.testing.assert_close(gb, 2 * b.grad[sl], msg=label)
            if gh is not None:
                torch.testing.assert_close(gh, 2 * h.grad[sl], msg=label)
            if name == "macl" and layout != "queue":
                # MACL's alignment and temperature are those of the global batch
                assert stats["batch_alignment"] == pytest.approx(loss_fn.stats["batch_alignment"], rel=1e-12)
                assert stats["tau_mean"] == pytest.approx(loss_fn.stats["tau_mean"], rel=1e-12)


# ---------------------------------------------------------------------------- real DDP
def _make(loss_name, loss_kwargs, seed=0):
    torch.manual_seed(seed)
    model = torch.nn.Linear(D, 6).double()
    dim = 6
    if loss_name == "amcl":
        loss_fn = clp.build_loss("amcl", dim=dim, heads=2, proj_dim=4, hidden=8, **loss_kwargs).double()
    else:
        loss_fn = clp.build_loss(loss_name, **loss_kwargs).double()
    return torch.nn.ModuleDict({"model": model, "loss": loss_fn})


class _Pair(torch.nn.Module):
    """Model + loss in one DDP module, so a learned temperature is averaged like a weight."""

    def __init__(self, modules: torch.nn.ModuleDict) -> None:
        super().__init__()
        self.modules_ = modules

    def forward(self, x1, x2):
        return self.modules_["loss"](self.modules_["model"](x1), self.modules_["model"](x2))


def _ddp_rank(rank, world, loss_name, loss_kwargs):
    x1, x2, _, _ = _data(1)
    sl = split(N, world, False)[rank]
    modules = _make(loss_name, loss_kwargs)
    wrapped = DDP(_Pair(modules))
    opt = torch.optim.SGD(wrapped.parameters(), lr=0.5)
    loss = wrapped(x1[sl], x2[sl])
    loss.backward()
    grads = [p.grad.clone() for p in modules.parameters()]
    opt.step()
    return float(loss.detach()), grads, [p.detach().clone() for p in modules.parameters()], modules["loss"].stats


@pytest.mark.parametrize(
    "loss_name,loss_kwargs",
    [
        ("infonce", {}),
        ("macl", {}),
        ("learnable", {"init_tau": 0.2}),
        ("amcl", {}),
        ("amcl", {"form": "mle"}),
        ("amcl", {"form": "eq2.1"}),
        ("amcl", {"form": "topk", "topk": 3}),
        ("dual_temperature", {"layout": "cross_view", "symmetric": True}),
    ],
)
@pytest.mark.filterwarnings("ignore:amcl form")
def test_ddp_parameter_gradients_equal_single_process(loss_name, loss_kwargs):
    results = run_distributed(_ddp_rank, loss_name, loss_kwargs)
    x1, x2, _, _ = _data(1)
    modules = _make(loss_name, loss_kwargs)
    pair = _Pair(modules)
    opt = torch.optim.SGD(pair.parameters(), lr=0.5)
    loss = pair(x1, x2)
    loss.backward()
    grads = [p.grad.clone() for p in modules.parameters()]
    opt.step()
    params = [p.detach().clone() for p in modules.parameters()]
    for value, g_rank, p_rank, _ in results:
        assert value == pytest.approx(float(loss.detach()), rel=1e-12)
        for a, b in zip(g_rank, grads):
            torch.testing.assert_close(a, b)
        for a, b in zip(p_rank, params):  # temperatures agree across ranks and with 1 process
            torch.testing.assert_close(a, b)
    if loss_name == "learnable":
        assert float(results[0][2][-1]) == float(results[1][2][-1])


# ---------------------------------------------------------------------------- Accelerate
def _accelerate_fn():
    from accelerate import Accelerator

    accelerator = Accelerator(cpu=True)
    x1, x2, _, _ = _data(2)
    x1, x2 = x1.float(), x2.float()
    torch.manual_seed(0)
    model = torch.nn.Linear(D, 6)
    loss_fn = clp.build_loss("learnable", init_tau=0.2)
    reference = copy.deepcopy(torch.nn.ModuleList([model, loss_fn]))
    pair = _Pair(torch.nn.ModuleDict({"model": model, "loss": loss_fn}))
    opt = torch.optim.SGD(pair.parameters(), lr=0.5)
    pair, opt = accelerator.prepare(pair, opt)
    sl = split(N, accelerator.num_processes, False)[accelerator.process_index]
    loss = pair(x1[sl], x2[sl])
    accelerator.backward(loss)
    opt.step()

    reference[1].gather_distributed = False  # the whole batch is already on this rank
    ref_pair = _Pair(torch.nn.ModuleDict({"model": reference[0], "loss": reference[1]}))
    ref_opt = torch.optim.SGD(ref_pair.parameters(), lr=0.5)
    ref_loss = ref_pair(x1, x2)
    ref_loss.backward()
    ref_opt.step()
    assert accelerator.num_processes == 2
    assert abs(float(loss.detach()) - float(ref_loss.detach())) < 1e-5
    for a, b in zip(accelerator.unwrap_model(pair).parameters(), ref_pair.parameters()):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


def test_under_accelerate_debug_launcher():
    # debug_launcher forks; forking a pytest process whose torch thread pools are already
    # running can deadlock, so launch it from a fresh interpreter
    code = (
        "from accelerate import debug_launcher\n"
        "from tests.test_distributed import _accelerate_fn\n"
        "debug_launcher(_accelerate_fn, num_processes=2)\n"
        "print('ACCELERATE OK')\n"
    )
    root = ROOT
    proc = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and "ACCELERATE OK" in proc.stdout, proc.stderr[-3000:]


def _gather_rank(rank, world):
    x = torch.arange(3 * (rank + 1), dtype=torch.float64).reshape(-1, 1) + 10 * rank
    x.requires_grad_()
    gathered, offset = clp.gather_with_grad(x)
    (gathered * torch.arange(1, gathered.shape[0] + 1, dtype=torch.float64)[:, None]).sum().backward()
    return gathered.detach(), offset, x.grad


def test_gather_with_grad_uneven():
    (g0, o0, d0), (g1, o1, d1) = run_distributed(_gather_rank)
    expected = torch.cat([torch.arange(3.0), torch.arange(6.0) + 10]).double()[:, None]
    torch.testing.assert_close(g0, expected)
    torch.testing.assert_close(g1, expected)
    assert (o0, o1) == (0, 3)
    weights = torch.arange(1, 10, dtype=torch.float64)[:, None]
    torch.testing.assert_close(d0, 2 * weights[:3])  # gradient summed over both ranks
    torch.testing.assert_close(d1, 2 * weights[3:])


def _disagreeing_rank(rank, world, case):
    """What each rank sees when the processes disagree (``case``), or its loss when they may differ (a local batch
    of 1 under cross_view)."""
    torch.manual_seed(rank)
    width = 8 if not case.endswith("width") or rank == 0 else 6
    z1, z2 = torch.randn(4, width), torch.randn(4, width)
    layout = "cross_view" if case == "layout" and rank == 1 else "simclr"
    if case == "dtype" and rank == 1:
        z1, z2 = z1.double(), z2.double()
    if case.endswith("nan") and rank == 1:
        z1[2, 0] = float("nan")
    if case == "empty" and rank == 1:
        z1, z2 = z1[:0], z2[:0]
    try:
        if case == "queue":
            clp.FeatureQueue(16, 8).enqueue(torch.randn(3, 8 if rank == 0 else 5))
            return "no error"
        if case == "one_row":
            torch.manual_seed(0)
            z1, z2 = torch.randn(3, 8, dtype=torch.float64), torch.randn(3, 8, dtype=torch.float64)
            rows = slice(0, 1) if rank == 0 else slice(1, 3)
            return float(clp.build_loss("infonce", layout="cross_view").double()(z1[rows], z2[rows]))
        if case.startswith("queue_"):  # MoCo's layout gathers nothing: its agreement check is its first collective
            clp.build_loss("macl", layout="queue")(z1, z2, queue=torch.randn(5, width))
            return "no error"
        if case == "hard_shape":  # a layout's own argument check, on one rank
            hard = torch.randn(4 if rank == 0 else 3, width)
            clp.build_loss("infonce", layout="cross_view", hard_negative_weight=0.2)(z1, z2, hard_negatives=hard)
            return "no error"
        clp.build_loss("infonce", layout=layout)(z1, z2)
        return "no error"
    except ValueError as err:
        return str(err)


@pytest.mark.distributed
@pytest.mark.parametrize(("case", "named"), [("width", "width: [8, 6]"), ("dtype", "dtype: ['float32', 'float64']"),
                                             ("layout", "call (strategy, layout"),
                                             ("queue", "width: [8, 5]"), ("queue_width", "width: [8, 6]")])  # fmt: skip
def test_processes_that_disagree_all_raise_the_same_line(case, named):
    """Not a gloo abort on one rank, nor a hang until the process-group timeout."""
    first, second = run_distributed(_disagreeing_rank, case)
    assert first == second and named in first and "\n" not in first, (first, second)


@pytest.mark.distributed
@pytest.mark.parametrize(("case", "own"), [("nan", "z1 contains NaN or inf"), ("empty", "z1 is empty"),
                                           ("queue_nan", "z1 contains NaN or inf"),
                                           ("hard_shape", "hard_negatives must have the shape")])  # fmt: skip
def test_an_input_refused_on_one_rank_stops_every_rank_in_one_line(case, own):
    """The rank with the bad input says why; the others, waiting in the first gather, stop with it."""
    first, second = run_distributed(_disagreeing_rank, case)
    assert own in second and "\n" not in second
    assert first == "rank 1 refused its input (its own error says why); every process stops with it"


@pytest.mark.distributed
def test_a_rank_with_one_row_is_fine_when_the_global_batch_has_negatives():
    torch.manual_seed(0)
    z1, z2 = torch.randn(3, 8, dtype=torch.float64), torch.randn(3, 8, dtype=torch.float64)
    expected = float(clp.build_loss("infonce", layout="cross_view").double()(z1, z2))
    first, second = run_distributed(_disagreeing_rank, "one_row")
    assert first == pytest.approx(second) and first == pytest.approx(expected)


def _labelled_queue_rank(rank, world):
    torch.manual_seed(0)
    queue = clp.FeatureQueue(8, 3, labels=True)
    queue.enqueue(torch.randn(2 + rank, 3), torch.arange(2 + rank) + 10 * rank)
    return queue.get_labels().tolist(), int(queue.ptr)


@pytest.mark.distributed
def test_a_labelled_queue_gathers_every_ranks_keys_and_labels():
    first, second = run_distributed(_labelled_queue_rank)
    assert first == second == ([0, 1, 10, 11, 12, -1, -1, -1], 5)
