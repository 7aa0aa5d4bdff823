"""MSC's declaration: its command, patch target and run configuration (its data is vision's)."""

from __future__ import annotations

from cl_plugins.integrations.hosts import Command, Host

_HERE = __name__.rpartition(".")[0]

HOST = Host(
    "msc", "MSC (Reiss & Hoshen, 2023): mean-shifted contrastive one-class anomaly detection",
    commands=(Command("msc", f"{_HERE}.anomaly", "Mean-Shifted Contrastive anomaly detection",
                      f"{_HERE}.configs:MSCConfig"),),
    patches={"msc": "patch_msc"}, configs=(f"{_HERE}.configs:MSCConfig",), docs="vision.md",
)  # fmt: skip
