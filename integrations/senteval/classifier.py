"""SentEval's logistic-regression probe (``nhid = 0``) and its three validation protocols.

Faithful to SentEval's ``tools/classifier.py`` / ``tools/validation.py`` protocol as it runs on current
PyTorch: a linear layer trained with the mean cross-entropy of each minibatch, L2 via the optimizer's weight
decay, minibatches from a NumPy permutation seeded per classifier, ``epoch_size`` passes per epoch, early
stopping when the validation accuracy has not improved ``tenacity`` times, the best model kept; L2 grid
1e-5 ... 1e-2; stratified k-fold with ``shuffle=True, random_state=1111``.

The mean, not the sum: SentEval sets ``loss_fn.size_average = False`` on an ``nn.CrossEntropyLoss()`` that is
already built, and PyTorch since 0.4.1 fixes the reduction at construction, so that attribute is never read.
With an L2 term added to the gradient the two are not equivalent (the sum scales the data term by the batch
size against the same L2), and the mean is what the original computes today.

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


def _optimizer(name: str, params: list[torch.Tensor]) -> torch.optim.Optimizer:
    # SentEval's get_optimizer defaults: Adam(lr=1e-3), RMSprop(lr=1e-2, alpha=0.99); L2 comes separately
    if name == "adam":
        return torch.optim.Adam(params)
    if name == "rmsprop":
        return torch.optim.RMSprop(params, lr=0.01, alpha=0.99)
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

    The probes are one [R, d, c] weight tensor trained on shared minibatches; each one's L2 term
    is added to its gradient, which is exactly what the optimizers' ``weight_decay`` does, and
    Adam / RMSprop act elementwise, so this equals R separate SentEval runs. A probe that has
    stopped early keeps its best state; it may go on moving, which does not affect the others.
    ``rng`` continues a stream already used for a holdout split (SentEval's order of draws).
    Returns (valid accuracy per reg, [predictions on each of ``x_eval``] per reg).
    """
    rng = np.random.RandomState(cfg.seed) if rng is None else rng
    torch.manual_seed(cfg.seed)
    template = torch.nn.Linear(x_train.shape[1], n_classes)  # SentEval's initialisation
    n_reg = len(regs)
    weight = template.weight.detach().T.unsqueeze(0).repeat(n_reg, 1, 1).contiguous().requires_grad_()
    bias = template.bias.detach().unsqueeze(0).repeat(n_reg, 1).contiguous().requires_grad_()
    decay = torch.tensor(regs, dtype=torch.float32)
    opt = _optimizer(cfg.optim, [weight, bias])
    xt = torch.as_tensor(x_train, dtype=torch.float32)
    yt = torch.as_tensor(y_train, dtype=torch.long)
    xv = torch.as_tensor(x_valid, dtype=torch.float32)
    yv = torch.as_tensor(y_valid, dtype=torch.long)
    best = [-1.0] * n_reg
    best_state: list[tuple[torch.Tensor, torch.Tensor] | None] = [None] * n_reg
    strikes = [0] * n_reg
    active = set(range(n_reg))
    epoch = 0
    while active and epoch <= cfg.max_epoch:
        for _ in range(cfg.epoch_size):
            perm = torch.as_tensor(rng.permutation(len(xt)))
            for start in range(0, len(xt), cfg.batch_size):
                idx = perm[start : start + cfg.batch_size]
                logits = torch.einsum("bd,rdc->rbc", xt[idx], weight) + bias[:, None, :]
                target = yt[idx].repeat(n_reg)
                # the mean over each probe's minibatch (see the module doc); summed over probes, each probe's
                # gradient is its own mean's
                loss = torch.nn.functional.cross_entropy(logits.reshape(-1, n_classes), target, reduction="sum")
                loss = loss / len(idx)
                opt.zero_grad()
                loss.backward()
                with torch.no_grad():
                    weight.grad.add_(decay[:, None, None] * weight)
                    bias.grad.add_(decay[:, None] * bias)
                opt.step()
        epoch += cfg.epoch_size
        with torch.no_grad():
            pred = (torch.einsum("bd,rdc->rbc", xv, weight) + bias[:, None, :]).argmax(-1)
            accs = ((pred == yv).sum(1).double() / len(yv)).tolist()  # SentEval: 1.0 * correct / len
            for r in sorted(active):
                if accs[r] > best[r]:
                    best[r] = accs[r]
                    best_state[r] = (weight[r].detach().clone(), bias[r].detach().clone())
                else:
                    if strikes[r] >= cfg.tenacity:
                        active.discard(r)
                    strikes[r] += 1
    preds = []
    with torch.no_grad():
        for r in range(n_reg):
            w, b = best_state[r]  # type: ignore[misc]
            preds.append([(torch.as_tensor(x, dtype=torch.float32) @ w + b).argmax(1).numpy() for x in x_eval])
    return best, preds


def _fit_with_holdout(xtr, ytr, x_eval, reg, n_classes, cfg):  # type: ignore[no-untyped-def]
    """SentEval's ``validation_split=0.05``: the first 5% of a seeded permutation is the dev set."""
    rng = np.random.RandomState(cfg.seed)
    perm = rng.permutation(len(xtr))
    cut = int(0.05 * len(xtr))
    fit_idx, val_idx = perm[cut:], perm[:cut]
    _, preds = fit_predict(xtr[fit_idx], ytr[fit_idx], xtr[val_idx], ytr[val_idx], [x_eval], [reg], n_classes, cfg, rng)
    return preds[0][0]


def _cv_scores(x: np.ndarray, y: np.ndarray, n_classes: int, cfg: ProbeConfig, seed: int) -> np.ndarray:
    """Validation accuracy x 100 of each L2 value, averaged over a stratified k-fold of (x, y)."""
    folds = StratifiedKFold(n_splits=cfg.kfold, shuffle=True, random_state=seed)
    per_fold = [fit_predict(x[tr], y[tr], x[te], y[te], [], REGS, n_classes, cfg)[0] for tr, te in folds.split(x, y)]
    # SentEval: round(100 * np.mean(scores of the folds), 2) for each L2 value
    return np.array([round(100 * float(np.mean([f[r] for f in per_fold])), 2) for r in range(len(REGS))])


def _accuracy(pred: np.ndarray, y: np.ndarray) -> float:
    return round(100 * float((pred == y).mean()), 2)


def inner_kfold(x: np.ndarray, y: np.ndarray, n_classes: int, cfg: ProbeConfig) -> dict[str, float]:
    """MR / CR / SUBJ / MPQA: outer k-fold; the L2 value is chosen by an inner k-fold."""
    outer = StratifiedKFold(n_splits=cfg.kfold, shuffle=True, random_state=1111)
    dev, test = [], []
    for train_idx, test_idx in outer.split(x, y):
        xtr, ytr = x[train_idx], y[train_idx]
        scores = _cv_scores(xtr, ytr, n_classes, cfg, seed=1111)  # SentEval fixes 1111 here
        best = int(np.argmax(scores))
        dev.append(float(scores[best]))
        pred = _fit_with_holdout(xtr, ytr, x[test_idx], REGS[best], n_classes, cfg)
        test.append(_accuracy(pred, y[test_idx]))
    return {"devacc": round(float(np.mean(dev)), 2), "acc": round(float(np.mean(test)), 2), "n": float(len(y))}


def kfold_then_test(
    xtr: np.ndarray, ytr: np.ndarray, xte: np.ndarray, yte: np.ndarray, n_classes: int, cfg: ProbeConfig,
    keep_predictions: bool = False,
) -> dict:
    """TREC / MRPC: k-fold on train picks the L2 value, then train on all of train, test once (with the test
    predictions under ``"predictions"`` if asked, for MRPC's F1)."""
    scores = _cv_scores(xtr, ytr, n_classes, cfg, seed=cfg.seed)
    best = int(np.argmax(scores))
    pred = _fit_with_holdout(xtr, ytr, xte, REGS[best], n_classes, cfg)
    out = {"devacc": float(scores[best]), "acc": _accuracy(pred, yte), "n": float(len(ytr) + len(yte))}
    return {**out, "predictions": pred} if keep_predictions else out


def split(xtr, ytr, xdev, ydev, xte, yte, n_classes: int, cfg: ProbeConfig) -> dict[str, float]:
    """SST2: the L2 value is chosen on dev, the model trained with dev early stopping, tested once."""
    accs, preds = fit_predict(xtr, ytr, xdev, ydev, [xte], REGS, n_classes, cfg)
    scores = [round(100 * a, 2) for a in accs]
    best = int(np.argmax(scores))
    return {"devacc": scores[best], "acc": _accuracy(preds[best][0], yte), "n": float(len(ytr) + len(ydev) + len(yte))}
