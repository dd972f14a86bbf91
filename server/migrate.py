"""`python -m server.migrate` (also `noughts migrate`): bring a database's schema up to date.

Opening a store migrates it (SQLite and PostgreSQL share one numbered sequence of schema
versions); this command does only that, for operators who upgrade the schema before they
start the new servers, as a deploy step.
"""

from __future__ import annotations

import argparse
import asyncio
import sys


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="noughts migrate",
        description="Create or upgrade the schema of a noughts database, then exit.",
    )
    parser.add_argument(
        "--db",
        default=None,
        help="a SQLite file or a postgresql:// URL (default: $NOUGHTS_DB or noughts.db in "
        "your user data directory)",
    )
    return parser


async def run(db: str) -> int:
    from server.__main__ import open_store
    from server.errors import ServerError

    store = open_store(db)
    try:
        await store.open()
    except ServerError as exc:
        print(f"noughts migrate: {exc}", file=sys.stderr)
        return 1
    await store.close()
    print(f"{store.describe()}: schema up to date")
    return 0


def main(argv: list[str] | None = None) -> int:
    import os

    from server.store import default_db_path

    args = build_parser().parse_args(argv)
    db = args.db or os.environ.get("NOUGHTS_DB") or str(default_db_path())
    return asyncio.run(run(db))


if __name__ == "__main__":
    sys.exit(main())
