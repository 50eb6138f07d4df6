"""lmgym.stats against values computed by hand from the cited formulas."""

import math

import pytest

from lmgym.stats import mcnemar_exact, mean_interval, wilson_interval


def test_wilson_interval_at_zero_half_and_all_successes():
    # 0/10: upper bound z²/(n + z²) = 3.8416 / 13.8416
    assert wilson_interval(0, 10) == (0.0, pytest.approx(3.8416 / 13.8416))
    low, high = wilson_interval(5, 10)
    assert low == pytest.approx(1 - high) and high == pytest.approx((0.5 + 0.19208 + 1.96 * math.sqrt(0.025 + 0.009604)) / 1.38416)
    assert wilson_interval(10, 10)[1] == 1.0 and wilson_interval(0, 0) == (0.0, 1.0)


def test_mean_interval_is_the_mean_and_1_96_standard_errors():
    mean, low, high = mean_interval([1.0, 2.0, 3.0])
    assert mean == 2.0 and high - mean == pytest.approx(1.96 / math.sqrt(3)) and mean - low == pytest.approx(1.96 / math.sqrt(3))
    assert math.isnan(mean_interval([4.0])[1])


def test_mcnemar_exact_is_symmetric_and_one_without_discordant_pairs():
    assert mcnemar_exact(0, 0) == 1.0
    assert mcnemar_exact(2, 7) == mcnemar_exact(7, 2) == pytest.approx(2 * (1 + 9 + 36) / 512)
