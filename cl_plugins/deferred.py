"""Input checks whose outcome the device computes, raised without stopping the host.

A check such as ``if bool(bad.any()): raise ...`` makes the host wait for every queued kernel (on a GPU), and
``torch.compile(fullgraph=True)`` cannot trace it. :class:`DeferredChecks` keeps the check and drops the wait:

1. during a call, each check adds its flag (a 0-d bool tensor on the device) and an ``explain`` function that
   raises the one-line error (and may read the data: it runs only once the flag is known to be set);
2. the inputs it flags are replaced (:func:`torch.where`) so that the call's values and gradients stay finite, and
   :meth:`DeferredChecks.settle` makes the call's loss NaN with a zero gradient when any flag is set: a step on a
   bad batch leaves the weights where they are (an optimizer with momentum still moves them by its momentum);
3. :meth:`~DeferredChecks.settle` copies the flags to the host without waiting (a pinned buffer and an event on a
   GPU; on the CPU they are there at once, so the error raises in the same call, as before); the error raises from
   them at the next call (which waits, if it must, for the previous call's forward only) or when ``stats`` is read.

Under ``torch.compile`` the flags stay in the graph (steps 1 and 2): a bad batch gives a NaN loss with a zero
gradient, and the error raises at the next call made outside the compiled region or when ``stats`` is read.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

Explain = Callable[[], None]


@dataclass
class _Sealed:
    host: torch.Tensor  # the call's flags [k] on the host
    event: torch.cuda.Event | None  # recorded after their copy (None: already there)
    explains: list[Explain]


class DeferredChecks:
    """One loss's checks of the current call and the flags of the last settled one (see the module docstring)."""

    def __init__(self) -> None:
        self._flags: list[torch.Tensor] = []
        self._explains: list[Explain] = []
        self._sealed: _Sealed | None = None

    def add(self, flag: torch.Tensor, explain: Explain) -> None:
        """A check of this call: ``flag`` (0-d bool, set when the input is bad) and what raises its error."""
        self._flags.append(flag)
        self._explains.append(explain)

    def settle(self, loss: torch.Tensor) -> torch.Tensor:
        """``loss``, NaN with a zero gradient where a check of this call failed; the flags start for the host, and
        on the CPU their error raises now."""
        if not self._flags:
            return loss
        flags = torch.stack(self._flags)
        loss = torch.where(flags.any(), torch.full_like(loss, float("nan")), loss)
        if not torch.compiler.is_compiling():
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
        forward has run on the device; without, only if it has already."""
        self._flags, self._explains = [], []  # a call that raised before settling leaves nothing behind
        sealed = self._sealed
        if sealed is None:
            return
        if sealed.event is not None and not sealed.event.query():
            if not wait:
                return
            sealed.event.synchronize()
        self._sealed = None
        for failed, explain in zip(sealed.host.numpy(), sealed.explains, strict=True):
            if failed:
                explain()

    def __getstate__(self) -> dict:
        self.raise_ready()  # a pickled loss carries no pending error
        return {"_flags": [], "_explains": [], "_sealed": None}
