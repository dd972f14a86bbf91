"""`noughts export`: a game played on a real server, exported as JSON, SGF and SVG."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from client.export import ExportError, export, to_sgf, to_svg
from protocol import CreateGame, GetGame, JoinGame, Move, Resign
from tests.client.ui_support import UIServer

SVG = "{http://www.w3.org/2000/svg}"


async def play_humans(
    server: UIServer, game: str, actions: list[int], resign: bool = False
) -> dict[str, Any]:
    """Two real clients play ``actions`` (X first); returns the stored record."""
    ada, bob = await server.connect("ada"), await server.connect("bob")
    try:
        seated = await ada.request(CreateGame, game=game, opponent="human", seat=0)
        joined = await bob.request(JoinGame, game_id=seated.game_id)
        tokens = (seated.token, joined.token)
        players = (ada, bob)
        for ply, action in enumerate(actions):
            await players[ply % 2].request(
                Move, game_id=seated.game_id, token=tokens[ply % 2], action=action, ply=ply
            )
        if resign:
            seat = len(actions) % 2
            await players[seat].request(Resign, game_id=seated.game_id, token=tokens[seat])
        record = await ada.request(GetGame, game_id=seated.game_id)
        return record.game
    finally:
        await ada.close()
        await bob.close()


async def test_json_holds_every_stored_field(ui_server: UIServer) -> None:
    record = await play_humans(ui_server, "tictactoe", [4, 0, 8, 2, 1, 7, 6, 3, 5])
    data = json.loads(export(record, "json"))
    assert data == json.loads(json.dumps(record))  # nothing dropped, nothing added
    assert [m["action"] for m in data["moves"]] == [4, 0, 8, 2, 1, 7, 6, 3, 5]
    assert (data["result"], data["reason"]) == ("1/2-1/2", "draw")
    assert [p["name"] for p in data["players"]] == ["ada", "bob"]


async def test_sgf_of_a_won_gomoku_game(ui_server: UIServer) -> None:
    # X plays five in a row on row 7 (columns 3..7); O plays row 8.
    actions = []
    for i in range(5):
        actions.append(7 * 15 + 3 + i)
        if i < 4:
            actions.append(8 * 15 + 3 + i)
    record = await play_humans(ui_server, "gomoku", actions)
    sgf = to_sgf(record)
    assert sgf.startswith("(;FF[4]GM[4]CA[UTF-8]") and sgf.endswith(")\n")
    assert "SZ[15]" in sgf and "PB[ada]" in sgf and "PW[bob]" in sgf and "RE[B+]" in sgf
    moves = sgf[sgf.index(";B[") :].rstrip(")\n")
    assert moves == ";B[dh];W[di];B[eh];W[ei];B[fh];W[fi];B[gh];W[gi];B[hh]"


def sgf_root(text: str) -> dict[str, list[str]]:
    """The root node's properties of a one-game SGF collection, parsed by the FF[4] grammar
    (``"(" ";" (PropIdent ("[" value "]")+)* ...``), values unescaped (section 3.2)."""
    assert text.startswith("(;"), text
    properties: dict[str, list[str]] = {}
    i = 2
    while text[i] not in ";)":
        j = i
        while text[j].isupper():
            j += 1
        assert j > i and text[j] == "[", f"a property expected at {text[i:]!r}"
        values = []
        while text[j] == "[":
            j += 1
            value = []
            while text[j] != "]":
                j += text[j] == "\\"  # an escaped character is itself
                value.append(text[j])
                j += 1
            values.append("".join(value))
            j += 1
        assert text[i:j].split("[")[0] not in properties, "a property twice in a node"
        properties[text[i:j].split("[")[0]] = values
        i = j
    return properties


# FF[4] RE (red-bean.com/sgf/properties.html#RE): "0" or "Draw"; "B+" or "W+" with an
# optional score (none in games without one, as chess, or five in a row), or R(esign),
# T(ime), F(orfeit); "Void" for no result; "?" for an unknown result.
SGF_RESULT = re.compile(r"0|Draw|[BW]\+(|R|Resign|T|Time|F|Forfeit|\d+(\.\d+)?)|Void|\?")


async def test_sgf_results_are_written_as_the_sgf_spec_says(ui_server: UIServer) -> None:
    """A stored result this noughts does not know (a newer server's, a damaged row) was
    exported RE[W+]: White won, which nobody said. Every result now parses as FF[4]'s RE
    and says what the record does; an unknown one is "?"."""
    record = await play_humans(ui_server, "tictactoe", [4, 0, 8, 2, 1, 7, 6, 3, 5])
    expected = {
        ("1-0", "line"): "B+",  # five (three) in a row: a win with no score
        ("0-1", "line"): "W+",
        ("1-0", "resign"): "B+R",
        ("0-1", "flag"): "W+T",
        ("1-0", "abandoned"): "B+F",
        ("1/2-1/2", "draw"): "0",
        ("1/2-1/2", "agreement"): "0",
        ("1/2-1/2", "abandoned"): "0",
        ("*", "abort"): "Void",
        ("*", "engine_unavailable"): "Void",
        ("2-0", "line"): "?",
        ("1-0 ", "resign"): "?",
    }
    for (result, reason), re_value in expected.items():
        root = sgf_root(to_sgf({**record, "result": result, "reason": reason}))
        assert root["RE"] == [re_value], (result, reason)
        assert SGF_RESULT.fullmatch(root["RE"][0])
    live = sgf_root(to_sgf({**record, "result": None, "reason": None}))
    assert "RE" not in live
    named = {**record, "players": [{"name": "a]b\\c"}, {"name": "bob"}]}
    assert sgf_root(to_sgf(named))["PB"] == ["a]b\\c"]


async def test_sgf_of_a_rectangular_board_and_a_resignation(ui_server: UIServer) -> None:
    ada = await ui_server.connect("ada")
    bob = await ui_server.connect("bob")
    seated = await ada.request(
        CreateGame, game="mnk", params={"m": 4, "n": 6, "k": 4}, opponent="human", seat=0
    )
    joined = await bob.request(JoinGame, game_id=seated.game_id)
    await ada.request(Move, game_id=seated.game_id, token=seated.token, action=5, ply=0)
    await bob.request(Move, game_id=seated.game_id, token=joined.token, action=0, ply=1)
    await ada.request(Move, game_id=seated.game_id, token=seated.token, action=23, ply=2)
    await bob.request(Resign, game_id=seated.game_id, token=joined.token)
    record = (await ada.request(GetGame, game_id=seated.game_id)).game
    await ada.close()
    await bob.close()
    sgf = to_sgf(record)
    # 6 columns, 4 rows; action 5 is row 0, column 5 (f), 23 row 3, column 5; O resigned.
    assert "SZ[6:4]" in sgf and ";B[fa];W[aa];B[fd]" in sgf and "RE[B+R]" in sgf


async def test_svg_of_the_final_position_and_of_a_ply(ui_server: UIServer) -> None:
    record = await play_humans(ui_server, "tictactoe", [4, 0, 8, 2, 1, 7, 6, 3, 5])

    def pieces(svg: str) -> tuple[int, int]:
        root = ET.fromstring(svg)
        crosses = len(root.findall(f"{SVG}path"))
        noughts = len(root.findall(f"{SVG}circle"))
        return crosses, noughts

    assert pieces(to_svg(record)) == (5, 4)
    assert pieces(to_svg(record, ply=0)) == (0, 0)
    assert pieces(to_svg(record, ply=3)) == (2, 1)
    assert "move 3 of 9: X c1" in to_svg(record, ply=3)  # the move shown, in the notation
    # The cells labelled as the boards label them: columns a-c above, rows 3-1 down the side.
    labels = [t.text for t in ET.fromstring(to_svg(record)).findall(f"{SVG}text")]
    assert labels[:6] == ["a", "b", "c", "3", "2", "1"]
    with pytest.raises(ExportError, match=r"--ply must be 0\.\.9"):
        to_svg(record, ply=10)


async def test_uttt_exports_to_svg_but_not_sgf(ui_server: UIServer) -> None:
    record = await play_humans(ui_server, "uttt", [40, 36, 4], resign=True)
    root = ET.fromstring(to_svg(record))
    assert len(root.findall(f"{SVG}path")) == 2 and len(root.findall(f"{SVG}circle")) == 1
    labels = [t.text for t in root.findall(f"{SVG}text")]
    assert labels[:18] == [*"abcdefghi", *"987654321"]  # the 9x9 grid named as one board
    with pytest.raises(ExportError, match="uttt has no SGF form"):
        to_sgf(record)
    with pytest.raises(ExportError, match="--ply applies to --format svg only"):
        export(record, "json", ply=1)


def noughts(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "client", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "NOUGHTS_SERVER": ""},
    )


async def test_the_export_command(ui_server: UIServer, tmp_path: Path) -> None:
    record = await play_humans(ui_server, "5x5", [0, 5, 1, 6, 2, 7, 3])
    db = str(tmp_path / "games.db")  # the in-process server's database
    out = tmp_path / "game.sgf"
    done = await asyncio.to_thread(
        noughts, "export", record["id"], "--db", db, "--format", "sgf", "-o", str(out)
    )
    assert done.returncode == 0, done.stderr
    assert out.read_text() == to_sgf(record)

    svg = await asyncio.to_thread(
        noughts, "export", record["id"], "--db", db, "--format", "svg", "--ply", "2"
    )
    assert svg.returncode == 0, svg.stderr
    assert svg.stdout == to_svg(record, ply=2)

    unknown = await asyncio.to_thread(noughts, "export", "nosuchid", "--db", db)
    assert unknown.returncode == 1 and "nosuchid" in unknown.stderr
    assert "Traceback" not in unknown.stderr

    misuse = await asyncio.to_thread(
        noughts, "export", record["id"], "--db", db, "--format", "sgf", "--ply", "1"
    )
    assert misuse.returncode == 2 and "--ply applies to --format svg only" in misuse.stderr


def caption_fits(svg: str) -> str:
    """The caption's text, after checking that each of its lines fits the picture at 0.6 em
    a character (wider than a sans-serif font's average)."""
    root = ET.fromstring(svg)
    width = float(root.get("width", 0))
    lines = []
    for text in root.findall(f"{SVG}text"):
        line = text.text or ""
        right = float(text.get("x", 0)) + len(line) * 0.6 * float(text.get("font-size", 0))
        assert right <= width, (line, right, width)
        lines.append(line)
    return " / ".join(lines)


@pytest.mark.parametrize(
    ("game", "actions"),
    [("tictactoe", [4, 0, 8, 2, 1, 7, 6, 3, 5]), ("5x5", [0, 5, 1, 6, 2, 7, 3])],
)
async def test_svg_captions_fit_small_boards(
    ui_server: UIServer, game: str, actions: list[int]
) -> None:
    """Issue 12, defect 8: on 3x3 and 5x5 (180 and 260 px wide) the caption ran off the
    picture and the result never showed."""
    record = await play_humans(ui_server, game, actions)
    caption = caption_fits(to_svg(record))
    assert "X ada vs O bob" in caption and f"move {len(actions)} of {len(actions)}" in caption
    assert f"{record['result']} ({record['reason']})" in caption
    long_names = {**record, "players": [{"name": "x" * 32}, {"name": "o" * 32}]}
    assert "x" * 32 in caption_fits(to_svg(long_names))  # the picture widens for them
