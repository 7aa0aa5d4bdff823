"""Node classification on frozen embeddings: GRACE's protocol, seeded, with a validation set.

Embeddings are L2-normalised (GRACE's ``label_classification``); a multinomial logistic
regression is fitted on the training nodes for every C of a grid, the C with the best
validation micro-F1 is kept, and test micro-F1 and macro-F1 are reported. Splits:

* ``"random"``: the 10% / 10% / 80% train / validation / test split of the GRACE paper, drawn
  from ``seed`` (GRACE's code draws an unseeded 10/90 split without validation, issue #7);
* ``"public"``: Planetoid's public split (Cora 140 / 500 / 1000 nodes); only the classifier's
  seed changes, so the spread over seeds comes from training, not from the split.

The temperature-free paper reports mean ± std over 20 seeds, the default here; its GRACE numbers follow
PyGCL's recipe, whose evaluator is :func:`pygcl_logreg_f1` on :func:`pygcl_split`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

C_GRID = tuple(2.0**k for k in range(-10, 10, 2))
SPLITS = ("random", "public")


def random_split(num_nodes: int, seed: int, train: float = 0.1, val: float = 0.1) -> tuple[np.ndarray, ...]:
    """Disjoint index arrays (train, val, test) of sizes ⌊train·n⌋, ⌊val·n⌋ and the rest."""
    perm = np.random.RandomState(seed).permutation(num_nodes)
    n_train, n_val = int(train * num_nodes), int(val * num_nodes)
    return perm[:n_train], perm[n_train : n_train + n_val], perm[n_train + n_val :]


def logreg_f1(
    embeddings: np.ndarray,
    labels: np.ndarray,
    train: np.ndarray,
    val: np.ndarray,
    test: np.ndarray,
    *,
    seed: int = 0,
    c_grid: tuple[float, ...] = C_GRID,
) -> dict[str, float]:
    """Test micro-/macro-F1 (in [0, 1]) of the logistic regression with the best validation micro-F1."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import f1_score

    x = np.asarray(embeddings, dtype=np.float64)
    if not np.isfinite(x).all():
        raise ValueError("embeddings contain NaN or inf; the encoder diverged")
    x = x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)
    y = np.asarray(labels).ravel()
    best: tuple[float, Any] = (-1.0, None)
    for c in c_grid:
        clf = LogisticRegression(C=c, max_iter=2000, random_state=seed).fit(x[train], y[train])
        score = f1_score(y[val], clf.predict(x[val]), average="micro")
        if score > best[0]:
            best = (score, clf)
    pred = best[1].predict(x[test])
    return {
        "val_micro_f1": float(best[0]),
        "micro_f1": float(f1_score(y[test], pred, average="micro")),
        "macro_f1": float(f1_score(y[test], pred, average="macro")),
        "C": float(best[1].C),
    }


def node_classification(
    embeddings: np.ndarray,
    labels: np.ndarray,
    *,
    split: str = "random",
    seeds: list[int] | range = range(20),
    masks: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
) -> list[dict[str, float]]:
    """One :func:`logreg_f1` result per seed. ``split="public"`` needs ``masks`` (train, val, test bools)."""
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    if split == "public" and masks is None:
        raise ValueError("split='public' needs masks=(train_mask, val_mask, test_mask) from the Planetoid data")
    out = []
    for seed in seeds:
        if split == "random":
            train, val, test = random_split(len(labels), seed)
        else:
            train, val, test = (np.flatnonzero(np.asarray(m)) for m in masks)
        out.append({"seed": seed, **logreg_f1(embeddings, labels, train, val, test, seed=seed)})
    return out


def pygcl_split(num_nodes: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """PyGCL's ``get_split(n, train_ratio=0.1, test_ratio=0.8)`` as it runs: a permutation's first ⌊0.1·n⌋ nodes
    train, the next ⌊0.8·n⌋ are what it calls ``valid`` and the rest (about 10%) ``test`` (the 80% meant for
    testing lands in validation); drawn from ``seed`` instead of the global torch stream."""
    import torch

    perm = torch.randperm(num_nodes, generator=torch.Generator().manual_seed(seed)).numpy()
    n_train, n_mid = int(num_nodes * 0.1), int(num_nodes * 0.8)
    return perm[:n_train], perm[n_train : n_train + n_mid], perm[n_train + n_mid :]


def pygcl_logreg_f1(embeddings: np.ndarray, labels: np.ndarray, train: np.ndarray, val: np.ndarray,
                    test: np.ndarray, *, seed: int = 0, epochs: int = 5000, lr: float = 0.01,
                    interval: int = 20) -> dict[str, float]:  # fmt: skip
    """PyGCL's ``LREvaluator``: a linear layer (Xavier-uniform weight) on the raw embeddings, full-batch Adam
    (``lr`` 0.01, no weight decay) on the NLL of log-softmax for ``epochs``; every ``interval`` epochs the test
    and validation F1 are computed, and the test micro-/macro-F1 at the best validation micro-F1 is reported."""
    import torch
    from sklearn.metrics import f1_score

    x = torch.as_tensor(np.asarray(embeddings), dtype=torch.float32)
    if not torch.isfinite(x).all():
        raise ValueError("embeddings contain NaN or inf; the encoder diverged")
    y = torch.as_tensor(np.asarray(labels).ravel(), dtype=torch.long)
    torch.manual_seed(seed)
    fc = torch.nn.Linear(x.shape[1], int(y.max()) + 1)
    torch.nn.init.xavier_uniform_(fc.weight)
    opt = torch.optim.Adam(fc.parameters(), lr=lr)
    best = {"val_micro_f1": 0.0, "micro_f1": 0.0, "macro_f1": 0.0, "epoch": -1.0}
    for epoch in range(epochs):
        opt.zero_grad()
        torch.nn.functional.nll_loss(torch.log_softmax(fc(x[train]), -1), y[train]).backward()
        opt.step()
        if (epoch + 1) % interval:
            continue
        with torch.no_grad():
            pred_test, pred_val = fc(x[test]).argmax(-1).numpy(), fc(x[val]).argmax(-1).numpy()
        val_micro = f1_score(y[val].numpy(), pred_val, average="micro")
        if val_micro > best["val_micro_f1"]:
            best = {"val_micro_f1": float(val_micro), "epoch": float(epoch),
                    "micro_f1": float(f1_score(y[test].numpy(), pred_test, average="micro")),
                    "macro_f1": float(f1_score(y[test].numpy(), pred_test, average="macro"))}  # fmt: skip
    return best
