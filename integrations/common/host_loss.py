"""Build a cl-plugins strategy in a host codebase's setting (its temperature, its pair layout).

A host fixes one temperature (GraphCL 0.2, GRACE 0.4 / 0.9, ...) and whether the positive sits in
the denominator. Each strategy receives the host's temperature in its own parameter, unless the
user passes that parameter:

=================  ======================================================================
infonce, dcl,      ``tau = host_tau``
flatnce
learnable          ``init_tau = host_tau``
macl               ``tau0 = host_tau`` (the MACL paper's GraphCL setting: τ0 = host τ)
dual_temperature   ``tau_alpha = host_tau``, ``tau_beta = 10 * host_tau`` (SimCo's ratio dt_m = 10)
dystress           ``tau_max = host_tau``, ``tau_min = 0.7 * host_tau`` (our choice: the paper's
                   SimCSE / CIFAR ranges put the host τ at or near the top of the range)
temperature_free   no temperature
amcl               none (learned); ``dim`` must be given
=================  ======================================================================

``host_decoupled=True`` (GraphCL: the positive is not in the denominator) is applied to the
strategies whose loss is InfoNCE-shaped (infonce, dystress, temperature_free, learnable,
cosine_schedule, amcl); MACL, DCL, FlatNCE and dual temperature define their own denominators.
"""

from __future__ import annotations

from typing import Any

import cl_plugins as clp

DECOUPLABLE = ("infonce", "dystress", "temperature_free", "learnable", "cosine_schedule", "amcl")


def host_temperature_args(name: str, host_tau: float) -> dict[str, Any]:
    """The strategy's parameters that stand in for the host's fixed temperature."""
    if name in ("infonce", "dcl", "flatnce"):
        return {"tau": host_tau}
    if name == "learnable":
        return {"init_tau": host_tau}
    if name == "macl":
        return {"tau0": host_tau}
    if name == "dual_temperature":
        return {"tau_alpha": host_tau, "tau_beta": 10.0 * host_tau}
    if name == "dystress":
        return {"tau_min": 0.7 * host_tau, "tau_max": host_tau}
    return {}


def build_host_loss(
    name: str,
    *,
    host_tau: float,
    host_decoupled: bool = False,
    layout: str = "simclr",
    feature_dim: int | None = None,
    **kwargs: Any,
) -> Any:
    """``clp.build_loss(name, ...)`` with the host's temperature, layout and feature width; ``kwargs`` win.

    ``feature_dim`` is the width of the embeddings the loss receives (AMCL builds its heads on it).
    """
    args: dict[str, Any] = {"layout": layout, **host_temperature_args(name, host_tau)}
    if host_decoupled and name in DECOUPLABLE:
        args["decoupled"] = True
    if name == "amcl" and feature_dim is not None:
        args["dim"] = int(feature_dim)
    args.update(kwargs)
    return clp.build_loss(name, **args)
