"""A loss's record of the kernels that failed on it: :class:`KernelHealth` (part of the kernels' contract,
:mod:`cl_plugins.kernels.contract`, apart so that the compiled-map helper can take it without importing the
contract)."""

from __future__ import annotations

import warnings


class KernelHealth:
    """The backends that failed on one loss (a Triton kernel that cannot compile or launch here, a map that cannot
    be compiled), each warned about once: off for that loss from then on, on for every other loss."""

    def __init__(self) -> None:
        self.off: dict[str, str] = {}

    def usable(self, name: str) -> bool:
        return name not in self.off

    def fail(self, name: str, error: BaseException) -> None:
        """``name`` failed with ``error``: one warning naming both, and the backend is off for this loss."""
        first = str(error).strip().splitlines()[0] if str(error).strip() else ""
        self.off[name] = f"{type(error).__name__}: {first}"
        warnings.warn(f"cl_plugins: the {name} kernel failed ({self.off[name]}); this loss runs without it from now "
                      "on (the next kernel gives the same values)", RuntimeWarning, stacklevel=3)  # fmt: skip

    def __repr__(self) -> str:
        return f"KernelHealth(off={sorted(self.off)})"
