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

Every probe of a protocol stage trains in one batched model (:func:`fit_problems`): the L2 values of a grid
(SentEval reseeds identically for each, so they see the same minibatches) and the folds (each with its own
seeded minibatch stream) are stacked; each probe still follows its own SentEval trajectory.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch
from sklearn.model_selection import StratifiedKFold

from cl_plugins.arguments import strict_flags
from cl_plugins.integrations.evaluation.senteval.probe_optim import StackedOptimizer

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


@dataclass
class Problem:
    """One probe training run of a protocol, as rows of a shared embedding bank.

    ``train`` rows in SentEval's order (its minibatches permute positions in this array), ``valid`` rows for
    early stopping, one L2 value per probe in ``regs``, row sets to ``predict`` with each probe's best state,
    and ``rng``: a stream already used for a holdout split (SentEval's order of draws), else a fresh seeded one.
    """

    train: np.ndarray
    valid: np.ndarray
    regs: list[float]
    predict: list[np.ndarray] = field(default_factory=list)
    rng: np.random.RandomState | None = None


@dataclass
class Fitted:
    """Best validation accuracy (a fraction) and predictions on each ``predict`` set, per L2 value."""

    valid_acc: list[float]
    predictions: list[list[np.ndarray]]


def fit_problems(
    x: np.ndarray, y: np.ndarray, problems: list[Problem], n_classes: int, cfg: ProbeConfig
) -> list[Fitted]:
    """Train every probe of ``problems`` (the same number of L2 values each) as one batched model.

    Each probe is SentEval's classifier: the same seeded initialisation, its own seeded minibatch order, the
    mean cross-entropy of each minibatch, L2 as weight decay, early stopping after ``tenacity`` validation
    checks without improvement, its best state kept. Problems are stacked along a group dimension and their
    L2 values along the output columns; the loss gradient is written out (that of ``log_softmax`` + NLL) and
    the optimizers act elementwise (:mod:`.probe_optim`), so each probe follows its own trajectory. Groups
    whose probes have all stopped are dropped; a stopped probe of a live group keeps moving, unread.

    Shapes:
        x: ``[N, d]`` bank; y: ``[N]``; ``Problem`` rows index both.
    """
    bank, labels = torch.as_tensor(x, dtype=torch.float32), torch.as_tensor(y, dtype=torch.long)
    trainer = _Trainer(bank, labels, problems, n_classes, cfg)
    return trainer.run()


class _Trainer:
    def __init__(self, bank: torch.Tensor, labels: torch.Tensor, problems: list[Problem], n_classes: int,
                 cfg: ProbeConfig) -> None:  # fmt: skip
        self.bank, self.labels, self.problems, self.c, self.cfg = bank, labels, problems, n_classes, cfg
        self.n_reg = len(problems[0].regs)
        if any(len(p.regs) != self.n_reg for p in problems):
            raise ValueError("every problem of one batch needs the same number of L2 values")
        torch.manual_seed(cfg.seed)
        template = torch.nn.Linear(bank.shape[1], n_classes)  # SentEval's initialisation, shared by all probes
        groups = len(problems)
        weight = template.weight.detach().T.repeat(1, self.n_reg).unsqueeze(0).repeat(groups, 1, 1).contiguous()
        bias = template.bias.detach().repeat(self.n_reg).unsqueeze(0).repeat(groups, 1).contiguous()
        decay = torch.tensor([[r for r in p.regs for _ in range(n_classes)] for p in problems], dtype=torch.float32)
        self.opt = StackedOptimizer(cfg.optim, [weight, bias], [decay[:, None, :], decay])
        self.rngs = [p.rng if p.rng is not None else np.random.RandomState(cfg.seed) for p in problems]
        self.live = list(range(groups))  # problem index of each row of the optimizer's tensors
        self.best = np.full((groups, self.n_reg), -1.0)
        self.strikes = np.zeros((groups, self.n_reg), dtype=int)
        self.active = np.ones((groups, self.n_reg), dtype=bool)
        self.best_weight, self.best_bias = weight.clone(), bias.clone()

    def run(self) -> list[Fitted]:
        epoch = 0
        while self.active.any() and epoch <= self.cfg.max_epoch:
            for _ in range(self.cfg.epoch_size):
                self._one_pass()
            epoch += self.cfg.epoch_size
            self._validate()
        return [self._fitted(g) for g in range(len(self.problems))]

    def _one_pass(self) -> None:
        size = self.cfg.batch_size
        orders = [self.problems[g].train[self.rngs[g].permutation(len(self.problems[g].train))] for g in self.live]
        for start in range(0, max(len(o) for o in orders), size):
            batches = [o[start : start + size] for o in orders]
            stepping = [i for i, b in enumerate(batches) if len(b)]
            self.opt.step(self._gradients(batches), None if len(stepping) == len(batches) else stepping)

    def _gradients(self, batches: list[np.ndarray]) -> list[torch.Tensor]:
        """Gradients of each group's mean minibatch cross-entropy (padding rows weigh 0)."""
        idx, weight = _padded(batches)
        weight = weight[:, :, None, None]
        weight_t, bias_t = self.opt.params
        xb, yb = self.bank[idx], self.labels[idx]
        logits = torch.baddbmm(bias_t[:, None, :], xb, weight_t).view(*idx.shape, self.n_reg, self.c)
        prob = torch.log_softmax(logits, dim=-1).exp_()
        target = torch.nn.functional.one_hot(yb, self.c)[:, :, None, :]
        dlogits = (prob * weight - target * weight).view(*idx.shape, -1)  # autograd's order of operations
        return [torch.bmm(xb.transpose(1, 2), dlogits), dlogits.sum(1)]

    def _validate(self) -> None:
        weight_t, bias_t = self.opt.params
        correct = _correct(self.bank, self.labels, [self.problems[g].valid for g in self.live], weight_t, bias_t,
                           self.n_reg, self.c)  # fmt: skip
        for row, g in enumerate(self.live):
            n_valid = len(self.problems[g].valid)
            for r in np.flatnonzero(self.active[g]):
                acc = 1.0 * int(correct[row, r]) / n_valid  # SentEval: 1.0 * correct / len(devX)
                if acc > self.best[g, r]:
                    self.best[g, r] = acc
                    cols = slice(r * self.c, (r + 1) * self.c)
                    self.best_weight[g, :, cols] = weight_t[row, :, cols]
                    self.best_bias[g, cols] = bias_t[row, cols]
                else:
                    if self.strikes[g, r] >= self.cfg.tenacity:
                        self.active[g, r] = False
                    self.strikes[g, r] += 1
        keep = [row for row, g in enumerate(self.live) if self.active[g].any()]
        if len(keep) < len(self.live):
            self.opt.select(keep)
            self.live = [self.live[row] for row in keep]

    def _fitted(self, g: int) -> Fitted:
        preds = []
        for r in range(self.n_reg):
            cols = slice(r * self.c, (r + 1) * self.c)
            w, b = self.best_weight[g, :, cols], self.best_bias[g, cols]
            preds.append(
                [(self.bank[torch.as_tensor(rows)] @ w + b).argmax(1).numpy() for rows in self.problems[g].predict]
            )
        return Fitted(self.best[g].tolist(), preds)


def _padded(batches: list[np.ndarray]) -> tuple[torch.Tensor, torch.Tensor]:
    """Rows [G, B] (short batches padded with row 0) and each row's loss weight 1 / batch length (0: padding)."""
    width = max(len(b) for b in batches)
    if all(len(b) == width for b in batches):
        idx = torch.as_tensor(np.stack(batches))
        return idx, torch.full(idx.shape, 1.0, dtype=torch.float32) / width
    idx = torch.zeros(len(batches), width, dtype=torch.long)
    weight = torch.zeros(len(batches), width)
    for i, b in enumerate(batches):
        idx[i, : len(b)] = torch.as_tensor(b)
        weight[i, : len(b)] = torch.tensor(1.0) / len(b)
    return idx, weight


@torch.no_grad()
def _correct(bank: torch.Tensor, labels: torch.Tensor, rows: list[np.ndarray], weight: torch.Tensor,
             bias: torch.Tensor, n_reg: int, n_classes: int) -> np.ndarray:  # fmt: skip
    """Correct predictions [G, R] of each group's probes on its own ``rows``."""
    out = np.zeros((len(rows), n_reg), dtype=np.int64)
    for g, r in enumerate(rows):
        logits = (bank[torch.as_tensor(r)] @ weight[g] + bias[g]).view(len(r), n_reg, n_classes)
        out[g] = (logits.argmax(-1) == labels[torch.as_tensor(r)][:, None]).sum(0).numpy()
    return out


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
    """One probe per L2 value on separate arrays: (best validation accuracy, [predictions per eval set]) per reg."""
    bank, y, rows = _stack([x_train, x_valid, *x_eval], [y_train, y_valid] + [np.zeros(len(e), int) for e in x_eval])
    fitted = fit_problems(bank, y, [Problem(rows[0], rows[1], list(regs), rows[2:], rng)], n_classes, cfg)[0]
    return fitted.valid_acc, fitted.predictions


def _stack(xs: list[np.ndarray], ys: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]:
    """One bank of several arrays, and the rows of each."""
    bounds = np.cumsum([0] + [len(x) for x in xs])
    rows = [np.arange(a, b) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
    return np.concatenate(xs), np.concatenate(ys).astype(np.int64), rows


def _holdout(train: np.ndarray, reg: float, predict: np.ndarray, cfg: ProbeConfig) -> Problem:
    """SentEval's ``validation_split=0.05``: the first 5% of a seeded permutation of ``train`` is the dev set;
    training continues the same random stream."""
    rng = np.random.RandomState(cfg.seed)
    perm = rng.permutation(len(train))
    cut = int(0.05 * len(train))
    return Problem(train[perm[cut:]], train[perm[:cut]], [reg], [predict], rng)


def _cv_problems(rows: np.ndarray, y: np.ndarray, cfg: ProbeConfig, seed: int) -> list[Problem]:
    """A stratified k-fold of the bank rows ``rows`` (fold arrays in SentEval's order), all L2 values each."""
    folds = StratifiedKFold(n_splits=cfg.kfold, shuffle=True, random_state=seed)
    return [Problem(rows[tr], rows[te], list(REGS)) for tr, te in folds.split(rows, y[rows])]


def _cv_scores(fitted: list[Fitted]) -> np.ndarray:
    """SentEval: round(100 * mean over the folds, 2) of each L2 value's validation accuracy."""
    return np.array([round(100 * float(np.mean([f.valid_acc[r] for f in fitted])), 2) for r in range(len(REGS))])


def _accuracy(pred: np.ndarray, y: np.ndarray) -> float:
    return round(100 * float((pred == y).mean()), 2)


def inner_kfold(x: np.ndarray, y: np.ndarray, n_classes: int, cfg: ProbeConfig) -> dict[str, float]:
    """MR / CR / SUBJ / MPQA: outer k-fold; the L2 value is chosen by an inner k-fold (SentEval fixes its seed
    at 1111). All inner folds of all outer folds train together, then the k holdout fits."""
    outer = list(StratifiedKFold(n_splits=cfg.kfold, shuffle=True, random_state=1111).split(x, y))
    inner = [_cv_problems(train, y, cfg, seed=1111) for train, _ in outer]
    fitted = fit_problems(x, y, [p for problems in inner for p in problems], n_classes, cfg)
    scores = [_cv_scores(fitted[k * cfg.kfold : (k + 1) * cfg.kfold]) for k in range(len(outer))]
    best = [int(np.argmax(s)) for s in scores]
    holdouts = [_holdout(train, REGS[b], test, cfg) for (train, test), b in zip(outer, best, strict=True)]
    preds = [f.predictions[0][0] for f in fit_problems(x, y, holdouts, n_classes, cfg)]
    dev = [float(s[b]) for s, b in zip(scores, best, strict=True)]
    test = [_accuracy(pred, y[te]) for pred, (_, te) in zip(preds, outer, strict=True)]
    return {"devacc": round(float(np.mean(dev)), 2), "acc": round(float(np.mean(test)), 2), "n": float(len(y))}


@strict_flags
def kfold_then_test(
    xtr: np.ndarray,
    ytr: np.ndarray,
    xte: np.ndarray,
    yte: np.ndarray,
    n_classes: int,
    cfg: ProbeConfig,
    keep_predictions: bool = False,
) -> dict:
    """TREC / MRPC: k-fold on train picks the L2 value, then train on all of train, test once (with the test
    predictions under ``"predictions"`` if asked, for MRPC's F1)."""
    bank, y, (train, test) = _stack([xtr, xte], [ytr, yte])
    scores = _cv_scores(fit_problems(bank, y, _cv_problems(train, y, cfg, seed=cfg.seed), n_classes, cfg))
    best = int(np.argmax(scores))
    pred = fit_problems(bank, y, [_holdout(train, REGS[best], test, cfg)], n_classes, cfg)[0].predictions[0][0]
    out = {"devacc": float(scores[best]), "acc": _accuracy(pred, yte), "n": float(len(ytr) + len(yte))}
    return {**out, "predictions": pred} if keep_predictions else out


def split(xtr, ytr, xdev, ydev, xte, yte, n_classes: int, cfg: ProbeConfig) -> dict[str, float]:  # type: ignore[no-untyped-def]
    """SST2: the L2 value is chosen on dev, the model trained with dev early stopping, tested once (SentEval
    retrains the chosen value with the same seed: the same probe, so its predictions are reused)."""
    accs, preds = fit_predict(xtr, ytr, xdev, ydev, [xte], REGS, n_classes, cfg)
    scores = [round(100 * a, 2) for a in accs]
    best = int(np.argmax(scores))
    return {"devacc": scores[best], "acc": _accuracy(preds[best][0], yte), "n": float(len(ytr) + len(ydev) + len(yte))}
