"""Registry and factory: every strategy by one name.

Example::

    import cl_plugins as clp
    loss_fn = clp.build_loss("macl", tau0=0.1, alpha=0.5, a0=0.0)
    clp.available_losses()   # ['amcl', 'cosine_schedule', 'dcl', ...]
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, TypeVar

from torch import nn

T = TypeVar("T", bound=type[nn.Module])

_REGISTRY: dict[str, type[nn.Module]] = {}


def register_loss(name: str) -> Callable[[T], T]:
    """Class decorator that registers a loss under ``name``."""

    def wrap(cls: T) -> T:
        if name in _REGISTRY and _REGISTRY[name] is not cls:
            raise ValueError(f"a loss named {name!r} is already registered ({_REGISTRY[name].__name__})")
        _REGISTRY[name] = cls
        cls.name = name  # type: ignore[attr-defined]
        return cls

    return wrap


def _registered() -> dict[str, type[nn.Module]]:
    """The registry with the bundled strategies in it (``cl_plugins`` imports them only on first use)."""
    from . import losses  # noqa: F401

    return _REGISTRY


def available_losses() -> list[str]:
    """Sorted registry names."""
    return sorted(_registered())


def get_loss_class(name: str) -> type[nn.Module]:
    if not isinstance(name, str):
        raise TypeError(f"loss name must be a string, got {type(name).__name__}")
    key = name.strip().lower().replace("-", "_")
    if key not in _registered():
        raise ValueError(f"unknown loss {name!r}; valid names are: {', '.join(available_losses())}")
    return _REGISTRY[key]


def accepted_arguments(cls: type[nn.Module]) -> list[str]:
    """Keyword arguments a registered loss accepts (its own and the common ones)."""
    names: list[str] = []
    for klass in cls.__mro__:
        if klass is nn.Module or klass is object:
            break
        if "__init__" not in klass.__dict__:
            continue
        for p in inspect.signature(klass.__init__).parameters.values():
            if p.name != "self" and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL) and p.name not in names:
                names.append(p.name)
    return names


def build_loss(name: str, **kwargs: Any) -> nn.Module:
    """Instantiate the loss registered as ``name`` with keyword arguments ``kwargs``.

    Raises ``ValueError`` for an unknown name (listing the valid ones) and ``TypeError`` for
    an argument the strategy does not take (listing the ones it does).
    """
    cls = get_loss_class(name)
    allowed = accepted_arguments(cls)
    unknown = [k for k in kwargs if k not in allowed]
    if unknown:
        from .labels import refuse_replaced
        from .validation import ArgumentTypeError

        refuse_replaced({k: kwargs[k] for k in unknown})
        raise ArgumentTypeError(f"{name!r} got unexpected argument(s) {unknown}; it accepts: {', '.join(allowed)}")
    return cls(**kwargs)
