"""GraphCL / InfoGraph graph-classification protocol on frozen embeddings.

``evaluate_embedding`` of GraphCL's unsupervised-TU code: labels encoded, 10-fold
``StratifiedKFold(shuffle=True)``; in each fold ``GridSearchCV(SVC(), C in {1e-3, ..., 1e3},
cv=5)`` on the training part, accuracy on the held-out fold; the score is the mean over folds.
GraphCL reports mean ± std of that score over 5 seeds (0-4); here the fold shuffling takes the
seed explicitly instead of numpy's global state.
"""

from __future__ import annotations

import numpy as np

from cl_plugins.arguments import strict_flags

C_GRID = (1e-3, 1e-2, 1e-1, 1.0, 10.0, 100.0, 1000.0)


@strict_flags
def svm_cv_accuracy(
    embeddings: np.ndarray,
    labels: np.ndarray,
    *,
    seed: int = 0,
    folds: int = 10,
    search: bool = True,
    c_grid: tuple[float, ...] = C_GRID,
    n_jobs: int | None = None,
) -> float:
    """Mean 10-fold test accuracy (in [0, 1]) of an RBF SVC with the C chosen by inner 5-fold CV.

    Shapes: embeddings [G, D]; labels [G].
    """
    from sklearn.model_selection import GridSearchCV, StratifiedKFold
    from sklearn.preprocessing import LabelEncoder
    from sklearn.svm import SVC

    x = np.asarray(embeddings, dtype=np.float64)
    y = LabelEncoder().fit_transform(np.asarray(labels).ravel())
    if len(x) != len(y):
        raise ValueError(f"embeddings and labels differ in length: {len(x)} vs {len(y)}")
    if not np.isfinite(x).all():
        raise ValueError("embeddings contain NaN or inf; the encoder diverged")
    accs = []
    for train, test in StratifiedKFold(n_splits=folds, shuffle=True, random_state=seed).split(x, y):
        if search:
            clf = GridSearchCV(SVC(), {"C": list(c_grid)}, cv=5, scoring="accuracy", n_jobs=n_jobs)
        else:
            clf = SVC(C=10.0)
        clf.fit(x[train], y[train])
        accs.append(float((clf.predict(x[test]) == y[test]).mean()))
    return float(np.mean(accs))
