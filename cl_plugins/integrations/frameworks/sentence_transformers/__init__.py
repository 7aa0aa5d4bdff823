"""sentence-transformers: any cl-plugins strategy as a ``SentenceTransformerTrainer`` loss (see :mod:`.loss`)."""

from .loss import CachedStrategyRankingLoss, StrategyRankingLoss, StrategyTrainer

__all__ = ["CachedStrategyRankingLoss", "StrategyRankingLoss", "StrategyTrainer"]
