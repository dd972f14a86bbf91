"""Coverage-guided fuzzing of the wire's trust boundary with atheris (run on demand).

Two targets, chosen with --target:
  decode   protocol.decode on arbitrary bytes: anything but a ProtocolError is a crash.
  game     decoded client messages driven into a live GameSession (the server's sans-I/O
           game state machine): anything but a ProtocolError or a ServerError is a crash,
           and the game's invariants (seq only grows, the position replays from its moves)
           must hold after every message.

    .venv/bin/pip install atheris          # not a project dependency: on demand only
    .venv/bin/python bench/fuzz_atheris.py --target decode -atheris_runs=200000
    .venv/bin/python bench/fuzz_atheris.py --target game -max_total_time=120

Options after the target go to libFuzzer (-runs, -max_total_time, a corpus directory...).
"""

from __future__ import annotations

import argparse
import sys

try:
    import atheris
except ModuleNotFoundError:
    sys.exit(
        "fuzz_atheris.py: atheris is not installed (an on-demand tool, not a project "
        "dependency): .venv/bin/pip install atheris"
    )

with atheris.instrument_imports():
    import msgpack

    import engine
    from protocol import Draw, Move, ProtocolError, Resign, decode
    from server.errors import ServerError
    from server.session import GameSession, Player


def fuzz_decode(data: bytes) -> None:
    try:
        decode(data)
    except ProtocolError:
        pass


def fuzz_game(data: bytes) -> None:
    """The first bytes choose a game; the rest is a stream of msgpack client messages."""
    provider = atheris.FuzzedDataProvider(data)
    name = provider.PickValueInList([n for n, g in engine.GAMES.items() if not g.parameters])
    session = GameSession.new(name, {}, 0.0)
    session.take_seat(0, Player("a", "human", "p-a"))
    session.take_seat(1, Player("b", "human", "p-b"))
    session.start(0.0)
    tokens = [session.tokens[0] or "", session.tokens[1] or ""]
    unpacker = msgpack.Unpacker(raw=False, strict_map_key=True, max_buffer_size=1 << 16)
    unpacker.feed(provider.ConsumeBytes(provider.remaining_bytes()))
    now = 1.0
    try:
        items = list(unpacker)
    except (ValueError, TypeError):
        return
    for item in items:
        try:
            message = decode(msgpack.packb(item, use_bin_type=True))
        except (ProtocolError, ValueError, TypeError, OverflowError):
            continue
        seq = session.seq
        player = {tokens[0]: "p-a", tokens[1]: "p-b"}
        try:
            if isinstance(message, Move):
                seat = session.authorize(message.token, player.get(message.token))
                session.play(seat, message.action, now, ply=message.ply)
            elif isinstance(message, Resign):
                session.resign(session.authorize(message.token, player.get(message.token)), now)
            elif isinstance(message, Draw):
                seat = session.authorize(message.token, player.get(message.token))
                session.draw(seat, message.answer, now)
        except ServerError:
            assert session.seq == seq, "a refused request changed the game"
        now += 1.0
        assert session.seq >= seq
        replayed = engine.replay(session.game, session.state.history())
        assert replayed.history() == session.state.history()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--target", choices=("decode", "game"), default="decode")
    args, rest = parser.parse_known_args()
    target = fuzz_decode if args.target == "decode" else fuzz_game
    atheris.Setup([sys.argv[0], *rest], target)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
