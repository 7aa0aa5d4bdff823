"""A checkpoint unpickles nothing and knows its own files: every forged checkpoint, its completion marker rewritten
to match (anyone who can write the folder can), is refused in one line naming the file and the newest intact
checkpoint, before anything of it is read."""

from __future__ import annotations

import json
import math
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from cl_plugins.integrations.runs import atomic, checkpoint, plain_state, random_states
from tests.planted import Planted


def test_plain_state_round_trips_an_optimizer_and_a_scheduler_exactly(tmp_path):
    model = torch.nn.Linear(3, 2)
    opt = torch.optim.AdamW(model.parameters(), lr=0.1, betas=(0.8, 0.9))
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1 / (s + 1))
    model(torch.randn(4, 3)).sum().backward()
    opt.step(), sched.step()
    state = {"opt": opt.state_dict(), "sched": sched.state_dict(), "odd": {3: (1, "a"), "x": [math.inf, None]}}
    plain_state.write(tmp_path / "s", state, {"run": "r"})
    back = plain_state.read(tmp_path / "s")
    assert back["odd"] == state["odd"] and back["sched"] == state["sched"]
    assert back["opt"]["param_groups"] == state["opt"]["param_groups"]  # betas stay a tuple, params ints
    for key, saved in state["opt"]["state"].items():  # int keys, tensors exact
        assert all(torch.equal(saved[k], back["opt"]["state"][key][k]) for k in saved)
    assert plain_state.identity_of(tmp_path / "s.json") == plain_state.identity_of(tmp_path / "s.safetensors")


@pytest.mark.parametrize("value", [{1, 2}, object(), Path("p")])
def test_plain_state_refuses_what_only_pickle_could_store(tmp_path, value):
    with pytest.raises(TypeError, match="cannot be saved without pickle"):
        plain_state.write(tmp_path / "s", {"x": value}, {})


@pytest.mark.parametrize("state", [{"@tensor": "t9"}, {"@tuple": 1}, {"@dict": [[1]]}, {"@tensor": "t0", "b": 1}])
def test_plain_state_refuses_a_structure_it_does_not_write(tmp_path, state):
    plain_state.write(tmp_path / "s", {"a": torch.ones(1)}, {})
    (tmp_path / "s.json").write_text(json.dumps({"identity": {}, "state": state}))
    with pytest.raises(plain_state.StateFileError, match=r"s\.json is not a state this program wrote"):
        plain_state.read(tmp_path / "s")


class TwoViews(torch.nn.Module):
    """A linear encoder of a view and its flip, whose forward returns the strategy's loss (what ``fit`` trains)."""

    def __init__(self, loss: str = "learnable", **loss_args: float) -> None:
        import cl_plugins as clp

        super().__init__()
        self.encoder = torch.nn.Linear(4, 4)
        self.loss_fn = clp.build_loss(loss, **(loss_args or {"init_tau": 0.2}))

    def forward(self, batch: list[torch.Tensor]) -> torch.Tensor:
        return self.loss_fn(self.encoder(batch[0]), self.encoder(batch[0].flip(1)))


def _train(folder: Path, epochs: int, run_id: str = "run-a", unit: str = "seed_0", resume: bool = False) -> TwoViews:
    from accelerate import Accelerator
    from torch.utils.data import DataLoader, TensorDataset

    from cl_plugins.integrations.runs.training import Plan, Run, fit

    torch.manual_seed(0)
    model = TwoViews()
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    claim = SimpleNamespace(run_id=run_id, commit=lambda: None, settle=lambda: None)
    run = Run(folder, resume, False, claim=claim, unit=unit)
    loader = DataLoader(TensorDataset(torch.randn(16, 4)), batch_size=8)
    fit(Accelerator(cpu=True), model, opt, loader, Plan(epochs, keep=0), run)
    return model


def rewrite_marker(folder: Path) -> None:
    """What a forger does after changing a checkpoint's files: list them again, sizes and SHA-256 included."""
    (folder / atomic.MARKER).write_text(json.dumps({"time": time.time(), "files": atomic.listing(folder)}))


def _other_rank(folder: Path, _: Path) -> None:
    for name in ("json", "safetensors"):
        (folder / f"random_states_0.{name}").rename(folder / f"random_states_1.{name}")


def _rank_one_identity(folder: Path, _: Path) -> None:
    identity = checkpoint.Identity("run-a", "seed_0", 1).at(4, rank=1)
    random_states.save(SimpleNamespace(process_index=0, step=4), folder, identity)


def _copy(name: str, source: Callable[[Path], Path]) -> Callable[[Path, Path], None]:
    def forge(folder: Path, root: Path) -> None:
        shutil.copy(source(root) / name, folder / name)

    return forge


def _planted(name: str) -> Callable[[Path, Path], None]:
    return lambda folder, root: torch.save({"x": Planted(root / "pwned")}, folder / name)


#: (forgery applied to the newest checkpoint, then its marker rewritten) -> what the one line says
FORGERIES: dict[str, tuple[Callable[[Path, Path], None], str]] = {
    "pickle added": (_planted("custom_checkpoint_0.pkl"), "holds pickles (custom_checkpoint_0.pkl)"),
    "pickle as state.json": (_planted("state.json"), "state.json is not UTF-8 text"),
    "pickle as model": (_planted("model.safetensors"), "model.safetensors is not a safetensors file"),
    "random states deleted": (lambda f, r: [(f / f"random_states_0.{e}").unlink() for e in ("json", "safetensors")],
                              "random_states_0.json is missing"),
    "renamed to another rank": (_other_rank, "random_states_0.json is missing"),
    "another rank's identity": (_rank_one_identity, "random_states_0.json belongs to run run-a, unit seed_0, step 4, "
                                "1 processes, rank 1"),
    "another run's state": (_copy("state.json", lambda r: r / "other_run" / "step_4"), "belongs to run run-b"),
    "another unit's model": (_copy("model.safetensors", lambda r: r / "other_unit" / "step_4"), "unit seed_1"),
    "another step's model": (_copy("model.safetensors", lambda r: r / "run" / "step_2"), "step 2"),
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Path:
    """A run that kept both of its checkpoints (step_2, step_4), another run's and another unit's."""
    root = tmp_path_factory.mktemp("checkpoints")
    _train(root / "run", 2)
    _train(root / "other_run", 2, run_id="run-b")
    _train(root / "other_unit", 2, unit="seed_1")
    return root


@pytest.mark.parametrize("forgery", list(FORGERIES))
def test_a_forged_checkpoint_is_refused_in_one_line_naming_the_file_and_the_intact_one(runs, tmp_path, forgery):
    forge, says = FORGERIES[forgery]
    shutil.copytree(runs, tmp_path / "root")
    folder = tmp_path / "root" / "run"
    forge(folder / "step_4", tmp_path / "root")
    rewrite_marker(folder / "step_4")
    assert atomic.damage(folder / "step_4") is None  # the marker cannot tell
    before = atomic.listing(folder)
    with pytest.raises(ValueError) as info:
        _train(folder, 3, resume=True)
    message = str(info.value)
    assert "\n" not in message and says in message and str(folder / "step_4") in message, message
    assert "pickles" in message or f"resume from {folder / 'step_2'} (intact)" in message, message
    assert not (tmp_path / "root" / "pwned").exists() and atomic.listing(folder) == before


def test_another_world_size_is_refused_with_how_to_resume(runs, tmp_path):
    folder = tmp_path / "run"
    shutil.copytree(runs / "run", folder)
    identity = checkpoint.Identity("run-a", "seed_0", 2)
    contents = checkpoint.Contents((TwoViews(),))
    assert "written by 1 processes and this run has 2; resume with 1" in checkpoint.problem(folder / "step_4",
                                                                                           contents, identity)


def test_an_intact_checkpoint_resumes_exactly(runs, tmp_path):
    shutil.copytree(runs / "run", tmp_path / "run")
    resumed = _train(tmp_path / "run", 3, resume=True)
    straight = _train(tmp_path / "straight", 3)
    assert all(torch.equal(a, b) for a, b in zip(resumed.state_dict().values(), straight.state_dict().values()))


@pytest.mark.parametrize("marker", ["[" * 100_000 + "]" * 100_000, '{"files": 1' + "0" * 5000 + "}", "\udcff"],
                         ids=["nested", "long-integer", "not-utf8"])  # fmt: skip
def test_a_forged_marker_is_unreadable_not_a_traceback(tmp_path: Path, marker: str) -> None:
    """A marker nested too deep, with an integer of thousands of digits or not UTF-8: one line, no RecursionError."""
    folder = tmp_path / "step_1"
    with atomic.folder(folder) as tmp:
        (tmp / "weights.bin").write_bytes(b"0")
    (folder / atomic.MARKER).write_bytes(marker.encode("utf-8", "surrogateescape"))
    assert atomic.damage(folder) == f"{atomic.MARKER} (its list of files) is missing or unreadable"
