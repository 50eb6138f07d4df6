"""The intervals and tests lmgym reports results with: one home for every study and table.

* `wilson_interval`: a success rate's 95% interval (Wilson 1927);
* `mean_interval`: a mean's normal 95% interval; `t_interval`: its Student-t half-width (small n);
* `mcnemar_exact`: two agents' success on paired episodes (McNemar 1947, exact binomial form).
"""

from __future__ import annotations

import math
import statistics


def wilson_interval(successes: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion (Wilson 1927, JASA 22:209).

    ``(p + z²/2n ± z·sqrt(p(1-p)/n + z²/4n²)) / (1 + z²/n)``; unlike the normal approximation
    it stays inside [0, 1] and is informative at 0 or n successes. ``(0, 1)`` when n = 0.
    """
    if n == 0:
        return 0.0, 1.0
    p = successes / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    # At 0 or n successes the bound is exactly 0 or 1; floating point lands a hair off it.
    low = 0.0 if successes == 0 else centre - half
    high = 1.0 if successes == n else centre + half
    return low, high


def mean_interval(values: list[float]) -> tuple[float, float, float]:
    """Mean and its normal 95% interval (mean +- 1.96 standard errors; nan for one value)."""
    mean = statistics.fmean(values)
    half = 1.96 * statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else float("nan")
    return mean, mean - half, mean + half


def t_interval(values: list[float]) -> tuple[float, float]:
    """(mean, half-width of the 95% Student-t interval: t_{0.975, n-1} s / sqrt(n)); nan for n < 2.
    For a handful of episodes, where the normal interval of `mean_interval` is too narrow."""
    from scipy import stats as scipy_stats

    mean = statistics.fmean(values)
    if len(values) < 2:
        return mean, float("nan")
    return mean, float(scipy_stats.t.ppf(0.975, len(values) - 1) * statistics.stdev(values) / math.sqrt(len(values)))


def mcnemar_exact(only_first: int, only_second: int) -> float:
    """Two-sided exact McNemar p-value of two agents on paired episodes (McNemar 1947,
    Psychometrika 12:153): under the null the discordant pairs (won by one agent only) split
    Binomial(b + c, 1/2); p = min(1, 2 P(X <= min(b, c))). 1.0 with no discordant pair."""
    n = only_first + only_second
    tail = sum(math.comb(n, k) for k in range(min(only_first, only_second) + 1)) / 2 ** n
    return min(1.0, 2 * tail)
