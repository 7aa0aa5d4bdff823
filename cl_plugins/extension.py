"""The types a strategy author works with: :class:`Pairs`, :class:`LogitMap`, :class:`LazyLogits`, and for a map's
Triton form :class:`TritonMap`, :func:`triton_map` and ``tl`` (``triton.language``, None without Triton).

A strategy (:class:`cl_plugins.ContrastiveLoss` subclass) computes its loss from a block's logits and its
:class:`Pairs`. The logits are either a dense [A, M] tensor or :class:`LazyLogits` (the cosines, computed only
inside the kernels of :mod:`cl_plugins.kernels`); a per-pair strategy hands the kernels its logits as an
elementwise :class:`LogitMap` of the cosine. :func:`softplus` and :func:`reweighted_nll` turn the one number per
pair every strategy reduces to into its loss (:mod:`cl_plugins.pairs`).

This module only re-exports: the kernels' contract lives in :mod:`cl_plugins.kernels.contract`, the executor in
:mod:`cl_plugins.kernels.lazy`, the pairs in :mod:`cl_plugins.pairs`.
"""

from __future__ import annotations

from .kernels.contract import LogitMap, Terms, TritonMap
from .kernels.lazy import LazyLogits, divide
from .kernels.statement import LogitStatement, TorchMath, logit_statement
from .kernels.triton_jit import tl, triton_map
from .pairs import Pairs, reweighted_nll, softplus

#: the math namespace a map stated once is written over (:mod:`cl_plugins.kernels.statement`): torch's here, for
#: the source as it reads; :func:`logit_statement` binds it to torch's and Triton's
m = TorchMath

__all__ = ["LazyLogits", "LogitMap", "LogitStatement", "Pairs", "Terms", "TritonMap", "divide", "logit_statement",
           "m", "reweighted_nll", "softplus", "tl", "triton_map"]  # fmt: skip
