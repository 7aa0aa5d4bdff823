"""MABEL: the objective against its formula, the cl_forward patch against MABEL's, training end to end."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

from cl_plugins.integrations.hosts.mabel.data import augment_pairs, read_items, sick_items
from cl_plugins.integrations.hosts.mabel.model import MabelModel, alignment_loss
from cl_plugins.integrations.modalities.text.testing import make_tiny_bert
from tests import ROOT
from tests.dist_utils import failure_report, torchrun  # noqa: E402

TABLE = {"he": "she", "she": "he", "man": "woman", "woman": "man", "his": "her", "her": "his"}


@pytest.fixture(scope="module")
def tiny_mlm(tmp_path_factory):
    return make_tiny_bert(tmp_path_factory.mktemp("mabel") / "mlm", dropout=0.0, mlm=True)


def batch_for(tokenizer, items, length=12):
    flat = [s for item in items for s in item]
    enc = tokenizer(flat, padding="max_length", max_length=length, truncation=True, return_tensors="pt")
    return {k: v.view(len(items), 4, -1) for k, v in enc.items() if k != "token_type_ids"}


ITEMS = [("the man plays .", "a man plays", "the woman plays .", "a woman plays"),
         ("he reads a book", "he reads", "she reads a book", "she reads"),
         ("his dog runs", "the dog runs", "her dog runs", "the dog runs")]  # fmt: skip


def reference_loss(z: torch.Tensor, tau: float, align_weight: float) -> torch.Tensor:
    """MABEL's cl_loss + align_temp * a1_loss, written from the paper's formulas in float64."""
    o0, o1, a0, a1 = z.double().unbind(1)
    z0, z1 = torch.cat([o0, a0]), torch.cat([o1, a1])
    cos = F.cosine_similarity(z0[:, None], z1[None], dim=-1) / tau
    c = F.cross_entropy(cos, torch.arange(len(z0)))
    s_o = F.cosine_similarity(o0[:, None], o1[None], dim=-1) / tau
    s_a = F.cosine_similarity(a0[:, None], a1[None], dim=-1) / tau
    return c + align_weight * ((s_o - s_a) ** 2).sum(1).mean()


def test_objective_matches_mabel_formula(tiny_mlm):
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    import cl_plugins as clp

    tok = AutoTokenizer.from_pretrained(tiny_mlm)
    model = MabelModel(AutoModelForMaskedLM.from_pretrained(tiny_mlm), clp.build_loss("infonce", tau=0.05,
                       layout="cross_view"), align_weight=0.05, align_temp=0.05, do_mlm=True).double()  # fmt: skip
    model.eval()
    batch = batch_for(tok, ITEMS)
    loss = model(**batch)
    flat = {k: v.view(-1, v.shape[-1]) for k, v in batch.items()}
    z = model.embed(**flat).view(3, 4, -1)
    torch.testing.assert_close(loss, reference_loss(z, 0.05, 0.05), rtol=1e-9, atol=1e-9)
    assert set(model.last_terms) == {"contrastive", "align"} and model.head == "mabel"
    with pytest.raises(ValueError, match="4, length"):
        model(input_ids=batch["input_ids"][:, :2], attention_mask=batch["attention_mask"][:, :2])


def test_alignment_keeps_its_own_temperature():
    torch.manual_seed(0)
    z = [torch.randn(5, 8, dtype=torch.float64) for _ in range(4)]
    a = alignment_loss(*z, temperature=0.05)
    b = alignment_loss(*z, temperature=0.1)
    torch.testing.assert_close(a, 4 * b)  # (1/τ)² scaling: the term is τ-dependent, so it gets a fixed τ


def test_items_from_files(tmp_path, data_root):
    pairs = tmp_path / "pairs.csv"
    pairs.write_text("sent0,sent1\nThe man plays.,A man plays\nThe dog runs.,A dog runs\n")
    assert read_items(pairs, TABLE) == [("The man plays.", "A man plays", "The woman plays.", "A woman plays")]
    mabel = tmp_path / "entailment_data.csv"
    mabel.write_text("orig_sent0,orig_sent1,aug_sent0,aug_sent1\na,b,c,d\n")
    assert read_items(mabel, TABLE) == [("a", "b", "c", "d")]
    (tmp_path / "bad.csv").write_text("x,y\n1,2\n")
    with pytest.raises(ValueError, match="sent0"):
        read_items(tmp_path / "bad.csv", TABLE)
    assert augment_pairs([("It runs.", "It moves.")], TABLE) == []
    from cl_plugins.integrations.hosts.mabel.counterfactual import load_word_pairs, swap_table

    sick = sick_items(swap_table(load_word_pairs()))
    assert 300 < len(sick) < 1299 and all(item[:2] != item[2:] for item in sick)


def test_train_end_to_end_with_bias_eval(tiny_mlm, tmp_path, data_root):
    from cl_plugins.integrations.hosts.mabel.train import main

    pairs = tmp_path / "pairs.csv"
    pairs.write_text("sent0,sent1\n" + "\n".join(f"{a},{b}" for a, b, _, _ in ITEMS * 4) + "\n")
    summary = main(["--model", str(tiny_mlm), "--train_file", str(pairs), "--batch_size", "4", "--max_steps", "3",
                    "--eval_steps", "0", "--log_with", "none", "--no-progress", "--loss", "macl",
                    "--output_dir", str(tmp_path / "out"), "--bias_eval_limit", "6",
                    "--seat_samples", "200"])  # fmt: skip
    assert summary["steps"] == 3 and summary["train_items"] == 12
    row = summary["bias"]["summary"]
    assert 0 <= row["stereoset_all_ss"] <= 100 and 0 <= row["crows"] <= 100 and row["seat_mean_abs_d"] >= 0
    saved = json.loads((tmp_path / "out" / "model" / "cl_plugins.json").read_text())
    assert saved["trainer"] == "mabel" and saved["model"]["head"] == "mabel"
    assert (tmp_path / "out" / "results.json").exists()


def test_entry_point_help_and_two_processes(tiny_mlm, tmp_path, data_root):
    script = str(ROOT / "examples" / "mabel_debias.py")
    out = subprocess.run([sys.executable, script, "--help"], capture_output=True, text=True)
    assert out.returncode == 0 and "--paper" in out.stdout and "--align_temp" in out.stdout
    pairs = tmp_path / "pairs.csv"
    pairs.write_text("sent0,sent1\n" + "\n".join(f"{a},{b}" for a, b, _, _ in ITEMS * 4) + "\n")
    cmd = [*torchrun(2), script, "--model", str(tiny_mlm),
           "--train_file", str(pairs), "--batch_size", "2", "--max_steps", "2", "--eval_steps", "0",
           "--log_with", "none", "--no-progress", "--no-bias_eval", "--output_dir", str(tmp_path / "ddp")]  # fmt: skip
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert res.returncode == 0, failure_report(res)
    assert (tmp_path / "ddp" / "model" / "config.json").exists()


def test_snli_triples_are_readable_for_smoke_runs(data_root):
    from cl_plugins.integrations.hosts.mabel.counterfactual import load_word_pairs, swap_table

    items = read_items(data_root / "sentence" / "simcse" / "snli_devtest_triples_for_simcse.csv",
                       swap_table(load_word_pairs()))  # fmt: skip
    assert len(items) > 1000 and all(len(i) == 4 for i in items)


def test_mlm_head_fit_leaves_the_encoder(tmp_path):
    from transformers import AutoModel, AutoModelForMaskedLM

    from cl_plugins.integrations.hosts.mabel.mlm_head import fit_mlm_head

    enc_dir = make_tiny_bert(tmp_path / "enc", dropout=0.0)
    texts = [f"the {a} {v} the {b} ." for a in ("man", "woman", "dog", "cat") for v in ("plays", "runs", "eats")
             for b in ("car", "city", "book")]  # fmt: skip
    stats = fit_mlm_head(enc_dir, texts, tmp_path / "mlm", epochs=30, batch_size=16, lr=1e-2, held_out=8,
                         progress=False)  # fmt: skip
    assert stats["masked_train_tokens"] > 0 and 0 <= stats["masked_accuracy_before"] <= 1
    assert stats["masked_accuracy_after"] >= stats["masked_accuracy_before"]
    fitted = AutoModelForMaskedLM.from_pretrained(tmp_path / "mlm")
    original = AutoModel.from_pretrained(enc_dir)
    for name, value in original.state_dict().items():
        if not name.startswith("pooler"):
            torch.testing.assert_close(fitted.bert.state_dict()[name], value)  # the encoder is frozen
    with pytest.raises(ValueError, match="held_out"):
        fit_mlm_head(enc_dir, texts[:4], tmp_path / "x", held_out=8)
