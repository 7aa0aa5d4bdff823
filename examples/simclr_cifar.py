"""Self-supervised CIFAR-10 / Fashion-MNIST training with any cl-plugins strategy, kNN and linear evaluation.

    accelerate launch examples/simclr_cifar.py --framework simclr --loss macl
    accelerate launch examples/simclr_cifar.py --framework simco --loss dual_temperature
    python examples/simclr_cifar.py --framework mocov2 --loss dystress --dataset cifar10_lt
    python examples/simclr_cifar.py --subset_per_class 500 --width 16 --epochs 20   # CPU-sized

Every flag is documented by ``--help``; the recipe, the frameworks and the outputs (checkpoints,
``model/``, ``results.json``) are described in :mod:`cl_plugins.integrations.hosts.vision.train` and
:mod:`cl_plugins.integrations.hosts.vision.ssl_methods`. Data comes from ``$CL_PLUGINS_DATA`` (``images/...``).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cl_plugins.integrations import run_vision_train as main  # noqa: E402

if __name__ == "__main__":
    main()
