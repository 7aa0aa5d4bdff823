"""DCRec's protocols, evaluation harness and entry points on a synthetic split and a slice of MovieLens-100K."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from cl_plugins.integrations.hosts.dcrec.configs import preset_for
from cl_plugins.integrations.hosts.dcrec.evaluate import evaluate, history_mask
from cl_plugins.integrations.hosts.dcrec.graphs import transition_graph
from cl_plugins.integrations.hosts.dcrec.splits import UserSequences, build_splits
from cl_plugins.integrations.hosts.dcrec.train import BestEpoch, DCRecConfig, main
from cl_plugins.integrations.runs import saved_model
from tests import ROOT
from tests.dist_utils import failure_report, torchrun  # noqa: E402


def test_protocols_rows_and_graph_sequences():
    data = UserSequences(["a", "b"], [[1, 2, 3, 4], [5, 6, 7]], num_items=8)
    val = build_splits(data, selection="validation", max_length=2, k=1)
    # training sequences [1, 2] and [5]: one row, 1 -> 2; validation x[:-2] -> x[-2]; test x[:-1] -> x[-1]
    assert val.train.item_seq.tolist() == [[1, 0]] and val.train.target.tolist() == [2]
    assert val.valid.item_seq.tolist() == [[1, 2], [5, 0]] and val.valid.target.tolist() == [3, 6]
    assert val.test.item_seq.tolist() == [[2, 3], [5, 6]] and val.test.target.tolist() == [4, 7]  # last 2 kept
    assert val.test.seq_len.tolist() == [2, 2] and val.label == "validation-selected"
    assert val.popularity.tolist() == [0, 1, 1, 0, 0, 1, 0, 0]  # training interactions only
    # training graphs from each user's last training history ([1] and [] here): no transitions, only the diagonal
    assert val.train_graphs.transition.num_edges == 8
    expected, _ = transition_graph([[2, 3], [5, 6]], 8)  # the test histories, truncated like the rows
    assert torch.equal(val.test_graphs.transition.keys(), expected.keys())
    test_sel = build_splits(data, selection="test", max_length=3, k=1)
    assert test_sel.train.target.tolist() == [2, 3, 6] and test_sel.valid is test_sel.test
    assert test_sel.label == "test-selected"
    with pytest.raises(ValueError, match="fewer than 3 items"):
        build_splits(UserSequences(["a"], [[1, 2]], 3))
    with pytest.raises(ValueError, match="selection"):
        build_splits(data, selection="best")


class RiggedModel(torch.nn.Module):
    """Scores item i as table[row, i]: known ranks for the harness."""

    def __init__(self, table: torch.Tensor) -> None:
        super().__init__()
        self.table, self.num_items = table, table.shape[1]

    def set_eval_graphs(self, graphs):
        self.graphs = graphs

    def graph_tables(self):
        return None, None

    def represent(self, item_seq, seq_len, tables):
        return self.table[item_seq[:, 0]]  # row id stored as the first history item

    def score_all(self, rep):
        return rep

    def score_candidates(self, rep, candidates):
        return rep.gather(1, candidates)


def test_evaluate_full_and_sampled_with_known_ranks():
    from cl_plugins.integrations.hosts.dcrec.splits import Rows

    num_items = 120
    table = torch.zeros(num_items, num_items)
    scores = torch.linspace(1.0, 0.0, num_items)
    table[1] = scores  # row with first item 1: item 1 best, 2 second, ...
    table[2] = scores
    rows = Rows(
        item_seq=torch.tensor([[1, 0], [2, 5]]),
        seq_len=torch.tensor([1, 2]),
        target=torch.tensor([3, 1]),
        user=torch.tensor([0, 1]),
    )
    popularity = torch.ones(num_items, dtype=torch.long)
    out = evaluate(RiggedModel(table), rows, None, popularity, batch_size=1)
    # row 0: target 3 behind items 1, 2 -> position 2 (padding 0 is never a candidate)
    # row 1: target 1 is the best item -> position 0
    assert out["full"]["hr@1"] == pytest.approx(0.5) and out["full"]["hr@5"] == pytest.approx(1.0)
    assert out["full"]["ndcg@5"] == pytest.approx((1 / 2 + 1.0) / 2)
    hist = evaluate(RiggedModel(table), rows, None, popularity, exclude_history=True, protocols=("full",))
    assert hist["full"]["ndcg@5"] == pytest.approx((1 / math.log2(3) + 1.0) / 2)  # row 0 no longer behind item 1
    # pop100: item 2 is (almost surely) drawn for row 0, item 1 never (row 0's history) -> position 1
    popularity[2] = 10**9
    pop = evaluate(RiggedModel(table), rows, None, popularity, protocols=("pop",))["pop100"]
    assert pop["hr@1"] == pytest.approx(0.5) and pop["ndcg@10"] == pytest.approx((1 / math.log2(3) + 1.0) / 2)
    mask = history_mask(torch.tensor([[1, 4, 0]]), 6)
    assert mask.tolist() == [[False, True, False, False, True, False]]
    with pytest.raises(ValueError, match="protocols"):
        evaluate(RiggedModel(table), rows, None, popularity, protocols=("pop200",))


def write_split(root: Path, users: int = 24, items: int = 30, seed: int = 0) -> None:
    gen = torch.Generator().manual_seed(seed)
    folder = root / "recsys" / "dcrec" / "dataset" / "toy"
    folder.mkdir(parents=True)
    header = "session_id:token\titem_id_list:token_seq\titem_id:token\n"
    train, test = [header], [header]
    for u in range(users):
        n = int(torch.randint(4, 9, (1,), generator=gen))
        start = int(torch.randint(0, items, (1,), generator=gen))
        seq = [str(100 + (start + 2 * i) % items) for i in range(n)]  # a learnable stride pattern
        train.append(f"{u}\t{' '.join(seq[:-2])}\t{seq[-2]}\n")
        test.append(f"{u}\t{' '.join(seq[:-1])}\t{seq[-1]}\n")
    (folder / "toy.train.inter").write_text("".join(train))
    (folder / "toy.test.inter").write_text("".join(test))


TINY = ["--dataset", "toy", "--negatives", "10", "--select_metric", "pop10/hr@1", "--hidden_size", "16",
        "--inner_size", "32", "--batch_size", "16", "--log_with", "none", "--no-progress",
        "--max_length", "6"]  # fmt: skip


@pytest.fixture
def toy_root(tmp_path, monkeypatch):
    write_split(tmp_path / "data")
    monkeypatch.setenv("CL_PLUGINS_DATA", str(tmp_path / "data"))
    monkeypatch.setenv("CL_PLUGINS_CACHE", str(tmp_path / "cache"))
    return tmp_path


def test_train_resume_and_evaluate_cli(toy_root):
    out = toy_root / "runs"
    full = main([*TINY, "--epochs", "3", "--loss", "macl", "--output_dir", str(out / "full")])
    run = full["runs"][0]
    assert full["selection"] == run["selection"] == "validation-selected"
    assert len(run["history"]) == 3 and 1 <= run["best_epoch"] <= 3
    assert set(run["test"]) == {"full", "pop10"} and 0 <= run["test"]["full"]["hr@10"] <= 1
    assert run["valid"]["pop10"]["hr@1"] == max(h["pop10/hr@1"] for h in run["history"])  # the selected epoch
    saved = json.loads((out / "full" / "seed_2020" / "results.json").read_text())
    assert saved["selection"] == "validation-selected"
    # split run: 2 epochs, then resume to 3 -> bit-identical weights and the same selection
    main([*TINY, "--epochs", "2", "--loss", "macl", "--output_dir", str(out / "split")])
    main([*TINY, "--epochs", "3", "--loss", "macl", "--output_dir", str(out / "split"), "--resume"])
    a = saved_model.read(out / "full" / "seed_2020" / "model", ["dcrec"], "run").weights
    b = saved_model.read(out / "split" / "seed_2020" / "model", ["dcrec"], "run").weights
    assert all(torch.equal(a[k], b[k]) for k in a)
    from cl_plugins.integrations.hosts.dcrec.evaluate import main as evaluate_main

    again = evaluate_main([str(out / "full" / "seed_2020"), "--split", "test", "--seed", "2020"])
    assert all(again["test"][p] == pytest.approx(run["test"][p]) for p in run["test"])


def test_test_selected_mode_is_labelled_and_early_stopping(toy_root):
    out = toy_root / "runs"
    summary = main([*TINY, "--epochs", "6", "--selection", "test", "--patience", "1", "--lr", "0",
                    "--output_dir", str(out)])  # fmt: skip
    run = summary["runs"][0]
    assert summary["selection"] == run["selection"] == "test-selected"
    assert len(run["history"]) == 2  # lr 0: no improvement after epoch 1, patience 1 stops at epoch 2
    assert all(run["test"][p] == pytest.approx(run["valid"][p]) for p in run["test"])  # selection rows = test rows
    best = BestEpoch(2)
    assert best.update(1, 0.3, {"w": torch.zeros(1)}, {}) and not best.update(2, 0.3, {}, {}) and not best.stop()
    assert not best.update(3, 0.2, {}, {}) and best.stop() and best.epoch == 1


def test_config_presets_and_errors():
    assert DCRecConfig(dataset="beauty").resolved().batch_size == 2048
    ml = DCRecConfig(dataset="ml-100k").resolved()
    assert ml.cl_temp == pytest.approx(0.8) and ml.weight_mean == pytest.approx(0.4)  # run_DCRec's ml-20m values
    assert DCRecConfig(dataset="beauty", cl_temp=0.5).resolved().cl_temp == 0.5
    assert preset_for("unknown")["cl_weight"] == pytest.approx(1e-4)
    with pytest.raises(ValueError, match="select_metric"):
        DCRecConfig(select_metric="hr@1").resolved()
    with pytest.raises(ValueError, match="selection"):
        DCRecConfig(selection="train").resolved()


def test_movielens_slice(data_root, tmp_path, monkeypatch):
    monkeypatch.setenv("CL_PLUGINS_CACHE", str(tmp_path / "cache"))
    summary = main(["--dataset", "ml-100k", "--epochs", "1", "--max_train_rows", "256", "--max_eval_rows", "64",
                    "--batch_size", "128", "--loss", "temperature_free", "--log_with", "none", "--no-progress",
                    "--output_dir", str(tmp_path / "out")])  # fmt: skip
    run = summary["runs"][0]
    assert run["train_rows"] == 256 and 0 <= run["test"]["pop100"]["hr@10"] <= 1


def test_entry_point_help_and_two_processes(toy_root):
    script = str(ROOT / "examples" / "dcrec_rec.py")
    out = subprocess.run([sys.executable, script, "--help"], capture_output=True, text=True)
    assert out.returncode == 0 and "--selection" in out.stdout and "--loss" in out.stdout
    cmd = [*torchrun(2), script, *TINY]
    cmd += ["--epochs", "1", "--output_dir", str(toy_root / "ddp")]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert res.returncode == 0, failure_report(res)
    saved = json.loads((toy_root / "ddp" / "results.json").read_text())
    assert saved["selection"] == "validation-selected" and "pop10" in saved["test"]


def test_the_split_cache_follows_its_source_files(toy_root):
    from cl_plugins.integrations.hosts.dcrec.train import DCRecConfig, prepare_splits

    config = DCRecConfig(dataset="toy").resolved()
    first = prepare_splits(config)
    test_file = toy_root / "data" / "recsys" / "dcrec" / "dataset" / "toy" / "toy.test.inter"
    lines = test_file.read_text().splitlines()
    user, history, target = lines[1].split("\t")
    lines[1] = "\t".join([user, history, "101" if target != "101" else "102"])  # a corrected target
    test_file.write_text("\n".join(lines) + "\n")
    second = prepare_splits(config)
    assert len(list((toy_root / "cache" / "dcrec").glob("toy_*.pt"))) == 2  # rebuilt, not the stale cache
    assert not torch.equal(first.test.target, second.test.target)


def test_step_cost_benchmark_times_every_claims_strategy_in_turns(toy_root, capsys):
    from benchmarks import dcrec_step_cost

    out = toy_root / "cost.json"
    dcrec_step_cost.main(["--dataset", "toy", "--steps", "2", "--rounds", "2", "--json", str(out)])
    saved = json.loads(out.read_text())
    strategies = [s for s, _ in dcrec_step_cost.CLAIMS_SETTINGS]
    assert list(saved["seconds"]) == strategies and all(len(v) == 2 and min(v) > 0 for v in saved["seconds"].values())
    assert saved["summary"]["infonce"]["ratio"] == 1.0 and "| macl |" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        dcrec_step_cost.parse_args(["--steps", "0"])
