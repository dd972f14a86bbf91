"""The fitted gomoku evaluation's weights (alphabeta_mnk.fitted_eval), written by
bench/fit_gomoku_eval.py fit --data games.jsonl --ridge 1e-05: Texel
tuning (logistic regression of the game result) on 37404 quiet positions of
1500 self-play games. Row 0 the mover's, row 1 the opponent's, in 1/FIT_UNIT of an
evaluation unit (200 units a logit)."""

# fmt: off
FITTED_WEIGHTS = (
    0, -3, -8, -71, -40, 225, 151, 25766, 0, 0,
    29289, 29801, 528, 1812, 537, 386, 259, -1255, 23790, -1087,
    0, 4, 4, 63, 75, -140, -538, -2416, 0, 0,
    1430, -1280, -41, -1048, -95, -294, -186, 1798, 0, 0,
)
# fmt: on
