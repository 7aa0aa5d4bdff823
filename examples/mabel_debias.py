"""MABEL gender debiasing with any cl-plugins strategy, then StereoSet, CrowS-Pairs and SEAT.

    accelerate launch examples/mabel_debias.py --loss temperature_free
    python examples/mabel_debias.py --loss macl --output_dir outputs/mabel_macl
    python examples/mabel_debias.py --paper --model bert-base-uncased --train_file entailment_data.csv
    cl-plugins mabel-eval outputs/mabel/best          # the bias metrics of any MLM folder

Offline defaults: all-MiniLM-L6-v2 with a fitted MLM head (a stand-in for bert-base, see
``docs/mabel.md``) trained on SICK train's entailment pairs and their gender-swapped copies.
Every flag is documented by ``--help``; data comes from ``$CL_PLUGINS_DATA``.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cl_plugins.integrations import run_mabel_train as main  # noqa: E402

if __name__ == "__main__":
    main()
