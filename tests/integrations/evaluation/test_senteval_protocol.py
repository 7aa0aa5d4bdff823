"""Our transfer probes against SentEval's protocol, re-implemented here from SentEval's code as it runs today
(``tools/classifier.py``, ``tools/validation.py``, the tasks' ``run``): one ``nn.Linear`` per L2 value with
``nn.CrossEntropyLoss()`` (its ``size_average = False`` is set after construction and ignored: the mean), the
optimizer's ``weight_decay`` as L2, ``np.random.seed`` / ``torch.manual_seed`` per classifier, a 5 % holdout
from ``np.random.permutation``, early stopping after ``tenacity`` non-improvements. Fed the same embeddings,
both give the same accuracies and the same predictions on 2,000 probe points near the decision boundary."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from sklearn.model_selection import StratifiedKFold

from cl_plugins.integrations.evaluation.senteval.classifier import (
    REGS,
    ProbeConfig,
    Problem,
    fit_predict,
    fit_problems,
    inner_kfold,
    kfold_then_test,
    split,
)
from cl_plugins.integrations.evaluation.senteval.embedding_cache import encode_in_batches
from cl_plugins.integrations.evaluation.senteval.transfer import senteval_order


class SentEvalProbe:
    """SentEval's ``MLP`` with ``nhid = 0``, written out."""

    def __init__(self, dim: int, n_classes: int, reg: float, cfg: ProbeConfig) -> None:
        np.random.seed(1111)
        torch.manual_seed(1111)
        self.cfg = cfg
        self.model = torch.nn.Sequential(torch.nn.Linear(dim, n_classes))
        self.loss_fn = torch.nn.CrossEntropyLoss()
        self.loss_fn.size_average = False  # what SentEval does; PyTorch ignores it
        if cfg.optim == "adam":
            self.optimizer = torch.optim.Adam(self.model.parameters())
        else:
            self.optimizer = torch.optim.RMSprop(self.model.parameters())
        self.optimizer.param_groups[0]["weight_decay"] = reg

    def fit(self, x, y, validation_data=None, validation_split=None) -> float:  # type: ignore[no-untyped-def]
        if validation_data is None:
            permutation = np.random.permutation(len(x))
            cut = int(validation_split * len(x))
            x, y, vx, vy = x[permutation[cut:]], y[permutation[cut:]], x[permutation[:cut]], y[permutation[:cut]]
        else:
            vx, vy = validation_data
        x, y = torch.from_numpy(x).float(), torch.from_numpy(y).long()
        epoch, best, strikes, stop, best_model = 0, -1.0, 0, False, None
        while not stop and epoch <= self.cfg.max_epoch:
            for _ in range(self.cfg.epoch_size):
                permutation = np.random.permutation(len(x))
                for i in range(0, len(x), self.cfg.batch_size):
                    idx = torch.from_numpy(permutation[i : i + self.cfg.batch_size]).long()
                    loss = self.loss_fn(self.model(x[idx]), y[idx])
                    self.optimizer.zero_grad()
                    loss.backward()
                    self.optimizer.step()
            epoch += self.cfg.epoch_size
            accuracy = self.score(vx, vy)
            if accuracy > best:
                best, best_model = accuracy, copy.deepcopy(self.model)
            else:
                if strikes >= self.cfg.tenacity:
                    stop = True
                strikes += 1
        self.model = best_model
        return best

    def predict(self, x):  # type: ignore[no-untyped-def]
        with torch.no_grad():
            return self.model(torch.from_numpy(x).float()).argmax(1).numpy()

    def score(self, x, y) -> float:  # type: ignore[no-untyped-def]
        return float((self.predict(x) == y).mean())


def reference_kfold(x, y, xte, yte, n_classes, cfg):  # type: ignore[no-untyped-def]
    """SentEval's ``KFoldClassifier`` (TREC, MRPC)."""
    skf = StratifiedKFold(n_splits=cfg.kfold, shuffle=True, random_state=1111)
    scores = []
    for reg in REGS:
        fold_scores = []
        for tr, te in skf.split(x, y):
            clf = SentEvalProbe(x.shape[1], n_classes, reg, cfg)
            clf.fit(x[tr], y[tr], validation_data=(x[te], y[te]))
            fold_scores.append(clf.score(x[te], y[te]))
        scores.append(round(100 * np.mean(fold_scores), 2))
    clf = SentEvalProbe(x.shape[1], n_classes, REGS[int(np.argmax(scores))], cfg)
    clf.fit(x, y, validation_split=0.05)
    return {"devacc": float(np.max(scores)), "acc": round(100 * clf.score(xte, yte), 2)}, clf


def reference_inner_kfold(x, y, n_classes, cfg):  # type: ignore[no-untyped-def]
    """SentEval's ``InnerKFoldClassifier`` (MR, CR, SUBJ, MPQA)."""
    outer = StratifiedKFold(n_splits=cfg.kfold, shuffle=True, random_state=1111)
    inner = StratifiedKFold(n_splits=cfg.kfold, shuffle=True, random_state=1111)
    dev, test = [], []
    for tr, te in outer.split(x, y):
        scores = []
        for reg in REGS:
            fold_scores = []
            for itr, ite in inner.split(x[tr], y[tr]):
                clf = SentEvalProbe(x.shape[1], n_classes, reg, cfg)
                clf.fit(x[tr][itr], y[tr][itr], validation_data=(x[tr][ite], y[tr][ite]))
                fold_scores.append(clf.score(x[tr][ite], y[tr][ite]))
            scores.append(round(100 * np.mean(fold_scores), 2))
        dev.append(np.max(scores))
        clf = SentEvalProbe(x.shape[1], n_classes, REGS[int(np.argmax(scores))], cfg)
        clf.fit(x[tr], y[tr], validation_split=0.05)
        test.append(round(100 * clf.score(x[te], y[te]), 2))
    return {"devacc": round(float(np.mean(dev)), 2), "acc": round(float(np.mean(test)), 2)}


def reference_split(x, y, xv, yv, xte, yte, n_classes, cfg):  # type: ignore[no-untyped-def]
    """SentEval's ``SplitClassifier`` (SST)."""
    scores = []
    for reg in REGS:
        clf = SentEvalProbe(x.shape[1], n_classes, reg, cfg)
        clf.fit(x, y, validation_data=(xv, yv))
        scores.append(round(100 * clf.score(xv, yv), 2))
    clf = SentEvalProbe(x.shape[1], n_classes, REGS[int(np.argmax(scores))], cfg)
    clf.fit(x, y, validation_data=(xv, yv))
    return {"devacc": float(np.max(scores)), "acc": round(100 * clf.score(xte, yte), 2)}


def _data(n: int, n_classes: int, seed: int, dim: int = 6) -> tuple[np.ndarray, np.ndarray]:
    """Overlapping classes: the probes' decisions depend on every detail of training."""
    rng = np.random.RandomState(seed)
    y = rng.randint(0, n_classes, n)
    x = rng.randn(n, dim) + 0.9 * np.eye(n_classes, dim)[y]
    return x.astype(np.float32), y


@pytest.mark.parametrize("mode", ["fasttest", "test"])
def test_one_probe_trains_as_sentevals(mode: str) -> None:
    cfg = ProbeConfig.for_mode(mode)
    x, y = _data(300, 3, 0)
    probe_points = np.random.RandomState(5).randn(2000, 6).astype(np.float32) * 0.6
    for reg in (1e-5, 1e-2):
        ref = SentEvalProbe(6, 3, reg, cfg)
        best = ref.fit(x[:240], y[:240], validation_data=(x[240:], y[240:]))
        accs, preds = fit_predict(x[:240], y[:240], x[240:], y[240:], [probe_points], [reg], 3, cfg)
        assert accs[0] == best
        assert (preds[0][0] == ref.predict(probe_points)).all()


@pytest.mark.parametrize("mode", ["fasttest", "test"])
def test_stacked_problems_train_as_each_alone(mode: str) -> None:
    """Two problems stacked, of different sizes (the second has one more, one-row minibatch per pass, a step the
    first skips) and different L2 values: each probe equals SentEval's trained alone, to every prediction."""
    cfg = ProbeConfig.for_mode(mode)
    x, y = _data(900, 3, 7)
    size = cfg.batch_size
    probe_rows = np.arange(500, 900)
    problems = [
        Problem(np.arange(0, 2 * size), np.arange(400, 500), [1e-5, 1e-3], [probe_rows]),
        Problem(np.arange(100, 101 + 2 * size), np.arange(420, 470), [1e-2, 1e-4], [probe_rows]),
    ]
    for problem, fitted in zip(problems, fit_problems(x, y, problems, 3, cfg)):
        for r, reg in enumerate(problem.regs):
            ref = SentEvalProbe(6, 3, reg, cfg)
            best = ref.fit(x[problem.train], y[problem.train], validation_data=(x[problem.valid], y[problem.valid]))
            assert fitted.valid_acc[r] == best
            assert (fitted.predictions[r][0] == ref.predict(x[probe_rows])).all()


@pytest.mark.parametrize("mode", ["fasttest", "test"])
def test_the_three_protocols_equal_sentevals(mode: str) -> None:
    cfg = ProbeConfig.for_mode(mode)
    x, y = _data(150, 2, 1)
    ours = inner_kfold(x, y, 2, cfg)
    assert {k: ours[k] for k in ("devacc", "acc")} == reference_inner_kfold(x, y, 2, cfg)
    x, y = _data(200, 3, 2)
    xte, yte = _data(80, 3, 3)
    ours = kfold_then_test(x, y, xte, yte, 3, cfg, keep_predictions=True)
    theirs, clf = reference_kfold(x, y, xte, yte, 3, cfg)
    assert {k: ours[k] for k in ("devacc", "acc")} == theirs
    assert (ours["predictions"] == clf.predict(xte)).all()
    xv, yv = _data(60, 2, 4)
    xt, yt = _data(60, 2, 5)
    x, y = _data(200, 2, 6)
    ours = split(x, y, xv, yv, xt, yt, 2, cfg)
    assert {k: ours[k] for k in ("devacc", "acc")} == reference_split(x, y, xv, yv, xt, yt, 2, cfg)


def test_summed_loss_would_not_match() -> None:
    """The check above can fail: the same probe trained on the summed loss (our former, SentEval's intended but
    never executed setting) decides differently."""
    cfg = ProbeConfig.for_mode("test")
    x, y = _data(300, 3, 0)
    probe_points = np.random.RandomState(5).randn(2000, 6).astype(np.float32) * 0.6
    ref = SentEvalProbe(6, 3, 1e-2, cfg)
    ref.loss_fn = torch.nn.CrossEntropyLoss(reduction="sum")
    ref.fit(x[:240], y[:240], validation_data=(x[240:], y[240:]))
    _, preds = fit_predict(x[:240], y[:240], x[240:], y[240:], [probe_points], [1e-2], 3, cfg)
    assert (preds[0][0] != ref.predict(probe_points)).any()


def test_senteval_order_and_batches() -> None:
    sents = ["b b", "a", "c c c", "d d", "e", "f f"]
    labels = [1, 1, 0, 0, 0, 1]
    keys = [(len(s.split()), y) for s, y in zip(sents, labels)]
    # by tokens, then label; ties in file order: "e"(1,0) "a"(1,1) "d d"(2,0) "b b"(2,1) "f f"(2,1) "c c c"(3,0)
    assert senteval_order(keys) == [4, 1, 3, 0, 5, 2]
    calls = []
    out = encode_in_batches(lambda batch: calls.append(list(batch)) or np.ones((len(batch), 2)), sents, batch_size=4)
    assert calls == [sents[:4], sents[4:]] and out.shape == (6, 2)


def test_mrpc_reports_f1_of_the_paraphrase_class(monkeypatch: pytest.MonkeyPatch) -> None:
    from cl_plugins.integrations.evaluation.senteval import transfer

    pairs = (["a b", "c", "d e f", "g", "h i"], ["x", "y z", "w", "v u", "t"], [1, 1, 0, 0, 1])
    monkeypatch.setattr(transfer.readers, "read_mrpc", lambda root: {"train": pairs, "test": pairs})
    order = senteval_order([(len(a.split()), len(b.split()), y) for a, b, y in zip(*pairs)])
    y_sorted = np.asarray([pairs[2][i] for i in order])
    pred = y_sorted.copy()
    pred[np.flatnonzero(y_sorted == 1)[0]] = 0  # one false negative
    pred[np.flatnonzero(y_sorted == 0)[0]] = 1  # one false positive
    seen = {}

    def fake_kfold(xtr, ytr, xte, yte, n_classes, cfg, keep_predictions=False):  # type: ignore[no-untyped-def]
        seen["yte"] = yte
        return {"devacc": 50.0, "acc": 60.0, "n": 10.0, "predictions": pred}

    monkeypatch.setattr(transfer, "kfold_then_test", fake_kfold)
    out = transfer.eval_transfer(lambda batch: np.ones((len(batch), 3)), "MRPC", ProbeConfig.for_mode("fasttest"))
    assert (seen["yte"] == y_sorted).all()
    # TP 2, FP 1, FN 1: F1 = 2 * 2 / (2 * 2 + 1 + 1)
    assert out["f1"] == 66.67 and "predictions" not in out
