"""The one run core through the real command lines: kills, resumes and mistakes never lose a finished run or
report a wrong number (issue: one run core)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from cl_plugins.integrations.runs import atomic, checkpoint, guard, saved_model
from tests import ROOT
from tests.planted import Planted

KILLED = -9
GRAPH = "--dataset MUTAG --seeds 0 --batch_size 64 --hidden 8 --eval_folds 3 --no-svm_search --log_with none"


#: one thread, fixed: a run and its resume then sum in the same order, which bit-equality needs (a killed-and-resumed
#: run once differed from the straight one in CI under load, where the BLAS may pick its own thread count)
def clp_names() -> list[str]:
    import cl_plugins as clp

    return [name for name in clp.available_losses() if name != "amcl"]  # AMCL needs dim=: its own case below


THREADS = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "MKL_DYNAMIC": "FALSE"}


def _run(cmd: list[str], fault: str = "") -> subprocess.CompletedProcess:
    env = {**os.environ, **THREADS, "CL_PLUGINS_FAULT": fault}
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=ROOT, env=env)


def _graph(out: Path, *extra: str, fault: str = "") -> subprocess.CompletedProcess:
    cmd = [sys.executable, str(ROOT / "examples" / "graphcl_tu.py"), *GRAPH.split(), "--no-progress",
           "--output_dir", str(out), *extra]  # fmt: skip
    return _run(cmd, fault)


def _snapshot(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` with the hash of its bytes (what "nothing changed on disk" compares)."""
    if not folder.exists():
        return {}
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}  # fmt: skip


def _one_line(res: subprocess.CompletedProcess, *words: str) -> None:
    assert res.returncode == 2, res.stderr[-2000:]
    lines = [line for line in res.stderr.splitlines() if line.startswith("error: ")]
    assert len(lines) == 1 and "Traceback" not in res.stderr, res.stderr[-2000:]
    assert all(w in lines[0] for w in words), lines[0]


def _weights(out: Path) -> dict[str, torch.Tensor]:
    return saved_model.read(out / "seed_0" / "model", ["graphcl_tu"], "run model").weights


@pytest.fixture(scope="module")
def finished(data_root, tmp_path_factory) -> Path:
    """A finished 2-epoch GraphCL TU run."""
    out = tmp_path_factory.mktemp("graph") / "finished"
    res = _graph(out, "--epochs", "2", "--loss", "macl")
    assert res.returncode == 0, res.stderr[-2000:]
    return out


@pytest.mark.slow
@pytest.mark.parametrize(("mistake", "named"), [(("--loss", "bogus"), "unknown loss 'bogus'"),
                                               (("--loss_arg", "tau0=abc"), "tau0 must be a number"),
                                               (("--loss_arg", "=1"), "--loss_arg"),
                                               (("--loss_arg", "tua=0.1"), "['tua']")])  # fmt: skip
def test_a_refused_overwrite_leaves_the_finished_run_as_it_was(finished, mistake, named):
    before = _snapshot(finished)
    assert "results.json" in before and "seed_0/model/model.safetensors" in before
    _one_line(_graph(finished, "--epochs", "2", "--loss", "macl", "--overwrite", *mistake), named)
    assert _snapshot(finished) == before


@pytest.mark.slow
def test_a_refused_resume_and_a_refused_new_run_change_nothing_on_disk(finished, tmp_path):
    before = _snapshot(finished)
    _one_line(_graph(finished, "--epochs", "1", "--loss", "macl", "--resume"), "2 epochs done", "--epochs 1")
    _one_line(_graph(finished, "--epochs", "3", "--loss", "macl", "--resume", "--loss_arg", "tau0=abc"), "tau0")
    _one_line(_graph(finished, "--epochs", "2", "--loss", "macl", "--resume", "--seeds", "1"), "seeds: [0] -> [1]")
    assert _snapshot(finished) == before  # the manifest too: no resume is recorded for a refused one
    new = tmp_path / "new"
    _one_line(_graph(new, "--epochs", "1", "--loss", "macl", "--loss_arg", "alpha=-5"), "alpha")
    assert not new.exists()  # refused at load time: no folder, no manifest in the way of the corrected command
    assert _graph(new, "--epochs", "1", "--loss", "macl").returncode == 0


@pytest.mark.slow
def test_a_run_killed_before_its_commit_gives_the_replaced_run_back(finished, tmp_path):
    before = _snapshot(finished)
    killed = _graph(finished, "--epochs", "2", "--loss", "macl", "--overwrite", fault="run:claimed")
    assert killed.returncode == KILLED
    assert (finished / guard.REPLACED).is_dir()  # set aside, not deleted
    _one_line(_graph(finished, "--epochs", "2", "--loss", "macl"), "--overwrite")  # the next command restores it
    assert _snapshot(finished) == before


@pytest.mark.slow
@pytest.mark.parametrize("point", ["save:published:2"])  # a kill in the other phases: test_run_safety.py
def test_killed_and_resumed_with_more_epochs_ends_as_the_longer_run(finished, tmp_path, point):
    straight = tmp_path / "straight"
    assert _graph(straight, "--epochs", "3", "--loss", "macl").returncode == 0
    broken = tmp_path / "broken"
    assert _graph(broken, "--epochs", "2", "--loss", "macl", fault=point).returncode == KILLED
    resumed = _graph(broken, "--epochs", "3", "--loss", "macl", "--resume")
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    a, b = _weights(straight), _weights(broken)
    assert all(torch.equal(a[k], b[k]) for k in a)
    ra, rb = (json.loads((p / "results.json").read_text()) for p in (straight, broken))
    assert len(rb["runs"][0]["epoch_loss"]) == 3  # the whole run's losses, not the part after the resume
    assert ra["runs"][0]["epoch_loss"] == rb["runs"][0]["epoch_loss"] and ra["accuracy_mean"] == rb["accuracy_mean"]
    manifest = json.loads((broken / guard.MANIFEST).read_text())
    assert manifest["config"]["epochs"] == 3 and manifest["resumes"][0]["changed"]["epochs"] == [2, 3]


def test_the_loop_refuses_a_resume_that_changes_its_schedules_length(tmp_path):
    from accelerate import Accelerator
    from torch.utils.data import DataLoader, TensorDataset

    from cl_plugins.integrations.runs.training import Plan, Run, fit
    from tests.integrations.runs.test_checkpoint import TwoViews

    def train(epochs: int, resume: bool = False) -> None:
        torch.manual_seed(0)
        model = TwoViews("infonce", tau=0.2)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        def cosine(o, total):
            return torch.optim.lr_scheduler.LambdaLR(o, lambda s: 1 - s / total)

        loader = DataLoader(TensorDataset(torch.randn(16, 4)), batch_size=8)
        fit(Accelerator(cpu=True), model, opt, loader, Plan(epochs), Run(tmp_path, resume, False), schedule=cosine)

    train(2)
    with pytest.raises(ValueError, match="schedule of this run spans 4 steps .* now make it 6"):
        train(3, resume=True)
    train(2, resume=True)  # the same plan resumes (nothing left to do)


@pytest.mark.slow
def test_msc_resumed_after_its_last_checkpoint_reports_the_trained_roc_auc(data_root, tmp_path):
    from cl_plugins.integrations.hosts.vision.train import main as ssl

    ssl(["--subset_per_class", "6", "--width", "4", "--proj_hidden", "16", "--proj_dim", "8", "--batch_size", "20",
         "--image_size", "16", "--epochs", "1", "--linear_epochs", "0", "--eval_bank_per_class", "5",
         "--eval_test_per_class", "5", "--log_with", "none", "--no-progress", "--output_dir", str(tmp_path / "ssl")])
    cmd = [sys.executable, str(ROOT / "examples" / "msc_anomaly.py"), "--backbone_path",
           str(tmp_path / "ssl"), "--normal_classes", "3", "--epochs", "2", "--train_per_class", "40",
           "--test_per_class", "6", "--batch_size", "16", "--lr", "0.05", "--log_with", "none", "--no-progress"]
    # fmt: skip
    assert _run([*cmd, "--output_dir", str(tmp_path / "a")]).returncode == 0
    # killed once the last epoch's checkpoint is complete, before results.json
    assert _run([*cmd, "--output_dir", str(tmp_path / "b")], "save:published:2").returncode == KILLED
    assert not (tmp_path / "b" / "results.json").exists()
    resumed = _run([*cmd, "--output_dir", str(tmp_path / "b"), "--resume"])
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    a, b = (json.loads((tmp_path / p / "results.json").read_text()) for p in ("a", "b"))
    assert a["runs"][0]["roc_auc"] == b["runs"][0]["roc_auc"] and len(b["runs"][0]["roc_auc"]) == 3
    assert a["mean_roc_auc"] == b["mean_roc_auc"] != b["mean_roc_auc_before"]


def test_a_kill_in_a_folder_swap_is_finished_by_the_next_command(tmp_path):
    out = tmp_path / "run"
    for version in ("v1", "v2"):
        script = ("from pathlib import Path\nfrom cl_plugins.integrations.runs import atomic\n"
                  f"with atomic.folder(Path({str(out / 'best')!r})) as tmp:\n    (tmp / 'w').write_text({version!r})")
        assert _run([sys.executable, "-c", script], "save:swapped" if version == "v2" else "").returncode in (0, KILLED)
    (out / ".model.pt.123.tmp").write_text("half")  # a file a kill left half-written
    assert not (out / "best").exists() and list(out.glob("best.*"))
    atomic.recover_tree(out)
    assert (out / "best" / "w").read_text() == "v2" and sorted(p.name for p in out.iterdir()) == ["best"]


def test_loss_arg_mistakes_are_user_errors():
    import cl_plugins as clp
    from cl_plugins.integrations.command_line import parse_loss_args

    with pytest.raises(ValueError, match="not a parameter name"):
        parse_loss_args(["=1"])
    for bad in ({"tau": "abc"}, {"tua": 0.1}):
        with pytest.raises(ValueError):  # also a TypeError, for Python callers
            clp.build_loss("infonce", **bad)


def test_a_crafted_pickle_is_refused_never_run(tmp_path):
    from cl_plugins.integrations.hosts.msc.anomaly import main as msc

    marker, crafted = tmp_path / "marker", tmp_path / "backbone.pt"
    torch.save({"state_dict": Planted(marker), "arch": "resnet18"}, crafted)
    with pytest.raises(ValueError, match="never unpickled"):
        atomic.load_torch(crafted, "backbone")
    with pytest.raises(SystemExit) as exit_info:
        msc(["--backbone_path", str(crafted), "--log_with", "none", "--output_dir", str(tmp_path / "msc")])
    assert exit_info.value.code == 2 and not marker.exists() and not (tmp_path / "msc").exists()


def test_msc_given_another_architectures_backbone_says_so_in_one_line(tmp_path, capsys):
    from cl_plugins.integrations.hosts.msc.anomaly import main as msc
    from cl_plugins.integrations.modalities.images.resnet import build_resnet

    torch.save(build_resnet("resnet18", cifar_stem=True, width=4).state_dict(), tmp_path / "small.pth")
    with pytest.raises(SystemExit) as exit_info:
        msc(["--backbone_path", str(tmp_path / "small.pth"), "--arch", "resnet18", "--log_with", "none",
             "--output_dir", str(tmp_path / "msc")])  # fmt: skip
    assert exit_info.value.code == 2
    assert "does not match the model" in capsys.readouterr().err


def test_mabel_eval_refuses_a_folder_without_a_trained_mlm_head(tmp_path, capsys):
    from cl_plugins.integrations.hosts.mabel.evaluate import main as mabel_eval
    from cl_plugins.integrations.modalities.text.testing import make_tiny_bert

    make_tiny_bert(tmp_path / "final")  # an encoder without MLM head, as SimCSE's final/ without --do_mlm
    with pytest.raises(SystemExit) as exit_info:
        mabel_eval([str(tmp_path / "final"), "--tasks", "crows"])
    assert exit_info.value.code == 2 and "no trained masked-LM head" in capsys.readouterr().err


#: loss arguments every strategy accepts when it is built and that only the loss's first call can refuse (what the
#: trainer passes decides: labels, hard negatives, the features' width, the device): every registered strategy with
#: one of them in turn, so each argument meets two strategies or more (the refusal comes from the same probe for
#: all of them; tests/integrations/runs/test_refusal_search.py draws further combinations)
CALL_TIME_ARGS = ("label_policy=exclude", "label_policy=positives_out", "hard_negative_weight=0.5", "kernel=triton")
CALL_TIME_MISTAKES = [
    *[(name, CALL_TIME_ARGS[i % len(CALL_TIME_ARGS)]) for i, name in enumerate(clp_names())],
    ("amcl", "dim=5"),
]


@pytest.mark.slow
@pytest.mark.parametrize(("loss", "arg"), CALL_TIME_MISTAKES, ids=["-".join(c) for c in CALL_TIME_MISTAKES])
def test_a_loss_refused_at_its_first_call_changes_nothing_on_disk(finished, tmp_path, monkeypatch, capsys, loss, arg):
    """the loss runs once on the run's first batch before the run claims its folder, so an argument the
    first call refuses leaves a finished run as it was under --overwrite, and leaves no folder for a new run."""
    from cl_plugins.integrations.console import main

    monkeypatch.delenv("TRITON_INTERPRET", raising=False)  # kernel='triton' on CPU tensors: refused, as on a user's
    before = _snapshot(finished)
    base = ["graphcl-tu", *GRAPH.split(), "--no-progress", "--epochs", "1", "--loss", loss, "--loss_arg", arg]
    for out, extra in ((finished, ["--overwrite"]), (tmp_path / "new", [])):
        with pytest.raises(SystemExit) as info:
            main([*base, "--output_dir", str(out), *extra])
        err = capsys.readouterr().err
        assert info.value.code == 2 and err.count("error: ") == 1 and "Traceback" not in err, err
    assert _snapshot(finished) == before and not (tmp_path / "new").exists()


@pytest.mark.slow
@pytest.mark.parametrize("next_command", ["a refused run", "a reader"])
def test_a_run_killed_after_its_commit_before_its_first_checkpoint_gives_the_replaced_run_back(finished, capsys,
                                                                                               next_command):
    before = _snapshot(finished)
    killed = _graph(finished, "--epochs", "2", "--loss", "macl", "--overwrite", fault="run:committed")
    assert killed.returncode == KILLED
    assert (finished / guard.REPLACED).is_dir() and (finished / guard.MANIFEST).is_file()
    if next_command == "a reader":  # graph-eval finds the model (it sat in .cl_plugins_replaced/)
        from cl_plugins.integrations.hosts.graph.evaluate import main

        main(["tu", "--checkpoint", str(finished / "seed_0"), "--folds", "3"])
        assert 50 < json.loads(capsys.readouterr().out)["accuracy_mean"] <= 100
    else:
        _one_line(_graph(finished, "--epochs", "2", "--loss", "macl"), "--overwrite")  # it restores, then refuses
    assert _snapshot(finished) == before


def _garble(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


DAMAGE = {
    "deleted": lambda p, marker: p.unlink(),
    "garbled": lambda p, marker: _garble(p),
    "truncated": lambda p, marker: p.write_bytes(p.read_bytes()[: p.stat().st_size // 2]),
    "crafted pickle": lambda p, marker: torch.save({"x": Planted(marker)}, p),
}
CHECKPOINT_FILES = ("random_states_0.json", "random_states_0.safetensors", "state.json", "state.safetensors",
                    "model.safetensors")


@pytest.fixture(scope="module")
def two_checkpoints(data_root, tmp_path_factory) -> Path:
    """A finished 2-epoch GraphCL TU run that kept both epochs' checkpoints."""
    out = tmp_path_factory.mktemp("graph") / "two_checkpoints"
    assert _graph(out, "--epochs", "2", "--keep_checkpoints", "0").returncode == 0
    return out


@pytest.mark.slow
@pytest.mark.parametrize("damage", list(DAMAGE))
@pytest.mark.parametrize("name", CHECKPOINT_FILES)
def test_a_damaged_checkpoint_is_refused_in_one_line_before_anything_of_it_is_read(
    two_checkpoints, tmp_path, monkeypatch, capsys, damage, name
):
    """A checkpoint's marker lists its files (size, SHA-256); --resume verifies them before it reads anything, names
    the file, and points at the older intact checkpoint."""
    import shutil

    from cl_plugins.integrations.console import main

    out, marker = tmp_path / "run", tmp_path / "pwned"
    shutil.copytree(two_checkpoints, out)
    newest, older = sorted((out / "seed_0" / "checkpoints").iterdir(), key=lambda p: int(p.name.split("_")[1]))[::-1]
    DAMAGE[damage](newest / name, marker)
    before = _snapshot(out)
    with pytest.raises(SystemExit) as info:
        main(["graphcl-tu", *GRAPH.split(), "--no-progress", "--epochs", "3", "--resume", "--output_dir", str(out)])
    err = capsys.readouterr().err
    assert info.value.code == 2 and err.count("error: ") == 1 and "Traceback" not in err, err
    assert f"{newest} is damaged: {name}" in err and f"resume from {older} (intact)" in err, err
    assert not marker.exists() and _snapshot(out) == before


@pytest.mark.slow
def test_a_crafted_pickle_under_a_rewritten_marker_runs_nothing(two_checkpoints, tmp_path, capsys):
    """The marker is no seal (anyone who can write the folder can list the files again): a checkpoint with a pickle
    in it is refused whatever its marker says, and nothing of it is unpickled."""
    import shutil

    from cl_plugins.integrations.console import main
    from tests.integrations.runs.test_checkpoint import rewrite_marker

    out, marker = tmp_path / "run", tmp_path / "pwned"
    shutil.copytree(two_checkpoints, out)
    newest = max((out / "seed_0" / "checkpoints").iterdir(), key=lambda p: int(p.name.split("_")[1]))
    torch.save({"x": Planted(marker)}, newest / "custom_checkpoint_0.pkl")
    rewrite_marker(newest)
    with pytest.raises(SystemExit):
        main(["graphcl-tu", *GRAPH.split(), "--no-progress", "--epochs", "3", "--resume", "--output_dir", str(out)])
    err = capsys.readouterr().err
    assert err.count("error: ") == 1 and "holds pickles (custom_checkpoint_0.pkl)" in err and "--overwrite" in err
    assert not marker.exists()


def test_a_checkpoint_with_an_added_file_or_without_its_list_is_refused(tmp_path):
    from cl_plugins.integrations.runs.training import Saved, _refuse_unusable

    saved = Saved(checkpoint.Contents((torch.nn.Linear(1, 1),)), checkpoint.Identity("", "", 1))
    for step in (1, 2):
        with atomic.folder(tmp_path / f"step_{step}") as tmp:
            (tmp / "model.safetensors").write_bytes(b"weights")
    assert atomic.damage(tmp_path / "step_2") is None
    (tmp_path / "step_2" / "extra.pkl").write_bytes(b"x")
    with pytest.raises(ValueError, match=r"step_2 is damaged: extra.pkl was not written with it; .*start a new run"):
        _refuse_unusable(tmp_path, tmp_path / "step_2", saved)
    (tmp_path / "step_1" / atomic.MARKER).write_text("{}")
    with pytest.raises(ValueError, match=r"its list of files\) is missing or unreadable.*start a new run"):
        _refuse_unusable(tmp_path, tmp_path / "step_1", saved)
