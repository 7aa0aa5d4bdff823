"""GraphCL unsupervised TU graph classification (GIN + SVM 10-fold accuracy, mean ± std over seeds).

    accelerate launch examples/graphcl_tu.py --dataset MUTAG --loss macl
    python examples/graphcl_tu.py --dataset NCI1 --loss temperature_free --seeds 0 1 2

Every flag is documented by ``--help``; the settings, the protocol and the outputs
(checkpoints, embeddings, ``results.json``) are described in :mod:`cl_plugins.integrations.hosts.graph.graphcl_tu`.
Data comes from ``$CL_PLUGINS_DATA`` (the data pack's canonical layout) and is processed into
``$CL_PLUGINS_CACHE`` (default ``~/.cache/cl_plugins``).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cl_plugins.integrations import run_graphcl_tu as main  # noqa: E402

if __name__ == "__main__":
    main()
