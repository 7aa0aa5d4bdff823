"""The test suite; ``ROOT`` is the repository root, wherever a test file sits."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
