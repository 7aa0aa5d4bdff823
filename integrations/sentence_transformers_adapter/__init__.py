"""sentence-transformers: any cl-plugins strategy as a ``SentenceTransformerTrainer`` loss (see :mod:`.loss`)."""

from .loss import CachedStrategyRankingLoss, StrategyCallback, StrategyRankingLoss, StrategyTrainer

__all__ = ["CachedStrategyRankingLoss", "StrategyCallback", "StrategyRankingLoss", "StrategyTrainer"]
