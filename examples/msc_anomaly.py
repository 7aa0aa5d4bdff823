"""MSC one-class anomaly detection on CIFAR-10 (mean ROC-AUC over normal classes) with any cl-plugins strategy.

    python examples/simclr_cifar.py --output_dir outputs/vision          # the offline default backbone
    accelerate launch examples/msc_anomaly.py --loss temperature_free
    python examples/msc_anomaly.py --backbone_path resnet152-394f9c45.pth --arch resnet152 --epochs 25

Every flag is documented by ``--help``; the protocol and the backbones are described in
:mod:`cl_plugins.integrations.hosts.msc.anomaly`.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cl_plugins.integrations import run_msc as main  # noqa: E402

if __name__ == "__main__":
    main()
