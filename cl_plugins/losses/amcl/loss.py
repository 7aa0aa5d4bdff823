"""AMCL: adaptive multi-head contrastive learning, in a form that learns and in the paper's forms.

C projection heads replace the host's projection head: each maps backbone features to z^c, and the
loss sums the heads. What differs between the forms is where the temperatures live and how the
negatives enter (s = cosine similarity, Omega(tau) = (d'/2) log tau + 1/tau, d' = ``proj_dim``):

``form="anchor"`` (default, ours): one temperature per anchor and head, tau_i^c = tau * r^tanh(g(unit(z_i^c))),
log-sum-exp with the positive in the denominator (appendix Eq. 9)::

    L_i^c = -s_ip / tau_i + log sum_{j in {p} U negatives} exp(s_ij / tau_i)

With one temperature per row, beta * Omega(tau_i) shifts every logit of the row alike and cancels: the
form has no beta. The loss is >= 0, the temperatures cannot tell the positive from a negative (a
temperature blind to the candidate cannot lower the loss below each anchor's best constant), and
the network reads L2-normalised projections (scaling them changes nothing). It starts at the host's
InfoNCE (tau_i = tau) and stays within [tau / r, tau * r].

The paper's forms (each warns when built: its temperatures alone lower the loss, see
``docs/strategies.md``), with the pair logit l_ij = s_ij / tau_ij - beta * Omega(tau_ij):

* ``form="eq2.1"``, the README table's Eq. 2.1: L_i = -l_ip + l_in*, n* = argmax_n s_in, per-pair
  tau_ij = eta + iota * sigmoid(MLP([z_i; z_j])) on raw projections (the 2024 official snapshot).
* ``form="mle"``, appendix Eq. 7 (the MLE Eq. 2.1 approximates): L_i = -l_ip + LSE_n l_in, same temperatures.
  ``decoupled=False`` puts the positive into the max / LSE (Eq. 2.4 / Eq. 9).
* ``form="topk"``, the authors' current code (LeiWangR/cl ``AMCLNTXentLoss``): tau_ij = eta + iota *
  sigmoid(-phi(unit(z_i)) . phi(unit(z_j))), and over the k most similar negatives K_i::

      L_i = -s_ip / tau_ip + mean_{k in K_i} s_ik / tau_ik + beta * Omega(tau_ip)
            - beta * sum_{k in K_i} (log tau_ik + 1 / tau_ik)

In the paper's notation eta is the floor of the temperatures and iota their span.

Paper: Wang, Koniusz, Gedeon, Zheng, "Adaptive Multi-head Contrastive Learning" (ECCV 2024).

Example::

    loss_fn = AMCLLoss(dim=512, heads=3, proj_dim=128, tau=0.2)   # backbone features in, heads inside
    loss = loss_fn(h1, h2)                                        # h1, h2: [N, 512]
    opt = torch.optim.SGD(list(backbone.parameters()) + list(loss_fn.parameters()), lr=0.06)
"""

from __future__ import annotations

import functools
import math
import operator
import warnings
from typing import Any, ClassVar

import torch
from torch import nn

from ...base import ContrastiveLoss
from ...extension import LazyLogits, Pairs, softplus
from ...kernels.autocast import autocast_off
from ...kernels.contract import UNIT_NORM_SLACK, PairNetwork
from ...kernels.dispatch import choose
from ...layouts import PairBlock
from ...registry import register_loss
from ...validation import (
    check_choice,
    check_feature_dim,
    check_flag,
    check_pair,
    check_range,
    check_temperature,
    checked_rows,
    looks_like_embeddings,
)
from .temperatures import AnchorTemperature, BilinearTemperature, PairTemperatureMLP, rowwise_scores

_PAPER_BOX = dict(eta=1e-5, iota=2.0 - 1e-5)  # the paper's search range for the floor and span, tau in [1e-5, 2]
# the 2024 snapshot's per-pair MLP, one per head, beta 0.1, negatives only in the denominator
_SNAPSHOT = dict(temperatures="pair", decoupled=True, share_temperature_mlp=False, beta=0.1, **_PAPER_BOX)
#: per form: where its temperatures live, its negatives, and its defaults (the paper's forms: the
#: official code's values, the 2024 snapshot for eq2.1 / mle, the current code's run config for topk)
FORMS: dict[str, dict[str, Any]] = {
    "anchor": dict(temperatures="anchor", negatives="lse", decoupled=False, share_temperature_mlp=True),
    "eq2.1": dict(_SNAPSHOT, negatives="max"),
    "mle": dict(_SNAPSHOT, negatives="lse"),
    "topk": dict(temperatures="bilinear", negatives="topk", decoupled=True, share_temperature_mlp=True, beta=1e-4,
                 topk=100, **_PAPER_BOX),  # fmt: skip
}
#: the forms whose temperatures can lower the loss by themselves (they warn when built)
DEGENERATE_FORMS = ("eq2.1", "mle", "topk")


def amcl_regulariser(tau: torch.Tensor, proj_dim: int) -> torch.Tensor:
    """Omega(tau) = (d'/2) log tau + 1/tau."""
    return 0.5 * proj_dim * torch.log(tau) + 1.0 / tau


def _check_int(name: str, value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    return value


@register_loss("amcl")
class AMCLLoss(ContrastiveLoss):
    """Multi-head contrastive loss with learned temperatures; C heads on the backbone features.

    Args:
        dim: backbone feature dimension (input of the heads).
        heads: number of projection heads C (default: 3).
        proj_dim: head output dimension d' (default: 128).
        hidden: hidden width of each projection head (default: 512).
        form: ``"anchor"`` (ours, learns), or the paper's ``"eq2.1"``, ``"mle"``, ``"topk"`` (default: "anchor").
        tau: ``anchor``: the centre of the temperatures and their value at initialisation, the host's τ
            (default: 0.2).
        tau_range: ``anchor``: the factor r that bounds them, [tau / r, tau * r] (default: 2.0).
        temperature_hidden: hidden width of the temperature network (default: 128).
        eta: paper's forms: the floor of the temperatures (default: the form's, 1e-5).
        iota: paper's forms: the span of the temperatures (default: the form's, 2 - 1e-5).
        beta: paper's forms: the weight of Omega (default: 0.1; 1e-4 for ``topk``).
        topk: ``topk``: negatives kept per anchor (default: 100).
        share_temperature_mlp: one temperature network for all heads (default: True; False for
            ``eq2.1`` / ``mle``, as the 2024 snapshot).
        chunk_elements: hidden values evaluated at once by the ``mle`` form (memory knob).
        **kwargs: common options of :class:`~cl_plugins.base.ContrastiveLoss`; layouts
            ``simclr`` / ``grace`` / ``cross_view``.

    Shapes:
        h1, h2: [N, dim] backbone features of the two views -> scalar (or [A]).
    """

    feature_dim_arg = "dim"  # its heads are built on the embeddings
    #: its C heads stand in for the host's projection head: hosts hand it the backbone features
    replaces_projection_head: ClassVar[bool] = True
    layouts = ("simclr", "grace", "cross_view")  # a queue holds keys its heads never projected

    @classmethod
    def host_temperature(cls, tau: float) -> dict[str, Any]:
        return {"tau": tau}  # the centre of the default form's temperatures; the paper's forms ignore it

    def __init__(
        self,
        dim: int,
        heads: int = 3,
        proj_dim: int = 128,
        hidden: int = 512,
        form: str = "anchor",
        tau: float = 0.2,
        tau_range: float = 2.0,
        temperature_hidden: int = 128,
        eta: float | None = None,
        iota: float | None = None,
        beta: float | None = None,
        topk: int | None = None,
        share_temperature_mlp: bool | None = None,
        chunk_elements: int = 1 << 21,
        **kwargs: Any,
    ) -> None:
        self.form = check_choice("form", form, tuple(FORMS))
        share_temperature_mlp = check_flag("share_temperature_mlp", share_temperature_mlp, optional=True)
        given = dict(eta=eta, iota=iota, beta=beta, topk=topk, share_temperature_mlp=share_temperature_mlp)
        spec = {**FORMS[self.form], **{k: v for k, v in given.items() if v is not None}}
        kwargs.setdefault("decoupled", spec["decoupled"])
        super().__init__(**kwargs)
        if self.label_policy is not None and self.label_policy.makes_positives:
            raise ValueError("amcl does not take labels as positives yet: its kernels give a temperature to one "
                             "positive per anchor; label_policy='exclude' works")  # fmt: skip
        self._check_form_args(eta=eta, iota=iota, beta=beta, topk=topk)
        sizes = dict(dim=dim, heads=heads, proj_dim=proj_dim, hidden=hidden, temperature_hidden=temperature_hidden)
        for name, value in {**sizes, "chunk_elements": chunk_elements}.items():
            _check_int(name, value)
        self.temperatures, self.negatives = spec["temperatures"], spec["negatives"]
        self.tau = check_temperature("tau", tau)
        self.tau_range = check_range("tau_range", tau_range, 1.0, 1e3)
        if self.form != "anchor":
            self.eta = check_temperature("eta", spec["eta"])
            self.iota = check_temperature("iota", spec["iota"])
            self.beta = check_range("beta", spec["beta"], 0.0, math.inf)
        self.topk = _check_int("topk", spec["topk"]) if self.form == "topk" else 0
        self.dim, self.proj_dim, self.chunk_elements = dim, proj_dim, chunk_elements
        self.heads = nn.ModuleList(
            nn.Sequential(nn.Linear(dim, hidden), nn.ReLU(inplace=True), nn.Linear(hidden, proj_dim))
            for _ in range(heads)
        )
        n_nets = 1 if spec["share_temperature_mlp"] else heads
        self.temperature_nets = nn.ModuleList(self._temperature_net(temperature_hidden) for _ in range(n_nets))
        if self.form in DEGENERATE_FORMS:
            warnings.warn(
                f"amcl form={self.form!r} is the paper's: its per-pair temperatures alone lower the loss (positives "
                "cooled, negatives warmed) and training can collapse; form='anchor' learns (docs/strategies.md, AMCL)",
                UserWarning,
                stacklevel=3,
            )

    def _check_form_args(self, **given: Any) -> None:
        if self.form == "topk" and not self.decoupled:
            raise ValueError("amcl form='topk' keeps the positive out of the denominator: drop decoupled=False")
        if self.form == "anchor":
            wrong = [k for k, v in given.items() if v is not None]
            why = "its beta * Omega cancels in each row and its temperatures are set by tau and tau_range"
        else:
            wrong = ["topk"] if given["topk"] is not None and self.form != "topk" else []
            why = "topk belongs to form='topk'"
        if wrong:
            raise ValueError(f"amcl form={self.form!r} has no {', '.join(wrong)}: {why}")

    def _temperature_net(self, hidden: int) -> nn.Module:
        if self.temperatures == "anchor":
            return AnchorTemperature(self.proj_dim, hidden, self.tau, self.tau_range)
        if self.temperatures == "pair":
            return PairTemperatureMLP(self.proj_dim, hidden, self.eta, self.iota)
        return BilinearTemperature(self.proj_dim, hidden, self.eta, self.iota)

    def temperature_net(self, head: int) -> nn.Module:
        return self.temperature_nets[head % len(self.temperature_nets)]

    # ------------------------------------------------------------------ forward
    def prepare_blocks(self, z1: torch.Tensor, z2: torch.Tensor, *, queue: torch.Tensor | None,
                       hard_negatives: torch.Tensor | None, labels: torch.Tensor | None,
                       queue_labels: torch.Tensor | None) -> list[Any]:  # fmt: skip
        """(head, its blocks) per head: ``z1``, ``z2`` are backbone features [N, dim], which each head projects;
        ``labels`` [N] (and ``queue_labels``) with ``label_policy="exclude"``, as for every strategy."""
        if self.check_inputs:
            check_pair(z1, z2, ("h1", "h2"), rows=False)
            # its heads' biases map a zero row somewhere
            z1, z2 = (checked_rows(z, name, True, self.input_checks) for z, name in ((z1, "h1"), (z2, "h2")))
            check_feature_dim(z1, self.dim, "h1", f"dim={self.dim}")
            if hard_negatives is not None:
                check_feature_dim(hard_negatives, self.dim, "hard_negatives", f"dim={self.dim}")
        if looks_like_embeddings(hard_negatives):
            # checked here, before the heads, as the layout checks the other strategies' (always)
            hard_negatives = checked_rows(hard_negatives, "hard_negatives", True, self.input_checks)
        # half-precision features from a half-precision backbone meet float32 heads (a GPU check finding);
        # under autocast the heads' products still run in half precision
        dtype = next(self.heads.parameters()).dtype
        z1, z2 = z1.to(dtype), z2.to(dtype)
        hard_negatives = None if hard_negatives is None else hard_negatives.to(dtype)
        per_head = []
        for c, head in enumerate(self.heads):
            hard = None if hard_negatives is None else head(hard_negatives)  # projected like the views
            per_head.append((c, self.blocks(head(z1), head(z2), queue=queue, hard_negatives=hard, labels=labels,
                                            queue_labels=queue_labels, rows_checked=True)))  # fmt: skip
        return per_head

    def blocks_loss(self, prepared: list[Any], z1: torch.Tensor, z2: torch.Tensor) -> torch.Tensor:
        """The heads' per-anchor losses [A], summed."""
        losses = [torch.cat([self._head_block_loss(c, b) for b in blocks]) for c, blocks in prepared]
        return functools.reduce(operator.add, losses)

    def from_similarity(
        self, sim: torch.Tensor, pos_mask: torch.Tensor, neg_mask: torch.Tensor | None = None, *, average: str = "row"
    ) -> torch.Tensor:
        raise TypeError(
            "amcl's temperatures are a function of each head's projections, which a similarity matrix "
            "does not carry; call loss_fn(h1, h2) with backbone features instead"
        )

    def _head_block_loss(self, head: int, block: PairBlock) -> torch.Tensor:
        pairs = Pairs.from_block(block)
        net = self.temperature_net(head)
        with autocast_off(block.anchors.device.type):
            if self.temperatures == "anchor":
                return self._anchor_loss(net, block, pairs)
            if self.temperatures == "bilinear":
                return self._topk_loss(net, block, pairs)
            return self._pair_loss(net, block, pairs)

    def _anchor_loss(self, net: AnchorTemperature, block: PairBlock, pairs: Pairs) -> torch.Tensor:
        lazy = block.lazy()
        tau = net(block.anchors).to(lazy.dtype)
        kernel = choose(self.kernel, block.anchors, block.size, health=self.kernel_health)
        if kernel.name != "dense":  # s_ij / tau_i = (a_i / tau_i) . c_j: the scalar kernel with rescaled anchors
            largest = UNIT_NORM_SLACK / net.floor  # the unit rows' cosines over the lowest temperature
            anchors = lazy.anchors / tau[:, None]
            logits: torch.Tensor | LazyLogits = LazyLogits(anchors, lazy.candidates, lazy.positives, kernel=kernel,
                                                           labels=lazy.labels, largest=largest)  # fmt: skip
        else:
            logits = block.cosine() / tau[:, None]
        d = pairs.d(logits)
        with torch.no_grad():
            self.record_tau(tau)
            self.record(alignment=lazy.positive(pairs.cols).mean())
            self.record_d(d)
        return d if self.decoupled else softplus(d)

    def _topk_loss(self, net: BilinearTemperature, block: PairBlock, pairs: Pairs) -> torch.Tensor:
        sim = block.cosine()
        fa, fc = net.features(block.anchors), net.features(block.candidates)
        s_pos = pairs.positive(sim)
        tau_pos = net.bound((fa * fc.index_select(0, pairs.cols)).sum(dim=1))
        negatives = pairs.negative_logits(sim)
        # with labels a row may have fewer negatives than k: its -inf picks are left out of its mean
        k = min(self.topk, int(pairs.negatives_per_row().max()))
        s_top, idx = negatives.topk(k, dim=1)
        picked = torch.isfinite(s_top)
        tau_top = net.bound((fa[:, None, :] * fc[idx]).sum(dim=-1))
        reg_top = (torch.log(tau_top) + 1.0 / tau_top).masked_fill(~picked, 0.0).sum(dim=1)
        loss = -s_pos / tau_pos + (s_top / tau_top).masked_fill(~picked, 0.0).sum(dim=1) / picked.sum(dim=1)
        loss = loss + self.beta * (amcl_regulariser(tau_pos, self.proj_dim) - reg_top)
        with torch.no_grad():
            both = torch.cat([tau_pos, tau_top[picked]])
            self.record(alignment=s_pos.mean(), tau_pos_mean=tau_pos.mean(), tau_neg_mean=tau_top.mean(),
                        tau_min=both.min(), tau_max=both.max())  # fmt: skip
        return loss

    def _pair_loss(self, mlp: PairTemperatureMLP, block: PairBlock, pairs: Pairs) -> torch.Tensor:
        lazy = block.lazy()  # L2-normalised anchors / candidates, float32 or wider
        a_n, c_n = lazy.anchors, lazy.candidates
        pa, pb = mlp.split(block.anchors, block.candidates)
        w2 = mlp.second.weight.to(pa.dtype)[0]
        s_pos = lazy.positive(pairs.cols)
        tau_pos = mlp.bound(rowwise_scores(pa, pb.index_select(0, pairs.cols), w2))
        l_pos = s_pos / tau_pos - self.beta * amcl_regulariser(tau_pos, self.proj_dim)
        if self.negatives == "lse":
            exclude = pairs.exclude_cols if self.decoupled else pairs.exclude_cols[:, 1:]
            n_terms = pairs.negative_count() + (0 if self.decoupled else pairs.n_rows)

            def on_stats(total: torch.Tensor, low: torch.Tensor, high: torch.Tensor) -> None:
                self.record(tau_neg_mean=total / n_terms, tau_min=low, tau_max=high)

            # same-label candidates are no terms; the positive stays one unless decoupled
            network = PairNetwork(pa, pb, w2, mlp.second.bias.to(pa.dtype)[0], self.eta, self.iota, self.beta,
                                  self.proj_dim, self.chunk_elements, None if self.decoupled else pairs.cols,
                                  on_stats)  # fmt: skip
            lse = lazy.with_network(network).negative_lse(exclude if exclude.shape[1] else None)[0]
            loss = lse - l_pos
        else:
            # max: only the hardest candidate by raw similarity needs a temperature
            with torch.no_grad():
                masked = pairs.negative_logits(a_n @ c_n.T)
                if not self.decoupled:
                    masked.scatter_(1, pairs.cols[:, None], s_pos.detach()[:, None])
                hard = masked.argmax(dim=1)
            s_hard = (a_n * c_n.index_select(0, hard)).sum(dim=1)
            tau_hard = mlp.bound(rowwise_scores(pa, pb.index_select(0, hard), w2))
            l_hard = s_hard / tau_hard - self.beta * amcl_regulariser(tau_hard, self.proj_dim)
            with torch.no_grad():
                both = torch.cat([tau_pos, tau_hard])
                self.record(tau_neg_mean=tau_hard.mean(), tau_min=both.min(), tau_max=both.max())
            loss = l_hard - l_pos
        with torch.no_grad():
            self.record(alignment=s_pos.mean(), tau_pos_mean=tau_pos.mean())
        return loss

    def extra_repr(self) -> str:
        if self.form == "anchor":
            own = f"tau={self.tau}, tau_range={self.tau_range}"
        else:
            own = f"eta={self.eta}, iota={self.iota}, beta={self.beta}" + (f", topk={self.topk}" if self.topk else "")
        return f"form={self.form!r}, heads={len(self.heads)}, proj_dim={self.proj_dim}, {own}, " + super().extra_repr()


__all__ = ["AMCLLoss", "DEGENERATE_FORMS", "FORMS", "amcl_regulariser"]
