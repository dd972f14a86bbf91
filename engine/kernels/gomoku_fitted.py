"""The fitted gomoku evaluation's weights (alphabeta_mnk.fitted_eval), written by
bench/fit_gomoku_eval.py fit --data games.jsonl --ridge 1e-05: Texel
tuning (logistic regression of the game result) on 37404 quiet positions of
1500 self-play games. Row 0 the mover's, row 1 the opponent's, in 1/FIT_UNIT of an
evaluation unit (200 units a logit)."""

# fmt: off
FITTED_WEIGHTS = (
    0, -3, 18, 13, -183, -164, 119, 25621, 0, 0, 29596,
    29792, 566, 1774, 558, 383, 262, -11, 875, -1011, -91, 698,
    0, 4, -12, 17, 83, -95, -619, -2601, 0, 0, 1467,
    -1256, -47, -1050, -107, -297, -189, 555, 0, 0, 40, -253,
)
# fmt: on
