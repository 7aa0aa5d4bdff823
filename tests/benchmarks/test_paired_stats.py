"""The paired-statistics helper of the results scripts, against hand-computed intervals."""

from __future__ import annotations

import math

import pytest

from benchmarks.paired_stats import mean_interval, paired, paired_by_key


def test_t_interval_by_hand() -> None:
    # differences 1, 2, 3: mean 2, sample sd 1, t(0.975, 2) = 4.302653, half width 4.302653 / sqrt(3) = 2.484138
    d = paired([11.0, 12.0, 13.0], [10.0, 10.0, 10.0])
    assert d.mean == 2.0 and d.wins == 3 and d.n == 3
    assert d.low == pytest.approx(2 - 2.484138, abs=1e-6) and d.high == pytest.approx(2 + 2.484138, abs=1e-6)
    assert d.mark() == "no detectable difference"  # the interval reaches below 0


def test_marks_follow_the_interval() -> None:
    assert paired([2.0, 2.1, 1.9, 2.0], [1.0, 1.0, 1.0, 1.0]).mark() == "better"
    assert paired([1.0, 1.0, 1.0, 1.0], [2.0, 2.1, 1.9, 2.0]).mark() == "worse"
    assert paired([1.0], [0.0]).mark() == "too few runs" and math.isnan(paired([1.0], [0.0]).low)


def test_pairing_is_by_seed_not_by_sorting() -> None:
    # unpaired, these two samples overlap completely; paired, a wins every seed by exactly 0.5
    a, b = [70.5, 60.5, 80.5], [70.0, 60.0, 80.0]
    d = paired(a, b)
    assert d.mean == 0.5 and d.low == pytest.approx(0.5) and d.high == pytest.approx(0.5) and d.mark() == "better"
    assert paired_by_key({0: 70.5, 1: 60.5, 7: 1.0}, {1: 60.0, 0: 70.0}).mean == 0.5  # seed 7 has no partner


def test_bootstrap_interval_of_a_constant_and_its_coverage() -> None:
    i = mean_interval([3.0] * 5, method="bootstrap")
    assert (i.low, i.high) == (3.0, 3.0)
    i = mean_interval([0.0, 1.0], method="bootstrap", n_boot=20_000)
    # resampled means of two points: 0 (1/4), 0.5 (1/2), 1 (1/4): the 2.5% / 97.5% quantiles are 0 and 1
    assert (i.low, i.high) == (0.0, 1.0)


def test_bad_input_is_refused() -> None:
    with pytest.raises(ValueError, match="one to one"):
        paired([1.0, 2.0], [1.0])
    with pytest.raises(ValueError, match="finite"):
        mean_interval([1.0, float("nan")])
    with pytest.raises(ValueError, match="method"):
        mean_interval([1.0, 2.0], method="z")


def test_a_bound_that_rounds_to_zero_is_printed_with_more_digits() -> None:
    from benchmarks.paired_stats import Interval

    assert Interval(0.8, 0.0001, 1.5999, 5).text() == "+0.8000 [+0.0001, +1.5999] (n 5)"
    assert Interval(0.8, 0.25, 1.5, 5).text() == "+0.80 [+0.25, +1.50] (n 5)"


def test_step_cost_ratio_is_the_median_of_per_round_ratios() -> None:
    from benchmarks.dcrec_step_cost import summarise

    # rounds: infonce 1, 2, 4 s; macl 1.5, 2, 4.4 s -> ratios 1.5, 1.0, 1.1 -> median 1.1, paired by round (the
    # ratio of the medians, 2 / 2, would be 1.0)
    summary = summarise({"infonce": [1.0, 2.0, 4.0], "macl": [1.5, 2.0, 4.4]})
    assert summary["macl"]["seconds_per_step"] == 2.0 and abs(summary["macl"]["ratio"] - 1.1) < 1e-12
    assert summary["infonce"]["ratio"] == 1.0
