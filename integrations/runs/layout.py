"""Every path of a run, named in one place: what a trainer writes, what the loop checkpoints into, what the guard
claims and what the saved-model readers look for.

====================================  =====================================================================
path                                  what
====================================  =====================================================================
``OUTPUT/cl_plugins_run.json``        the run's manifest (:mod:`cl_plugins.integrations.runs.guard`)
``OUTPUT/results.json``               the run's results (over every seed where it has several)
``OUTPUT/<unit>/``                    one unit of the run: ``seed_<s>/``, MSC's ``class<c>_seed_<s>/``,
                                      GraphCL transfer's ``pretrain/``; the run folder itself where a trainer
                                      has one unit
``<unit>/checkpoints/step_<n>/``      the loop's training states (:mod:`cl_plugins.integrations.runs.training`)
``<unit>/model/``                     the saved model (:mod:`cl_plugins.integrations.runs.saved_model`), in
                                      every trainer
``<unit>/best/``                      the text trainers' model selected on STS-B dev
``<unit>/results.json``               the unit's results
``<unit>/embeddings.npz``             the graph trainers' embeddings
``<unit>/logs/``                      the trackers' logs
====================================  =====================================================================
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

#: the run's manifest, at the top of its output folder
MANIFEST = "cl_plugins_run.json"
#: a saved model's folder, in every trainer
MODEL = "model"
#: the text trainers' selected model
BEST = "best"
RESULTS = "results.json"


def seed_folder(seed: int) -> str:
    """A seed's folder under the run's output folder (``seed_<s>``)."""
    return f"seed_{seed}"


@dataclass(frozen=True)
class RunLayout:
    """The paths of one run (``output_dir``) or of one of its units (see the module docstring).

    Args:
        output_dir: the run's output folder (``--output_dir``).
        unit: the unit's folder under it (default: "", the run folder itself).
        claim: the guard's claim on ``output_dir``, which the training loop commits and settles (default: None,
            a process that claims nothing: not the main one, or no guard).
    """

    output_dir: Path
    unit: str = ""
    claim: Any = field(default=None, compare=False, repr=False)

    @classmethod
    def of(cls, config: Any, claim: Any = None) -> RunLayout:
        """The layout of a run configuration's ``output_dir``."""
        return cls(Path(config.output_dir), claim=claim)

    def seed(self, seed: int, prefix: str = "") -> RunLayout:
        """The unit of one seed (``<prefix>seed_<s>``)."""
        return replace(self, unit=f"{prefix}{seed_folder(seed)}")

    def part(self, name: str) -> RunLayout:
        """A named unit (GraphCL transfer's ``pretrain``)."""
        return replace(self, unit=name)

    @property
    def folder(self) -> Path:
        return self.output_dir / self.unit if self.unit else self.output_dir

    @property
    def summary(self) -> Path:
        """The run's results (over every unit)."""
        return self.output_dir / RESULTS

    @property
    def results(self) -> Path:
        return self.folder / RESULTS

    @property
    def checkpoints(self) -> Path:
        return self.folder / "checkpoints"

    @property
    def model(self) -> Path:
        return self.folder / MODEL

    @property
    def best(self) -> Path:
        return self.folder / BEST

    @property
    def embeddings(self) -> Path:
        return self.folder / "embeddings.npz"

    @property
    def logs(self) -> Path:
        return self.folder / "logs"

