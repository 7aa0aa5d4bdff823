"""Hugging Face ``Trainer``: contrastive training with any cl-plugins strategy.

Three pieces, one per seam the ``Trainer`` offers:

* :class:`ViewCollator` turns rows ``{"anchor": str, "positive": str[, "negative": str]}`` into one batch of
  every view stacked (anchors, then positives, then negatives) and ``labels`` = the view of each row;
* :class:`StrategyLossFunc` is the ``compute_loss_func``: it pools each row (``[CLS]`` or the pooler output),
  splits the views by ``labels`` and applies the strategy in the ``cross_view`` layout (anchors against every
  positive, negatives as hard negatives). :meth:`StrategyLossFunc.attach` makes it a submodule of the model, so
  a learned temperature moves with the model, is saved with it and is averaged by DDP;
* :func:`strategy_optimizer` is AdamW over :func:`cl_plugins.param_groups` (temperatures, biases and norms
  without weight decay: the ``Trainer``'s own grouping would decay ``learnable``'s ``log_tau``), and
  :class:`StrategyTrainerCallback` runs :func:`cl_plugins.after_optimizer_step` after every optimizer step
  (``learnable`` clamps its temperature, ``cosine_schedule`` advances).

Example::

    loss_func = StrategyLossFunc("macl", host_tau=0.05).attach(model)
    trainer = Trainer(model, args, train_dataset=pairs, data_collator=ViewCollator(tokenizer),
                      compute_loss_func=loss_func, optimizers=(strategy_optimizer(model, args), None),
                      callbacks=[StrategyTrainerCallback()])

``TrainingArguments(remove_unused_columns=False)`` keeps the text columns for the collator. Under several
processes the strategy gathers every rank's embeddings (the global batch's loss and gradient).
"""

from cl_plugins.integrations.frameworks.hf_trainer.callback import StrategyTrainerCallback
from cl_plugins.integrations.frameworks.hf_trainer.collator import VIEWS, ViewCollator
from cl_plugins.integrations.frameworks.hf_trainer.loss import POOLERS, StrategyLossFunc
from cl_plugins.integrations.frameworks.hf_trainer.optimizer import strategy_optimizer

__all__ = ["POOLERS", "VIEWS", "StrategyLossFunc", "StrategyTrainerCallback", "ViewCollator", "strategy_optimizer"]
