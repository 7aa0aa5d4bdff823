"""Ranking metrics of the DCRec harness against hand-computed answers (ties, padding, exclusions, sampling)."""

from __future__ import annotations

import math

import pytest
import torch

from cl_plugins.integrations.evaluation.ranking import mean_metrics, popularity_negatives, ranking_metrics


def _one(scores: list[float], target: int, **kw) -> dict[str, float]:
    return mean_metrics(ranking_metrics(torch.tensor([scores]), torch.tensor([target]), **kw))


def test_position_one_behind_the_best_item():
    m = _one([0.95, 0.9, 0.5, 0.3], target=2)  # item 0 is padding: only item 1 beats the target
    assert m["hr@1"] == 0.0 and m["hr@5"] == 1.0 and m["ndcg@1"] == 0.0
    assert m["ndcg@5"] == pytest.approx(1 / math.log2(3))
    excluded = torch.tensor([[False, True, False, False]])
    m = _one([0.95, 0.9, 0.5, 0.3], target=2, exclude=excluded)
    assert m["hr@1"] == 1.0 and m["ndcg@10"] == 1.0


def test_ties_count_in_expectation():
    m = _one([0.0, 0.5, 0.5, 0.5, 0.1], target=1)  # two other items tie with the target
    assert m["hr@1"] == pytest.approx(1 / 3)
    assert m["hr@5"] == 1.0
    assert m["ndcg@5"] == pytest.approx((1 + 1 / math.log2(3) + 1 / math.log2(4)) / 3)
    constant = _one([0.0] * 11, target=4)  # ten candidates, all tied: chance level
    assert constant["hr@1"] == pytest.approx(0.1) and constant["hr@5"] == pytest.approx(0.5)
    assert constant["hr@10"] == pytest.approx(1.0)


def test_sampled_layout_and_batch_mean():
    scores = torch.tensor([[0.9, 0.1, 0.2], [0.1, 0.9, 0.2]])  # target in column 0, no padding column
    per_row = ranking_metrics(scores, torch.zeros(2, dtype=torch.long), ks=(1, 2), padding_idx=None)
    assert per_row["hr@1"].tolist() == [1.0, 0.0]
    assert per_row["ndcg@2"].tolist() == pytest.approx([1.0, 0.0])  # row 2's target is third
    assert mean_metrics(per_row)["hr@1"] == 0.5


def test_bad_inputs():
    with pytest.raises(ValueError, match="padding"):
        _one([0.1, 0.2], target=0)
    with pytest.raises(ValueError, match="NaN or inf"):
        _one([0.1, float("-inf"), 0.3], target=2)
    with pytest.raises(ValueError, match="target"):
        ranking_metrics(torch.zeros(1, 3), torch.tensor([3]))


def test_popularity_negatives_never_draw_target_padding_or_excluded():
    counts = torch.tensor([0, 5, 0, 1, 1, 3])
    gen = torch.Generator().manual_seed(0)
    exclude = torch.tensor([[0, 0, 0, 0, 0, 1], [0] * 6]).bool()
    neg = popularity_negatives(counts, torch.tensor([1, 5]), n=2, exclude=exclude, generator=gen)
    assert sorted(neg[0].tolist()) == [3, 4]  # 0 padding, 1 target, 2 never seen, 5 excluded
    assert 5 not in neg[1].tolist() and 0 not in neg[1].tolist() and len(set(neg[1].tolist())) == 2
    with pytest.raises(ValueError, match="only 2 items"):
        popularity_negatives(counts, torch.tensor([1]), n=3, exclude=torch.tensor([[0, 0, 0, 0, 0, 1]]).bool())
    draws = popularity_negatives(counts, torch.full((4000,), 4), n=1, generator=gen).flatten()
    freq = torch.bincount(draws, minlength=6).double() / 4000  # candidates 1, 3, 5 with counts 5, 1, 3
    assert freq[1] == pytest.approx(5 / 9, abs=0.03) and freq[5] == pytest.approx(3 / 9, abs=0.03)
