"""One run per output folder (manifest, lock, resume checks), refused degenerate settings, and one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from cl_plugins.integrations.runs import guard
from cl_plugins.integrations.runs.guard import RunConflict, guarded
from cl_plugins.integrations.runs.layout import RunLayout
from tests import ROOT
from tests.planted import Planted


@dataclass
class Config:
    output_dir: str
    loss: str = "macl"
    lr: float = 0.01
    epochs: int = 2
    seeds: list[int] = field(default_factory=lambda: [0])
    resume: bool = False
    overwrite: bool = False


@guarded
def fake_run(config: Config, *, layout: RunLayout) -> str:
    assert layout.output_dir == Path(config.output_dir) and layout.claim is not None
    (layout.folder / "checkpoint").write_text(config.loss)
    return "trained"


def test_a_new_run_refuses_an_occupied_folder_unless_overwrite(tmp_path):
    assert fake_run(Config(str(tmp_path))) == "trained"
    manifest = json.loads((tmp_path / guard.MANIFEST).read_text())
    assert manifest["config"]["loss"] == "macl" and len(manifest["run_id"]) == 12
    with pytest.raises(RunConflict, match="holds another run .*--resume .*--overwrite"):
        fake_run(Config(str(tmp_path), loss="infonce"))
    assert fake_run(Config(str(tmp_path), loss="infonce", overwrite=True)) == "trained"
    assert json.loads((tmp_path / guard.MANIFEST).read_text())["run_id"] != manifest["run_id"]
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    with pytest.raises(RunConflict, match="files of something else"):
        fake_run(Config(str(foreign)))


def test_resume_continues_only_the_same_run(tmp_path):
    fake_run(Config(str(tmp_path)))
    assert fake_run(Config(str(tmp_path), resume=True, epochs=5, seeds=[0, 1], lr=0.1)) == "trained"  # may change
    manifest = json.loads((tmp_path / guard.MANIFEST).read_text())
    assert manifest["resumes"][0]["changed"] == {"epochs": [2, 5], "lr": [0.01, 0.1], "seeds": [[0], [0, 1]]}
    assert manifest["config"]["lr"] == 0.1  # a later resume compares with the run as it now is
    with pytest.raises(RunConflict, match=r"loss: 'macl' -> 'infonce'"):
        fake_run(Config(str(tmp_path), resume=True, loss="infonce", lr=0.1, epochs=5, seeds=[0, 1]))
    with pytest.raises(RunConflict, match="holds no run to resume"):
        fake_run(Config(str(tmp_path / "empty"), resume=True))
    for seeds in ([1], [1, 2], []):  # --resume --seeds 1 on a --seeds 0 run reported seed 1 alone
        with pytest.raises(RunConflict, match=r"seeds: \[0, 1\] -> .*may add seeds, not drop"):
            fake_run(Config(str(tmp_path), resume=True, lr=0.1, epochs=5, seeds=seeds))
    assert fake_run(Config(str(tmp_path), resume=True, lr=0.1, epochs=5, seeds=[1, 0, 2])) == "trained"


def test_the_lock_keeps_a_second_process_out_and_is_free_the_moment_its_holder_is_killed(tmp_path):
    import signal
    import time

    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time; from pathlib import Path; from cl_plugins.integrations.runs import guard\n"
        f"with guard._lock(Path({str(tmp_path)!r})):\n    print('locked', flush=True); time.sleep(60)")],
        stdout=subprocess.PIPE, text=True, cwd=ROOT)  # fmt: skip
    assert holder.stdout.readline().strip() == "locked"
    with pytest.raises(RunConflict, match=f"pid {holder.pid}"):
        fake_run(Config(str(tmp_path)))
    assert not (tmp_path / "checkpoint").exists()
    holder.send_signal(signal.SIGKILL)
    start = time.time()
    while holder.poll() is None and time.time() - start < 0.05:
        pass  # not reaped yet (a zombie, as under a launcher): the lock must already be free
    assert fake_run(Config(str(tmp_path))) == "trained"
    assert not (tmp_path / guard.LOCK).exists()  # released at the end
    holder.wait()


def test_a_guarded_run_inside_a_guarded_run_shares_its_folder(tmp_path):
    claims = []

    @guarded
    def inner(config: Config, *, layout: RunLayout) -> str:
        claims.append(layout.claim)
        return fake_run(config)

    @guarded
    def outer(config: Config, *, layout: RunLayout) -> str:
        claims.append(layout.claim)
        return inner(config)  # as MABEL's run calls the sentence trainer

    assert outer(Config(str(tmp_path))) == "trained"
    assert claims[0] is claims[1] and claims[0].committed  # the one claim of the folder, committed once


def test_the_output_folder_is_checked_before_training(tmp_path):
    target = tmp_path / "a_file"
    target.write_text("")
    with pytest.raises(NotADirectoryError, match="is a file"):
        fake_run(Config(str(target)))


def _graph(out: Path, *extra: str) -> subprocess.CompletedProcess:
    args = "--dataset MUTAG --seeds 0 --batch_size 64 --hidden 8 --eval_folds 3 --no-svm_search --log_with none"
    cmd = [sys.executable, str(ROOT / "examples" / "graphcl_tu.py"), *args.split(), "--no-progress",
           "--output_dir", str(out), *extra]  # fmt: skip
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=ROOT)


def _one_line(res: subprocess.CompletedProcess, *words: str) -> None:
    assert res.returncode == 2, res.stderr[-2000:]
    lines = [line for line in res.stderr.splitlines() if line.startswith("error: ")]
    assert len(lines) == 1 and "Traceback" not in res.stderr, res.stderr[-2000:]
    assert all(w in lines[0] for w in words), lines[0]


@pytest.mark.slow
def test_cli_refusals_are_one_line(data_root, tmp_path):
    out = tmp_path / "run"
    with ThreadPoolExecutor(2) as pool:  # refusals in folders of their own run beside the chain in one folder
        batch = pool.submit(_graph, tmp_path / "b1", "--epochs", "1", "--batch_size", "1")
        folds = pool.submit(_graph, tmp_path / "f1", "--epochs", "1", "--eval_folds", "1")
        queue = pool.submit(_graph, tmp_path / "q", "--epochs", "1", "--loss_arg", "layout=queue")
        assert _graph(out, "--epochs", "2", "--loss", "macl").returncode == 0
        _one_line(_graph(out, "--epochs", "2", "--loss", "macl"), "--overwrite", "--resume")
        _one_line(_graph(out, "--epochs", "2", "--loss", "infonce", "--resume"), "loss: 'macl' -> 'infonce'")
        _one_line(_graph(out, "--epochs", "1", "--loss", "macl", "--resume"), "2 epochs done", "--epochs 1")
    _one_line(batch.result(), "--batch_size")
    _one_line(folds.result(), "--eval_folds")
    debug = _graph(out, "--epochs", "2", "--loss", "macl", "--debug")
    assert debug.returncode != 0 and "Traceback" in debug.stderr
    # a --loss_arg the trainer sets itself ("got multiple values for keyword argument"), a damaged manifest
    _one_line(queue.result(), "--loss_arg layout=", "sets layout itself")
    assert not (tmp_path / "q").exists()
    manifest = out / guard.MANIFEST
    for text, named in (("{garbled", "is not readable JSON"), ('{"config": 1}', "is not a run manifest")):
        manifest.write_text(text)
        _one_line(_graph(out, "--epochs", "3", "--loss", "macl", "--resume"), str(manifest), named)


def test_hostile_command_line_inputs_get_one_line(data_root, tmp_path, capsys):
    import numpy as np
    import torch

    from cl_plugins.integrations.console import main
    from cl_plugins.integrations.modalities.text.testing import make_tiny_bert
    from tests.integrations.hosts.simcse.test_simcse_train import SENTENCES

    (tmp_path / "train.txt").write_text("\n".join(SENTENCES) + "\n")
    simcse = ["simcse-train", "--model", str(make_tiny_bert(tmp_path / "bert")), "--train_file",
              str(tmp_path / "train.txt"), "--log_with", "none", "--output_dir", str(tmp_path / "s")]  # fmt: skip
    cases = [([*simcse, "--gradient_accumulation_steps", "0"], "--gradient_accumulation_steps must be an integer >= 1")]
    torch.save({"embeddings": torch.zeros(3, 2)}, tmp_path / "emb.pt")
    np.savez(tmp_path / "emb.npz", embeddings=np.zeros((3, 2)), labels=np.zeros(4))
    cases += [(["graph-eval", "tu", "--embeddings", str(tmp_path / "emb.pt")], "is not an .npz of embeddings"),
              (["graph-eval", "tu", "--embeddings", str(tmp_path / "emb.npz")], "expected embeddings [N, D]"),
              (["graph-eval", "tu", "--embeddings", str(tmp_path / "none.npz")], "no such file")]  # fmt: skip
    # Hugging Face folders that are not models (OSError tracebacks, a crafted pickle refused with exit 1)
    import shutil

    (tmp_path / "a_file").write_text("x")
    cut, planted = tmp_path / "cut", tmp_path / "planted"
    for folder in (cut, planted):
        shutil.copytree(tmp_path / "bert", folder)
    (cut / "model.safetensors").write_bytes((cut / "model.safetensors").read_bytes()[:300])
    (planted / "model.safetensors").unlink()
    with (planted / "pytorch_model.bin").open("wb") as f:
        torch.save({"w": Planted(tmp_path / "ran")}, f)
    cases += [(["simcse-eval", "--model", str(tmp_path / "a_file")], "is a file; pass the model's folder"),
              (["simcse-eval", "--model", str(cut)], "cannot load it as AutoModel (SafetensorError"),
              (["simcse-eval", "--model", str(planted)], "cannot load it as AutoModel (UnpicklingError"),
              (["mabel-eval", str(tmp_path / "none" / "x"), "--tasks", "stereoset"], "no such folder"),
              (["mabel-eval", str(planted), "--tasks", "stereoset"], "AutoModelForMaskedLM (UnpicklingError")]
    for argv, named in cases:
        with pytest.raises(SystemExit) as info:
            main(argv)
        err = capsys.readouterr().err
        assert info.value.code == 2 and err.count("error: ") == 1 and named in err and "Traceback" not in err, err
    assert not (tmp_path / "s").exists() and not (tmp_path / "ran").exists()


def test_unreadable_inputs_give_one_line_errors(tmp_path):
    from cl_plugins.integrations.modalities.text.data import load_rows
    from cl_plugins.integrations.modalities.text.encoder import check_model_path
    from cl_plugins.integrations.runs import atomic

    truncated = tmp_path / "model.pt"
    import torch

    torch.save({"config": {}, "model": {"w": torch.ones(100)}}, truncated)
    truncated.write_bytes(truncated.read_bytes()[:50])
    with pytest.raises(ValueError, match="model.pt is not a readable run model"):
        atomic.load_torch(truncated, "run model")
    torch.save({"model": {}}, truncated)
    with pytest.raises(ValueError, match="lacks config, num_features"):
        atomic.load_torch(truncated, "run model", ("config", "num_features", "model"))
    cache = tmp_path / "cache.pt"
    cache.write_bytes(b"not a torch file")
    with pytest.warns(UserWarning, match="rebuilding"):
        assert atomic.load_cache(cache) is None and not cache.exists()
    binary = tmp_path / "train.txt"
    binary.write_bytes(b"a sentence\n\xff\xfe\x00 binary")
    with pytest.raises(ValueError, match=r"--train_file .*train.txt is not UTF-8 text \(byte 11"):
        load_rows(binary)
    with pytest.raises(FileNotFoundError, match="--model ./no/such/model: no such folder"):
        check_model_path("./no/such/model")
    check_model_path("bert-base-uncased")  # a hub name: left to the hub


def test_a_new_learning_rate_on_resume_is_applied_through_its_schedule():
    import torch

    from cl_plugins.integrations.runs.training import apply_learning_rates, base_learning_rates

    def make(lr):
        opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(2))], lr=lr)
        return opt, torch.optim.lr_scheduler.LambdaLR(opt, lambda step: 0.5**step)

    opt, sched = make(0.1)
    for _ in range(3):
        opt.step()
        sched.step()
    saved = (opt.state_dict(), sched.state_dict())
    opt, sched = make(0.2)  # the resumed run, given lr 0.2
    requested = base_learning_rates(opt)
    opt.load_state_dict(saved[0])
    sched.load_state_dict(saved[1])
    assert base_learning_rates(opt) == [0.1]  # the checkpoint's
    apply_learning_rates(opt, (sched,), requested)
    assert opt.param_groups[0]["lr"] == pytest.approx(0.2 * 0.5**3) and sched.base_lrs == [0.2]
    sched.step()
    assert opt.param_groups[0]["lr"] == pytest.approx(0.2 * 0.5**4)


@pytest.mark.slow
def test_graphcl_resumed_with_a_new_learning_rate_trains_with_it(data_root, tmp_path):

    from cl_plugins.integrations.hosts.graph import graphcl_tu

    def config(epochs, lr, resume=False):
        return graphcl_tu.TUConfig(dataset="MUTAG", seeds=[0], epochs=epochs, batch_size=64, hidden=8, eval_folds=3,
                                   svm_search=False, output_dir=str(tmp_path), log_with="none", progress=False,
                                   lr=lr, resume=resume)  # fmt: skip

    graphcl_tu.run(config(1, 0.01))
    graphcl_tu.run(config(2, 0.005, resume=True))
    from cl_plugins.integrations.runs import atomic, checkpoint, plain_state

    newest = atomic.latest_complete(tmp_path / "seed_0" / "checkpoints", "step")
    assert newest is not None and newest.name == "step_6"  # MUTAG's 188 graphs: 3 batches of 64 an epoch
    state = plain_state.read(newest / checkpoint.STATE)["optimizers"][0]
    assert [g["lr"] for g in state["param_groups"]] == [0.005]
