"""Independent, loop-based float64 references of every strategy, straight from the papers.

Nothing here imports cl_plugins' internals: pairs are enumerated by hand per layout and each
anchor's loss is written as in the paper (explicit exp / log, softmax probabilities, 1 - P).
Only meant for tiny inputs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch


def cos(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return (a * b).sum() / (a.norm() * b.norm())


@dataclass
class Anchor:
    s_pos: torch.Tensor
    s_neg: list[torch.Tensor]
    # index into s_neg of this anchor's own hard negative (SimCSE bias), or None
    hard: int | None = None
    # raw vectors for AMCL's temperature network
    a: torch.Tensor | None = None
    p: torch.Tensor | None = None
    negs: list[torch.Tensor] = field(default_factory=list)


def enumerate_layout(layout, z1, z2, symmetric=False, queue=None, hard=None, labels=None,
                     queue_labels=None) -> list[list[Anchor]]:  # fmt: skip
    """Anchors grouped by direction (one group, or two when symmetric); with ``labels`` (and ``queue_labels``),
    a candidate of the anchor's label is no negative (``label_policy="exclude"``)."""
    if labels is not None:
        return _without_same_label(layout, z1, z2, symmetric, queue, labels, queue_labels)
    n = z1.shape[0]
    groups: list[list[Anchor]] = []
    if layout in ("simclr", "grace"):
        views = [z1, z2]
        group = []
        for v in (0, 1):
            for i in range(n):
                a, p = views[v][i], views[1 - v][i]
                negs = [views[w][j] for w in (0, 1) for j in range(n) if j != i]
                group.append(Anchor(cos(a, p), [cos(a, x) for x in negs], a=a, p=p, negs=negs))
        groups.append(group)
    elif layout == "cross_view":
        directions = [(z1, z2), (z2, z1)] if symmetric else [(z1, z2)]
        for anchors, keys in directions:
            group = []
            for i in range(n):
                negs = [keys[j] for j in range(n) if j != i]
                hard_idx = None
                if hard is not None:
                    hard_idx = len(negs) + i
                    negs = negs + [hard[j] for j in range(n)]
                a = anchors[i]
                group.append(Anchor(cos(a, keys[i]), [cos(a, x) for x in negs], hard_idx, a, keys[i], negs))
            groups.append(group)
    elif layout == "queue":
        directions = [(z1, z2), (z2, z1)] if symmetric else [(z1, z2)]
        for q, k in directions:
            groups.append([Anchor(cos(q[i], k[i]), [cos(q[i], x) for x in queue]) for i in range(n)])
    else:
        raise ValueError(layout)
    return groups


def _without_same_label(layout, z1, z2, symmetric, queue, labels, queue_labels) -> list[list[Anchor]]:
    """``enumerate_layout`` written again for labelled batches: loops over pairs, keeping a negative only when its
    label differs from the anchor's."""
    n, y = z1.shape[0], [int(v) for v in labels]
    if layout in ("simclr", "grace"):
        views, group = [z1, z2], []
        for v in (0, 1):
            for i in range(n):
                a, p = views[v][i], views[1 - v][i]
                negs = [views[w][j] for w in (0, 1) for j in range(n) if y[j] != y[i]]
                group.append(Anchor(cos(a, p), [cos(a, x) for x in negs], a=a, p=p, negs=negs))
        return [group]
    directions = [(z1, z2), (z2, z1)] if symmetric else [(z1, z2)]
    if layout == "cross_view":
        return [[Anchor(cos(a[i], k[i]), [cos(a[i], k[j]) for j in range(n) if y[j] != y[i]], a=a[i], p=k[i],
                        negs=[k[j] for j in range(n) if y[j] != y[i]]) for i in range(n)]
                for a, k in directions]  # fmt: skip
    stored = [int(v) for v in queue_labels]
    return [[Anchor(cos(q[i], k[i]), [cos(q[i], x) for x, lab in zip(queue, stored) if lab != y[i]])
             for i in range(n)] for q, k in directions]  # fmt: skip


@dataclass
class LabelledAnchor:
    """One anchor when labels make positives: the cosine with its own positive, with the other candidates of its
    label (in candidate order) and with the candidates of other labels."""

    own: torch.Tensor
    others: list[torch.Tensor]
    negatives: list[torch.Tensor]

    @property
    def positives(self) -> list[torch.Tensor]:
        return [self.own, *self.others]


def labelled_anchors(layout, z1, z2, symmetric=False, queue=None, labels=None,
                     queue_labels=None) -> list[list[LabelledAnchor]]:  # fmt: skip
    """Per direction, every anchor's positives and negatives under ``label_policy="positives_out"``, by loops over the
    candidates of each layout (itself and its own positive are no other positive)."""
    n, y = z1.shape[0], [int(v) for v in labels]
    if layout in ("simclr", "grace"):
        cands, cand_y, group = [*z1, *z2], y + y, []
        for a in range(2 * n):
            own = (a + n) % (2 * n)
            rest = [j for j in range(2 * n) if j not in (a, own)]
            group.append(LabelledAnchor(cos(cands[a], cands[own]), [cos(cands[a], cands[j]) for j in rest if
                                        cand_y[j] == y[a % n]], [cos(cands[a], cands[j]) for j in rest if
                                        cand_y[j] != y[a % n]]))  # fmt: skip
        return [group]
    groups = []
    for anchors, keys in [(z1, z2), (z2, z1)] if symmetric else [(z1, z2)]:
        if layout == "cross_view":
            cands, cand_y = [(j, k) for j, k in enumerate(keys)], y
        else:
            cands, cand_y = [(None, k) for k in queue], [int(v) for v in queue_labels]
        group = []
        for i in range(n):
            rest = [(cos(anchors[i], k), lab) for (j, k), lab in zip(cands, cand_y) if j != i]
            group.append(LabelledAnchor(cos(anchors[i], keys[i]), [c for c, lab in rest if lab == y[i]],
                                        [c for c, lab in rest if lab != y[i]]))  # fmt: skip
        groups.append(group)
    return groups


def label_pair_groups(groups: list[list[LabelledAnchor]], form: str) -> tuple[list[list[Anchor]], list[list[int]]]:
    """Each positive pair of ``groups`` as an :class:`Anchor` that the strategies' references take, and the row of
    each pair: "pair" against the other labels only, "out" against every other candidate (the other positives
    too). Per direction the anchors' own positives first, then the others anchor by anchor."""
    pairs, rows = [], []
    for group in groups:
        listed = [(a, an.own, 0) for a, an in enumerate(group)]
        listed += [(a, s, k + 1) for a, an in enumerate(group) for k, s in enumerate(an.others)]
        out = []
        for a, s, k in listed:
            others = [x for j, x in enumerate(group[a].positives) if j != k]
            out.append(Anchor(s, group[a].negatives + (others if form == "out" else [])))
        pairs.append(out)
        rows.append([a for a, _, _ in listed])
    return pairs, rows


def row_means(values: torch.Tensor, rows: list[list[int]]) -> torch.Tensor:
    """Per direction, the mean of each row's pair values (Khosla's 1 / |P(a)|)."""
    out, start = [], 0
    for group_rows in rows:
        part = values[start : start + len(group_rows)]
        for a in range(max(group_rows) + 1):
            out.append(torch.stack([v for v, r in zip(part, group_rows) if r == a]).mean())
        start += len(group_rows)
    return torch.stack(out)


def supcon_in(groups: list[list[LabelledAnchor]], logit) -> torch.Tensor:
    """Khosla et al.'s L_in per anchor: -log((1/|P|) sum_P e^l / sum_{P+N} e^l) for logits ``logit(s)``."""
    losses = []
    for group in groups:
        for an in group:
            pos = torch.stack([logit(s) for s in an.positives])
            every = torch.cat([pos, torch.stack([logit(s) for s in an.negatives])])
            losses.append(torch.logsumexp(every, 0) - torch.logsumexp(pos, 0) + math.log(len(pos)))
    return torch.stack(losses)


def dclw(groups, tau, sigma):
    """DCLW: DCL with the positive term weighted by w = 2 - P softmax(s_pos / sigma) over each group's pairs
    (the weights carry no gradient)."""
    losses = []
    for group in groups:
        s = torch.stack([an.s_pos for an in group]).detach()
        w = 2 - len(group) * torch.softmax(s / sigma, dim=0)
        for an, wa in zip(group, w):
            losses.append(-wa * an.s_pos / tau + torch.logsumexp(torch.stack(an.s_neg) / tau, dim=0))
    return torch.stack(losses)


def _log_softmax_pos(pos_logit, neg_logits, decoupled=False):
    den = sum(torch.exp(x) for x in neg_logits)
    if not decoupled:
        den = den + torch.exp(pos_logit)
    return pos_logit - torch.log(den)


def infonce(groups, tau, decoupled=False, hard_weight=0.0):
    losses = []
    for group in groups:
        for an in group:
            negs = [s / tau + (hard_weight if k == an.hard else 0.0) for k, s in enumerate(an.s_neg)]
            losses.append(-_log_softmax_pos(an.s_pos / tau, negs, decoupled))
    return torch.stack(losses)


def _neg_log_p_and_w(pos_logit, neg_logits):
    """-log P_pos = log(1 + sum_n exp(l_n - l_p)); W = sum_n P_n (MACL's definition of W)."""
    ratios = [torch.exp(x - pos_logit) for x in neg_logits]
    total = sum(ratios)
    return torch.log1p(total), total / (1 + total)


def macl(groups, tau0, alpha, a0, reweight=True, min_tau=1e-2):
    """MACL Eq. (7) and (11), per group; A over the group's positives; V = sg(1 / W)."""
    losses = []
    for group in groups:
        A = torch.stack([an.s_pos for an in group]).detach().mean()
        tau = max(tau0 * (1 + alpha * (A - a0)), torch.tensor(min_tau, dtype=A.dtype))
        for an in group:
            nll, W = _neg_log_p_and_w(an.s_pos / tau, [s / tau for s in an.s_neg])
            V = (1 / W).detach() if reweight else 1.0
            losses.append(V * nll)
    return torch.stack(losses)


def macl_official(pos, neg, t_0, a, A_0):
    """MACL's Algorithm 1 verbatim (pos [N,1], neg [N,K])."""
    A = torch.mean(pos.detach())
    t = t_0 * (1 + a * (A - A_0))
    logits = torch.cat([pos, neg], dim=1)
    P = torch.softmax(logits / t, dim=1)[:, 0]
    V = 1 / (1 - P)
    return -V.detach() * torch.log(P)


def dual_temperature(groups, tau_a, tau_b):
    """-sg(W(tau_b) / W(tau_a)) log P(tau_a), W(tau) = sum_n P_n(tau)."""
    losses = []
    for group in groups:
        for an in group:
            nll_a, W_a = _neg_log_p_and_w(an.s_pos / tau_a, [s / tau_a for s in an.s_neg])
            _, W_b = _neg_log_p_and_w(an.s_pos / tau_b, [s / tau_b for s in an.s_neg])
            losses.append((W_b / W_a).detach() * nll_a)
    return torch.stack(losses)


def temperature_free(groups, eps=1e-6):
    def logit(s):
        s = torch.clamp(s, -1 + eps, 1 - eps)
        return torch.log((1 + s) / (1 - s))

    losses = []
    for group in groups:
        for an in group:
            losses.append(-_log_softmax_pos(logit(an.s_pos), [logit(s) for s in an.s_neg]))
    return torch.stack(losses)


def dystress_tau(s: float, tmin: float, tmax: float, profile="cosine", shift=0.0, k=1.0) -> float:
    d = tmax - tmin
    if profile == "cosine":
        return tmin + 0.5 * d * (1 + math.cos(math.pi * (1 + s)))
    if profile == "shifted":  # Algorithm 2, literally
        if (shift <= 0 and s <= -shift) or (shift >= 0 and s >= -shift):
            return tmin + d / 2 * (1 + math.cos(math.pi / k * (shift + s)))
        return tmax
    if profile == "linear":
        return tmin + d * abs(s)
    if profile == "exponential":
        return tmin + d * (math.exp(abs(s)) - 1) / (math.e - 1)
    if profile == "monotone":
        return tmin + 0.5 * d * (1 - math.cos(math.pi * (1 + s) / 2))
    raise ValueError(profile)


def dystress(groups, tmin, tmax, profile="cosine", shift=0.0, k=1.0):
    losses = []
    for group in groups:
        for an in group:

            def logit(s):
                return s / dystress_tau(float(s.detach()), tmin, tmax, profile, shift, k)

            losses.append(-_log_softmax_pos(logit(an.s_pos), [logit(s) for s in an.s_neg]))
    return torch.stack(losses)


def flatnce(groups, tau):
    """FlatCLR: v = logsumexp((s_n - s_p)/tau); loss = exp(v - sg(v))."""
    losses = []
    for group in groups:
        for an in group:
            v = torch.log(sum(torch.exp((s - an.s_pos) / tau) for s in an.s_neg))
            losses.append(torch.exp(v - v.detach()))
    return torch.stack(losses)


def amcl(module, h1, h2, layout="simclr", decoupled=True, labels=None):
    """AMCL per head and anchor, each form written out pair by pair (temperature networks evaluated per pair);
    with ``labels``, the candidates of an anchor's label are no negatives."""
    per_head = []
    for c, head in enumerate(module.heads):
        net = module.temperature_nets[c % len(module.temperature_nets)]
        groups = enumerate_layout(layout, head(h1), head(h2), labels=labels)
        losses = [_amcl_anchor_loss(module, net, an, decoupled) for group in groups for an in group]
        per_head.append(torch.stack(losses))
    return torch.stack(per_head).sum(0)


def _unit(x):
    return x / x.norm()


def _amcl_anchor_loss(module, net, an, decoupled):
    def omega(t):
        return module.proj_dim / 2 * torch.log(t) + 1 / t

    if module.form == "anchor":
        u = net.second(torch.relu(net.first(_unit(an.a))))[0]
        t = module.tau * module.tau_range ** torch.tanh(u)
        pool = [s / t for s in an.s_neg] + ([] if decoupled else [an.s_pos / t])
        return -an.s_pos / t + torch.log(sum(torch.exp(x) for x in pool))
    if module.form == "topk":

        def tau(a, b):
            score = (net.phi(_unit(a)) * net.phi(_unit(b))).sum()
            return module.eta + module.iota / (1 + torch.exp(score))  # sigmoid(-score)

        top = sorted(zip(an.s_neg, an.negs), key=lambda t: -float(t[0].detach()))[: module.topk]
        taus = [tau(an.a, x) for _, x in top]
        t_pos = tau(an.a, an.p)
        out = -an.s_pos / t_pos + sum(s / t for (s, _), t in zip(top, taus)) / len(top)
        return out + module.beta * (omega(t_pos) - sum(torch.log(t) + 1 / t for t in taus))

    def logit(s, b):
        u = net.second(torch.relu(net.first(torch.cat([an.a, b]))))[0]
        t = module.eta + module.iota * torch.sigmoid(u)
        return s / t - module.beta * omega(t)

    pos = logit(an.s_pos, an.p)
    negs = [logit(s, x) for s, x in zip(an.s_neg, an.negs)]
    if module.negatives == "lse":
        pool = negs if decoupled else negs + [pos]
        return -pos + torch.log(sum(torch.exp(x) for x in pool))
    cands = list(zip(an.s_neg, negs)) + ([] if decoupled else [(an.s_pos, pos)])
    return -pos + max(cands, key=lambda t: float(t[0].detach()))[1]
