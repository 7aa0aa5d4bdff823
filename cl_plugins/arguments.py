"""Arguments of the kind a constructor takes, checked without torch (command lines import this for ``--help``).

:func:`check_flag` refuses anything but a bool for a boolean argument (``"false"`` would be True by truthiness);
:func:`strict_flags` applies it to every ``bool`` parameter of a function or a class's constructor.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, TypeVar


class ArgumentTypeError(TypeError, ValueError):
    """An argument of the wrong kind (a string where a number belongs, a name the strategy does not take): a
    ``TypeError`` to Python code, and a ``ValueError`` to command lines, which report bad input in one line."""


def check_flag(name: str, value: object, *, optional: bool = False) -> bool | None:
    """A boolean argument: True or False (or None where ``optional``); anything else, ``"false"``, 0 or 1
    included, is refused in one line naming the argument (truthiness would read ``"false"`` as True)."""
    if isinstance(value, bool) or (optional and value is None):
        return value
    allowed = "True, False or None" if optional else "True or False"
    raise ArgumentTypeError(f"{name} must be {allowed}, got {value!r}")


C = TypeVar("C", bound=Callable[..., Any])
_FLAG_TYPES = {"bool": False, "bool|None": True, "None|bool": True}


def flag_kind(parameter: inspect.Parameter) -> bool | None:
    """Whether ``parameter`` is annotated ``bool`` (False), ``bool | None`` (True: None allowed), or neither (None)."""
    return _FLAG_TYPES.get(str(parameter.annotation).replace(" ", "").replace("<class'bool'>", "bool"))


def flag_parameters(fn: Callable[..., Any]) -> dict[str, bool]:
    """The boolean parameters of ``fn``, each with whether it also takes None (:func:`flag_kind`)."""
    kinds = {p.name: flag_kind(p) for p in inspect.signature(fn).parameters.values()}
    return {name: optional for name, optional in kinds.items() if optional is not None}


def strict_flags(obj: C) -> C:
    """A function, or a class's ``__init__``, whose ``bool`` parameters take a bool only (:func:`check_flag`),
    checked before anything else runs: ``"false"`` or 0 is refused in one line naming the parameter."""
    fn = obj.__init__ if isinstance(obj, type) else obj
    signature, flags = inspect.signature(fn), flag_parameters(fn)

    @functools.wraps(fn)
    def checked(*args: Any, **kwargs: Any) -> Any:
        given = signature.bind_partial(*args, **kwargs).arguments
        for name, optional in flags.items():
            if name in given:
                check_flag(name, given[name], optional=optional)
        return fn(*args, **kwargs)

    checked.__strict_flags__ = tuple(flags)  # type: ignore[attr-defined]
    if isinstance(obj, type):
        obj.__init__ = checked  # type: ignore[misc]
        return obj
    return checked  # type: ignore[return-value]
