"""Input checks whose outcome the device computes, raised without stopping the host.

A check such as ``if bool(bad.any()): raise ...`` makes the host wait for every queued kernel (on a GPU), and
``torch.compile(fullgraph=True)`` cannot trace it. :class:`DeferredChecks` keeps the check and drops the wait:

1. during a call, each check adds its flag (a 0-d bool tensor on the device) and its explanation: a function and
   its arguments that raise the one-line error (and may read the data: it runs only once the flag is known set);
2. the inputs it flags are replaced (:func:`torch.where`) so that the call's values and gradients stay finite, and
   :meth:`DeferredChecks.settle` makes the call's loss NaN with a zero gradient when any flag is set: a step on a
   bad batch leaves the weights where they are (an optimizer with momentum still moves them by its momentum);
3. :meth:`~DeferredChecks.settle` copies the flags to the host without waiting (a pinned buffer and an event on a
   GPU; on the CPU they are there at once, so the error raises in the same call, as before); the error raises from
   them at the next call (which waits, if it must, for the previous call's forward only) or when ``stats`` is read.

Under ``torch.compile`` steps 1 and 2 are part of the graph and the flags its output: a bad batch gives a NaN loss
with a zero gradient, and the error raises when ``stats`` is read or the loss is next called outside the compiled
region (a compiled call cannot raise without stopping the host; the last compiled call's flags are the ones kept).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

#: a check's explanation: the function that raises its error and the arguments it takes (data, not a closure, so
#: that ``torch.compile`` can carry it out of a graph)
Explain = tuple[Callable[..., None], tuple[Any, ...]]


@dataclass
class _Sealed:
    host: torch.Tensor  # the call's flags [k]: on the host, or (compiled) where the graph left them
    event: torch.cuda.Event | None  # recorded after their copy to the host (None: none under way)
    explains: list[Explain]


class DeferredChecks:
    """One loss's checks of the current call and the flags of the last settled one (see the module docstring)."""

    def __init__(self) -> None:
        self._flags: list[torch.Tensor] = []
        self._explains: list[Explain] = []
        self._sealed: _Sealed | None = None

    def add(self, flag: torch.Tensor, explain: Callable[..., None], *arguments: Any) -> None:
        """A check of this call: ``flag`` (0-d bool, set when the input is bad); ``explain(*arguments)`` raises its
        error."""
        self._flags.append(flag)
        self._explains.append((explain, arguments))

    def settle(self, loss: torch.Tensor) -> torch.Tensor:
        """``loss``, NaN with a zero gradient where a check of this call failed; the flags start for the host, and
        on the CPU their error raises now."""
        if not self._flags:
            return loss
        flags = torch.stack(self._flags)
        loss = loss.masked_fill(flags.any(), float("nan"))
        if torch.compiler.is_compiling():
            self._sealed = _Sealed(flags, None, self._explains)
        else:
            self._seal(flags)
            self.raise_ready(wait=False)
        self._flags, self._explains = [], []
        return loss

    def _seal(self, flags: torch.Tensor) -> None:
        if flags.device.type != "cuda":
            self._sealed = _Sealed(flags, None, self._explains)
            return
        host = torch.empty(flags.shape, dtype=flags.dtype, pin_memory=True)
        host.copy_(flags, non_blocking=True)
        event = torch.cuda.Event()
        event.record()
        self._sealed = _Sealed(host, event, self._explains)

    def raise_ready(self, wait: bool = True) -> None:
        """Raise the error of the last settled call's first failed check, if any: with ``wait``, once that call's
        forward has run on the device; without, only if it has already. Nothing inside a compiled region."""
        # a call that raised before settling leaves nothing behind; compiled, the call's checks go to lists made in
        # the graph (appending to the last call's would be replayed on them after every compiled call)
        self._flags, self._explains = [], []
        if torch.compiler.is_compiling():
            return
        sealed = self._sealed
        if sealed is None:
            return
        if sealed.event is not None and not sealed.event.query():
            if not wait:
                return
            sealed.event.synchronize()
        self._sealed = None
        flags = sealed.host.cpu()  # on the host already, but where a compiled graph left them (read once, here)
        for failed, (explain, arguments) in zip(flags.numpy(), sealed.explains, strict=True):
            if failed:
                explain(*arguments)

    def __getstate__(self) -> dict:
        self.raise_ready()  # a pickled loss carries no pending error
        return {"_flags": [], "_explains": [], "_sealed": None}
