"""cl-plugins: pluggable temperature strategies for contrastive learning.

Example::

    import cl_plugins as clp
    loss_fn = clp.build_loss("macl", tau0=0.1, alpha=0.5, a0=0.0)
    loss = loss_fn(z1, z2)                                   # two views [N, D]
    loss = loss_fn.from_similarity(sim, pos_mask, neg_mask)  # any pair layout
    loss_fn.stats                                            # tau, alignment, W, ...

``__all__`` is what users need (the registry, the losses, the optimizer and distributed helpers, the queue)
and what a strategy author needs (:class:`ContrastiveLoss`, :func:`register_loss` and the types of
:mod:`cl_plugins.extension`: :class:`Pairs`, :class:`LogitMap`, :class:`LazyLogits`). The kernels live in
:mod:`cl_plugins.kernels`, the pair layouts in :mod:`cl_plugins.layouts`.

The package imports its API on first use (PEP 562): ``import cl_plugins`` alone costs nothing, so its command-line
adapters (:mod:`cl_plugins.integrations`) can answer ``--help`` before torch loads.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"


def _load_api() -> Any:
    """The public API, imported once into this module's namespace."""
    api = importlib.import_module("._api", __name__)
    globals().update({name: getattr(api, name) for name in api.__all__}, __all__=list(api.__all__))
    return api


def __getattr__(name: str) -> Any:
    if name.startswith("__") and name != "__all__":
        raise AttributeError(name)
    api = _load_api()
    if name == "__all__":
        return api.__all__
    try:
        return globals()[name]
    except KeyError:
        raise AttributeError(f"module 'cl_plugins' has no attribute {name!r}") from None


def __dir__() -> list[str]:
    return sorted({*globals(), *_load_api().__all__})
