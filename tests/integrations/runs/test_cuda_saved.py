"""What a GPU saved loads on the CPU: the runs in ``tests/fixtures/cuda_saved`` were written on an H100 by the GPU
check (bf16 through Accelerate); docs/runs.md promises that GPU-saved models load anywhere."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from cl_plugins.integrations.runs import saved_model
from tests import ROOT
from tests.integrations.runs.test_run_safety import clean_env

SAVED = ROOT / "tests" / "fixtures" / "cuda_saved"


def _graph_cmd(out: Path, epochs: int) -> list[str]:
    args = f"--dataset MUTAG --seeds 0 --epochs {epochs} --batch_size 64 --hidden 8 --eval_folds 3 --no-svm_search"
    return [sys.executable, str(ROOT / "examples" / "graphcl_tu.py"), *args.split(), "--loss", "macl",
            "--log_with", "none", "--no-progress", "--mixed_precision", "bf16", "--output_dir", str(out)]  # fmt: skip


@pytest.mark.slow
def test_a_checkpoint_saved_on_the_gpu_with_pickles_is_refused_in_one_line(data_root, tmp_path):
    """Written through Accelerate's ``save_state``, this checkpoint holds pickles; a resume reads none of them and
    says how to restart (its saved model still evaluates: the tests below). A GPU check saves the new format."""
    run = tmp_path / "run"
    shutil.copytree(SAVED / "graphcl_tu_short", run)
    env = clean_env(CL_PLUGINS_DATA=str(data_root), CL_PLUGINS_CACHE=str(tmp_path / "cache"))
    cmd = [*_graph_cmd(run, 3), "--resume"]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=ROOT, env=env)
    errors = [line for line in res.stderr.splitlines() if line.startswith("error: ")]
    assert res.returncode == 2 and len(errors) == 1 and "Traceback" not in res.stderr, res.stderr[-3000:]
    assert "holds pickles (custom_checkpoint_0.pkl, optimizer.bin, random_states_0.pkl)" in errors[0]
    assert "--overwrite" in errors[0]


def test_saved_models_from_the_gpu_read_onto_the_cpu():
    for folder, trainer in (("graphcl_tu_short/seed_0/model", "graphcl_tu"), ("simcse/best", "simcse"),
                            ("vision/backbone", "vision")):  # fmt: skip
        saved = saved_model.read(SAVED / folder, [trainer], "run model")
        assert saved.weights and all(w.device.type == "cpu" for w in saved.weights.values()), folder
        assert saved.run["mixed_precision"] == "bf16"


def test_the_gpu_saved_graph_encoder_evaluates_on_the_cpu(data_root, capsys):
    from cl_plugins.integrations.hosts.graph.evaluate import main

    main(["tu", "--checkpoint", str(SAVED / "graphcl_tu_short" / "seed_0" / "model"), "--folds", "3"])
    assert 50 < json.loads(capsys.readouterr().out)["accuracy_mean"] <= 100  # two classes


def test_the_gpu_saved_text_encoder_evaluates_and_loads_in_sentence_transformers(data_root, tmp_path, capsys):
    from cl_plugins.integrations.hosts.simcse.evaluate import main

    main(["--model", str(SAVED / "simcse" / "best"), "--tasks", "STSBenchmark", "--cache_dir", str(tmp_path)])
    assert "STS" in capsys.readouterr().out
    st = pytest.importorskip("sentence_transformers")
    emb = st.SentenceTransformer(str(SAVED / "simcse" / "best"), device="cpu").encode(["a man plays a guitar ."])
    assert emb.shape[0] == 1 and bool(torch.isfinite(torch.as_tensor(emb)).all())
