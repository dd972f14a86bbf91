"""A stored game (the ``record`` of PROTOCOL.md's ``get``) as JSON, SGF or an SVG picture.

Pure functions: a record in, text out. SGF (FF[4]) covers the m,n,k games, written as
Gomoku (GM[4]) with X as Black, since X moves first; SVG draws the position after
any ply with the pieces, the last move and a winning line marked, its cells labelled as
the notation names them (engine/notation.py).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any
from xml.sax.saxutils import escape

import engine
from client.replay import RecordError, checked_game
from protocol.version import software_version

FORMATS = ("json", "sgf", "svg")


class ExportError(Exception):
    """The record cannot be exported as asked (a format the game has no form in, a bad ply)."""


def _checked_game(record: dict[str, Any]) -> engine.Game:
    """The record's game, its moves checked by the rules (client/replay.py); ExportError
    if they are not its moves: a picture or an SGF of them would be false."""
    try:
        return checked_game(record)
    except RecordError as exc:
        raise ExportError(f"{exc} (--format json holds it as stored)") from exc


def to_json(record: dict[str, Any]) -> str:
    """Every stored field, keys sorted, for programs."""
    return json.dumps(record, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def _sgf_text(value: str) -> str:
    """An SGF text value: backslash and ']' escaped (FF[4], section 3.2)."""
    return value.replace("\\", "\\\\").replace("]", "\\]")


def _sgf_result(record: dict[str, Any]) -> str | None:
    """The record's result as FF[4]'s RE (red-bean.com/sgf/properties.html#RE): "0" a draw,
    "Void" no result, "B+"/"W+" a win, with R(esign), T(ime) or F(orfeit) for how, and no
    score for five in a row (the score is optional: "some games don't have a score");
    "?" for a result this noughts does not know (a newer server's, a damaged row), never a
    winner it would make up. None: the game is not over."""
    result, reason = record.get("result"), record.get("reason")
    if not result:
        return None
    if result == "1/2-1/2":
        return "0"
    if result == "*":
        return "Void"
    colour = {"1-0": "B", "0-1": "W"}.get(result)
    if colour is None:
        return "?"
    how = {"resign": "R", "flag": "T", "abandoned": "F"}.get(reason or "", "")
    return f"{colour}+{how}"


def to_sgf(record: dict[str, Any]) -> str:
    """The game as SGF: GM[4], SZ (columns:rows when not square), players, result, moves."""
    name = record["game"]
    game = _checked_game(record)
    if not isinstance(game, engine.MNKGame):
        raise ExportError(
            f"SGF describes m,n,k games; {name} has no SGF form: use --format json or svg"
        )
    m, n, k = game.m, game.n, game.k
    if max(m, n) > 52:
        raise ExportError("SGF coordinates reach 52 columns and rows")
    size = f"{n}" if m == n else f"{n}:{m}"
    players = record.get("players") or [None, None]
    props = [
        "FF[4]",
        "GM[4]",
        "CA[UTF-8]",
        f"AP[noughts:{software_version()}]",
        f"SZ[{size}]",
        f"GN[{_sgf_text(str(record.get('id', '')))}]",
        f"C[{_sgf_text(f'{m},{n},{k} game: {k} in a row wins; X plays Black, O White')}]",
    ]
    for prop, player in (("PB", players[0]), ("PW", players[1])):
        if player:
            props.append(f"{prop}[{_sgf_text(str(player.get('name', '')))}]")
    created = record.get("created_at")
    if created:
        props.append(f"DT[{datetime.fromtimestamp(created, UTC):%Y-%m-%d}]")
    result = _sgf_result(record)
    if result:
        props.append(f"RE[{result}]")
    letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
    moves = []
    for move in record.get("moves", []):
        row, col = divmod(move["action"], n)
        moves.append(f";{'BW'[move['seat']]}[{letters[col]}{letters[row]}]")
    return "(;" + "".join(props) + "".join(moves) + ")\n"


X_COLOUR, O_COLOUR = "#1f77b4", "#d9541e"
CELL = 40
MARGIN = 30


CAPTION_FONT, CAPTION_LINE, CAPTION_SIDE = 14, 20, 10  # px
# No font metrics here: 0.6 em a character is wider than sans-serif's average (about
# 0.55 em), so a line this long fits the picture.
CAPTION_CHAR = 0.6 * CAPTION_FONT


def _text_width(line: str) -> int:
    """The picture's width that holds ``line`` with its side margins."""
    return round(len(line) * CAPTION_CHAR) + 2 * CAPTION_SIDE


def _caption_lines(record: dict[str, Any], ply: int, width: int) -> list[str]:
    """Who played, the move shown and the result, joined by " · " where they fit in
    ``width`` and on lines of their own where they do not (a 3x3 picture is 180 px)."""
    moves = record.get("moves", [])
    players = record.get("players") or [None, None]
    names = [str((p or {}).get("name", "?")) for p in players]
    shown = f"move {ply} of {len(moves)}"
    if ply:
        game = engine.make_game(record["game"], **record.get("params", {}))
        shown += f": {'XO'[moves[ply - 1]['seat']]} {game.grid.name(moves[ply - 1]['action'])}"
    parts = [f"X {names[0]} vs O {names[1]}", shown]
    if ply == len(moves) and record.get("result"):
        parts.append(f"{record['result']} ({record.get('reason')})")
    lines = [parts[0]]
    for part in parts[1:]:
        joined = f"{lines[-1]} · {part}"
        if _text_width(joined) <= width:
            lines[-1] = joined
        else:
            lines.append(part)
    return lines


def to_svg(record: dict[str, Any], ply: int | None = None) -> str:
    """The position after ``ply`` moves (default: the final one) as an SVG picture."""
    moves = record.get("moves", [])
    if ply is None:
        ply = len(moves)
    game = _checked_game(record)
    if not 0 <= ply <= len(moves):
        raise ExportError(f"--ply must be 0..{len(moves)} for this game of {len(moves)} moves")
    state = engine.replay(game, [m["action"] for m in moves[:ply]])
    last = moves[ply - 1]["action"] if ply else None
    grid = game.grid
    rows, cols = grid.rows, grid.cols
    cell = CELL if max(rows, cols) <= 9 else 28
    caption = _caption_lines(record, ply, cols * cell + 2 * MARGIN)
    width = max(cols * cell + 2 * MARGIN, *(_text_width(line) for line in caption))
    height = rows * cell + 2 * MARGIN + CAPTION_LINE * len(caption)
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif">',
        f'<rect width="{width}" height="{height}" fill="#fdfaf3"/>',
    ]

    def xy(action: int) -> tuple[int, int]:
        """Top-left corner of an action's cell."""
        r, c = grid.cell(action)
        return MARGIN + c * cell, MARGIN + r * cell

    # The cells' names (engine/notation.py): column letters above, row numbers on the left.
    for c in range(cols):
        out.append(
            f'<text x="{MARGIN + c * cell + cell / 2}" y="{MARGIN - 9}" font-size="12" '
            f'text-anchor="middle" fill="#777">{grid.column_label(c)}</text>'
        )
    for r in range(rows):
        out.append(
            f'<text x="{MARGIN - 6}" y="{MARGIN + r * cell + cell / 2 + 4}" font-size="12" '
            f'text-anchor="end" fill="#777">{grid.row_label(r)}</text>'
        )

    line = set(state.winning_line() or ())
    if isinstance(state, engine.UTTTState):
        macro = state.board_winners()
        playable = set(state.allowed_boards()) if not state.is_terminal() else set()
        for b in range(9):
            x0, y0 = MARGIN + (b % 3) * 3 * cell, MARGIN + (b // 3) * 3 * cell
            fill = {0: "#dcebf7", 1: "#f9e0d6", 2: "#e6e6e6"}.get(macro[b])
            if fill is None and b in playable:
                fill = "#fff3b0"
            if fill:
                side = 3 * cell
                out.append(
                    f'<rect x="{x0}" y="{y0}" width="{side}" height="{side}" fill="{fill}"/>'
                )
    for action in ([last] if last is not None else []) + sorted(line):
        x, y = xy(action)
        colour = "#b7e4b0" if action in line else "#f5e27a"
        out.append(f'<rect x="{x}" y="{y}" width="{cell}" height="{cell}" fill="{colour}"/>')
    for i in range(cols + 1):
        thick = isinstance(state, engine.UTTTState) and i % 3 == 0
        x = MARGIN + i * cell
        out.append(
            f'<line x1="{x}" y1="{MARGIN}" x2="{x}" y2="{MARGIN + rows * cell}" '
            f'stroke="#444" stroke-width="{3 if thick else 1}"/>'
        )
    for i in range(rows + 1):
        thick = isinstance(state, engine.UTTTState) and i % 3 == 0
        y = MARGIN + i * cell
        out.append(
            f'<line x1="{MARGIN}" y1="{y}" x2="{MARGIN + cols * cell}" y2="{y}" '
            f'stroke="#444" stroke-width="{3 if thick else 1}"/>'
        )
    pad = cell * 0.22
    board: list[int] = state.board  # type: ignore[attr-defined]
    for action, value in enumerate(board):
        if value < 0:
            continue
        x, y = xy(action)
        if value == 0:
            out.append(
                f'<path d="M{x + pad} {y + pad}L{x + cell - pad} {y + cell - pad}'
                f'M{x + cell - pad} {y + pad}L{x + pad} {y + cell - pad}" '
                f'stroke="{X_COLOUR}" stroke-width="{max(2, cell // 12)}" stroke-linecap="round"/>'
            )
        else:
            out.append(
                f'<circle cx="{x + cell / 2}" cy="{y + cell / 2}" r="{cell / 2 - pad}" '
                f'fill="none" stroke="{O_COLOUR}" stroke-width="{max(2, cell // 12)}"/>'
            )
    top = rows * cell + 2 * MARGIN
    for i, text in enumerate(caption):
        y = top + CAPTION_LINE * i + CAPTION_FONT
        out.append(
            f'<text x="{CAPTION_SIDE}" y="{y}" font-size="{CAPTION_FONT}" fill="#333">'
            f"{escape(text)}</text>"
        )
    out.append("</svg>")
    return "\n".join(out) + "\n"


def export(record: dict[str, Any], fmt: str, ply: int | None = None) -> str:
    """The record in ``fmt`` (json, sgf or svg); ``ply`` only for svg."""
    if fmt not in FORMATS:
        raise ExportError(f"unknown format {fmt!r}: choose one of {', '.join(FORMATS)}")
    if ply is not None and fmt != "svg":
        raise ExportError("--ply applies to --format svg only (json and sgf hold every move)")
    if fmt == "json":
        return to_json(record)
    if fmt == "sgf":
        return to_sgf(record)
    return to_svg(record, ply)
