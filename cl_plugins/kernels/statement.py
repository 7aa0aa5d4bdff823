"""A per-pair map stated once: one Python function of the cosines, written over a math namespace ``m``, from which
every form the kernels take comes (FlexAttention's ``score_mod``, written once).

A strategy writes, in its own file::

    @logit_statement
    def _map(x, params, constant, closed=False):
        tau = params[0] + params[1] * m.abs(x)
        inverse = 1.0 / tau
        return x * inverse, inverse, tau          # (phi(x), phi'(x), a statistic)

with ``m`` a module-level name of its file (``from cl_plugins.extension import m``). :func:`logit_statement` runs
the same code twice: with ``m`` bound to :class:`TorchMath` (the torch forms: the positives' logits through
autograd, each tile's map eagerly or compiled, whole compiled tiles) and to :data:`TRITON_MATH` (``triton.language``
and a few jitted primitives: the ``kernel="triton"`` form). ``params`` is a tuple of floats, ``constant`` an int the
function may branch on (a compile-time constant on Triton), ``closed`` (optional, torch only) asks for the
exponential's closed form ``(exp(phi), exp(phi) phi', stat)`` where a map has one. Use arithmetic, ``if`` on
``constant`` or ``closed``, literals, and the names of :class:`TorchMath`; a statistic that a map does not have is
``0.0``.

The namespace's primitives may differ in how they compute, never in what: ``m.sin_half_pi`` is ``sin(pi x / 2)``
for cosines in [-1, 1], ``torch.sin`` on torch and a degree-11 polynomial (within 6e-8, no transcendental call) on
Triton; ``m.stop_gradient`` detaches on torch (the kernels take the derivative the map returns, never autograd's).
"""

from __future__ import annotations

import math
import types
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from .triton_jit import keyed, tl, triton


def _clip(a: torch.Tensor, b: float | torch.Tensor, upper: bool) -> torch.Tensor:
    if isinstance(b, torch.Tensor):
        return torch.minimum(a, b) if upper else torch.maximum(a, b)
    return torch.clamp(a, max=b) if upper else torch.clamp(a, min=b)


class TorchMath:
    """``m`` on torch tensors (eager, autograd and ``torch.compile``)."""

    where = staticmethod(torch.where)
    abs = staticmethod(torch.abs)
    exp = staticmethod(torch.exp)
    log = staticmethod(torch.log)
    cos = staticmethod(torch.cos)
    sin = staticmethod(torch.sin)

    @staticmethod
    def minimum(a: torch.Tensor, b: float | torch.Tensor) -> torch.Tensor:
        return _clip(a, b, True)

    @staticmethod
    def maximum(a: torch.Tensor, b: float | torch.Tensor) -> torch.Tensor:
        return _clip(a, b, False)

    @staticmethod
    def clamp(x: torch.Tensor, low: float, high: float) -> torch.Tensor:
        return torch.clamp(x, low, high)

    @staticmethod
    def sin_half_pi(x: torch.Tensor) -> torch.Tensor:
        """sin(pi x / 2)."""
        return torch.sin(x * (math.pi / 2))

    @staticmethod
    def stop_gradient(x: torch.Tensor) -> torch.Tensor:
        return x.detach()


class TorchMathThrough(TorchMath):
    """``m`` for a map differentiated by autograd through everything (its ``stop_gradient`` passes the gradient)."""

    @staticmethod
    def stop_gradient(x: torch.Tensor) -> torch.Tensor:
        return x


def _triton_math() -> types.ModuleType | None:
    """``m`` on Triton: ``triton.language``'s names, looked up when called (Triton's interpreter patches them),
    and the jitted primitives below; a plain module, as a jitted function may read one."""
    if triton is None:
        return None

    @triton.jit
    def sin_half_pi(x):  # type: ignore[no-untyped-def]
        """sin(pi x / 2) for x in [-1, 1] by its Taylor polynomial to the 11th power (within 6e-8): Triton's
        ``tl.cos`` is the accurate libdevice one, and cost DySTreSS twice InfoNCE's time on the H200 where this form
        costs 1.24x (benchmarks/gpu_map_cost.py, docs/gpu.md)."""
        t = 1.5707963267948966 * x
        t2 = t * t
        return t * (1.0 + t2 * (-1.0 / 6.0 + t2 * (1.0 / 120.0 + t2 * (-1.0 / 5040.0 + t2 * (
            1.0 / 362880.0 + t2 * (-1.0 / 39916800.0))))))  # fmt: skip

    @triton.jit
    def stop_gradient(x):  # type: ignore[no-untyped-def]
        return x

    @triton.jit
    def clamp(x, low, high):  # type: ignore[no-untyped-def]
        return tl.minimum(tl.maximum(x, low), high)

    module = types.ModuleType("cl_plugins.kernels.statement.triton_math")
    module.sin_half_pi = sin_half_pi  # type: ignore[attr-defined]
    module.stop_gradient = stop_gradient  # type: ignore[attr-defined]
    module.clamp = clamp  # type: ignore[attr-defined]
    module.__getattr__ = lambda name: getattr(tl, name)  # type: ignore[attr-defined]
    return module


#: ``m`` on Triton (None without Triton)
TRITON_MATH = _triton_math()


def _instance(function: Callable[..., Any], namespace: Any) -> Callable[..., Any]:
    """``function``'s code with ``m`` bound to ``namespace`` (its own file's other names as they are)."""
    scope = {**function.__globals__, "m": namespace, "tl": tl}
    made = types.FunctionType(function.__code__, scope, function.__name__, function.__defaults__)
    made.__doc__, made.__qualname__, made.__module__ = function.__doc__, function.__qualname__, function.__module__
    return made


@dataclass(frozen=True, eq=False)
class LogitStatement:
    """A map stated once (:func:`logit_statement`): ``torch`` (``m`` = :class:`TorchMath`), ``through`` (``m`` =
    :class:`TorchMathThrough`) and ``triton`` (the jitted form, None without Triton)."""

    source: Callable[..., Any]
    torch: Callable[..., Any]
    through: Callable[..., Any]
    triton: Any

    def __call__(self, x: torch.Tensor, params: tuple[float, ...] = (), constant: int = 0,
                 closed: bool = False) -> tuple[Any, Any, Any]:  # fmt: skip
        """The torch form: (phi(x), phi'(x), statistic), or with ``closed`` (exp(phi), exp(phi) phi', statistic)."""
        if closed:
            return self.torch(x, params, constant, True)
        return self.torch(x, params, constant)


def logit_statement(function: Callable[..., Any]) -> LogitStatement:
    """Decorates a map stated once, ``function(x, params, constant[, closed])``, over the math namespace ``m``
    (see the module docstring): its torch and Triton forms."""
    jitted = None
    if triton is not None:
        try:
            jitted = triton.jit(_instance(function, TRITON_MATH))
            # the decorated name holds the statement, whose ``triton`` is this
            jitted = keyed(jitted, f"{function.__module__}:{function.__qualname__}.triton")
        except (OSError, TypeError, ValueError):  # no source file to read (a REPL, exec): no Triton form
            jitted = None
    return LogitStatement(function, _instance(function, TorchMath), _instance(function, TorchMathThrough), jitted)


def statement_terms(x: torch.Tensor, form: Callable[..., Any], params: tuple[float, ...], constant: int,
                    derivative: bool, statistic: bool) -> tuple[torch.Tensor, Any, Any]:  # fmt: skip
    """A statement's torch ``form`` as the kernels' terms (:meth:`LogitMap.of_terms
    <cl_plugins.kernels.contract.LogitMap.of_terms>`): (phi, phi' where ``derivative``, the statistic where
    ``statistic``)."""
    phi, slope, stat = form(x, params, constant)
    return phi, (slope if derivative else None), (stat if statistic else None)


def statement_closed(x: torch.Tensor, form: Callable[..., Any], params: tuple[float, ...], constant: int,
                     grad: bool) -> tuple[torch.Tensor, Any]:  # fmt: skip
    """A statement's closed-form exponential: (exp(phi), exp(phi) phi' where ``grad``)."""
    e, factor, _ = form(x, params, constant, True)
    return e, (factor if grad else None)
