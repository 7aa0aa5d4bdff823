"""The main job: unsupervised SimCSE with MACL from all-MiniLM-L6-v2, SimCSE's STS + transfer table before and after.

    accelerate launch examples/simcse_macl.py                 # offline default, ~12 min on 2 CPU cores
    accelerate launch examples/simcse_macl.py --loss dystress  # any strategy, at its SimCSE preset
    accelerate launch examples/simcse_macl.py --paper          # bert-base-uncased, wiki1m, batch 64, 1 epoch

The recipe lives in :mod:`cl_plugins.integrations.hosts.simcse.train_then_evaluate`; ``--help`` explains every flag.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cl_plugins.integrations import run_simcse_main as main  # noqa: E402

if __name__ == "__main__":
    main()
