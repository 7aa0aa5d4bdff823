"""Hugging Face ``Trainer``: any cl-plugins strategy as ``compute_loss_func`` (see :mod:`.loss`)."""

from .loss import StrategyCallback, StrategyLossFunc, ViewCollator, strategy_optimizer

__all__ = ["StrategyCallback", "StrategyLossFunc", "ViewCollator", "strategy_optimizer"]
