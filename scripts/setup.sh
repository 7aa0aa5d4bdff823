#!/usr/bin/env bash
# Install cl-plugins with everything its tests, benchmarks and examples need, on a fresh machine.
# torch comes first and pinned: torch==2.13.0 is the local CPU build here (any other spec pulls CUDA).
set -euo pipefail
cd "$(dirname "$0")/.."
python -m pip install --quiet "torch==2.13.0"
python -m pip install --quiet -e ".[dev]"
