"""Pre-trained molecule GINs in any published layout, as the state dict of our :class:`MoleculeGIN`.

Accepted (``--input_model`` of ``graphcl_transfer``, :func:`load_molecule_gin`), saved on any device:

* our GraphCL pre-training's ``model/`` (a :mod:`cl_plugins.integrations.runs.saved_model` folder; or its run folder)
  or a bare :class:`MoleculeGIN` state dict;
* Hu et al.'s ``pretrain-gnns`` and GraphCL's released ``GNN`` state dicts (``torch.save(model.gnn.state_dict())``):
  ``x_embedding1/2``, ``gnns.N.mlp.*``, ``gnns.N.edge_embedding1/2``, ``batch_norms.N.*``; also inside a
  ``GNN_graphpred`` (``gnn.`` prefix) or a ``DataParallel`` (``module.`` prefix).

Hu et al.'s chirality table has 3 rows (CHI_UNSPECIFIED, CW, CCW) although their featuriser emits a fourth tag,
CHI_OTHER, which their model cannot embed. Ours has 4 rows; a converted checkpoint gets the CHI_UNSPECIFIED row
for CHI_OTHER (a warning says so), so every molecule they could embed is embedded exactly as they do.
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path
from typing import Any

import torch

from cl_plugins.integrations.hosts.graph.encoders import NUM_CHIRALITY_TAG
from cl_plugins.integrations.runs import atomic, saved_model

_RENAMES = (
    (r"^x_embedding1\.", "atom_type."),
    (r"^x_embedding2\.", "chirality."),
    (r"^gnns\.(\d+)\.edge_embedding1\.", r"convs.\1.bond_type."),
    (r"^gnns\.(\d+)\.edge_embedding2\.", r"convs.\1.bond_direction."),
    (r"^gnns\.(\d+)\.mlp\.", r"convs.\1.mlp."),
    (r"^batch_norms\.(\d+)\.", r"norms.\1."),
)


def _unwrap(saved: Any, where: str) -> dict[str, torch.Tensor]:
    state = saved["gnn"] if isinstance(saved, dict) and isinstance(saved.get("gnn"), dict) else saved
    if not isinstance(state, dict) or not all(isinstance(k, str) for k in state):
        raise ValueError(f"{where} holds a {type(state).__name__}, not a GIN state dict")
    for prefix in ("module.", "gnn."):
        if any(k.startswith(prefix) for k in state):
            state = {k[len(prefix):]: v for k, v in state.items() if k.startswith(prefix)}  # fmt: skip
    return state


def from_hu_layout(state: dict[str, torch.Tensor], where: str = "the checkpoint") -> dict[str, torch.Tensor]:
    """Hu et al.'s / GraphCL's ``GNN`` keys renamed to ours, the chirality table padded to our 4 rows."""
    out = {}
    for key, value in state.items():
        new = key
        for pattern, replacement in _RENAMES:
            new = re.sub(pattern, replacement, new)
        if new == key:
            raise ValueError(f"{where}: key {key!r} is not part of Hu et al.'s GIN (gnn_type gin); other gnn_types "
                             "(gcn, gat, graphsage) have no counterpart here")  # fmt: skip
        out[new] = value
    table = out["chirality.weight"]
    if table.shape[0] < NUM_CHIRALITY_TAG:
        warnings.warn(f"{where}: the chirality table has {table.shape[0]} rows (Hu et al.'s); CHI_OTHER gets the "
                      "CHI_UNSPECIFIED row", stacklevel=2)  # fmt: skip
        pad = table[:1].expand(NUM_CHIRALITY_TAG - table.shape[0], -1)
        out["chirality.weight"] = torch.cat([table, pad])
    return out


def molecule_gin_state(saved: Any, where: str = "the checkpoint") -> dict[str, torch.Tensor]:
    """Our :class:`MoleculeGIN` state dict from any accepted layout (see module doc)."""
    state = _unwrap(saved, where)
    if "atom_type.weight" in state:
        return state
    if "x_embedding1.weight" in state:
        return from_hu_layout(state, where)
    raise ValueError(f"{where} is not a molecule GIN: keys {sorted(state)[:4]} ...; expected ours (atom_type.*, "
                     "convs.N.*) or Hu et al.'s / GraphCL's (x_embedding1.*, gnns.N.*)")  # fmt: skip


def load_molecule_gin(path: str | Path) -> dict[str, torch.Tensor]:
    """Read a pre-trained molecule GIN file (any device it was saved on) as our state dict."""
    if saved_model.is_saved_model(path):
        return saved_model.read(path, ("graphcl_transfer",), "pre-trained molecule GIN (--input_model)").weights
    saved = atomic.load_torch(Path(path), "pre-trained molecule GIN (--input_model)")
    return molecule_gin_state(saved, str(path))
