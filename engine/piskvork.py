"""The Piskvork protocol (the Gomocup managers' brain protocol) as a pure state machine.

Sans-I/O, as h11 does it: ``PiskvorkBrain.feed(line)`` takes one line from the manager and
returns what to do: lines to print, and at most one ``Think`` (search this position within
this time); the I/O layer (client/commands/brain.py) runs the search and hands the result to
``played``, which returns the lines of the move. No clock and no search here.

Commands (https://plastovicka.github.io/protocl2en.htm): START N, RECTSTART W,H, RESTART,
BEGIN, TURN X,Y, BOARD ... DONE, TAKEBACK X,Y, PLAY X,Y, INFO KEY VALUE, ABOUT, END, and
Gomocup's SWAP2BOARD ... DONE for the swap2 opening rule (below). TAKEBACK undoes the last
move (the last stone given, BOARD's in its order): the manager names that stone, and a
TAKEBACK of any other cell is an ``ERROR``, the board unchanged. Coordinates are
X (column), Y (row), 0-based; a cell is ``Y * width + X`` in the engine. The brain plays
freestyle gomoku (five or more in a row wins; the engine's m,n,k games count k or more) on
boards of MIN_SIZE..MAX_SIZE a side; other rules (INFO rule with the exactly-five, renju or
caro bit) and sizes get an ``ERROR`` line, unknown commands ``UNKNOWN``.

Swap2 (RenjuNet's opening rule, as Gomocup's managers ask it: SWAP2BOARD, the stones one
"X,Y" a line, black first and alternating, DONE). With 0 stones the brain opens: it answers
three stones (black, white, black), the opening of OPENINGS that its searches find nearest
to even for white to move. With 3 or 5 stones it chooses a colour: it searches the position
for white, the side to move, and stays white with that move when the search's value is >= 0,
else answers ``SWAP`` (it takes black, and the opponent plays white's move). It never places
two more stones at 3 (swap2's third option); that is the opponent's choice to make.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.errors import EngineError
from engine.games import make_game
from engine.mnk import MNKGame, MNKState
from engine.result import SearchResult
from engine.think import Think
from engine.time_control import TimeControl

__all__ = [
    "MAX_SIZE",
    "MIN_SIZE",
    "PiskvorkBrain",
    "Think",
    "TimeControl",
]

MIN_SIZE, MAX_SIZE = 15, 20  # Gomocup plays 15x15 and 20x20
FIVE = 5
# INFO rule bits: 1 exactly five wins, 2 continuous game, 4 renju, 8 caro (blocked fives
# do not win). Freestyle is 0; "continuous game" changes nothing for a brain's move.
RULE_EXACT_FIVE, RULE_CONTINUOUS, RULE_RENJU, RULE_CARO = 1, 2, 4, 8
UNSUPPORTED_RULES = {
    RULE_EXACT_FIVE: "exactly five",
    RULE_RENJU: "renju",
    RULE_CARO: "caro",
}
OWN, OPPONENT = 1, 2  # BOARD's third field (3 = a winning line in continuous games)
MAX_LINE = 1024  # a longer line is not a command
SWAP2_STONES = (0, 3, 5)  # the stones of a SWAP2BOARD: open, choose after 3, choose after 5
# The brain's swap2 openings (0 stones), as (column, row) offsets from the centre: black,
# white, black. Varied shapes near the centre; the brain's searches pick the most even.
OPENINGS = (
    ((0, 0), (1, 1), (2, -2)),
    ((0, 0), (0, 1), (3, 1)),
    ((0, 0), (1, 0), (-2, 3)),
    ((0, 0), (1, 1), (-3, 1)),
    ((0, 0), (2, 0), (0, 3)),
    ((0, 0), (-1, 1), (3, -2)),
)


Reply = str | Think


@dataclass(slots=True)
class _Swap2:
    """A SWAP2BOARD being answered: the stones given (3 or 5), or, with none given, the
    openings to weigh and the values found so far (for white to move, one per opening)."""

    given: list[int]
    openings: list[tuple[int, ...]]  # black, white, black
    values: list[float]


class PiskvorkBrain:
    """One brain's protocol state: the board, the rule, the time control.

    ``feed`` one line at a time; a ``Think`` in its answer must be followed by ``played``
    before the next line. ``ended`` is True after END."""

    # Managers time START's OK too (a few seconds), and compiling the search into an empty
    # numba cache takes 30-60 s: OK is answered at once and the I/O layer warms up meanwhile.
    WARM_UP_FIRST = False
    first_answer_warm_ms = 0.0  # (START's OK needs no search: it waits for nothing)
    # No quick move: a search asked for while the warm-up runs waits for it (its answer late
    # rather than an ERROR line and no move; ``noughts brain </dev/null`` fills the cache).
    QUICK_MOVE = False
    # Never: a line it cannot read is answered ERROR or UNKNOWN, as the protocol asks, and the
    # brain goes on (CodinGame's protocol has no such reply: its bot ends, unreadable).
    unreadable = False

    def __init__(self, *, about: str = 'name="noughts"') -> None:
        self.about = about
        self.time = TimeControl()
        self.rule = 0
        self.game: MNKGame | None = None
        self.stones: list[tuple[int, int]] = []  # (cell, OWN or OPPONENT), in the order given
        self.board_lines: list[tuple[int, int]] | None = None  # inside BOARD ... DONE
        self.swap2_lines: list[int] | None = None  # inside SWAP2BOARD ... DONE
        self.block_error: str | None = None  # the first wrong line of the block, said at DONE
        self.swap2: _Swap2 | None = None  # a SWAP2BOARD answer in progress
        self.thinking: MNKState | None = None
        self.ended = False
        self.games = 0  # games started: a new game key for the search after each START

    # --- the manager's lines ----------------------------------------------------------------
    def feed(self, line: str) -> list[Reply]:
        """The replies to one line from the manager."""
        if self.thinking is not None:
            raise EngineError("a Think is pending: call played() first")
        text = line.strip()
        if len(text) > MAX_LINE:
            return ["ERROR line too long"]
        if self.board_lines is not None:
            return self._board_line(text)
        if self.swap2_lines is not None:
            return self._swap2_line(text)
        if not text:
            return []
        word, _, rest = text.partition(" ")
        command = word.upper()
        rest = rest.strip()
        handler = _COMMANDS.get(command)
        if handler is None:
            return [f"UNKNOWN command {_show(word)}"]
        if command in _AFTER_START and self.game is None:
            return [f"ERROR {command} before START"]
        return handler(self, rest)

    def played(self, result: SearchResult) -> list[Reply]:
        """Record the search of the last ``Think``: the brain's lines, or (while a SWAP2BOARD
        weighs its openings) the next ``Think``."""
        if self.thinking is None:
            raise EngineError("played() without a pending Think")
        self.thinking = None
        if self.swap2 is not None:
            return self._swap2_played(result)
        self.stones.append((result.action, OWN))
        return [f"MESSAGE {_summary(result)}", self._coordinates(result.action)]

    def cancel(self, reason: str = "") -> list[Reply]:
        """The search of the last ``Think`` failed (``reason``): no move was played; the lines
        that say so."""
        self.thinking = None
        self.swap2 = None
        return [f"ERROR {reason}"] if reason else []

    # --- commands -------------------------------------------------------------------------------
    def _start(self, rest: str) -> list[Reply]:
        size = _integer(rest)
        if size is None:
            return [f"ERROR START takes a board size, not {_show(rest)}"]
        return self._new_game(size, size)

    def _rectstart(self, rest: str) -> list[Reply]:
        parts = rest.split(",")
        sizes = [_integer(part) for part in parts] if len(parts) == 2 else []
        if len(sizes) != 2 or None in sizes:
            return [f"ERROR RECTSTART takes WIDTH,HEIGHT, not {_show(rest)}"]
        width, height = sizes
        assert width is not None and height is not None  # for mypy: checked above
        return self._new_game(width, height)

    def _new_game(self, width: int, height: int) -> list[Reply]:
        if not (MIN_SIZE <= width <= MAX_SIZE and MIN_SIZE <= height <= MAX_SIZE):
            self.game = None
            return [
                f"ERROR unsupported size {width}x{height}: this brain plays boards of "
                f"{MIN_SIZE} to {MAX_SIZE} a side"
            ]
        if width == height == 15:
            game = make_game("gomoku")
        else:
            game = make_game("mnk", m=height, n=width, k=FIVE)
        assert isinstance(game, MNKGame)  # the registry builds m,n,k games for both
        self.game = game
        self._clear()
        return ["OK"]

    def _restart(self, rest: str) -> list[Reply]:
        self._clear()
        return ["OK"]

    def _clear(self) -> None:
        self.stones = []
        self.board_lines = None
        self.swap2_lines = None
        self.games += 1

    def _begin(self, rest: str) -> list[Reply]:
        if self.stones:
            return ["ERROR BEGIN on a board that is not empty"]
        return self._think()

    def _turn(self, rest: str) -> list[Reply]:
        cell = self._cell(rest)
        if isinstance(cell, str):
            return [f"ERROR {cell}"]
        self.stones.append((cell, OPPONENT))
        replies = self._think()
        if replies and isinstance(replies[0], str) and replies[0].startswith("ERROR"):
            self.stones.pop()  # not taken: the manager may send another
        return replies

    def _board(self, rest: str) -> list[Reply]:
        self.board_lines, self.block_error = [], None
        return []

    def _board_line(self, text: str) -> list[Reply]:
        """One line of BOARD ... DONE. A wrong line is answered at DONE, the lines between
        read and dropped (answered at once, the rest of the block was read as commands:
        an UNKNOWN line each, and the manager out of step)."""
        assert self.board_lines is not None  # in BOARD mode
        if text.upper() == "DONE":
            lines, self.board_lines = self.board_lines, None
            wrong, self.block_error = self.block_error, None
            repeated = wrong or self._repeated("BOARD", [cell for cell, _ in lines])
            if repeated:
                return [f"ERROR {repeated}"]
            self.stones = lines
            return self._think()
        if self.block_error is not None:
            return []
        parts = text.split(",")
        if len(parts) != 3:
            self.block_error = f"a BOARD line is X,Y,WHO, not {_show(text)}"
            return []
        where = self._cell(",".join(parts[:2]), occupied_ok=True)
        who = _integer(parts[2])
        if isinstance(where, str) or who not in (1, 2, 3):
            self.block_error = (
                where if isinstance(where, str) else f"WHO is 1, 2 or 3, not {_show(parts[2])}"
            )
            return []
        assert self.game is not None  # BOARD comes after START (feed)
        if len(self.board_lines) >= self.game.cells:  # a manager's lines, or a runaway pipe
            self.block_error = f"BOARD holds more stones than the board's {self.game.cells} cells"
            return []
        # 3: a stone of a winning line in a continuous game; this brain plays freestyle.
        self.board_lines.append((where, OWN if who == 1 else OPPONENT))
        return []

    def _takeback(self, rest: str) -> list[Reply]:
        """TAKEBACK X,Y: undo the last move, whose stone the manager names; any other cell is
        an ERROR and the board stays as it was."""
        cell = self._cell(rest, occupied_ok=True)
        if isinstance(cell, str):
            return [f"ERROR {cell}"]
        if all(stone != cell for stone, _ in self.stones):
            return [f"ERROR TAKEBACK of an empty cell {self._coordinates(cell)}"]
        last = self.stones[-1][0]
        if cell != last:
            return [
                f"ERROR TAKEBACK undoes the last stone, {self._coordinates(last)}, not "
                f"{self._coordinates(cell)}"
            ]
        self.stones.pop()
        return ["OK"]

    def _play(self, rest: str) -> list[Reply]:
        """PLAY X,Y: the manager's move for the brain; the brain plays it and echoes it."""
        cell = self._cell(rest)
        if isinstance(cell, str):
            return [f"ERROR {cell}"]
        state = self._rule_error() or self.position()
        if isinstance(state, str):
            return [f"ERROR {state}"]
        self.stones.append((cell, OWN))
        return [self._coordinates(cell)]

    def _swap2board(self, rest: str) -> list[Reply]:
        self.swap2_lines, self.block_error = [], None
        return []

    def _swap2_line(self, text: str) -> list[Reply]:
        """One line of SWAP2BOARD ... DONE; a wrong line is answered at DONE, as BOARD's."""
        assert self.swap2_lines is not None  # in SWAP2BOARD mode
        if text.upper() == "DONE":
            cells, self.swap2_lines = self.swap2_lines, None
            wrong, self.block_error = self.block_error, None
            return [f"ERROR {wrong}"] if wrong else self._swap2_done(cells)
        if self.block_error is not None:
            return []
        cell = self._cell(text, occupied_ok=True)
        if isinstance(cell, str):
            self.block_error = cell
            return []
        if len(self.swap2_lines) >= max(SWAP2_STONES):
            most = max(SWAP2_STONES)
            self.block_error = f"SWAP2BOARD takes 0, 3 or 5 stones (swap2), not {most + 1}"
            return []
        self.swap2_lines.append(cell)
        return []

    def _swap2_done(self, cells: list[int]) -> list[Reply]:
        """The stones of a SWAP2BOARD: a Think for the first search of its answer."""
        refused = self._rule_error() or self._repeated("SWAP2BOARD", cells)
        if refused:
            return [f"ERROR {refused}"]
        if len(cells) not in SWAP2_STONES:
            return [f"ERROR SWAP2BOARD takes 0, 3 or 5 stones (swap2), not {len(cells)}"]
        if cells:
            self.swap2 = _Swap2(cells, [], [])
            return self._swap2_think(cells, self.time.budget_ms(len(cells)))
        assert self.game is not None  # SWAP2BOARD comes after START (feed)
        cx, cy = self.game.n // 2, self.game.m // 2
        openings = [
            tuple((cy + dy) * self.game.n + cx + dx for dx, dy in shape) for shape in OPENINGS
        ]
        self.swap2 = _Swap2([], openings, [])
        return self._swap2_think(list(openings[0]), self._opening_ms())

    def _opening_ms(self) -> float:
        return max(TimeControl.MIN_MS, self.time.budget_ms(0) / len(OPENINGS))

    def _swap2_think(self, cells: list[int], time_ms: float) -> list[Reply]:
        assert self.game is not None  # SWAP2BOARD comes after START (feed)
        state = self.game.new_initial_state()
        for cell in cells:
            state.apply_action(cell)  # 5 stones or fewer: never five in a row
        self.thinking = state
        return [Think(state, time_ms)]

    def _swap2_played(self, result: SearchResult) -> list[Reply]:
        """One search of a SWAP2BOARD done (its value is white's, white to move): the next
        search of the openings, or the answer and the stones as they now belong."""
        swap2 = self.swap2
        assert swap2 is not None  # played() checks it
        if not swap2.given:
            swap2.values.append(result.value)
            if len(swap2.values) < len(swap2.openings):
                return self._swap2_think(
                    list(swap2.openings[len(swap2.values)]), self._opening_ms()
                )
            self.swap2 = None
            best = min(range(len(swap2.values)), key=lambda index: abs(swap2.values[index]))
            black, white, black2 = swap2.openings[best]
            # If the opponent stays white it plays on with TURN: the black stones are ours.
            self.stones = [(black, OWN), (white, OPPONENT), (black2, OWN)]
            return [
                f"MESSAGE swap2 opening {best + 1} of {len(swap2.values)}: value for white "
                f"{swap2.values[best]:+.2f}",
                " ".join(self._coordinates(cell) for cell in (black, white, black2)),
            ]
        self.swap2 = None
        white = result.value >= 0.0  # the colour the search prefers
        self.stones = [(cell, OWN if (index % 2 == 1) == white else OPPONENT)
                       for index, cell in enumerate(swap2.given)]  # fmt: skip
        if white:
            self.stones.append((result.action, OWN))
            return [f"MESSAGE {_summary(result)}", self._coordinates(result.action)]
        return [f"MESSAGE {_summary(result)}; swap2: black", "SWAP"]

    def _info(self, rest: str) -> list[Reply]:
        key, _, value = rest.partition(" ")
        key = key.lower()
        number: int | None = _integer(value)
        if key in ("timeout_turn", "timeout_match", "time_left", "max_memory", "rule"):
            if number is None or number < 0:
                return [f"ERROR INFO {key} takes a number >= 0, not {_show(value)}"]
        if key == "timeout_turn":
            self.time.timeout_turn = number  # type: ignore[assignment]
        elif key == "timeout_match":
            self.time.timeout_match = number  # type: ignore[assignment]
        elif key == "time_left":
            self.time.time_left = number
        elif key == "rule":
            assert number is not None  # checked above
            self.rule = number
            names = [name for bit, name in UNSUPPORTED_RULES.items() if number & bit]
            if names:
                return [f"ERROR unsupported rule {number} ({', '.join(names)}): this brain "
                        "plays freestyle (five or more in a row wins)"]  # fmt: skip
        # max_memory: the brain's tables are fixed (about 40 MB on 20x20); game_type,
        # evaluate, folder and unknown keys are ignored, as the protocol asks.
        return []

    def _about(self, rest: str) -> list[Reply]:
        return [self.about]

    def _end(self, rest: str) -> list[Reply]:
        self.ended = True
        return []

    # --- helpers --------------------------------------------------------------------------------
    def _rule_error(self) -> str:
        """Why the brain cannot play under INFO rule, or ""."""
        if self.rule & (RULE_EXACT_FIVE | RULE_RENJU | RULE_CARO):
            return f"unsupported rule {self.rule}: this brain plays freestyle"
        return ""

    def _repeated(self, command: str, cells: list[int]) -> str:
        """Why ``cells`` cannot be a position (a cell twice), or ""."""
        seen: set[int] = set()
        for cell in cells:
            if cell in seen:
                return f"{command} repeats the stone at {self._coordinates(cell)}"
            seen.add(cell)
        return ""

    def _think(self) -> list[Reply]:
        """The position from the stones, the brain to move, as a Think; or an ERROR."""
        state = self._rule_error() or self.position()
        if isinstance(state, str):
            return [f"ERROR {state}"]
        self.thinking = state
        return [Think(state, self.time.budget_ms(len(self.stones)))]

    def position(self) -> MNKState | str:
        """The stones as a game (moves alternating, the brain to move next), or why not."""
        assert self.game is not None  # its commands come after START (feed)
        own = [cell for cell, who in self.stones if who == OWN]
        theirs = [cell for cell, who in self.stones if who == OPPONENT]
        if len(theirs) == len(own):
            first, second = own, theirs
        elif len(theirs) == len(own) + 1:
            first, second = theirs, own
        else:
            return (
                f"cannot move with {len(own)} own and {len(theirs)} opponent stones (the brain "
                "moves with as many stones as the opponent, or one fewer)"
            )
        state = self.game.new_initial_state()
        for index in range(len(first) + len(second)):
            cell = (first if index % 2 == 0 else second)[index // 2]
            if state.is_terminal():
                return "the game is over: " + (
                    "five in a row on the board" if state.winner() is not None else "board full"
                )
            state.apply_action(cell)
        if state.is_terminal():
            return "the game is over: " + (
                "five in a row on the board" if state.winner() is not None else "board full"
            )
        return state

    def _cell(self, text: str, *, occupied_ok: bool = False) -> int | str:
        """The cell of "X,Y", or why it is not a free cell of the board."""
        assert self.game is not None  # its commands come after START (feed)
        parts = text.split(",")
        coordinates = [_integer(part) for part in parts] if len(parts) == 2 else []
        if len(coordinates) != 2 or None in coordinates:
            return f"a move is X,Y, not {_show(text)}"
        x, y = coordinates
        assert x is not None and y is not None  # checked above
        width, height = self.game.n, self.game.m
        if not (0 <= x < width and 0 <= y < height):
            return f"{x},{y} is off the {width}x{height} board"
        cell = y * width + x
        if not occupied_ok and any(c == cell for c, _ in self.stones):
            return f"{x},{y} is occupied"
        return cell

    def _coordinates(self, cell: int) -> str:
        assert self.game is not None  # a move implies a game
        y, x = divmod(cell, self.game.n)
        return f"{x},{y}"


_COMMANDS = {
    "START": PiskvorkBrain._start,
    "RECTSTART": PiskvorkBrain._rectstart,
    "RESTART": PiskvorkBrain._restart,
    "BEGIN": PiskvorkBrain._begin,
    "TURN": PiskvorkBrain._turn,
    "BOARD": PiskvorkBrain._board,
    "TAKEBACK": PiskvorkBrain._takeback,
    "PLAY": PiskvorkBrain._play,
    "SWAP2BOARD": PiskvorkBrain._swap2board,
    "INFO": PiskvorkBrain._info,
    "ABOUT": PiskvorkBrain._about,
    "END": PiskvorkBrain._end,
}

# The commands that need the board START (or RECTSTART) set up.
_AFTER_START = frozenset(("RESTART", "BEGIN", "TURN", "BOARD", "TAKEBACK", "PLAY", "SWAP2BOARD"))


def _integer(text: str) -> int | None:
    text = text.strip()
    if not text or len(text) > 12 or not text.isdigit() or not text.isascii():
        return None
    return int(text)


def _show(text: str) -> str:
    """Text from the manager, quoted and cut short for an error line."""
    text = text.strip()
    return repr(text[:40] + ("..." if len(text) > 40 else ""))


def _summary(result: SearchResult) -> str:
    proven = f" proven {result.proven}" if result.proven else ""
    return (
        f"{result.algorithm} depth {result.depth or 0} value {result.value:+.2f}{proven} "
        f"{result.iterations} nodes in {result.elapsed_ms:.0f} ms"
    )
