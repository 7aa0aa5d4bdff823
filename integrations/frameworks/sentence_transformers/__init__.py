"""sentence-transformers: any cl-plugins strategy as a ``SentenceTransformerTrainer`` loss (see :mod:`.loss`)."""

from cl_plugins.integrations.frameworks.sentence_transformers.loss import (
    CachedStrategyRankingLoss,
    StrategyRankingLoss,
    StrategyTrainer,
)

__all__ = ["CachedStrategyRankingLoss", "StrategyRankingLoss", "StrategyTrainer"]
