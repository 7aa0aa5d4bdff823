"""Real-data smoke tests of the image loaders, short SSL and MSC runs (with exact resume), the entry points."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from cl_plugins.integrations.modalities.images.datasets import load_cifar10, load_fashion_mnist, long_tail_counts
from cl_plugins.integrations.runs import saved_model
from tests import ROOT
from tests.dist_utils import failure_report, torchrun  # noqa: E402

TINY = (
    "--subset_per_class 6 --eval_bank_per_class 10 --eval_test_per_class 5 --width 4 --proj_hidden 16 --proj_dim 8 "
    "--batch_size 20 --image_size 16 --linear_epochs 3 --eval_every 1 --log_with none --no-progress"
).split()


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("CL_PLUGINS_CACHE", str(tmp_path_factory.getbasetemp() / "cache"))


def test_cifar10_from_the_pack(data_root):
    x, y = load_cifar10("test")
    assert x.shape == (10000, 3, 32, 32) and x.dtype == torch.uint8
    assert torch.bincount(y).tolist() == [1000] * 10
    # the JPEG tree decodes to real images: mean intensity of CIFAR-10 is about 120
    assert 100 < float(x.float().mean()) < 140


def test_fashion_mnist_from_debian_or_the_pack(data_root):
    try:
        x, y = load_fashion_mnist("test")
    except FileNotFoundError as err:
        pytest.skip(f"Fashion-MNIST not installed: {err}")
    assert x.shape == (10000, 1, 28, 28) and torch.bincount(y).tolist() == [1000] * 10


def test_missing_cifar_names_the_variable(tmp_path, monkeypatch):
    monkeypatch.setenv("CL_PLUGINS_DATA", str(tmp_path))
    with pytest.raises(FileNotFoundError, match="CL_PLUGINS_DATA"):
        load_cifar10("train")
    with pytest.raises(ValueError, match="split"):
        load_cifar10("val")


def _train(tmp_path: Path, *extra: str) -> dict:
    from cl_plugins.integrations.hosts.vision.train import main

    return main([*TINY, "--output_dir", str(tmp_path), *extra])


def test_ssl_run_resumes_exactly(data_root, tmp_path):
    straight = _train(tmp_path / "a", "--epochs", "2", "--framework", "mocov2", "--loss", "macl", "--queue_size", "40")
    _train(
        tmp_path / "b",
        "--epochs",
        "2",
        "--stop_after_epochs",
        "1",
        "--framework",
        "mocov2",
        "--loss",
        "macl",
        "--queue_size",
        "40",
    )
    resumed = _train(
        tmp_path / "b", "--epochs", "2", "--framework", "mocov2", "--loss", "macl", "--queue_size", "40", "--resume"
    )
    assert resumed["epoch_loss"] == straight["epoch_loss"]  # the whole run's, not only the part after the resume
    assert resumed["history"] == straight["history"]
    a = saved_model.read(tmp_path / "a" / "model", ["vision"], "backbone").weights
    b = saved_model.read(tmp_path / "b" / "model", ["vision"], "backbone").weights
    assert all(torch.equal(a[k], b[k]) for k in a)
    saved = json.loads((tmp_path / "a" / "results.json").read_text())
    assert 0 <= saved["knn_top1"] <= 1 and 0 <= saved["linear_top1"] <= 1 and saved["train_images"] == 60
    assert [h["epoch"] for h in saved["history"]] == [1]


def test_long_tail_and_fashion_mnist_runs(data_root, tmp_path):
    lt_args = ["--epochs", "1", "--dataset", "cifar10_lt", "--imbalance_ratio", "6", "--loss", "dystress"]
    lt = _train(tmp_path / "lt", *lt_args, "--mixed_precision", "bf16", "--log_with", "tensorboard")
    assert lt["train_images"] == sum(long_tail_counts(6, 10, 6)) == 25
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(next((tmp_path / "lt" / "logs").iterdir())))
    events.Reload()
    assert {"train/loss", "train/tau_mean", "eval/knn_top1"} <= set(events.Tags()["scalars"])
    try:
        load_fashion_mnist("test")
    except FileNotFoundError:
        pytest.skip("Fashion-MNIST not installed")
    fm = _train(tmp_path / "fm", "--epochs", "1", "--dataset", "fashion_mnist", "--image_size", "28")
    assert "knn_top1" in fm
    assert saved_model.read_info(tmp_path / "fm" / "model", ["vision"], "backbone").model["in_channels"] == 1


def test_msc_on_the_ssl_backbone(data_root, tmp_path):
    _train(tmp_path / "ssl", "--epochs", "1", "--linear_epochs", "0")
    from cl_plugins.integrations.hosts.msc.anomaly import main

    summary = main(
        ["--backbone_path", str(tmp_path / "ssl"), "--normal_classes", "3", "--epochs", "1",
         "--train_per_class", "40", "--test_per_class", "6", "--batch_size", "16", "--loss", "temperature_free",
         "--output_dir", str(tmp_path / "msc"), "--log_with", "none", "--no-progress", "--lr", "0.01"]
    )  # fmt: skip
    run = summary["runs"][0]
    assert len(run["roc_auc"]) == 2 and all(0 <= a <= 1 for a in run["roc_auc"])
    assert summary["mean_roc_auc"] == pytest.approx(100 * run["roc_auc"][-1])
    meta = saved_model.read_info(tmp_path / "ssl" / "model", ["vision"], "backbone").run
    assert meta["dataset"] == "cifar10"  # training split only, no labels: no leakage into the one-class task
    with pytest.raises(SystemExit) as exit_info:  # a user error: one line, exit code 2
        main(["--backbone_path", str(tmp_path / "none.pt"), "--log_with", "none"])
    assert exit_info.value.code == 2


@pytest.mark.parametrize("script", ["simclr_cifar.py", "msc_anomaly.py"])
def test_entry_point_help(script):
    out = subprocess.run([sys.executable, str(ROOT / "examples" / script), "--help"], capture_output=True, text=True)
    assert out.returncode == 0 and "--loss" in out.stdout and "--output_dir" in out.stdout


def test_two_process_run(data_root, tmp_path):
    script = str(ROOT / "examples/simclr_cifar.py")
    cmd = [*torchrun(2), script, *TINY]
    cmd += ["--epochs", "1", "--framework", "mocov2", "--queue_size", "40", "--batch_size", "10"]
    cmd += ["--output_dir", str(tmp_path)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert out.returncode == 0, failure_report(out)
    saved = json.loads((tmp_path / "results.json").read_text())
    assert 0 <= saved["knn_top1"] <= 1
    msc_script = str(ROOT / "examples" / "msc_anomaly.py")
    msc = [*torchrun(2), msc_script]
    msc += ["--backbone_path", str(tmp_path), "--normal_classes", "2", "--epochs", "1"]
    msc += ["--train_per_class", "32", "--test_per_class", "5", "--batch_size", "8", "--log_with", "none"]
    msc += ["--no-progress", "--output_dir", str(tmp_path / "msc")]
    out = subprocess.run(msc, capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert out.returncode == 0, failure_report(out)
    assert len(json.loads((tmp_path / "msc" / "results.json").read_text())["runs"][0]["roc_auc"]) == 2


def test_a_batch_of_one_is_refused_in_one_line_before_the_folder_is_claimed(data_root, tmp_path, capsys):
    from cl_plugins.integrations.hosts.vision.train import main

    tiny = [a for a in TINY]
    tiny[tiny.index("--batch_size") + 1] = "1"
    with pytest.raises(SystemExit):
        main([*tiny, "--epochs", "1", "--output_dir", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert err.count("error: ") == 1 and "raise --batch_size" in err and "Traceback" not in err, err
    assert not (tmp_path / "out").exists()
