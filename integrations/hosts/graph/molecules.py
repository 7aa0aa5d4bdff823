"""Molecules for GraphCL transfer learning: RDKit featurisation, MoleculeNet CSVs, ZINC SMILES,
the scaffold split and the multi-task ROC-AUC of Hu et al. (2020) / pretrain-gnns.

Featurisation (Hu et al.'s scheme): atom = (atomic number - 1, chirality tag index), bond =
(bond type index in SINGLE, DOUBLE, TRIPLE, AROMATIC; direction index in NONE, ENDUPRIGHT,
ENDDOWNRIGHT), every bond stored in both directions. Labels are in {-1, 0, +1} with 0 for a
missing label, as pretrain-gnns stores them.

Data layout under the data root (pretrain-gnns'): ``molecules/dataset/<name>/raw/<file>.csv``
(MoleculeNet; chemprop's cleaned CSVs or the originals) and ZINC SMILES under
``molecules/zinc/*.txt`` (one SMILES per line) or
``molecules/dataset/zinc_standard_agent/raw/*.csv(.gz)`` (a ``smiles`` column).
"""

from __future__ import annotations

import csv
import gzip
import hashlib
from pathlib import Path
from typing import Any

import numpy as np
import torch

from cl_plugins.integrations.data.catalogue import data_path
from cl_plugins.integrations.data.paths import cache_dir, data_root
from cl_plugins.integrations.hosts.graph.datasets import pyg_data_classes
from cl_plugins.integrations.runs import atomic

CHIRALITY = ("CHI_UNSPECIFIED", "CHI_TETRAHEDRAL_CW", "CHI_TETRAHEDRAL_CCW", "CHI_OTHER")
BOND_TYPES = ("SINGLE", "DOUBLE", "TRIPLE", "AROMATIC")
BOND_DIRECTIONS = ("NONE", "ENDUPRIGHT", "ENDDOWNRIGHT")
SMILES_COLUMNS = ("smiles", "mol", "SMILES", "Smiles", "canonical_smiles")
# columns of the original MoleculeNet CSVs that are not tasks
NON_TASK_COLUMNS = {"num", "name", "Model", "pIC50", "MolWt", "mol_id", "CID", "Canonical_Smiles", "activity"}
# where a CSV carries descriptors besides its labels (the original bace.csv), pretrain-gnns reads only these
KNOWN_TASKS = {"Class": ["Class"], "HIV_active": ["HIV_active"], "p_np": ["p_np"]}


def smiles_to_graph(smiles: str) -> Any | None:
    """A torch-geometric ``Data`` (x [n, 2], edge_index [2, 2b], edge_attr [2b, 2]) or None if unparsable."""
    from rdkit import Chem, RDLogger
    from torch_geometric.data import Data

    RDLogger.DisableLog("rdApp.*")
    mol = Chem.MolFromSmiles(smiles)
    if mol is None or mol.GetNumAtoms() == 0:
        return None
    atoms = []
    for atom in mol.GetAtoms():
        tag = str(atom.GetChiralTag())
        atoms.append((atom.GetAtomicNum() - 1, CHIRALITY.index(tag) if tag in CHIRALITY else len(CHIRALITY) - 1))
    rows, attrs = [], []
    for bond in mol.GetBonds():
        kind = str(bond.GetBondType())
        if kind not in BOND_TYPES:
            return None  # dative / unspecified bonds have no row in Hu et al.'s table
        direction = str(bond.GetBondDir())
        feat = (BOND_TYPES.index(kind), BOND_DIRECTIONS.index(direction) if direction in BOND_DIRECTIONS else 0)
        i, j = bond.GetBeginAtomIdx(), bond.GetEndAtomIdx()
        rows += [(i, j), (j, i)]
        attrs += [feat, feat]
    edge_index = torch.tensor(rows, dtype=torch.long).t().reshape(2, -1)
    edge_attr = torch.tensor(attrs, dtype=torch.long).reshape(-1, 2)
    return Data(x=torch.tensor(atoms, dtype=torch.long), edge_index=edge_index, edge_attr=edge_attr)


def read_moleculenet_csv(path: str | Path) -> tuple[list[str], np.ndarray, list[str]]:
    """SMILES, labels [n, T] in {-1, 0, +1} (0 = missing) and task names of a MoleculeNet CSV."""
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt", newline="") as f:
        reader = csv.DictReader(f)
        fields = reader.fieldnames or []
        smiles_col = next((c for c in SMILES_COLUMNS if c in fields), None)
        if smiles_col is None:
            raise ValueError(f"{path}: no SMILES column (looked for {SMILES_COLUMNS}); columns are {fields}")
        tasks = next((KNOWN_TASKS[c] for c in KNOWN_TASKS if c in fields), None)
        if tasks is None:
            tasks = [c for c in fields if c != smiles_col and c not in NON_TASK_COLUMNS]
        smiles, labels = [], []
        for lineno, row in enumerate(reader, start=2):  # line 1 is the header
            smiles.append(row[smiles_col])
            labels.append([_label(row[t], path, lineno, t) for t in tasks])
    return smiles, np.asarray(labels, dtype=np.int64).reshape(len(smiles), len(tasks)), tasks


def _label(value: str | None, path: str | Path, lineno: int, task: str) -> int:
    """+1 / -1, or 0 for a missing label; anything else is named by file, line and task."""
    value = (value or "").strip()
    if value == "":
        return 0
    try:
        return 1 if float(value) > 0.5 else -1
    except ValueError:
        raise ValueError(f"{path}:{lineno}: task {task!r} has the label {value!r}, not a number") from None


def _find_csv(folder: Path) -> Path:
    files = sorted([*folder.glob("*.csv"), *folder.glob("*.csv.gz")])
    if not files:
        raise FileNotFoundError(f"no .csv or .csv.gz file in {folder}")
    return files[0]


def _cached_graphs(key: str, smiles: list[str]) -> list[Any | None]:
    digest = hashlib.sha1("\n".join(smiles).encode()).hexdigest()[:16]
    path = cache_dir("molecules") / f"{key}-{digest}.pt"
    cached = atomic.load_cache(path, pyg_data_classes())
    if cached is not None:
        return cached
    from tqdm.auto import tqdm

    graphs = [smiles_to_graph(s) for s in tqdm(smiles, desc=f"featurising {key}", mininterval=5)]
    atomic.torch_save(graphs, path)
    return graphs


#: the largest fraction of a MoleculeNet set that may be dropped as unparsable
MAX_DROPPED = 0.05


class MoleculeNetData:
    """A MoleculeNet set: graphs with labels ``y`` [1, T], their SMILES and the task names.

    Molecules RDKit cannot parse are dropped, counted in ``dropped`` and printed; more than
    :data:`MAX_DROPPED` of a set is refused (a wrong or damaged file, not a few odd molecules: pretrain-gnns'
    sets lose at most 0.6 %).
    """

    def __init__(self, name: str, root: str | Path | None = None) -> None:
        folder = (
            Path(root).expanduser() / name / "raw"
            if root is not None
            else data_path(
                Path("molecules/dataset") / name / "raw",
                hint="pretrain-gnns' chem_dataset.zip or the MoleculeNet CSVs (deepchem)",
            )
        )
        smiles, labels, self.tasks = read_moleculenet_csv(_find_csv(folder))
        graphs = _cached_graphs(f"moleculenet-{name}", smiles)
        self.name = name
        self.graphs, self.smiles = [], []
        for g, s, y in zip(graphs, smiles, labels):
            if g is None:
                continue
            g = g.clone()
            g.y = torch.as_tensor(y, dtype=torch.float32).view(1, -1)
            self.graphs.append(g)
            self.smiles.append(s)
        self.dropped = len(smiles) - len(self.graphs)
        if self.dropped:
            print(f"{name}: {self.dropped} of {len(smiles)} molecules dropped (RDKit cannot parse their SMILES)")
        if self.dropped > MAX_DROPPED * len(smiles):
            raise ValueError(f"{name}: RDKit rejected {self.dropped} of {len(smiles)} SMILES (more than "
                             f"{MAX_DROPPED:.0%}); check the CSV's SMILES column")  # fmt: skip

    @property
    def num_tasks(self) -> int:
        return len(self.tasks)

    def __len__(self) -> int:
        return len(self.graphs)

    def __getitem__(self, i: int) -> Any:
        return self.graphs[i]


def _molecules_base() -> Path:
    """The data root's ``molecules`` folder that holds ZINC (downloading the registry's ``zinc-jtnn`` if none)."""
    from cl_plugins.integrations.data import catalogue

    found = catalogue.find("molecules/dataset/zinc_standard_agent/raw") or catalogue.ensure("molecules/zinc")
    if found is None:
        return data_root() / "molecules"
    return found.parents[2] if found.name == "raw" else found.parent


def zinc_smiles(root: str | Path | None = None, limit: int | None = None) -> list[str]:
    """Pre-training SMILES: ``zinc_standard_agent`` if present, else the files of ``molecules/zinc``."""
    base = Path(root).expanduser() if root is not None else _molecules_base()
    agent = base / "dataset" / "zinc_standard_agent" / "raw"
    smiles: list[str] = []
    if agent.is_dir():
        smiles = read_moleculenet_csv(_find_csv(agent))[0]
    else:
        folder = base / "zinc"
        files = sorted(folder.glob("*.txt")) if folder.is_dir() else []
        if not files:
            raise FileNotFoundError(
                f"no ZINC SMILES under {agent} or {folder}. Set CL_PLUGINS_DATA to the data root holding "
                "molecules/zinc/*.txt (one SMILES per line) or molecules/dataset/zinc_standard_agent/raw"
            )
        for f in files:
            smiles += [line.split()[0] for line in f.read_text().splitlines() if line.strip()]
    smiles = list(dict.fromkeys(smiles))
    return smiles[:limit] if limit else smiles


def zinc_graphs(root: str | Path | None = None, limit: int | None = None) -> list[Any]:
    smiles = zinc_smiles(root, limit)
    return [g for g in _cached_graphs("zinc", smiles) if g is not None]


def scaffold_split(
    smiles: list[str], frac_train: float = 0.8, frac_valid: float = 0.1
) -> tuple[list[int], list[int], list[int]]:
    """pretrain-gnns' deterministic scaffold split.

    Bemis-Murcko scaffolds (with chirality) group the molecules; groups sorted by size (largest
    first, ties by first index, descending) fill train, then valid, then test.
    """
    from rdkit import RDLogger
    from rdkit.Chem.Scaffolds import MurckoScaffold

    RDLogger.DisableLog("rdApp.*")
    groups: dict[str, list[int]] = {}
    for i, s in enumerate(smiles):
        scaffold = MurckoScaffold.MurckoScaffoldSmiles(smiles=s, includeChirality=True)
        groups.setdefault(scaffold, []).append(i)
    ordered = sorted(groups.values(), key=lambda idx: (len(idx), idx[0]), reverse=True)
    n = len(smiles)
    train_cut, valid_cut = frac_train * n, (frac_train + frac_valid) * n
    train: list[int] = []
    valid: list[int] = []
    test: list[int] = []
    for idx in ordered:
        if len(train) + len(idx) > train_cut:
            if len(train) + len(valid) + len(idx) > valid_cut:
                test += idx
            else:
                valid += idx
        else:
            train += idx
    return sorted(train), sorted(valid), sorted(test)


def multitask_roc_auc(labels: np.ndarray, scores: np.ndarray) -> float:
    """Mean ROC-AUC over tasks that have both classes among their non-missing labels (pretrain-gnns).

    Shapes: labels [n, T] in {-1, 0, +1} (0 missing); scores [n, T]. Returns NaN if no task qualifies.
    Which tasks were averaged: :func:`roc_auc_tasks`.
    """
    from sklearn.metrics import roc_auc_score

    labels, scores = np.asarray(labels), np.asarray(scores)
    aucs = [roc_auc_score((labels[labels[:, t] != 0, t] + 1) / 2, scores[labels[:, t] != 0, t])
            for t in roc_auc_tasks(labels)[0]]  # fmt: skip
    return float(np.mean(aucs)) if aucs else float("nan")


def roc_auc_tasks(labels: np.ndarray) -> tuple[list[int], list[int]]:
    """(tasks averaged by :func:`multitask_roc_auc`, tasks skipped: one class only among their labels)."""
    used, skipped = [], []
    for t in range(np.asarray(labels).shape[1]):
        y = labels[labels[:, t] != 0, t]
        (used if (y == 1).any() and (y == -1).any() else skipped).append(t)
    return used, skipped
