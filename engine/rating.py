"""Match statistics: Elo from a score, its 95% interval, and the SPRT used to stop a match early.

Pure math on win/draw/loss counts (no I/O, no randomness), for ``noughts arena``.

- Elo uses the logistic model: a score ``s`` means ``elo = -400 * log10(1/s - 1)``.
- The interval is a normal approximation on the mean score, mapped through the logistic curve.
  Its variance is the trinomial one of a game (win 1, draw 1/2, loss 0; draws narrow it) for
  games played independently, and the pentanomial one of a game pair for pairs that play one
  opening with the colours swapped (``noughts arena``): the two games of a pair are correlated
  (the same opening favours the same colour in both), so counting them as independent games
  misstates the interval; the pair, with its five outcomes (0, 1/2, 1, 3/2, 2 points), is
  the independent unit (fishtest's pentanomial model, M. Van den Bergh, "Normalized Elo").
  Where every unit scored the same (no spread to estimate), the share of units that could
  score otherwise is bounded by Clopper & Pearson's exact interval instead
  (``unanimous_interval``); one unit alone has the whole range.
- The SPRT tests H0: elo = elo0 against H1: elo = elo1 with the generalized SPRT in its normal
  (Brownian) approximation, as fishtest does: ``LLR = N (s1 - s0) (2 s - s0 - s1) / (2 var)``
  (M. Van den Bergh, "A practical introduction to the GSPRT", fishtest's ``LLR_alt2``), and stops
  at Wald's bounds ``log(beta / (1 - alpha))`` and ``log((1 - beta) / alpha)`` (Wald 1945).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = [
    "Z95",
    "EloEstimate",
    "SprtResult",
    "elo_from_score",
    "elo_interval",
    "pentanomial_variance",
    "score_from_elo",
    "sprt",
    "sprt_bounds",
    "sprt_llr",
    "trinomial_variance",
    "unanimous_interval",
]

# Two-sided 95% quantile of the standard normal distribution.
Z95 = 1.959963984540054
# fishtest's regularization: an empty outcome class counts as this many games, so that a
# one-sided record (all wins) still has a small, non-zero variance.
EMPTY_CLASS_WEIGHT = 1e-3


def score_from_elo(elo: float) -> float:
    """Expected score of the side that is ``elo`` points stronger (logistic model)."""
    return 1.0 / (1.0 + 10.0 ** (-elo / 400.0))


def elo_from_score(score: float) -> float:
    """Elo difference implied by a mean score in [0, 1]; +-inf at 1 and 0."""
    if not 0.0 <= score <= 1.0:
        raise ValueError(f"score must be within [0, 1], got {score}")
    if score >= 1.0:
        return math.inf
    if score <= 0.0:
        return -math.inf
    return -400.0 * math.log10(1.0 / score - 1.0) + 0.0  # + 0.0: no "-0.0" at score 0.5


def _score(wins: float, draws: float, losses: float) -> tuple[float, float]:
    games = wins + draws + losses
    if games <= 0:
        raise ValueError("no games")
    if min(wins, draws, losses) < 0:
        raise ValueError("negative count")
    return games, (wins + 0.5 * draws) / games


def trinomial_variance(wins: float, draws: float, losses: float) -> float:
    """Variance of one game's score (1, 1/2, 0) under the observed win/draw/loss frequencies."""
    games, score = _score(wins, draws, losses)
    return (
        wins * (1.0 - score) ** 2 + draws * (0.5 - score) ** 2 + losses * (0.0 - score) ** 2
    ) / games


PAIR_POINTS = (0.0, 0.5, 1.0, 1.5, 2.0)  # a pair's points for its five outcomes


def pentanomial_variance(pairs: tuple[int, ...] | list[int]) -> float:
    """Variance of one pair's points (0, 1/2, 1, 3/2, 2: LL, LD, DD or WL, WD, WW) under the
    observed frequencies of the five outcomes."""
    if len(pairs) != len(PAIR_POINTS) or min(pairs) < 0:
        raise ValueError(f"pairs must be five non-negative counts, got {pairs}")
    count = sum(pairs)
    if count <= 0:
        raise ValueError("no pairs")
    mean = sum(n * p for n, p in zip(pairs, PAIR_POINTS, strict=True)) / count
    return sum(n * (p - mean) ** 2 for n, p in zip(pairs, PAIR_POINTS, strict=True)) / count


@dataclass(frozen=True, slots=True)
class EloEstimate:
    """Score and Elo difference of a match with their 95% confidence intervals."""

    games: int
    score: float
    score_low: float
    score_high: float
    elo: float
    elo_low: float
    elo_high: float
    pairs: int = 0  # game pairs the interval's variance counts (0: trinomial, every game alone)

    @property
    def error(self) -> float:
        """Half-width of the Elo interval (inf when a bound is unbounded)."""
        return (self.elo_high - self.elo_low) / 2.0


def elo_interval(
    wins: int,
    draws: int,
    losses: int,
    z: float = Z95,
    *,
    pairs: tuple[int, ...] | list[int] | None = None,
) -> EloEstimate:
    """Elo difference from win/draw/loss counts with a confidence interval (default 95%).

    Normal approximation on the mean score ``s`` of the N games: ``s +- z * sd``, clamped to
    [0, 1] and mapped to Elo (the mapping is monotonic). Unpaired, ``sd = sqrt(var / N)``
    with the trinomial variance of one game. With ``pairs`` (the counts of pairs that scored
    0, 1/2, 1, 3/2 and 2 points, each pair one opening played with the colours swapped;
    its games are among the counts), the P pairs are the independent units:
    ``sd = sqrt(P var_pair + U var_game) / N``, var_pair the pentanomial variance of a pair's
    points and U the games in no finished pair (an odd last game, a pair cut short), counted
    with the trinomial variance of all the games.
    """
    games, score = _score(wins, draws, losses)
    paired = 0 if pairs is None else sum(pairs)
    if pairs is not None and paired:
        unpaired = games - 2 * paired
        if unpaired < 0:
            raise ValueError(f"{paired} pairs hold more than the {games:g} games")
        variance_of_sum = paired * pentanomial_variance(pairs)
        if unpaired:
            variance_of_sum += unpaired * trinomial_variance(wins, draws, losses)
        half_width = z * math.sqrt(variance_of_sum) / games
    else:
        half_width = z * math.sqrt(trinomial_variance(wins, draws, losses) / games)
    units = paired + (games - 2 * paired) if pairs is not None and paired else games
    if units < 2:
        # One unit (a single pair, or game) has no spread to estimate: the variance above is
        # 0 and the interval had no width (0.75 (95% 0.75..0.75) from one pair). Unknown.
        half_width = math.inf
    low = min(max(score - half_width, 0.0), 1.0)
    high = min(max(score + half_width, 0.0), 1.0)
    if half_width == 0.0:
        low, high = unanimous_interval(score, units, z)
    return EloEstimate(
        games=int(games),
        score=score,
        score_low=low,
        score_high=high,
        elo=elo_from_score(score),
        elo_low=elo_from_score(low),
        elo_high=elo_from_score(high),
        pairs=paired,
    )


def unanimous_interval(score: float, units: float, z: float = Z95) -> tuple[float, float]:
    """The score's interval when each of ``units`` units (games, or pairs) scored ``score``.

    No spread was seen, so the normal approximation has no width; but a few units cannot
    show that none scores otherwise. The share ``q`` of units that do is bounded by Clopper
    & Pearson's exact binomial interval for an event seen 0 times in n (1934):
    ``q <= 1 - (alpha / 2) ** (1 / n)``, two-sided at the level of ``z`` (the "rule of
    three", 3 / n, is its one-sided 95% approximation). At worst those units score 0 or 1:
    ``[score (1 - q), score + q (1 - score)]``; with every game won, the exact
    Clopper-Pearson interval of n wins in n."""
    tail = 0.5 * math.erfc(z / math.sqrt(2.0))  # alpha / 2: P(Z > z)
    share = 1.0 - tail ** (1.0 / units)
    return score * (1.0 - share), score + share * (1.0 - score)


def sprt_bounds(alpha: float = 0.05, beta: float = 0.05) -> tuple[float, float]:
    """Wald's stopping bounds (lower, upper) on the log-likelihood ratio."""
    if not (0.0 < alpha < 1.0 and 0.0 < beta < 1.0):
        raise ValueError("alpha and beta must be within (0, 1)")
    return math.log(beta / (1.0 - alpha)), math.log((1.0 - beta) / alpha)


def sprt_llr(wins: int, draws: int, losses: int, elo0: float, elo1: float) -> float:
    """Log-likelihood ratio of H1 (elo = elo1) against H0 (elo = elo0), normal approximation.

    ``N (s1 - s0) (2 s - s0 - s1) / (2 var)`` where s, var are the mean and variance of one
    game's score, with an empty outcome class counted as 1e-3 games (fishtest's regularization).
    """
    if wins + draws + losses == 0:
        return 0.0
    counts = [float(c) if c > 0 else EMPTY_CLASS_WEIGHT for c in (wins, draws, losses)]
    games = float(wins + draws + losses)
    score0, score1 = score_from_elo(elo0), score_from_elo(elo1)
    _, score = _score(*counts)
    variance = trinomial_variance(*counts)
    if variance <= 0.0:
        return 0.0
    return games * (score1 - score0) * (2.0 * score - score0 - score1) / (2.0 * variance)


@dataclass(frozen=True, slots=True)
class SprtResult:
    """The state of an SPRT: the LLR, its bounds, and the verdict (None while undecided)."""

    elo0: float
    elo1: float
    alpha: float
    beta: float
    llr: float
    lower: float
    upper: float

    @property
    def verdict(self) -> str | None:
        """ "H1" once the LLR reaches the upper bound, "H0" at the lower one, else None."""
        if self.llr >= self.upper:
            return "H1"
        if self.llr <= self.lower:
            return "H0"
        return None

    def to_dict(self) -> dict[str, float | str | None]:
        return {
            "elo0": self.elo0,
            "elo1": self.elo1,
            "alpha": self.alpha,
            "beta": self.beta,
            "llr": self.llr,
            "lower": self.lower,
            "upper": self.upper,
            "verdict": self.verdict,
        }


def sprt(
    wins: int,
    draws: int,
    losses: int,
    elo0: float,
    elo1: float,
    alpha: float = 0.05,
    beta: float = 0.05,
) -> SprtResult:
    """Evaluate the SPRT of H0: elo = elo0 against H1: elo = elo1 on the results so far."""
    if elo1 <= elo0:
        raise ValueError(f"SPRT needs elo0 < elo1, got {elo0}, {elo1}")
    lower, upper = sprt_bounds(alpha, beta)
    return SprtResult(
        elo0=elo0,
        elo1=elo1,
        alpha=alpha,
        beta=beta,
        llr=sprt_llr(wins, draws, losses, elo0, elo1),
        lower=lower,
        upper=upper,
    )
