"""GraphCL transfer learning on molecules: pre-train a Hu et al. GIN on ZINC SMILES with any strategy,
fine-tune on MoleculeNet (scaffold split, ROC-AUC).

    accelerate launch examples/graphcl_transfer.py --loss macl --datasets bbbp bace --runseeds 0 1 2
    python examples/graphcl_transfer.py --pretrain_epochs 100 --finetune_epochs 100   # GraphCL's lengths

Every flag is documented by ``--help``; the settings, the protocol and the outputs
(checkpoints, embeddings, ``results.json``) are described in
:mod:`cl_plugins.integrations.hosts.graph.graphcl_transfer`.
Data comes from ``$CL_PLUGINS_DATA`` (the data pack's canonical layout) and is processed into
``$CL_PLUGINS_CACHE`` (default ``~/.cache/cl_plugins``).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cl_plugins.integrations import run_graphcl_transfer as main  # noqa: E402

if __name__ == "__main__":
    main()
