"""MSC's declaration: its command, patch target and run configuration (its data is vision's)."""

from __future__ import annotations

from integrations.common.hosts import Command, Host

HOST = Host(
    "msc", "MSC (Reiss & Hoshen, 2023): mean-shifted contrastive one-class anomaly detection",
    commands=(Command("msc", "integrations.msc.anomaly", "Mean-Shifted Contrastive anomaly detection"),),
    patches={"msc": "patch_msc"}, configs=("integrations.msc.anomaly:MSCConfig",), docs="vision.md",
)  # fmt: skip
