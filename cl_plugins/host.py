"""Build a strategy in a host codebase's setting: its one temperature, its pair layout, its feature width.

A host fixes one temperature (SimCSE 0.05, GraphCL 0.2, GRACE 0.4 / 0.9, ...) and whether the positive
sits in the denominator. Every strategy declares, in its own file, how that maps onto it:
``host_temperature(tau)``, ``decouplable``, ``feature_dim_arg`` and ``presets`` (the papers' settings
per modality). :func:`build_host_loss` only applies those declarations.
"""

from __future__ import annotations

from typing import Any

from torch import nn

from .base import ContrastiveLoss
from .registry import available_losses, build_loss, get_loss_class
from .validation import check_flag


def owns_projection_head(loss: str | nn.Module, keep_host_head: bool = False) -> bool:
    """Whether a host should feed ``loss`` its backbone features instead of its projection head's output.

    True for strategies that declare ``replaces_projection_head`` (AMCL's C heads stand in for the host's
    head, as in the paper), unless ``keep_host_head``.

    Example::

        head = nn.Identity() if clp.owns_projection_head(loss_fn) else projection_head(feature_dim)
    """
    cls = get_loss_class(loss) if isinstance(loss, str) else type(loss)
    return bool(getattr(cls, "replaces_projection_head", False)) and not check_flag("keep_host_head", keep_host_head)


def known_presets() -> set[str]:
    """Every preset name some registered strategy declares."""
    return {p for name in available_losses() for p in get_loss_class(name).presets}


def build_host_loss(
    name: str,
    *,
    host_tau: float,
    host_decoupled: bool = False,
    feature_dim: int | None = None,
    preset: str | None = None,
    **overrides: Any,
) -> ContrastiveLoss:
    """``build_loss(name, ...)`` in a host's setting; the order of precedence is host < preset < overrides.

    Args:
        name: registry name of the strategy.
        host_tau: the host's fixed temperature (mapped by the strategy's ``host_temperature``).
        host_decoupled: the host's loss keeps the positive out of the denominator (GraphCL); applied to
            the strategies that are ``decouplable`` (default: False).
        feature_dim: width of the embeddings the loss receives, for strategies that build layers on them
            (AMCL) (default: None).
        preset: the papers' settings for a modality, ``"vision"`` or ``"simcse"``, where the strategy has
            one (default: None).
        **overrides: the strategy's own arguments and the common ones (``layout``, ``reduction``, ...).

    Example::

        loss_fn = clp.build_host_loss("dystress", host_tau=0.05, layout="cross_view", preset="simcse")
    """
    cls = get_loss_class(name)
    check_flag("host_decoupled", host_decoupled)
    if preset is not None and preset not in known_presets():
        raise ValueError(f"preset must be one of {sorted(known_presets())}, got {preset!r}")
    args: dict[str, Any] = dict(cls.host_temperature(float(host_tau)))
    if host_decoupled and cls.decouplable:
        args["decoupled"] = True
    if feature_dim is not None and cls.feature_dim_arg is not None:
        args[cls.feature_dim_arg] = int(feature_dim)
    args.update(cls.presets.get(preset, {}) if preset else {})
    args.update(overrides)
    return build_loss(name, **args)
