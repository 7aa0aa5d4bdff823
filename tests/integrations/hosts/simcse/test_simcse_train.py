"""SimCSE training on Accelerate: runs for every strategy, resumes bit for bit, keeps the best model."""

from __future__ import annotations

import json
import shutil

import pytest
import torch
from safetensors.torch import load_file

import cl_plugins as clp

pytest.importorskip("transformers")

from cl_plugins.integrations.hosts.simcse.train import build_parser, config_from_args
from cl_plugins.integrations.modalities.text.config import TrainConfig
from cl_plugins.integrations.modalities.text.testing import make_tiny_bert  # noqa: E402
from cl_plugins.integrations.modalities.text.trainer import train  # noqa: E402
from tests import ROOT
from tests.dist_utils import failure_report, torchrun  # noqa: E402

SENTENCES = [
    "the man plays music in the city .",
    "a dog runs fast on the road .",
    "she reads a long book .",
    "the team plays a good game .",
    "a child eats red food .",
    "the old car drives slow .",
    "we watch a new film .",
    "the cat sits in the house .",
    "they swim in the blue river .",
    "he cooks green food for the school .",
    "you ride a white car .",
    "the woman sings a sad song .",
    "a big dog walks with the man .",
    "the small cat looks happy .",
]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("simcse")
    model = make_tiny_bert(root / "bert")
    unsup = root / "train.txt"
    unsup.write_text("\n".join(SENTENCES) + "\n")
    sup = root / "train.csv"
    rows = ["sent0,sent1,hard_neg"] + [f'"{a}","{b}","{c}"' for a, b, c in zip(SENTENCES, SENTENCES[1:], SENTENCES[2:])]
    sup.write_text("\n".join(rows) + "\n")
    return root, model, unsup, sup


def _config(tiny, out, **kw):
    root, model, unsup, _ = tiny
    base = dict(
        model=str(model),
        train_file=str(unsup),
        output_dir=str(out),
        batch_size=4,
        max_seq_length=16,
        learning_rate=1e-3,
        eval_steps=0,
        log_with="none",
        progress=False,
        seed=7,
    )
    base.update(kw)
    return TrainConfig(**base)


#: the arguments a strategy trains with here where its defaults are not SimCSE's (every registered one runs)
SIMCSE_ARGS = {
    "infonce": {"tau": 0.05},
    "macl": {"tau0": 0.05, "alpha": 2.0, "a0": 0.8},
    "dystress": {"tau_min": 0.04, "tau_max": 0.05},
    "amcl": {"heads": 2, "proj_dim": 8, "hidden": 16},
    "cosine_schedule": {"period": 2, "period_unit": "epoch"},  # the loop tells it the epoch's steps
}


@pytest.mark.parametrize("loss", clp.available_losses())
def test_every_strategy_trains(tiny, tmp_path, loss):
    summary = train(_config(tiny, tmp_path, loss=loss, loss_args=SIMCSE_ARGS.get(loss, {}), max_steps=2))
    assert summary["steps"] == 2
    saved = json.loads((tmp_path / "model" / "cl_plugins.json").read_text())
    assert saved["trainer"] == "simcse" and saved["run"]["loss"] == loss


def test_supervised_with_hard_negatives_and_mlm(tiny, tmp_path):
    _, _, _, sup = tiny
    summary = train(
        _config(tiny, tmp_path, train_file=str(sup), max_steps=2, do_mlm=True, hard_negative_weight=0.5, pooler="avg")
    )
    assert summary["steps"] == 2


def test_resume_continues_bit_for_bit(tiny, tmp_path):
    # two epochs (7 batches of 2, accumulated in pairs: 4 steps each, the last one short) with dropout, MLM masking
    # and gradient accumulation in play; the checkpoint at step 3 is in the middle of the first epoch
    kw = dict(
        epochs=2,
        batch_size=2,
        gradient_accumulation_steps=2,
        do_mlm=True,
        save_steps=3,
        keep_checkpoints=0,
        loss="macl",
        loss_args={"tau0": 0.05, "alpha": 2.0, "a0": 0.8},
    )
    straight = train(_config(tiny, tmp_path / "a", **kw))
    # the same run, continued in its own folder from its step-3 checkpoint (its manifest says which run it is)
    (tmp_path / "b" / "checkpoints").mkdir(parents=True)
    shutil.copytree(tmp_path / "a" / "checkpoints" / "step_3", tmp_path / "b" / "checkpoints" / "step_3")
    shutil.copy(tmp_path / "a" / "cl_plugins_run.json", tmp_path / "b")
    resumed = train(_config(tiny, tmp_path / "b", resume=True, **kw))
    assert straight["steps"] == resumed["steps"] == 8
    a = load_file(str(tmp_path / "a" / "model" / "model.safetensors"))
    b = load_file(str(tmp_path / "b" / "model" / "model.safetensors"))
    assert a.keys() == b.keys()
    assert all(torch.equal(a[k], b[k]) for k in a)
    fresh = load_file(str(tiny[1] / "model.safetensors"))
    encoder = {k.removeprefix("bert."): v for k, v in a.items()}  # with MLM the saved folder is the MLM model
    assert any(not torch.equal(encoder[k], fresh[k]) for k in fresh if k in encoder)  # it did train


def test_stsb_dev_selection_keeps_the_best_model(tiny, tmp_path, data_root):
    summary = train(_config(tiny, tmp_path, max_steps=2, eval_steps=1))
    assert (tmp_path / "best" / "model.safetensors").exists()
    assert -100 <= summary["best_stsb_dev"] <= 100
    assert [step for step, _ in summary["dev_curve"]] == [1, 2]
    assert summary["best_stsb_dev"] == max(score for _, score in summary["dev_curve"])


def test_cli_help_explains_every_flag(capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["--help"])
    text = capsys.readouterr().out
    for flag in ("--loss_arg", "--resume", "--eval_steps", "--mixed_precision", "--pooler"):
        assert flag in text
    config = config_from_args(
        build_parser().parse_args(
            ["--model", "m", "--train_file", "f", "--loss", "macl", "--loss_arg", "tau0=0.05", "--no-mlp_only_train"]
        )
    )
    assert config.loss_args == {"tau0": 0.05} and config.mlp_only_train is False


def test_encode_keeps_the_input_order(tiny):
    from transformers import AutoTokenizer

    from cl_plugins.integrations.modalities.text.sentence_encoder import load_encoder

    _, model_dir, _, _ = tiny
    encode = load_encoder(model_dir, "avg")
    sentences = SENTENCES + ["a dog .", "the old man reads a long book in the city ."]
    together = encode(sentences)
    alone = [encode([s])[0] for s in sentences]
    for a, b in zip(together, alone):
        assert abs(a - b).max() < 1e-5
    assert AutoTokenizer.from_pretrained(str(model_dir)) is not None


@pytest.mark.distributed
@pytest.mark.parametrize("loss", ["macl", "learnable"])
def test_two_processes_give_the_global_batch_gradient(tmp_path, loss):
    """2 CPU processes under our Accelerate setup (local batch 2): after DDP's averaging, rank 0 holds the
    gradient that 1 process computes on the global batch of 4 (float64, dropout off)."""
    import subprocess
    import sys

    model = make_tiny_bert(tmp_path / "bert", dropout=0.0)
    script = ROOT / "tests" / "integrations" / "simcse_grad_step.py"
    root = ROOT
    two, one = tmp_path / "two.pt", tmp_path / "one.pt"
    proc = subprocess.run(
        [
            *torchrun(2),
            str(script),
            str(model),
            str(two),
            loss,
        ],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, failure_report(proc)
    proc = subprocess.run(
        [sys.executable, str(script), str(model), str(one), loss], cwd=root, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, failure_report(proc)
    g2, g1 = torch.load(two), torch.load(one)
    assert g1.keys() == g2.keys() and len(g1) > 10
    for k in g1:
        torch.testing.assert_close(g2[k], g1[k], rtol=1e-7, atol=1e-10, msg=lambda m, k=k: f"{k}: {m}")


def test_training_files_read_through_datasets_hold_what_python_reads(tmp_path):
    """``load_rows`` against Python's own readers: stripped non-empty lines; CSV cells as text (empty, numbers)."""
    import csv

    from cl_plugins.integrations.modalities.text.data import load_rows

    text = tmp_path / "train.txt"
    text.write_text("  first sentence \n\n\tsecond\r\nthird\rfourth\n   \nlast", encoding="utf-8")
    with open(text, encoding="utf-8") as f:
        expected = [line.strip() for line in f if line.strip()]
    assert [r[0] for r in load_rows(text)["texts"]] == expected == ["first sentence", "second", "third", "fourth",
                                                                     "last"]  # fmt: skip
    assert [r[0] for r in load_rows(text, 2)["texts"]] == expected[:2]
    table = tmp_path / "nli.csv"
    table.write_text('sent0,extra,sent1,hard_neg\n"a, b",x,007,NA\n,y,"two\nlines",\n', encoding="utf-8")
    with open(table, encoding="utf-8", newline="") as f:
        reference = [[row[c] for c in ("sent0", "sent1", "hard_neg")] for row in csv.DictReader(f)]
    assert load_rows(table)["texts"] == reference == [["a, b", "007", "NA"], ["", "two\nlines", ""]]
    (tmp_path / "bad.csv").write_text("premise,hypothesis\na,b\n", encoding="utf-8")
    with pytest.raises(ValueError, match="must have columns sent0, sent1"):
        load_rows(tmp_path / "bad.csv")
    (tmp_path / "empty.txt").write_text("\n \n", encoding="utf-8")
    with pytest.raises(ValueError, match="holds no sentences"):
        load_rows(tmp_path / "empty.txt")


def test_a_batch_of_one_is_refused_before_the_run_claims_its_folder(tiny, tmp_path):
    """One sentence per batch gives its anchor no negative: every loss would be 0 and the untrained model's score
    reported; the probe on the first batch refuses it before anything is written."""
    with pytest.raises(ValueError, match="the first batch gives no anchor a negative .*raise --batch_size"):
        train(_config(tiny, tmp_path / "one", batch_size=1, max_steps=2))
    assert not (tmp_path / "one").exists()
