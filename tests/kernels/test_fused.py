"""The fused scalar-temperature path equals the dense path (values and gradients)."""

from __future__ import annotations

import pytest
import torch

import cl_plugins as clp
from cl_plugins.kernels import fused

# every registered strategy that only divides the cosine matrix by a scalar, at a host τ of 0.2
SCALAR = [(n, {}) for n in clp.available_losses() if clp.get_loss_class(n).scalar_temperature]
LAYOUTS = [("simclr", {}), ("cross_view", {"symmetric": True}), ("queue", {})]


@pytest.mark.parametrize("chunk", [7, 1 << 18], ids=["many-chunks", "one-chunk"])
@pytest.mark.parametrize("layout,extra", LAYOUTS, ids=[x[0] for x in LAYOUTS])
@pytest.mark.parametrize("name,kwargs", SCALAR, ids=[x[0] for x in SCALAR])
def test_fused_equals_dense(name, kwargs, layout, extra, chunk, monkeypatch):
    monkeypatch.setattr(fused, "CHUNK_ELEMENTS", chunk)
    torch.manual_seed(0)
    z1 = torch.randn(6, 5, dtype=torch.float64, requires_grad=True)
    z2 = torch.randn(6, 5, dtype=torch.float64, requires_grad=True)
    call = {"queue": torch.randn(9, 5, dtype=torch.float64)} if layout == "queue" else {}
    outs = []
    for kernel in ("fused", "dense"):
        loss_fn = clp.build_host_loss(name, host_tau=0.2, layout=layout, kernel=kernel, **extra, **kwargs).double()
        loss = loss_fn(z1, z2, **call)
        params = [z1, z2, *loss_fn.parameters()]
        outs.append((loss.detach(), torch.autograd.grad(loss, params), loss_fn.stats))
    (l1, g1, s1), (l2, g2, s2) = outs
    torch.testing.assert_close(l1, l2, rtol=1e-12, atol=1e-12)
    for a, b in zip(g1, g2):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)
    assert s1.keys() == s2.keys()
    for k in s1:
        assert s1[k] == pytest.approx(s2[k], rel=1e-9, abs=1e-12), k


def test_fused_backward_twice_is_refused():
    loss = clp.build_loss("infonce")(torch.randn(4, 3, requires_grad=True), torch.randn(4, 3))
    loss.backward(retain_graph=True)
    with pytest.raises(RuntimeError, match="kernel='dense'"):
        loss.backward()
    dense = clp.build_loss("infonce", kernel="dense")(torch.randn(4, 3, requires_grad=True), torch.randn(4, 3))
    dense.backward(retain_graph=True)
    dense.backward()


def test_non_scalar_strategies_do_not_use_the_fused_path():
    for name in ("dystress", "temperature_free", "amcl"):
        assert not clp.get_loss_class(name).scalar_temperature


@pytest.mark.parametrize("chunk", [None, 16])
@pytest.mark.parametrize("policy", [None, "exclude", "positives_out"])
@pytest.mark.parametrize("name", ["infonce", "learnable", "dual_temperature"])
def test_clips_two_directions_take_one_buffer_and_equal_dense(name, policy, chunk, monkeypatch):
    """CLIP's bonded directions at a scalar temperature: one :class:`fused.PairLSE` call (both LSEs from one
    product), values and every gradient equal to the dense path; labels included; in one row chunk or several.
    Dual temperature's extra scale runs the directions apart."""
    if chunk is not None:
        monkeypatch.setattr(fused, "CHUNK_ELEMENTS", chunk)  # 2 rows a chunk of the [8, 8] buffer
    calls = []
    original = fused.PairLSE.apply
    monkeypatch.setattr(fused.PairLSE, "apply", lambda *a: calls.append(1) or original(*a))
    torch.manual_seed(0)
    z1, z2 = (torch.randn(8, 5, dtype=torch.float64, requires_grad=True) for _ in range(2))
    call = {} if policy is None else {"labels": torch.tensor([0, 1, 2, 0, 1, 2, 3, 3])}
    outs = []
    for kernel in ("fused", "dense"):
        loss_fn = clp.build_host_loss(name, host_tau=0.2, layout="cross_view", symmetric=True, kernel=kernel,
                                      label_policy=policy).double()  # fmt: skip
        loss = loss_fn(z1, z2, **call)
        outs.append((loss.detach(), torch.autograd.grad(loss, [z1, z2, *loss_fn.parameters()])))
    assert len(calls) == (0 if name == "dual_temperature" else 1)
    torch.testing.assert_close(outs[0][0], outs[1][0], rtol=1e-12, atol=1e-12)
    for a, b in zip(outs[0][1], outs[1][1], strict=True):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)


def test_clips_one_buffer_is_declined_without_a_bound(monkeypatch):
    """Logits of unknown bound need a maximum per row and per column: the directions then run apart, equal."""
    from cl_plugins.kernels import contract

    monkeypatch.setattr(contract, "BOUND_FROM_VALUES_ON_CPU", False)
    calls = []
    original = fused.PairLSE.apply
    monkeypatch.setattr(fused.PairLSE, "apply", lambda *a: calls.append(1) or original(*a))
    z1, z2 = torch.randn(8, 5), torch.randn(8, 5)
    learned = clp.build_host_loss("learnable", host_tau=0.2, layout="cross_view", symmetric=True)
    dense = clp.build_host_loss("learnable", host_tau=0.2, layout="cross_view", symmetric=True,
                                kernel="dense")  # fmt: skip
    torch.testing.assert_close(learned(z1, z2), dense(z1, z2))
    assert calls == []


def test_clips_one_buffer_refuses_a_second_backward():
    loss_fn = clp.build_host_loss("infonce", host_tau=0.2, layout="cross_view", symmetric=True)
    loss = loss_fn(torch.randn(4, 3, requires_grad=True), torch.randn(4, 3, requires_grad=True))
    loss.backward(retain_graph=True)
    with pytest.raises(RuntimeError, match="kernel='dense'"):
        loss.backward()


@pytest.mark.parametrize("compiled", [False, True])
def test_macls_two_directions_share_one_temperature_and_one_buffer(compiled, monkeypatch):
    """MACL adapts one temperature to CLIP's shared positives: both directions divide by that one tensor, so one
    :class:`fused.PairLSE` serves them on the path a GPU and ``torch.compile`` take (the bound from its declared
    floor, not read from the values); compiled, the traced graph runs it and no one-direction kernel."""
    from cl_plugins.kernels import contract

    monkeypatch.setattr(contract, "BOUND_FROM_VALUES_ON_CPU", False)
    torch._dynamo.reset()
    kernels: list[str] = []  # where each autograd function of the traced graph was called from

    def backend(gm, example_inputs):  # type: ignore[no-untyped-def]
        kernels.extend(n.meta.get("stack_trace", "") for n in gm.graph.nodes if "autograd_function" in str(n.target))
        return gm.forward

    calls = []
    original = fused.PairLSE.apply
    monkeypatch.setattr(fused.PairLSE, "apply", lambda *a: calls.append(1) or original(*a))
    loss_fn = clp.build_host_loss("macl", host_tau=0.1, layout="cross_view", symmetric=True)
    z1, z2 = torch.randn(8, 5, requires_grad=True), torch.randn(8, 5, requires_grad=True)
    run = torch.compile(loss_fn, fullgraph=True, backend=backend) if compiled else loss_fn
    dense = clp.build_host_loss("macl", host_tau=0.1, layout="cross_view", symmetric=True, kernel="dense")
    torch.testing.assert_close(run(z1, z2), dense(z1, z2))
    if compiled:
        assert sum("PairLSE.apply" in k for k in kernels) == 1 and not any("NegativeLSE" in k for k in kernels)
    else:
        assert calls == [1]
    torch._dynamo.reset()


@pytest.mark.parametrize("layout", ["simclr", "clip"])
def test_compiled_the_one_buffer_is_one_chunk(layout, monkeypatch):
    """Eagerly the one-buffer kernels walk row chunks that stay in cache; compiled, each in-place pass over a chunk
    would become a copy of the whole buffer, so the traced graph takes the buffer whole: one ``exp_``, values equal."""
    monkeypatch.setattr(fused, "CHUNK_ELEMENTS", 32)  # 2 rows a chunk of these [16, 16] buffers
    torch._dynamo.reset()
    traced: list[str] = []

    def backend(gm, example_inputs):  # type: ignore[no-untyped-def]
        traced.extend(str(n.target) for n in gm.graph.nodes if n.op in ("call_method", "call_function"))
        return gm.forward

    arguments = {"layout": "simclr"} if layout == "simclr" else {"layout": "cross_view", "symmetric": True}
    loss_fn = clp.build_host_loss("infonce", host_tau=0.2, kernel="fused", **arguments)
    z = torch.randn(2, 16 if layout == "clip" else 8, 6)
    got = torch.compile(loss_fn, fullgraph=True, backend=backend)(z[0], z[1])
    torch.testing.assert_close(got, loss_fn(z[0], z[1]))
    assert traced.count("exp_") == 1
    torch._dynamo.reset()
