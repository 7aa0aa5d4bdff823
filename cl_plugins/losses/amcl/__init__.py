"""AMCL (Wang et al., ECCV 2024): several projection heads, a learned temperature per anchor (or pair) and head.

* :mod:`.loss`: :class:`AMCLLoss`, the strategy (registered as ``amcl``), its forms and presets;
* :mod:`.temperatures`: the temperature networks (per anchor, bilinear, per-pair MLP); the per-pair MLP's
  log-sum-exp over negatives, without an [A, M, hidden] tensor, is a kernel's
  (:mod:`cl_plugins.kernels.pair_network`).
"""

from .loss import DEGENERATE_FORMS, FORMS, AMCLLoss

__all__ = ["DEGENERATE_FORMS", "FORMS", "AMCLLoss"]
