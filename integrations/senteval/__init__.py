"""SentEval-protocol evaluation of sentence encoders (STS and transfer tasks), without SentEval.

SentEval is not on PyPI and its transfer tasks break on Python >= 3.11; this package reads
SentEval's on-disk layout (``<root>/sentence/SentEval/data/downstream``) and re-implements
SimCSE's evaluation conventions. If an importable ``senteval`` is installed it can be used as
an alternative backend (see :mod:`integrations.simcse.evaluate`).
"""

from .engine import STS_TASKS, TRANSFER_TASKS, evaluate, format_table
from .sts import spearman

__all__ = ["STS_TASKS", "TRANSFER_TASKS", "evaluate", "format_table", "spearman"]
