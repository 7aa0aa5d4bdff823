"""cl-plugins strategies in Lightning (``lightning`` 2.x).

The recipe: the loss is a submodule of the ``LightningModule`` (it moves with the module, is saved in its
checkpoints, and DDP averages a learned temperature like a weight); ``configure_optimizers`` builds its groups with
:func:`cl_plugins.param_groups` (no weight decay on temperatures); :class:`StrategyLightningCallback` runs
:func:`cl_plugins.after_optimizer_step` once per optimizer step, not once per micro-batch under gradient
accumulation. Under ``strategy="ddp"`` the loss gathers every rank's embeddings: the loss and gradients of the
global batch, as one process would compute them. :class:`ContrastiveModule` is that recipe for two-view batches.

Example::

    module = ContrastiveModule(encoder, clp.build_loss("macl", tau0=0.1), lr=1e-3, weight_decay=0.05)
    lightning.Trainer(max_epochs=100, callbacks=[StrategyLightningCallback()]).fit(module, loader)   # loader: (x1, x2)
"""

from cl_plugins.integrations.frameworks.lightning.callback import StrategyLightningCallback
from cl_plugins.integrations.frameworks.lightning.module import ContrastiveModule

__all__ = ["ContrastiveModule", "StrategyLightningCallback"]
