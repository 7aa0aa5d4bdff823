"""GRACE node classification on Cora / CiteSeer (GCN + logistic regression F1, random 10/10/80 and public splits).

    accelerate launch examples/grace_node.py --dataset CiteSeer --loss temperature_free
    python examples/grace_node.py --dataset Cora --loss dystress --seeds 0 1 2 --split random

Every flag is documented by ``--help``; the settings, the protocol and the outputs
(checkpoints, embeddings, ``results.json``) are described in :mod:`cl_plugins.integrations.hosts.graph.grace`.
Data comes from ``$CL_PLUGINS_DATA`` (the data pack's canonical layout) and is processed into
``$CL_PLUGINS_CACHE`` (default ``~/.cache/cl_plugins``).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cl_plugins.integrations import run_grace as main  # noqa: E402

if __name__ == "__main__":
    main()
