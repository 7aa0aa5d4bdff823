"""Adapters for training frameworks: a cl-plugins strategy inside a framework's own loop.

One package per framework, named after it: :mod:`.sentence_transformers`, :mod:`.hf_trainer`, :mod:`.lightning`,
:mod:`.open_clip`. Their callbacks share one behaviour (:class:`.upkeep.StrategyUpkeep`). Host adapters (a
research codebase's training script reproduced or patched) live in :mod:`cl_plugins.integrations.hosts`.
"""
