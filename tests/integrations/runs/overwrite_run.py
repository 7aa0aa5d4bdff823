"""A guarded run small enough to stop at every file operation of ``--overwrite`` (``test_overwrite_journal.py``).

``python -m tests.integrations.runs.overwrite_run OUT MODE [--overwrite]``: ``write`` writes a run's entries and
returns; ``fail`` writes them and raises; ``read`` is a reader (restores what an interrupted overwrite left).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from cl_plugins.integrations.runs import atomic, guard


@dataclass
class Config:
    output_dir: str
    content: str = "old"
    overwrite: bool = False
    resume: bool = False


@guard.guarded
def run(config: Config, mode: str, layout: object) -> None:
    out = Path(config.output_dir)
    atomic.write_text(out / "results.json", config.content)
    (out / "seed_0" / "model").mkdir(parents=True)
    atomic.write_text(out / "seed_0" / "model" / "weights", config.content * 3)
    (out / "logs").mkdir()
    atomic.write_text(out / "logs" / f"{config.content}.log", config.content)
    if mode == "fail":
        raise RuntimeError("the run failed")


def main(argv: list[str]) -> int:
    out, mode, *flags = argv
    if mode == "read":
        guard.restore_interrupted(Path(out) / "seed_0" / "model")
        return 0
    try:
        run(Config(out, content="new" if "--overwrite" in flags else "old", overwrite="--overwrite" in flags), mode)
    except (RuntimeError, guard.RunConflict) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
