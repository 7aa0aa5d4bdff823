"""What each strategy declares for a host codebase (``host_temperature``, ``decouplable``, ``feature_dim_arg``,
``presets``) and ``clp.build_host_loss`` over it, for every registered strategy."""

from __future__ import annotations

import sys

import pytest
import torch

import cl_plugins as clp
from tests import ROOT

NAMES = clp.available_losses()


def _views(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(6, 8, generator=g, dtype=torch.float64), torch.randn(6, 8, generator=g, dtype=torch.float64)


def _gradient(name: str, host_tau: float) -> torch.Tensor:
    z1, z2 = _views()
    z1.requires_grad_()
    torch.manual_seed(0)  # AMCL's heads
    loss = clp.build_host_loss(name, host_tau=host_tau, feature_dim=8).double()(z1, z2)
    return torch.autograd.grad(loss, z1)[0]


@pytest.mark.parametrize("name", NAMES)
def test_every_strategy_declares_its_host_mapping_and_it_is_applied(name):
    cls = clp.get_loss_class(name)
    mapping = cls.host_temperature(0.3)  # NotImplementedError for a strategy that declares nothing
    loss = clp.build_host_loss(name, host_tau=0.3, feature_dim=8)
    assert mapping.items() <= loss.hyperparameters().items()
    # a strategy with a temperature follows the host's; one without (temperature-free, AMCL) ignores it. The
    # gradient, not the value: FlatNCE's value is 1 by construction
    assert (not torch.equal(_gradient(name, 0.3), _gradient(name, 0.1))) == bool(mapping)


@pytest.mark.parametrize("name", NAMES)
def test_decoupled_applies_where_declared(name):
    cls = clp.get_loss_class(name)
    loss = clp.build_host_loss(name, host_tau=0.2, host_decoupled=True, feature_dim=8)
    assert loss.decoupled == (cls.decouplable or cls.default_decoupled)
    if cls.decouplable:  # an explicit argument wins over the host's setting
        explicit = clp.build_host_loss(name, host_tau=0.2, host_decoupled=True, feature_dim=8, decoupled=False)
        assert not explicit.decoupled


@pytest.mark.parametrize("name", NAMES)
def test_feature_width_reaches_the_strategy_that_needs_it(name):
    cls = clp.get_loss_class(name)
    loss = clp.build_host_loss(name, host_tau=0.2, feature_dim=8)
    if cls.feature_dim_arg is not None:
        assert loss.hyperparameters()[cls.feature_dim_arg] == 8
    assert torch.isfinite(loss.double()(*_views()))


@pytest.mark.parametrize("name,preset", [(n, p) for n in NAMES for p in clp.get_loss_class(n).presets])
def test_presets_are_valid_settings_and_lose_to_explicit_arguments(name, preset):
    settings = clp.get_loss_class(name).presets[preset]
    loss = clp.build_host_loss(name, host_tau=0.5, preset=preset, feature_dim=8)
    assert settings.items() <= loss.hyperparameters().items()
    key, value = next(iter(settings.items()))
    if isinstance(value, float):  # the first setting is a temperature: smaller keeps every range valid
        explicit = clp.build_host_loss(name, host_tau=0.5, preset=preset, feature_dim=8, **{key: value * 0.5})
        assert explicit.hyperparameters()[key] == value * 0.5


def test_unknown_preset_and_the_examples():
    with pytest.raises(ValueError, match="preset must be one of"):
        clp.build_host_loss("macl", host_tau=0.1, preset="visoin")
    assert clp.build_host_loss("cosine_schedule", host_tau=0.2).temperature(0) == pytest.approx(2.0)  # τ_max = 10 τ
    assert clp.build_host_loss("dual_temperature", host_tau=0.05).tau_beta == pytest.approx(0.5)
    assert clp.build_host_loss("macl", host_tau=0.05, preset="simcse").alpha == 2.0


@pytest.mark.parametrize("name", NAMES)
def test_hyperparameters_are_the_arguments_however_the_loss_was_built(name):
    cls = clp.get_loss_class(name)
    args = {**cls.host_temperature(0.3), **({cls.feature_dim_arg: 8} if cls.feature_dim_arg else {}),
            "reduction": "sum"}  # fmt: skip
    by_class, by_name = cls(**args), clp.build_loss(name, **args)
    assert by_class.hyperparameters() == by_name.hyperparameters() == args
    mapping = cls.host_temperature(0.3)
    if mapping and clp.registry.accepted_arguments(cls)[: len(mapping)] == list(mapping):  # given by position
        assert cls(*mapping.values()).hyperparameters() == mapping
    torch.manual_seed(0)
    rebuilt = clp.build_loss(name, **by_class.hyperparameters()).double()
    torch.manual_seed(0)
    assert torch.equal(rebuilt(*_views()), cls(**args).double()(*_views()))


def test_the_strategy_authoring_snippet_of_the_docs_runs_on_every_kernel(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """docs/strategies.md "Writing a strategy": the extension types as exported, one strategy on three kernels (from
    a file of its own: Triton reads a statement's source)."""
    _cubic_module(tmp_path)


def _cubic_module(folder):  # type: ignore[no-untyped-def]
    """The snippet of docs/strategies.md "Writing a strategy", imported from a file (its strategy unregistered
    again: other tests list the shipped strategies)."""
    import importlib.util
    import re

    from cl_plugins import registry

    section = (ROOT / "docs" / "strategies.md").read_text().split("## Writing a strategy", 1)[1]
    (folder / "cubic_strategy.py").write_text(re.search(r"```python\n(.*?)```", section, flags=re.S).group(1))
    spec = importlib.util.spec_from_file_location("cubic_strategy", folder / "cubic_strategy.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # as an import leaves it: where the Triton operators find its map
    try:
        spec.loader.exec_module(module)
        assert "cubic" in clp.available_losses()
    finally:
        registry._REGISTRY.pop("cubic", None)
    return module


@pytest.mark.skipif(not clp.kernels.triton_jit.usable_on(torch.device("cpu")),
                    reason="Triton's interpreter is not on (tests/conftest.py sets it unless --device cuda)")
def test_the_strategy_snippet_of_the_docs_runs_on_the_triton_kernel(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The snippet's map on the Triton kernel under Triton's interpreter: the streaming kernel's values."""
    from cl_plugins.kernels import streaming, triton_lse
    from tests.kernels.test_streaming import negative_lse

    module = _cubic_module(tmp_path)
    cubic = module.CubicLoss().logit_map(None)
    assert cubic.triton is not None and cubic.triton.function is module._cubic.triton
    unit = torch.nn.functional.normalize(torch.randn(2, 20, 16, generator=torch.Generator().manual_seed(0)), dim=-1)
    exclude = torch.arange(20)[:, None]
    ours = negative_lse(triton_lse.BACKEND, unit[0], unit[1], exclude, logit_map=cubic)
    assert ours is not None, "the Triton kernel took the map"
    reference = negative_lse(streaming.BACKEND, unit[0], unit[1], exclude, logit_map=cubic)
    torch.testing.assert_close(ours[0], reference[0], rtol=1e-5, atol=1e-6)


def test_the_labels_snippet_of_the_docs_runs():
    """docs/strategies.md "Labels": the snippet as written, on a batch of 8 pairs of 4 classes."""
    import re

    text = (ROOT / "docs" / "strategies.md").read_text()
    snippet = re.search(r"```python\n(.*?)```", text.split("## Labels", 1)[1], flags=re.S).group(1)
    torch.manual_seed(0)
    scope = {"clp": clp, "z1": torch.randn(8, 128), "z2": torch.randn(8, 128), "q": torch.randn(8, 128),
             "k": torch.randn(8, 128), "y": torch.arange(8) % 4}  # fmt: skip
    exec(compile(snippet, "docs/strategies.md", "exec"), scope)
    assert torch.isfinite(scope["loss"]) and scope["queue"].get_labels()[:8].tolist() == [0, 1, 2, 3] * 2


def test_the_bundled_names_listed_without_torch_are_the_registered_ones():
    """The registry lists the bundled strategies from their modules' names without importing them (for ``--help``
    before torch loads); each module registers exactly the strategy of its name."""
    import subprocess
    import sys

    from cl_plugins import registry

    code = "import sys; from cl_plugins.registry import available_losses as a; print(a(), 'torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out.endswith(" False"), "listing the strategies imported torch"
    shipped = [n for n in clp.available_losses() if clp.get_loss_class(n).__module__.startswith("cl_plugins.losses")]
    assert out == f"{shipped} False" and shipped == registry.bundled_names()
    for name in shipped:
        assert clp.get_loss_class(name).__module__.split(".")[2] == name
