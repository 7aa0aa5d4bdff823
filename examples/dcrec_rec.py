"""DCRec sequential recommendation with any cl-plugins strategy, HR / NDCG @ {1, 5, 10}.

    accelerate launch examples/dcrec_rec.py --dataset beauty --loss temperature_free
    python examples/dcrec_rec.py --dataset ml-100k --loss macl --seeds 2020 0 1
    python examples/dcrec_rec.py --dataset beauty --selection test   # DCRec's test-set selection, labelled
    cl-plugins dcrec-eval outputs/dcrec/seed_2020     # re-evaluate a saved run

Every flag is documented by ``--help``; the model is described in :mod:`cl_plugins.integrations.hosts.dcrec.model`,
the protocols in :mod:`cl_plugins.integrations.hosts.dcrec.splits` and
:mod:`cl_plugins.integrations.hosts.dcrec.evaluate`. Data
comes from ``$CL_PLUGINS_DATA`` (``recsys/dcrec/dataset/<name>/``, ``recsys/movielens/ml-100k/``).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cl_plugins.integrations import run_dcrec_train as main  # noqa: E402

if __name__ == "__main__":
    main()
