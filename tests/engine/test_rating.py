"""engine.rating: Elo from a score, its interval, and the SPRT, on known values."""

from __future__ import annotations

import math

import pytest

from engine.rating import (
    elo_from_score,
    elo_interval,
    pentanomial_variance,
    score_from_elo,
    sprt,
    sprt_bounds,
    sprt_llr,
    trinomial_variance,
)


def test_even_score_is_zero_elo() -> None:
    assert elo_from_score(0.5) == 0.0
    assert elo_interval(10, 0, 10).elo == 0.0
    assert elo_interval(0, 20, 0).elo == 0.0


def test_known_scores() -> None:
    assert elo_from_score(0.75) == pytest.approx(190.85, abs=0.01)
    assert elo_from_score(0.25) == pytest.approx(-190.85, abs=0.01)
    assert elo_from_score(10 / 11) == pytest.approx(400.0)  # 10:1 odds = 400 points
    assert elo_from_score(1.0) == math.inf
    assert elo_from_score(0.0) == -math.inf


def test_score_and_elo_are_inverse() -> None:
    for elo in (-600.0, -35.5, 0.0, 12.0, 400.0):
        assert elo_from_score(score_from_elo(elo)) == pytest.approx(elo)


def test_bad_scores_are_rejected() -> None:
    with pytest.raises(ValueError):
        elo_from_score(1.5)
    with pytest.raises(ValueError):
        elo_interval(0, 0, 0)


def test_trinomial_variance() -> None:
    assert trinomial_variance(1, 0, 1) == pytest.approx(0.25)  # half wins, half losses
    assert trinomial_variance(0, 5, 0) == 0.0  # all draws
    assert trinomial_variance(1, 2, 1) == pytest.approx(0.125)  # draws halve it


def test_interval_known_value_and_shape() -> None:
    estimate = elo_interval(75, 0, 25)
    # s = 0.75, sd of the mean = sqrt(0.1875 / 100), 95%: s +- 1.96 * 0.0433
    assert estimate.score == 0.75
    assert estimate.score_low == pytest.approx(0.75 - 1.959964 * math.sqrt(0.1875 / 100))
    assert estimate.elo == pytest.approx(190.85, abs=0.01)
    assert estimate.elo_low < estimate.elo < estimate.elo_high


def test_pentanomial_interval_by_hand() -> None:
    """10 pairs, each one opening with the colours swapped: 1 scored 1/2 point (LD), 6 one
    point (WL: each side won with the same colour), 1 one and a half (WD), 2 two (WW); A's
    games: 11 wins, 2 draws, 7 losses, score 0.6.
    Pair points' mean 1.2, variance (0.7^2 + 6 * 0.2^2 + 0.3^2 + 2 * 0.8^2) / 10 = 0.21;
    sd of the score sqrt(10 * 0.21) / 20 = 0.0724569, 95%: 0.6 +- 0.142013.
    Counted as 20 independent games (trinomial): variance (11 * 0.4^2 + 2 * 0.1^2 +
    7 * 0.6^2) / 20 = 0.215, sd sqrt(0.215 / 20) = 0.103682, 95%: 0.6 +- 0.203214: the
    colour-decided pairs (WL) are less luck than two loose games."""
    pairs = [0, 1, 6, 1, 2]
    assert pentanomial_variance(pairs) == pytest.approx(0.21)
    paired = elo_interval(11, 2, 7, pairs=pairs)
    assert paired.pairs == 10 and paired.score == pytest.approx(0.6)
    assert paired.score_low == pytest.approx(0.457987, abs=1e-6)
    assert paired.score_high == pytest.approx(0.742013, abs=1e-6)
    alone = elo_interval(11, 2, 7)
    assert alone.pairs == 0
    assert alone.score_low == pytest.approx(0.396786, abs=1e-6)
    assert alone.score_high == pytest.approx(0.803214, abs=1e-6)
    assert elo_interval(11, 2, 7, pairs=[0, 0, 0, 0, 0]) == alone  # no pair yet: trinomial
    # Only colour decided: every pair won by each side with one colour, a score of exactly
    # 0.5 in each, where 10 wins and 10 losses alone would look like a coin's luck. (No
    # spread in 10 pairs is not certainty: test_a_unanimous_match_has_an_exact_interval.)
    assert 0 < elo_interval(10, 0, 10, pairs=[0, 0, 10, 0, 0]).error < elo_interval(10, 0, 10).error
    assert elo_interval(10, 0, 10).error > 100


def test_pentanomial_interval_counts_the_games_left_over_alone() -> None:
    """An odd last game (a win) outside the 10 pairs: its trinomial variance is added."""
    wins, draws, losses = 12, 2, 7
    games, score = 21, 13 / 21
    single = (wins * (1 - score) ** 2 + draws * (0.5 - score) ** 2 + losses * score**2) / games
    half = 1.959963984540054 * math.sqrt(10 * 0.21 + single) / games
    estimate = elo_interval(wins, draws, losses, pairs=[0, 1, 6, 1, 2])
    assert estimate.score_low == pytest.approx(score - half)
    with pytest.raises(ValueError):
        elo_interval(3, 0, 0, pairs=[0, 0, 0, 0, 2])  # 2 pairs are 4 games
    with pytest.raises(ValueError):
        pentanomial_variance([1, 2, 3])


def test_interval_shrinks_with_more_games() -> None:
    widths = [elo_interval(6 * n, 2 * n, 2 * n).error for n in (1, 10, 100, 1000)]
    assert widths == sorted(widths, reverse=True)
    assert widths[-1] < widths[0] / 20  # ~ 1 / sqrt(N)


def test_draws_narrow_the_interval() -> None:
    decisive = elo_interval(60, 0, 40)
    drawish = elo_interval(30, 60, 10)  # same score, 0.6
    assert decisive.score == drawish.score
    assert drawish.error < decisive.error


def test_all_wins_is_unbounded() -> None:
    estimate = elo_interval(20, 0, 0)
    assert estimate.score == 1.0 and estimate.elo == math.inf


def test_wald_bounds() -> None:
    lower, upper = sprt_bounds(0.05, 0.05)
    assert lower == pytest.approx(-2.944, abs=1e-3)
    assert upper == pytest.approx(2.944, abs=1e-3)
    assert sprt_bounds(0.05, 0.1) == pytest.approx((math.log(0.1 / 0.95), math.log(0.9 / 0.05)))


def test_llr_known_value() -> None:
    # 50-20-30: s = 0.6, var = 0.5 * 0.4^2 + 0.2 * 0.1^2 + 0.3 * 0.6^2 = 0.19; elo0 0, elo1 50
    s0, s1 = 0.5, score_from_elo(50.0)
    expected = 100 * (s1 - s0) * (2 * 0.6 - s0 - s1) / (2 * 0.19)
    assert sprt_llr(50, 20, 30, 0.0, 50.0) == pytest.approx(expected)


def test_sprt_accepts_h1_for_a_lopsided_sequence() -> None:
    assert sprt(90, 15, 15, 0.0, 10.0).verdict == "H1"
    assert sprt(20, 0, 0, 0.0, 10.0).verdict == "H1"  # no draws or losses: regularized


def test_sprt_accepts_h0_for_an_even_match() -> None:
    assert sprt(2000, 4000, 2000, 0.0, 10.0).verdict == "H0"


def test_sprt_undecided_early() -> None:
    result = sprt(3, 2, 2, 0.0, 10.0)
    assert result.verdict is None
    assert result.lower < result.llr < result.upper
    assert result.to_dict()["verdict"] is None


def test_sprt_llr_grows_with_evidence() -> None:
    llrs = [sprt_llr(6 * n, 2 * n, 2 * n, 0.0, 20.0) for n in (1, 2, 4, 8)]
    assert llrs == sorted(llrs) and llrs[0] > 0


def test_sprt_needs_ordered_hypotheses() -> None:
    with pytest.raises(ValueError):
        sprt(1, 1, 1, 10.0, 0.0)


def test_one_pair_or_one_game_has_an_unknown_interval() -> None:
    """A walk's finding: one pair (or one game) has no spread to estimate, and the interval
    had no width: "score 0.7500 (95% 0.7500..0.7500)". It is now the whole range."""
    one_pair = elo_interval(1, 1, 0, pairs=[0, 0, 0, 1, 0])
    assert (one_pair.score_low, one_pair.score_high) == (0.0, 1.0)
    assert one_pair.error == math.inf
    one_game = elo_interval(0, 1, 0)
    assert (one_game.score_low, one_game.score_high) == (0.0, 1.0)


def test_a_unanimous_match_has_an_exact_interval() -> None:
    """Every unit (game, or pair) with the same result has no spread to estimate, and
    the interval had no width from two units on: "score 1.0000 (95% 1.0000..1.0000)" from 3
    wins, Elo 0 (95% 0 .. 0) from 10 pairs that each side won with one colour. The share of
    units that could score otherwise is now bounded as Clopper & Pearson's exact interval
    bounds an event seen 0 times in n (two-sided 95%: 1 - 0.025 ** (1 / n)), and the score
    moves by that share, at worst."""
    share = {n: 1.0 - 0.025 ** (1.0 / n) for n in (3, 10, 20)}
    wins = elo_interval(20, 0, 0)  # 20 games
    assert (wins.score_low, wins.score_high) == (pytest.approx(1.0 - share[20]), 1.0)
    assert wins.score_low == pytest.approx(0.831567, abs=1e-6)
    assert math.isfinite(wins.elo_low) and wins.elo_high == math.inf
    losses = elo_interval(0, 0, 3)  # 3 games
    assert (losses.score_low, losses.score_high) == (0.0, pytest.approx(share[3]))
    draws = elo_interval(0, 10, 0)  # 10 draws: 0.5 each
    assert draws.score_low == pytest.approx(0.5 - 0.5 * share[10])
    assert draws.score_high == pytest.approx(0.5 + 0.5 * share[10])
    # Pairs are the units: 10 pairs won twice are 10 units, not 20 games.
    paired = elo_interval(20, 0, 0, pairs=[0, 0, 0, 0, 10])
    assert paired.score_low == pytest.approx(1.0 - share[10])
    coloured = elo_interval(10, 0, 10, pairs=[0, 0, 10, 0, 0])
    assert coloured.score_low == pytest.approx(0.5 - 0.5 * share[10])
    assert coloured.score_high == pytest.approx(0.5 + 0.5 * share[10])
    three_halves = elo_interval(10, 10, 0, pairs=[0, 0, 0, 10, 0])  # WD in each: 0.75
    assert three_halves.score_low == pytest.approx(0.75 - 0.75 * share[10])
    assert three_halves.score_high == pytest.approx(0.75 + 0.25 * share[10])
    # More units, a narrower interval; one unit is still the whole range.
    widths = [elo_interval(0, n, 0).score_high - elo_interval(0, n, 0).score_low
              for n in (2, 10, 100)]  # fmt: skip
    assert widths == sorted(widths, reverse=True) and widths[-1] > 0
    assert (elo_interval(0, 1, 0).score_low, elo_interval(0, 1, 0).score_high) == (0.0, 1.0)
