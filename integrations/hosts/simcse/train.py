"""Train SimCSE (unsupervised or supervised) with any cl-plugins strategy, on Accelerate.

    accelerate launch -m cl_plugins.integrations.hosts.simcse.train --model DIR --train_file wiki1m_for_simcse.txt \\
        --loss macl --loss_arg tau0=0.05 --loss_arg alpha=2 --loss_arg a0=0.8

* ``--train_file`` ending in ``.csv`` is supervised (``sent0,sent1,hard_neg``), anything else is one
  sentence per line (unsupervised: each sentence twice, dropout is the augmentation).
* Under several processes the loss gathers embeddings with gradient, so negatives (and MACL's
  alignment) are global; learnable / AMCL temperatures are parameters of the model.
* ``--save_steps`` writes a full training state (model, optimizer, scheduler, RNG, data position)
  to ``OUTPUT/checkpoints/step_N``; ``--resume`` continues bit for bit from the newest.
* Every ``--eval_steps`` the STS-B dev Spearman is computed and the best model is kept in
  ``OUTPUT/best`` (SimCSE's model selection); the final model goes to ``OUTPUT/model``.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from cl_plugins.integrations.command_line import config_from_args as dataclass_config_from_args
from cl_plugins.integrations.command_line import one_line_errors
from cl_plugins.integrations.hosts.simcse.configs import train_parser
from cl_plugins.integrations.modalities.text.config import TrainConfig
from cl_plugins.integrations.modalities.text.trainer import train


def build_parser(defaults: dict[str, Any] | None = None) -> argparse.ArgumentParser:
    return train_parser(__doc__, defaults)


def config_from_args(args: argparse.Namespace) -> TrainConfig:
    return dataclass_config_from_args(TrainConfig, args)


@one_line_errors
def main(argv: list[str] | None = None) -> None:
    config = config_from_args(build_parser().parse_args(argv))
    summary = train(config)
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
