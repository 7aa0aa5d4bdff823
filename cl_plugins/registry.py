"""Registry and factory: every strategy by one name.

Example::

    import cl_plugins as clp
    loss_fn = clp.build_loss("macl", tau0=0.1, alpha=0.5, a0=0.0)
    clp.available_losses()   # ['amcl', 'cosine_schedule', 'dcl', ...]
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import pkgutil
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from .arguments import flag_kind

if TYPE_CHECKING:
    from torch import nn

T = TypeVar("T", bound="type[nn.Module]")

#: the package of the bundled strategies: one module (or sub-package) each, named as the strategy
BUNDLED_PACKAGE = "cl_plugins.losses"

_REGISTRY: dict[str, type[nn.Module]] = {}


def register_loss(name: str) -> Callable[[T], T]:
    """Class decorator that registers a loss under ``name`` (a bundled strategy's is its module's name)."""

    def wrap(cls: T) -> T:
        if name in _REGISTRY and _REGISTRY[name] is not cls:
            raise ValueError(f"a loss named {name!r} is already registered ({_REGISTRY[name].__name__})")
        _REGISTRY[name] = cls
        cls.name = name  # type: ignore[attr-defined]
        return cls

    return wrap


def bundled_names() -> list[str]:
    """The strategies that ship with cl-plugins: the modules of :data:`BUNDLED_PACKAGE`, listed without importing
    them (no torch: command-line help answers before torch loads)."""
    spec = importlib.util.find_spec(BUNDLED_PACKAGE)
    assert spec is not None and spec.submodule_search_locations is not None
    return sorted(m.name for m in pkgutil.iter_modules(spec.submodule_search_locations) if not m.name.startswith("_"))


def available_losses() -> list[str]:
    """Sorted registry names: the bundled strategies and any registered since (nothing imported)."""
    return sorted({*bundled_names(), *_REGISTRY})


def get_loss_class(name: str) -> type[nn.Module]:
    """The class registered as ``name`` (a bundled strategy's module is imported on first use)."""
    if not isinstance(name, str):
        raise TypeError(f"loss name must be a string, got {type(name).__name__}")
    key = name.strip().lower().replace("-", "_")
    if key not in _REGISTRY and key in bundled_names():
        importlib.import_module(f"{BUNDLED_PACKAGE}.{key}")
    if key not in _REGISTRY:
        raise ValueError(f"unknown loss {name!r}; valid names are: {', '.join(available_losses())}")
    return _REGISTRY[key]


def _init_parameters(cls: type[nn.Module]) -> list[inspect.Parameter]:
    """The named keyword parameters of a registered loss's constructors, its own first, each name once."""
    found: dict[str, inspect.Parameter] = {}
    for klass in cls.__mro__:
        if klass.__module__.startswith("torch.") or klass is object:
            break
        if "__init__" not in klass.__dict__:
            continue
        for p in inspect.signature(klass.__init__).parameters.values():
            if p.name != "self" and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL):
                found.setdefault(p.name, p)
    return list(found.values())


def accepted_arguments(cls: type[nn.Module]) -> list[str]:
    """Keyword arguments a registered loss accepts (its own and the common ones)."""
    return [p.name for p in _init_parameters(cls)]


def flag_arguments(cls: type[nn.Module]) -> list[str]:
    """The boolean keyword arguments of a registered loss (annotated ``bool`` or ``bool | None``): each takes True
    or False only (:func:`cl_plugins.validation.check_flag`)."""
    return [p.name for p in _init_parameters(cls) if flag_kind(p) is not None]


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
