"""The SentEval-protocol harness: readers on the real data, known answers, sensible accuracies."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from cl_plugins.integrations.evaluation.senteval import engine, readers
from cl_plugins.integrations.evaluation.senteval.classifier import ProbeConfig, inner_kfold
from cl_plugins.integrations.evaluation.senteval.sts import spearman


def bow_encoder(dim: int = 2048):
    """Hashed bag-of-words counts: a deterministic encoder with no parameters."""

    def encode(sentences):
        out = np.zeros((len(sentences), dim), dtype=np.float32)
        for i, s in enumerate(sentences):
            for w in s.lower().split():
                out[i, int(hashlib.md5(w.encode()).hexdigest(), 16) % dim] += 1.0
            out[i, dim - 1] += 1.0  # empty sentences still have a direction
        return out

    return encode


def ranks(x):
    """Average ranks (ties share the mean rank), written out by hand."""
    x = np.asarray(x, dtype=float)
    order = np.argsort(x, kind="mergesort")
    r = np.empty(len(x))
    i = 0
    while i < len(x):
        j = i
        while j + 1 < len(x) and x[order[j + 1]] == x[order[i]]:
            j += 1
        r[order[i : j + 1]] = (i + j) / 2 + 1
        i = j + 1
    return r


def spearman_by_hand(x, y):
    rx, ry = ranks(x), ranks(y)
    rx, ry = rx - rx.mean(), ry - ry.mean()
    return 100 * float((rx * ry).sum() / np.sqrt((rx**2).sum() * (ry**2).sum()))


def test_spearman_known_answers():
    assert spearman([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(80.0)  # 1 - 6*2/(4*15)
    assert spearman([1, 2, 3], [3, 2, 1]) == pytest.approx(-100.0)
    assert spearman([1, 1, 2, 3], [1, 2, 3, 4]) == pytest.approx(spearman_by_hand([1, 1, 2, 3], [1, 2, 3, 4]))


def test_readers_match_the_manifest_counts(data_root):
    sizes = {y: sum(len(p.scores) for p in readers.read_sts_year(y).values()) for y in readers.STS_SUBSETS}
    assert sizes == {"STS12": 3108, "STS13": 1500, "STS14": 3750, "STS15": 3000, "STS16": 1186}
    assert [len(readers.read_stsb(s).scores) for s in ("train", "dev", "test")] == [5749, 1500, 1379]
    assert [len(readers.read_sick(s).scores) for s in ("train", "dev", "test")] == [4500, 500, 4927]
    assert {t: len(readers.read_binary(t)[0]) for t in ("MR", "CR", "SUBJ", "MPQA")} == {
        "MR": 10662,
        "CR": 3775,
        "SUBJ": 10000,
        "MPQA": 10606,
    }
    assert {k: len(v[0]) for k, v in readers.read_sst2().items()} == {"train": 67349, "dev": 872, "test": 1821}
    assert {k: len(v[0]) for k, v in readers.read_trec().items()} == {"train": 5452, "test": 500}
    assert {k: len(v[2]) for k, v in readers.read_mrpc().items()} == {"train": 4076, "test": 1725}


def projected_encoder(dim: int = 64):
    """Bag-of-words through a fixed Gaussian projection: dense vectors, so distinct pairs do not tie
    (with exact ties, the last-ulp differences of two cosine formulas would reorder ranks)."""
    bow = bow_encoder()
    proj = np.random.RandomState(0).randn(2048, dim)
    return lambda sentences: bow(sentences).astype(np.float64) @ proj


def test_sts_all_setting_reproduces_an_independent_computation(data_root):
    enc = projected_encoder()
    res = engine.evaluate(enc, "STS12", progress=False)["STS12"]
    sys_all, gold_all, per, sizes = [], [], [], []
    for pairs in readers.read_sts_year("STS12").values():
        u, v = enc(pairs.a).astype(np.float64), enc(pairs.b).astype(np.float64)
        cos = np.round((u * v).sum(1) / np.linalg.norm(u, axis=1) / np.linalg.norm(v, axis=1), 10)
        sys_all += cos.tolist()
        gold_all += pairs.scores
        per.append(spearman_by_hand(cos, pairs.scores))
        sizes.append(len(pairs.scores))
    assert res["all"] == pytest.approx(spearman_by_hand(sys_all, gold_all), abs=1e-9)
    assert res["mean"] == pytest.approx(np.mean(per), abs=1e-9)
    assert res["wmean"] == pytest.approx(np.average(per, weights=sizes), abs=1e-9)
    assert 10 < res["all"] < 70  # bag-of-words: above chance, well below a trained encoder


def test_relatedness_tasks(data_root):
    res = engine.evaluate(bow_encoder(), "STSBenchmark,SICKRelatedness", progress=False)
    for task in ("STSBenchmark", "SICKRelatedness"):
        assert 20 < res[task]["test"] < 80 and 20 < res[task]["dev"] < 80
        assert res[task]["n_test"] in (1379, 4927)


@pytest.mark.parametrize(
    "task,floor", [("SUBJ", 80), ("MR", 60), ("CR", 62), ("MPQA", 65), ("TREC", 55), ("SST2", 60), ("MRPC", 60)]
)
def test_bag_of_words_transfer_accuracy_is_sensible(data_root, task, floor):
    res = engine.evaluate(bow_encoder(1024), task, mode="fasttest", transfer_limit=1200, progress=False)[task]
    assert floor < res["acc"] <= 100 and floor - 10 < res["devacc"] <= 100
    assert res["subsampled"] == 1200


def test_probe_separates_separable_data():
    rng = np.random.RandomState(0)
    x = rng.randn(200, 5).astype(np.float32)
    y = (x[:, 0] > 0).astype(int)
    x[:, 0] += np.where(y == 1, 2.0, -2.0)
    res = inner_kfold(x, y, 2, ProbeConfig.for_mode("fasttest"))
    assert res["acc"] >= 97 and res["devacc"] >= 97


def test_task_names():
    assert engine.expand_tasks("sts") == engine.STS_TASKS
    assert engine.expand_tasks("sts,MR")[-1] == "MR"
    with pytest.raises(ValueError, match="unknown task 'MRR'"):
        engine.expand_tasks("MRR")
    with pytest.raises(ValueError, match="mode must be"):
        ProbeConfig.for_mode("quick")


@pytest.mark.parametrize("mode", ["test", "fasttest"])
def test_probes_trained_together_equal_separate_runs(mode):
    from cl_plugins.integrations.evaluation.senteval.classifier import fit_predict

    rng = np.random.RandomState(1)
    x = rng.randn(300, 8).astype(np.float32)
    y = (x[:, :2].sum(1) + 0.5 * rng.randn(300) > 0).astype(int)
    cfg = ProbeConfig.for_mode(mode)
    regs = [1e-5, 1e-2]
    accs, preds = fit_predict(x[:200], y[:200], x[200:250], y[200:250], [x[250:]], regs, 2, cfg)
    for r, reg in enumerate(regs):
        acc, pred = fit_predict(x[:200], y[:200], x[200:250], y[200:250], [x[250:]], [reg], 2, cfg)
        assert acc[0] == pytest.approx(accs[r])
        assert (pred[0][0] == preds[r][0]).all()
