"""Every strategy x layout x kernel on the device of ``--device`` (default: cpu; ``pytest --device cuda`` on a GPU)
against the same loss in float64 on the CPU, which the reference tests tie to the papers' formulas: values,
gradients of the inputs and of the strategy's parameters, diagnostics; bf16 and fp16 autocast; ``FeatureQueue``
and the per-step hook on the device; and, on the CPU, no tensor created without ``device=`` on the per-step path
(such a tensor lands on the CPU and fails only on a GPU)."""

from __future__ import annotations

import warnings

import pytest
import torch

import cl_plugins as clp
from cl_plugins.base import KERNELS
from cl_plugins.kernels import triton_lse

N, D, K = 9, 6, 7
LAYOUTS = {
    "simclr": ({"layout": "simclr"}, ()),
    "grace": ({"layout": "grace"}, ()),
    "cross_view": ({"layout": "cross_view"}, ()),
    "cross_view-symmetric": ({"layout": "cross_view", "symmetric": True}, ()),
    "cross_view-hard": ({"layout": "cross_view", "hard_negative_weight": 0.3}, ("hard_negatives",)),
    "queue": ({"layout": "queue"}, ("queue",)),
    "queue-symmetric": ({"layout": "queue", "symmetric": True}, ("queue",)),
}
CASES = [
    (name, layout, kernel)
    for name in clp.available_losses()
    for layout, (options, _) in LAYOUTS.items()
    if options["layout"] in clp.get_loss_class(name).layouts
    for kernel in KERNELS
]


def _build(name: str, layout: str, kernel: str = "auto") -> clp.ContrastiveLoss:
    options = LAYOUTS[layout][0]
    dim = {clp.get_loss_class(name).feature_dim_arg: D} if clp.get_loss_class(name).feature_dim_arg else {}
    extra = {"heads": 2, "proj_dim": 4, "hidden": 8} if dim else {}
    torch.manual_seed(0)
    return clp.build_host_loss(name, host_tau=0.2, kernel=kernel, **options, **dim, **extra)


def _inputs(seed: int = 0) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    rows = (("z1", N), ("z2", N), ("hard_negatives", N), ("queue", K))
    return {k: torch.randn(n, D, generator=g, dtype=torch.float64) for k, n in rows}


def _run(loss_fn: clp.ContrastiveLoss, layout: str, data: dict[str, torch.Tensor], device: torch.device,
         dtype: torch.dtype) -> tuple[torch.Tensor, list[torch.Tensor], dict[str, float]]:  # fmt: skip
    """Loss, gradients (inputs, then the strategy's parameters) and diagnostics, computed on ``device``."""
    loss_fn = loss_fn.to(device=device, dtype=dtype)
    leaves = {k: v.detach().to(device=device, dtype=dtype).requires_grad_(k != "queue") for k, v in data.items()}
    extra = {k: leaves[k] for k in LAYOUTS[layout][1]}
    loss = loss_fn(leaves["z1"], leaves["z2"], **extra)
    inputs = [leaves["z1"], leaves["z2"]] + ([leaves["hard_negatives"]] if "hard_negatives" in extra else [])
    grads = torch.autograd.grad(loss, inputs + list(loss_fn.parameters()))
    assert loss.device.type == device.type and all(g.device.type == device.type for g in grads)
    return loss.detach().cpu().double(), [g.cpu().double() for g in grads], dict(loss_fn.stats)


def _reference(name: str, layout: str, data: dict[str, torch.Tensor]) -> tuple:
    """The same loss (same seed, same parameters) in float64 on the CPU through the dense path: never the kernel
    under test, which may not run on the CPU (``kernel="triton"`` without the interpreter, as under ``--device
    cuda``) and would otherwise be its own reference."""
    return _run(_build(name, layout, "dense"), layout, data, torch.device("cpu"), torch.float64)


@pytest.mark.parametrize("name,layout,kernel", CASES, ids=["-".join(c) for c in CASES])
def test_float32_on_the_device_equals_float64_on_the_cpu(device, name, layout, kernel):
    loss_fn, data = _build(name, layout, kernel), _inputs()
    expected = _reference(name, layout, data)
    with warnings.catch_warnings():  # a Triton kernel that fails to compile streams: its case must fail
        warnings.filterwarnings("error", message=".*the triton kernel failed", category=RuntimeWarning)
        got = _run(loss_fn, layout, data, device, torch.float32)
    torch.testing.assert_close(got[0], expected[0], rtol=1e-5, atol=1e-5)
    for a, b in zip(got[1], expected[1], strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
    assert got[2].keys() == expected[2].keys()
    for key, value in expected[2].items():
        assert got[2][key] == pytest.approx(value, rel=1e-4, abs=1e-5), key


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("name", clp.available_losses())
def test_autocast_on_the_device_is_close_to_float64(device, name, dtype):
    """An encoder's half-precision output, as autocast gives it; the loss itself runs in float32."""
    loss_fn, data = _build(name, "simclr"), _inputs()
    expected = _reference(name, "simclr", data)
    loss_fn = loss_fn.to(device)
    enc = torch.nn.Linear(D, D, bias=False).to(device)
    with torch.no_grad():
        enc.weight.copy_(torch.eye(D))  # the identity: the half-precision rounding is the only change
    x1, x2 = (data[k].to(device, torch.float32) for k in ("z1", "z2"))
    with torch.autocast(device.type, dtype=dtype):
        z1, z2 = enc(x1), enc(x2)
        assert z1.dtype == dtype
        loss = loss_fn(z1, z2)
    assert loss.dtype == torch.float32
    loss.backward()
    assert float(loss.detach()) == pytest.approx(float(expected[0]), rel=2e-2)
    assert all(torch.isfinite(p.grad).all() for p in [*enc.parameters(), *loss_fn.parameters()])


def test_feature_queue_on_the_device_equals_the_cpu(device):
    data = _inputs()
    queues = {}
    for dev in (torch.device("cpu"), device):
        torch.manual_seed(0)
        queue = clp.FeatureQueue(K, D, gather_distributed=False).to(dev)
        for step in range(3):  # wraps around: 3 x 4 keys into 7 slots
            queue.enqueue(data["z2"][step : step + 4].to(dev, torch.float32))
        queues[dev] = (queue.get().cpu(), int(queue.ptr))
        z1, z2 = (data[k].to(dev, torch.float32) for k in ("z1", "z2"))
        loss = clp.build_loss("macl", layout="queue").to(dev)(z1, z2, queue=queue.get())
        assert loss.device.type == dev.type
    torch.testing.assert_close(queues[device][0], queues[torch.device("cpu")][0])
    assert queues[device][1] == queues[torch.device("cpu")][1]


@pytest.mark.parametrize("name", clp.available_losses())
def test_the_per_step_hook_on_the_device_equals_the_cpu(device, name):
    states = []
    for dev in (torch.device("cpu"), device):
        loss_fn = _build(name, "simclr").to(dev)
        clp.set_epoch_length(loss_fn, 4)
        with torch.no_grad():
            for p in loss_fn.parameters():
                p.add_(-20.0)  # learnable's log τ below its floor: the hook clamps it
        for _ in range(3):
            z1, z2 = (_inputs()[k].to(dev, torch.float32).requires_grad_() for k in ("z1", "z2"))
            loss_fn(z1, z2).backward()
            clp.after_optimizer_step(loss_fn)
        states.append({k: v.cpu() for k, v in loss_fn.state_dict().items()})
    for key, value in states[0].items():
        torch.testing.assert_close(states[1][key], value, msg=key)


@pytest.mark.parametrize("name,layout,kernel", CASES, ids=["-".join(c) for c in CASES])
def test_no_tensor_is_created_without_a_device_on_the_per_step_path(name, layout, kernel):
    """Factory calls without ``device=`` land on the default device: with it set to ``meta`` while CPU inputs run,
    such a tensor meets a CPU tensor and raises, as it would meet CUDA tensors on a GPU."""
    if kernel == "triton" and not triton_lse.usable_on(torch.device("cpu")):
        pytest.skip("kernel='triton' on CPU tensors needs Triton's interpreter, which --device cuda leaves off")
    loss_fn, data = _build(name, layout, kernel), _inputs()
    clp.set_epoch_length(loss_fn, 4)
    leaves = {k: v.float().requires_grad_(k != "queue") for k, v in data.items()}
    extra = {k: leaves[k] for k in LAYOUTS[layout][1]}
    with torch.device("meta"):
        loss = loss_fn(leaves["z1"], leaves["z2"], **extra)
        loss.backward()
        clp.after_optimizer_step(loss_fn)
        stats = loss_fn.stats
    assert loss.device.type == "cpu" and stats


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("name", clp.available_losses())
def test_half_precision_features_without_autocast(device, name, dtype):
    """Features of a model cast to half precision (``model.half()``, no autocast): the loss upcasts them (AMCL's
    float32 heads refused them until the GPU check's bf16 loss table ran into it)."""
    loss_fn, data = _build(name, "simclr"), _inputs()
    expected = _reference(name, "simclr", data)
    z1, z2 = (data[k].to(device, dtype).requires_grad_() for k in ("z1", "z2"))
    loss = loss_fn.to(device)(z1, z2)
    loss.backward()
    assert loss.dtype == torch.float32 and z1.grad.dtype == dtype and torch.isfinite(z1.grad).all()
    assert float(loss.detach()) == pytest.approx(float(expected[0]), rel=2e-2)
