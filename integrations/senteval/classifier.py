"""SentEval's logistic-regression probe (``nhid = 0``) and its three validation protocols.

Faithful to SentEval's ``tools/classifier.py`` / ``tools/validation.py`` protocol: a linear layer
trained with summed cross-entropy, L2 via the optimizer's weight decay, minibatches from a
NumPy permutation seeded per classifier, ``epoch_size`` passes per epoch, early stopping when
the validation accuracy has not improved ``tenacity`` times, the best model kept; L2 grid
1e-5 ... 1e-2; stratified k-fold with ``shuffle=True, random_state=1111``.

All L2 values of a grid are trained together: SentEval reseeds identically for each value, so
they see the same minibatches, and training them as one batched model is the same computation.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from sklearn.model_selection import StratifiedKFold

REGS = [10.0**t for t in range(-5, -1)]


@dataclass(frozen=True)
class ProbeConfig:
    """SentEval classifier settings; :meth:`for_mode` gives SimCSE's ``test`` / ``fasttest``."""

    kfold: int = 10
    optim: str = "adam"
    batch_size: int = 64
    tenacity: int = 5
    epoch_size: int = 4
    max_epoch: int = 200
    seed: int = 1111

    @classmethod
    def for_mode(cls, mode: str) -> ProbeConfig:
        if mode == "test":
            return cls()
        if mode in ("fasttest", "dev"):
            return cls(kfold=5, optim="rmsprop", batch_size=128, tenacity=3, epoch_size=2)
        raise ValueError(f"mode must be 'test', 'dev' or 'fasttest', got {mode!r}")


def _optimizer(name: str, params, weight_decay: float) -> torch.optim.Optimizer:
    if name == "adam":
        return torch.optim.Adam(params, weight_decay=weight_decay)
    if name == "rmsprop":
        return torch.optim.RMSprop(params, lr=0.01, alpha=0.99, weight_decay=weight_decay)
    raise ValueError(f"optim must be 'adam' or 'rmsprop', got {name!r}")


def fit_predict(
    x_train: np.ndarray,
    y_train: np.ndarray,
    x_valid: np.ndarray,
    y_valid: np.ndarray,
    x_eval: list[np.ndarray],
    regs: list[float],
    n_classes: int,
    cfg: ProbeConfig,
    rng: np.random.RandomState | None = None,
) -> tuple[list[float], list[list[np.ndarray]]]:
    """Train one probe per L2 value; return their best validation accuracies and predictions.

    ``rng`` continues a stream already used for a holdout split (SentEval's order of draws).
    Returns (valid accuracy per reg, [predictions on each of ``x_eval``] per reg).
    """
    rng = np.random.RandomState(cfg.seed) if rng is None else rng
    torch.manual_seed(cfg.seed)
    template = torch.nn.Linear(x_train.shape[1], n_classes)
    models = [torch.nn.Linear(x_train.shape[1], n_classes) for _ in regs]
    for m in models:
        m.load_state_dict(template.state_dict())
    opts = [_optimizer(cfg.optim, m.parameters(), reg) for m, reg in zip(models, regs)]
    xt = torch.as_tensor(x_train, dtype=torch.float32)
    yt = torch.as_tensor(y_train, dtype=torch.long)
    xv = torch.as_tensor(x_valid, dtype=torch.float32)
    yv = torch.as_tensor(y_valid, dtype=torch.long)
    best = [-1.0] * len(regs)
    best_state = [None] * len(regs)
    strikes = [0] * len(regs)
    active = list(range(len(regs)))
    epoch = 0
    while active and epoch <= cfg.max_epoch:
        for _ in range(cfg.epoch_size):
            perm = torch.as_tensor(rng.permutation(len(xt)))
            for start in range(0, len(xt), cfg.batch_size):
                idx = perm[start : start + cfg.batch_size]
                xb, yb = xt[idx], yt[idx]
                for r in active:
                    loss = torch.nn.functional.cross_entropy(models[r](xb), yb, reduction="sum")
                    opts[r].zero_grad()
                    loss.backward()
                    opts[r].step()
        epoch += cfg.epoch_size
        with torch.no_grad():
            for r in list(active):
                acc = float((models[r](xv).argmax(1) == yv).float().mean())
                if acc > best[r]:
                    best[r] = acc
                    best_state[r] = {k: v.clone() for k, v in models[r].state_dict().items()}
                else:
                    if strikes[r] >= cfg.tenacity:
                        active.remove(r)
                    strikes[r] += 1
    preds = []
    with torch.no_grad():
        for r, m in enumerate(models):
            m.load_state_dict(best_state[r])
            preds.append([m(torch.as_tensor(x, dtype=torch.float32)).argmax(1).numpy() for x in x_eval])
    return best, preds


def _fit_with_holdout(xtr, ytr, x_eval, reg, n_classes, cfg):  # type: ignore[no-untyped-def]
    """SentEval's ``validation_split=0.05``: the first 5% of a seeded permutation is the dev set."""
    rng = np.random.RandomState(cfg.seed)
    perm = rng.permutation(len(xtr))
    cut = int(0.05 * len(xtr))
    fit_idx, val_idx = perm[cut:], perm[:cut]
    _, preds = fit_predict(xtr[fit_idx], ytr[fit_idx], xtr[val_idx], ytr[val_idx], [x_eval], [reg], n_classes, cfg, rng)
    return preds[0][0]


def _accuracy(pred: np.ndarray, y: np.ndarray) -> float:
    return round(100 * float((pred == y).mean()), 2)


def inner_kfold(x: np.ndarray, y: np.ndarray, n_classes: int, cfg: ProbeConfig) -> dict[str, float]:
    """MR / CR / SUBJ / MPQA: outer k-fold; the L2 value is chosen by an inner k-fold."""
    outer = StratifiedKFold(n_splits=cfg.kfold, shuffle=True, random_state=1111)
    inner = StratifiedKFold(n_splits=cfg.kfold, shuffle=True, random_state=1111)
    dev, test = [], []
    for train_idx, test_idx in outer.split(x, y):
        xtr, ytr = x[train_idx], y[train_idx]
        scores = np.zeros(len(REGS))
        for itr, ite in inner.split(xtr, ytr):
            accs, _ = fit_predict(xtr[itr], ytr[itr], xtr[ite], ytr[ite], [], REGS, n_classes, cfg)
            scores += np.array(accs)
        scores = np.round(100 * scores / cfg.kfold, 2)
        best = int(np.argmax(scores))
        dev.append(float(scores[best]))
        pred = _fit_with_holdout(xtr, ytr, x[test_idx], REGS[best], n_classes, cfg)
        test.append(_accuracy(pred, y[test_idx]))
    return {"devacc": round(float(np.mean(dev)), 2), "acc": round(float(np.mean(test)), 2), "n": float(len(y))}


def kfold_then_test(
    xtr: np.ndarray, ytr: np.ndarray, xte: np.ndarray, yte: np.ndarray, n_classes: int, cfg: ProbeConfig
) -> dict[str, float]:
    """TREC / MRPC: k-fold on train picks the L2 value, then train on all of train, test once."""
    skf = StratifiedKFold(n_splits=cfg.kfold, shuffle=True, random_state=cfg.seed)
    scores = np.zeros(len(REGS))
    for tr, te in skf.split(xtr, ytr):
        accs, _ = fit_predict(xtr[tr], ytr[tr], xtr[te], ytr[te], [], REGS, n_classes, cfg)
        scores += np.array(accs)
    scores = np.round(100 * scores / cfg.kfold, 2)
    best = int(np.argmax(scores))
    pred = _fit_with_holdout(xtr, ytr, xte, REGS[best], n_classes, cfg)
    return {"devacc": float(scores[best]), "acc": _accuracy(pred, yte), "n": float(len(ytr) + len(yte))}


def split(xtr, ytr, xdev, ydev, xte, yte, n_classes: int, cfg: ProbeConfig) -> dict[str, float]:
    """SST2: the L2 value is chosen on dev, the model trained with dev early stopping, tested once."""
    accs, preds = fit_predict(xtr, ytr, xdev, ydev, [xte], REGS, n_classes, cfg)
    scores = [round(100 * a, 2) for a in accs]
    best = int(np.argmax(scores))
    return {"devacc": scores[best], "acc": _accuracy(preds[best][0], yte), "n": float(len(ytr) + len(ydev) + len(yte))}
