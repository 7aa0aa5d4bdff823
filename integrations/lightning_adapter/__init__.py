"""Lightning: the strategies' per-step hook as a callback, and a recipe module (see :mod:`.callback`)."""

from .callback import ContrastiveModule, StrategyCallback

__all__ = ["ContrastiveModule", "StrategyCallback"]
